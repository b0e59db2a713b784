"""numba kernels of the sampler's one pass over the data.

Each ``assign_*`` kernel fuses, for every point: the scores under the K clusters, the draw of its label, the
scores under its own cluster's two sub-clusters, the draw of its sub-label, and the accumulation of the
sufficient statistics of its sub-cluster. Points are independent given the parameters (restricted Gibbs), so the
loop is parallel. Randomness comes in as pre-drawn uniforms ``u`` (n, 2), which makes the result independent of
the number of threads. Statistics are accumulated per block of points and the blocks summed in order, so float
sums do not depend on the thread count either.

With ``anchor_priority`` non-empty the pass is the exact one (``sampler.py``): every cluster keeps its anchor,
its member of lowest ``priority`` (ties broken by index), and a point may only take a cluster whose anchor ranks
below it. No cluster empties, the allowed labels of each point do not depend on the other points' labels, and the
draw is an exact Gibbs update given the parameters. With it empty (warm-up) every label is allowed.

Sub-labels of a cluster flagged in ``random_sub`` (a reset) are not drawn from sub-cluster parameters: the
point's side of a hyperplane decides, whose normal and offset travel in the sub-cluster parameter slot 2k (the
log-rate column and the offset for counts, the mean and the log-determinant for Gaussians; see
``sampler.sample_kernel_params``). Sub-labels are auxiliary: this only shapes the split proposals of warm-up.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange


@njit(cache=True, nogil=True, inline="always")
def _draw(log_p, u):
    """Index drawn from unnormalised log-probabilities ``log_p`` with the uniform ``u``."""
    top = -np.inf
    for k in range(log_p.shape[0]):
        if log_p[k] > top:
            top = log_p[k]
    total = 0.0
    for k in range(log_p.shape[0]):
        total += np.exp(log_p[k] - top)
    target = u * total
    acc = 0.0
    for k in range(log_p.shape[0]):
        acc += np.exp(log_p[k] - top)
        if acc >= target:
            return k
    for k in range(log_p.shape[0] - 1, -1, -1):
        if log_p[k] > -np.inf:
            return k
    return 0


@njit(cache=True, nogil=True, inline="always")
def _anchored_label(i, current, anchor_priority, anchor_index, first_index):
    """The label of point i if it is the anchor of its cluster (it keeps it), else -1."""
    if anchor_priority.shape[0] == 0:
        return -1
    k = current[i]
    return k if anchor_index[k] == first_index + i else -1


@njit(cache=True, nogil=True, inline="always")
def _mask_unreachable(scores, i, priority, anchor_priority, anchor_index, first_index):
    """Set to -inf the scores of clusters whose anchor ranks above point i (no-op when not anchored)."""
    if anchor_priority.shape[0] == 0:
        return
    p = priority[i]
    for k in range(scores.shape[0]):
        if anchor_priority[k] > p or (anchor_priority[k] == p and anchor_index[k] > first_index + i):
            scores[k] = -np.inf


@njit(cache=True, nogil=True)
def _count_scores(indptr, indices, data, i, log_rate_t, out):
    """out[k] = sum_f x_if * log_rate_t[f, k] over the non-zeros of point i."""
    out[:] = 0.0
    for p in range(indptr[i], indptr[i + 1]):
        x = data[p]
        row = log_rate_t[indices[p]]
        for k in range(out.shape[0]):
            out[k] += x * row[k]


@njit(cache=True, nogil=True, parallel=True)
def count_log_likelihoods(indptr, indices, data, log_rate_t, offset):
    """(n, K) log-likelihoods ``X @ log_rate + offset`` of CSR count points (up to per-point constants)."""
    n = indptr.shape[0] - 1
    out = np.empty((n, log_rate_t.shape[1]))
    for i in prange(n):
        _count_scores(indptr, indices, data, i, log_rate_t, out[i])
        out[i] += offset
    return out


def _assign_counts(indptr, indices, data, log_rate_t, offset, log_w, sub_log_rate_t, sub_offset, sub_log_w,
                   random_sub, current, priority, anchor_priority, anchor_index, first_index, u, bounds):
    """One restricted-Gibbs pass over CSR count points.

    Parameters
    ----------
    indptr, indices, data : CSR arrays of the (n, d) points.
    log_rate_t : (d, K) log rates of the clusters (transposed for contiguous access per feature).
    offset : (K,) per-cluster additive term (Poisson normaliser; zeros for multinomial).
    log_w : (K,) log mixture weights.
    sub_log_rate_t : (d, 2K) log rates of the sub-clusters, columns 2k and 2k+1 for cluster k.
    sub_offset, sub_log_w : (2K,) likewise.
    random_sub : (K,) bool, clusters whose sub-labels are set by a hyperplane (module docstring).
    current : (n,) int32 labels before the pass; priority : (n,) uint64 ranks of the points (global index
        ``first_index + i``); anchor_priority, anchor_index : (K,) uint64 and int64, each cluster's anchor, or
        empty for an unrestricted pass (module docstring).
    u : (n, 2) uniforms for the label and the sub-label.
    bounds : (n_blocks + 1,) int64, the blocks of points whose statistics are accumulated separately.

    Returns
    -------
    labels : (n,) int32, sublabels : (n,) int8, counts : (n_blocks, 2K) points per sub-cluster, sums :
    (n_blocks, 2K, d) summed count vectors per sub-cluster.
    """
    n = indptr.shape[0] - 1
    n_blocks = bounds.shape[0] - 1
    d, K = log_rate_t.shape
    labels = np.empty(n, np.int32)
    sublabels = np.empty(n, np.int8)
    block_counts = np.zeros((n_blocks, 2 * K))
    block_sums = np.zeros((n_blocks, 2 * K, d))
    for b in prange(n_blocks):
        scores = np.empty(K)
        sub = np.empty(2)
        for i in range(bounds[b], bounds[b + 1]):
            k = _anchored_label(i, current, anchor_priority, anchor_index, first_index)
            if k < 0:
                _count_scores(indptr, indices, data, i, log_rate_t, scores)
                for c in range(K):
                    scores[c] += offset[c] + log_w[c]
                _mask_unreachable(scores, i, priority, anchor_priority, anchor_index, first_index)
                k = _draw(scores, u[i, 0])
            if random_sub[k]:
                projection = 0.0
                for p in range(indptr[i], indptr[i + 1]):
                    projection += data[p] * sub_log_rate_t[indices[p], 2 * k]
                s = 1 if projection > sub_offset[2 * k] else 0
            else:
                for h in range(2):
                    sub[h] = sub_offset[2 * k + h] + sub_log_w[2 * k + h]
                for p in range(indptr[i], indptr[i + 1]):
                    f = indices[p]
                    sub[0] += data[p] * sub_log_rate_t[f, 2 * k]
                    sub[1] += data[p] * sub_log_rate_t[f, 2 * k + 1]
                s = _draw(sub, u[i, 1])
            labels[i] = k
            sublabels[i] = s
            c = 2 * k + s
            block_counts[b, c] += 1.0
            for p in range(indptr[i], indptr[i + 1]):
                block_sums[b, c, indices[p]] += data[p]
    return labels, sublabels, block_counts, block_sums


assign_counts = njit(cache=True, nogil=True, parallel=True)(_assign_counts)
assign_counts_serial = njit(cache=True, nogil=True)(_assign_counts)


@njit(cache=True, nogil=True)
def _gaussian_score(x, mu, chol_prec, log_det, work):
    """log N(x | mu, (U^T U)^-1), with U = chol_prec upper-triangular and log_det = log|U|."""
    d = x.shape[0]
    for a in range(d):
        work[a] = x[a] - mu[a]
    quad = 0.0
    for a in range(d):
        acc = 0.0
        for b in range(a, d):
            acc += chol_prec[a, b] * work[b]
        quad += acc * acc
    return log_det - 0.5 * quad - 0.5 * d * math.log(2.0 * math.pi)


@njit(cache=True, nogil=True, parallel=True)
def gaussian_log_likelihoods(X, mu, chol_prec, log_det):
    """(n, K) Gaussian log-densities of dense points X (n, d) under K clusters."""
    n, d = X.shape
    K = mu.shape[0]
    out = np.empty((n, K))
    for i in prange(n):
        work = np.empty(d)
        for k in range(K):
            out[i, k] = _gaussian_score(X[i], mu[k], chol_prec[k], log_det[k], work)
    return out


def _assign_gaussian(X, mu, chol_prec, log_det, log_w, sub_mu, sub_chol_prec, sub_log_det, sub_log_w, random_sub,
                     current, priority, anchor_priority, anchor_index, first_index, u, bounds):
    """One restricted-Gibbs pass over dense Gaussian points X (n, d).

    Cluster parameters: ``mu`` (K, d), ``chol_prec`` (K, d, d) upper-triangular U with U^T U the precision,
    ``log_det`` (K,) = log|U|; sub-cluster parameters likewise with 2K entries (2k, 2k+1 for cluster k);
    ``current``, ``priority``, ``anchor_priority``, ``anchor_index``, ``first_index`` as in ``assign_counts``.

    Returns labels (n,), sublabels (n,), and per block of ``bounds``: counts (n_blocks, 2K), sums
    (n_blocks, 2K, d), outer-product sums (n_blocks, 2K, d, d).
    """
    n, d = X.shape
    n_blocks = bounds.shape[0] - 1
    K = mu.shape[0]
    labels = np.empty(n, np.int32)
    sublabels = np.empty(n, np.int8)
    block_counts = np.zeros((n_blocks, 2 * K))
    block_sums = np.zeros((n_blocks, 2 * K, d))
    block_outer = np.zeros((n_blocks, 2 * K, d, d))
    for b in prange(n_blocks):
        scores = np.empty(K)
        sub = np.empty(2)
        work = np.empty(d)
        for i in range(bounds[b], bounds[b + 1]):
            x = X[i]
            k = _anchored_label(i, current, anchor_priority, anchor_index, first_index)
            if k < 0:
                for c in range(K):
                    scores[c] = log_w[c] + _gaussian_score(x, mu[c], chol_prec[c], log_det[c], work)
                _mask_unreachable(scores, i, priority, anchor_priority, anchor_index, first_index)
                k = _draw(scores, u[i, 0])
            if random_sub[k]:
                projection = 0.0
                for a in range(d):
                    projection += x[a] * sub_mu[2 * k, a]
                s = 1 if projection > sub_log_det[2 * k] else 0
            else:
                for h in range(2):
                    c = 2 * k + h
                    sub[h] = sub_log_w[c] + _gaussian_score(x, sub_mu[c], sub_chol_prec[c], sub_log_det[c], work)
                s = _draw(sub, u[i, 1])
            labels[i] = k
            sublabels[i] = s
            c = 2 * k + s
            block_counts[b, c] += 1.0
            for a in range(d):
                block_sums[b, c, a] += x[a]
                for e in range(d):
                    block_outer[b, c, a, e] += x[a] * x[e]
    return labels, sublabels, block_counts, block_sums, block_outer


assign_gaussian = njit(cache=True, nogil=True, parallel=True)(_assign_gaussian)
assign_gaussian_serial = njit(cache=True, nogil=True)(_assign_gaussian)


@njit(cache=True, nogil=True)
def csr_take_rows(indptr, indices, data, rows):
    """CSR arrays (indptr, indices, data) of the given rows of a CSR matrix."""
    out_indptr = np.zeros(rows.shape[0] + 1, np.int64)
    for t in range(rows.shape[0]):
        out_indptr[t + 1] = out_indptr[t] + indptr[rows[t] + 1] - indptr[rows[t]]
    out_indices = np.empty(out_indptr[-1], indices.dtype)
    out_data = np.empty(out_indptr[-1], data.dtype)
    for t in range(rows.shape[0]):
        start = indptr[rows[t]]
        length = out_indptr[t + 1] - out_indptr[t]
        out_indices[out_indptr[t]:out_indptr[t + 1]] = indices[start:start + length]
        out_data[out_indptr[t]:out_indptr[t + 1]] = data[start:start + length]
    return out_indptr, out_indices, out_data


# --- Sequential allocation (exact split/merge moves, ``sams.py``) -------------------------------------------

COUNT_MULTINOMIAL = 0
COUNT_POISSON = 1


@njit(cache=True, nogil=True)
def _count_log_predictive(kind, hyper, n, total, sums, indptr, indices, data, i):
    """log p(x_i | points with count n, summed vector ``sums`` and grand total ``total``) under a count prior.

    kind 0 (Multinomial): hyper = (beta, d); kind 1 (PoissonGamma): hyper = (shape, rate, d).
    """
    x_total = 0.0
    acc = 0.0
    for p in range(indptr[i], indptr[i + 1]):
        a = hyper[0] + sums[indices[p]]
        x = data[p]
        x_total += x
        if x <= 8.0:
            # lgamma(a + x) - lgamma(a) for a small whole x, as a product of x factors: much cheaper.
            rising = 1.0
            for t in range(int(x)):
                rising *= a + t
            acc += math.log(rising)
        else:
            acc += math.lgamma(a + x) - math.lgamma(a)
    if kind == COUNT_MULTINOMIAL:
        db = hyper[0] * hyper[1]
        return acc + math.lgamma(db + total) - math.lgamma(db + total + x_total)
    da = hyper[0] * hyper[2]
    return acc + (da + total) * math.log(hyper[1] + n) - (da + total + x_total) * math.log(hyper[1] + n + 1.0)


@njit(cache=True, nogil=True)
def count_sequential_allocation(indptr, indices, data, kind, hyper, anchors, order, forced, u):
    """Allocate points to two clusters seeded by ``anchors`` (two local point indices), one point at a time.

    Each point of ``order`` joins side s with probability proportional to n_s * p(x | side s so far) (the CRP
    weight times the collapsed predictive). ``forced[m] >= 0`` imposes point m's side instead of drawing it with
    ``u[m]`` (to evaluate the probability of a given split). Returns (log probability of the allocation,
    side (n_points,) int8, counts (2,), sums (2, d)).
    """
    d = int(hyper[-1])
    side = np.full(indptr.shape[0] - 1, -1, np.int8)
    counts = np.zeros(2)
    totals = np.zeros(2)
    sums = np.zeros((2, d))
    for s in range(2):
        a = anchors[s]
        side[a] = s
        counts[s] = 1.0
        for p in range(indptr[a], indptr[a + 1]):
            sums[s, indices[p]] += data[p]
            totals[s] += data[p]
    log_q = 0.0
    for m in order:
        lp0 = math.log(counts[0]) + _count_log_predictive(kind, hyper, counts[0], totals[0], sums[0],
                                                          indptr, indices, data, m)
        lp1 = math.log(counts[1]) + _count_log_predictive(kind, hyper, counts[1], totals[1], sums[1],
                                                          indptr, indices, data, m)
        top = max(lp0, lp1)
        log_norm = top + math.log(math.exp(lp0 - top) + math.exp(lp1 - top))
        if forced[m] >= 0:
            s = forced[m]
        else:
            s = 0 if u[m] < math.exp(lp0 - log_norm) else 1
        log_q += (lp0 if s == 0 else lp1) - log_norm
        side[m] = s
        counts[s] += 1.0
        for p in range(indptr[m], indptr[m + 1]):
            sums[s, indices[p]] += data[p]
            totals[s] += data[p]
    return log_q, side, counts, sums


@njit(cache=True, nogil=True)
def _niw_log_marginal(n, s1, s2, kappa, mean, nu, psi, const):
    """NIW log marginal likelihood of n points with sums s1 and outer sums s2; ``const`` holds the n-free terms."""
    d = s1.shape[0]
    kappa_n = kappa + n
    psi_n = psi + s2 + kappa * np.outer(mean, mean)
    mean_n = (kappa * mean + s1) / kappa_n
    psi_n -= kappa_n * np.outer(mean_n, mean_n)
    chol = np.linalg.cholesky(0.5 * (psi_n + psi_n.T))
    logdet_n = 0.0
    for a in range(d):
        logdet_n += 2.0 * math.log(chol[a, a])
    nu_n = nu + n
    mvl = 0.0
    for a in range(d):
        mvl += math.lgamma(0.5 * (nu_n - a))
    return const - 0.5 * n * d * math.log(math.pi) + mvl - 0.5 * nu_n * logdet_n - 0.5 * d * math.log(kappa_n)


@njit(cache=True, nogil=True)
def gaussian_sequential_allocation(X, kappa, mean, nu, psi, const, anchors, order, forced, u):
    """``count_sequential_allocation`` for dense Gaussian points under a NIW prior.

    Returns (log probability, side (n,) int8, counts (2,), sums (2, d), outer sums (2, d, d)).
    """
    n_points, d = X.shape
    side = np.full(n_points, -1, np.int8)
    counts = np.zeros(2)
    sums = np.zeros((2, d))
    outer = np.zeros((2, d, d))
    log_m = np.zeros(2)
    for s in range(2):
        a = anchors[s]
        side[a] = s
        counts[s] = 1.0
        sums[s] = X[a]
        outer[s] = np.outer(X[a], X[a])
        log_m[s] = _niw_log_marginal(1.0, sums[s], outer[s], kappa, mean, nu, psi, const)
    log_q = 0.0
    new_m = np.zeros(2)
    for m in order:
        x = X[m]
        xx = np.outer(x, x)
        lp = np.zeros(2)
        for s in range(2):
            new_m[s] = _niw_log_marginal(counts[s] + 1.0, sums[s] + x, outer[s] + xx, kappa, mean, nu, psi, const)
            lp[s] = math.log(counts[s]) + new_m[s] - log_m[s]
        top = max(lp[0], lp[1])
        log_norm = top + math.log(math.exp(lp[0] - top) + math.exp(lp[1] - top))
        if forced[m] >= 0:
            s = forced[m]
        else:
            s = 0 if u[m] < math.exp(lp[0] - log_norm) else 1
        log_q += lp[s] - log_norm
        side[m] = s
        counts[s] += 1.0
        sums[s] += x
        outer[s] += xx
        log_m[s] = new_m[s]
    return log_q, side, counts, sums, outer
