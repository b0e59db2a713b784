"""Exact split/merge moves: sequentially-allocated merge-split (Dahl 2003), with a targeted choice of the pair.

Two distinct points are drawn. In one cluster, they anchor a proposed split: the cluster's other points, in random
order, join one anchor's side or the other with probability proportional to the side's size times the collapsed
predictive of the point given the side so far. In two clusters, a merge is proposed, and the probability that the
same allocation would have recreated the current split enters the Hastings ratio. Both directions use collapsed
marginal likelihoods, so the move leaves the exact posterior over partitions invariant.

Dahl draws the pair uniformly, which on large data rarely lands where a move is needed: inside the one cluster
that holds two components, or on a small stray cluster and its neighbour. Here the first point i is uniform and
the second j comes from a mixture: uniform over the other points, uniform over the other members of i's cluster
(split proposals), or a member of a cluster drawn uniformly (small clusters get merge proposals as often as large
ones). The pair's probability depends on the partition, so the Hastings ratio carries ``q(i, j | proposed) /
q(i, j | current)`` (``kernels.log_pair_probability``); the move stays exact (the enumeration tests check it).

Sub-cluster proposals (``sampler.step``) find structure much faster on large data, but their Hastings ratio is
exact only in Chang & Fisher's augmented space under approximations that a test on a handful of points exposes;
these moves are what keeps the post-warm-up chain exact.
"""

from __future__ import annotations

import numpy as np

from . import kernels
from .backends import SparseRows
from .priors import SufficientStats
from .sampler import DPMMState, split_log_ratio

# the numpy path calls the kernels' formula as plain Python: no second compiled signature, no dispatch per call
log_pair_probability = kernels.log_pair_probability.py_func


def _allocate(prior, points, anchors, order, forced, u):
    """Run the sequential allocation on ``points``; returns (log q, side, SufficientStats with batch (2,))."""
    args = prior.kernel_args(points.shape[1])
    if isinstance(points, SparseRows):
        log_q, side, counts, sums = kernels.count_sequential_allocation(
            points.indptr, points.indices, points.data, *args, anchors, order, forced, u,
        )
        return log_q, side, SufficientStats(counts, sums)
    log_q, side, counts, sums, outer = kernels.gaussian_sequential_allocation(
        np.ascontiguousarray(points), *args, anchors, order, forced, u,
    )
    return log_q, side, SufficientStats(counts, sums, outer)


def _draw_pair(backend, n_clusters, rng):
    """``(i, j)`` distinct point indices drawn as in the module docstring, or None (the draw found no j)."""
    n = backend.n_points
    i = int(rng.integers(n))
    source = rng.random()
    if source < kernels.PAIR_WEIGHTS[0]:
        j = int(rng.integers(n - 1))
        return i, j + (j >= i)
    labels = backend.all_labels()
    own_cluster = source < kernels.PAIR_WEIGHTS[0] + kernels.PAIR_WEIGHTS[1]
    cluster = labels[i] if own_cluster else int(rng.integers(n_clusters))
    members = np.flatnonzero(labels == cluster)
    members = members[members != i]
    if members.shape[0] == 0:
        return None
    return i, int(members[rng.integers(members.shape[0])])


def sams_move(state, backend, prior, alpha, rng):
    """One split-or-merge proposal. Returns ``(state, n_splits, n_merges)`` (0 or 1 each).

    For count priors the proposal is one kernel call (``kernels.count_sams_move``) on the backend's copy of the
    points, with the same draws as the generic path.
    """
    if not prior.sparse_kernels:
        return _sams_move_numpy(state, backend, prior, alpha, rng)
    points = backend.held_points()
    outcome, first, second, moved, halves_n, halves_sums = kernels.count_sams_move(
        rng, *prior.kernel_args(points.n_features), float(alpha), points.indptr, points.indices, points.data,
        backend.all_labels(), *state.stats.kernel_arrays(),
    )
    halves = SufficientStats(halves_n, halves_sums)
    if outcome == 1:
        return _apply_split(state, backend, int(first), moved, halves), 1, 0
    if outcome == 2:
        return _apply_merge(state, backend, int(first), int(second), halves), 0, 1
    return state, 0, 0


def _sams_move_numpy(state, backend, prior, alpha, rng):
    """``sams_move`` for any prior, gathering the points of the proposal from the backend."""
    n = backend.n_points
    if n < 2:
        return state, 0, 0
    pair = _draw_pair(backend, state.age.shape[0], rng)
    if pair is None:
        return state, 0, 0
    i, j = pair
    label_i, label_j = backend.labels_at(np.array([i, j]))
    if label_i == label_j:
        return _propose_split(state, backend, prior, alpha, rng, int(label_i), i, j)
    return _propose_merge(state, backend, prior, alpha, rng, int(label_i), int(label_j), i, j)


