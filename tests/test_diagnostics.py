"""The trend test on a chain's trace, the warnings DPMM and CDP give for a chain that has not settled, and the
comparison of several chains (split R-hat, pooled K, agreement of partitions)."""

import re
import warnings

import numpy as np
import pytest
from mixtures import gaussian_mixture
from scipy.signal import lfilter
from scipy.stats import norm
from sklearn.datasets import load_digits, load_iris
from sklearn.exceptions import NotFittedError

import conjoined
from conjoined.dpmm.diagnostics import (
    MIN_TREND_SAMPLES,
    R_HAT_MAX,
    TREND_Z_MAX,
    ChainNotSettledWarning,
    autocorrelation_time,
    compare_chains,
    split_r_hat,
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
    climb = climbing.log_posterior_trend_  # 416 nats at z 58 (over 1,000 before the warm-up's last passes split)
    assert climb.settled is False and climb.change > 100 and climb.z > 10
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
    assert unsettled_message(trends, 60, n_biclusters=3) == unsettled_message(trends, 60)
    assert unsettled_message(trends, 60, n_biclusters=0).endswith(
        "raise n_iter (now 60). No bicluster was found: if the counts hold no blocks, more iterations may only move "
        "the partitions.")


def test_split_r_hat_of_two_short_chains_by_hand():
    """Chains (1, 2, 3, 4) and (5, 6, 7, 8): halves (1, 2), (5, 6), (3, 4), (7, 8), ranked 1-8 among the 8
    draws. Bulk: the normal scores z_r = Phi^-1((r - 3/8) / 8.25); tails: the distances from the median 4.5,
    (3.5, 2.5), (0.5, 1.5), (1.5, 0.5), (2.5, 3.5), ranked with ties (0.5: 1.5, 1.5: 3.5, 2.5: 5.5, 3.5: 7.5).
    Bulk: z = -1.434, -0.852, -0.473, -0.153 and their negatives; W = 0.1103 (the pairs' variances 0.1694,
    0.0512, 0.0512, 0.1694), B / n = 0.9363 (the variance of the pairs' means -1.143, 0.313, -0.313, 1.143), so
    R = sqrt((W / 2 + B / n) / W) = 2.999. Tails: z = +-1.097, +-0.308, W = 0.311, B / n = 0.658, R = 1.619."""
    def r_hat(halves_ranks):
        z = norm.ppf((np.array(halves_ranks) - 0.375) / 8.25)
        within = np.mean([(b - a) ** 2 / 2 for a, b in z])  # the variance of a pair
        between_over_n = np.var(z.mean(axis=1), ddof=1)
        return np.sqrt((0.5 * within + between_over_n) / within)

    bulk = r_hat([[1, 2], [5, 6], [3, 4], [7, 8]])
    tails = r_hat([[7.5, 5.5], [1.5, 3.5], [3.5, 1.5], [5.5, 7.5]])
    assert bulk == pytest.approx(2.999, abs=1e-3) and tails == pytest.approx(1.619, abs=1e-3)
    assert split_r_hat([[1, 2, 3, 4], [5, 6, 7, 8]]) == pytest.approx(max(bulk, tails), rel=1e-12)


def test_split_r_hat_sees_shifted_chains_trends_within_chains_and_unequal_spreads():
    rng = np.random.default_rng(0)
    same = rng.standard_normal((4, 1000))
    assert split_r_hat(same) < 1.005
    assert split_r_hat(same + [[0], [0], [0], [1]]) > 1.1  # one chain elsewhere
    # every chain climbs the same way: their means agree, their halves do not (the split sees it)
    climbing = np.tile(np.linspace(0, 5, 1000), (4, 1)) + same
    assert split_r_hat(climbing) > 1.3
    # same centre, one chain ten times as spread: the bulk barely moves, the tails do
    assert split_r_hat(same * [[1], [1], [1], [10]]) > 1.1
    assert split_r_hat(np.full((3, 10), 7.0)) == 1.0
    assert split_r_hat([[3] * 10, [4] * 10]) == np.inf  # each stuck, in different places


def test_split_r_hat_takes_round_off_for_ties():
    # Two chains in one partition whose log posterior differs in its last digits (sums in another order): the
    # audit's 100,000 points gave values 1e-8 nats apart and an R-hat of 1.47 before round-off made ties.
    rng = np.random.default_rng(0)
    levels = np.array([-3.1e6, -3.1e6 + 1.3e-8, -3.1e6 - 7e-9])
    chains = levels[np.array([rng.integers(0, 2, 200), rng.integers(1, 3, 200)])]
    assert split_r_hat(chains) == 1.0
    apart = np.array([np.full(200, -3.1e6), np.full(200, -3.1e6 + 0.01)])  # two partitions 0.01 nats apart
    assert split_r_hat(apart) == np.inf
    assert split_r_hat([[5] * 6, [6] * 6]) == np.inf  # K constant in each chain, not across


@pytest.mark.parametrize("traces, message", [
    (np.zeros((1, 10)), r"shape \(n_chains >= 2, n_samples >= 4\), got \(1, 10\)"),
    (np.zeros((2, 3)), r"got \(2, 3\)"),
    (np.zeros(10), r"got \(10,\)"),
    ([[0.0, 1.0, np.nan, 2.0], [0.0, 1.0, 2.0, 3.0]], "non-finite"),
])
def test_split_r_hat_bad_traces(traces, message):
    with pytest.raises(ValueError, match=message):
        split_r_hat(traces)


def _chains(X, n_iter, seeds=range(4), **params):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ChainNotSettledWarning)
        return [conjoined.DPMM(n_iter=n_iter, random_state=seed, **params).fit(X) for seed in seeds]


