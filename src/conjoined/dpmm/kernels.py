"""numba kernels of the sampler: its one pass over the data, the exact moves' allocations, the single-point
moves and, for count priors, the rest of the driver's maths of an iteration (parameter draws, split/merge
proposals), fused so that an iteration on small data is a handful of calls rather than dozens of numpy ones.

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
``sampler.sample_kernel_params``). Sub-labels are auxiliary: this only shapes the split proposals of warm-up. Sub-cluster parameters with no
features (the exact phase, which has no sub-cluster moves) mean no sub-labels: every point gets sub-label 0.
"""

from __future__ import annotations

import math
import types

import numpy as np
from numba import njit, prange

# numpy's bounded integers as numba's Generator.shuffle draws them; numba's internals (kernels._permuted), kept
# honest by a test against numpy's Generator.permutation
from numba.np.random.random_methods import random_interval


def _serial_twin(func):
    """A copy of ``func`` named ``<name>_serial``, for its single-threaded compilation.

    numba keys its on-disk cache by the function, not by the compilation options (numba issue 6845): compiled
    from one function, the parallel and the serial kernel share cache entries, and whichever was compiled first
    is loaded for both. A "serial" kernel that is in fact parallel starts threads on every tiny pass, which costs
    milliseconds a call when another process holds a core.
    """
    name = func.__name__ + "_serial"
    twin = types.FunctionType(func.__code__.replace(co_name=name), func.__globals__, name, func.__defaults__,
                              func.__closure__)
    twin.__qualname__ = func.__qualname__ + "_serial"  # what numba's cache is named after
    twin.__doc__ = func.__doc__
    twin.__kwdefaults__ = func.__kwdefaults__
    return twin


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
        if acc > target:  # strictly: u = 0 must not pick a leading slot of probability 0
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
def _log_dirichlet_into(rng, concentration, out):
    """Log of one Dirichlet draw with ``concentration`` (d,), all > 0, written into ``out`` (d,), with the numpy
    Generator ``rng``: ``log G(a) = log G(a + 1) + log(U) / a`` (no underflow for tiny a), normalised in log
    space."""
    top = -np.inf
    for f in range(concentration.shape[0]):
        a = concentration[f]
        out[f] = math.log(rng.standard_gamma(a + 1.0)) + math.log(1.0 - rng.random()) / a
        top = max(top, out[f])
    total = 0.0
    for f in range(concentration.shape[0]):
        total += math.exp(out[f] - top)
    shift = top + math.log(total)
    for f in range(concentration.shape[0]):
        out[f] -= shift


@njit(cache=True, nogil=True)
def log_dirichlet_rows(rng, concentration):
    """(B, d) logs of one Dirichlet draw per row of ``concentration`` (B, d) (``_log_dirichlet_into``)."""
    out = np.empty(concentration.shape)
    for b in range(concentration.shape[0]):
        _log_dirichlet_into(rng, concentration[b], out[b])
    return out


@njit(cache=True, nogil=True)
def splitmix64(seed, first, n):
    """(n,) uint64 SplitMix64 hashes of ``seed + i`` for i in ``first .. first + n - 1`` (uint64 arithmetic,
    wrapping)."""
    out = np.empty(n, np.uint64)
    for t in range(n):
        z = (np.uint64(t) + first + seed) * np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        out[t] = z ^ (z >> np.uint64(31))
    return out


@njit(cache=True, nogil=True)
def cluster_anchors(labels, priority, n_clusters):
    """(n_clusters,) int64 index of each cluster's member of lowest ``priority`` (ties: lowest index); -1 where
    a cluster has no member."""
    anchor = np.full(n_clusters, -1, np.int64)
    for i in range(labels.shape[0]):
        k = labels[i]
        if anchor[k] < 0 or priority[i] < priority[anchor[k]]:
            anchor[k] = i
    return anchor


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
    no_sub = sub_log_rate_t.shape[0] == 0
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
            if no_sub:
                s = 0
            elif random_sub[k]:
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
assign_counts_serial = njit(cache=True, nogil=True)(_serial_twin(_assign_counts))


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


@njit(cache=True, nogil=True)
def _gaussian_block_scores(Xb, mu, chol_prec, log_det, log_w):
    """(B, K) ``log_w[k] + log N(x_i | cluster k)`` for the rows of Xb (B, d): one matrix product per cluster."""
    B, d = Xb.shape
    K = mu.shape[0]
    out = np.empty((B, K))
    const = -0.5 * d * math.log(2.0 * math.pi)
    for k in range(K):
        z = np.dot(Xb - mu[k], chol_prec[k].T)  # float32 for float32 inputs
        for i in range(B):
            quad = 0.0
            for a in range(d):
                quad += z[i, a] * z[i, a]
            out[i, k] = log_w[k] + log_det[k] + const - 0.5 * quad
    return out


