"""DPMM: recovery of known mixtures, reproducibility, the split/merge ratios, input checks."""

import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.special import gammaln
from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score
from sklearn.utils.estimator_checks import check_dataframe_column_names_consistency, parametrize_with_checks

import conjoined
from conjoined.dpmm import backends, sampler
from conjoined.dpmm.priors import SufficientStats, default_prior, sample_log_dirichlet
from conjoined.dpmm.sampler import merge_log_ratio, split_log_ratio


def multinomial_mixture(seed, n=300, K=6, d=100, total=80):
    rng = np.random.default_rng(seed)
    theta = rng.dirichlet(np.full(d, 0.3), size=K)
    z = np.arange(n) % K
    X = np.stack([rng.multinomial(total, theta[k]) for k in z])
    return X, z


def gaussian_mixture(seed, n=900, K=9, d=2, spread=12.0):
    rng = np.random.default_rng(seed)
    if d == 2:
        grid = np.array([(a, b) for a in range(3) for b in range(3)], dtype=float)[:K] * spread
    else:
        grid = rng.normal(scale=spread / 2, size=(K, d))
    z = np.arange(n) % K
    return grid[z] + rng.standard_normal((n, d)), z


GAUSSIAN = np.random.default_rng(0).normal(size=(30, 3))


def posterior_mode_of_k(model):
    return np.bincount(model.n_clusters_trace_[model.warmup_:]).argmax()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_multinomial_mixture_recovered(seed):
    X, z = multinomial_mixture(seed)
    model = conjoined.DPMM(n_iter=80, random_state=seed).fit(sp.csr_matrix(X))
    assert isinstance(model.prior_, conjoined.Multinomial)
    assert posterior_mode_of_k(model) == 6
    assert normalized_mutual_info_score(z, model.labels_) >= 0.95


def test_priors_have_scikit_learn_parameters():
    from sklearn.base import clone

    from conjoined.dpmm.checkpoint import prior_description
    given = conjoined.NormalInverseWishart(psi=3 * np.eye(2))
    assert repr(given) == "NormalInverseWishart(psi=array([[3., 0.],\n       [0., 3.]]))"  # psi was not shown
    assert repr(conjoined.Multinomial()) == "Multinomial()" and repr(conjoined.PoissonGamma(rate=2)) == \
        "PoissonGamma(rate=2)"
    model = conjoined.DPMM(prior=conjoined.NormalGamma()).set_params(prior__kappa=0.5)
    assert model.prior.kappa == 0.5 and model.get_params()["prior__kappa"] == 0.5
    with pytest.raises(ValueError, match="NormalGamma has no parameter 'kapa'; its parameters are kappa, mean"):
        conjoined.NormalGamma().set_params(kapa=1)
    X, _ = gaussian_mixture(0, n=90, K=3)
    fitted = conjoined.DPMM(n_iter=5, random_state=0, prior=conjoined.NormalInverseWishart(psi="sample")).fit(X)
    copied = clone(conjoined.DPMM(prior=fitted.prior_)).prior  # a deep copy: what the fit learnt stays
    assert copied is not fitted.prior_ and copied.scale_floor == fitted.prior_.scale_floor
    np.testing.assert_array_equal(copied.psi, fitted.prior_.psi)
    # checkpoints name a prior as before (a checkpoint written by an earlier version still resumes)
    assert prior_description(conjoined.NormalInverseWishart().fitted(X)).startswith(
        "NormalInverseWishart(kappa=0.01, nu=5.0) #")


def test_a_model_pickled_before_estimate_existed_loads_as_the_last_sample():
    import pickle

    from sklearn.base import clone
    X, _ = gaussian_mixture(0, n=90, K=3)
    model = conjoined.DPMM(n_iter=10, random_state=0).fit(X)
    state = model.__getstate__()
    del state["estimate"], state["labels_iteration_"]
    old = conjoined.DPMM.__new__(conjoined.DPMM)
    old.__setstate__(state)
    loaded = pickle.loads(pickle.dumps(old))
    assert loaded.get_params()["estimate"] == "sample" and loaded.labels_iteration_ == 9
    np.testing.assert_array_equal(clone(loaded).fit(X).labels_, model.labels_)


def test_score_samples_is_the_fitted_mixtures_log_likelihood():
    from scipy import stats
    from scipy.special import logsumexp
    rng = np.random.default_rng(0)

    def mixture(model, log_likelihoods):  # (K, n) per cluster
        return logsumexp(np.log(model.weights_)[:, None] + np.asarray(log_likelihoods), axis=0)

    X = np.vstack([rng.normal(size=(60, 2)), rng.normal(size=(60, 2)) + 6])
    model = conjoined.DPMM(n_iter=30, random_state=0).fit(X)
    P = model.cluster_params_
    expected = mixture(model, [stats.multivariate_normal(P["mean"][k], P["covariance"][k]).logpdf(X)
                               for k in range(model.n_clusters_)])
    np.testing.assert_allclose(model.score_samples(X), expected, rtol=1e-9)
    assert model.score(X) == pytest.approx(expected.mean())
    C = rng.poisson(np.vstack([np.full((40, 5), 2.0), np.tile([8.0, 1, 1, 1, 8], (40, 1))]))
    multinomial = conjoined.DPMM(n_iter=30, random_state=0).fit(C)
    theta = multinomial.cluster_params_["theta"]
    expected = mixture(multinomial, [[stats.multinomial(row.sum(), theta[k]).logpmf(row) for row in C]
                                     for k in range(multinomial.n_clusters_)])
    np.testing.assert_allclose(multinomial.score_samples(C), expected, rtol=1e-9)
    np.testing.assert_allclose(multinomial.score_samples(sp.csr_matrix(C)), expected, rtol=1e-9)
    poisson = conjoined.DPMM(n_iter=30, random_state=0, prior=conjoined.PoissonGamma()).fit(C)
    rate = poisson.cluster_params_["rate"]
    expected = mixture(poisson, [stats.poisson(rate[k]).logpmf(C).sum(axis=1) for k in range(poisson.n_clusters_)])
    np.testing.assert_allclose(poisson.score_samples(sp.csr_matrix(C)), expected, rtol=1e-9)
    # a density of X: it integrates to 1 (NormalGamma scores X in units of each feature's spread)
    x = np.concatenate([rng.normal(size=100), rng.normal(size=100) * 0.5 + 5])[:, None]
    grid = np.linspace(-10, 15, 20001)[:, None]
    for prior in (None, conjoined.NormalGamma()):
        fitted = conjoined.DPMM(n_iter=30, random_state=0, prior=prior).fit(x)
        assert np.exp(fitted.score_samples(grid)).sum() * 25 / 20000 == pytest.approx(1.0, abs=1e-6)


def test_counts_of_one_feature_get_a_poisson_mixture():
    # a multinomial over one feature gives every point the proportion 1: it read these two levels as one (ARI 0)
    rng = np.random.default_rng(0)
    X = np.concatenate([rng.poisson(3.0, 100), rng.poisson(40.0, 100)])[:, None]
    model = conjoined.DPMM(random_state=0).fit(X)
    assert isinstance(model.prior_, conjoined.PoissonGamma)
    assert adjusted_rand_score(np.repeat([0, 1], 100), model.labels_) == 1.0


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_gaussian_2d_mixture_recovered(seed):
    X, z = gaussian_mixture(seed)
    model = conjoined.DPMM(n_iter=120, random_state=seed).fit(X)
    assert isinstance(model.prior_, conjoined.NormalInverseWishart)
    assert posterior_mode_of_k(model) == 9
    assert normalized_mutual_info_score(z, model.labels_) >= 0.95


@pytest.mark.parametrize("seed", [0, 1])
def test_gaussian_32d_mixture_recovered(seed):
    X, z = gaussian_mixture(seed, n=600, K=6, d=32)
    model = conjoined.DPMM(n_iter=80, random_state=seed).fit(X)
    assert posterior_mode_of_k(model) == 6
    assert normalized_mutual_info_score(z, model.labels_) >= 0.95


def test_poisson_gamma_separates_totals_that_multinomial_cannot_see():
    rng = np.random.default_rng(0)
    rates = np.where(np.arange(60)[:, None] < 20, 6.0, 1.0) * np.ones((60, 30))
    X = rng.poisson(rates)
    z = (np.arange(60) < 20).astype(int)
    poisson = conjoined.DPMM(prior=conjoined.PoissonGamma(), n_iter=60, random_state=0).fit(X)
    assert normalized_mutual_info_score(z, poisson.labels_) == pytest.approx(1.0)


def test_same_seed_same_result_whatever_threads(monkeypatch):
    monkeypatch.setattr(backends, "PARALLEL_MIN_WORK", 0)
    X, _ = multinomial_mixture(3, n=400)
    runs = [conjoined.DPMM(n_iter=30, random_state=7, n_jobs=j).fit(sp.csr_matrix(X)) for j in (1, 2, 2)]
    for other in runs[1:]:
        np.testing.assert_array_equal(runs[0].labels_trace_, other.labels_trace_)
        np.testing.assert_array_equal(runs[0].log_posterior_trace_, other.log_posterior_trace_)
    G, _ = gaussian_mixture(3, n=300)
    g1 = conjoined.DPMM(n_iter=25, random_state=5, n_jobs=1).fit(G)
    g2 = conjoined.DPMM(n_iter=25, random_state=5, n_jobs=2).fit(G)
    np.testing.assert_array_equal(g1.labels_trace_, g2.labels_trace_)
    np.testing.assert_array_equal(g1.log_posterior_trace_, g2.log_posterior_trace_)
    sampled = [conjoined.DPMM(n_iter=25, random_state=5, n_jobs=j,
                              prior=conjoined.NormalInverseWishart(psi="sample")).fit(G) for j in (1, 2)]
    np.testing.assert_array_equal(sampled[0].labels_trace_, sampled[1].labels_trace_)
    np.testing.assert_array_equal(sampled[0].psi_scale_trace_, sampled[1].psi_scale_trace_)


