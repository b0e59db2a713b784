"""The sampler's trace against the exact posterior over partitions of a handful of points."""

import numpy as np
import pytest
from scipy.special import gammaln

import conjoined
from conjoined.dpmm.priors import SufficientStats


def set_partitions(items):
    if not items:
        yield []
        return
    first, rest = items[0], items[1:]
    for partition in set_partitions(rest):
        yield [[first]] + partition
        for i in range(len(partition)):
            yield partition[:i] + [[first] + partition[i]] + partition[i + 1:]


def cluster_stats(X, members, gaussian):
    pts = X[members]
    return SufficientStats(np.array(float(len(members))), pts.sum(axis=0), pts.T @ pts if gaussian else None)


def exact_posterior(X, prior, alpha):
    """Exact distribution of K and the co-assignment matrix by enumerating every partition."""
    n = X.shape[0]
    gaussian = isinstance(prior, conjoined.NormalInverseWishart)
    if isinstance(prior, conjoined.NormalGamma):  # its statistics are sums of the rows (z, z^2)
        X = prior.kernel_data(X).toarray()
    log_p, ks, coassign = [], [], []
    for partition in set_partitions(list(range(n))):
        lp = 0.0
        c = np.zeros((n, n))
        for members in partition:
            lp += np.log(alpha) + gammaln(len(members)) + prior.log_marginal(cluster_stats(X, members, gaussian))
            c[np.ix_(members, members)] = 1
        log_p.append(lp)
        ks.append(len(partition))
        coassign.append(c)
    p = np.exp(np.array(log_p) - np.max(log_p))
    p /= p.sum()
    k_dist = np.bincount(ks, weights=p, minlength=n + 1)
    return k_dist, np.tensordot(p, np.array(coassign), axes=1)


def trace_summaries(labels_trace, n):
    ks = np.array([len(np.unique(row)) for row in labels_trace])
    k_dist = np.bincount(ks, minlength=n + 1) / len(ks)
    co = (labels_trace[:, :, None] == labels_trace[:, None, :]).mean(axis=0)
    return k_dist, co


