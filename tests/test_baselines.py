"""Baselines of the paper's comparison: each recovers what its own model plants; Bimax matches brute force."""

import itertools
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.utils.estimator_checks import parametrize_with_checks

from conjoined.baselines._preprocess import preprocess
from conjoined.baselines.bimax import Bimax
from conjoined.baselines.cheng_church import ChengChurch
from conjoined.baselines.dt2b import DT2B
from conjoined.baselines.plaid import Plaid
from conjoined.baselines.spectral import Spectral
from conjoined.metrics import jaccard_score


def truth(shape, blocks):
    """Boolean (rows, columns) of blocks given as (row slice, column slice)."""
    rows = np.zeros((len(blocks), shape[0]), dtype=bool)
    columns = np.zeros((len(blocks), shape[1]), dtype=bool)
    for b, (r, c) in enumerate(blocks):
        rows[b, r] = True
        columns[b, c] = True
    return rows, columns


def as_sets(rows, columns):
    return [(tuple(np.flatnonzero(r)), tuple(np.flatnonzero(c))) for r, c in zip(rows, columns, strict=True)]


def additive_block(rng, n_rows, n_cols, noise=0.1):
    """Row effect + column effect + small noise: mean squared residue about noise**2."""
    row_effect = rng.normal(0, 1, n_rows)[:, None]
    column_effect = rng.normal(0, 1, n_cols)[None, :]
    return row_effect + column_effect + rng.normal(0, noise, (n_rows, n_cols))


# --- preprocessing ---

def test_preprocess_methods_exact_values():
    X = np.array([[0, 1, 2], [3, 0, 7], [1, 1, 1]])
    original = X.copy()
    np.testing.assert_allclose(preprocess(X, None), X)
    np.testing.assert_allclose(preprocess(X, "log1p"), np.log1p(X))
    standardized = preprocess(X, "standardize")
    np.testing.assert_allclose(standardized.mean(axis=0), 0, atol=1e-12)
    np.testing.assert_allclose(standardized.std(axis=0, ddof=1), 1)
    # default cut 1.0 on the log1p scale = what BCBimax(log(X + 1)) keeps: counts >= 2
    np.testing.assert_array_equal(preprocess(X, "binarize"), (X >= 2).astype(float))
    np.testing.assert_array_equal(preprocess(X, "binarize", threshold="median"), (X > 1).astype(float))
    np.testing.assert_array_equal(X, original)


def test_preprocess_constant_column_sparse_input_and_errors():
    X = np.array([[1.0, 5.0], [3.0, 5.0], [2.0, 5.0]])
    np.testing.assert_array_equal(preprocess(X, "standardize")[:, 1], 0.0)
    dense = preprocess(sp.csr_matrix(X), "log1p")
    assert isinstance(dense, np.ndarray)
    np.testing.assert_allclose(dense, np.log1p(X))
    with pytest.raises(ValueError, match="non-negative"):
        preprocess(-X, "log1p")
    with pytest.raises(ValueError, match="preprocess must be one of"):
        preprocess(X, "sqrt")
    with pytest.raises(ValueError, match="threshold"):
        preprocess(X, "binarize", threshold="mode")


# --- Bimax ---

def brute_force_maximal(B, min_rows, min_cols):
    """Every closed (rows, columns) pair of ones: rows = rows with ones on all columns and vice versa."""
    found = set()
    for k in range(min_cols, B.shape[1] + 1):
        for columns in itertools.combinations(range(B.shape[1]), k):
            rows = tuple(np.flatnonzero(B[:, columns].all(axis=1)))
            if len(rows) >= min_rows and tuple(np.flatnonzero(B[list(rows)].all(axis=0))) == columns:
                found.add((rows, columns))
    return found


