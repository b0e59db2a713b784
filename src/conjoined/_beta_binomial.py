"""Over-dispersed profiles: the generalized Dirichlet-multinomial likelihood, as beta-binomials read in sequence.

Items (cells, genes, documents) with counts over L features, read in an order: the first feature's count is
beta-binomial given the item's total, the second's given what the first leaves, and so on; the last follows.
Each feature has its own mean share and its own over-dispersion (the Connor-Mosimann generalized Dirichlet), so
a population whose items vary far more in one feature's share than in the others', skewed as beta shares are,
is fitted as such. The order matters: in a composition an item's share of one feature moves its shares of all
the others, and reading that feature first, the others against what it leaves, keeps its variation from being
counted again in each.

Used by the refinement's merges by profile (``conjoined.extract``): two clusters are one population when a
mixture of their two fits explains their items little better than one fit of them all.
"""

import math

import numpy as np
from numba import njit

MAX_LOG_PRIOR = 25.0  # log of a beta's parameters: e^25 is binomial to any precision counts can show
MIN_LOG_PRIOR = -20.0
NEWTON_ITERATIONS = 100
HALVINGS = 40


@njit(cache=True, nogil=True, inline="always")
def _digamma(z):
    """psi(z) for z > 0: recurrence up to 10, then the asymptotic series (error about 1e-14)."""
    shift = 0.0
    while z < 10.0:
        shift -= 1.0 / z
        z += 1.0
    inv = 1.0 / (z * z)
    return shift + math.log(z) - 0.5 / z - inv * (1.0 / 12 - inv * (1.0 / 120 - inv * (1.0 / 252 - inv * (
        1.0 / 240 - inv / 132))))


@njit(cache=True, nogil=True, inline="always")
def _trigamma(z):
    """psi'(z) for z > 0, as :func:`_digamma`."""
    shift = 0.0
    while z < 10.0:
        shift += 1.0 / (z * z)
        z += 1.0
    inv = 1.0 / (z * z)
    return shift + 1.0 / z + 0.5 * inv + inv / z * (1.0 / 6 - inv * (1.0 / 30 - inv * (1.0 / 42 - inv * (
        1.0 / 30 - inv * 5.0 / 66))))


@njit(cache=True, nogil=True, inline="always")
def _item_term(x, n, a, b):
    """The part of log BB(x | n, a, b) that depends on the item, without the binomial coefficient."""
    return math.lgamma(x + a) + math.lgamma(n - x + b) - math.lgamma(n + (a + b))


@njit(cache=True, nogil=True, inline="always")
def _beta_term(a, b):
    """The part of log BB(x | n, a, b) shared by every item: -log B(a, b)."""
    return math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)


@njit(cache=True, nogil=True)
def _log_likelihood(x, n, a, b):
    """sum_i log BB(x_i | n_i, a, b) without the binomial coefficients (they cancel wherever the same items
    are compared)."""
    total = 0.0
    for i in range(x.shape[0]):
        total += _item_term(x[i], n[i], a, b)
    return total + x.shape[0] * _beta_term(a, b)