def test_fractional_counts_on_the_grid_are_summed_exactly_whatever_threads(monkeypatch):
    # counts tempered by a dispersion (conjoined.cdp) are multiples of 1/1024: their sums do not depend on the
    # order in which threads add them, so the chain is the same on 1 and 2 threads
    monkeypatch.setattr(backends, "PARALLEL_MIN_WORK", 0)
    X, z = multinomial_mixture(5, n=400)
    tempered = sp.csr_matrix(X * (np.arange(1, 101) % 7 + 300) / 1024)
    for prior in (conjoined.Multinomial(), conjoined.PoissonGamma()):
        runs = [conjoined.DPMM(prior=prior, n_iter=30, random_state=2, n_jobs=j).fit(tempered) for j in (1, 2)]
        np.testing.assert_array_equal(runs[0].labels_trace_, runs[1].labels_trace_)
        np.testing.assert_array_equal(runs[0].log_posterior_trace_, runs[1].log_posterior_trace_)
    assert normalized_mutual_info_score(z, runs[0].labels_) >= 0.9


def test_fractional_counts_have_the_count_marginal_of_real_arguments():
    stats = SufficientStats(np.array([3.0]), np.array([[0.5, 2.25, 0.0]]))
    beta, shape, rate = 0.7, 1.3, 0.4
    expected = gammaln(3 * beta) - gammaln(3 * beta + 2.75) + np.sum(gammaln(beta + stats.s1) - gammaln(beta))
    assert conjoined.Multinomial(beta).log_marginal(stats)[0] == pytest.approx(expected)
    expected = np.sum(shape * np.log(rate) - gammaln(shape) + gammaln(shape + stats.s1)
                      - (shape + stats.s1) * np.log(rate + 3.0))
    assert conjoined.PoissonGamma(shape, rate).log_marginal(stats)[0] == pytest.approx(expected)


def test_dense_and_sparse_input_give_the_same_chain():
    X, _ = multinomial_mixture(4, n=120)
    dense = conjoined.DPMM(n_iter=20, random_state=1).fit(X)
    sparse = conjoined.DPMM(n_iter=20, random_state=1).fit(sp.csr_matrix(X))
    np.testing.assert_array_equal(dense.labels_trace_, sparse.labels_trace_)


def test_traces_and_attributes():
    X, z = multinomial_mixture(5, n=120)
    model = conjoined.DPMM(n_iter=40, random_state=0).fit(X)
    assert model.labels_trace_.shape == (40, 120)
    assert model.n_clusters_trace_.shape == model.log_posterior_trace_.shape == (40,)
    np.testing.assert_array_equal(model.labels_trace_[-1], model.labels_)
    assert model.n_clusters_trace_[-1] == model.n_clusters_ == len(np.unique(model.labels_))
    assert model.weights_.sum() == pytest.approx(1.0)
    assert model.cluster_params_["theta"].shape == (model.n_clusters_, 100)
    np.testing.assert_allclose(model.cluster_params_["theta"].sum(axis=1), 1.0)
    proba = model.predict_proba(X)
    assert proba.shape == (120, model.n_clusters_)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    assert normalized_mutual_info_score(model.labels_, model.predict(X)) >= 0.95
    assert conjoined.DPMM(n_iter=5, store_labels=False, random_state=0).fit(X).labels_trace_ is None


def test_map_estimate_is_the_most_probable_posterior_sample():
    # three Gaussian blobs of 200 points: the posterior spreads over partitions that cut a blob into pieces; the
    # last samples of seeds 0-2 hold 4 clusters (ARI 0.91-0.98, 4-64 nats below the most probable sample), which
    # is three blobs or nearly (ARI 0.98-1.0)
    from sklearn.datasets import make_blobs
    X, z = make_blobs(600, centers=3, random_state=1)
    fits = {estimate: [conjoined.DPMM(n_iter=200, random_state=seed, estimate=estimate).fit(X) for seed in range(3)]
            for estimate in ("sample", "map")}
    for last, model in zip(fits["sample"], fits["map"]):
        np.testing.assert_array_equal(last.log_posterior_trace_, model.log_posterior_trace_)  # the same chain
        assert last.labels_iteration_ == 199
        it = model.labels_iteration_
        assert it == model.warmup_ + np.argmax(model.log_posterior_trace_[model.warmup_:])
        np.testing.assert_array_equal(model.labels_, model.labels_trace_[it])
        assert model.n_clusters_ == model.n_clusters_trace_[it] == len(np.unique(model.labels_))
        np.testing.assert_allclose(model.weights_, np.bincount(model.labels_) / 600)
        np.testing.assert_allclose(model.cluster_params_["mean"],
                                   [X[model.labels_ == k].mean(axis=0) for k in range(model.n_clusters_)], atol=0.1)
        assert np.mean(model.predict(X) == model.labels_) > 0.99
    scores = {estimate: [adjusted_rand_score(z, model.labels_) for model in models]
              for estimate, models in fits.items()}
    assert min(scores["map"]) > 0.97 and np.mean(scores["map"]) > np.mean(scores["sample"]) + 0.03


def test_map_estimate_with_a_sampled_scale_and_without_samples_after_warmup():
    X, _ = gaussian_mixture(0, n=300, K=5, d=3)
    model = conjoined.DPMM(n_iter=40, random_state=1, estimate="map",
                           prior=conjoined.NormalInverseWishart(psi="sample")).fit(X)
    after = slice(model.warmup_, None)
    # the density of (labels, log s), in which the scale's prior is flat: here not that of (labels, s)
    it = model.warmup_ + np.argmax(model.log_posterior_trace_[after])
    assert it != model.warmup_ + np.argmax(model.log_posterior_trace_[after] - np.log(model.psi_scale_trace_[after]))
    assert model.labels_iteration_ == it
    assert model.prior_.psi[0, 0] == model.psi_scale_trace_[it]
    np.testing.assert_array_equal(model.labels_, model.labels_trace_[it])
    whole = conjoined.DPMM(n_iter=20, warmup=20, random_state=0, estimate="map").fit(X)
    assert whole.labels_iteration_ == 19
    with pytest.raises(ValueError, match="estimate must be one of"):
        conjoined.DPMM(estimate="mode").fit(X)


def test_progress_bar_redraws_at_its_own_pace_not_every_iteration(capsys, monkeypatch):
    pytest.importorskip("tqdm")
    import time

    from conjoined import _progress
    from conjoined.dpmm import estimator

    monkeypatch.setattr(_progress, "_interactive", lambda stream: True)  # as on a terminal

    step = estimator.sampler.step

    def slow_step(*args, **kwargs):  # iterations of 2 ms at least: the fit spans several of tqdm's 0.1 s redraws
        time.sleep(0.002)
        return step(*args, **kwargs)

    monkeypatch.setattr(estimator.sampler, "step", slow_step)
    X, _ = multinomial_mixture(3, n=30)
    conjoined.DPMM(n_iter=400, random_state=0, verbose=True).fit(X)
    err = capsys.readouterr().err
    assert "DPMM on 30 points" in err and "K=" in err
    # tqdm redraws at most every 0.1 s; the fit takes well under 10 s even on a loaded machine
    assert err.count("DPMM on 30 points") < 100


def test_plain_progress_line_without_tqdm_shows_the_number_of_clusters(capsys, monkeypatch):
    import builtins

    from conjoined import _progress

    monkeypatch.setattr(_progress, "_interactive", lambda stream: True)
    real_import = builtins.__import__

    def no_tqdm(name, *args, **kwargs):
        if name.startswith("tqdm"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_tqdm)
    X, _ = multinomial_mixture(3, n=30)
    model = conjoined.DPMM(n_iter=20, random_state=0, verbose=True).fit(X)
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith("DPMM on 30 points: 20/20 (")
    assert last.endswith(f", K={model.n_clusters_})")


def test_progress_into_a_file_is_a_line_at_the_end_of_a_short_fit(capsys):
    """stderr captured (not a terminal, as a redirected log): no bar redrawn in place, one plain line per loop
    every 30 s and at its end."""
    X, _ = multinomial_mixture(3, n=30)
    model = conjoined.DPMM(n_iter=50, random_state=0, verbose=True).fit(X)
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and "\r" not in lines[0]
    assert lines[0].startswith("DPMM on 30 points: 50/50 (") and lines[0].endswith(f", K={model.n_clusters_})")


def test_a_plain_progress_line_says_where_an_interrupted_loop_stopped(capsys):
    from conjoined._progress import _PlainBar

    bar = _PlainBar(10, "sweeps", every=30.0)
    for _ in range(3):
        bar.update()
    bar.close()
    assert capsys.readouterr().err.startswith("sweeps: 3/10 (")
    bar = _PlainBar(10, "sweeps", every=30.0)
    for _ in range(10):
        bar.update()
    bar.close()  # the last line was the end's: not repeated
    assert capsys.readouterr().err.count("\n") == 1


def test_log_posterior_matches_its_formula_at_the_end():
    X, _ = multinomial_mixture(6, n=60, K=3)
    model = conjoined.DPMM(n_iter=30, random_state=0).fit(X)
    prior = model.prior_
    lp = gammaln(model.alpha) - gammaln(60 + model.alpha)
    for k in range(model.n_clusters_):
        members = X[model.labels_ == k].astype(float)
        stats = SufficientStats(np.array(float(len(members))), members.sum(axis=0))
        lp += np.log(model.alpha) + gammaln(len(members)) + prior.log_marginal(stats)
    assert model.log_posterior_trace_[-1] == pytest.approx(lp)


@pytest.mark.parametrize("prior", [conjoined.Multinomial(0.5), conjoined.PoissonGamma(1.0, 0.3),
                                   conjoined.NormalInverseWishart(1.0, np.zeros(3), 6.0, np.eye(3))])