def test_bimax_equals_brute_force_on_random_binary_matrices():
    rng = np.random.default_rng(0)
    n_checked = 0
    for _ in range(300):
        n_rows, n_cols = rng.integers(1, 8, size=2)
        B = (rng.random((n_rows, n_cols)) < rng.uniform(0.2, 0.9)).astype(int)
        min_rows, min_cols = (int(v) for v in rng.integers(1, 4, size=2))
        est = Bimax(min_rows=min_rows, min_cols=min_cols, max_biclusters=None, preprocess=None).fit(B)
        found = as_sets(est.rows_, est.columns_)
        assert len(found) == len(set(found)), "a bicluster was reported twice"
        assert set(found) == brute_force_maximal(B, min_rows, min_cols)
        assert est.n_biclusters_ == len(found)
        n_checked += len(found)
    assert n_checked > 500  # the random matrices are not trivially empty


def test_spectral_warns_on_a_constant_matrix():
    with pytest.warns(UserWarning, match="X is constant") as record:
        Spectral(n_clusters=2, random_state=0).fit(np.full((6, 5), 3.0))
    assert record[0].filename == __file__


def test_bimax_finds_biclusters_in_the_order_of_biclust():
    # The order of biclust's C program (src/rbimax.c, compiled and run on this matrix), whose first
    # ``number`` biclusters BCBimax returns: row 1 splits the columns, the rows reordered in place as it
    # selects them; picking the lowest row with a zero instead ends with the last two swapped.
    B = np.array([[0, 0, 0, 0, 1], [0, 0, 1, 1, 1], [0, 1, 1, 1, 1], [0, 0, 0, 1, 0], [1, 0, 1, 1, 1]])
    expected = [((0, 1, 2, 4), (4,)), ((1, 2, 3, 4), (3,)), ((1, 2, 4), (2, 3, 4)), ((4,), (0, 2, 3, 4)),
                ((2,), (1, 2, 3, 4))]
    found = Bimax(min_rows=1, min_cols=1, preprocess=None).fit(B)
    assert as_sets(found.rows_, found.columns_) == expected
    first_four = Bimax(min_rows=1, min_cols=1, max_biclusters=4, preprocess=None).fit(B)
    assert as_sets(first_four.rows_, first_four.columns_) == expected[:4]


def test_bimax_stops_at_100_biclusters_by_default_as_biclust():
    counts = np.random.default_rng(0).poisson(1.0, size=(500, 300))  # far more than 100,000 maximal ones
    found = Bimax().fit(counts)
    assert found.n_biclusters_ == 100 and found.rows_.shape == (100, 500)
    assert len(set(as_sets(found.rows_, found.columns_))) == 100


def test_bimax_warns_when_binarizing_leaves_no_one():
    X = np.random.default_rng(0).poisson(2.0, size=(10, 8)) > 2  # already 0/1: log(2) < 1 everywhere
    with pytest.warns(UserWarning, match="leaves no 1 .* pass preprocess=None") as record:
        assert Bimax().fit(X).n_biclusters_ == 0
    assert record[0].filename == __file__
    assert Bimax(preprocess=None).fit(X).n_biclusters_ > 0


def test_bimax_limit_counts_and_empty_result():
    rng = np.random.default_rng(1)
    B = (rng.random((8, 8)) < 0.6).astype(int)
    everything = Bimax(max_biclusters=None, preprocess=None).fit(B)
    limited = Bimax(max_biclusters=3, preprocess=None).fit(B)
    assert everything.n_biclusters_ > 3 and limited.n_biclusters_ == 3
    all_found = set(as_sets(everything.rows_, everything.columns_))
    assert set(as_sets(limited.rows_, limited.columns_)) <= all_found

    counts = rng.poisson(2.0, size=(8, 8))
    from_counts = Bimax().fit(counts)
    from_binary = Bimax(preprocess=None).fit((counts >= 2).astype(int))
    expected = as_sets(from_binary.rows_, from_binary.columns_)
    assert as_sets(from_counts.rows_, from_counts.columns_) == expected

    none = Bimax(preprocess=None).fit(np.zeros((4, 5)))
    assert none.n_biclusters_ == 0 and none.rows_.shape == (0, 4) and none.columns_.shape == (0, 5)
    with pytest.raises(ValueError, match="only 0 and 1"):
        Bimax(preprocess=None).fit(counts)


