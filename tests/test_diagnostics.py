"""The trend test on a chain's trace, and the warnings DPMM and CDP give for a chain that has not settled."""

import re
import warnings

import numpy as np
import pytest
from mixtures import gaussian_mixture
from scipy.signal import lfilter
from sklearn.datasets import load_digits

import conjoined
from conjoined.dpmm.diagnostics import (
    MIN_TREND_SAMPLES,
    TREND_Z_MAX,
    ChainNotSettledWarning,
    autocorrelation_time,
    trend,
)


def ar1(rng, phi, n, burn=200):
    """An AR(1) trace with unit innovations, after ``burn`` steps from 0 (phi^200 < 1e-4 for phi <= 0.95): its
    autocorrelation time is (1 + phi) / (1 - phi)."""
    return lfilter([1.0], [1.0, -phi], rng.standard_normal(n + burn))[burn:]


@pytest.mark.parametrize("phi", [0.0, 0.5, 0.8])
def test_autocorrelation_time_of_an_ar1_trace(phi):
    tau = autocorrelation_time(ar1(np.random.default_rng(0), phi, 40_000))
    # the estimate's own standard deviation is about 5% at phi = 0.8 and this length
    assert tau == pytest.approx((1 + phi) / (1 - phi), rel=0.15)


def test_autocorrelation_time_of_a_constant_and_an_alternating_trace():
    assert autocorrelation_time(np.full(50, 3.0)) == 1.0
    # anticorrelated: capped as Stan caps the effective size, at n log10(n)
    assert autocorrelation_time(np.tile([0.0, 1.0], 50)) == pytest.approx(1 / np.log10(100))


@pytest.mark.parametrize("phi, n, most", [(0.0, 50, 0.01), (0.5, 50, 0.015), (0.5, 75, 0.01), (0.8, 150, 0.02)])
def test_stationary_traces_are_seldom_called_unsettled(phi, n, most):
    rng = np.random.default_rng(1)
    results = [trend(ar1(rng, phi, n)) for _ in range(1000)]
    z = np.array([result.z for result in results])
    assert np.mean([result.settled is False for result in results]) <= most
    # the statistic is about standard normal: centred, most draws within 2
    assert abs(np.median(z)) < 0.1 and np.mean(np.abs(z) < 2) > 0.75


def test_a_drift_is_found_and_measured():
    rng = np.random.default_rng(2)
    t = np.arange(50)
    rising = trend(0.2 * t + ar1(rng, 0.5, 50))
    assert rising.settled is False and rising.z > TREND_Z_MAX
    assert rising.change == pytest.approx(0.2 * 49, rel=0.3)
    falling = trend(-0.2 * t + ar1(rng, 0.5, 50))
    assert falling.settled is False and falling.z < -TREND_Z_MAX and falling.change < 0
    line = trend(3.0 * t)  # no noise: the slope is certain
    assert line.change == 3.0 * 40 and line.z == np.inf and line.settled is False  # last fifth's median - first's
    assert trend(np.full(50, -7.0)) == (50, 0.0, 0.0, 0.0, 50.0, True)


def test_a_climb_that_levels_off_is_found_whatever_its_height():
    # the line's residuals hold the curvature; the parabola's do not
    rng = np.random.default_rng(3)
    for height in (10.0, 1e3, 1e5):
        approach = trend(-height * np.exp(-np.arange(50) / 10) + ar1(rng, 0.5, 50))
        assert approach.settled is False and approach.z > TREND_Z_MAX


def test_the_test_reads_ranks_and_asks_whether_the_chain_still_moves_at_its_end():
    rng = np.random.default_rng(4)
    noise = ar1(rng, 0.5, 50)
    # ranks: any increasing transform of the trace gives the same z
    assert trend(np.exp(noise / 3)).z == trend(noise).z and trend(noise**3).late_z == trend(noise).late_z
    # a steep climb over by the second half: a trend, but settled, late, unless the second half's noise drifts the
    # same way by a standard error (about one draw in six)
    over = [trend(-1e4 * np.exp(-np.arange(50) / 2) + ar1(rng, 0.5, 50)) for _ in range(200)]
    assert np.median([result.z for result in over]) > TREND_Z_MAX
    assert np.mean([result.settled for result in over]) > 0.75
    # a steep climb still under way: the digits from a random start, their log posterior up 29,000 nats
    digits = load_digits().data.astype(np.int64)[:600]
    with pytest.warns(ChainNotSettledWarning):
        climbing = conjoined.DPMM(n_iter=40, warmup=0, random_state=0).fit(digits)
    assert climbing.log_posterior_trend_.late_z > 2 and climbing.log_posterior_trend_.settled is False