def _assign_gaussian(X, X32, mu, chol_prec, log_det, log_w, sub_mu, sub_chol_prec, sub_log_det, sub_log_w,
                     random_sub, current, priority, anchor_priority, anchor_index, first_index, u, bounds):
    """One restricted-Gibbs pass over dense Gaussian points X (n, d).

    Cluster parameters: ``mu`` (K, d), ``chol_prec`` (K, d, d) upper-triangular U with U^T U the precision,
    ``log_det`` (K,) = log|U|; sub-cluster parameters likewise with 2K entries (2k, 2k+1 for cluster k);
    ``current``, ``priority``, ``anchor_priority``, ``anchor_index``, ``first_index`` as in ``assign_counts``.
    Scores, sub-cluster scores and outer-product sums are matrix products over a block's points (BLAS). Scores
    use ``X32``, X in float32 (the whitened differences need no more; it halves their cost), with float32
    parameters; the statistics are summed from X in float64.

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
    no_sub = sub_mu.shape[1] == 0
    for b in prange(n_blocks):
        lo, hi = bounds[b], bounds[b + 1]
        Xb = X[lo:hi]
        scores = _gaussian_block_scores(X32[lo:hi], mu, chol_prec, log_det, log_w)
        for i in range(lo, hi):
            k = _anchored_label(i, current, anchor_priority, anchor_index, first_index)
            if k < 0:
                row = scores[i - lo]
                _mask_unreachable(row, i, priority, anchor_priority, anchor_index, first_index)
                k = _draw(row, u[i, 0])
            labels[i] = k
        for k in range(K):
            members = np.flatnonzero(labels[lo:hi] == k)
            if members.shape[0] == 0:
                continue
            Xk = Xb[members]
            side = np.zeros(members.shape[0], np.int8)
            if no_sub:
                pass
            elif random_sub[k]:
                projection = np.dot(Xk, sub_mu[2 * k].astype(np.float64))
                for m in range(members.shape[0]):
                    side[m] = 1 if projection[m] > sub_log_det[2 * k] else 0
            else:
                sub = _gaussian_block_scores(X32[lo:hi][members], sub_mu[2 * k:2 * k + 2], sub_chol_prec[2 * k:2 * k + 2],
                                             sub_log_det[2 * k:2 * k + 2], sub_log_w[2 * k:2 * k + 2])
                for m in range(members.shape[0]):
                    side[m] = _draw(sub[m], u[lo + members[m], 1])
            for m in range(members.shape[0]):
                sublabels[lo + members[m]] = side[m]
            for h in range(2):
                Xs = Xk[side == h]
                c = 2 * k + h
                block_counts[b, c] = Xs.shape[0]
                if Xs.shape[0]:
                    for m in range(Xs.shape[0]):
                        for a in range(d):
                            block_sums[b, c, a] += Xs[m, a]
                    np.dot(Xs.T, Xs, block_outer[b, c])
    return labels, sublabels, block_counts, block_sums, block_outer


assign_gaussian = njit(cache=True, nogil=True, parallel=True)(_assign_gaussian)
assign_gaussian_serial = njit(cache=True, nogil=True)(_serial_twin(_assign_gaussian))


@njit(cache=True, nogil=True)
def csr_take_rows(indptr, indices, data, rows):
    """CSR arrays (indptr, indices, data) of the given rows of a CSR matrix."""
    out_indptr = np.zeros(rows.shape[0] + 1, np.int64)
    for t in range(rows.shape[0]):
        out_indptr[t + 1] = out_indptr[t] + indptr[rows[t] + 1] - indptr[rows[t]]
    out_indices = np.empty(out_indptr[-1], indices.dtype)
    out_data = np.empty(out_indptr[-1], data.dtype)
    for t in range(rows.shape[0]):
        # element by element: a slice assignment compiles numba's shape-mismatch error, ~1 s of a first run
        offset = indptr[rows[t]] - out_indptr[t]
        for position in range(out_indptr[t], out_indptr[t + 1]):
            out_indices[position] = indices[position + offset]
            out_data[position] = data[position + offset]
    return out_indptr, out_indices, out_data


# --- Sequential allocation (exact split/merge moves, ``sams.py``) -------------------------------------------

COUNT_MULTINOMIAL = 0
COUNT_POISSON = 1
# The diagonal Gaussian (``priors.NormalGamma``) through the same kernels: its points are rows (z, z^2), and its
# statistics the points' count and sums of z and of z^2.
DIAGONAL_NORMAL = 2


@njit(cache=True, nogil=True)
def _normal_gamma_posterior(hyper, n, sums, f):
    """``(mu_n, b_n)`` of feature f of a cluster of n points under ``priors.NormalGamma``: sums (2D,) hold the
    sums of z (0..D-1) and of z^2 (D..2D-1); hyper = (kappa, shape, rate_0 .. rate_D-1, mean_0 .. mean_D-1, 2D),
    the kernels' number of features last, as for the count priors."""
    kappa, D = hyper[0], int(hyper[-1]) // 2
    m = hyper[2 + D + f]
    kappa_n = kappa + n
    mu_n = (kappa * m + sums[f]) / kappa_n
    return mu_n, hyper[2 + f] + 0.5 * (sums[D + f] + kappa * m * m - kappa_n * mu_n * mu_n)


@njit(cache=True, nogil=True)
def _normal_gamma_log_predictive(hyper, n, sums, indptr, indices, data, i):
    """log p(x_i | a cluster of n points with ``sums``) under ``priors.NormalGamma``: a product of Student t
    densities. Row i holds z_f at column f and z_f^2 at D + f, sorted; zeros may be left out."""
    D = int(hyper[-1]) // 2
    a_n = hyper[1] + 0.5 * n
    kappa_n = hyper[0] + n
    acc = D * (math.lgamma(a_n + 0.5) - math.lgamma(a_n))
    p, end = indptr[i], indptr[i + 1]
    for f in range(D):
        x = 0.0
        if p < end and indices[p] == f:
            x = data[p]
            p += 1
        mu_n, b_n = _normal_gamma_posterior(hyper, n, sums, f)
        spread = 2.0 * b_n * (kappa_n + 1.0) / kappa_n  # the t's degrees of freedom times its squared scale
        acc -= 0.5 * math.log(math.pi * spread) + (a_n + 0.5) * math.log1p((x - mu_n) * (x - mu_n) / spread)
    return acc


