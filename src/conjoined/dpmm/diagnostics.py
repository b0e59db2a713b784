"""Whether a chain has settled: a trend test on a trace, with the trace's own autocorrelation as the yardstick.

A chain whose log posterior still rises, or falls, over its samples has not reached its stationary distribution:
its last sample, its number of clusters and any average over its trace describe where it started as much as the
posterior. ``trend`` fits a line to the trace's ranks (a rise of any shape is a straight line in its ranks) and
divides its slope by a standard error that allows for the autocorrelation of the ranks about that line, or about
a parabola when they curve (a climb that levels off): their integrated autocorrelation time by Geyer's initial
monotone sequence, after Stan and ArviZ (without their correction for a short single chain, which makes it a little
larger here: 5-12% at 50-75 samples). Taken about the fitted curve, not about the mean, it keeps a trend from
widening its own yardstick. A trend counts only if the last half of the trace still moves that way: a chain that
climbed and then stayed put has settled, late.

For a stationary trace the statistic is about standard normal while the trace is long against its autocorrelation
time: AR(1) traces of 50 samples give |z| > 4 in 0.1% of draws at time 1, 0.5% at time 3, 4.3% at time 9, and are
called unsettled in 0.1%, 0.45% and 3.3% (``benchmarks/chain_diagnostics.py``; traces of 20-25 samples about twice
as often). A chain whose samples are that
strongly correlated has few independent samples to show, and a warning about it is not wholly false. The test sees
a drift, not a chain stuck in one mode: a chain that passes may still have the posterior's other modes to visit.
Nor does it see a move confined to the end of the trace, or one that turns back: a chain flat for 40 samples that
falls by 13 standard deviations over its last 10 is called unsettled in 13% of draws, one that rises over 40 and
falls back over 10 in none.

A chain stuck in one mode shows only beside other chains: ``compare_chains`` takes several fits of one model to the
same data from different seeds and reads their traces together (rank-normalised split R-hat, Vehtari et al. 2021,
of the log posterior and of K), pools their samples of K, and measures how far their partitions agree.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy.stats import norm, rankdata
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import adjusted_rand_score
from sklearn.utils.validation import check_is_fitted

# |z| above which a trend is reported: 4 standard errors, where stationary traces of 50 samples or more with an
# autocorrelation time up to 3 stay below in 99.5% of draws
TREND_Z_MAX = 4.0
# |late_z| above which a trend found over the whole trace counts as still under way at its end (1: a last half that
# goes the same way by one standard error; 2 halved the power against a steady climb)
LATE_Z_MIN = 1.0
# a drift of the log posterior by less than this (nats) over the samples is not reported: it changes no conclusion
MIN_LOG_POSTERIOR_CHANGE = 1.0
# fewer samples than this are not tested: the autocorrelation time of a shorter trace is too uncertain
MIN_TREND_SAMPLES = 20
# R-hat above which chains are not taken to sample one distribution (Vehtari et al. 2021); short chains of
# correlated samples exceed it too: they cannot yet show that they agree
R_HAT_MAX = 1.01
# fewer samples a chain than this after warm-up get no R-hat: each half of a split chain needs a variance
MIN_R_HAT_SAMPLES = 4
# Relative difference below which R-hat takes two draws as equal: far above the round-off of a log posterior
# summed in another order (a few 1e-15 of it on 100,000 points), far below any difference that matters.
TIE_TOLERANCE = 1e-12


class ChainNotSettledWarning(ConvergenceWarning):
    """A chain's log posterior trends over its samples after warm-up: it has not settled, and its result may
    change with more iterations."""


class ChainTrend(NamedTuple):
    """The trend of a trace over ``n_samples`` samples (see ``trend``).

    change : the median of the last fifth of the samples less that of the first fifth (negative: a fall), in the
        trace's units.
    z : the slope of the trace's ranks over its standard error (nan when the trace is not tested).
    late_z : the same over the last half of the trace.
    effective_size : ``n_samples`` over the ranks' autocorrelation time about their line (at most ``n_samples``):
        the number of independent samples the trace is worth.
    settled : False when the trace trends (``|z| > TREND_Z_MAX``) and still does over its last half; None when it
        was not tested.
    """

    n_samples: int
    change: float
    z: float
    late_z: float
    effective_size: float
    settled: bool | None


def autocorrelation_time(x):
    """Integrated autocorrelation time of the trace ``x`` (n,): ``1 + 2 sum_t rho_t``, summed over Geyer's initial
    monotone sequence of pairs ``rho_2k + rho_2k+1``. At least ``1 / log10(n)`` (Stan's cap on the effective
    size, for anticorrelated traces); 1 for a trace whose values are all equal after subtracting their mean."""
    x = np.asarray(x, dtype=np.float64)
    n = x.shape[0]
    x = x - x.mean()
    if n < 2 or not np.any(x):
        return 1.0
    spectrum = np.fft.rfft(x, 2 * n)
    autocovariance = np.fft.irfft(spectrum * np.conj(spectrum))[:n]
    rho = autocovariance / autocovariance[0]
    pairs = rho[: n - n % 2].reshape(-1, 2).sum(axis=1)
    positive = np.flatnonzero(pairs <= 0)
    pairs = pairs[: positive[0] if positive.size else pairs.shape[0]]
    tau = -1.0 + 2.0 * np.minimum.accumulate(pairs).sum()
    return max(tau, 1.0 / np.log10(max(n, 10)))


def trend(trace, min_change=0.0):
    """The ``ChainTrend`` of ``trace`` (n,).

    ``z`` and ``effective_size`` come from the trace's ranks, in which a climb of any shape that keeps rising is a
    straight line: the slope of the ranks' line against a standard error from their residuals and the residuals'
    autocorrelation time. The residuals are the line's, or the least-squares parabola's when its curvature is
    itself significant (|z| > ``TREND_Z_MAX``). Both because a climb that levels off leaves its curve in the line's
    residuals, which then widen the yardstick as much as the climb is high: on the values, an exponential
    approach of any height gave z about 4, and a steep one (the digits' log posterior from a random start, up
    29,000 nats in 40 iterations) 2.5. ``late_z`` is the same statistic over the last half of the trace.
    ``change`` is the median of the last fifth of the trace less that of the first fifth (robust to a stray sample;
    the whole of a climb that levels off).

    The trace has not settled (``settled`` False) when ``|z| > TREND_Z_MAX`` and both ``late_z`` and ``change`` go
    z's way, ``|late_z| > LATE_Z_MIN`` (the chain still moves that way at its end: a climb that ended in the first
    half has settled, late) and ``|change| > min_change`` (a trace that varies only by rounding has a z too). A
    trace of fewer than ``MIN_TREND_SAMPLES`` or with a non-finite value is not tested (``settled`` None).
    """
    y = np.asarray(trace, dtype=np.float64)
    n = y.shape[0]
    if not np.all(np.isfinite(y)):
        return ChainTrend(n, np.nan, np.nan, np.nan, np.nan, None)
    if n < 2:
        return ChainTrend(n, 0.0, np.nan, np.nan, float(n), None)
    fifth = max(1, n // 5)
    change = float(np.median(y[n - fifth:]) - np.median(y[:fifth]))
    z, tau = _rank_trend(y)
    effective_size = float(min(n / tau, n))
    if n < MIN_TREND_SAMPLES:
        return ChainTrend(n, change, np.nan, np.nan, effective_size, None)
    late_z, _ = _rank_trend(y[n - n // 2:])
    direction = np.sign(z)
    moving = (abs(z) > TREND_Z_MAX and np.sign(late_z) == direction and abs(late_z) > LATE_Z_MIN
              and np.sign(change) == direction and abs(change) > min_change)
    return ChainTrend(n, change, z, late_z, effective_size, not moving)


def _rank_trend(y):
    """(z, autocorrelation time) of the slope of the ranks of ``y`` (n >= 2), see ``trend``."""
    n = y.shape[0]
    t = np.arange(n) - (n - 1) / 2
    ranks = rankdata(y)
    ranks -= ranks.mean()
    slope = t @ ranks / (t @ t)
    residuals, n_params = ranks - slope * t, 2
    tau = autocorrelation_time(residuals)
    if n > 3:
        curve = t**2 - np.mean(t**2)  # orthogonal to t and to the constant, t being symmetric
        curvature = curve @ ranks / (curve @ curve)
        about_parabola = residuals - curvature * curve
        parabola_tau = autocorrelation_time(about_parabola)
        if _z(curvature, about_parabola, parabola_tau, curve, n - 3) > TREND_Z_MAX:
            residuals, tau, n_params = about_parabola, parabola_tau, 3
    z = _z(slope, residuals, tau, t, n - n_params) if n > n_params else 0.0
    return float(z * np.sign(slope)), tau


def _z(coefficient, residuals, tau, regressor, degrees_of_freedom):
    """|z| of a least-squares ``coefficient`` of the centred ``regressor`` against the ``residuals``' variance and
    autocorrelation time ``tau``."""
    variance = residuals @ residuals / degrees_of_freedom
    if variance == 0:
        return 0.0 if coefficient == 0 else np.inf
    return abs(coefficient) / np.sqrt(variance * tau / (regressor @ regressor))


def log_posterior_trend(log_posterior_trace, warmup):
    """The ``ChainTrend`` of a DPMM's log posterior over the iterations after its ``warmup``."""
    return trend(log_posterior_trace[warmup:], MIN_LOG_POSTERIOR_CHANGE)


