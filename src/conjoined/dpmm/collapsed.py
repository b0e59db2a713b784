"""Exact point moves: one collapsed Gibbs sweep (Neal 2000, algorithm 3), cluster parameters integrated out.

Each point in turn leaves its cluster and joins an existing cluster with probability proportional to its size
times the collapsed predictive, or a new cluster with probability proportional to alpha times the prior
predictive. Unlike the restricted parallel pass, this sweep can create clusters and leaves the posterior over
partitions exactly invariant; it is sequential, so it runs over the shards one after the other.
"""

from __future__ import annotations

import numpy as np

from . import kernels
from .priors import SufficientStats
from .sampler import DPMMState

_SPARE_SLOTS = 16


def _grow(arrays, extra):
    return [np.concatenate([a, np.zeros((extra,) + a.shape[1:])]) for a in arrays]


def collapsed_sweep(state, backend, prior, alpha, rng):
    """One sweep over every point of a local backend; returns the new state (sub-clusters reset)."""
    whole = state.stats.sum(axis=1)
    gaussian = whole.s2 is not None
    arrays = [whole.n.copy(), whole.s1.copy()]
    arrays.append(whole.s2.copy() if gaussian else whole.s1.sum(axis=1))
    if gaussian:
        arrays.append(prior.log_marginal(whole))
    arrays = _grow(arrays, _SPARE_SLOTS)
    args = prior.kernel_args(whole.s1.shape[1])
    for shard in backend.shards:
        u = rng.random(shard.n)
        start = 0
        while start < shard.n:
            if gaussian:
                counts, sums, outer, log_m = arrays
                start = kernels.gaussian_collapsed_sweep(shard.values, shard.labels, counts, sums, outer, log_m,
                                                         *args, float(alpha), u, start)
            else:
                counts, sums, totals = arrays
                start = kernels.count_collapsed_sweep(shard.indptr, shard.indices, shard.values, shard.labels,
                                                      counts, totals, sums, *args, float(alpha), u, start)
            if start < shard.n:
                arrays = _grow(arrays, _SPARE_SLOTS)
    counts = arrays[0]
    keep = counts > 0
    compact = np.full(counts.shape[0], -1, np.int64)
    compact[keep] = np.arange(keep.sum())
    backend.update([], compact)
    K = int(keep.sum())
    sums = arrays[1][keep]
    n = np.stack([counts[keep], np.zeros(K)], axis=1)
    s1 = np.stack([sums, np.zeros_like(sums)], axis=1)
    s2 = None
    if gaussian:
        outer = arrays[2][keep]
        s2 = np.stack([outer, np.zeros_like(outer)], axis=1)
    return DPMMState(SufficientStats(n, s1, s2), np.zeros(K, np.int64), np.ones(K, bool))
