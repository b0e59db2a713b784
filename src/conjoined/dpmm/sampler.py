"""The sub-cluster split/merge sampler of Chang & Fisher (2013), as an ``init`` and a ``step`` function.

The driver-side state is small: per cluster, the sufficient statistics of its two sub-clusters, its age and
whether its sub-labels must be redrawn at random. Labels live with the data, in the backend's shards, which
expose ``initialize``, ``assign`` and ``update`` (see ``backends.py``). One ``step``:

1. weights ``(pi_1..pi_K) ~ Dir(N_1..N_K)``, sub-weights ``~ Dir(N_kl + alpha/2, N_kr + alpha/2)``;
2. cluster and sub-cluster parameters from their conjugate posteriors;
3. one pass over the data, every point independently given the draw: a label among the K clusters, a sub-label
   within its cluster, and the statistics;
4. empty clusters removed; a cluster with an empty sub-cluster is reset (random sub-labels next pass);
5. with ``subcluster_moves``, split proposals, then pairwise merge proposals (Chang & Fisher), each accepted with
   its Hastings ratio; a cluster whose split is rejected is reset too (sub-clusters that straddle two components
   never separate by themselves: a fresh hyperplane gives them another chance); in the warm-up's last
   ``burn_out`` passes, a cluster younger than that is split whenever its sub-clusters are more probable apart;
6. one relabelling message to the shards.

Chang & Fisher's pass (3) lets clusters empty but never creates one, so with the moves of (5) it finds structure
fast but is not an exact sampler (a test on a handful of points shows it): the estimator uses it during warm-up.
Afterwards (``subcluster_moves=False``) the pass is anchored, and exact: a fresh random rank is drawn for every
point (``backends.point_priorities``), each cluster's lowest-ranked member keeps its label, and every other point
may only join clusters whose anchor ranks below it. The ranks are drawn independently of the labels, the anchors
fix which partitions the pass can reach (no cluster empties, none is created), and on that set the posterior of
the labels given the weights and parameters is a product over points, so the pass draws it exactly: a Gibbs
update. Clusters are then created and removed by the exact split/merge moves of ``sams.py`` and the collapsed
single-point Gibbs moves of ``point_moves.py``.

A cluster may split or merge only once it has had ``burn_out`` passes (and at least one) since it was created or
reset: its sub-clusters need a pass to fit before a split proposal means anything. In the warm-up's last
``burn_out`` passes a younger cluster may split too (step 5, ``step``'s ``passes_left``).

For count priors, steps 1-2, the split ratios and the log posterior are single kernel calls
(``kernels.count_*``): on small data an iteration is otherwise dominated by per-call costs of numpy on arrays of a
few dozen values. They take the same draws from the driver's Generator as the generic path (``*_numpy``), which
the Gaussian prior uses, and the tests hold them to it.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy.special import gammaln

from . import kernels
from .backends import point_priorities
from .priors import SufficientStats, sample_log_dirichlet


class DPMMState(NamedTuple):
    """Driver-side sampler state for K clusters.

    stats : SufficientStats with batch shape (K, 2), the statistics of each cluster's two sub-clusters. For a
        cluster flagged in ``random_sub`` the split into sub-clusters is not known yet: slot 0 holds the whole
        cluster and slot 1 is empty.
    age : (K,) passes since the cluster was created or reset.
    random_sub : (K,) bool, draw this cluster's sub-labels at random in the next pass.
    """

    stats: SufficientStats
    age: np.ndarray
    random_sub: np.ndarray


class StepInfo(NamedTuple):
    n_splits: int
    n_merges: int


def split_log_ratio(prior, alpha, sub_stats):
    """Log Hastings ratio of splitting a cluster into its two sub-clusters (``sub_stats`` batch shape (2,)).

    log H = log alpha + lgamma(N_l) + log m(X_l) + lgamma(N_r) + log m(X_r) - lgamma(N) - log m(X)
    """
    one = SufficientStats(sub_stats.n[None], sub_stats.s1[None], None if sub_stats.s2 is None else sub_stats.s2[None])
    return float(split_log_ratios(prior, alpha, one)[0])


def split_log_ratios(prior, alpha, sub_stats):
    """``split_log_ratio`` of each of a batch of clusters: ``sub_stats`` batch shape (B, 2); returns (B,)
    (-inf where a sub-cluster is empty)."""
    if prior.sparse_kernels:
        return kernels.count_split_log_ratios(*prior.kernel_args(sub_stats.s1.shape[-1]), float(alpha),
                                              *sub_stats.kernel_arrays())
    return _split_log_ratios_numpy(prior, alpha, sub_stats)


def _split_log_ratios_numpy(prior, alpha, sub_stats):
    """``split_log_ratios`` for any prior, through its ``log_marginal`` (the Gaussian prior's path; the count
    kernel is tested against it)."""
    whole = sub_stats.sum(axis=1)

    def with_whole(parts, union):
        return np.concatenate([parts, union[:, None]], axis=1)

    # The two sub-clusters and their union side by side, batch (B, 3): one marginal and one lgamma evaluation.
    three = SufficientStats(with_whole(np.asarray(sub_stats.n, dtype=np.float64), whole.n),
                            with_whole(sub_stats.s1, whole.s1),
                            None if sub_stats.s2 is None else with_whole(sub_stats.s2, whole.s2))
    log_m = prior.log_marginal(three)
    log_gamma = gammaln(np.maximum(three.n, 1.0))
    log_h = (np.log(alpha) + log_gamma[:, 0] + log_gamma[:, 1] - log_gamma[:, 2]
             + log_m[:, 0] + log_m[:, 1] - log_m[:, 2])
    return np.where((three.n[:, :2] > 0).all(axis=1), log_h, -np.inf)


def merge_log_ratio(prior, alpha, stats_i, stats_j):
    """Log Hastings ratio of merging two clusters (each ``stats`` with batch shape ()).

    log H = lgamma(N_i+N_j) - lgamma(N_i) - lgamma(N_j) + log m(X_ij) - log m(X_i) - log m(X_j) - log alpha
            + lgamma(alpha) - 2 lgamma(alpha/2) + lgamma(N_i + alpha/2) + lgamma(N_j + alpha/2)
            - lgamma(N_i + N_j + alpha)
    The last line is the sub-cluster weights' proposal term: the reverse of ``split_log_ratio`` up to it.
    """
    both = SufficientStats(np.array([float(stats_i.n), float(stats_j.n)]), np.stack([stats_i.s1, stats_j.s1]),
                           None if stats_i.s2 is None else np.stack([stats_i.s2, stats_j.s2]))
    return float(merge_log_ratios(prior, alpha, both, np.array([0]), np.array([1]))[0])


# Pairs whose merged statistics are formed at once in ``merge_log_ratios`` are chunked to about this many values.
MERGE_CHUNK_VALUES = 1 << 21


def merge_log_ratios(prior, alpha, cluster_stats, first, second):
    """``merge_log_ratio`` of the pairs ``(first[p], second[p])`` of clusters in ``cluster_stats`` (batch (K,)),
    vectorised: (P,) log ratios. Each cluster's own marginal is computed once."""
    n_i, n_j = cluster_stats.n[first].astype(np.float64), cluster_stats.n[second].astype(np.float64)
    return (merge_log_odds(prior, alpha, cluster_stats, first, second)
            + gammaln(alpha) - 2 * gammaln(alpha / 2) + gammaln(n_i + alpha / 2) + gammaln(n_j + alpha / 2)
            - gammaln(n_i + n_j + alpha))