def _nats(value):
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def describe(trend_, n_clusters):
    """What an unsettled trend of the log posterior is, in words, with ``n_clusters`` (first, last): the number of
    clusters at the trend's first and last sample."""
    direction = "rose" if trend_.z > 0 else "fell"
    if abs(trend_.z) < 100:
        z = f"= {trend_.z:.1f}"
    else:  # a climb whose ranks never step back: its z says no more than that
        z = "> 100" if trend_.z > 0 else "< -100"
    return (f"its log posterior {direction} by {_nats(abs(trend_.change))} nats over the {trend_.n_samples} "
            f"iterations after warm-up (trend z {z}, K {n_clusters[0]} -> {n_clusters[-1]})")


class ChainComparison(NamedTuple):
    """Several chains of one model on the same data (see ``compare_chains``).

    n_chains : the chains compared.
    n_samples : samples of each after its warm-up (the shortest chain's number; longer chains give their last).
    r_hat_log_posterior, r_hat_n_clusters : rank-normalised split R-hat of the log posterior's and of K's traces
        over those samples: about 1 when the chains sample one distribution, above when they sit in different
        places or are too short to tell; nan with fewer than ``MIN_R_HAT_SAMPLES`` samples a chain.
    agree : True when both R-hats are at most ``R_HAT_MAX``, False when one is above, None when not computed.
    k_posterior : dict {K: probability}, the share of all chains' samples with K clusters.
    chain_k_posteriors : list of such dicts, one per chain.
    best_chain : the chain whose samples after warm-up reach the highest log posterior.
    label_agreement : (n_chains, n_chains) adjusted Rand index between the chains' ``labels_``: 1 where two
        chains report the same partition, about 0 for unrelated ones.
    """

    n_chains: int
    n_samples: int
    r_hat_log_posterior: float
    r_hat_n_clusters: float
    agree: bool | None
    k_posterior: dict
    chain_k_posteriors: list
    best_chain: int
    label_agreement: np.ndarray


