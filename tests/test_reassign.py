import collections
import itertools

import numpy as np
import pytest
import scipy.sparse as sp
from numba import njit
from numba.np.random.random_methods import random_interval
from scipy.special import gammaln

from conjoined._legacy_stream import legacy_generator
from conjoined.datasets import make_marques_like
from conjoined.reassign import TokenCounts, _paper_code_pass, collapsed_log_probability, reassign_tokens

HYPER = {"a_r": 0.5, "a_c": 0.5, "lam": 0.5}


def _key(counts):
    return tuple(np.concatenate([np.asarray(a).ravel() for a in counts]))


def _exact_posterior(X, n_row_topics, n_col_topics, a_r, a_c, lam):
    """Distribution of (n_kl, n_ik, n_jl) under the collapsed posterior, by enumerating every cell allocation.

    P(allocation) ∝ prod_cells multinomial(c; m) * prod_kl Gamma(n_kl + lam)
                    * prod_k [prod_i Gamma(n_ik + a_r) / Gamma(n_k + n_R a_r)] * (same for columns).
    """
    X = np.asarray(X)
    n_rows, n_cols = X.shape
    cells = [(i, j, int(X[i, j])) for i in range(n_rows) for j in range(n_cols) if X[i, j] > 0]
    n_pairs = n_row_topics * n_col_topics
    choices = [list(itertools.combinations_with_replacement(range(n_pairs), c)) for _, _, c in cells]
    weights = collections.defaultdict(float)
    for allocation in itertools.product(*choices):
        n_kl = np.zeros((n_row_topics, n_col_topics), dtype=int)
        n_ik = np.zeros((n_rows, n_row_topics), dtype=int)
        n_jl = np.zeros((n_cols, n_col_topics), dtype=int)
        log_p = 0.0
        for (i, j, c), pairs in zip(cells, allocation):
            log_p += gammaln(c + 1) - sum(gammaln(m + 1) for m in collections.Counter(pairs).values())
            for pair in pairs:
                k, l = divmod(pair, n_col_topics)
                n_kl[k, l] += 1
                n_ik[i, k] += 1
                n_jl[j, l] += 1
        log_p += (
            gammaln(n_kl + lam).sum()
            + gammaln(n_ik + a_r).sum()
            - gammaln(n_ik.sum(axis=0) + n_rows * a_r).sum()
            + gammaln(n_jl + a_c).sum()
            - gammaln(n_jl.sum(axis=0) + n_cols * a_c).sum()
        )
        weights[_key((n_kl, n_ik, n_jl))] += np.exp(log_p)
    total = sum(weights.values())
    return {key: w / total for key, w in weights.items()}


def _empirical(X, n_sweeps, hyper, init, seed):
    seen = collections.Counter()
    X = np.asarray(X)
    reassign_tokens(
        X,
        np.zeros(X.shape[0], int),
        np.zeros(X.shape[1], int),
        2,
        2,
        **hyper,
        n_sweeps=n_sweeps,
        init=init,
        random_state=seed,
        callback=lambda sweep, counts: seen.update([_key(counts)]),
    )
    return {key: n / n_sweeps for key, n in seen.items()}


def _total_variation(p, q):
    return 0.5 * sum(abs(p.get(key, 0.0) - q.get(key, 0.0)) for key in set(p) | set(q))


@pytest.mark.parametrize(
    "X, hyper, init",
    [
        # only single tokens: the plain Gibbs path
        ([[1, 1], [0, 1]], {"a_r": 0.5, "a_c": 0.5, "lam": 0.5}, "random"),
        # a cell with 2 tokens: the Metropolis-Hastings block path next to single tokens
        ([[2, 1], [0, 1]], {"a_r": 0.3, "a_c": 1.0, "lam": 2.0}, "labels"),
        # one cell with 4 tokens: the block path alone (proposals ignore the cell's own tokens entirely); with
        # as many tokens as pairs, the cell is updated on its tally (multinomial proposal by binomials)
        ([[4]], {"a_r": 0.5, "a_c": 0.5, "lam": 0.5}, "labels"),
        # a cell updated on its tally next to single tokens, and before a cell of the per-token block path (whose
        # scratch tallies the tally path must leave at zero)
        ([[5, 1], [0, 1]], {"a_r": 0.4, "a_c": 0.7, "lam": 1.5}, "random"),
        ([[4, 2]], {"a_r": 0.5, "a_c": 0.5, "lam": 0.5}, "random"),
    ],
)
def test_gibbs_sampler_matches_the_enumerated_collapsed_posterior(X, hyper, init):
    # With the proposal accepted always instead of by the MH ratio, the TV distance is 0.30-0.47 on the last two.
    exact = _exact_posterior(X, 2, 2, **hyper)
    empirical = _empirical(X, 40_000, hyper, init, seed=3)
    assert _total_variation(exact, empirical) <= 0.05