def merge_log_odds(prior, alpha, cluster_stats, first, second, own=None):
    """Log posterior odds of merging each pair ``(first[p], second[p])`` of clusters in ``cluster_stats`` (batch
    (K,)) against keeping the pair apart, all else equal: (P,) values of

    lgamma(N_i+N_j) - lgamma(N_i) - lgamma(N_j) + log m(X_ij) - log m(X_i) - log m(X_j) - log alpha

    (the difference of ``log_posterior`` between the two partitions). ``own`` (K,): each cluster's log m, if
    the caller has them; else computed here, once each. The merged statistics are formed in chunks of about
    ``MERGE_CHUNK_VALUES`` values."""
    n = cluster_stats.n.astype(np.float64)
    if own is None:
        own = prior.log_marginal(cluster_stats)
    values_per_pair = int(np.prod(cluster_stats.s1.shape[1:])) + (
        0 if cluster_stats.s2 is None else int(np.prod(cluster_stats.s2.shape[1:])))
    chunk = max(1, MERGE_CHUNK_VALUES // values_per_pair)
    merged = np.empty(first.shape[0])
    for lo in range(0, first.shape[0], chunk):
        a, b = first[lo:lo + chunk], second[lo:lo + chunk]
        merged[lo:lo + chunk] = prior.log_marginal(cluster_stats.take(a) + cluster_stats.take(b))
    n_i, n_j = n[first], n[second]
    return gammaln(n_i + n_j) - gammaln(n_i) - gammaln(n_j) + merged - own[first] - own[second] - np.log(alpha)


def log_posterior(prior, alpha, cluster_stats):
    """Log joint of the partition and data: lgamma(alpha) - lgamma(N+alpha) + sum_k [log alpha + lgamma(N_k) + log m(X_k)]."""
    if prior.sparse_kernels:
        return kernels.count_log_posterior(*prior.kernel_args(cluster_stats.s1.shape[-1]), float(alpha),
                                           *cluster_stats.kernel_arrays())
    return _log_posterior_numpy(prior, alpha, cluster_stats)


def _log_posterior_numpy(prior, alpha, cluster_stats):
    """``log_posterior`` for any prior, through its ``log_marginal`` (the Gaussian prior's path; the count kernel
    is tested against it)."""
    n = cluster_stats.n
    return float(
        gammaln(alpha) - gammaln(n.sum() + alpha)
        + np.sum(np.log(alpha) + gammaln(n) + prior.log_marginal(cluster_stats))
    )


def init(backend, n_clusters, prior, labels=None):
    """Random labels over ``n_clusters`` clusters, or the given ``labels`` (0..n_clusters-1), with random
    sub-labels."""
    stats = backend.initialize(n_clusters, prior, labels)
    K = stats.n.shape[0]
    return _drop_empty(backend, DPMMState(stats, np.zeros(K, np.int64), np.zeros(K, bool)))


def _drop_empty(backend, state):
    keep = state.stats.n.sum(axis=1) > 0
    if keep.all():
        return state
    mapping = np.full(keep.shape[0], -1, np.int64)
    mapping[keep] = np.arange(keep.sum())
    backend.update([], mapping)
    return DPMMState(state.stats.take(np.flatnonzero(keep)), state.age[keep], state.random_sub[keep])


def sample_kernel_params(state, prior, alpha, rng, with_subclusters=True):
    """Steps 1-2: log weights and parameters of clusters and sub-clusters, flattened to 2K sub-cluster entries.

    The weights leave out the DP's remaining mass ``pi_rest``: no pass creates a cluster, and the normalised
    weights of the K clusters are ``Dir(N_1..N_K)``.

    Without sub-clusters (no sub-cluster moves to feed) their parameters have no features, which tells the pass to
    skip sub-labels (all 0).
    """
    if prior.sparse_kernels:
        log_rate, offset, log_w, sub_log_rate, sub_offset, sub_log_w, random_sub = kernels.count_kernel_params(
            rng, *prior.kernel_args(state.stats.s1.shape[-1]), float(alpha), *state.stats.kernel_arrays(),
            state.random_sub, with_subclusters,
        )
        return (log_rate, offset), log_w, (sub_log_rate, sub_offset), sub_log_w, random_sub
    return _sample_kernel_params_numpy(state, prior, alpha, rng, with_subclusters)


def _sample_kernel_params_numpy(state, prior, alpha, rng, with_subclusters):
    """``sample_kernel_params`` for any prior, through its ``posterior`` and ``sample`` (the Gaussian prior's
    path; the count kernel draws the same numbers, which the tests check)."""
    stats = state.stats
    cluster_stats = stats.sum(axis=1)
    K = cluster_stats.n.shape[0]
    log_w = sample_log_dirichlet(rng, cluster_stats.n)
    params = prior.sample(prior.posterior(cluster_stats), rng)
    if with_subclusters:
        sub_log_w = sample_log_dirichlet(rng, stats.n + alpha / 2.0).reshape(2 * K)
        sub_params = prior.sample(prior.posterior(stats), rng)
        sub_params = tuple(p.reshape((2 * K,) + p.shape[2:]) for p in sub_params)
        random_sub = state.random_sub.copy()
        _hyperplane_resets(sub_params, random_sub, cluster_stats, rng)
    else:
        sub_log_w = np.zeros(2 * K)
        sub_params = tuple(np.zeros((2 * K,) + tuple(0 for _ in p.shape[1:])) for p in params)
        random_sub = np.ones(K, bool)
    return params, log_w, sub_params, sub_log_w, random_sub


def _hyperplane_resets(sub_params, random_sub, cluster_stats, rng):
    """For each reset cluster, a random hyperplane through its mean, written into sub-cluster slot 2k.

    Random halves of a cluster have near-identical means, so sub-clusters started from them take many passes to
    find structure (in 32 dimensions, often more than a warm-up); a random hyperplane starts them apart. The
    kernels read the normal from the first parameter array (log rates or means) and the offset from the last
    (offsets or log-determinants) of slot 2k.
    """
    for k in np.flatnonzero(random_sub):
        n = max(float(cluster_stats.n[k]), 1.0)
        normal = rng.standard_normal(sub_params[0].shape[1])
        sub_params[0][2 * k] = normal
        sub_params[-1][2 * k] = normal @ (cluster_stats.s1[k] / n)


def anchors(labels, n_clusters, rng):
    """``(seed, anchor_priority (K,), anchor_index (K,))`` for an anchored pass over points with ``labels``."""
    seed = int(rng.integers(2**63))
    priority = point_priorities(seed, 0, labels.shape[0])
    anchor_index = kernels.cluster_anchors(labels, priority, n_clusters)
    if (anchor_index < 0).any():
        raise RuntimeError("an anchored pass needs every cluster occupied")
    return seed, priority[anchor_index], anchor_index


def step(state, backend, prior, alpha, burn_out, rng, subcluster_moves=True, passes_left=None):
    """One iteration (module docstring); splits and merges of step 6 only with ``subcluster_moves``.

    ``passes_left`` (None: no limit) counts this pass and those after it that may make sub-cluster moves.
    When it is at most ``burn_out``, a cluster younger than ``burn_out`` whose sub-clusters have had a pass
    is split when they are more probable apart (split log ratio above 0), without a random draw: a cluster
    made that late in the warm-up would otherwise keep every component it holds.

    Returns ``(new_state, StepInfo)``.
    """
    kernel_params = sample_kernel_params(state, prior, alpha, rng, with_subclusters=subcluster_moves)
    K = state.stats.n.shape[0]
    restriction = None if subcluster_moves else anchors(backend.all_labels(), K, rng)
    stats = backend.assign(*kernel_params, restriction)
    K = stats.n.shape[0]
    if not subcluster_moves:
        # The anchored pass empties no cluster and draws no sub-labels: nothing to split, merge or relabel.
        return DPMMState(stats, np.ones(K, np.int64), np.ones(K, bool)), StepInfo(0, 0)
    age = state.age.copy()
    random_sub = np.zeros(K, bool)
    age[state.random_sub] = 0

    # Removal of empty clusters is folded into the final relabelling; they take part in nothing.
    occupied = stats.n.sum(axis=1) > 0
    empty_sub = occupied & (stats.n.min(axis=1) == 0)
    random_sub[empty_sub] = True
    age[empty_sub] = 0
    # Splits need sub-clusters fitted by at least one data-driven pass; merges need no sub-clusters.
    fitted = occupied & ~random_sub & ~state.random_sub & (age >= 1)
    split_ok = fitted & (age >= burn_out)
    # In the last burn_out passes a new cluster cannot come of age: young clusters split greedily instead.
    late = passes_left is not None and passes_left <= burn_out
    young = fitted & ~split_ok & late
    merge_ok = occupied & (age >= burn_out)

    n_list, s1_list = list(stats.n), list(stats.s1)
    s2_list = None if stats.s2 is None else list(stats.s2)
    ages, resets = list(age), list(random_sub)

    def whole(k):
        return SufficientStats(n_list[k].sum(), s1_list[k].sum(axis=0),
                               None if s2_list is None else s2_list[k].sum(axis=0))

    def set_cluster(k, part_a, part_b, reset):
        n_list[k] = np.array([part_a.n, part_b.n], dtype=np.float64)
        s1_list[k] = np.stack([part_a.s1, part_b.s1])
        if s2_list is not None:
            s2_list[k] = np.stack([part_a.s2, part_b.s2])
        ages[k] = 0
        resets[k] = reset

    def empty_like(k):
        return SufficientStats(np.float64(0.0), np.zeros_like(s1_list[k][0]),
                               None if s2_list is None else np.zeros_like(s2_list[k][0]))

    def append_cluster():
        n_list.append(None)
        s1_list.append(None)
        if s2_list is not None:
            s2_list.append(None)
        ages.append(0)
        resets.append(True)
        return len(n_list) - 1

    splits = []
    proposed = np.flatnonzero(split_ok | young)
    split_log_h = split_log_ratios(prior, alpha, stats.take(proposed)) if proposed.shape[0] else []
    for k, log_h_k in zip(proposed, split_log_h):
        sub = stats.take(k)
        if (log_h_k > 0) if young[k] else (np.log(rng.uniform()) < log_h_k):
            new = append_cluster()
            right = sub.take(1)
            set_cluster(k, sub.take(0), empty_like(k), True)
            set_cluster(new, right, empty_like(k), True)
            splits.append((int(k), new))
            merge_ok[k] = False
        elif not young[k]:
            # Sub-clusters that straddle two components look alike and never separate by themselves: start
            # them again from a fresh hyperplane.
            set_cluster(k, whole(k), empty_like(k), True)

    mapping = np.arange(len(n_list))
    n_merges = 0
    candidates = np.flatnonzero(merge_ok)
    # Candidates are neither split nor touched before their merge test: their ratios can be computed at once.
    log_h = np.empty((candidates.shape[0], candidates.shape[0]))
    if candidates.shape[0] > 1:
        first, second = np.triu_indices(candidates.shape[0], 1)
        log_h[first, second] = merge_log_ratios(prior, alpha, stats.take(candidates).sum(axis=1), first, second)
    for a_pos, i in enumerate(candidates):
        if not merge_ok[i]:
            continue
        for b_pos in range(a_pos + 1, candidates.shape[0]):
            j = candidates[b_pos]
            if not merge_ok[j]:
                continue
            if np.log(rng.uniform()) < log_h[a_pos, b_pos]:
                set_cluster(i, whole(i), whole(j), False)
                n_list[j] = np.zeros(2)
                mapping[j] = i
                merge_ok[i] = merge_ok[j] = False
                n_merges += 1
                break

    totals = np.array([n.sum() for n in n_list])
    keep = totals > 0
    compact = np.full(len(n_list), -1, np.int64)
    compact[keep] = np.arange(keep.sum())
    mapping = compact[mapping]
    backend.update(splits, mapping)

    kept = np.flatnonzero(keep)
    new_stats = SufficientStats(
        np.stack([n_list[k] for k in kept]),
        np.stack([s1_list[k] for k in kept]),
        None if s2_list is None else np.stack([s2_list[k] for k in kept]),
    )
    new_state = DPMMState(new_stats, np.array([ages[k] for k in kept], np.int64) + 1,
                          np.array([resets[k] for k in kept], bool))
    return new_state, StepInfo(len(splits), n_merges)