def split_r_hat(traces):
    """Rank-normalised split R-hat of ``traces`` (n_chains, n_samples), Vehtari, Gelman, Simpson, Carpenter and
    Buerkner (2021): each chain cut in halves, the pooled draws replaced by the normal scores of their ranks
    (ties share their average rank), then the classic R-hat, ``sqrt(((n - 1) / n W + B / n) / W)``; the larger of
    the draws' (bulk) and of their distances from the pooled median (tails). 1 when every draw is equal; inf when
    each half-chain is constant but they differ. Needs at least ``MIN_R_HAT_SAMPLES`` samples a chain.

    Draws are ties in groups no wider than ``TIE_TOLERANCE`` times the traces' largest magnitude
    (:func:`_merged_ties`): two chains in one partition compute its log posterior from sums taken in another
    order, and ranks would read their last digits as a difference (chains that agree on every sample gave
    R-hats of 1.04-1.47)."""
    traces = np.asarray(traces, dtype=np.float64)
    if traces.ndim != 2 or traces.shape[0] < 2 or traces.shape[1] < MIN_R_HAT_SAMPLES:
        raise ValueError(f"traces must have shape (n_chains >= 2, n_samples >= {MIN_R_HAT_SAMPLES}), got "
                         f"{traces.shape}")
    if not np.all(np.isfinite(traces)):
        raise ValueError("traces hold non-finite values")
    traces = _merged_ties(traces, TIE_TOLERANCE * np.abs(traces).max())
    half = traces.shape[1] // 2
    halves = np.vstack([traces[:, :half], traces[:, traces.shape[1] - half:]])
    return max(_r_hat(_normal_scores(halves)), _r_hat(_normal_scores(np.abs(halves - np.median(halves)))))