def _anchored(index, i, j, rng):
    anchors = np.array([np.searchsorted(index, i), np.searchsorted(index, j)], dtype=np.int64)
    others = np.ones(index.shape[0], bool)
    others[anchors] = False
    return anchors, rng.permutation(np.flatnonzero(others))


def _propose_split(state, backend, prior, alpha, rng, k, i, j):
    index, points = backend.points_of([k])
    anchors, order = _anchored(index, i, j, rng)
    forced = np.full(index.shape[0], -1, np.int8)
    log_q, side, halves = _allocate(prior, points, anchors, order, forced, rng.random(index.shape[0]))
    n, K, size = backend.n_points, state.age.shape[0], index.shape[0]
    log_pair = (log_pair_probability(n, K + 1, halves.n[0], halves.n[1], False)
                - log_pair_probability(n, K, size, size, True))
    if np.log(rng.uniform()) >= split_log_ratio(prior, alpha, halves) - log_q + log_pair:
        return state, 0, 0
    return _apply_split(state, backend, k, index[side == 1], halves), 1, 0


def _apply_split(state, backend, k, moved, halves):
    """The state after cluster k split into ``halves`` (batch (2,)), the points ``moved`` forming a new cluster."""
    new = state.age.shape[0]
    backend.update([], np.arange(new + 1), moved=(moved, new))
    stats = state.stats
    whole = [halves.take(h) for h in range(2)]
    n = np.concatenate([stats.n, np.zeros((1, 2))])
    s1 = np.concatenate([stats.s1, np.zeros((1,) + stats.s1.shape[1:])])
    s2 = None if stats.s2 is None else np.concatenate([stats.s2, np.zeros((1,) + stats.s2.shape[1:])])
    for cluster, part in zip((k, new), whole):
        n[cluster] = (part.n, 0.0)
        s1[cluster] = (part.s1, np.zeros_like(part.s1))
        if s2 is not None:
            s2[cluster] = (part.s2, np.zeros_like(part.s2))
    age = np.append(state.age, 0)
    age[k] = 0
    random_sub = np.append(state.random_sub, True)
    random_sub[k] = True
    return DPMMState(SufficientStats(n, s1, s2), age, random_sub)


def _propose_merge(state, backend, prior, alpha, rng, a, b, i, j):
    # The log ratio is -split_log_ratio(a | b) + log_pair + log q with log q <= 0 (the log probability that the
    # allocation recreates the current split): when the uniform already exceeds the first two terms, the merge is
    # rejected without gathering the points, which is the usual case for two well-separated clusters.
    log_u = np.log(rng.uniform())
    pair = state.stats.sum(axis=1).take(np.array([a, b]))
    n, K = backend.n_points, state.age.shape[0]
    size_a, size_b = float(pair.n[0]), float(pair.n[1])
    log_pair = (log_pair_probability(n, K - 1, size_a + size_b, size_a + size_b, True)
                - log_pair_probability(n, K, size_a, size_b, False))
    log_h = -split_log_ratio(prior, alpha, pair) + log_pair
    if log_u >= log_h:
        return state, 0, 0
    index, points = backend.points_of([a, b])
    anchors, order = _anchored(index, i, j, rng)
    forced = (backend.labels_at(index) == b).astype(np.int8)
    log_q, _, halves = _allocate(prior, points, anchors, order, forced, np.zeros(index.shape[0]))
    if log_u >= log_h + log_q:  # the forced allocation recreates a and b: halves are their statistics
        return state, 0, 0
    return _apply_merge(state, backend, a, b, halves), 0, 1


def _apply_merge(state, backend, a, b, halves):
    """The state after cluster b merged into a; ``halves`` (batch (2,)) are their statistics."""
    K = state.age.shape[0]
    mapping = np.arange(K)
    mapping[b] = a
    keep = np.ones(K, bool)
    keep[b] = False
    compact = np.cumsum(keep) - 1
    backend.update([], compact[mapping])
    stats = state.stats
    merged_n = stats.n.copy()
    merged_s1 = stats.s1.copy()
    merged_s2 = None if stats.s2 is None else stats.s2.copy()
    merged_n[a] = halves.n
    merged_s1[a] = halves.s1
    if merged_s2 is not None:
        merged_s2[a] = halves.s2
    age = state.age.copy()
    age[a] = 0
    random_sub = state.random_sub.copy()
    random_sub[a] = False
    new_stats = SufficientStats(merged_n[keep], merged_s1[keep], None if merged_s2 is None else merged_s2[keep])
    return DPMMState(new_stats, age[keep], random_sub[keep])

