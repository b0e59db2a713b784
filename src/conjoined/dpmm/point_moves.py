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

    Clusters a point leaves or joins are written back whole into sub-cluster slot 0 and flagged for random
    sub-labels (sub-clusters only matter during warm-up).
    """
    n = backend.n_points
    index = np.sort(rng.choice(n, size=min(n_moves, n), replace=False))
    order = rng.permutation(index.shape[0])
    u = rng.random(index.shape[0])
    rows = backend.rows_at(index)
    labels = backend.labels_at(index).astype(np.int64)
    original = labels.copy()
    K = state.age.shape[0]
    capacity = K + index.shape[0]
    whole = state.stats.sum(axis=1)
    d = whole.s1.shape[1]
    counts = np.concatenate([whole.n, np.zeros(capacity - K)])
    sums = np.concatenate([whole.s1, np.zeros((capacity - K, d))])
    outer = None
    if isinstance(rows, SparseRows):
        totals = sums.sum(axis=1)
        n_clusters = kernels.count_point_moves(rows.indptr, rows.indices, rows.data, *prior.kernel_args(d),
                                               float(alpha), labels, counts, totals, sums, K, order, u)
    else:
        outer = np.concatenate([whole.s2, np.zeros((capacity - K, d, d))])
        n_clusters = _gaussian_point_moves(prior, alpha, rows, labels, counts, sums, outer, K, order, u)

    occupied = counts[:n_clusters] > 0
    compact = np.cumsum(occupied) - 1
    backend.update([], np.where(occupied, compact, -1), moved=(index, labels))
    touched = np.zeros(n_clusters, bool)
    touched[K:] = True
    touched[original] = True
    touched[labels] = True
    zeros = np.zeros(n_clusters - K)
    n_sub = np.concatenate([state.stats.n, np.zeros((n_clusters - K, 2))])
    s1_sub = np.concatenate([state.stats.s1, np.zeros((n_clusters - K, 2, d))])
    n_sub[touched] = np.stack([counts[:n_clusters][touched], np.zeros(touched.sum())], axis=1)
    s1_sub[touched, 0], s1_sub[touched, 1] = sums[:n_clusters][touched], 0.0
    s2_sub = None
    if outer is not None:
        s2_sub = np.concatenate([state.stats.s2, np.zeros((n_clusters - K, 2, d, d))])
        s2_sub[touched, 0], s2_sub[touched, 1] = outer[:n_clusters][touched], 0.0
    age = np.concatenate([state.age, zeros.astype(np.int64)])
    random_sub = np.concatenate([state.random_sub, zeros.astype(bool)]) | touched
    new_state = DPMMState(SufficientStats(n_sub[occupied], s1_sub[occupied],
                                          None if s2_sub is None else s2_sub[occupied]),
                          age[occupied], random_sub[occupied])
    return new_state, n_clusters - K, int((~occupied).sum())