def _merged_ties(draws, tolerance):
    """``draws`` with values set to the smallest of their group: in sorted order, a group starts at the first
    value more than ``tolerance`` above the previous group's start, so that no group spans more than it."""
    flat = draws.ravel()
    order = np.argsort(flat, kind="stable")
    ordered = flat[order]
    merged = np.empty_like(ordered)
    start = 0
    while start < ordered.shape[0]:
        end = int(np.searchsorted(ordered, ordered[start] + tolerance, side="right"))
        merged[start:end] = ordered[start]
        start = end
    out = np.empty_like(flat)
    out[order] = merged
    return out.reshape(draws.shape)


def _normal_scores(draws):
    ranks = rankdata(draws, method="average").reshape(draws.shape)
    return norm.ppf((ranks - 0.375) / (draws.size + 0.25))


def _r_hat(chains):
    n = chains.shape[1]
    if np.all(chains == chains[:, :1]):  # each chain constant (variances computed from means are not exactly 0)
        return 1.0 if np.all(chains == chains[0, 0]) else np.inf
    within = chains.var(axis=1, ddof=1).mean()
    between = n * chains.mean(axis=1).var(ddof=1)
    return float(np.sqrt(((n - 1) / n * within + between / n) / within))


def compare_chains(models):
    """``ChainComparison`` of fitted ``DPMM`` s of one model (same prior and settings) on the same data, from
    different seeds: each estimator is a chain.

    One chain's trend test (``log_posterior_trend_``) sees a drift, not a chain that stays in one of the
    posterior's modes; chains from different seeds that settle in different modes differ in their log
    posterior and K (R-hat above ``R_HAT_MAX``) and in their partitions (``label_agreement``). Their pooled
    samples of K (``k_posterior``) describe the posterior better than any one chain's. For CDP, whose mixtures
    after the first read data that depend on the fit, compare the biclusters of fits from several seeds instead
    (``conjoined.metrics.jaccard_score`` of one against another).

    Raises a ValueError for fewer than two fitted DPMMs, for fits to different numbers of points or features, or
    with different ``alpha`` or ``prior``.
    """
    from .estimator import DPMM

    models = list(models)
    if len(models) < 2:
        raise ValueError(f"compare_chains needs at least two fitted DPMMs, got {len(models)}")
    for index, model in enumerate(models):
        if not isinstance(model, DPMM):
            raise ValueError(f"models[{index}] is a {type(model).__name__}, not a DPMM")
        check_is_fitted(model, "labels_")
    shapes = {(model.labels_.shape[0], model.n_features_in_) for model in models}
    if len(shapes) > 1:
        raise ValueError("the DPMMs were fitted to data of different shapes (points, features): "
                         f"{sorted(shapes)}; chains must share their data")
    # the priors as given (every setting shows in their repr), prior=None as the default it resolved to
    models_given = {(float(model.alpha), repr(type(model.prior_)() if model.prior is None else model.prior))
                    for model in models}
    if len(models_given) > 1:
        raise ValueError(f"the DPMMs differ in alpha or prior: {sorted(models_given)}; chains must be fits of one "
                         "model")
    n_samples = min(len(model.log_posterior_trace_) - model.warmup_ for model in models)
    if n_samples < 1:
        raise ValueError("a DPMM has no samples after its warm-up (warmup = n_iter): no chain to compare")
    log_posterior = np.array([model.log_posterior_trace_[-n_samples:] for model in models])
    n_clusters = np.array([model.n_clusters_trace_[-n_samples:] for model in models])
    r_hats = [np.nan, np.nan]
    agree = None
    if n_samples >= MIN_R_HAT_SAMPLES and np.all(np.isfinite(log_posterior)):
        r_hats = [split_r_hat(log_posterior), split_r_hat(n_clusters)]
        agree = bool(max(r_hats) <= R_HAT_MAX)
    agreement = np.ones((len(models), len(models)))
    for a in range(len(models)):
        for b in range(a + 1, len(models)):
            agreement[a, b] = agreement[b, a] = adjusted_rand_score(models[a].labels_, models[b].labels_)
    return ChainComparison(
        n_chains=len(models),
        n_samples=int(n_samples),
        r_hat_log_posterior=float(r_hats[0]),
        r_hat_n_clusters=float(r_hats[1]),
        agree=agree,
        k_posterior=_k_shares(n_clusters.ravel()),
        chain_k_posteriors=[_k_shares(chain) for chain in n_clusters],
        best_chain=int(np.argmax(log_posterior.max(axis=1))),
        label_agreement=agreement,
    )


def _k_shares(n_clusters):
    values, counts = np.unique(n_clusters, return_counts=True)
    return {int(k): float(c / n_clusters.shape[0]) for k, c in zip(values, counts)}