def test_split_and_merge_ratios_are_reverse_moves(prior):
    rng = np.random.default_rng(0)
    X = rng.poisson(3.0, size=(12, 3)).astype(float)
    gaussian = isinstance(prior, conjoined.NormalInverseWishart)
    if gaussian:
        X = rng.normal(size=(12, 3))

    def stats(rows):
        return SufficientStats(np.array(float(len(rows))), X[rows].sum(axis=0),
                               X[rows].T @ X[rows] if gaussian else None)

    left, right = stats(list(range(5))), stats(list(range(5, 12)))
    both = SufficientStats(np.array([5.0, 7.0]), np.stack([left.s1, right.s1]),
                           np.stack([left.s2, right.s2]) if gaussian else None)
    alpha = 0.7
    sub_weight_term = (gammaln(alpha) - 2 * gammaln(alpha / 2) + gammaln(5 + alpha / 2) + gammaln(7 + alpha / 2)
                       - gammaln(12 + alpha))
    assert split_log_ratio(prior, alpha, both) + merge_log_ratio(prior, alpha, left, right) == pytest.approx(
        sub_weight_term)
    whole = left + right
    expected_split = (np.log(alpha) + gammaln(5) + gammaln(7) - gammaln(12) + prior.log_marginal(left)
                      + prior.log_marginal(right) - prior.log_marginal(whole))
    assert split_log_ratio(prior, alpha, both) == pytest.approx(expected_split)


@pytest.mark.parametrize("prior", [conjoined.Multinomial(0.5), conjoined.PoissonGamma(1.0, 0.3),
                                   conjoined.NormalInverseWishart(1.0, np.zeros(3), 6.0, np.eye(3))])