@njit(cache=True, nogil=True)
def _normal_gamma_log_marginal(hyper, n, sums):
    """log m of a cluster under ``priors.NormalGamma``: sum_f [lgamma(a_n) - lgamma(a) + a log b_f - a_n log b_nf
    + log(kappa / kappa_n) / 2] - n D log(2 pi) / 2, a_n = a + n / 2, kappa_n = kappa + n."""
    kappa, a, D = hyper[0], hyper[1], int(hyper[-1]) // 2
    a_n = a + 0.5 * n
    acc = D * (math.lgamma(a_n) - math.lgamma(a) + 0.5 * math.log(kappa / (kappa + n))
               - 0.5 * n * math.log(2.0 * math.pi))
    for f in range(D):
        acc += a * math.log(hyper[2 + f]) - a_n * math.log(_normal_gamma_posterior(hyper, n, sums, f)[1])
    return acc


@njit(cache=True, nogil=True)
def _count_log_predictive(kind, hyper, n, total, sums, indptr, indices, data, i):
    """log p(x_i | points with count n, summed vector ``sums`` and grand total ``total``) under a count prior.

    kind 0 (Multinomial): hyper = (beta, d); kind 1 (PoissonGamma): hyper = (shape, rate, d); kind 2
    (``DIAGONAL_NORMAL``): ``_normal_gamma_log_predictive``, which needs no total.
    """
    if kind == DIAGONAL_NORMAL:
        return _normal_gamma_log_predictive(hyper, n, sums, indptr, indices, data, i)
    x_total = 0.0
    acc = 0.0
    # lgamma(a + x) - lgamma(a) for a small whole x is a product of x factors; the products of successive
    # non-zeros are multiplied together and their log taken only when the running product nears the float range.
    product = 1.0
    for p in range(indptr[i], indptr[i + 1]):
        a = hyper[0] + sums[indices[p]]
        x = data[p]
        x_total += x
        if x <= 8.0:
            for t in range(int(x)):
                product *= a + t
            if product > 1e250 or product < 1e-250:
                acc += math.log(product)
                product = 1.0
        else:
            acc += math.lgamma(a + x) - math.lgamma(a)
    acc += math.log(product)
    if kind == COUNT_MULTINOMIAL:
        db = hyper[0] * hyper[1]
        return acc + math.lgamma(db + total) - math.lgamma(db + total + x_total)
    da = hyper[0] * hyper[2]
    return acc + (da + total) * math.log(hyper[1] + n) - (da + total + x_total) * math.log(hyper[1] + n + 1.0)


@njit(cache=True, nogil=True)
def _count_log_marginal(kind, hyper, n, sums):
    """Log marginal likelihood of one cluster of ``n`` points summing to ``sums`` (d,) (``count_log_marginals``)."""
    if kind == DIAGONAL_NORMAL:
        return _normal_gamma_log_marginal(hyper, n, sums)
    d = sums.shape[0]
    a = hyper[0]
    lgamma_a = math.lgamma(a)
    total = 0.0
    acc = 0.0
    for f in range(d):
        x = sums[f]
        if x != 0.0:
            total += x
            acc += math.lgamma(a + x) - lgamma_a
    if kind == COUNT_MULTINOMIAL:
        return acc + math.lgamma(a * d) - math.lgamma(a * d + total)
    log_ratio = math.log(hyper[1] + n)
    return acc + d * a * (math.log(hyper[1]) - log_ratio) - total * log_ratio


@njit(cache=True, nogil=True)
def count_log_marginals(kind, hyper, n, sums):
    """(B,) log marginal likelihoods of B clusters with ``n`` (B,) points summing to ``sums`` (B, d) under a count
    prior (``kind``, ``hyper`` as in ``_count_log_predictive``), up to terms that cancel between partitions.

    Multinomial: lgamma(d beta) - lgamma(d beta + S) + sum_f [lgamma(beta + S_f) - lgamma(beta)];
    PoissonGamma: sum_f [a log b - lgamma(a) + lgamma(a + S_f) - (a + S_f) log(b + n)]
    = d a log(b / (b + n)) - S log(b + n) + sum_f [lgamma(a + S_f) - lgamma(a)], with S = sum_f S_f. Features with
    S_f = 0 add nothing to the last sum, which is taken over the others only. NormalGamma:
    ``_normal_gamma_log_marginal``.
    """
    out = np.empty(sums.shape[0])
    for b in range(sums.shape[0]):
        out[b] = _count_log_marginal(kind, hyper, n[b], sums[b])
    return out