CASES = {
    "multinomial": (
        np.array([[5, 0, 1], [4, 1, 0], [0, 5, 1], [1, 4, 0], [2, 2, 2]]),
        conjoined.Multinomial(beta=1.0),
        1.0,
    ),
    "poisson": (
        np.array([[3, 0], [4, 1], [0, 3], [1, 5], [2, 2], [9, 8]]),
        conjoined.PoissonGamma(shape=1.0, rate=0.5),
        1.0,
    ),
    "gaussian": (
        np.array([[0.0], [0.3], [2.0], [2.4], [1.1]]),
        conjoined.NormalInverseWishart(kappa=0.5, mean=np.array([1.0]), nu=3.0, psi=np.array([[0.5]])),
        1.0,
    ),
    "diagonal": (
        np.array([[0.0, 1.0], [0.3, 1.2], [2.0, -0.5], [2.4, -0.2], [1.1, 0.4]]),
        conjoined.NormalGamma(kappa=0.5, mean=np.array([1.0, 0.5]), shape=1.5, rate=0.3),
        1.0,
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_trace_matches_exact_posterior(name):
    X, prior, alpha = CASES[name]
    n = X.shape[0]
    fitted_prior = prior.fitted(X.astype(float))
    k_exact, co_exact = exact_posterior(X.astype(float), fitted_prior, alpha)
    model = conjoined.DPMM(alpha=alpha, prior=prior, n_iter=12000, burn_out=0, random_state=1, n_jobs=1)
    model.fit(X)
    assert model.warmup_ == 6000
    k_est, co_est = trace_summaries(model.labels_trace_[model.warmup_:], n)
    tv_k = 0.5 * np.abs(k_est - k_exact).sum()
    assert tv_k <= 0.05, (k_exact, k_est)
    assert np.abs(co_est - co_exact).max() <= 0.05, (co_exact, co_est)


def test_subcluster_moves_alone_are_biased_which_is_why_warmup_ends():
    """Documents the reason for the warm-up/exact split: with Chang & Fisher's sub-cluster splits and merges
    the chain does not reproduce the enumerated posterior on tiny data (total variation about 0.1)."""
    X, prior, alpha = CASES["multinomial"]
    k_exact, _ = exact_posterior(X.astype(float), prior.fitted(X.astype(float)), alpha)
    model = conjoined.DPMM(alpha=alpha, prior=prior, n_iter=6000, warmup=6000, exact_moves=0, burn_out=0,
                           random_state=1, n_jobs=1).fit(X)
    k_est, _ = trace_summaries(model.labels_trace_[500:], X.shape[0])
    assert 0.5 * np.abs(k_est - k_exact).sum() > 0.05


def test_sampled_scale_matches_exact_posterior():
    """``NormalInverseWishart(psi="sample")``: the chain targets p(partition, s | X) with psi = s I and p(s) ~ 1/s.
    Exact: each partition's weight integrated over log s on a grid; K, co-assignments and E[log s] from the
    trace against it."""
    X, fixed, alpha = CASES["gaussian"]
    prior = conjoined.NormalInverseWishart(kappa=fixed.kappa, mean=fixed.mean, nu=fixed.nu, psi="sample")
    fitted = prior.fitted(X)
    assert fitted.sampled_scale
    log_s = np.linspace(np.log(fitted.scale_floor), np.log(1e5), 4001)  # p(s) ~ 1/s on s >= the floor
    n = X.shape[0]
    log_w, ks, coassign = [], [], []
    for partition in set_partitions(list(range(n))):
        lp = np.zeros_like(log_s)
        c = np.zeros((n, n))
        for members in partition:
            stats = cluster_stats(X, members, True)
            lp += np.log(alpha) + gammaln(len(members)) + np.array(
                [fitted.with_scale(np.exp(t)).log_marginal(stats) for t in log_s])
            c[np.ix_(members, members)] = 1
        log_w.append(lp)  # p(s) ds = d log s: a uniform weight on the grid of log s
        ks.append(len(partition))
        coassign.append(c)
    log_w = np.array(log_w)
    joint = np.exp(log_w - log_w.max())
    joint /= joint.sum()
    p = joint.sum(axis=1)
    k_exact = np.bincount(ks, weights=p, minlength=n + 1)
    co_exact = np.tensordot(p, np.array(coassign), axes=1)
    mean_log_s = float((joint.sum(axis=0) * log_s).sum())

    model = conjoined.DPMM(alpha=alpha, prior=prior, n_iter=12000, burn_out=0, random_state=1, n_jobs=1).fit(X)
    k_est, co_est = trace_summaries(model.labels_trace_[model.warmup_:], n)
    assert 0.5 * np.abs(k_est - k_exact).sum() <= 0.05, (k_exact, k_est)
    assert np.abs(co_est - co_exact).max() <= 0.05, (co_exact, co_est)
    log_scale = np.log(model.psi_scale_trace_[model.warmup_:])
    assert abs(log_scale.mean() - mean_log_s) <= 0.1 * log_scale.std(), (mean_log_s, log_scale.mean())
    assert model.prior_.psi[0, 0] == model.psi_scale_trace_[-1]


def test_sampled_scale_given_the_partition_follows_its_exact_conditional():
    """In 3-d, the partition fixed: repeated draws of s against p(s | partition, X), integrated on a grid over
    log s (the chain's check above is 1-d; this one holds the factor d of the Gamma shape)."""
    rng = np.random.default_rng(0)
    X = np.concatenate([rng.normal(size=(6, 3)), rng.normal(4.0, 0.5, size=(5, 3))])
    fitted = conjoined.NormalInverseWishart(psi="sample").fitted(X)
    clusters = [list(range(6)), list(range(6, 11))]
    stats = [cluster_stats(X, members, True) for members in clusters]
    log_s = np.linspace(np.log(fitted.scale_floor), np.log(1e4), 6001)
    log_density = np.array([sum(fitted.with_scale(np.exp(t)).log_marginal(c) for c in stats) for t in log_s])
    weights = np.exp(log_density - log_density.max())
    weights /= weights.sum()
    exact_mean = float((weights * log_s).sum())
    exact_sd = float(np.sqrt((weights * (log_s - exact_mean) ** 2).sum()))
    batch = SufficientStats(np.array([c.n for c in stats]), np.stack([c.s1 for c in stats]),
                            np.stack([c.s2 for c in stats]))
    prior, draws = fitted, []
    for _ in range(20000):  # a chain: each draw of s is a Gibbs step from the last
        prior = prior.resampled(batch, rng)
        draws.append(np.log(prior.psi[0, 0]))
    draws = np.array(draws[500:])
    assert abs(draws.mean() - exact_mean) <= 0.1 * exact_sd, (draws.mean(), exact_mean)
    assert abs(draws.std() - exact_sd) <= 0.1 * exact_sd, (draws.std(), exact_sd)
