import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.special import betaln, polygamma, psi, xlogy

from conjoined._beta_binomial import (
    _digamma,
    _trigamma,
    beta_binomial_fits,
    in_sequence,
    item_log_likelihoods,
)


def _maximised(x, n):
    """Each column's maximised log-likelihood (F,)."""
    return beta_binomial_fits(x, n)[0]


def sequential_log_likelihoods(counts, order):
    return _maximised(*in_sequence(counts, order))


@pytest.mark.parametrize("z", [1e-9, 1e-3, 0.5, 1.0, 9.9, 10.0, 17.3, 1e3, 1e8])
def test_digamma_and_trigamma_match_scipy(z):
    assert _digamma(z) == pytest.approx(psi(z), rel=1e-12, abs=1e-13)
    assert _trigamma(z) == pytest.approx(polygamma(1, z), rel=1e-12)


def _beta_binomial_counts(rng, m, mean, precision):
    trials = rng.integers(1, 3000, size=m).astype(np.float64)
    shares = rng.beta(mean * precision, (1 - mean) * precision, size=m)
    return rng.binomial(trials.astype(np.int64), shares).astype(np.float64), trials


def _by_direct_search(x, n):
    """The beta-binomial log-likelihood (without binomial coefficients) maximised by Nelder-Mead over
    (log a, log b), from three starts."""
    def negative(log_ab):
        a, b = np.exp(log_ab)
        return -(betaln(x + a, n - x + b) - betaln(a, b)).sum()

    p = x.sum() / n.sum()
    starts = [np.log([p * s, (1 - p) * s]) for s in (1.0, 30.0, 1e4)]
    return -min(minimize(negative, start, method="Nelder-Mead",
                         options={"xatol": 1e-10, "fatol": 1e-10, "maxiter": 20000}).fun for start in starts)


def test_beta_binomial_fits_reach_the_maximum_likelihood():
    rng = np.random.default_rng(0)
    columns = [_beta_binomial_counts(rng, m, mean, precision)
               for m, mean, precision in ((300, 0.2, 5.0), (40, 0.03, 50.0), (500, 0.6, 0.8), (3, 0.5, 10.0))]
    for x, n in columns:
        fitted = _maximised(x[:, None], n[:, None])[0]
        assert fitted == pytest.approx(_by_direct_search(x, n), rel=1e-9)
    # the same columns side by side (rows without counts or trials add nothing)
    m = max(x.shape[0] for x, _ in columns)
    x = np.column_stack([np.r_[x, np.zeros(m - x.shape[0])] for x, _ in columns])
    n = np.column_stack([np.r_[n, np.zeros(m - n.shape[0])] for _, n in columns])
    np.testing.assert_allclose(_maximised(x, n), [_maximised(x[:, None], n[:, None])[0]
                                                          for x, n in columns], rtol=1e-12)


@pytest.mark.parametrize(("x", "n"), [([7, 18, 0], [43, 126, 36]), ([883, 94], [12257, 1782])])
def test_beta_binomial_fit_reaches_the_maximum_where_the_likelihood_is_not_concave(x, n):
    # From the method of moments these start where the log-likelihood is not concave in (log a, log b); a
    # gradient step there crawled and stopped 0.63 and 1.23 nats short of the maximum (a review's find).
    x, n = np.array(x, dtype=np.float64), np.array(n, dtype=np.float64)
    assert _maximised(x[:, None], n[:, None])[0] == pytest.approx(_by_direct_search(x, n), rel=1e-9)


def test_beta_binomial_fit_of_binomial_counts_is_the_binomial_limit():
    # No over-dispersion: the fit runs to the binomial (a, b -> infinity), whose likelihood it nests.
    rng = np.random.default_rng(1)
    n = rng.integers(100, 5000, size=(400, 1)).astype(np.float64)
    x = rng.binomial(n.astype(np.int64), 0.1).astype(np.float64)
    share = x.sum() / n.sum()
    binomial = (xlogy(x, share) + xlogy(n - x, 1 - share)).sum()
    assert binomial <= _maximised(x, n)[0] <= binomial + 2.0