@njit(cache=True, nogil=True)
def count_point_moves(indptr, indices, data, kind, hyper, alpha, labels, counts, totals, sums, n_clusters, order, u):
    """Collapsed Gibbs updates of the points ``order`` (local rows), one after the other (``point_moves.py``).

    ``labels`` (m,) are the points' clusters; ``counts``, ``totals`` (C,) and ``sums`` (C, d) the statistics of
    clusters 0..n_clusters-1, with spare zero rows after them (C >= n_clusters + m). A point leaves its cluster and
    joins cluster k with weight N_k p(x | cluster k) or the next spare row with alpha m(x), drawn with ``u[point]``.
    Everything is updated in place; returns the number of rows in use.
    """
    log_p = np.empty(counts.shape[0])
    for m in order:
        old = labels[m]
        counts[old] -= 1.0
        for p in range(indptr[m], indptr[m + 1]):
            sums[old, indices[p]] -= data[p]
            totals[old] -= data[p]
        for k in range(n_clusters + 1):
            if k < n_clusters and counts[k] == 0.0:
                log_p[k] = -np.inf
                continue
            weight = math.log(counts[k]) if k < n_clusters else math.log(alpha)
            log_p[k] = weight + _count_log_predictive(kind, hyper, counts[k], totals[k], sums[k], indptr, indices,
                                                      data, m)
        new = _draw(log_p[:n_clusters + 1], u[m])
        if new == n_clusters:
            n_clusters += 1
        labels[m] = new
        counts[new] += 1.0
        for p in range(indptr[m], indptr[m + 1]):
            sums[new, indices[p]] += data[p]
            totals[new] += data[p]
    return n_clusters


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
def _cholesky_rank1_update(L, w):
    """Turn the lower-triangular L into the Cholesky factor of ``L L^T + w w^T`` in O(d^2); ``w`` is consumed."""
    d = w.shape[0]
    for k in range(d):
        r = math.sqrt(L[k, k] * L[k, k] + w[k] * w[k])
        c = r / L[k, k]
        s = w[k] / L[k, k]
        L[k, k] = r
        for i in range(k + 1, d):
            L[i, k] = (L[i, k] + s * w[i]) / c
            w[i] = c * w[i] - s * L[i, k]


@njit(cache=True, nogil=True)
def _niw_log_predictive(x, kappa_n, mean_n, nu_n, chol_n, work):
    """log p(x | NIW posterior (kappa_n, mean_n, nu_n, Psi_n = chol_n chol_n^T)): a multivariate Student t with
    nu_n - d + 1 degrees of freedom and scale Psi_n (kappa_n + 1) / (kappa_n (nu_n - d + 1)); O(d^2)."""
    d = x.shape[0]
    dof = nu_n - d + 1.0
    quad = 0.0
    log_det = 0.0
    for a in range(d):
        acc = x[a] - mean_n[a]
        for b in range(a):
            acc -= chol_n[a, b] * work[b]
        work[a] = acc / chol_n[a, a]
        quad += work[a] * work[a]
        log_det += math.log(chol_n[a, a])
    scale = (kappa_n + 1.0) / (kappa_n * dof)
    return (math.lgamma(0.5 * (dof + d)) - math.lgamma(0.5 * dof) - 0.5 * d * math.log(dof * math.pi * scale)
            - log_det - 0.5 * (dof + d) * math.log1p(quad / (scale * dof)))


@njit(cache=True, nogil=True)
def _niw_add_point(x, kappa_n, mean_n, chol_n, work):
    """Update a side's NIW posterior (mean_n, chol_n in place) with point x; returns the new kappa_n."""
    d = x.shape[0]
    weight = math.sqrt(kappa_n / (kappa_n + 1.0))
    for a in range(d):
        work[a] = weight * (x[a] - mean_n[a])
        mean_n[a] = (kappa_n * mean_n[a] + x[a]) / (kappa_n + 1.0)
    _cholesky_rank1_update(chol_n, work)
    return kappa_n + 1.0


@njit(cache=True, nogil=True)
def gaussian_sequential_allocation(X, kappa, mean, nu, chol_psi, anchors, order, forced, u):
    """``count_sequential_allocation`` for dense Gaussian points under a NIW prior.

    Each side keeps its NIW posterior, its scale matrix as a Cholesky factor updated by rank one per point, so a
    point costs O(d^2). Returns (log probability, side (n,) int8, counts (2,), sums (2, d), outer sums (2, d, d)).
    """
    n_points, d = X.shape
    side = np.full(n_points, -1, np.int8)
    counts = np.zeros(2)
    sums = np.zeros((2, d))
    outer = np.zeros((2, d, d))
    kappa_n = np.full(2, kappa)
    mean_n = np.empty((2, d))
    chol_n = np.empty((2, d, d))
    work = np.empty(d)
    for s in range(2):
        mean_n[s] = mean
        chol_n[s] = chol_psi
    log_q = 0.0
    lp = np.zeros(2)
    for t in range(anchors.shape[0] + order.shape[0]):
        m = anchors[t] if t < 2 else order[t - 2]
        x = X[m]
        if t < 2:
            s = t
        else:
            for h in range(2):
                lp[h] = math.log(counts[h]) + _niw_log_predictive(x, kappa_n[h], mean_n[h], nu + counts[h],
                                                                  chol_n[h], work)
            top = max(lp[0], lp[1])
            log_norm = top + math.log(math.exp(lp[0] - top) + math.exp(lp[1] - top))
            if forced[m] >= 0:
                s = forced[m]
            else:
                s = 0 if u[m] < math.exp(lp[0] - log_norm) else 1
            log_q += lp[s] - log_norm
        side[m] = s
        kappa_n[s] = _niw_add_point(x, kappa_n[s], mean_n[s], chol_n[s], work)
        counts[s] += 1.0
        sums[s] += x
        for a in range(d):
            for b in range(d):
                outer[s, a, b] += x[a] * x[b]
    return log_q, side, counts, sums, outer