@njit(cache=True, nogil=True)
def _fit_one(x, n):
    """Maximum-likelihood beta-binomial of counts x (m,) out of n (m,): ``(log-likelihood, log a, log b)``.
    Saddle-free Newton on (log a, log b) from the method of moments, halving steps that do not raise the
    likelihood."""
    sum_x, sum_n = x.sum(), n.sum()
    p = sum_x / sum_n
    excess = scale = 0.0  # the method of moments: Var x_i = n_i p (1 - p) (1 + (n_i - 1) rho)
    for i in range(x.shape[0]):
        excess += (x[i] - n[i] * p) ** 2 - n[i] * p * (1 - p)
        scale += n[i] * (n[i] - 1) * p * (1 - p)
    rho = min(max(excess / scale, 1e-6), 0.99) if scale > 0 else 0.5
    s = 1.0 / rho - 1.0
    u = min(max(math.log(p * s), MIN_LOG_PRIOR), MAX_LOG_PRIOR)
    v = min(max(math.log((1 - p) * s), MIN_LOG_PRIOR), MAX_LOG_PRIOR)
    best = _log_likelihood(x, n, math.exp(u), math.exp(v))
    m = x.shape[0]
    for _ in range(NEWTON_ITERATIONS):
        a, b = math.exp(u), math.exp(v)
        s = a + b
        sum_a = sum_b = trigamma_a = trigamma_b = digamma_n = trigamma_n = 0.0
        for i in range(m):
            sum_a += _digamma(x[i] + a)
            sum_b += _digamma(n[i] - x[i] + b)
            trigamma_a += _trigamma(x[i] + a)
            trigamma_b += _trigamma(n[i] - x[i] + b)
            digamma_n += _digamma(n[i] + s)
            trigamma_n += _trigamma(n[i] + s)
        grad_a = sum_a - digamma_n + m * (_digamma(s) - _digamma(a))
        grad_b = sum_b - digamma_n + m * (_digamma(s) - _digamma(b))
        hess_ab = m * _trigamma(s) - trigamma_n
        hess_aa = trigamma_a - m * _trigamma(a) + hess_ab
        hess_bb = trigamma_b - m * _trigamma(b) + hess_ab
        # in (u, v) = (log a, log b)
        g_u, g_v = a * grad_a, b * grad_b
        h_uu, h_vv, h_uv = a * a * hess_aa + g_u, b * b * hess_bb + g_v, a * b * hess_ab
        # Newton's step on the Hessian with its eigenvalues made negative (saddle-free Newton): Newton's step
        # where the likelihood is concave; elsewhere still an ascent, scaled by the curvature in each direction
        middle, radius = (h_uu + h_vv) / 2, math.sqrt(((h_uu - h_vv) / 2) ** 2 + h_uv * h_uv)
        high, low = middle + radius, middle - radius
        concave = high < 0
        if h_uv != 0.0:
            e_u, e_v = h_uv, high - h_uu
            norm = math.sqrt(e_u * e_u + e_v * e_v)
            e_u, e_v = e_u / norm, e_v / norm
        elif h_uu >= h_vv:
            e_u, e_v = 1.0, 0.0
        else:
            e_u, e_v = 0.0, 1.0
        floor = 1e-12 * (abs(high) + abs(low)) + 1e-300
        along_high = (e_u * g_u + e_v * g_v) / max(abs(high), floor)
        along_low = (-e_v * g_u + e_u * g_v) / max(abs(low), floor)
        d_u, d_v = e_u * along_high - e_v * along_low, e_v * along_high + e_u * along_low
        step = 1.0
        moved = False
        for _ in range(HALVINGS):
            new_u = min(max(u + step * d_u, MIN_LOG_PRIOR), MAX_LOG_PRIOR)
            new_v = min(max(v + step * d_v, MIN_LOG_PRIOR), MAX_LOG_PRIOR)
            value = _log_likelihood(x, n, math.exp(new_u), math.exp(new_v))
            if value >= best:
                moved = True
                break
            step *= 0.5
        if not moved:
            break
        change = abs(new_u - u) + abs(new_v - v)
        gained = value - best
        u, v, best = new_u, new_v, value
        if change < 1e-8 or (concave and gained < 1e-10 * (1.0 + abs(best))):
            break
    return best, u, v


@njit(cache=True, nogil=True)
def beta_binomial_fits(x, n):
    """Each column's maximum-likelihood beta-binomial: x, n (m, F) counts and their trials (0 <= x <= n).
    Returns ``(log_likelihood, log_a, log_b)``, each (F,); for a column whose counts are all 0 or all their
    trials (its share is 0 or 1, every item's count certain) the log-likelihood is 0 and the parameters nan."""
    log_likelihood = np.zeros(x.shape[1])
    log_a, log_b = np.full(x.shape[1], np.nan), np.full(x.shape[1], np.nan)
    for f in range(x.shape[1]):
        column_x, column_n = np.ascontiguousarray(x[:, f]), np.ascontiguousarray(n[:, f])
        sum_x, sum_n = column_x.sum(), column_n.sum()
        if 0 < sum_x < sum_n:
            log_likelihood[f], log_a[f], log_b[f] = _fit_one(column_x, column_n)
    return log_likelihood, log_a, log_b


@njit(cache=True, nogil=True)
def item_log_likelihoods(x, n, log_a, log_b):
    """(m, F): log BB(x_if | n_if, a_f, b_f) of each item in each column, without the binomial coefficients;
    0 in a column whose parameters are nan (a fit whose share was 0 or 1, see :func:`beta_binomial_fits`)."""
    out = np.zeros(x.shape)
    for f in range(x.shape[1]):
        if math.isnan(log_a[f]):
            continue
        a, b = math.exp(log_a[f]), math.exp(log_b[f])
        shared = _beta_term(a, b)
        for i in range(x.shape[0]):
            out[i, f] = _item_term(x[i, f], n[i, f], a, b) + shared
    return out


def in_sequence(counts, order):
    """Items' counts (m, L) as the beta-binomials read in sequence see them: ``(x, trials)``, each (m, L - 1),
    [:, j] the count of feature ``order[j]`` and the item's total less the features before it in ``order`` (a
    permutation of 0..L-1); the last feature follows from the others."""
    counts = np.asarray(counts, dtype=np.float64)[:, order]
    before = np.cumsum(counts, axis=1) - counts
    trials = counts.sum(axis=1, keepdims=True) - before
    return np.ascontiguousarray(counts[:, :-1]), np.ascontiguousarray(trials[:, :-1])