def test_batched_ratios_equal_the_single_ones(prior, monkeypatch):
    rng = np.random.default_rng(1)
    gaussian = isinstance(prior, conjoined.NormalInverseWishart)
    X = rng.normal(size=(30, 3)) if gaussian else rng.poisson(3.0, size=(30, 3)).astype(float)
    labels = np.arange(30) % 5
    clusters = [np.flatnonzero(labels == k) for k in range(5)]
    cluster_stats = [SufficientStats(np.array(float(len(r))), X[r].sum(axis=0), X[r].T @ X[r] if gaussian else None)
                     for r in clusters]
    stacked = SufficientStats(np.stack([c.n for c in cluster_stats]), np.stack([c.s1 for c in cluster_stats]),
                              np.stack([c.s2 for c in cluster_stats]) if gaussian else None)
    first, second = np.triu_indices(5, 1)
    monkeypatch.setattr(sampler, "MERGE_CHUNK_VALUES", 7)  # several chunks
    batched = sampler.merge_log_ratios(prior, 0.7, stacked, first, second)
    single = [merge_log_ratio(prior, 0.7, cluster_stats[a], cluster_stats[b]) for a, b in zip(first, second)]
    assert batched == pytest.approx(single)
    # the merge's posterior odds: the difference of the log posterior between the two partitions
    merged = []
    for a, b in zip(first, second):
        kept = [k for k in range(5) if k not in (a, b)]
        partition = [cluster_stats[a] + cluster_stats[b]] + [cluster_stats[k] for k in kept]
        merged.append(sampler.log_posterior(prior, 0.7, SufficientStats(
            np.stack([c.n for c in partition]), np.stack([c.s1 for c in partition]),
            np.stack([c.s2 for c in partition]) if gaussian else None)))
    odds = sampler.merge_log_odds(prior, 0.7, stacked, first, second)
    assert odds == pytest.approx(np.array(merged) - sampler.log_posterior(prior, 0.7, stacked), rel=1e-9, abs=1e-9)
    # Sub-clusters: the two halves of each cluster; one cluster with an empty half cannot split.
    halves = SufficientStats(np.stack([[c.n // 2, c.n - c.n // 2] for c in cluster_stats]),
                             np.stack([[X[r[:len(r) // 2]].sum(axis=0), X[r[len(r) // 2:]].sum(axis=0)]
                                       for r in clusters]),
                             np.stack([[X[r[:len(r) // 2]].T @ X[r[:len(r) // 2]], X[r[len(r) // 2:]].T @ X[r[len(r) // 2:]]]
                                       for r in clusters]) if gaussian else None)
    halves.n[0] = (0.0, 6.0)
    halves.s1[0] = (np.zeros(3), X[clusters[0]].sum(axis=0))
    if gaussian:
        halves.s2[0] = (np.zeros((3, 3)), X[clusters[0]].T @ X[clusters[0]])
    batched = sampler.split_log_ratios(prior, 0.7, halves)
    assert batched[0] == -np.inf
    assert batched[1:] == pytest.approx([split_log_ratio(prior, 0.7, halves.take(k)) for k in range(1, 5)])


def sampler_setup(gaussian, seed, n, n_streams, n_clusters):
    """(X, prior, local backend, initial state) on a Gaussian or multinomial mixture."""
    X, _ = gaussian_mixture(seed, n=n) if gaussian else multinomial_mixture(seed, n=n)
    prior = (conjoined.NormalInverseWishart() if gaussian else conjoined.Multinomial(0.5)).fitted(X.astype(float))
    backend = backends.LocalBackend(X if gaussian else sp.csr_matrix(X),
                                    np.random.SeedSequence(seed).spawn(n_streams))
    return X, prior, backend, sampler.init(backend, n_clusters, prior)


@pytest.mark.parametrize("gaussian", [False, True])
def test_anchored_pass_keeps_anchors_and_only_joins_lower_ranked_anchors(gaussian):
    X, prior, backend, state = sampler_setup(gaussian, 0, 300, 4, 12)
    rng = np.random.default_rng(0)
    for _ in range(5):
        before = backend.all_labels().copy()
        K = state.stats.n.shape[0]
        seed, anchor_priority, anchor_index = sampler.anchors(before, K, rng)
        priority = backends.point_priorities(seed, 0, len(before))
        assert np.array_equal(before[anchor_index], np.arange(K))
        assert all(priority[anchor_index[k]] == priority[before == k].min() for k in range(K))
        params = sampler.sample_kernel_params(state, prior, 1.0, rng, with_subclusters=False)
        stats = backend.assign(*params, (seed, anchor_priority, anchor_index))
        after = backend.all_labels()
        assert np.array_equal(after[anchor_index], before[anchor_index])
        assert np.all(anchor_priority[after] <= priority)
        assert (stats.n.sum(axis=1) > 0).all() and np.bincount(after, minlength=K).min() > 0
        assert (after != before).any()
        state = state._replace(stats=stats)


def test_niw_rank_one_predictive_matches_the_ratio_of_marginals():
    from conjoined.dpmm import kernels
    rng = np.random.default_rng(3)
    d = 4
    X = rng.normal(size=(7, d)) * 2.0
    prior = conjoined.NormalInverseWishart(kappa=0.3, mean=rng.normal(size=d), nu=d + 2.5,
                                           psi=np.eye(d) + 0.2 * np.ones((d, d)))
    kappa, mean, nu, chol = prior.kernel_args(d)
    mean_n, chol_n, work, kappa_n = mean.copy(), chol.copy(), np.empty(d), kappa

    def log_m(rows):
        pts = X[rows]
        return prior.log_marginal(SufficientStats(np.array(float(len(rows))), pts.sum(axis=0), pts.T @ pts))

    for n in range(6):
        predictive = kernels._niw_log_predictive(X[n], kappa_n, mean_n, nu + n, chol_n, work)
        expected = log_m(list(range(n + 1))) - (log_m(list(range(n))) if n else 0.0)
        assert predictive == pytest.approx(expected, rel=1e-10, abs=1e-10)
        kappa_n = kernels._niw_add_point(X[n], kappa_n, mean_n, chol_n, work)


@pytest.mark.parametrize("gaussian", [False, True])
def test_point_moves_keep_statistics_and_labels_consistent(gaussian):
    from conjoined.dpmm.point_moves import point_moves
    X, prior, backend, state = sampler_setup(gaussian, 1, 200, 2, 8)
    rng = np.random.default_rng(0)
    opened = closed = 0
    for _ in range(10):
        state, o, c = point_moves(state, backend, prior, 0.5, rng, 40)
        opened, closed = opened + o, closed + c
        labels = backend.all_labels()
        whole = state.stats.sum(axis=1)
        K = whole.n.shape[0]
        assert labels.max() == K - 1 and np.array_equal(whole.n, np.bincount(labels, minlength=K))
        np.testing.assert_allclose(whole.s1, np.stack([X[labels == k].sum(axis=0) for k in range(K)]), atol=1e-8)


def test_point_moves_close_a_stray_singleton():
    from conjoined.dpmm.point_moves import point_moves
    from conjoined.dpmm.sampler import DPMMState
    X, z = multinomial_mixture(2, n=120, K=3)
    prior = conjoined.Multinomial(0.5).fitted(X.astype(float))
    backend = backends.LocalBackend(sp.csr_matrix(X), np.random.SeedSequence(0).spawn(1))
    labels = z.copy()
    labels[0] = 3  # point 0 alone in a cluster of its own
    backend.labels = labels.astype(np.int32)
    sums = np.stack([X[labels == k].sum(axis=0) for k in range(4)]).astype(float)
    stats = SufficientStats(np.stack([np.bincount(labels), np.zeros(4)], axis=1),
                            np.stack([sums, np.zeros_like(sums)], axis=1))
    state = DPMMState(stats, np.zeros(4, np.int64), np.ones(4, bool))
    state, opened, closed = point_moves(state, backend, prior, 1.0, np.random.default_rng(0), 120)
    assert (opened, closed) == (0, 1) and state.age.shape[0] == 3
    assert normalized_mutual_info_score(z, backend.all_labels()) == pytest.approx(1.0)


def test_the_warmups_last_passes_split_a_young_cluster_whose_subclusters_part():
    """A cluster younger than burn_out is split in the warm-up's last burn_out passes when its sub-clusters
    are more probable apart, without a random draw; a young cluster of one component is left alone, not reset;
    an older cluster keeps its Metropolis-Hastings draw."""
    from conjoined.dpmm.sampler import DPMMState
    X, z = multinomial_mixture(2, n=120, K=3)
    prior = conjoined.Multinomial(0.5).fitted(X.astype(float))

    def step(passes_left, ages=(3, 3)):
        backend = backends.LocalBackend(sp.csr_matrix(X), np.random.SeedSequence(0).spawn(1))
        # components 0 and 1 in cluster 0, its sub-clusters; component 2 in cluster 1, cut in two at random
        backend.labels = (z == 2).astype(np.int32)
        even = np.arange(120) % 2 == 0
        parts = [z == 0, z == 1, (z == 2) & even, (z == 2) & ~even]
        stats = SufficientStats(np.array([p.sum() for p in parts], float).reshape(2, 2),
                                np.stack([X[p].sum(axis=0) for p in parts]).reshape(2, 2, -1).astype(float))
        rng = np.random.default_rng(0)
        start = DPMMState(stats, np.array(ages), np.zeros(2, bool))
        state, info = sampler.step(start, backend, prior, 1.0, 15, rng, passes_left=passes_left)
        return state, info, backend.all_labels().copy(), rng.bit_generator.state

    late, early, unlimited = step(15), step(16), step(None)
    assert late[1].n_splits == 1 and normalized_mutual_info_score(z, late[2]) == pytest.approx(1.0)
    # the split cluster and the new one start again (age 1, random sub-labels); the unsplit one goes on
    assert late[0].age.tolist() == [1, 4, 1] and late[0].random_sub.tolist() == [True, False, True]
    for other in (early, unlimited):
        assert other[1].n_splits == 0 and other[0].age.shape[0] == 2
        assert other[3] == late[3]  # the same draws: the young splits take none
    old = step(15, ages=(20, 3))
    assert old[1].n_splits == 1 and old[3] != late[3]  # the old cluster's split was drawn


def test_a_short_chain_splits_in_its_warmup():
    """With burn_out >= warmup (n_iter=12: warm-up 6, burn_out 15) no cluster comes of age, and the young
    splits are the warm-up's only sub-cluster splits: six separated clusters are found from every seed."""
    rng = np.random.default_rng(0)
    means = rng.normal(scale=10.0, size=(6, 8))
    truth = rng.integers(6, size=20_000)
    X = means[truth] + rng.standard_normal((20_000, 8))
    for seed in range(4):
        model = conjoined.DPMM(n_iter=12, random_state=seed).fit(X)
        assert model.n_clusters_trace_[model.warmup_ - 1] == 6
        assert normalized_mutual_info_score(truth, model.labels_) == pytest.approx(1.0)


def test_point_priorities_are_a_fixed_hash_of_seed_and_index():
    a = backends.point_priorities(7, 0, 1000)
    assert np.array_equal(a[500:], backends.point_priorities(7, 500, 500))
    assert len(np.unique(a)) == 1000 and not np.array_equal(a, backends.point_priorities(8, 0, 1000))


def test_log_dirichlet_is_finite_for_tiny_concentrations():
    rng = np.random.default_rng(0)
    draws = sample_log_dirichlet(rng, np.full((2000, 3), 1e-3))
    assert np.all(np.isfinite(draws.max(axis=1)))
    np.testing.assert_allclose(np.exp(draws).sum(axis=1), 1.0)
    means = np.exp(sample_log_dirichlet(rng, np.tile([2.0, 3.0, 5.0], (20000, 1)))).mean(axis=0)
    np.testing.assert_allclose(means, [0.2, 0.3, 0.5], atol=0.01)


@pytest.mark.parametrize("X, params, message", [
    (np.array([[1.0, -2.0], [3.0, 4.0]]), dict(prior=conjoined.Multinomial()), "negative"),
    (np.array([[1.0, np.nan], [3.0, 4.0]]), {}, "non-finite"),
    (np.array([[1.3, 2.0], [3.0, 4.0]]), dict(prior=conjoined.PoissonGamma()), "multiples of 1/1024"),
    (np.zeros((0, 3)), {}, "empty"),
    (np.array([1.0, 2.0, 3.0]), {}, "2-dimensional"),
    (np.ones((4, 2)), dict(alpha=0.0), "alpha"),
    (np.ones((4, 2)), dict(alpha=-1.0), "alpha"),
    (np.ones((4, 2)), dict(n_iter=0), "n_iter"),
    (np.ones((4, 2)), dict(init_clusters=10), "init_clusters"),
    (np.ones((4, 2)), dict(prior="gauss"), "prior"),
    (sp.csr_matrix(np.array([[0.5, 0.0], [0.0, -1.0]])), {}, "sparse"),
    (np.ones((4, 2)), {"n_jobs": True}, "n_jobs must be None or a non-zero integer"),
    (np.ones((4, 2)), {"n_jobs": "x"}, "n_jobs must be None or a non-zero integer"),
    (np.ones((4, 2)), {"verbose": "no"}, r"verbose \(True, False or a level >= 0\)"),
    (np.ones((4, 2)), {"store_labels": "no"}, "store_labels must be True or False"),
    (np.zeros((5, 3)), {}, "X is all zeros"),
    (np.zeros((5, 3)), {"prior": conjoined.PoissonGamma(rate=1.0)}, "X is all zeros"),
    (np.ones((4, 2)), {"prior": conjoined.Multinomial(beta=1e308)}, "Multinomial beta"),
    (GAUSSIAN, {"prior": conjoined.NormalInverseWishart(mean=[np.nan, 0.0, 0.0])}, "mean must be finite"),
    (GAUSSIAN, {"prior": conjoined.NormalInverseWishart(psi=np.full((3, 3), np.nan))}, "psi must be finite"),
    (GAUSSIAN, {"prior": conjoined.NormalInverseWishart(psi=np.triu(np.ones((3, 3))))}, "psi must be symmetric"),
    (GAUSSIAN, {"prior": conjoined.NormalInverseWishart(psi=-np.eye(3))}, "psi must be symmetric positive"),
    (GAUSSIAN, {"prior": conjoined.NormalInverseWishart(psi="sampled")}, "psi must be None, 'sample' or a"),
    (GAUSSIAN, {"prior": conjoined.NormalInverseWishart(nu="5")}, "nu must be a finite number"),
    (GAUSSIAN, {"prior": conjoined.NormalInverseWishart(kappa=1e308)}, "kappa=1e.308 or nu=6.0 is too large"),
    (GAUSSIAN, {"prior": conjoined.NormalInverseWishart(nu=1e308)}, r"\(kappa \+ n\) x \(nu \+ n\) overflows"),
    (GAUSSIAN * 1e200, {}, "rescale X"),
    (GAUSSIAN * 1e-21, {}, "columns span at most .*rescale X"),  # the default scale would reach its floor
    (GAUSSIAN * 1e-40, {}, "columns span at most .*rescale X"),  # precision factors beyond float32
    (GAUSSIAN * 1e-200, {}, "columns span at most .*rescale X"),  # variances below float64
    (np.ones((4, 2)), dict(n_iter=6, warmup=7), "warmup=7 is larger than n_iter=6"),
    # entries -1 and 2 stored at (0, 0): refused as CDP refuses them, whatever their sum
    (sp.coo_matrix(([-1.0, 2.0, 3.0, 4.0], ([0, 0, 1, 2], [0, 0, 1, 0])), shape=(3, 2)), {},
     r"negative values .* \(0, 0\)"),
    # sums beyond 2**53 are no longer exact (2**60 in one cell was a ZeroDivisionError)
    (np.array([[2.0**60, 1.0], [3.0, 4.0]]), {}, r"X holds 1,152,921,504,606,846,976 counts in total; the count "
                                               r"priors keep their sums exact up to 9,007,199,254,740,992\."),
    (np.array([[2.0**50, 0.5], [3.0, 4.0]]), {"prior": conjoined.PoissonGamma()},
     r"exact up to 8,796,093,022,208 for counts on the 1/1024 grid"),
])
def test_bad_input_is_named(X, params, message):
    with pytest.raises(ValueError, match=message):
        conjoined.DPMM(**params).fit(X)


def test_counts_with_rounding_errors_are_read_as_continuous_with_a_warning():
    counts = np.random.default_rng(0).poisson(3.0, size=(30, 4)).astype(np.float64)
    noisy = counts.copy()
    noisy[3, 1] += 1e-12  # as a sum of fractions can leave it
    with pytest.warns(UserWarning, match=r"read as continuous data .* within 1e-06 of a whole number.* np\.rint"):
        model = conjoined.DPMM(n_iter=3, random_state=0).fit(noisy)
    assert isinstance(model.prior_, conjoined.NormalInverseWishart)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        assert isinstance(conjoined.DPMM(n_iter=3, random_state=0).fit(np.rint(noisy)).prior_, conjoined.Multinomial)


@pytest.mark.parametrize("prior", [conjoined.PoissonGamma(), conjoined.Multinomial()])
def test_all_zero_rows_are_accepted(prior):
    # PoissonGamma: a low rate, informative; Multinomial: as likely in every cluster, placed by the DP prior
    X = np.random.default_rng(0).poisson(3.0, size=(30, 5))
    X[[4, 9]] = 0
    model = conjoined.DPMM(prior=prior, n_iter=5, random_state=0).fit(X)
    assert model.labels_.shape == (30,) and (model.labels_ >= 0).all()


@pytest.mark.parametrize("verbose", [0, 1, 2, False, np.True_])
def test_verbose_takes_bools_and_levels(verbose):
    X = np.random.default_rng(0).poisson(3.0, size=(20, 4))
    assert conjoined.DPMM(n_iter=3, verbose=verbose, random_state=0).fit(X).labels_.shape == (20,)


def test_gaussian_data_of_small_scale_is_clustered_as_at_unit_scale():
    X, _ = gaussian_mixture(0, n=180, K=4)
    params = {"n_iter": 30, "random_state": 0}
    unit = conjoined.DPMM(**params).fit(X)
    assert unit.n_clusters_ > 1
    for scale in (1e-10, 1e-19):
        np.testing.assert_array_equal(conjoined.DPMM(**params).fit(X * scale).labels_, unit.labels_)


def test_normal_inverse_wishart_default_psi_is_capped_at_each_features_variance_and_floored():
    X, z = gaussian_mixture(0, n=300, K=3, d=2)  # the clusters differ in the second feature only
    X = X * [100.0, 1.0]  # a noise feature in other units
    v = X.var(axis=0)
    np.testing.assert_allclose(np.diag(conjoined.NormalInverseWishart().fitted(X).psi),
                               2 * np.array([0.1 * v.mean(), v[1]]), rtol=1e-12)
    assert conjoined.NormalInverseWishart(psi="sample").fitted(X).psi[1, 1] == pytest.approx(2 * 0.1 * v.mean())
    assert adjusted_rand_score(z, conjoined.DPMM(n_iter=100, random_state=0).fit(X).labels_) == 1.0
    # uncapped, the second feature's clusters are expected 50 times wider than the whole feature: one cluster
    isotropic = conjoined.NormalInverseWishart(psi=2 * 0.1 * v.mean() * np.eye(2))
    assert conjoined.DPMM(prior=isotropic, n_iter=100, random_state=0).fit(X).n_clusters_ == 1
    # a column of spread 1e-40 next to them: its psi entry is floored where the float32 kernels hold 1 / std
    tiny = np.column_stack([X, np.random.default_rng(1).normal(size=300) * 1e-40])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with np.errstate(over="raise", invalid="raise", divide="raise"):
            model = conjoined.DPMM(n_iter=30, random_state=0).fit(tiny)
            assert np.isfinite(model.predict_proba(tiny)).all()
    assert np.isfinite(model.log_posterior_trace_).all()


@pytest.mark.parametrize("psi", [None, "sample"])
def test_gaussian_data_far_from_the_origin_are_clustered_as_near_it(psi):
    """The data are centred for the fit (raw sums of squares of points 1e9 from the origin keep no digit of their
    spread: this failed in a Cholesky before) and the results moved back. Adding the offset rounds the points by
    about 1e-7, so the chains are not bitwise the same: the clusters, their means, the prior's mean and the
    predictions are, moved by the offset."""
    X, truth = gaussian_mixture(0, n=180, K=4)
    offset = np.array([1e8, -3e9])
    prior = conjoined.NormalInverseWishart(psi=psi)
    near = conjoined.DPMM(n_iter=30, random_state=0, prior=prior).fit(X)
    far = conjoined.DPMM(n_iter=30, random_state=0, prior=prior).fit(X + offset)
    assert near.n_clusters_ == far.n_clusters_ == 4
    assert normalized_mutual_info_score(truth, near.labels_) == normalized_mutual_info_score(truth, far.labels_) == 1
    same = [near.labels_[far.labels_ == k][0] for k in range(4)]  # far cluster k is near cluster same[k]
    np.testing.assert_allclose(far.cluster_params_["mean"] - offset, near.cluster_params_["mean"][same], atol=1e-3)
    np.testing.assert_allclose(far.prior_.mean - offset, near.prior_.mean, atol=1e-5)
    np.testing.assert_array_equal(far.predict(X + offset), far.labels_)
    np.testing.assert_allclose(far.predict_proba(X + offset).max(axis=1), near.predict_proba(X).max(axis=1), atol=1e-6)


def test_sampled_scale_is_scale_free_and_traced():
    """psi="sample": the same labels for data scaled by 1e-3, the scale's trace scaled by 1e-6, and a fixed psi
    has no trace."""
    X, _ = gaussian_mixture(0, n=180, K=4)
    params = {"n_iter": 30, "random_state": 0, "prior": conjoined.NormalInverseWishart(psi="sample")}
    unit = conjoined.DPMM(**params).fit(X)
    small = conjoined.DPMM(**params).fit(X * 1e-3)
    np.testing.assert_array_equal(small.labels_, unit.labels_)
    np.testing.assert_allclose(small.psi_scale_trace_, unit.psi_scale_trace_ * 1e-6, rtol=1e-6)
    assert unit.prior_.sampled_scale and repr(unit.prior_).startswith("NormalInverseWishart(mean=array(")
    assert conjoined.DPMM(n_iter=5, random_state=0).fit(X).psi_scale_trace_ is None
    # the fitted prior, given again, goes on sampling from its last scale
    again = conjoined.DPMM(n_iter=5, random_state=0, prior=unit.prior_).fit(X)
    assert again.psi_scale_trace_ is not None and again.prior_.scale_floor == unit.prior_.scale_floor


def test_sampled_scale_on_data_in_a_flat_subspace_stops_at_its_floor():
    """Three points repeated: every cluster is flat, and p(s | X) would pile up at s = 0; the scale stops at its
    floor and the fit ends with the right clusters. (Columns constant, or linear functions of others, flat for the
    whole data, as two points repeated are, are left out of the fit: ``FeatureMap``.)"""
    points = 3
    X = np.repeat([[0.0, 0.0], [5.0, 5.0], [0.0, 5.0]], 40, axis=0)
    truth = np.repeat(np.arange(points), 40)
    model = conjoined.DPMM(n_iter=40, random_state=0, prior=conjoined.NormalInverseWishart(psi="sample")).fit(X)
    assert np.all(model.psi_scale_trace_ >= model.prior_.scale_floor)
    assert np.all(model.psi_scale_trace_[-20:] <= 1.5 * model.prior_.scale_floor)  # held near it (start: 1000x)
    assert normalized_mutual_info_score(truth, model.labels_) == pytest.approx(1.0)


def test_sampled_scale_finds_the_cell_types_of_an_embedding():
    """pbmc68k_reduced's 50 principal components (700 cells, 10 cell types): with the scale sampled, K's mode
    is near 10 and the clusters follow the types; the fixed default scale cuts them into 30 and more."""
    scanpy = pytest.importorskip("scanpy")
    adata = scanpy.datasets.pbmc68k_reduced()
    X, types = np.asarray(adata.obsm["X_pca"], dtype=np.float64), np.asarray(adata.obs["bulk_labels"])
    sampled = conjoined.DPMM(n_iter=300, random_state=0,
                             prior=conjoined.NormalInverseWishart(psi="sample")).fit(X)
    assert 8 <= posterior_mode_of_k(sampled) <= 15
    assert normalized_mutual_info_score(types, sampled.labels_) >= 0.6
    fixed = conjoined.DPMM(n_iter=300, random_state=0, prior=conjoined.NormalInverseWishart()).fit(X)
    assert posterior_mode_of_k(fixed) >= 25
    assert normalized_mutual_info_score(types, fixed.labels_) < 0.57


def test_a_failed_fit_leaves_the_fitted_model_as_it_was():
    """An error found after the features were recorded (too many initial clusters for the new data) leaves the
    previous fit whole: its features, its clusters, its predictions."""
    X, _ = gaussian_mixture(0, n=100, K=3, d=3)
    model = conjoined.DPMM(n_iter=5, random_state=0).fit(X).set_params(init_clusters=10)
    before, labels = dict(vars(model)), model.predict(X)
    with pytest.raises(ValueError, match="init_clusters"):
        model.fit(X[:4, :2])
    assert vars(model).keys() == before.keys()
    assert all(vars(model)[name] is value for name, value in before.items())
    np.testing.assert_array_equal(model.predict(X), labels)
    assert model.predict(X).dtype == model.labels_.dtype == np.int32


def test_count_priors_are_fitted_as_copies_with_float_parameters():
    X, _ = multinomial_mixture(0, n=50)
    for prior in [conjoined.Multinomial(beta=1), conjoined.PoissonGamma(shape=2, rate=np.float32(0.5))]:
        fitted = conjoined.DPMM(prior=prior, n_iter=3, random_state=0).fit(X).prior_
        assert fitted is not prior and type(fitted) is type(prior)
        assert all(type(value) is float for value in vars(fitted).values())


def test_gaussian_data_of_identical_points_are_one_cluster():
    model = conjoined.DPMM(n_iter=30, random_state=0).fit(np.full((12, 2), 0.5))
    assert model.n_clusters_ == 1


def test_input_is_not_modified():
    X, _ = multinomial_mixture(0, n=50)
    before = X.copy()
    conjoined.DPMM(n_iter=5, random_state=0).fit(X)
    np.testing.assert_array_equal(X, before)


def test_predict_checks_feature_count():
    X, _ = multinomial_mixture(0, n=50)
    model = conjoined.DPMM(n_iter=5, random_state=0).fit(X)
    with pytest.raises(ValueError, match="features"):
        model.predict(X[:, :10])


@pytest.mark.parametrize("name", ["assign_counts", "assign_gaussian"])
def test_serial_kernels_are_cached_apart_from_the_parallel_ones(name):
    # numba's cache is keyed by the function, not by parallel=True: one function compiled both ways would share
    # (and swap) its cache entries, and the "serial" kernel would start threads on every tiny pass.
    from conjoined.dpmm import kernels
    parallel, serial = getattr(kernels, name), getattr(kernels, name + "_serial")
    assert parallel.targetoptions.get("parallel") and not serial.targetoptions.get("parallel")
    assert serial.py_func.__qualname__ != parallel.py_func.__qualname__  # what numba names its cache files after
    assert serial.py_func.__code__.co_code == parallel.py_func.__code__.co_code
    assert serial.py_func.__code__.co_filename == parallel.py_func.__code__.co_filename


@pytest.mark.parametrize("prior", [conjoined.Multinomial(0.3), conjoined.PoissonGamma(shape=0.7, rate=0.2)])
def test_count_log_marginals_match_their_closed_form(prior):
    rng = np.random.default_rng(3)
    s1 = rng.poisson(2.0, size=(4, 2, 6)).astype(float)
    s1[0, 0] = 0.0  # an empty cluster
    s1[1, :, :3] = 0.0  # features without counts
    n = rng.integers(1, 9, size=(4, 2)).astype(float)
    n[0, 0] = 0.0
    got = prior.log_marginal(SufficientStats(n, s1))
    d = s1.shape[-1]
    if isinstance(prior, conjoined.Multinomial):
        b = prior.beta
        expected = gammaln(d * b) - gammaln(d * b + s1.sum(-1)) + (gammaln(s1 + b) - gammaln(b)).sum(-1)
    else:
        a, r = prior.shape, prior.rate
        expected = (a * np.log(r) - gammaln(a) + gammaln(a + s1) - (a + s1) * np.log(r + n[..., None])).sum(-1)
    assert got.shape == (4, 2)
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-10)


def count_state(prior_name, seed, n=90, K=4):
    """(X, fitted prior of the count kernels, local backend, state with sub-cluster statistics and reset flags)
    on a mixture: of counts, or of Gaussians for the diagonal prior ("diagonal")."""
    if prior_name == "diagonal":
        X, _ = gaussian_mixture(seed, n=n, K=3, d=5)
        prior = conjoined.NormalGamma(kappa=0.5).fitted(X)
    else:
        X, _ = multinomial_mixture(seed, n=n, K=3, d=12)
        prior = {"multinomial": conjoined.Multinomial(0.5), "poisson": conjoined.PoissonGamma(1.0)}[prior_name]
        prior = prior.fitted(X.astype(float))
    backend = backends.LocalBackend(prior.kernel_data(X), np.random.SeedSequence(seed).spawn(1))
    state = sampler.init(backend, K, prior)
    return X, prior, backend, state._replace(random_sub=np.arange(state.age.shape[0]) % 2 == 0)


@pytest.mark.parametrize("prior_name", ["multinomial", "poisson", "diagonal"])
@pytest.mark.parametrize("with_subclusters", [True, False])
def test_count_parameter_kernel_draws_what_the_generic_path_draws(prior_name, with_subclusters):
    _, prior, _, state = count_state(prior_name, 0)
    fast = sampler.sample_kernel_params(state, prior, 0.7, np.random.default_rng(5), with_subclusters)
    generic = sampler._sample_kernel_params_numpy(state, prior, 0.7, np.random.default_rng(5), with_subclusters)
    (log_rate, offset), log_w, (sub_log_rate, sub_offset), sub_log_w, random_sub = fast
    (g_log_rate, g_offset), g_log_w, (g_sub_log_rate, g_sub_offset), g_sub_log_w, g_random_sub = generic
    for ours, theirs in [(log_rate, g_log_rate), (offset, g_offset), (log_w, g_log_w),
                         (sub_log_rate, g_sub_log_rate), (sub_offset, g_sub_offset), (sub_log_w, g_sub_log_w)]:
        assert ours.shape == theirs.shape
        np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-12)
    assert np.array_equal(random_sub, g_random_sub)
    if with_subclusters:  # the reset clusters got hyperplanes, the others sub-cluster draws
        assert random_sub.any() and not random_sub.all()


@pytest.mark.parametrize("prior_name", ["multinomial", "poisson", "diagonal"])
def test_count_ratio_and_posterior_kernels_match_the_generic_formulas(prior_name):
    _, prior, _, state = count_state(prior_name, 1)
    stats = state.stats
    np.testing.assert_allclose(sampler.split_log_ratios(prior, 0.7, stats),
                               sampler._split_log_ratios_numpy(prior, 0.7, stats), rtol=1e-12)
    whole = stats.sum(axis=1)
    assert sampler.log_posterior(prior, 0.7, whole) == pytest.approx(
        sampler._log_posterior_numpy(prior, 0.7, whole), rel=1e-12)


@pytest.mark.parametrize("prior_name", ["multinomial", "poisson", "diagonal"])
def test_count_split_merge_kernel_makes_the_generic_moves(prior_name):
    """The fused kernel of a split/merge proposal and the generic path, from the same state and seed, accept
    the same moves and leave the same labels and statistics, move after move."""
    from conjoined.dpmm import sams
    _, prior, fast_backend, fast = count_state(prior_name, 2, K=9)
    _, _, generic_backend, generic = count_state(prior_name, 2, K=9)
    fast_rng, generic_rng = np.random.default_rng(3), np.random.default_rng(3)
    accepted = np.zeros(2, int)
    for _ in range(400):
        fast, n_splits, n_merges = sams.sams_move(fast, fast_backend, prior, 1.0, fast_rng)
        generic, *moves = sams._sams_move_numpy(generic, generic_backend, prior, 1.0, generic_rng)
        assert [n_splits, n_merges] == moves
        accepted += moves
        assert np.array_equal(fast_backend.all_labels(), generic_backend.all_labels())
        for ours, theirs in [(fast.stats.n, generic.stats.n), (fast.stats.s1, generic.stats.s1),
                             (fast.age, generic.age), (fast.random_sub, generic.random_sub)]:
            np.testing.assert_array_equal(ours, theirs)
    assert accepted.min() > 0, accepted  # both kinds of move were exercised
    labels = fast_backend.all_labels()
    K = fast.age.shape[0]
    assert np.array_equal(fast.stats.sum(axis=1).n, np.bincount(labels, minlength=K))


def test_kernel_permutation_draws_what_numpy_draws():
    """The split/merge kernel's shuffle orders as numpy's ``Generator.permutation``, from the same draws, and
    leaves the generator where numpy leaves it (sizes 0 and 1 draw nothing)."""
    from conjoined.dpmm.kernels import _permuted
    for n in [0, 1, 2, 3, 17, 1000]:
        values = np.arange(n, dtype=np.int64) * 7 + 5
        for seed in range(4):
            ours, numpy_rng = np.random.default_rng(seed), np.random.default_rng(seed)
            np.testing.assert_array_equal(_permuted(ours, values), numpy_rng.permutation(values))
            assert ours.random() == numpy_rng.random()
        np.testing.assert_array_equal(values, np.arange(n) * 7 + 5)  # a copy is shuffled


@pytest.mark.parametrize("prior_name", ["multinomial", "poisson", "diagonal", "gaussian"])
def test_point_moves_kernels_make_the_generic_moves(prior_name):
    """The fused kernel of the single-point moves (for the Gaussian prior, Cholesky factors updated by rank one)
    and the generic path (log marginal differences), from the same state and draws, give the same labels and
    statistics, while clusters open and close."""
    from conjoined.dpmm import point_moves
    if prior_name == "gaussian":
        (_, prior, fast_backend, fast), (_, _, generic_backend, generic) = (sampler_setup(True, 4, 180, 1, 12)
                                                                            for _ in range(2))
        alpha, n_moves = 30.0, 40
    else:
        (_, prior, fast_backend, fast), (_, _, generic_backend, generic) = (count_state(prior_name, 4, K=6)
                                                                            for _ in range(2))
        alpha, n_moves = (30.0, 40) if prior_name == "diagonal" else (2.0, 20)
    opened = closed = 0
    for seed in range(30):
        fast, o, c = point_moves.point_moves(fast, fast_backend, prior, alpha, np.random.default_rng(seed), n_moves)
        draws = point_moves._draw_points(generic_backend.n_points, n_moves, np.random.default_rng(seed))
        stats, n_slots = point_moves._point_moves_numpy(generic, generic_backend, prior, alpha, *draws)
        K = generic.age.shape[0]
        generic = sampler.DPMMState(stats, np.ones(stats.n.shape[0], np.int64), np.ones(stats.n.shape[0], bool))
        assert (o, c) == (n_slots - K, n_slots - stats.n.shape[0])
        opened, closed = opened + o, closed + c
        assert np.array_equal(fast_backend.all_labels(), generic_backend.all_labels())
        np.testing.assert_array_equal(fast.stats.n, generic.stats.n)
        if prior_name == "gaussian":  # sums of floats, added in other orders
            np.testing.assert_allclose(fast.stats.s1, generic.stats.s1, rtol=1e-12, atol=1e-9)
            np.testing.assert_allclose(fast.stats.s2, generic.stats.s2, rtol=1e-12, atol=1e-9)
        else:
            np.testing.assert_array_equal(fast.stats.s1, generic.stats.s1)
    assert opened > 0 and closed > 0, (opened, closed)


def test_niw_draws_have_the_posterior_moments():
    """Batched draws of (mu, precision) from one NIW posterior: E[precision] = nu_n Psi_n^-1, Var of its diagonal
    2 nu_n (Psi_n^-1)_ii^2, E[mu] = mean_n and Cov(mu) = Psi_n / (kappa_n (nu_n - d - 1))."""
    d, draws = 3, 20000
    psi_n = np.array([[2.0, 0.5, 0.0], [0.5, 1.0, 0.3], [0.0, 0.3, 1.5]])
    kappa_n, nu_n, mean_n = 2.0, 8.0, np.array([1.0, -2.0, 0.5])
    posterior = (np.full(draws, kappa_n), np.tile(mean_n, (draws, 1)), np.full(draws, nu_n),
                 np.tile(psi_n, (draws, 1, 1)))
    prior = conjoined.NormalInverseWishart(kappa=1.0, nu=5.0)
    mu, chol_prec, log_det = prior.sample(posterior, np.random.default_rng(0))
    assert np.allclose(np.tril(chol_prec, -1), 0.0)
    assert chol_prec.flags.c_contiguous  # else numba compiles the pass for strided arrays, and warns
    precision = np.swapaxes(chol_prec, -1, -2) @ chol_prec
    np.testing.assert_allclose(log_det, 0.5 * np.linalg.slogdet(precision)[1], rtol=1e-10)
    scale = np.linalg.inv(psi_n)
    np.testing.assert_allclose(precision.mean(axis=0), nu_n * scale, atol=0.15)  # nu off by one: 1.2
    np.testing.assert_allclose(precision[:, np.arange(d), np.arange(d)].var(axis=0),
                               2 * nu_n * np.diag(scale) ** 2, rtol=0.06)
    np.testing.assert_allclose(mu.mean(axis=0), mean_n, atol=0.015)
    np.testing.assert_allclose(np.cov(mu.T), psi_n / (kappa_n * (nu_n - d - 1)), atol=0.012)


def test_count_split_merge_kernel_on_clusters_of_one_and_two_points():
    """Proposals whose clusters hold one or two points (no other point to allocate) are decided like the
    generic path's."""
    from conjoined.dpmm import sams
    X = np.array([[5, 0, 0], [4, 1, 0], [0, 6, 1], [0, 0, 7]])
    prior = conjoined.Multinomial(0.5).fitted(X.astype(float))
    results = []
    for move in (sams.sams_move, sams._sams_move_numpy):
        backend = backends.LocalBackend(sp.csr_matrix(X), np.random.SeedSequence(0).spawn(1))
        state = sampler.init(backend, 4, prior)
        rng = np.random.default_rng(1)
        trace = []
        for _ in range(300):
            state, n_splits, n_merges = move(state, backend, prior, 1.0, rng)
            trace.append((n_splits, n_merges, tuple(backend.all_labels())))
        results.append(trace)
    assert results[0] == results[1]
    assert sum(t[0] for t in results[0]) > 0 and sum(t[1] for t in results[0]) > 0


@parametrize_with_checks(
    [conjoined.DPMM(n_iter=10, random_state=0),
     conjoined.DPMM(prior=conjoined.NormalGamma(), n_iter=10, random_state=0)],
    # sparse input is read as counts (the count priors' data); sparse non-count data is refused with an error
    # naming the values, and dense data of any kind takes the Gaussian prior
    expected_failed_checks=lambda estimator: {
        "check_estimator_sparse_tag": "sparse input is read as counts; sklearn's sparse check feeds floats"},
)
def test_sklearn_compatible(estimator, check):
    check(estimator)


def test_dataframe_column_names_are_kept_and_checked():
    pd = pytest.importorskip("pandas")
    check_dataframe_column_names_consistency("DPMM", conjoined.DPMM(n_iter=10, random_state=0))
    X = pd.DataFrame(np.random.default_rng(0).poisson(3.0, size=(40, 4)), columns=["a", "b", "c", "d"])
    model = conjoined.DPMM(n_iter=10, random_state=0).fit(X)
    assert model.feature_names_in_.tolist() == ["a", "b", "c", "d"]
    with pytest.raises(ValueError, match="Feature names must be in the same order"):
        model.predict(X[["d", "c", "b", "a"]])
    with pytest.raises(ValueError, match="2-dimensional"):
        model.predict([1, 2, 3, 4])
    # names that cannot be used (strings mixed with numbers) fail before the work, leaving the last fit whole
    labels = model.labels_.copy()
    mixed = pd.DataFrame(np.ones((40, 5)), columns=["a", "b", "c", "d", 4])
    with pytest.raises(TypeError, match="Feature names are only supported if all input features have string"):
        model.fit(mixed)
    assert model.n_features_in_ == 4 and model.feature_names_in_.tolist() == ["a", "b", "c", "d"]
    np.testing.assert_array_equal(model.labels_, labels)
    model.predict(X)


def test_overlapping_fits_under_numba_workqueue_threading_layer():
    # numba's workqueue layer (where neither OpenMP nor TBB is found) aborts the whole process when two threads
    # run parallel kernels at once: the passes then take turns, with the same results
    script = textwrap.dedent("""
        import threading
        import numba
        import numpy as np
        import scipy.sparse as sp
        import conjoined
        from conjoined.dpmm import backends

        backends.PARALLEL_MIN_WORK = 0
        X = sp.csr_matrix(np.random.default_rng(0).poisson(2.0, size=(400, 30)))
        alone = conjoined.DPMM(n_iter=15, random_state=1, n_jobs=1).fit(X).labels_trace_
        fits = {}

        fitted = conjoined.DPMM(n_iter=15, random_state=1, n_jobs=2).fit(X)
        expected = fitted.predict_proba(X)

        def fit(name):
            fits[name] = conjoined.DPMM(n_iter=15, random_state=1, n_jobs=2).fit(X).labels_trace_

        def predict():  # predict's kernels are parallel too
            fits["predicted"] = all(np.array_equal(fitted.predict_proba(X), expected) for _ in range(20))

        threads = [threading.Thread(target=fit, args=(name,)) for name in range(3)]
        threads.append(threading.Thread(target=predict))
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert fits.pop("predicted") is True
        assert len(fits) == 3 and all(np.array_equal(labels, alone) for labels in fits.values())
        print(numba.threading_layer())
    """)
    environment = {**os.environ, "NUMBA_THREADING_LAYER": "workqueue", "NUMBA_NUM_THREADS": "2"}
    result = subprocess.run([sys.executable, "-c", script], env=environment, capture_output=True, text=True,
                            timeout=300, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split() == ["workqueue"]


def test_normal_gamma_marginal_is_a_product_of_one_dimensional_normal_inverse_wisharts():
    # a Gamma(a, b) precision is a one-dimensional inverse Wishart(2a, 2b) variance
    X = np.random.default_rng(0).normal(size=(7, 3)) * [1.0, 3.0, 0.2] + [5.0, -1.0, 0.0]
    prior = conjoined.NormalGamma(kappa=0.3, mean=[4.0, 0.0, 1.0], shape=1.7, rate=0.4).fitted(X)
    rows = prior.kernel_data(X).toarray()
    z = rows[:, :3]
    np.testing.assert_array_equal(rows[:, 3:], z * z)
    for members in ([0], [1, 4], list(range(7))):
        stats = SufficientStats(np.array([float(len(members))]), rows[members].sum(axis=0)[None])
        expected = sum(
            conjoined.NormalInverseWishart(kappa=0.3, mean=prior.mean[[f]], nu=3.4, psi=[[2 * prior.rate[f]]])
            .fitted(z[:, [f]]).log_marginal(SufficientStats(np.array([float(len(members))]),
                                                            z[members][:, [f]].sum(axis=0)[None],
                                                            (z[members][:, [f]].T @ z[members][:, [f]])[None]))[0]
            for f in range(3))
        assert prior.log_marginal(stats)[0] == pytest.approx(expected, rel=1e-12)
    # the prior's mean and rate were given in X's units; z's are each feature's standardised ones
    np.testing.assert_allclose(prior.spread, X.std(axis=0))
    np.testing.assert_allclose(prior.mean * prior.spread + prior.center, [4.0, 0.0, 1.0])
    np.testing.assert_allclose(prior.rate, 0.4 / prior.spread ** 2)


def test_normal_gamma_separates_clusters_in_a_hundred_dimensions():
    # full covariances cost d(d+3)/2 parameters a cluster, which 200 points cannot pay for in 100 dimensions
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(3, 100))
    z = np.repeat([0, 1, 2], 200)
    X = centres[z] + rng.normal(size=(600, 100)) + 50.0
    model = conjoined.DPMM(prior=conjoined.NormalGamma(), n_iter=40, random_state=0).fit(X)
    assert model.n_clusters_ == 3 and normalized_mutual_info_score(z, model.labels_) == 1.0
    np.testing.assert_array_equal(model.predict(X), model.labels_)
    means, variances = model.cluster_params_["mean"], model.cluster_params_["variance"]
    order = [np.bincount(model.labels_[z == k]).argmax() for k in range(3)]
    np.testing.assert_allclose(means[order], centres + 50.0, atol=0.3)  # in X's units
    np.testing.assert_allclose(variances[order].mean(axis=1), 1.0, atol=0.1)
    full = conjoined.DPMM(prior=conjoined.NormalInverseWishart(), n_iter=40, random_state=0).fit(X)
    assert full.n_clusters_ < 3
    # the default from 50 features on
    assert isinstance(conjoined.DPMM(n_iter=2).fit(X).prior_, conjoined.NormalGamma)
    assert isinstance(conjoined.DPMM(n_iter=2).fit(X[:, :49]).prior_, conjoined.NormalInverseWishart)


def test_normal_gamma_gives_the_same_chain_on_any_number_of_threads(monkeypatch):
    # the data sit on a grid on which sums are exact, in whatever order threads add them
    monkeypatch.setattr(backends, "PARALLEL_MIN_WORK", 0)
    X, z = gaussian_mixture(3, n=600, K=5, d=6)
    runs = [conjoined.DPMM(prior=conjoined.NormalGamma(), n_iter=30, random_state=2, n_jobs=j).fit(X * 1e-3 + 7.0)
            for j in (1, 2)]
    np.testing.assert_array_equal(runs[0].labels_trace_, runs[1].labels_trace_)
    np.testing.assert_array_equal(runs[0].log_posterior_trace_, runs[1].log_posterior_trace_)
    assert normalized_mutual_info_score(z, runs[0].labels_) == 1.0


@pytest.mark.parametrize("X, prior, message", [
    (sp.csr_matrix(np.eye(4)), conjoined.NormalGamma(), "NormalGamma prior needs dense data"),
    (GAUSSIAN, conjoined.NormalGamma(kappa=0.0), "NormalGamma kappa"),
    (GAUSSIAN, conjoined.NormalGamma(shape=-1.0), "NormalGamma shape"),
    (GAUSSIAN, conjoined.NormalGamma(rate=np.inf), "NormalGamma rate"),
    (GAUSSIAN, conjoined.NormalGamma(mean=[0.0, 1.0]), r"NormalGamma mean must have shape \(3,\)"),
    (np.vstack([GAUSSIAN, [[1e200, 0.0, 0.0]]]), conjoined.NormalGamma(rate=1.0), "leaves the float range"),
])
def test_bad_normal_gamma_input_is_named(X, prior, message):
    with pytest.raises(ValueError, match=message):
        conjoined.DPMM(prior=prior, n_iter=2).fit(X)


def test_normal_gamma_keeps_features_of_any_scale():
    # each feature is standardised before the grid: a noise feature of spread 1e7 does not round the others away;
    # and the default rate caps each feature's prior variance at its own, so that the tenth of the mean variance
    # (which that feature dominates) does not hold the others' clusters 1e12 times too wide. Capped, a feature's
    # prior is as wide as the feature itself, and the sampler takes longer to split the clusters along it.
    X, z = gaussian_mixture(0, n=300, K=3, d=2)
    X = np.column_stack([np.random.default_rng(1).normal(scale=1e7, size=300), X])
    for prior, n_iter in ((conjoined.NormalGamma(), 300), (conjoined.NormalGamma(rate=0.1 * X.var(axis=0)), 40)):
        model = conjoined.DPMM(prior=prior, n_iter=n_iter, random_state=0).fit(X)
        assert adjusted_rand_score(z, model.labels_) == 1.0
    # one rate for every feature, the uncapped prior, merges them
    isotropic = conjoined.NormalGamma(rate=0.1 * X.var(axis=0).mean())
    assert conjoined.DPMM(prior=isotropic, n_iter=40, random_state=0).fit(X).n_clusters_ == 1


def test_normal_gamma_default_rate_is_a_tenth_of_the_mean_variance_capped_at_each_features():
    X = np.random.default_rng(0).normal(size=(200, 3)) * [10.0, 1.0, 0.01]
    prior = conjoined.NormalGamma().fitted(X)
    variance = X.var(axis=0)
    in_x_units = prior.rate * prior.spread ** 2
    np.testing.assert_allclose(in_x_units, np.minimum(0.1 * variance.mean(), variance), rtol=1e-12)
    assert in_x_units[0] == pytest.approx(0.1 * variance.mean()) and in_x_units[2] == pytest.approx(variance[2])


@pytest.mark.parametrize("prior", [conjoined.NormalInverseWishart(), conjoined.NormalGamma()],
                         ids=["full", "diagonal"])
def test_constant_features_change_nothing(prior):
    # exactly constant, a feature would add sum_k lgamma(n_k / 2 + ...) to the log marginal, which grows as n log n
    # and merged these three clusters into one (full covariances; K = 4 and 7 on two seeds without it)
    X, _ = three_clusters_2d()
    with_constants = np.column_stack([np.full(300, 3.0), X[:, 0], np.zeros(300), X[:, 1]])
    plain = conjoined.DPMM(prior=prior, n_iter=50, random_state=0).fit(X)
    model = conjoined.DPMM(prior=prior, n_iter=50, random_state=0).fit(with_constants)
    assert model.n_clusters_ > 1
    np.testing.assert_array_equal(model.labels_, plain.labels_)
    np.testing.assert_allclose(model.log_posterior_trace_, plain.log_posterior_trace_, rtol=1e-14)
    np.testing.assert_allclose(model.predict_proba(with_constants), plain.predict_proba(X), rtol=1e-12, atol=1e-300)
    # the constant features' parameters: their value, no spread; the others' as without them
    params, plain_params = model.cluster_params_, plain.cluster_params_
    np.testing.assert_array_equal(params["mean"][:, [0, 2]], np.tile([3.0, 0.0], (model.n_clusters_, 1)))
    np.testing.assert_allclose(params["mean"][:, [1, 3]], plain_params["mean"], rtol=1e-12)
    if "covariance" in params:
        assert params["covariance"].shape == (model.n_clusters_, 4, 4)
        assert not params["covariance"][:, [0, 2]].any() and not params["covariance"][:, :, [0, 2]].any()
        np.testing.assert_allclose(params["covariance"][:, 1::2, 1::2], plain_params["covariance"], rtol=1e-12)
    else:
        assert not params["variance"][:, [0, 2]].any()
        np.testing.assert_allclose(params["variance"][:, [1, 3]], plain_params["variance"], rtol=1e-12)
    # a fitted prior keeps its features, and names a data set of another width
    again = conjoined.DPMM(prior=model.prior_, n_iter=5, random_state=0).fit(with_constants)
    assert again.cluster_params_["mean"].shape == (again.n_clusters_, 4)
    with pytest.raises(ValueError, match="X has 2 features; the fitted .* prior was fitted on 4"):
        conjoined.DPMM(prior=model.prior_, n_iter=5).fit(X)


def three_clusters_2d():
    rng = np.random.default_rng(0)
    z = np.arange(300) % 3
    return rng.normal(scale=6, size=(3, 2))[z] + rng.standard_normal((300, 2)), z


@pytest.mark.parametrize("extra", ["sum", "nearly the sum", "proportions"])
def test_full_covariances_leave_out_columns_that_are_linear_functions_of_others(extra):
    # a direction flat for the whole data is flat for every cluster: like a constant column it merged the clusters
    # (K = 1 on seeds 0 and 1 with the sum column or it plus 1e-6 noise; proportions summing to 1: K = 2)
    X, z = three_clusters_2d()
    if extra == "proportions":
        X = np.exp(np.column_stack([X, np.zeros(300)]) / 4)
        X, kept = X / X.sum(axis=1, keepdims=True), X[:, :2] / X.sum(axis=1, keepdims=True)
    else:
        noise = 1e-6 * np.random.default_rng(1).normal(size=300) if extra == "nearly the sum" else 0.0
        X, kept = np.column_stack([X, X.sum(axis=1) + noise]), X
    model = conjoined.DPMM(n_iter=50, random_state=0).fit(X)
    plain = conjoined.DPMM(n_iter=50, random_state=0).fit(kept)
    assert "feature_map" not in vars(plain.prior_)  # nothing left out: the fitted prior is as before
    np.testing.assert_array_equal(model.prior_.feature_map.features, [0, 1])
    np.testing.assert_array_equal(model.labels_, plain.labels_)
    assert model.n_clusters_ > 1
    # the left-out column's parameters are those of its function of the others
    mean, covariance = model.cluster_params_["mean"], model.cluster_params_["covariance"]
    np.testing.assert_allclose(mean[:, :2], plain.cluster_params_["mean"], rtol=1e-10)
    if extra == "sum":
        np.testing.assert_allclose(mean[:, 2], mean[:, :2].sum(axis=1), rtol=1e-10)
        np.testing.assert_allclose(covariance[:, 2, 2], covariance[:, :2, :2].sum(axis=(1, 2)), rtol=1e-10)
    np.testing.assert_allclose(model.predict_proba(X), plain.predict_proba(kept), rtol=1e-9, atol=1e-300)


def test_a_fitted_prior_refuses_data_where_a_left_out_column_varies():
    X, _ = three_clusters_2d()
    for prior in (conjoined.NormalInverseWishart(), conjoined.NormalGamma()):
        fitted = conjoined.DPMM(prior=prior, n_iter=5, random_state=0).fit(np.column_stack([X, np.full(300, 3.0)]))
        changed = np.column_stack([X, 3.0 + np.random.default_rng(1).normal(size=300)])
        with pytest.raises(ValueError, match=r"left out X's column\(s\) \[2\], constant or a linear function"):
            conjoined.DPMM(prior=fitted.prior_, n_iter=5).fit(changed)
        with pytest.raises(ValueError, match=r"left out X's column\(s\) \[2\]"):
            conjoined.DPMM(prior=fitted.prior_, n_iter=5).fit(np.column_stack([X, np.full(300, 4.0)]))


def test_given_hyper_parameters_are_checked_before_constant_columns_are_left_out():
    X = np.column_stack([three_clusters_2d()[0], np.zeros(300)])
    with pytest.raises(ValueError, match="psi must be symmetric positive definite; it is not positive definite"):
        conjoined.DPMM(prior=conjoined.NormalInverseWishart(psi=np.diag([1.0, 1.0, -1.0])), n_iter=2).fit(X)
    with pytest.raises(ValueError, match="NormalGamma rate must be positive in every feature"):
        conjoined.DPMM(prior=conjoined.NormalGamma(rate=[1.0, 1.0, -1.0]), n_iter=2).fit(X)


def test_the_default_prior_counts_varying_features():
    X = np.random.default_rng(0).normal(size=(100, 48))
    assert isinstance(default_prior(np.column_stack([X, np.ones((100, 2))])), conjoined.NormalInverseWishart)
    assert isinstance(default_prior(np.column_stack([X, X[:, :2]])), conjoined.NormalGamma)


def test_normal_gamma_with_a_tiny_shape_draws_finite_scores():
    # an empty sub-cluster's precision, Gamma(1e-3), underflows to 0: drawn by its log, the scores stay finite
    X, z = gaussian_mixture(0, n=300, K=3, d=3)
    model = conjoined.DPMM(prior=conjoined.NormalGamma(shape=1e-3), n_iter=30, random_state=0).fit(X)
    assert np.isfinite(model.log_posterior_trace_).all()
    log_rate, offset = model.prior_.sample(model.prior_.posterior(SufficientStats(np.zeros(4), np.zeros((4, 6)))),
                                           np.random.default_rng(0))
    assert np.isfinite(log_rate).all() and np.isfinite(offset).all()


def test_a_fitted_normal_gamma_prior_keeps_its_coordinates_and_takes_a_grid_for_new_data():
    small, _ = gaussian_mixture(0, n=60, K=3, d=3)
    prior = conjoined.DPMM(prior=conjoined.NormalGamma(), n_iter=3, random_state=0).fit(small).prior_
    assert prior.grid == 20
    large = np.tile(small, (100, 1)) + 5.0
    again = prior.fitted(large)
    np.testing.assert_array_equal(again.center, prior.center)
    np.testing.assert_array_equal(again.rate, prior.rate)
    assert again.grid < 20
    squares = again.kernel_data(large).toarray()[:, 3:]
    assert squares.sum(axis=0).max() * 4.0 ** again.grid < 2.0 ** 53
    with pytest.raises(ValueError, match="values too far from the NormalGamma prior's fitted data"):
        conjoined.DPMM(prior=conjoined.NormalGamma(), n_iter=3, random_state=0).fit(small).predict(
            np.full((1, 3), 1e200))


def test_normal_gamma_refuses_data_it_cannot_sum_exactly(monkeypatch):
    # the grid's coarsest step is reached with n d beyond 2^40; the 30 x 3 points here reach a grid of 2^-20
    monkeypatch.setattr(conjoined.NormalGamma, "COARSEST_GRID", 21)
    with pytest.raises(ValueError, match=r"too many points \(30\), or values too far from the fitted ones"):
        conjoined.DPMM(prior=conjoined.NormalGamma(), n_iter=2).fit(GAUSSIAN)


def test_a_chain_started_from_given_labels():
    # CDP starts its first mixtures from given labels (its spectral start): the chain's first state is that
    # partition, renumbered by first appearance, and a wrong labelling is refused
    rng = np.random.default_rng(0)
    X = np.vstack([rng.poisson(lam, size=(30, 6)) for lam in ([20, 1, 1, 1, 1, 1], [1, 1, 1, 20, 20, 1])])
    truth = np.repeat([7, 3], 30)
    model = conjoined.DPMM(prior=conjoined.PoissonGamma(), n_iter=1, warmup=0, exact_moves=0, random_state=0)
    model._fit(X, init_labels=truth)
    np.testing.assert_array_equal(model.labels_, np.repeat([0, 1], 30))
    with pytest.raises(ValueError, match="init_labels must be 60 integer labels"):
        model._fit(X, init_labels=truth[:10])
    with pytest.raises(ValueError, match="init_labels must be 60 integer labels"):
        model._fit(X, init_labels=truth.astype(float))