@njit(cache=True, nogil=True)
def _kept_slots(counts, n_clusters):
    """After single-point moves: each of the ``n_clusters`` cluster slots used, its index among the non-empty ones
    (-1: emptied, dropped)."""
    mapping = np.full(n_clusters, -1, np.int64)
    kept = 0
    for k in range(n_clusters):
        if counts[k] > 0.0:
            mapping[k] = kept
            kept += 1
    return mapping


@njit(cache=True, nogil=True)
def _whole_in_slot_0(values, mapping):
    """A statistic ``values`` (C, ...) of the slots kept by ``mapping`` as (K', 2, ...) sub-cluster statistics,
    each cluster whole in slot 0."""
    flat = values.reshape(values.shape[0], -1)
    out = np.zeros((mapping.max() + 1, 2, flat.shape[1]))
    for k in range(mapping.shape[0]):
        if mapping[k] >= 0:
            for f in range(flat.shape[1]):
                out[mapping[k], 0, f] = flat[k, f]
    return out.reshape((out.shape[0], 2) + values.shape[1:])


@njit(cache=True, nogil=True)
def _niw_posterior_into(kappa, mean, psi, n, s1, s2, mean_n, chol_n):
    """A cluster's NIW posterior from its statistics (``n``, ``s1`` (d,), ``s2`` (d, d)): fills ``mean_n`` and
    ``chol_n`` (the Cholesky factor of Psi_n, from the centred scatter) and returns kappa_n."""
    d = s1.shape[0]
    kappa_n = kappa + n
    safe_n = n if n > 0.0 else 1.0
    shrink = kappa * n / kappa_n
    for a in range(d):
        mean_n[a] = (kappa * mean[a] + s1[a]) / kappa_n
    for a in range(d):
        xbar_a = s1[a] / safe_n
        for b in range(a + 1):
            xbar_b = s1[b] / safe_n
            value = psi[a, b] + s2[a, b] - n * xbar_a * xbar_b + shrink * (xbar_a - mean[a]) * (xbar_b - mean[b])
            chol_n[a, b] = value
            chol_n[b, a] = value
    chol_n[:, :] = np.linalg.cholesky(chol_n)
    return kappa_n


@njit(cache=True, nogil=True)
def gaussian_point_moves_at(X, labels, order, u, kappa, mean, nu, chol_psi, alpha, sub_n, sub_s1, sub_s2):
    """``point_moves.point_moves`` for dense Gaussian points under a NIW prior: the collapsed Gibbs updates of the
    points whose rows are ``X`` (m, d) and clusters ``labels`` (m,), in ``order``, drawn with ``u``, in a state
    whose sub-cluster statistics are ``sub_n`` (K, 2), ``sub_s1`` (K, 2, d) and ``sub_s2`` (K, 2, d, d).

    Each cluster keeps its posterior with Psi_n as a Cholesky factor: a point's predictives cost O(K d^2), the
    cluster it joins a rank-one update and the cluster it leaves one O(d^3) factorisation from its statistics, so
    that rounding does not build up over the moves (Psi_n comes from raw sums, as in the generic path: ``DPMM``
    centres the data first, but clusters 1e7 times their spread from the data's mean lose precision).

    Returns ``(labels, mapping, n (K', 2), s1 (K', 2, d), s2 (K', 2, d, d), n_clusters)`` as
    ``count_point_moves_at``: ``mapping`` has an entry for each of the ``n_clusters`` cluster slots used.
    """
    K = sub_n.shape[0]
    m, d = X.shape
    C = K + m
    psi = chol_psi @ chol_psi.T
    counts = np.zeros(C)
    sums = np.zeros((C, d))
    outer = np.zeros((C, d, d))
    kappa_n = np.full(C, kappa)
    mean_n = np.empty((C, d))
    chol_n = np.empty((C, d, d))
    for k in range(C):
        mean_n[k] = mean
        chol_n[k] = chol_psi
    for k in range(K):
        counts[k] = sub_n[k, 0] + sub_n[k, 1]
        sums[k] = sub_s1[k, 0] + sub_s1[k, 1]
        outer[k] = sub_s2[k, 0] + sub_s2[k, 1]
        kappa_n[k] = _niw_posterior_into(kappa, mean, psi, counts[k], sums[k], outer[k], mean_n[k], chol_n[k])
    log_p = np.empty(C)
    work = np.empty(d)
    n_clusters = K
    for t in order:
        x = X[t]
        old = labels[t]
        counts[old] -= 1.0
        for a in range(d):
            sums[old, a] -= x[a]
            for b in range(d):
                outer[old, a, b] -= x[a] * x[b]
        if counts[old] > 0.0:  # an emptied cluster is never scored again; its left-over rounding could fail
            kappa_n[old] = _niw_posterior_into(kappa, mean, psi, counts[old], sums[old], outer[old], mean_n[old],
                                               chol_n[old])
        for k in range(n_clusters + 1):
            if k < n_clusters and counts[k] == 0.0:
                log_p[k] = -np.inf
                continue
            weight = math.log(counts[k]) if k < n_clusters else math.log(alpha)
            log_p[k] = weight + _niw_log_predictive(x, kappa_n[k], mean_n[k], nu + counts[k], chol_n[k], work)
        new = _draw(log_p[:n_clusters + 1], u[t])
        if new == n_clusters:
            n_clusters += 1
        labels[t] = new
        counts[new] += 1.0
        for a in range(d):
            sums[new, a] += x[a]
            for b in range(d):
                outer[new, a, b] += x[a] * x[b]
        kappa_n[new] = _niw_add_point(x, kappa_n[new], mean_n[new], chol_n[new], work)
    mapping = _kept_slots(counts, n_clusters)
    return (labels, mapping, _whole_in_slot_0(counts, mapping), _whole_in_slot_0(sums, mapping),
            _whole_in_slot_0(outer, mapping), n_clusters)