def test_collapsed_log_probability_differs_between_allocations_like_the_formula():
    a = TokenCounts(np.array([[3, 0], [0, 1]]), np.array([[3, 0], [0, 1]]), np.array([[2, 0], [1, 1]]))
    b = TokenCounts(np.array([[2, 1], [0, 1]]), np.array([[3, 0], [0, 1]]), np.array([[2, 0], [0, 2]]))

    def by_hand(c):
        return (
            gammaln(c.n_kl + 0.5).sum()
            + gammaln(c.n_ik + 0.5).sum()
            - gammaln(c.n_ik.sum(0) + 2 * 0.5).sum()
            + gammaln(c.n_jl + 0.5).sum()
            - gammaln(c.n_jl.sum(0) + 2 * 0.5).sum()
        )

    difference = collapsed_log_probability(a, **HYPER) - collapsed_log_probability(b, **HYPER)
    assert difference == pytest.approx(by_hand(a) - by_hand(b))


def _random_counts(seed, shape=(40, 30), density=0.3, mean=3.0):
    rng = np.random.default_rng(seed)
    mask = rng.random(shape) < density
    return np.where(mask, rng.poisson(mean, shape), 0)


@pytest.mark.parametrize("method", ["gibbs", "paper-code"])
@pytest.mark.parametrize("init", ["labels", "random"])
def test_counts_are_consistent_with_the_matrix(method, init):
    X = _random_counts(0)
    rng = np.random.default_rng(1)
    rows, cols = rng.integers(0, 3, X.shape[0]), rng.integers(0, 4, X.shape[1])
    counts = reassign_tokens(
        X, rows, cols, 3, 4, **HYPER, n_sweeps=3, method=method, init=init, random_state=0
    )
    assert counts.n_kl.shape == (3, 4) and counts.n_ik.shape == (40, 3) and counts.n_jl.shape == (30, 4)
    assert all(a.dtype == np.int64 for a in counts)
    np.testing.assert_array_equal(counts.n_ik.sum(axis=1), X.sum(axis=1))
    np.testing.assert_array_equal(counts.n_jl.sum(axis=1), X.sum(axis=0))
    np.testing.assert_array_equal(counts.n_kl.sum(axis=1), counts.n_ik.sum(axis=0))
    np.testing.assert_array_equal(counts.n_kl.sum(axis=0), counts.n_jl.sum(axis=0))


def test_label_start_without_sweeps_puts_every_token_at_its_labels():
    X = np.array([[2, 0, 1], [0, 3, 1], [4, 1, 0]])
    counts = reassign_tokens(X, [0, 1, 1], [1, 0, 0], 2, 2, **HYPER, n_sweeps=0)
    np.testing.assert_array_equal(counts.n_kl, [[1, 2], [5, 4]])
    np.testing.assert_array_equal(counts.n_ik, [[3, 0], [0, 4], [0, 5]])
    np.testing.assert_array_equal(counts.n_jl, [[0, 6], [4, 0], [2, 0]])


def test_rows_and_columns_set_aside_carry_no_tokens():
    X = _random_counts(2, shape=(10, 8), density=0.8)
    rows = np.array([0, 1, -1, 0, 1, 0, 1, -1, 0, 1])
    cols = np.array([0, 1, 0, -1, 1, 0, 1, 0])
    counts = reassign_tokens(X, rows, cols, 2, 2, **HYPER, n_sweeps=5, random_state=0)
    assert counts.n_ik[rows < 0].sum() == 0 and counts.n_jl[cols < 0].sum() == 0
    assert counts.n_kl.sum() == X[np.ix_(rows >= 0, cols >= 0)].sum()


def test_same_seed_same_counts_and_sparse_equals_dense():
    X = _random_counts(3)
    rows, cols = np.arange(40) % 3, np.arange(30) % 2
    args = (rows, cols, 3, 2)
    kwargs = dict(**HYPER, n_sweeps=4, init="random")
    first = reassign_tokens(X, *args, **kwargs, random_state=7)
    again = reassign_tokens(sp.csr_matrix(X), *args, **kwargs, random_state=7)
    generator = reassign_tokens(X, *args, **kwargs, random_state=np.random.default_rng(7))
    other = reassign_tokens(X, *args, **kwargs, random_state=8)
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(first.n_ik, other.n_ik)
    assert generator.n_kl.sum() == X.sum()


def test_many_pairs():
    X = _random_counts(4, shape=(12, 10))
    counts = reassign_tokens(
        X, np.arange(12) % 200, np.arange(10), 200, 200, **HYPER, n_sweeps=2, random_state=0
    )
    assert counts.n_kl.shape == (200, 200) and counts.n_kl.sum() == X.sum()