def test_chains_that_agree_and_chains_too_short_to_tell():
    """Case 3's rows, 2,000 iterations from four seeds: both R-hats within 1.01, the pooled posterior of K over
    the 4 x 1,000 samples, and the same blocks in every chain. At 100 iterations the same chains cannot show it
    (K's posterior is split between 5 and 6 row clusters and each chain has stayed at one of them for long); at
    1,000, K's R-hat is 1.007-1.014 depending on the chains' draws, too close to 1.01 for a test."""
    X = conjoined.make_cdp_case(3, random_state=0)[0]
    chains = _chains(X, 2000)
    comparison = compare_chains(chains)
    assert comparison.n_chains == 4 and comparison.n_samples == 1000
    assert comparison.r_hat_log_posterior <= R_HAT_MAX and comparison.r_hat_n_clusters <= R_HAT_MAX
    assert comparison.agree is True
    pooled = np.concatenate([chain.n_clusters_trace_[1000:] for chain in chains])
    assert comparison.k_posterior == {k: np.mean(pooled == k) for k in np.unique(pooled)}
    assert sum(comparison.k_posterior.values()) == pytest.approx(1.0)
    assert comparison.chain_k_posteriors[2] == {k: np.mean(chains[2].n_clusters_trace_[1000:] == k)
                                                for k in np.unique(chains[2].n_clusters_trace_[1000:])}
    assert comparison.best_chain == int(np.argmax([chain.log_posterior_trace_[1000:].max() for chain in chains]))
    assert np.all(np.diag(comparison.label_agreement) == 1.0) and comparison.label_agreement.min() > 0.99
    assert np.array_equal(comparison.label_agreement, comparison.label_agreement.T)

    short = compare_chains(_chains(X, 100))
    assert short.agree is False and max(short.r_hat_log_posterior, short.r_hat_n_clusters) > 1.05


def test_chains_in_different_modes_disagree():
    """Iris, 300 iterations: two chains end at 3 clusters, two at 4 (the two species that overlap cut once
    more), and stay there: K's R-hat is far above 1 and the partitions differ."""
    comparison = compare_chains(_chains(load_iris().data, 300))
    assert comparison.agree is False and comparison.r_hat_n_clusters > 1.3
    assert sorted(max(k, key=k.get) for k in comparison.chain_k_posteriors) == [3, 3, 4, 4]
    assert comparison.label_agreement.min() < 0.8


def test_compare_chains_uses_the_shortest_chains_samples_and_skips_r_hat_without_enough():
    X = conjoined.make_cdp_case(1, random_state=0)[0]
    long, short = _chains(X, 60, seeds=[0]) + _chains(X, 40, seeds=[1])  # 30 and 20 samples after warm-up
    comparison = compare_chains([long, short])
    assert comparison.n_samples == 20
    assert comparison.r_hat_n_clusters == split_r_hat([long.n_clusters_trace_[40:], short.n_clusters_trace_[20:]])
    few = compare_chains(_chains(X, 6, seeds=[0, 1]))  # 3 samples a chain
    assert few.n_samples == 3 and np.isnan(few.r_hat_log_posterior) and few.agree is None


def test_compare_chains_bad_input():
    X = conjoined.make_cdp_case(1, random_state=0)[0]
    a, b = _chains(X, 20, seeds=[0, 1])
    with pytest.raises(ValueError, match="at least two fitted DPMMs, got 1"):
        compare_chains([a])
    with pytest.raises(ValueError, match=r"models\[1\] is a str, not a DPMM"):
        compare_chains([a, "b"])
    with pytest.raises(NotFittedError):
        compare_chains([a, conjoined.DPMM()])
    wider = _chains(np.hstack([X, X[:, :10]]), 20, seeds=[2])[0]
    with pytest.raises(ValueError, match=r"different shapes \(points, features\): \[\(50, 50\), \(50, 60\)\]"):
        compare_chains([a, wider])
    with pytest.raises(ValueError, match="differ in alpha or prior"):
        compare_chains([a, _chains(X, 20, seeds=[2], alpha=2.0)[0]])
    with pytest.raises(ValueError, match="differ in alpha or prior"):
        compare_chains([a, _chains(X, 20, seeds=[2], prior=conjoined.PoissonGamma())[0]])
    # the default prior named or not is one model; given settings are compared
    named = _chains(X, 20, seeds=[2], prior=type(a.prior_)())[0]
    assert compare_chains([a, named]).n_chains == 2
    with pytest.raises(ValueError, match="differ in alpha or prior"):
        compare_chains([a, _chains(X, 20, seeds=[2], prior=type(a.prior_)(beta=0.5))[0]])
    with pytest.raises(ValueError, match="no samples after its warm-up"):
        compare_chains(_chains(X, 20, seeds=[0, 1], warmup=20))