# --- Cheng & Church ---


def test_cheng_church_warns_when_the_whole_matrix_is_within_max_msr():
    counts = np.random.default_rng(0).poisson(3.0, size=(30, 20))
    counts[:8, :6] += 10  # a block that the paper's setting cannot see
    message = r"whole matrix .* mean squared residue of 0\.\d+, within max_msr=1"
    with pytest.warns(UserWarning, match=message) as record:
        found = ChengChurch(random_state=0).fit(counts)  # column z-scores: the CDP paper's call
    assert record[0].filename == __file__
    assert found.rows_[0].all() and found.columns_[0].all()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ChengChurch(max_msr=0.5, random_state=0).fit(counts)

@pytest.mark.parametrize("seed", [0, 1, 2])
def test_cheng_church_recovers_additive_bicluster_exactly(seed):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-5, 5, size=(30, 20))
    X[3:23, 4:16] = additive_block(rng, 20, 12)
    est = ChengChurch(n_biclusters=1, max_msr=0.02, preprocess=None, random_state=0).fit(X)
    assert as_sets(est.rows_, est.columns_) == [(tuple(range(3, 23)), tuple(range(4, 16)))]
    assert est.msr_[0] <= 0.02


@pytest.mark.parametrize("seed", range(5))
def test_cheng_church_finds_every_member_of_an_exact_block(seed):
    """Members of an exactly additive block have squared residue 0, which round-off puts at random above or below
    an H of about 1e-32: the comparisons allow for it (without, 1-3 of these rows and columns were left out)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(0, 2, size=(30, 20))
    X[:10, :8] = rng.normal(size=(10, 1)) + rng.normal(size=(1, 8))
    for inverted in (False, True):
        est = ChengChurch(n_biclusters=1, max_msr=0.01, preprocess=None, add_inverted_rows=inverted,
                          random_state=0).fit(X)
        assert as_sets(est.rows_, est.columns_) == [(tuple(range(10)), tuple(range(8)))]
    additive = rng.normal(size=(6, 1)) + rng.normal(size=(1, 5))
    est = ChengChurch(n_biclusters=1, max_msr=0.0, preprocess=None, random_state=0).fit(additive)
    assert as_sets(est.rows_, est.columns_) == [(tuple(range(6)), tuple(range(5)))]


def test_cheng_church_masks_found_biclusters():
    # two additive blocks: masking the first lets the second search find the other one (measured mean 0.96)
    blocks = [(slice(0, 15), slice(0, 10)), (slice(20, 36), slice(14, 26))]
    scores = []
    for seed in range(10):
        rng = np.random.default_rng(seed)
        X = rng.uniform(-5, 5, size=(40, 30))
        for r, c in blocks:
            X[r, c] = additive_block(rng, r.stop - r.start, c.stop - c.start)
        est = ChengChurch(n_biclusters=2, max_msr=0.02, preprocess=None, random_state=seed).fit(X)
        assert est.n_biclusters_ == 2
        scores.append(jaccard_score((est.rows_, est.columns_), truth(X.shape, blocks)))
    assert np.mean(scores) >= 0.9


def test_cheng_church_inverted_rows_and_seeds():
    rng = np.random.default_rng(3)
    X = rng.uniform(-5, 5, size=(30, 20))
    block = additive_block(rng, 20, 12)
    block[:5] *= -1  # rows 3..7 are mirror images of the additive pattern
    X[3:23, 4:16] = block
    est = ChengChurch(n_biclusters=1, max_msr=0.02, preprocess=None, random_state=0).fit(X)
    rows, inverted = set(np.flatnonzero(est.rows_[0])), set(np.flatnonzero(est.inverted_rows_[0]))
    assert rows <= set(range(3, 23)) and set(np.flatnonzero(est.columns_[0])) <= set(range(4, 16))
    assert inverted and inverted <= set(range(3, 8))
    without = ChengChurch(n_biclusters=1, max_msr=0.02, preprocess=None, add_inverted_rows=False).fit(X)
    assert not without.inverted_rows_.any() and not (set(np.flatnonzero(without.rows_[0])) & set(range(3, 8)))

    counts = np.random.default_rng(4).poisson(3.0, size=(25, 20))
    a = ChengChurch(random_state=7).fit(counts)
    b = ChengChurch(random_state=7).fit(counts)
    assert a.n_biclusters_ == 5
    np.testing.assert_array_equal(a.rows_, b.rows_)
    np.testing.assert_array_equal(a.columns_, b.columns_)


def test_cheng_church_nothing_found_has_empty_shapes():
    # a 2 x 2 matrix with non-zero residue can only shrink to one row: no bicluster
    est = ChengChurch(max_msr=0.0, preprocess=None).fit(np.array([[0.0, 1.0], [1.0, 0.0]]))
    assert est.n_biclusters_ == 0 and est.rows_.shape == (0, 2) and est.columns_.shape == (0, 2)
    with pytest.raises(ValueError, match="deletion_threshold"):
        ChengChurch(deletion_threshold=0.5).fit(np.eye(3))


# --- Plaid ---

def test_plaid_recovers_planted_layer():
    # biclust's BCPlaid example: N(0, 1) with a 10 x 10 block of N(3, 0.3); measured Jaccard 1.0 in 39 of 40
    # seeds (0.9 in the other)
    for seed in range(5):
        rng = np.random.default_rng(seed)
        X = rng.normal(0, 1, size=(100, 50))
        X[10:20, 10:20] = rng.normal(3, 0.3, size=(10, 10))
        est = Plaid(preprocess=None, random_state=seed).fit(X)
        planted = truth(X.shape, [(slice(10, 20), slice(10, 20))])
        assert jaccard_score((est.rows_, est.columns_), planted) >= 0.9
        assert est.layer_means_.shape == (est.n_biclusters_,)


def test_plaid_layer_effects_and_options():
    rng = np.random.default_rng(5)
    X = rng.normal(0, 1, size=(60, 40))
    X[5:20, 10:25] += 4 + rng.normal(0, 1, 15)[:, None] * 0.5 + np.linspace(-1, 1, 15)[None, :]
    est = Plaid(preprocess=None, random_state=0, row_release=None, col_release=None).fit(X)
    assert est.n_biclusters_ >= 1
    assert as_sets(est.rows_[:1], est.columns_[:1]) == [(tuple(range(5, 20)), tuple(range(10, 25)))]
    np.testing.assert_allclose(est.layer_column_effects_[0, 10:25], np.linspace(-1, 1, 15), atol=0.5)
    assert np.all(est.layer_row_effects_[0, :5] == 0) and np.all(est.layer_column_effects_[0, :10] == 0)

    rows_only = Plaid(cluster="r", preprocess=None, random_state=0, max_layers=1).fit(X)
    assert rows_only.n_biclusters_ == 1 and rows_only.columns_.all()
    counts = np.random.default_rng(99).poisson(2.0, size=(30, 25))
    a = Plaid(random_state=11).fit(counts)
    b = Plaid(random_state=11).fit(counts)
    np.testing.assert_array_equal(a.rows_, b.rows_)
    np.testing.assert_array_equal(a.columns_, b.columns_)
    with pytest.raises(ValueError, match="fit_model"):
        Plaid(fit_model="m + c").fit(X)
    with pytest.raises(ValueError, match="cluster"):
        Plaid(cluster="x").fit(X)


# --- Spectral ---

@pytest.mark.parametrize("n_clusters, message", [(8, "8 column clusters, more than X's 7 columns"),
                                                  ((9, 2), "9 row clusters, more than X's 8 rows")])
def test_spectral_more_clusters_than_rows_or_columns_is_named(n_clusters, message):
    with pytest.raises(ValueError, match=message):
        Spectral(n_clusters=n_clusters).fit(np.random.default_rng(0).poisson(3.0, size=(8, 7)))


def test_spectral_recovers_checkerboard_and_is_seeded():
    rng = np.random.default_rng(0)
    row_labels = np.repeat([0, 1, 2], [10, 8, 12])
    column_labels = np.repeat([0, 1], [9, 11])
    means = np.array([[2.0, 20.0], [15.0, 3.0], [6.0, 40.0]])
    X = rng.poisson(means[np.ix_(row_labels, column_labels)])
    est = Spectral(n_clusters=(3, 2), random_state=0).fit(X)
    pairs = itertools.product(range(3), range(2))
    rows, columns = truth(X.shape, [(row_labels == k, column_labels == m) for k, m in pairs])
    assert est.n_biclusters_ == 6
    assert jaccard_score((est.rows_, est.columns_), (rows, columns)) == 1.0
    first = Spectral(n_clusters=(3, 2), random_state=np.random.default_rng(5)).fit(X)
    again = Spectral(n_clusters=(3, 2), random_state=np.random.default_rng(5)).fit(X)
    np.testing.assert_array_equal(first.rows_, again.rows_)
    np.testing.assert_array_equal(first.columns_, again.columns_)


# --- shared contract ---

ESTIMATORS = [ChengChurch(), Plaid(), Bimax(), Spectral(n_clusters=2), DT2B(n_sweeps=20)]


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=lambda e: type(e).__name__)
def test_bad_input_raises_clear_errors(estimator):
    X = np.ones((6, 5))
    X[2, 3] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        clone(estimator).fit(X)
    with pytest.raises(ValueError, match="empty"):
        clone(estimator).fit(np.zeros((0, 5)))
    if "random_state" in estimator.get_params():
        with pytest.raises(ValueError, match="random_state"):
            clone(estimator).set_params(random_state="seed").fit(np.arange(20.0).reshape(4, 5))


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=lambda e: type(e).__name__)
def test_negative_seed_is_named(estimator):
    with pytest.raises(ValueError, match="random_state"):
        clone(estimator).set_params(random_state=-1).fit(np.arange(20.0).reshape(4, 5))


@pytest.mark.parametrize("estimator, parameter", [(ChengChurch(), "add_inverted_rows"), (Plaid(), "background")])
def test_bool_parameters_must_be_bool(estimator, parameter):
    # a string such as "no" is truthy: it must not silently mean True
    with pytest.raises(ValueError, match=f"{parameter} must be True or False"):
        clone(estimator).set_params(**{parameter: "no"}).fit(np.arange(20.0).reshape(4, 5))


def test_log_based_preprocessing_rejects_negative_values():
    with pytest.raises(ValueError, match="non-negative"):
        Bimax().fit(-np.ones((4, 4)))
    with pytest.raises(ValueError, match="non-negative"):
        Plaid().fit(-np.ones((4, 4)))


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=lambda e: type(e).__name__)
def test_fit_does_not_modify_input_and_sets_mixin_attributes(estimator):
    X = np.random.default_rng(2).poisson(3.0, size=(12, 10))
    original = X.copy()
    est = clone(estimator).fit(X)
    np.testing.assert_array_equal(X, original)
    assert est.rows_.dtype == bool and est.rows_.shape == (est.n_biclusters_, 12)
    assert est.columns_.dtype == bool and est.columns_.shape == (est.n_biclusters_, 10)


@parametrize_with_checks([
    Bimax(), ChengChurch(random_state=0), DT2B(n_sweeps=5, random_state=0), Plaid(random_state=0),
    # sklearn's checks fit 2 x 2 and n x 2 matrices: 2 clusters from 1 singular vector (its own setting for
    # SpectralBiclustering)
    Spectral(n_clusters=2, n_best=1, random_state=0),
])
def test_sklearn_compatible(estimator, check):
    check(estimator)