def test_callback_sees_every_sweep_with_copies():
    X = _random_counts(5, shape=(6, 5))
    seen = []
    final = reassign_tokens(
        X,
        np.zeros(6, int),
        np.zeros(5, int),
        2,
        2,
        **HYPER,
        n_sweeps=3,
        random_state=0,
        callback=lambda sweep, counts: seen.append((sweep, counts)),
    )
    assert [sweep for sweep, _ in seen] == [0, 1, 2]
    np.testing.assert_array_equal(seen[-1][1].n_ik, final.n_ik)
    assert seen[0][1].n_ik is not final.n_ik


def test_averaged_counts_are_the_means_of_the_last_sweeps_allocations():
    X = _random_counts(6, shape=(8, 7))
    seen = []
    arguments = dict(X=X, row_labels=np.arange(8) % 2, column_labels=np.arange(7) % 2, n_row_clusters=2,
                     n_column_clusters=2, **HYPER, n_sweeps=6, random_state=4)
    mean = reassign_tokens(**arguments, n_average=4, callback=lambda sweep, counts: seen.append(counts))
    for average, draws in zip(mean, zip(*seen[2:])):
        assert average.dtype == np.float64
        np.testing.assert_allclose(average, np.mean(draws, axis=0))
    last = reassign_tokens(**arguments, n_average=1)
    np.testing.assert_array_equal(last.n_ik, reassign_tokens(**arguments).n_ik)


def test_paper_code_pass_draws_row_topics_from_the_column_and_column_topics_from_the_row():
    """The authors' pass, from the labels: X = [[2, 1], [1, 0]], rows and columns in clusters (0, 1). Column 0's
    tokens have row topics (0, 0, 1) and row 0's tokens column topics (0, 0, 1); the others have one token each.
    So the token at (0, 1) goes to row topic 0 (column 1 has no other token: it keeps its own) and column topic 0
    (row 0's others), the token at (1, 0) to (0, 0) likewise, and each of the two tokens at (0, 0) takes row topic
    1 and column topic 1 with probability 1/2 each, independently."""
    X = np.array([[2, 1], [1, 0]])
    tally = collections.Counter()
    n_draws = 4000
    for seed in range(n_draws):
        counts = reassign_tokens(X, [0, 1], [0, 1], 2, 2, **HYPER, n_sweeps=1, method="paper-code",
                                 random_state=seed)
        np.testing.assert_array_equal(counts.n_ik[1], [1, 0])
        np.testing.assert_array_equal(counts.n_jl[1], [1, 0])
        tally[int(counts.n_ik[0, 1]), int(counts.n_jl[0, 1])] += 1
    binomial = {0: 0.25, 1: 0.5, 2: 0.25}
    for (row_moved, column_moved), share in tally.items():
        assert share / n_draws == pytest.approx(binomial[row_moved] * binomial[column_moved], abs=0.025)
    assert len(tally) == 9


def test_paper_code_draw_leaves_the_token_out():
    # One cell with three tokens with row topics (0, 0, 1), one column topic: the token of topic 1 must move to 0,
    # each token of topic 0 moves to 1 with probability 1/2, so n_0 after the pass is 1 + Binomial(2, 1/2).
    indptr, indices = np.array([0, 1]), np.array([0])
    cell_counts, offsets = np.array([3]), np.array([0, 3])
    tally = collections.Counter()
    n_draws = 4000
    for seed in range(n_draws):
        pairs = np.array([0, 0, 1], dtype=np.int32)
        _paper_code_pass(indptr, indices, cell_counts, offsets, pairs, 1, 2, 1, legacy_generator(seed))
        assert pairs[2] == 0
        tally[int((pairs == 0).sum())] += 1
    for n_zero, probability in ((1, 0.25), (2, 0.5), (3, 0.25)):
        assert tally[n_zero] / n_draws == pytest.approx(probability, abs=0.03)


@njit
def _seed_numba_stream(seed):
    np.random.seed(seed)


@njit
def _numba_stream_draws(n):
    """n draws of numba's global stream, as a user's jitted code makes them: uniforms, binomials, Poissons."""
    out = np.empty(3 * n)
    for t in range(n):
        out[3 * t] = np.random.random()
        out[3 * t + 1] = np.random.binomial(5 + t % 60, 0.3 + 0.4 * (t % 2))  # n min(p, 1 - p) <= 30: inversion
        out[3 * t + 2] = np.random.poisson(2.5 + 40 * (t % 2))
    return out


@njit
def _numba_uniforms(n):
    return np.array([np.random.random() for _ in range(n)])