def test_beta_binomial_fits_give_zero_where_the_share_is_zero_or_one():
    n = np.array([[5.0, 5.0, 5.0], [7.0, 7.0, 7.0]])
    x = np.array([[0.0, 5.0, 2.0], [0.0, 7.0, 3.0]])
    fitted = _maximised(x, n)
    assert fitted[0] == 0.0 and fitted[1] == 0.0 and fitted[2] < 0.0


def test_sequential_log_likelihoods_read_each_feature_against_what_the_ones_before_leave():
    rng = np.random.default_rng(2)
    counts = rng.poisson(rng.gamma(2.0, 20.0, size=(60, 1)) * [[0.5, 0.3, 0.2]]).astype(np.float64) + 1
    totals = counts.sum(axis=1, keepdims=True)
    order = np.array([2, 0, 1])
    expected = [_maximised(counts[:, [2]], totals)[0],
                _maximised(counts[:, [0]], totals - counts[:, [2]])[0]]
    np.testing.assert_allclose(sequential_log_likelihoods(counts, order), expected, rtol=1e-12)
    # two features: x_0 given the total is x_1 given the total (a beta-binomial with a and b swapped)
    pair = counts[:, :2]
    np.testing.assert_allclose(sequential_log_likelihoods(pair, np.array([0, 1])),
                               sequential_log_likelihoods(pair, np.array([1, 0])), rtol=1e-9)
    # a feature without counts gives 0 and changes nothing else, wherever it is read
    padded = np.column_stack([counts, np.zeros(60)])
    np.testing.assert_allclose(sequential_log_likelihoods(padded, np.array([3, 2, 0, 1])), [0.0, *expected],
                               rtol=1e-12)
    np.testing.assert_allclose(sequential_log_likelihoods(padded, np.array([2, 0, 3, 1])), [*expected, 0.0],
                               rtol=1e-12)


def test_fitted_parameters_give_the_maximised_likelihood_item_by_item():
    rng = np.random.default_rng(3)
    x, n = _beta_binomial_counts(rng, 80, 0.3, 4.0)
    log_likelihood, log_a, log_b = beta_binomial_fits(x[:, None], n[:, None])
    a, b = np.exp(log_a[0]), np.exp(log_b[0])
    by_item = item_log_likelihoods(x[:, None], n[:, None], log_a, log_b)[:, 0]
    np.testing.assert_allclose(by_item, betaln(x + a, n - x + b) - betaln(a, b), rtol=1e-10)
    assert by_item.sum() == pytest.approx(log_likelihood[0], rel=1e-12)
    # at the maximum the mean share is the counts' (the score in the mean's direction is zero): near it here
    assert a / (a + b) == pytest.approx(x.sum() / n.sum(), abs=0.02)
    # a column whose share is 0 or 1: no parameters, and every item's count certain (log-likelihood 0)
    x2 = np.column_stack([x, np.zeros_like(x), n])
    n2 = np.column_stack([n, n, n])
    log_likelihood, log_a, log_b = beta_binomial_fits(x2, n2)
    assert np.isnan(log_a[1:]).all() and np.isnan(log_b[1:]).all() and (log_likelihood[1:] == 0.0).all()
    assert (item_log_likelihoods(x2, n2, log_a, log_b)[:, 1:] == 0.0).all()


def test_in_sequence_gives_each_feature_and_what_the_ones_before_leave():
    counts = np.array([[3.0, 1.0, 6.0], [0.0, 2.0, 2.0]])
    x, trials = in_sequence(counts, np.array([2, 0, 1]))
    np.testing.assert_array_equal(x, [[6.0, 3.0], [2.0, 0.0]])
    np.testing.assert_array_equal(trials, [[10.0, 4.0], [4.0, 2.0]])