# --- Driver-side maths of count priors (``sampler.py``, ``sams.py``, ``point_moves.py``) ---------------------
# On small data an iteration is a few dozen numpy calls on arrays of a few dozen values, and their per-call costs
# are most of its time; these kernels do the same maths for count priors in one call each, drawing from the
# driver's numpy Generator in the order of the generic (numpy) path, whose tests they pass.


@njit(cache=True, nogil=True)
def _sample_count_params(rng, kind, hyper, n, sums, log_rate, offset):
    """Draw the parameters of B clusters with ``n`` (B,) points summing to ``sums`` (B, d) from the count prior's
    posterior into ``log_rate`` (B, d) and ``offset`` (B,) (``priors.Multinomial.sample``,
    ``priors.PoissonGamma.sample``, ``priors.NormalGamma.sample``)."""
    B, d = sums.shape
    if kind == DIAGONAL_NORMAL:
        # numpy's order: every Gamma draw, every uniform, every normal. The precisions are drawn by their logs
        # (``sample_log_dirichlet``'s identity), and a precision that underflows to 0 (a tiny shape) still gives
        # finite scores: tau mu = mu_n tau + e sqrt(tau), tau mu^2 = (mu_n sqrt(tau) + e)^2, e ~ N(0, 1 / kappa_n).
        D = d // 2
        for b in range(B):
            a_n = hyper[1] + 0.5 * n[b]
            for f in range(D):
                log_rate[b, D + f] = math.log(rng.standard_gamma(a_n + 1.0))
        for b in range(B):
            a_n = hyper[1] + 0.5 * n[b]
            for f in range(D):
                log_rate[b, D + f] += math.log(rng.random()) / a_n
        for b in range(B):
            kappa_n = hyper[0] + n[b]
            acc = -0.5 * D * math.log(2.0 * math.pi)
            for f in range(D):
                mu_n, b_n = _normal_gamma_posterior(hyper, n[b], sums[b], f)
                log_tau = log_rate[b, D + f] - math.log(b_n)
                root = math.exp(0.5 * log_tau)
                e = rng.standard_normal() / math.sqrt(kappa_n)
                log_rate[b, f] = mu_n * root * root + e * root
                log_rate[b, D + f] = -0.5 * root * root
                acc += 0.5 * log_tau - 0.5 * (mu_n * root + e) * (mu_n * root + e)
            offset[b] = acc
        return
    if kind == COUNT_MULTINOMIAL:
        concentration = np.empty(d)
        for b in range(B):
            for f in range(d):
                concentration[f] = sums[b, f] + hyper[0]
            _log_dirichlet_into(rng, concentration, log_rate[b])
            offset[b] = 0.0
        return
    # numpy's order: every Gamma draw, then every uniform
    for b in range(B):
        for f in range(d):
            log_rate[b, f] = math.log(rng.standard_gamma(sums[b, f] + hyper[0] + 1.0))
    for b in range(B):
        log_b = math.log(n[b] + hyper[1])
        total = 0.0
        for f in range(d):
            log_rate[b, f] = log_rate[b, f] + math.log(rng.random()) / (sums[b, f] + hyper[0]) - log_b
            total += math.exp(log_rate[b, f])
        offset[b] = -total


@njit(cache=True, nogil=True)
def count_kernel_params(rng, kind, hyper, alpha, sub_n, sub_sums, random_sub, with_subclusters):
    """``sampler.sample_kernel_params`` for a count prior, from the sub-cluster statistics ``sub_n`` (K, 2) and
    ``sub_sums`` (K, 2, d) of a state whose reset flags are ``random_sub`` (K,).

    Returns ``(log_rate (K, d), offset (K,), log_w (K,), sub_log_rate (2K, d or 0), sub_offset (2K,),
    sub_log_w (2K,), random_sub (K,))``.
    """
    K, _, d = sub_sums.shape
    n = np.empty(K)
    sums = np.empty((K, d))
    for k in range(K):
        n[k] = sub_n[k, 0] + sub_n[k, 1]
        for f in range(d):
            sums[k, f] = sub_sums[k, 0, f] + sub_sums[k, 1, f]
    log_w = np.empty(K)
    _log_dirichlet_into(rng, n, log_w)
    log_rate = np.empty((K, d))
    offset = np.empty(K)
    _sample_count_params(rng, kind, hyper, n, sums, log_rate, offset)
    if not with_subclusters:
        return (log_rate, offset, log_w, np.zeros((2 * K, 0)), np.zeros(2 * K), np.zeros(2 * K),
                np.ones(K, np.bool_))
    sub_log_w = np.empty(2 * K)
    pair = np.empty(2)
    for k in range(K):
        pair[0] = sub_n[k, 0] + alpha / 2.0
        pair[1] = sub_n[k, 1] + alpha / 2.0
        _log_dirichlet_into(rng, pair, sub_log_w[2 * k:2 * k + 2])
    sub_log_rate = np.empty((2 * K, d))
    sub_offset = np.empty(2 * K)
    _sample_count_params(rng, kind, hyper, sub_n.reshape(2 * K), sub_sums.reshape(2 * K, d), sub_log_rate,
                         sub_offset)
    # ``sampler._hyperplane_resets``
    for k in range(K):
        if random_sub[k]:
            scale = max(n[k], 1.0)
            dot = 0.0
            for f in range(d):
                sub_log_rate[2 * k, f] = rng.standard_normal()
                dot += sub_log_rate[2 * k, f] * (sums[k, f] / scale)
            sub_offset[2 * k] = dot
    return log_rate, offset, log_w, sub_log_rate, sub_offset, sub_log_w, random_sub.copy()