@njit
def _generator_draws(rng, n):
    out = np.empty(3 * n)
    for t in range(n):
        out[3 * t] = rng.random()
        out[3 * t + 1] = rng.binomial(5 + t % 60, 0.3 + 0.4 * (t % 2))
        out[3 * t + 2] = rng.poisson(2.5 + 40 * (t % 2))
    return out


@njit
def _numba_stream_integers(n, high):
    return np.array([np.random.randint(0, high) for _ in range(n)])


@njit
def _generator_integers(rng, n, high):
    return np.array([np.int64(random_interval(rng.bit_generator, high - 1)) for _ in range(n)])


@pytest.mark.parametrize("seed", [0, 1, 2**31 - 2])
def test_legacy_generator_draws_what_numbas_global_stream_drew_after_the_same_seed(seed):
    # what keeps a seed's reassignment and make_marques_like's matrices (but where its gamma draws run) as they
    # were before the kernels took a Generator; binomials of n min(p, 1 - p) > 30 depend on numba's version
    # (conjoined._legacy_stream)
    _seed_numba_stream(seed)
    np.testing.assert_array_equal(_generator_draws(legacy_generator(seed), 500), _numba_stream_draws(500))
    _seed_numba_stream(seed)
    np.testing.assert_array_equal(_generator_integers(legacy_generator(seed), 500, 37),
                                  _numba_stream_integers(500, 37))


@pytest.mark.parametrize("draw", [
    lambda: reassign_tokens(np.array([[3, 9, 1], [0, 12, 2]]), [0, 1], [0, 1, 1], 2, 2, **HYPER, n_sweeps=2,
                            random_state=0),
    lambda: reassign_tokens(np.array([[3, 9, 1], [0, 12, 2]]), [0, 1], [0, 1, 1], 2, 2, **HYPER, n_sweeps=2,
                            method="paper-code", random_state=0),
    lambda: make_marques_like(60, 30, n_row_clusters=3, n_col_clusters=3, random_state=0),
], ids=["gibbs", "paper-code", "make_marques_like"])
def test_kernels_that_draw_leave_numbas_global_stream_alone(draw):
    # a user's own jitted code draws from numba's global stream (one per thread): a fit must not reseed it
    _seed_numba_stream(11)
    expected = _numba_uniforms(6)
    _seed_numba_stream(11)
    first = _numba_uniforms(3)
    draw()
    np.testing.assert_array_equal(np.concatenate([first, _numba_uniforms(3)]), expected)


@pytest.mark.parametrize(
    "change, message",
    [
        ({"row_labels": [0, 1, 2]}, "row_labels must be a 1-d array"),
        ({"row_labels": [0, 1, 5, 0]}, r"row_labels must lie in 0..1.*row_labels\[2\] = 5"),
        ({"column_labels": [0, -2, 0]}, "column_labels must lie in"),
        ({"column_labels": [0.5, 0, 0]}, "column_labels must hold integers"),
        ({"n_row_clusters": 0}, "n_row_clusters must be an integer >= 1"),
        ({"a_r": 0.0}, "a_r must be > 0"),
        ({"lam": -1.0}, "lam must be > 0"),
        ({"a_c": np.nan}, "a_c must be a finite number"),
        ({"n_sweeps": -1}, "n_sweeps must be an integer >= 0"),
        ({"n_average": 2}, "n_average must be at most n_sweeps = 1, got 2"),
        ({"n_average": -1}, "n_average must be an integer >= 0"),
        ({"method": "exact"}, "method must be one of"),
        ({"init": "kmeans"}, "init must be one of"),
        ({"callback": 3}, "callback must be callable"),
        ({"X": [[1, -1, 0], [0, 0, 0], [1, 1, 1], [0, 2, 0]]}, "negative"),
        ({"X": [[1, 0.5, 0], [0, 0, 0], [1, 1, 1], [0, 2, 0]]}, "non-integer"),
        ({"X": np.ones((4, 3)) * 2.0**60},
         r"X holds 13,835,058,055,282,163,712 counts in total; at most 2\*\*53 = 9,007,199,254,740,992 are"),
        ({"X": np.ones((4, 3)) * 1e300}, r"X holds 1.2e\+301 counts in total; at most 2\*\*53"),
    ],
)
def test_bad_input_raises_a_named_value_error(change, message):
    arguments = dict(
        X=np.ones((4, 3)),
        row_labels=[0, 1, 1, 0],
        column_labels=[0, 1, 0],
        n_row_clusters=2,
        n_column_clusters=2,
        **HYPER,
        n_sweeps=1,
        random_state=0,
    )
    arguments.update(change)
    X = arguments.pop("X")
    with pytest.raises(ValueError, match=message):
        reassign_tokens(X, **arguments)
