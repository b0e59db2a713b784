"""Whether a chain has settled: a trend test on a trace, with the trace's own autocorrelation as the yardstick.

A chain whose log posterior still rises, or falls, over its samples has not reached its stationary distribution:
its last sample, its number of clusters and any average over its trace describe where it started as much as the
posterior. ``trend`` fits a line to the trace and divides its slope by a standard error that allows for the
autocorrelation of the trace about that line (its integrated autocorrelation time, by Geyer's initial monotone
sequence as Stan and ArviZ estimate it), so that a trend does not widen its own yardstick.

For a stationary trace the statistic is about standard normal while the trace is long against its
autocorrelation time: AR(1) traces of 50 samples give |z| > 4 in 0.15% of draws at time 1, 0.5% at time 3, 3.4% at
time 9 (``benchmarks/chain_diagnostics.py``). A chain whose samples are that strongly correlated has few
independent samples to show, and a warning about it is not false. The test sees a drift, not a chain stuck in one
mode: a chain that passes may still have the posterior's other modes to visit.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from sklearn.exceptions import ConvergenceWarning

# |z| above which a trend is reported: 4 standard errors, where stationary traces of 50 samples or more with an
# autocorrelation time up to 3 pass in 99.5% of draws
TREND_Z_MAX = 4.0
# a drift of the log posterior by less than this (nats) over the samples is not reported: it changes no conclusion
MIN_LOG_POSTERIOR_CHANGE = 1.0
# fewer samples than this are not tested: the autocorrelation time of a shorter trace is too uncertain
MIN_TREND_SAMPLES = 20


class ChainNotSettledWarning(ConvergenceWarning):
    """A chain's log posterior trends over its samples after warm-up: it has not settled, and its result may
    change with more iterations."""


class ChainTrend(NamedTuple):
    """The trend of a trace over ``n_samples`` samples.

    change : rise of the fitted line from the first sample to the last (negative: a fall), in the trace's units.
    z : the slope over its standard error (nan when there are fewer than ``MIN_TREND_SAMPLES`` samples).
    effective_size : ``n_samples`` over the autocorrelation time about the line: the number of independent samples
        the trace is worth.
    settled : False when ``|z| > TREND_Z_MAX``, True otherwise; None when the trace was too short to test.
    """

    n_samples: int
    change: float
    z: float
    effective_size: float
    settled: bool | None


def autocorrelation_time(x):
    """Integrated autocorrelation time of the trace ``x`` (n,): ``1 + 2 sum_t rho_t``, summed over Geyer's initial
    monotone sequence of pairs ``rho_2k + rho_2k+1``. At least ``1 / log10(n)`` (Stan's cap on the effective
    size, for anticorrelated traces); 1 for a constant trace."""
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
    """The ``ChainTrend`` of ``trace`` (n,): the least-squares line through it, its slope's z against the
    autocorrelation-corrected standard error. A trend whose ``change`` is at most ``min_change`` in size counts as
    settled whatever its z (a trace that varies only by rounding has a z too)."""
    y = np.asarray(trace, dtype=np.float64)
    n = y.shape[0]
    if n < 2:
        return ChainTrend(n, 0.0, np.nan, float(n), None)
    t = np.arange(n) - (n - 1) / 2
    slope = float(t @ (y - y.mean()) / (t @ t))
    residuals = y - y.mean() - slope * t
    tau = autocorrelation_time(residuals)
    change = slope * (n - 1)
    if n < MIN_TREND_SAMPLES:
        return ChainTrend(n, change, np.nan, float(n / tau), None)
    variance = residuals @ residuals / (n - 2)
    if variance == 0:
        z = 0.0 if slope == 0 else np.copysign(np.inf, slope)
    else:
        z = slope / np.sqrt(variance * tau / (t @ t))
    return ChainTrend(n, change, float(z), float(n / tau), bool(abs(z) <= TREND_Z_MAX or abs(change) <= min_change))


def describe(trend_, n_clusters):
    """One sentence on an unsettled trend of the log posterior, with ``n_clusters`` (the number of clusters over the
    same samples) at its first and last sample."""
    direction = "rose" if trend_.change > 0 else "fell"
    return (f"its log posterior {direction} by {abs(trend_.change):.4g} nats over the {trend_.n_samples} "
            f"iterations after warm-up (trend z = {trend_.z:.1f}; K {n_clusters[0]} -> {n_clusters[-1]})")