def test_short_or_non_finite_traces_are_not_tested_and_small_changes_are_not_reported():
    short = trend(np.arange(MIN_TREND_SAMPLES - 1.0))
    assert short.settled is None and np.isnan(short.z) and short.change == MIN_TREND_SAMPLES - 4  # medians of 3
    assert trend(np.arange(MIN_TREND_SAMPLES, dtype=float)).settled is False
    for bad in (np.nan, -np.inf):
        broken = trend(np.r_[np.arange(30.0), bad])
        assert broken.settled is None and np.isnan(broken.z) and np.isnan(broken.change)
    # a log posterior that changes by rounding only: a z, but nothing to report
    rounding = -12345.678 + 1e-11 * np.arange(50)
    assert trend(rounding).z > TREND_Z_MAX and trend(rounding, min_change=1.0).settled is True


def test_a_dpmm_still_climbing_warns_at_the_users_line_and_a_settled_one_does_not():
    digits = load_digits().data.astype(np.int64)  # Multinomial: K still rising at 100 iterations
    with pytest.warns(ChainNotSettledWarning) as caught:
        climbing = conjoined.DPMM(random_state=0).fit(digits)
    assert re.fullmatch(r"the DPMM has not settled: its log posterior rose by [\d,]+ nats over the 50 iterations "
                        r"after warm-up \(trend z (?:= [\d.]+|> 100), K \d+ -> \d+\)\. Its result may change with "
                        r"more iterations: raise n_iter \(now 100\) and read log_posterior_trace_ and "
                        r"n_clusters_trace_\.", str(caught[0].message))
    assert caught[0].filename == __file__
    assert climbing.log_posterior_trend_.settled is False and climbing.log_posterior_trend_.change > 1000
    assert climbing.log_posterior_trend_.n_samples == 50
    with pytest.warns(ChainNotSettledWarning) as caught:
        conjoined.DPMM(random_state=0).fit_predict(digits)
    assert caught[0].filename == __file__

    X = gaussian_mixture(0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ChainNotSettledWarning)
        settled = conjoined.DPMM(random_state=0).fit(X)
        short = conjoined.DPMM(n_iter=30, random_state=0).fit(digits)  # 15 samples after warm-up: not tested
    assert settled.log_posterior_trend_.settled is True
    assert settled.log_posterior_trend_ == trend(settled.log_posterior_trace_[50:], min_change=1.0)
    assert short.log_posterior_trend_.settled is None


def test_cdp_warns_once_for_its_unsettled_mixtures_and_not_on_the_simulation_cases():
    digits = load_digits().data.astype(np.int64)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = conjoined.CDP(n_rounds=0, random_state=0).fit(digits)
    unsettled = [w for w in caught if issubclass(w.category, ChainNotSettledWarning)]
    assert len(unsettled) == 1 and unsettled[0].filename == __file__
    k_first, k_last = model.dpmm_trends_[0].n_clusters
    assert re.fullmatch(rf"1 of the 2 mixture fits has not settled\. Row mixture 1 of 1: its log posterior rose by "
                        rf"[\d,]+ nats over the 75 iterations after warm-up \(trend z (?:= [\d.]+|> 100), "
                        rf"K {k_first} -> {k_last}\)\. The partitions may change with more iterations: raise n_iter "
                        r"\(now 150\)\.",
                        str(unsettled[0].message))
    assert [fit.side for fit in model.dpmm_trends_] == ["row", "column"]
    assert [fit.trend.settled for fit in model.dpmm_trends_] == [False, True]
    assert model.dpmm_trends_[0].trend == model.row_dpmm_.log_posterior_trend_
    assert model.dpmm_trends_[0].n_clusters[1] == model.row_dpmm_.n_clusters_trace_[-1]

    X, _, _ = conjoined.make_cdp_case(2, random_state=0, shuffle=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ChainNotSettledWarning)
        model = conjoined.CDP(random_state=0).fit(X)
    assert [fit.side for fit in model.dpmm_trends_] == ["row", "column"] * 3
    assert all(fit.trend.settled for fit in model.dpmm_trends_)


def test_the_summary_names_the_sides_and_the_option_as_the_caller_asks():
    from conjoined.cdp import MixtureTrend, unsettled_message

    climbing, settled = trend(np.arange(50.0)), trend(np.zeros(50))
    trends = [MixtureTrend("row", settled, (3, 3)), MixtureTrend("column", climbing, (2, 5)),
              MixtureTrend("row", climbing, (4, 9)), MixtureTrend("column", settled, (5, 5))]
    assert unsettled_message(trends[:1] + trends[3:], 150) is None
    message = unsettled_message(trends, 60, side_names=("gene", "cell"), n_iter_name="--n-iter")
    assert message.startswith("2 of the 4 mixture fits have not settled. Gene mixture 2 of 2: its log posterior "
                              "rose by 40 nats over the 50 iterations after warm-up (trend z > 100, K 4 -> 9). Cell "
                              "mixture 1 of 2: ")
    assert message.endswith("(trend z > 100, K 2 -> 5). The partitions may change with more iterations: raise "
                            "--n-iter (now 60).")