@njit(cache=True, nogil=True)
def _count_split_log_ratio(kind, hyper, alpha, n_l, n_r, sums_l, sums_r, whole):
    """``sampler.split_log_ratio`` of one cluster with sub-clusters (n_l, sums_l) and (n_r, sums_r), both
    non-empty; ``whole`` (d,) is scratch space."""
    for f in range(whole.shape[0]):
        whole[f] = sums_l[f] + sums_r[f]
    return (math.log(alpha) + math.lgamma(n_l) + math.lgamma(n_r) - math.lgamma(n_l + n_r)
            + _count_log_marginal(kind, hyper, n_l, sums_l) + _count_log_marginal(kind, hyper, n_r, sums_r)
            - _count_log_marginal(kind, hyper, n_l + n_r, whole))


@njit(cache=True, nogil=True)
def count_split_log_ratios(kind, hyper, alpha, sub_n, sub_sums):
    """(B,) ``sampler.split_log_ratios`` of B clusters with sub-cluster statistics ``sub_n`` (B, 2) and
    ``sub_sums`` (B, 2, d) under a count prior; -inf where a sub-cluster is empty."""
    out = np.empty(sub_sums.shape[0])
    whole = np.empty(sub_sums.shape[2])
    for b in range(sub_sums.shape[0]):
        if sub_n[b, 0] <= 0.0 or sub_n[b, 1] <= 0.0:
            out[b] = -np.inf
        else:
            out[b] = _count_split_log_ratio(kind, hyper, alpha, sub_n[b, 0], sub_n[b, 1], sub_sums[b, 0],
                                            sub_sums[b, 1], whole)
    return out


@njit(cache=True, nogil=True)
def count_log_posterior(kind, hyper, alpha, n, sums):
    """``sampler.log_posterior`` of K clusters with ``n`` (K,) points summing to ``sums`` (K, d) under a count
    prior."""
    total = 0.0
    acc = 0.0
    for k in range(n.shape[0]):
        total += n[k]
        acc += math.log(alpha) + math.lgamma(n[k]) + _count_log_marginal(kind, hyper, n[k], sums[k])
    return math.lgamma(alpha) - math.lgamma(total + alpha) + acc


@njit(cache=True, nogil=True)
def count_point_moves_at(indptr, indices, data, all_labels, index, order, u, kind, hyper, alpha, sub_n, sub_sums):
    """``point_moves.point_moves`` for count points (CSR, all of them, labelled ``all_labels``): the updates of
    ``count_point_moves`` of the points ``index`` (sorted) in ``order``, in a state whose sub-cluster statistics
    are ``sub_n`` (K, 2) and ``sub_sums`` (K, 2, d).

    Returns ``(labels (m,), mapping (C,), n (K', 2), sums (K', 2, d), C)``: the points' new labels among the C
    cluster slots used, each slot's cluster after emptied ones are dropped (-1: dropped), and the statistics of
    the K' clusters left, each whole in sub-cluster slot 0.
    """
    K, _, d = sub_sums.shape
    m = index.shape[0]
    rows = csr_take_rows(indptr, indices, data, index)
    labels = np.empty(m, np.int64)
    for t in range(m):
        labels[t] = all_labels[index[t]]
    counts = np.zeros(K + m)
    totals = np.zeros(K + m)
    sums = np.zeros((K + m, d))
    for k in range(K):
        counts[k] = sub_n[k, 0] + sub_n[k, 1]
        for f in range(d):
            sums[k, f] = sub_sums[k, 0, f] + sub_sums[k, 1, f]
            totals[k] += sums[k, f]
    n_clusters = count_point_moves(rows[0], rows[1], rows[2], kind, hyper, alpha, labels, counts, totals, sums, K,
                                   order, u)
    mapping = _kept_slots(counts, n_clusters)
    return labels, mapping, _whole_in_slot_0(counts, mapping), _whole_in_slot_0(sums, mapping), n_clusters


# Weights of the second point's three sources in a split/merge proposal (``sams.py``): uniform, the first point's
# own cluster, a uniformly drawn cluster. numba compiles them in as constants: changing them means editing them.
PAIR_WEIGHTS = (1.0 / 3.0, 1.0 / 3.0, 1.0 / 3.0)


@njit(cache=True, nogil=True)
def log_pair_probability(n, n_clusters, size_i, size_j, same):
    """log of n q(i, j): the probability of drawing j second, given i, in a partition of n points into
    ``n_clusters`` clusters where i's cluster has ``size_i`` points and j's ``size_j`` (``same``: one cluster)."""
    p = PAIR_WEIGHTS[0] / (n - 1)
    if same:
        p += PAIR_WEIGHTS[1] / (size_i - 1) + PAIR_WEIGHTS[2] / (n_clusters * (size_i - 1))
    else:
        p += PAIR_WEIGHTS[2] / (n_clusters * size_j)
    return math.log(p)


