"""Exact single-point moves: collapsed Gibbs updates of a few random points (Neal 2000, algorithm 3).

After warm-up the anchored pass neither empties nor opens a cluster, and the split/merge move of ``sams.py`` picks
its pair of points at random, so a stray small cluster (a singleton left by warm-up, say) can linger. Here points
drawn at random, one after the other, leave their cluster and rejoin cluster k with probability proportional to
``N_k m(x | X_k)`` (statistics without the point) or open a cluster of their own with ``alpha m(x)``: exact Gibbs
updates of the partition, which close and open small clusters directly. A few points per iteration cost little:
O(K x the point's non-zeros) for counts, O(K d^3) for the Gaussian prior.
"""

from __future__ import annotations

import numpy as np

from . import kernels
from .backends import SparseRows
from .priors import SufficientStats
from .sampler import DPMMState


def _gaussian_point_moves(prior, alpha, X, labels, counts, sums, outer, n_clusters, order, u):
    """The Gibbs updates of ``order`` for dense points ``X`` under a NIW prior (statistics updated in place);
    the predictives are differences of log marginals. Returns the number of cluster slots used."""
    for m in order:
        x = X[m]
        xx = np.outer(x, x)
        old = labels[m]
        counts[old] -= 1.0
        sums[old] -= x
        outer[old] -= xx
        # Clusters 0..n_clusters-1 plus one empty slot standing for "a new cluster".
        live = SufficientStats(counts[:n_clusters + 1], sums[:n_clusters + 1], outer[:n_clusters + 1])
        with_x = SufficientStats(live.n + 1.0, live.s1 + x, live.s2 + xx)
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
        outer[new] += xx
    return n_clusters


def point_moves(state, backend, prior, alpha, rng, n_moves):
    """Collapsed Gibbs updates of ``n_moves`` distinct random points. Returns ``(state, n_opened, n_closed)``.

    These moves run after warm-up only, where sub-clusters play no part: every cluster comes back whole in
    sub-cluster slot 0 and flagged for random sub-labels.
    """
    n = backend.n_points
    index = np.sort(rng.choice(n, size=min(n_moves, n), replace=False))
    order = rng.permutation(index.shape[0])
    u = rng.random(index.shape[0])
    rows = backend.rows_at(index)
    labels = backend.labels_at(index).astype(np.int64)
    K = state.age.shape[0]
    spare = index.shape[0]
    whole = state.stats.sum(axis=1)
    d = whole.s1.shape[1]
    counts = np.concatenate([whole.n, np.zeros(spare)])
    sums = np.concatenate([whole.s1, np.zeros((spare, d))])
    outer = None
    if isinstance(rows, SparseRows):
        n_clusters = kernels.count_point_moves(rows.indptr, rows.indices, rows.data, *prior.kernel_args(d),
                                               float(alpha), labels, counts, sums.sum(axis=1), sums, K, order, u)
    else:
        outer = np.concatenate([whole.s2, np.zeros((spare, d, d))])
        n_clusters = _gaussian_point_moves(prior, alpha, rows, labels, counts, sums, outer, K, order, u)

    occupied = counts[:n_clusters] > 0
    backend.update([], np.where(occupied, np.cumsum(occupied) - 1, -1), moved=(index, labels))
    n_kept = int(occupied.sum())

    def whole_in_slot_0(values):
        return np.stack([values, np.zeros_like(values)], axis=1)

    new_stats = SufficientStats(whole_in_slot_0(counts[:n_clusters][occupied]),
                                whole_in_slot_0(sums[:n_clusters][occupied]),
                                None if outer is None else whole_in_slot_0(outer[:n_clusters][occupied]))
    # Ages only gate warm-up proposals; the anchored step after warm-up sets them to one, as here.
    return DPMMState(new_stats, np.ones(n_kept, np.int64), np.ones(n_kept, bool)), n_clusters - K, n_clusters - n_kept
