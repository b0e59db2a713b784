"""Exact single-point moves: collapsed Gibbs updates of a few random points (Neal 2000, algorithm 3).

After warm-up the anchored pass neither empties nor opens a cluster, and the split/merge move of ``sams.py`` picks
its pair of points at random, so a stray small cluster (a singleton left by warm-up, say) can linger. Here points
drawn at random, one after the other, leave their cluster and rejoin cluster k with probability proportional to
``N_k m(x | X_k)`` (statistics without the point) or open a cluster of their own with ``alpha m(x)``: exact Gibbs
updates of the partition, which close and open small clusters directly. A few points per iteration cost little:
O(K x the point's non-zeros) for counts, O(K d^2 + d^3) for the Gaussian prior.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from . import kernels
from .backends import SparseRows
from .priors import SufficientStats
from .sampler import DPMMState


def _point_moves_numpy(state, backend, prior, alpha, index, order, u):
    """The Gibbs updates of the points ``index`` (sorted) in ``order`` for any prior, applied to the backend; the
    predictives are differences of log marginals (the reference the count and Gaussian kernels are tested
    against). Returns the statistics of the clusters left (each whole in sub-cluster slot 0) and the number of
    cluster slots used."""
    X = backend.rows_at(index)
    if isinstance(X, SparseRows):
        X = sp.csr_matrix((X.data, X.indices, X.indptr), shape=X.shape).toarray()
    labels = backend.labels_at(index).astype(np.int64)
    n_clusters = state.age.shape[0]
    spare = index.shape[0]
    whole = state.stats.sum(axis=1)
    d = whole.s1.shape[1]
    counts = np.concatenate([whole.n, np.zeros(spare)])
    sums = np.concatenate([whole.s1, np.zeros((spare, d))])
    outer = None if whole.s2 is None else np.concatenate([whole.s2, np.zeros((spare, d, d))])
    for m in order:
        x = X[m]
        xx = None if outer is None else np.outer(x, x)
        old = labels[m]
        counts[old] -= 1.0
        sums[old] -= x
        if outer is not None:
            outer[old] -= xx
        # Clusters 0..n_clusters-1 plus one empty slot standing for "a new cluster".
        live = SufficientStats(counts[:n_clusters + 1], sums[:n_clusters + 1],
                               None if outer is None else outer[:n_clusters + 1])
        with_x = SufficientStats(live.n + 1.0, live.s1 + x, None if outer is None else live.s2 + xx)
        log_p = prior.log_marginal(with_x) - prior.log_marginal(live)
        with np.errstate(divide="ignore"):
            log_p[:n_clusters] += np.log(counts[:n_clusters])
        log_p[n_clusters] += np.log(alpha)
        p = np.cumsum(np.exp(log_p - log_p.max()))
        new = min(int(np.searchsorted(p, u[m] * p[-1], side="right")), n_clusters)
        n_clusters += new == n_clusters
        labels[m] = new
        counts[new] += 1.0
        sums[new] += x
        if outer is not None:
            outer[new] += xx

    occupied = counts[:n_clusters] > 0
    backend.update([], np.where(occupied, np.cumsum(occupied) - 1, -1), moved=(index, labels))

    def whole_in_slot_0(values):
        if values is None:
            return None
        slots = np.zeros((int(occupied.sum()), 2) + values.shape[1:])
        slots[:, 0] = values[:n_clusters][occupied]
        return slots

    return SufficientStats(whole_in_slot_0(counts), whole_in_slot_0(sums), whole_in_slot_0(outer)), n_clusters


def _draw_points(n, n_moves, rng):
    """``(index, order, u)``: ``min(n_moves, n)`` distinct points of n (sorted), the order of their updates
    (positions in ``index``) and a uniform for each."""
    index = np.sort(rng.choice(n, size=min(n_moves, n), replace=False))
    return index, rng.permutation(index.shape[0]), rng.random(index.shape[0])


def point_moves(state, backend, prior, alpha, rng, n_moves):
    """Collapsed Gibbs updates of ``n_moves`` distinct random points. Returns ``(state, n_opened, n_closed)``.

    These moves run after warm-up only, where sub-clusters play no part: every cluster comes back whole in
    sub-cluster slot 0 and flagged for random sub-labels.
    """
    index, order, u = _draw_points(backend.n_points, n_moves, rng)
    K = state.age.shape[0]
    if prior.sparse_kernels:
        points = backend.held_points()
        labels, mapping, counts, sums, n_clusters = kernels.count_point_moves_at(
            points.indptr, points.indices, points.data, backend.all_labels(), index, order, u,
            *prior.kernel_args(points.n_features), float(alpha), *state.stats.kernel_arrays(),
        )
        backend.update([], mapping, moved=(index, labels))
        new_stats = SufficientStats(counts, sums)
    elif prior.kind == "gaussian":
        rows = np.ascontiguousarray(backend.rows_at(index), dtype=np.float64)
        labels, mapping, counts, sums, outer, n_clusters = kernels.gaussian_point_moves_at(
            rows, backend.labels_at(index).astype(np.int64), order, u, *prior.kernel_args(rows.shape[1]),
            float(alpha), *(np.ascontiguousarray(a, dtype=np.float64) for a in state.stats),
        )
        backend.update([], mapping, moved=(index, labels))
        new_stats = SufficientStats(counts, sums, outer)
    else:
        new_stats, n_clusters = _point_moves_numpy(state, backend, prior, alpha, index, order, u)
    n_kept = new_stats.n.shape[0]
    # Ages only gate warm-up proposals; the anchored step after warm-up sets them to one, as here.
    return DPMMState(new_stats, np.ones(n_kept, np.int64), np.ones(n_kept, bool)), n_clusters - K, n_clusters - n_kept