@njit(cache=True, nogil=True)
def _members(labels, first, second):
    """Sorted indices of the points labelled ``first`` or ``second``."""
    count = 0
    for t in range(labels.shape[0]):
        count += labels[t] == first or labels[t] == second
    out = np.empty(count, np.int64)
    count = 0
    for t in range(labels.shape[0]):
        if labels[t] == first or labels[t] == second:
            out[count] = t
            count += 1
    return out


@njit(cache=True, nogil=True)
def _anchored_order(rng, index, i, j):
    """Positions in ``index`` (sorted) of the anchors i and j, and the other positions in random order."""
    anchors = np.empty(2, np.int64)
    anchors[0] = np.searchsorted(index, i)
    anchors[1] = np.searchsorted(index, j)
    others = np.empty(index.shape[0] - 2, np.int64)
    count = 0
    for t in range(index.shape[0]):
        if t != anchors[0] and t != anchors[1]:
            others[count] = t
            count += 1
    return anchors, _permuted(rng, others)


@njit(cache=True, nogil=True)
def _permuted(rng, values):
    """A shuffled copy of 1-d ``values``: numpy's ``rng.permutation(values)``, the same draws in the same order.

    numba's own ``permutation`` compiles a shuffle along any axis of any array, about 3 s of a first run's
    compilation; this is its 1-d loop (Fisher-Yates with numpy's bounded integers)."""
    out = values.copy()
    for i in range(out.shape[0] - 1, 0, -1):
        j = np.intp(random_interval(rng.bit_generator, i))
        out[i], out[j] = out[j], out[i]
    return out


@njit(cache=True, nogil=True)
def count_sams_move(rng, kind, hyper, alpha, indptr, indices, data, labels, sub_n, sub_sums):
    """One split-or-merge proposal of ``sams.py`` for count points (CSR, all of them) with ``labels``, in a state
    whose sub-cluster statistics are ``sub_n`` (K, 2) and ``sub_sums`` (K, 2, d); the generic path's draws from
    ``rng``, in its order.

    Returns ``(outcome, first, second, moved, halves_n (2,), halves_sums (2, d))``: outcome 0 (nothing accepted),
    1 (cluster ``first`` splits and the points ``moved`` leave it for a new cluster) or 2 (cluster ``second``
    merges into ``first``); the halves are the statistics of the two clusters proposed.
    """
    n = labels.shape[0]
    K, _, d = sub_sums.shape
    nothing = (0, -1, -1, np.zeros(0, np.int64), np.zeros(2), np.zeros((2, d)))
    if n < 2:
        return nothing
    i = rng.integers(0, n)
    source = rng.random()
    if source < PAIR_WEIGHTS[0]:
        j = rng.integers(0, n - 1)
        j += j >= i
    else:
        cluster = labels[i] if source < PAIR_WEIGHTS[0] + PAIR_WEIGHTS[1] else rng.integers(0, K)
        members = _members(labels, cluster, cluster)
        others = members[members != i]
        if others.shape[0] == 0:
            return nothing
        j = others[rng.integers(0, others.shape[0])]
    a, b = labels[i], labels[j]
    whole = np.empty(d)
    if a == b:
        index = _members(labels, a, a)
        anchors, order = _anchored_order(rng, index, i, j)
        forced = np.full(index.shape[0], -1, np.int8)
        u = np.empty(index.shape[0])
        for t in range(index.shape[0]):
            u[t] = rng.random()
        rows = csr_take_rows(indptr, indices, data, index)
        log_q, side, halves_n, halves_sums = count_sequential_allocation(rows[0], rows[1], rows[2], kind, hyper,
                                                                         anchors, order, forced, u)
        log_pair = (log_pair_probability(n, K + 1, halves_n[0], halves_n[1], False)
                    - log_pair_probability(n, K, index.shape[0], index.shape[0], True))
        log_h = _count_split_log_ratio(kind, hyper, alpha, halves_n[0], halves_n[1], halves_sums[0],
                                       halves_sums[1], whole)
        if math.log(rng.random()) >= log_h - log_q + log_pair:
            return nothing
        return 1, a, -1, index[side == 1], halves_n, halves_sums
    # A merge: rejected early when the uniform exceeds the ratio without log q (``sams._propose_merge``)
    log_u = math.log(rng.random())
    size_a = sub_n[a, 0] + sub_n[a, 1]
    size_b = sub_n[b, 0] + sub_n[b, 1]
    sums_a = sub_sums[a, 0] + sub_sums[a, 1]
    sums_b = sub_sums[b, 0] + sub_sums[b, 1]
    log_pair = (log_pair_probability(n, K - 1, size_a + size_b, size_a + size_b, True)
                - log_pair_probability(n, K, size_a, size_b, False))
    log_h = -_count_split_log_ratio(kind, hyper, alpha, size_a, size_b, sums_a, sums_b, whole) + log_pair
    if log_u >= log_h:
        return nothing
    index = _members(labels, a, b)
    anchors, order = _anchored_order(rng, index, i, j)
    forced = np.empty(index.shape[0], np.int8)
    for t in range(index.shape[0]):
        forced[t] = labels[index[t]] == b
    rows = csr_take_rows(indptr, indices, data, index)
    log_q, _, halves_n, halves_sums = count_sequential_allocation(rows[0], rows[1], rows[2], kind, hyper, anchors,
                                                                  order, forced, np.zeros(index.shape[0]))
    if log_u >= log_h + log_q:  # the forced allocation recreates a and b: halves are their statistics
        return nothing
    return 2, a, b, np.zeros(0, np.int64), halves_n, halves_sums
