"""``ConjoinedDirichletProcess``: probabilistic biclustering of a count matrix without choosing K.

Pipeline:

1. a DP mixture clusters the rows (points in column space) and one clusters the columns, each started from the
   partition of the matrix's spectrum (``init="spectral"``, ``conjoined.spectral``) or from one cluster;
2. ``n_rounds`` conjoined rounds: each side is re-clustered on the matrix aggregated by the other side's current
   clusters (rows x K_c sums, columns x K_r sums), a low-noise view shaped by the other side; from the second
   round on, a multinomial side's over-dispersed features are divided by their dispersion, of which deep
   points take a larger share (``dispersion``);
3. K on each side: the most frequent number of clusters over the post-warm-up iterations of the last run; the
   labels are a consensus of the iterations with that K, then clusters are merged where the mixture's posterior
   favours a coarser partition by more than 20 to 1 (``_merged_by_posterior``);
4. token reassignment: each token starts at (row label, column label) and is resampled by the collapsed Gibbs
   update of the dual-topic model, K fixed;
5. phi, theta and memberships from the token counts, and biclusters by significance of each (k, l) block of
   the partitions, after a refinement of the partitions under the block model (``refine``; see
   ``conjoined.refine.refine_partition``).

``mode="paper"`` runs the published pipeline instead (independent multinomial DPMMs on the raw matrix, then the
same reassignment and extraction unless set otherwise), for comparison.
"""

from __future__ import annotations

import contextlib
import json
import numbers
import os
import threading
import warnings
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp
from scipy.optimize import linear_sum_assignment
from sklearn.base import BaseEstimator, BiclusterMixin
from sklearn.utils.validation import check_is_fitted

from ._interrupt import unwrapping_interruptions
from ._pearson import cluster_shares, squared_residual_terms
from ._progress import progress_bar
from ._stack import user_stacklevel
from ._validation import (
    check_bool,
    check_int,
    check_matrix,
    check_positive,
    check_verbose,
    keeping_state_on_failure,
    line_totals,
    record_features,
    record_row_names,
)
from .background import DEFAULT_MIN_SIZE, check_thresholds
from .dpmm import DPMM, Multinomial, PoissonGamma
from .dpmm.backends import single_threaded_blas
from .dpmm.diagnostics import ChainNotSettledWarning, ChainTrend, describe
from .dpmm.estimator import (
    SharedClientMixin,
    _draws_a_seed_each_fit,
    fresh_seed,
    resolve_n_jobs,
    seed_sequence,
)
from .dpmm.priors import COUNT_GRID, SufficientStats
from .dpmm.sampler import merge_log_odds
from .extract import BACKGROUNDS, extract_biclusters, topic_parameters
from .predict import cluster_probabilities, most_probable, side_classifiers
from .reassign import TokenCounts, check_token_total, reassign_tokens
from .refine import _n_clusters, refine_partition
from .spectral import spectral_partition

LIKELIHOODS = ("poisson", "multinomial")
MODES = ("conjoined", "paper")
DISPERSIONS = ("auto", "none")
INITS = ("spectral", "one")
POINT_DISPERSION_ITERATIONS = 5


_HASH_MULTIPLIER = 2654435761
_HASH_MODULUS = 1048573  # a prime below 2**20: products with counts stay far from int64 overflow
# Rounds of content keys after the weighted totals (_content_keys).
MAX_CONTENT_ROUNDS = 64
# Log posterior odds by which a coarser partition must beat the mixtures' consensus to replace it
# (``_merged_by_posterior``): 20 to 1, "strong" evidence on Kass and Raftery's scale.
MIN_MERGE_LOG_ODDS = 3.0


class MixtureTrend(NamedTuple):
    """The trend of one of CDP's mixture fits: ``side`` ("row" or "column"), ``trend`` (the ``ChainTrend`` of its log
    posterior after warm-up) and ``n_clusters`` (its K at the first and last iteration after warm-up)."""

    side: str
    trend: ChainTrend
    n_clusters: tuple[int, int]


def unsettled_message(trends, n_iter, side_names=("row", "column"), n_iter_name="n_iter", n_biclusters=None):
    """The warning for the mixture fits among ``trends`` (CDP's ``dpmm_trends_``) that have not settled, None if
    none; the sides called ``side_names`` (rows', columns'), the iterations ``n_iter_name`` (``n_iter`` of the fit).
    A fit that found no bicluster (``n_biclusters`` 0) says so: on counts without blocks a mixture's K can drift
    for thousands of iterations, and more of them need not find any.
    """
    names = dict(zip(("row", "column"), side_names))
    parts = []
    for side in ("row", "column"):
        fits = [fit for fit in trends if fit.side == side]
        parts += [f"{names[side].capitalize()} mixture {number} of {len(fits)}: "
                  f"{describe(fit.trend, fit.n_clusters)}." for number, fit in enumerate(fits, 1)
                  if fit.trend.settled is False]
    if not parts:
        return None
    message = (f"{len(parts)} of the {len(trends)} mixture fits {'has' if len(parts) == 1 else 'have'} not settled. "
               f"{' '.join(parts)} The partitions may change with more iterations: raise {n_iter_name} (now "
               f"{n_iter}).")
    if n_biclusters == 0:
        message += (" No bicluster was found: if the counts hold no blocks, more iterations may only move the "
                    "partitions.")
    return message


class HoldoutWarning(UserWarning):
    """``holdout`` on data it does not suit (presence/absence data, whose split parts are not independent)."""


class AllZeroWarning(UserWarning):
    """Rows or columns without counts (or, with ``holdout``, without counts to fit on) were set aside; they come
    back unassigned (label -1)."""


def _content_keys(X):
    """(row keys, column keys): tuples of integer arrays computed from the counts alone, so a permutation of
    the rows and columns permutes the keys with them. First the totals, then the totals weighted by hashes of
    the other side's totals (exact integer arithmetic, so the summation order does not matter), then rounds
    where each item's key hashes its previous key and its counts weighted by hashes of the other side's keys
    (Weisfeiler-Lehman refinement, modulo 2**64): two single-word documents whose words have different keys
    differ, where the weighted totals of the second key can tie. The rounds go on until one splits no group of
    tied items (then none ever will), at most ``MAX_CONTENT_ROUNDS``: a chain of items, each told apart only
    through its neighbours, needs a round per link. Items still tied are alike in every round (identical
    ones, for a start)."""
    counts = sp.csr_matrix(X, dtype=np.int64)
    row_totals = np.asarray(counts.sum(axis=1)).ravel()
    column_totals = np.asarray(counts.sum(axis=0)).ravel()
    row_mix = np.asarray(counts @ ((column_totals * _HASH_MULTIPLIER) % _HASH_MODULUS)).ravel() % _HASH_MODULUS
    column_mix = np.asarray(counts.T @ ((row_totals * _HASH_MULTIPLIER) % _HASH_MODULUS)).ravel() % _HASH_MODULUS
    row_keys, column_keys = [row_totals, row_mix], [column_totals, column_mix]
    wide = counts.astype(np.uint64)
    row_hash, column_hash = _mix64(row_mix), _mix64(column_mix)
    groups = (np.unique(row_hash).size, np.unique(column_hash).size)
    for _ in range(MAX_CONTENT_ROUNDS):
        row_hash, column_hash = (_mix64(row_hash ^ np.asarray(wide @ column_hash).ravel()),
                                 _mix64(column_hash ^ np.asarray(wide.T @ row_hash).ravel()))
        row_keys.append(row_hash)
        column_keys.append(column_hash)
        groups, previous = (np.unique(row_hash).size, np.unique(column_hash).size), groups
        if groups == previous:
            break
    return tuple(row_keys), tuple(column_keys)


def _mix64(values):
    """SplitMix64's finaliser of ``values`` (n,) as uint64: a bijection that spreads nearby integers apart
    (uint64 arithmetic wraps around)."""
    x = np.asarray(values).astype(np.uint64)
    x ^= x >> np.uint64(30)
    x *= np.uint64(0xBF58476D1CE4E5B9)
    x ^= x >> np.uint64(27)
    x *= np.uint64(0x94D049BB133111EB)
    x ^= x >> np.uint64(31)
    return x


def _canonical_order(keys):
    """Order of items by their content keys (``np.lexsort``; ties, i.e. identical keys, keep input order)."""
    return np.lexsort(keys[::-1])


def _aggregate(X, labels, n_clusters):
    """(n_rows, n_clusters) sums of X's columns by column label (labels -1 are left out)."""
    keep = labels >= 0
    indicator = sp.csr_matrix(
        (np.ones(keep.sum()), (np.flatnonzero(keep), labels[keep])), shape=(X.shape[1], n_clusters)
    )
    return sp.csr_matrix(X @ indicator)


def feature_dispersion(aggregated, labels, likelihood):
    """Over-dispersion of each feature of ``aggregated`` within the clusters ``labels``, 1 where it is noise.

    ``aggregated`` (n, d) holds counts, ``labels`` (n,) the points' clusters. Under the mixture's likelihood a
    point's count of feature f has mean ``m = t_i p_kf`` (cluster k's share of its total t_i for "multinomial";
    the cluster's mean count, t_i = 1, for "poisson"). The dispersion of f is Pearson's statistic
    ``X2_f = sum_i (x_if - m_if)^2 / m_if`` over its degrees of freedom n - K: about 1 for Poisson (multinomial)
    counts, larger for over-dispersed ones (a negative binomial's 1 + m / size). It is kept where X2_f exceeds
    n - K by five standard deviations of the statistic under Poisson counts (variance ``sum_i 2 + 1 / m_if``,
    the second term dominating sparse counts), and is 1 elsewhere. Returns (d,) floats >= 1.
    """
    aggregated = sp.csr_matrix(aggregated, dtype=np.float64)
    n, d = aggregated.shape
    totals = np.asarray(aggregated.sum(axis=1)).ravel() if likelihood == "multinomial" else np.ones(n)
    z, K, member, sums, share = cluster_shares(aggregated, labels, totals)
    counts, terms = squared_residual_terms(aggregated, z, totals, share)
    pearson = np.bincount(counts.col, weights=terms, minlength=d) - sums.sum(axis=0)
    # Points whose expected count is 0 have count 0 and add nothing to the statistic or its variance.
    observed = totals > 0
    points = (member.T @ observed)[:, None] * (share > 0)
    inverse_totals = member.T @ np.divide(1.0, totals, out=np.zeros(n), where=observed)
    inverse_share = np.divide(1.0, share, out=np.zeros((K, d)), where=share > 0)
    variance = 2.0 * points.sum(axis=0) + inverse_totals @ inverse_share
    df = max(n - K, 1)
    raised = pearson - df > 5.0 * np.sqrt(variance)
    return np.where(raised, pearson / df, 1.0)


def point_dispersion(aggregated, labels):
    """Over-dispersion of each point's profile that grows with its total, 1 where the data show none.

    ``aggregated`` (n, d) holds counts, ``labels`` (n,) the points' clusters of a multinomial mixture. A point
    of total t drawn from a Dirichlet-multinomial around its cluster's profile has Pearson's statistic
    ``X2_i = sum_f (x_if - t p_kf)^2 / (t p_kf)`` inflated by ``1 + c (t - 1)`` over the multinomial's (c =
    1 / (1 + concentration)); so does a gene's count summed over a cell cluster when each cell's count is
    negative binomial: deep points vary more than shallow ones beyond multinomial noise. ``c`` is the weighted
    least-squares slope of ``X2_i / df_i - 1`` on ``t_i - 1`` (df_i = (d_k - 1)(1 - 1/n_k), d_k the features
    cluster k has counts in, n_k its size; each point weighted by the inverse variance of its statistic,
    ``2 df + (sum_f 1/p_kf - d_k^2 - 2 d_k + 2) / t`` times the squared dispersion, iterated), kept where it
    stands five standard errors above 0. Returns (n,) floats >= 1: ``1 + c (t_i - 1)``.
    """
    aggregated = sp.csr_matrix(aggregated, dtype=np.float64)
    n = aggregated.shape[0]
    totals = np.asarray(aggregated.sum(axis=1)).ravel()
    z, _, _, _, share = cluster_shares(aggregated, labels, totals)
    counts, terms = squared_residual_terms(aggregated, z, totals, share)
    pearson = np.bincount(counts.row, weights=terms, minlength=n) - totals
    features = (share > 0).sum(axis=1)
    inverse_share = np.divide(1.0, share, out=np.zeros(share.shape), where=share > 0).sum(axis=1)
    sizes = np.bincount(z)
    df = (features[z] - 1) * (1.0 - 1.0 / sizes[z])
    counted = (df > 0) & (totals > 0)
    df, t, pearson = df[counted], totals[counted], pearson[counted]
    sparse_term = np.maximum(inverse_share - features**2 - 2 * features + 2, 0.0)[z[counted]] / t
    excess, depth = pearson / df - 1.0, t - 1.0
    slope, spread = 0.0, np.inf
    for _ in range(POINT_DISPERSION_ITERATIONS):
        weight = df**2 / ((2 * df + sparse_term) * (1.0 + slope * depth) ** 2)
        information = (weight * depth**2).sum()
        if information <= 0:
            return np.ones(n)
        slope = max((weight * excess * depth).sum() / information, 0.0)
        spread = 1.0 / np.sqrt(information)
    if slope < 5.0 * spread:
        return np.ones(n)
    return 1.0 + slope * np.maximum(totals - 1.0, 0.0)


def _tempered(aggregated, point, feature):
    """``aggregated`` (n, d) with each count of an over-dispersed feature (``feature`` (d,) > 1) divided by its
    dispersion there, ``feature`` times its point's share ``point`` (n,) (at least 1: counts are never
    inflated); a quasi-likelihood, the mixture weighs each count's evidence at what it is worth. On the 1/1024
    grid the count priors take (a non-zero count stays at least 1/1024)."""
    if np.all(feature == 1.0):
        return aggregated
    counts = sp.csr_matrix(aggregated, dtype=np.float64).tocoo()
    dispersion = feature[counts.col]
    dispersion = np.where(dispersion > 1.0, np.maximum(point[counts.row] * dispersion, 1.0), 1.0)
    values = np.maximum(np.round(counts.data * COUNT_GRID / dispersion), 1.0)
    return sp.csr_matrix((values / COUNT_GRID, (counts.row, counts.col)), shape=counts.shape)


def _k_posterior(dpmm):
    """Distribution of K over the post-warm-up iterations of a fitted DPMM, as {K: probability}."""
    ks = dpmm.n_clusters_trace_[dpmm.warmup_:]
    values, counts = np.unique(ks, return_counts=True)
    return {int(k): float(c) / len(ks) for k, c in zip(values, counts)}


def _select_labels(dpmm, X, consensus=True):
    """Point estimate of the partition of the points X (n, d), the data ``dpmm`` was fitted on, from the
    post-warm-up trace, from the samples whose K is the posterior mode of K; returns ``(labels (n,), K, {K:
    posterior probability})``.

    The last sample with that K is the reference, and without ``consensus`` the answer (the paper's choice).
    With it, every other sample with that K is matched to it (Hungarian assignment on the contingency table)
    and each item takes its most frequent matched label, a posterior summary that does not depend on one
    sample's noise; then clusters are merged where the mixture's posterior favours it (``_merged_by_posterior``).
    Labels are relabelled 0..K-1, where K can be below the mode: a small cluster whose items vote more often for
    other clusters is absorbed, and merged clusters are one.
    """
    k_post = _k_posterior(dpmm)
    k_mode = max(k_post, key=lambda k: (k_post[k], -k))
    ks = dpmm.n_clusters_trace_
    chosen = [i for i in range(dpmm.warmup_, len(ks)) if ks[i] == k_mode]
    _, reference = np.unique(dpmm.labels_trace_[chosen[-1]], return_inverse=True)
    if not consensus:
        return reference.astype(np.int64), k_mode, k_post
    votes = np.zeros((reference.shape[0], k_mode))
    for i in chosen:
        _, sample = np.unique(dpmm.labels_trace_[i], return_inverse=True)
        overlap = np.zeros((k_mode, k_mode))
        np.add.at(overlap, (sample, reference), 1)
        rows, cols = linear_sum_assignment(-overlap)
        matched = np.empty(k_mode, np.int64)
        matched[rows] = cols
        votes[np.arange(reference.shape[0]), matched[sample]] += 1
    _, labels = np.unique(np.argmax(votes, axis=1), return_inverse=True)
    labels = _merged_by_posterior(dpmm, X, labels.astype(np.int64))
    return labels, int(labels.max()) + 1, k_post


def _merged_by_posterior(dpmm, X, labels):
    """``labels`` (n,), clusters 0..K-1 of the points X (n, d) that ``dpmm`` (a count prior's mixture) was fitted
    on, or a coarser partition that the posterior of ``dpmm``'s mixture favours by more than ``MIN_MERGE_LOG_ODDS``, relabelled 0..K'-1 in the order of its clusters' first
    labels.

    From ``labels``, the pair of clusters whose merge raises the log posterior most (or lowers it least) is
    merged, again and again down to one cluster; the partition of highest posterior on that path is taken if it
    beats ``labels`` by more than the margin. A Dirichlet-process mixture's number of clusters is not consistent
    (Miller and Harrison, 2013): on counts without structure its samples hold 10 or more clusters, each sample
    far less probable than the one-cluster partition (by 75-120 nats on a 100 x 80 matrix of Poisson(0.2)) but
    so many together that they hold most of the mass. The samples then describe the posterior, and this its
    mode near them. The margin keeps clusters that the data separate weakly (the paper's case 2: merges worth
    0.5-1.5 nats would join its faint block to the background). Costs O(K^2 d) for the log odds and O(K^3) for
    their maxima, and K^2 floats of memory.
    """
    K = int(labels.max()) + 1
    if K == 1:
        return labels
    prior, alpha = dpmm.prior_, float(dpmm.alpha)
    stats = SufficientStats(np.bincount(labels, minlength=K).astype(np.float64),
                            _aggregate(sp.csr_matrix(X).T, labels, K).T.toarray())
    own = prior.log_marginal(stats)  # each cluster's log m, kept up to date along the path
    odds = np.full((K, K), -np.inf)
    first, second = np.triu_indices(K, 1)
    odds[first, second] = merge_log_odds(prior, alpha, stats, first, second, own)
    cluster = np.arange(K)  # the cluster each of the K clusters of labels is in on the path
    alive = np.ones(K, bool)
    gain = best_gain = 0.0
    best = cluster.copy()
    for _ in range(K - 1):
        a, b = np.unravel_index(np.argmax(odds), odds.shape)  # a < b: b joins a
        gain += odds[a, b]
        stats.n[a] += stats.n[b]
        stats.s1[a] += stats.s1[b]
        own[a] = prior.log_marginal(stats.take([a]))[0]
        cluster[cluster == b] = a
        odds[b, :] = odds[:, b] = -np.inf
        alive[b] = False
        others = np.flatnonzero(alive)
        others = others[others != a]
        if others.shape[0]:
            updated = merge_log_odds(prior, alpha, stats, np.full(others.shape[0], a), others, own)
            odds[np.minimum(a, others), np.maximum(a, others)] = updated
        if gain > best_gain:
            best_gain, best = gain, cluster.copy()
    if best_gain <= MIN_MERGE_LOG_ODDS:
        return labels
    return np.unique(best[labels], return_inverse=True)[1].astype(np.int64)


def _checkpointed_seed(folder, random_state):
    """The root seed of a fit with the checkpoint folder ``folder``, which records the seed of the fit that began
    it in ``seed.json``.

    ``random_state`` None, a RandomState or a Generator (each fit draws another seed from those): the recorded
    seed, else a new one (:func:`fresh_seed`, or drawn from ``random_state``), recorded (an int seed:
    ``random_state`` set to it repeats the fit without the folder). An int (a SeedSequence without spawn key):
    that seed, recorded by the fit that begins the folder, so that a fit without a seed resumes it too; a fit
    with another seed is refused, naming the one that began it. A folder that holds checkpoints but no
    ``seed.json`` was begun with a seed by an earlier version, which did not record it: a fit without a seed is
    refused (it could not resume it), before it changes the folder. ``seed.json`` is written whole to a
    temporary file and linked into place only if none exists: of two fits beginning the folder at once, both
    take the first's."""
    path = os.path.join(folder, "seed.json")
    given = None if random_state is None or _draws_a_seed_each_fit(random_state) else seed_sequence(random_state)
    if given is not None and (given.spawn_key or given.n_children_spawned):
        return given  # a child seed: its entropy alone would not repeat it
    if not os.path.exists(path):
        begun = os.path.isdir(folder) and any(name.startswith("dpmm-") for name in os.listdir(folder))
        if begun and given is None:
            raise ValueError(f"checkpoint {folder} was begun by a fit with a seed that the folder does not record: "
                             "give that fit's random_state to resume it (--seed in the command), or another folder")
        os.makedirs(folder, exist_ok=True)
        temporary = f"{path}.{os.getpid()}.{threading.get_ident()}.partial"
        entropy = (int(given.entropy) if given is not None else fresh_seed() if random_state is None
                   else int(seed_sequence(random_state).entropy))
        try:
            with open(temporary, "w") as file:
                json.dump({"entropy": entropy}, file)
            os.link(temporary, path)
        except FileExistsError:
            pass
        finally:
            if os.path.exists(temporary):
                os.unlink(temporary)
    try:
        with open(path) as file:
            entropy = json.load(file)["entropy"]
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ValueError(f"checkpoint {path} is damaged ({type(error).__name__}: {error}); delete it, or the "
                         "whole folder, to start afresh") from error
    if not isinstance(entropy, int) or isinstance(entropy, bool) or entropy < 0:
        raise ValueError(f"checkpoint {path} is damaged (entropy {entropy!r} is not a non-negative integer); "
                         "delete it, or the whole folder, to start afresh")
    if given is not None and given.entropy != entropy:
        raise ValueError(f"checkpoint {folder} was begun with random_state={entropy}, not {given.entropy}: give "
                         f"random_state={entropy} (--seed {entropy} in the command) to resume it, or another folder")
    return np.random.SeedSequence(entropy)


def repeatable_params(model):
    """The parameters of the fitted CDP ``model`` (``get_params()``), with ``random_state`` the seed that a fit
    with ``random_state`` None, a RandomState or a Generator and a checkpoint folder took from the folder
    (``seed.json``): given as ``random_state``, it repeats the fit without the folder. A folder begun by a version
    before int seeds holds a 128-bit one, which HDF5 cannot store: ``random_state`` stays as it was then."""
    params = model.get_params()
    seed = getattr(model, "_checkpoint_seed", None)  # set only by such a fit
    if seed is not None and seed < 2**63:
        params["random_state"] = seed
    return params


class ConjoinedDirichletProcess(SharedClientMixin, BiclusterMixin, BaseEstimator):
    """Conjoined Dirichlet Process biclustering (Ngo, Pluta, Ngo & Shahbaba), built to recover the blocks.

    Parameters
    ----------
    row_alpha, column_alpha : float, default=1.0
        Dirichlet-process concentration of the row and column mixtures (the paper's gamma).
    row_likelihood, column_likelihood : {"poisson", "multinomial"}, default="poisson"
        Likelihood of each side's mixture. "poisson" (Gamma prior, rate from the data's mean) sees how much a
        row counts, which is what separates a block of elevated counts from background; "multinomial" (Dirichlet
        prior) sees only proportions, the right choice when totals are nuisance (cells' library size).
    row_beta, column_beta : float, default=1.0
        Dirichlet prior of the multinomial likelihood (the paper's beta); shape of the Gamma prior for "poisson".
    n_iter : int, default=150
        Iterations of every DPMM run (the first half is warm-up; see ``DPMM``).
    n_rounds : int, default=2
        Conjoined rounds after the initial independent runs (0: independent mixtures, as in the paper).
    n_reassign : int, default=20
        Sweeps of the token reassignment. The token counts, and with them theta, phi and the memberships, are
        their means over the last half of the sweeps (the last ``ceil(n_reassign / 2)``): posterior means, where
        the final allocation alone is one draw (a one-token document's membership is then 0 or 1). Not with
        ``reassign_method="paper-code"``, which makes the authors' one pass.
    a_r, a_c, lam : float, default=0.1, 0.1, 0.1
        Dirichlet smoothing of phi_rows, phi_columns and theta in the reassignment (must be > 0).
    reassign_method : {"gibbs", "paper-code"}, default="gibbs"
        "paper-code" is the authors' one-draw resampling, for comparison only: one pass in which each token's row
        topic is redrawn from the row topics of its column's other tokens and its column topic from its row's
        (``conjoined.reassign``).
    extraction : {"significance", "paper-code"}, default="significance"
        "significance" keeps the blocks (row cluster k x column cluster l) whose count exceeds the background
        density by ``z_min`` standard deviations (Poisson, or over-dispersed where the levelled background finds
        the counts so), and lets rows and columns of other clusters join a block
        whose density explains their counts better than the background (overlap). The background is one
        density unless the data demand a level for each row and column cluster (genes or words of very
        different depths); then a bicluster is a block raised above the rest of its row and column clusters.
        "paper-code" is the authors' argmax + (mean + sd of block means) rule on the token allocation. See
        ``conjoined.extract``.
    z_min, min_size : float, int or None
        Thresholds of the significance rule (None: its defaults: z_min 3, raised to the 1% family-wise level
        over the blocks tested; min_size 2). ``min_size`` is the fewest rows and columns of a bicluster: the
        refinement of the partitions keeps the default when it is larger, so a larger one drops small biclusters
        without merging their clusters into others.
    background : {"auto", "uniform"}, default="auto"
        The significance rule's background: "auto" gives it a level for each row and column cluster when the
        data demand them (they do not on the paper's simulations); "uniform" keeps the paper's one density, for
        comparison.
    dispersion : {"auto", "none"}, default="auto"
        Over-dispersion in the conjoined rounds. Profiles such as single-cell reads vary more than multinomial
        noise allows, and a mixture then cuts a cluster (a cell type) into pieces that differ by that excess
        alone. With "auto", on a side with the multinomial likelihood, every conjoined round after the first
        divides each feature of the aggregated matrix (one of the other side's clusters) by its dispersion
        within the side's current clusters, where the data show one (``feature_dispersion``), spread over the
        points by their depth where the data show that too (``point_dispersion``: a deep gene's profile varies
        more than a shallow one's): a quasi-likelihood, which weighs each count's evidence at what it is
        worth. Counts within multinomial noise, as in the paper's simulations, are left as they are, and so is
        a side with the Poisson likelihood, which is chosen to see how much each point counts. "none" keeps
        the likelihoods as they are.
    refine : bool, default=True
        Before the significance rule, refine the row and column partitions under the block model it assumes (heavy
        blocks at their densities, pooled by empirical Bayes, background elsewhere; soft EM, rows then columns;
        then clusters merged while that raises the model's classification likelihood;
        ``conjoined.refine.refine_partition``). The DP mixtures' posterior summary tends to leave borderline rows
        of a small block out; this decides them by their likelihood under the blocks' densities. A mixture can
        also set apart a few background rows whose counts are high by chance: their block passes the significance
        test, but not the cost of their labels, and they rejoin the background. A mixture can also merge a small
        block's rows into the background cluster: where the counts are Poisson around one background density (as
        in the paper's simulations) and only some of a cluster's members carry its heavy block, beyond what one
        population's counts would show, they are set apart and kept if the merges do not undo it (steps 1-4 of
        ``refine_partition``). The refined partitions are ``row_labels_`` and ``column_labels_``; the mixtures'
        stay in ``mixture_row_labels_`` and ``mixture_column_labels_``. A side with ``*_likelihood="multinomial"``
        is read by profile, whatever its items' depths (genes, cells, documents); with "poisson", items of a
        cluster share its densities (``row_likelihood`` and ``column_likelihood`` as given, also with
        ``mode="paper"``). Ignored by ``extraction="paper-code"``.
    mode : {"conjoined", "paper"}, default="conjoined"
        "paper" forces the published pipeline: independent multinomial mixtures on the raw matrix, no
        conjoined rounds, with ``row_alpha``, ``row_beta`` etc. as given, and the mixtures' labels
        (``mixture_row_labels_``, ...) those of the last iteration whose K is the posterior mode (the paper's choice; "conjoined" takes a consensus of
        all the iterations with that K, then merges clusters where the posterior favours it).
    random_state : None, int, SeedSequence, RandomState or Generator
    n_jobs : int or None
        Threads of the DPMM passes (None: every core).
    verbose : bool or int
        Progress bars (an integer level as in scikit-learn: any level above 0 shows them).
    n_shards, backend, client, address : passed to every DPMM (see ``DPMM``)
        ``backend="dask"`` runs the DPMM passes on Dask workers: on the cluster of ``client`` (or ``address``),
        otherwise on a local cluster the fit starts for all its DPMM runs and stops at its end.
    checkpoint : str, path or None, default=None
        Directory where every DPMM run keeps its checkpoint (``dpmm-<run>-<side>.npz`` and its label trace,
        ``dpmm-<run>-<side>.npz.labels``, see ``DPMM``): a fit started again with the same data and parameters
        resumes where it stopped. The seed of the fit that began the folder is recorded there (``seed.json``):
        with ``random_state`` None, a RandomState or a Generator (from which each fit draws another seed) the
        one it drew, taken again, so that the fit started again resumes (as a ``DPMM`` with None resumes from
        its checkpoint's seed); that seed, given as ``random_state``, repeats the fit without the folder
        (``conjoined fit`` and ``conjoined.anndata.cdp`` record it as such). A folder begun with an int seed
        resumes without one too, and a fit with another seed is refused, naming it.
    holdout : float in (0, 1) or None, default=None
        Share of the counts held out to test the biclusters: each count is split binomially, the partitions
        (mixtures, rounds, refinement) are fitted on the rest and the significance rule tests their blocks on the
        held-out part (count splitting: under Poisson noise the two parts are independent). Without it the test
        reads the counts that shaped the partitions, and on counts without any structure the partitions' noise
        can pass it: unstructured sparse matrices (100 x 80, Poisson(0.2) or 5% ones) give 0.15 biclusters a
        matrix on average (2 of 20 matrices have any), 0 with ``holdout=0.3`` or ``0.5``. The price is power: a
        weak block is tested on part of its counts (the paper's case 2, 20 replicates: mean Jaccard 0.97 -> 0.71
        at 0.5, 0.79 at 0.3; case 3 1.0 -> 0.99; cases 1 and 4 unchanged). Items left without counts to fit on
        are set aside (label -1, with an ``AllZeroWarning``). Memberships and ``theta_`` come from all the counts of the other items;
        ``bicluster_strength_`` from the held-out ones. Over-dispersed counts (negative binomial) split so are
        not independent: the protection is weaker there. Presence/absence (0/1) data split so are strongly
        dependent (each 1 falls in one part only) and the test then loses real blocks (20 Newsgroups, binary,
        seed 0: 16 biclusters without a holdout, none at 0.3, 5 at 0.5): a ``HoldoutWarning`` says so.
    init : {"spectral", "one"}, default="spectral"
        Where the first row and column mixtures start. "spectral": from the partitions that the matrix's spectrum
        gives (``conjoined.spectral.spectral_partition``: k-means on the singular vectors of the normalised
        matrix that stand above the noise of Poisson counts; one cluster when none does). "one": from one
        cluster, as a DP mixture usually starts. A mixture started from one cluster must find the blocks from
        single rows (columns), and where the blocks are many and each row holds little of its block, the first
        steps away from one cluster lose posterior probability: 20 or 30 blocks on a 3,000 x 2,000 matrix of
        300,000 counts are then not found at all (nothing, or 2-5 of them, at 150 iterations), where the
        spectral start finds them all. ``mode="paper"`` starts from one cluster, and so does a side read with the
        multinomial likelihood: the edge is that of Poisson noise, and over-dispersed counts (what that likelihood
        is chosen for: cells, documents) stand above it without blocks, so that side would start cut into pieces
        (single-cell-like counts of 8 cell types: adjusted Rand 0.89 against 0.99 from one cluster).

    Attributes
    ----------
    rows_ : (n_biclusters, n_rows) bool; columns_ : (n_biclusters, n_cols) bool.
    row_labels_, column_labels_ : (n_rows,), (n_cols,) int, the cluster of each row/column (-1: set aside,
        all-zero or, with ``holdout``, without counts to fit on): the partitions the biclusters are read from,
        clusters 0..K_r-1 (0..K_c-1), each with members, the topics of theta, phi and the memberships, by which
        new items are classified; the refined partitions with ``refine=True`` (refined clusters keep the order of
        the mixture's clusters they came from), the mixtures' with ``refine=False`` or
        ``extraction="paper-code"``.
    mixture_row_labels_, mixture_column_labels_ : (n_rows,), (n_cols,) int, the mixtures' partitions, which the
        refinement starts from (-1 as above): each item's most frequent cluster over the samples with the
        posterior mode of K, matched to one another, so a small cluster can be absorbed and fewer than K remain;
        then clusters are merged where the mixture's posterior favours a coarser partition by more than 20 to 1
        (on counts without structure, a Dirichlet-process mixture's samples hold many clusters, each far less
        probable than one cluster). With ``mode="paper"``: the last sample with that K, not merged.
    n_row_clusters_, n_column_clusters_ : int, K_r and K_c: the numbers of clusters of ``row_labels_`` and
        ``column_labels_``, the topics of theta, phi and the memberships. The refinement merges clusters
        (and may empty some), so they can be below the mixtures' K.
    theta_ : (K_r, K_c) joint distribution of a token's (row topic, column topic). The topics are the clusters
        of ``row_labels_`` and ``column_labels_``: the token reassignment starts from the
        partitions the biclusters are read from, so a bicluster's members have their tokens in its topics.
    phi_rows_ : (n_rows, K_r), phi_columns_ : (n_cols, K_c), each topic's distribution over rows/columns.
    row_membership_ : (n_rows, K_r) share of each row's tokens in each row topic (all zeros for a row set aside);
        column_membership_ likewise.
    bicluster_pairs_ : (n_biclusters, 2) the (k, l) of each bicluster (indices of ``row_labels_``,
        ``column_labels_``): its strongest block where it joins several; bicluster_strength_ :
        (n_biclusters,).
    bicluster_row_clusters_, bicluster_column_clusters_ : (n_biclusters, K) bool, K the number of clusters of
        ``row_labels_`` (``column_labels_``): the clusters whose blocks each bicluster joins (the
        significance rule joins the blocks of one row cluster, or of one column cluster, that stand at one
        lift; :func:`conjoined.extract.extract_biclusters`).
    row_k_posterior_, column_k_posterior_ : dict {K: posterior probability}.
    row_dispersion_, column_dispersion_ : (n_features,) floats or None, the dispersions of the features of the
        last row and column mixtures (the other side's clusters of that round; 1: left as they are); None
        without conjoined rounds.
    row_point_dispersion_, column_point_dispersion_ : (n_rows,), (n_cols,) floats or None, each row's (column's)
        share of those dispersions in the last round (its own over-dispersion over the mean of its side's: a
        count of an over-dispersed feature was divided by the feature's dispersion times this, at least 1; 1
        everywhere where the data show no depth effect; NaN for items set aside); None without conjoined
        rounds.
    row_dpmm_, column_dpmm_ : the last fitted DPMM of each side, with its traces.
    dpmm_trends_ : list of ``MixtureTrend(side, trend, n_clusters)``, one per DPMM fitted, in the order of fitting
        (both sides, then both again in each round): ``side`` "row" or "column", ``trend`` the ``ChainTrend`` of its
        log posterior after warm-up (``DPMM.log_posterior_trend_``), ``n_clusters`` its K at the first and last
        iteration after warm-up. ``fit`` warns once (``ChainNotSettledWarning``) for the fits that have not settled.
    token_counts_ : TokenCounts (n_kl, n_ik, n_jl), float64: the reassignment's mean counts over the last half of
        its sweeps (the initial allocation's counts when ``n_reassign=0``). Unlike the other attributes, n_ik and
        n_jl hold only the rows and columns with counts, in the fit's canonical order (by content).
    row_classifier_, column_classifier_ : ``conjoined.predict.SideClassifier``, the block model of the partitions
        ``row_labels_`` and ``column_labels_`` by which ``predict_row_proba`` and
        ``predict_column_proba`` classify new rows and columns (a few (K, L) arrays).
    n_features_in_ : int, the number of columns; feature_names_in_ : (n_cols,) object array of the column names,
        when X was a pandas DataFrame with string column names (absent otherwise); row_names_in_ : (n_rows,)
        object array of its row names, when they are strings (absent otherwise), which ``predict_column_proba``
        checks a DataFrame's row names against.
    """

    def __init__(self, row_alpha=1.0, column_alpha=1.0, row_likelihood="poisson", column_likelihood="poisson",
                 row_beta=1.0, column_beta=1.0, n_iter=150, n_rounds=2, n_reassign=20, a_r=0.1, a_c=0.1,
                 lam=0.1, reassign_method="gibbs", extraction="significance", z_min=None, min_size=None,
                 background="auto", dispersion="auto", refine=True, mode="conjoined", random_state=None,
                 n_jobs=None, verbose=False, n_shards=16, backend="local", client=None, address=None, checkpoint=None,
                 holdout=None, init="spectral"):
        self.row_alpha = row_alpha
        self.column_alpha = column_alpha
        self.row_likelihood = row_likelihood
        self.column_likelihood = column_likelihood
        self.row_beta = row_beta
        self.column_beta = column_beta
        self.n_iter = n_iter
        self.n_rounds = n_rounds
        self.n_reassign = n_reassign
        self.a_r = a_r
        self.a_c = a_c
        self.lam = lam
        self.reassign_method = reassign_method
        self.extraction = extraction
        self.z_min = z_min
        self.min_size = min_size
        self.background = background
        self.dispersion = dispersion
        self.refine = refine
        self.mode = mode
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.verbose = verbose
        self.n_shards = n_shards
        self.backend = backend
        self.client = client
        self.address = address
        self.checkpoint = checkpoint
        self.holdout = holdout
        self.init = init

    def _check_params(self):
        for name in ("row_alpha", "column_alpha", "row_beta", "column_beta", "a_r", "a_c", "lam"):
            check_positive(getattr(self, name), name)
        check_int(self.n_iter, "n_iter", minimum=1)
        check_int(self.n_rounds, "n_rounds", minimum=0)
        check_int(self.n_reassign, "n_reassign", minimum=0)
        check_thresholds(self.z_min, self.min_size)
        check_bool(self.refine, "refine")
        check_verbose(self.verbose)
        resolve_n_jobs(self.n_jobs)
        if self.checkpoint is not None and not (isinstance(self.checkpoint, (str, os.PathLike))
                                                and os.fspath(self.checkpoint)
                                                and not os.path.isfile(self.checkpoint)):
            raise ValueError(f"checkpoint must be None or a folder's path (not a file), got {self.checkpoint!r}")
        if self.holdout is not None:
            if not (isinstance(self.holdout, numbers.Real) and not isinstance(self.holdout, bool)
                    and 0 < self.holdout < 1):
                raise ValueError(f"holdout must be None or a share of the counts between 0 and 1, got {self.holdout!r}")
            if self.extraction != "significance":
                raise ValueError("holdout tests the significance rule's blocks: extraction='paper-code' has no test "
                                 "to hold counts out for")
        for name, allowed in (("row_likelihood", LIKELIHOODS), ("column_likelihood", LIKELIHOODS),
                              ("mode", MODES), ("reassign_method", ("gibbs", "paper-code")),
                              ("extraction", ("significance", "paper-code")), ("background", BACKGROUNDS),
                              ("dispersion", DISPERSIONS), ("init", INITS)):
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, got {getattr(self, name)!r}")

    def _prior(self, side):
        beta = getattr(self, f"{side}_beta")
        likelihood = "multinomial" if self.mode == "paper" else getattr(self, f"{side}_likelihood")
        return Multinomial(beta=beta) if likelihood == "multinomial" else PoissonGamma(shape=beta)

    def _dispersion(self, aggregated, labels, side, round_):
        """``(point (n,), feature (d,))`` dispersions of a side's aggregated matrix (n, d) in conjoined round
        ``round_``, at the side's current partition ``labels``: each feature's over its points
        (``feature_dispersion``) and each point's share of it, its own dispersion (``point_dispersion``) over
        the points' mean. A count is divided by the product (``_tempered``): a deep point's profile varies
        more than a shallow one's, and a feature's dispersion is their average.

        Ones in the first round, on a side with the Poisson likelihood and with ``dispersion="none"``. The first
        round's partitions are the finest estimates of the structure: missed structure (a block merged into
        another cluster) inflates a dispersion as much as noise does, and tempering would then hide it for
        good; a partition cut finer than the truth only lowers the estimate. Under the Poisson likelihood,
        points of one cluster that differ in depth (genes, words) inflate it too, and that is what the Poisson
        likelihood is chosen to see.
        """
        n, d = aggregated.shape
        likelihood = getattr(self, f"{side}_likelihood")
        if self.dispersion == "none" or round_ == 0 or likelihood == "poisson":
            return np.ones(n), np.ones(d)
        point = point_dispersion(aggregated, labels)
        return point / point.mean(), feature_dispersion(aggregated, labels, likelihood)

    def _dpmm(self, side, seed, client):
        checkpoint = None
        if self.checkpoint is not None:
            os.makedirs(self.checkpoint, exist_ok=True)
            checkpoint = os.path.join(self.checkpoint, f"dpmm-{seed.spawn_key[-1]}-{side}.npz")
        return DPMM(alpha=getattr(self, f"{side}_alpha"), prior=self._prior(side), n_iter=self.n_iter,
                    random_state=seed, n_jobs=self.n_jobs, verbose=self.verbose, n_shards=self.n_shards,
                    backend=self.backend, client=client, address=self.address, checkpoint=checkpoint)

    @contextlib.contextmanager
    def _mixtures_client(self):
        """The Dask client of every mixture of a fit: ``client``; with ``backend="dask"`` and neither ``client``
        nor ``address``, a local cluster's, started once for the fit (each start takes seconds, and ignores a
        Ctrl-C meanwhile) and stopped at its end; None otherwise."""
        if self.backend != "dask" or self.client is not None or self.address is not None:
            yield self.client
            return
        from .dpmm.dask_backend import embedded_client

        with embedded_client() as client:
            yield client

    def _fitted_dpmm(self, side, seed, data, fits, client, init_labels=None, side_names=("row", "column")):
        """The side's DPMM fitted on ``data`` (with the Dask ``client`` of :meth:`_mixtures_client`), from
        ``init_labels`` (None: one cluster), appended to ``fits``; whether it settled is said by ``fit`` for all
        the fits at once. Its progress bar names the side as ``side_names`` name the rows and the columns."""
        name = dict(zip(("row", "column"), side_names))[side]
        run = 1 + sum(fitted_side == side for fitted_side, _ in fits)
        dpmm = self._dpmm(side, seed, client)._fit(
            data, init_labels, extends=False, progress_name=f"{name} mixture {run}, {data.shape[0]} {name}s")
        fits.append((side, dpmm))
        return dpmm

    def fit(self, X, y=None):
        """Bicluster X (n_rows, n_cols) of non-negative integer counts, dense or scipy.sparse; returns self. Warns
        (``ChainNotSettledWarning``) of the mixture fits that have not settled (``dpmm_trends_``)."""
        self._fit(X)
        self._warn_unsettled()
        return self

    def _warn_unsettled(self, side_names=("row", "column"), n_iter_name="n_iter"):
        """The ``ChainNotSettledWarning`` of a fit whose mixtures have not all settled (``unsettled_message``),
        at the user's line."""
        message = unsettled_message(self.dpmm_trends_, self.n_iter, side_names, n_iter_name, self.n_biclusters_)
        if message is not None:
            warnings.warn(message, ChainNotSettledWarning, stacklevel=user_stacklevel())

    @unwrapping_interruptions
    @keeping_state_on_failure
    def _fit(self, X, *, all_zero_said=False, side_names=("row", "column"),
             unassigned="come back unassigned (label -1)"):
        """``fit`` without its warning about the mixtures, which a wrapper may word its own way
        (``_warn_unsettled``); ``all_zero_said``: the wrapper has said which items are all zeros; ``side_names``
        and ``unassigned``: how the holdout's warning names the items it sets aside and what becomes of them."""
        self._check_params()
        checked = check_matrix(X, name="X", min_rows=2, min_cols=2, counts=True)
        record_features(self, X, reset=True)  # before the work: names that cannot be used fail first
        record_row_names(self, X, reset=True)
        X = checked if sp.issparse(checked) else sp.csr_matrix(checked)
        if X.nnz == 0:
            raise ValueError("X is all zeros: there is nothing to bicluster")
        row_totals, col_totals = line_totals(X)
        check_token_total(row_totals.sum())
        n_rows, n_cols = X.shape
        row_kept, col_kept = row_totals > 0, col_totals > 0
        if not (row_kept.all() and col_kept.all() or all_zero_said):
            warnings.warn(
                f"{(~row_kept).sum()} all-zero row(s) and {(~col_kept).sum()} all-zero column(s) are set aside "
                "and come back unassigned (label -1)", AllZeroWarning, stacklevel=user_stacklevel(),
            )
        if row_kept.sum() < 2 or col_kept.sum() < 2:
            raise ValueError("X needs at least 2 rows and 2 columns with non-zero counts")
        # A canonical order of rows and columns, from their content: a shuffled matrix gives the same result,
        # shuffled (up to rows or columns whose content keys tie exactly).
        row_keys, col_keys = _content_keys(X[row_kept][:, col_kept])
        row_index = np.flatnonzero(row_kept)[_canonical_order(row_keys)]
        col_index = np.flatnonzero(col_kept)[_canonical_order(col_keys)]
        core = X[row_index][:, col_index]

        # Spawned one at a time, as needed: the same children as spawn(3 + 2 * n_rounds), without making them all.
        self._checkpoint_seed = None
        if self.checkpoint is not None:
            root_seed = _checkpointed_seed(self.checkpoint, self.random_state)
            if self.random_state is None or _draws_a_seed_each_fit(self.random_state):
                self._checkpoint_seed = int(root_seed.entropy)  # what repeatable_params records
        else:
            root_seed = seed_sequence(self.random_state)
        reassign_seed, row_seed, column_seed = root_seed.spawn(3)
        # The partitions are fitted on fit_core, the biclusters tested on test_core: the same counts without a
        # holdout; with one, each count split binomially, items with nothing left to fit on set aside.
        fit_core = test_core = core
        if self.holdout is not None:
            fit_core, test_core, fit_rows, fit_cols = _held_out(
                core, self.holdout, np.random.default_rng(reassign_seed.spawn(1)[0]), side_names, unassigned)
            row_index, col_index = row_index[fit_rows], col_index[fit_cols]
            core, fit_core, test_core = (part[fit_rows][:, fit_cols] for part in (core, fit_core, test_core))
        row_data, column_data = fit_core, sp.csr_matrix(fit_core.T)  # what each side's last mixture was fitted on
        row_start = column_start = None  # the first mixtures' starting labels; None: one cluster
        poisson_sides = [self.row_likelihood == "poisson", self.column_likelihood == "poisson"]
        if self.init == "spectral" and self.mode != "paper" and any(poisson_sides):
            # generate_state leaves root_seed as it is: the seeds spawned below are those of a fit without it
            # the edge is Poisson noise's: over-dispersed counts, read as profiles on a multinomial side, stand above
            # it without blocks, and that side would start cut into pieces
            start = spectral_partition(fit_core, int(root_seed.generate_state(1)[0]), sides=poisson_sides)
            if start is not None:
                row_start, column_start = start
        fits = []  # (side, fitted DPMM) in the order of fitting
        with self._mixtures_client() as client:
            row_dpmm = self._fitted_dpmm("row", row_seed, row_data, fits, client, row_start, side_names)
            column_dpmm = self._fitted_dpmm("column", column_seed, column_data, fits, client, column_start,
                                            side_names)
            rounds = 0 if self.mode == "paper" else self.n_rounds
            consensus = self.mode != "paper"
            row_dispersion = column_dispersion = None
            row_labels, K_r, row_k_post = _select_labels(row_dpmm, row_data, consensus)
            for round_ in range(rounds):
                col_labels, K_c, _ = _select_labels(column_dpmm, column_data)
                aggregated = _aggregate(fit_core, col_labels, K_c)
                row_dispersion = self._dispersion(aggregated, row_labels, "row", round_)
                row_data = _tempered(aggregated, *row_dispersion)
                row_dpmm = self._fitted_dpmm("row", root_seed.spawn(1)[0], row_data, fits, client,
                                             side_names=side_names)
                row_labels, K_r, row_k_post = _select_labels(row_dpmm, row_data)
                aggregated = _aggregate(fit_core.T.tocsr(), row_labels, K_r)
                column_dispersion = self._dispersion(aggregated, col_labels, "column", round_)
                column_data = _tempered(aggregated, *column_dispersion)
                column_dpmm = self._fitted_dpmm("column", root_seed.spawn(1)[0], column_data, fits, client,
                                                side_names=side_names)
        col_labels, K_c, col_k_post = _select_labels(column_dpmm, column_data, consensus)

        # The topics are the clusters the biclusters are read from: the refined partitions where the significance
        # rule refines them, so that a bicluster's members have their tokens in its topics.
        block_rows, block_cols = row_labels, col_labels
        refine_min_size = _refinement_min_size(self.min_size)
        if self.extraction == "significance" and self.refine:
            bar = progress_bar(None, "refinement", self.verbose)

            def report(step, rows, columns):
                bar.set_postfix_str(f"{step}: {_n_clusters(rows)} {side_names[0]} x "
                                    f"{_n_clusters(columns)} {side_names[1]} clusters")
                bar.update()

            try:
                with single_threaded_blas():  # many small products: BLAS threads cost more than they give
                    block_rows, block_cols = refine_partition(
                        fit_core, row_labels, col_labels, z_min=self.z_min, min_size=refine_min_size,
                        row_likelihood=self.row_likelihood, column_likelihood=self.column_likelihood,
                        callback=report)
            finally:
                bar.close()
            # The refinement merges clusters and may empty others: the topics are the clusters it kept.
            (block_rows, K_r), (block_cols, K_c) = _renumbered(block_rows), _renumbered(block_cols)
        # the authors' reassignment is one pass from the labels; the Gibbs sampler's counts are posterior means
        paper_code = self.reassign_method == "paper-code"
        n_sweeps = 1 if paper_code else self.n_reassign
        bar = progress_bar(n_sweeps, "token reassignment", self.verbose)
        try:
            counts = reassign_tokens(
                core, block_rows, block_cols, K_r, K_c, a_r=self.a_r, a_c=self.a_c, lam=self.lam,
                n_sweeps=n_sweeps, n_average=0 if paper_code else (n_sweeps + 1) // 2, method=self.reassign_method,
                random_state=np.random.default_rng(reassign_seed), callback=lambda sweep, counts: bar.update(),
            )
        finally:
            bar.close()
        counts = TokenCounts(*(np.asarray(count, dtype=np.float64) for count in counts))
        params = topic_parameters(counts, a_r=self.a_r, a_c=self.a_c, lam=self.lam)
        with single_threaded_blas():
            if self.extraction == "significance":
                found = extract_biclusters(test_core, counts, rule="significance", row_labels=block_rows,
                                           column_labels=block_cols, z_min=self.z_min, min_size=self.min_size,
                                           background=self.background)
            else:
                found = extract_biclusters(core, counts, rule="paper-code")

        self.mixture_row_labels_ = _expand(row_labels, row_index, n_rows, -1)
        self.mixture_column_labels_ = _expand(col_labels, col_index, n_cols, -1)
        self.row_labels_ = _expand(np.asarray(block_rows, np.int64), row_index, n_rows, -1)
        self.column_labels_ = _expand(np.asarray(block_cols, np.int64), col_index, n_cols, -1)
        self.n_row_clusters_, self.n_column_clusters_ = int(K_r), int(K_c)
        self.theta_ = params.theta
        self.phi_rows_ = _expand(params.phi_rows, row_index, n_rows, 0.0)
        self.phi_columns_ = _expand(params.phi_columns, col_index, n_cols, 0.0)
        self.row_membership_ = _expand(params.row_membership, row_index, n_rows, 0.0)
        self.column_membership_ = _expand(params.column_membership, col_index, n_cols, 0.0)
        self.rows_ = _expand(found.rows.T, row_index, n_rows, False).T
        self.columns_ = _expand(found.columns.T, col_index, n_cols, False).T
        self.bicluster_pairs_ = found.pairs
        self.bicluster_strength_ = found.strength
        self.bicluster_row_clusters_ = _cluster_masks(found.row_clusters, block_rows)
        self.bicluster_column_clusters_ = _cluster_masks(found.column_clusters, block_cols)
        self.row_k_posterior_, self.column_k_posterior_ = row_k_post, col_k_post
        row_point, self.row_dispersion_ = row_dispersion if row_dispersion is not None else (None, None)
        column_point, self.column_dispersion_ = column_dispersion if column_dispersion is not None else (None, None)
        self.row_point_dispersion_ = None if row_point is None else _expand(row_point, row_index, n_rows, np.nan)
        self.column_point_dispersion_ = (None if column_point is None
                                         else _expand(column_point, col_index, n_cols, np.nan))
        self.row_dpmm_, self.column_dpmm_ = row_dpmm, column_dpmm
        self.token_counts_ = counts
        self.dpmm_trends_ = [MixtureTrend(side, dpmm.log_posterior_trend_, dpmm._sampled_k_ends())
                             for side, dpmm in fits]
        self.row_classifier_, self.column_classifier_ = fitted_classifiers(
            X, self.row_labels_, self.column_labels_, (int(K_r), int(K_c)), self.get_params())
        return self

    def predict_row_proba(self, X):
        """(n_new, K_r) posterior probability of each row cluster (the clusters of ``row_labels_``) for new
        rows ``X`` (n_new, n_cols) of counts over the fitted columns, dense or scipy.sparse, under the block model
        of the fitted partitions (``row_classifier_``; :mod:`conjoined.predict`), the model whose EM decided the
        fitted rows' clusters with ``refine=True`` (the default; otherwise the mixtures decided them, and the
        block model may disagree with some). A row without counts in the fitted columns' clusters gets a row of
        zeros (``AllZeroWarning``), as it would be set aside in a fit. Clusters whose blocks the model cannot
        tell apart (none heavy: a fit without biclusters) get probabilities in proportion to their sizes."""
        return self._cluster_probabilities(X, "row")

    def predict_rows(self, X):
        """(n_new,) int64: the most probable row cluster of each new row ``X`` (n_new, n_cols) under
        ``predict_row_proba``, -1 for a row without counts to classify it by. The biclusters whose row clusters
        hold a new row's cluster k >= 0 are ``bicluster_row_clusters_[:, k]`` (the outsider test that lets a
        fitted row join a bicluster of another cluster is not run on new rows)."""
        return most_probable(self.predict_row_proba(X))

    def predict_column_proba(self, X):
        """(n_new, K_c) posterior probability of each column cluster (the clusters of ``column_labels_``)
        for new columns ``X`` (n_rows, n_new) of counts over the fitted rows: new documents over the fitted
        words, new cells over the fitted genes, in the fitted rows' order (a DataFrame's row names are checked
        against ``row_names_in_`` when both are named). As ``predict_row_proba``, with rows and columns
        swapped."""
        return self._cluster_probabilities(X, "column")

    def predict_columns(self, X):
        """(n_new,) int64: the most probable column cluster of each new column ``X`` (n_rows, n_new) under
        ``predict_column_proba``, -1 for a column without counts to classify it by; its biclusters are
        ``bicluster_column_clusters_[:, l]`` for its cluster l >= 0 (as ``predict_rows``)."""
        return most_probable(self.predict_column_proba(X))

    def _cluster_probabilities(self, X, side):
        check_is_fitted(self, "rows_")
        classifier = getattr(self, f"{side}_classifier_", None)
        if classifier is None:
            raise AttributeError(f"this {type(self).__name__} was fitted by an older version of conjoined, which "
                                 "kept no classifier of new items: fit it again to classify new rows or columns")
        n_rows, n_cols = len(self.row_labels_), len(self.column_labels_)
        other = _other_side(side)
        items = check_matrix(X, name="X", counts=True)
        if side == "row":
            record_features(self, X, reset=False)
            expected, given, shape = n_cols, items.shape[1], "(n_new, n_cols)"
        else:
            record_row_names(self, X, reset=False)
            expected, given, shape = n_rows, items.shape[0], "(n_rows, n_new)"
            items = items.T
        if given != expected:
            raise ValueError(f"X has {given} {other}s, but the model was fitted on {expected} {other}s: new "
                             f"{side}s are read over the fitted {other}s, shape {shape}")
        probabilities = cluster_probabilities(classifier, items)
        unclassified = int((probabilities.sum(axis=1) == 0).sum())
        if unclassified:
            warnings.warn(f"{unclassified} new {side}(s) have no counts in the fitted {other}s' "
                          "clusters and come back unassigned (label -1, probabilities 0)", AllZeroWarning,
                          stacklevel=user_stacklevel())
        return probabilities

    def get_submatrix(self, i, data):
        """The submatrix of ``data`` (n_rows, n_cols), the fitted shape, over bicluster ``i``'s rows and
        columns (scikit-learn's, with the shape checked)."""
        check_is_fitted(self, "rows_")
        shape = (self.rows_.shape[1], self.columns_.shape[1])
        given = data.shape if sp.issparse(data) else np.shape(data)
        if tuple(given) != shape:
            raise ValueError(f"data has shape {tuple(given)}; the model was fitted on {shape}")
        return super().get_submatrix(i, data)

    def __setstate__(self, state):
        """Unpickle, with today's names for the partitions of a model pickled before (:func:`renamed_labels`)."""
        super().__setstate__(renamed_labels(state))

    @property
    def biclusters_(self):
        """``(rows_, columns_)`` (scikit-learn's, NotFittedError before ``fit``)."""
        check_is_fitted(self, "rows_")
        return self.rows_, self.columns_

    def get_indices(self, i):
        """The row and the column indices of bicluster ``i`` (scikit-learn's, NotFittedError before ``fit``)."""
        check_is_fitted(self, "rows_")
        return super().get_indices(i)

    @property
    def n_biclusters_(self):
        check_is_fitted(self, "rows_")
        return self.rows_.shape[0]

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.input_tags.positive_only = True
        # scikit-learn has no tag for counts; "categorical" is the one under which its checks round their data to
        # non-negative integers. Without it 23 checks (pickling, idempotence, memmaps, sparse input ...) would
        # only test that non-integer values are refused. Outside its checks scikit-learn reads it nowhere.
        tags.input_tags.categorical = True
        return tags


def bicluster_members(model, b):
    """The members of bicluster ``b`` of a fitted CDP, highest membership first: ``((rows, their membership),
    (columns, their membership))``, index arrays and float arrays.

    An item's membership is its share of tokens in the bicluster's topics: the row topics whose blocks it
    joins (``bicluster_row_clusters_[b]``) for a row, the column topics for a column. Ties go to the higher
    phi summed over those topics (the item's token count in them), then to the lower index."""
    out = []
    for mask, topics, membership, phi in (
            (model.rows_[b], model.bicluster_row_clusters_[b], model.row_membership_, model.phi_rows_),
            (model.columns_[b], model.bicluster_column_clusters_[b], model.column_membership_, model.phi_columns_)):
        members, topics = np.flatnonzero(mask), np.flatnonzero(topics)
        share = membership[np.ix_(members, topics)].sum(axis=1)
        order = np.lexsort((-phi[np.ix_(members, topics)].sum(axis=1), -share))
        out.append((members[order], share[order]))
    return tuple(out)


def _renumbered(labels):
    """``(labels, K)``: the non-negative labels renumbered 0..K-1 in their order, K the number of clusters used."""
    used, labels = np.unique(np.asarray(labels, dtype=np.int64), return_inverse=True)
    return labels.astype(np.int64), used.size


def _refinement_min_size(min_size):
    """The ``min_size`` the refinement works with. A min_size above the rule's default filters the biclusters
    only: given to the refinement, it made blocks below it count as background and their clusters merge into
    others. One below it reaches the refinement."""
    return None if min_size is None else min(min_size, DEFAULT_MIN_SIZE)


def renamed_labels(attributes):
    """``attributes`` (a dict of a fitted CDP's, pickled or saved), renamed in place and returned: from when
    ``<side>_labels_`` held the mixtures' partitions and ``block_<side>_labels_`` the refined ones, to
    ``mixture_<side>_labels_`` and ``<side>_labels_``."""
    for side in ("row", "column"):
        if f"block_{side}_labels_" in attributes:
            attributes[f"mixture_{side}_labels_"] = attributes.pop(f"{side}_labels_")
            attributes[f"{side}_labels_"] = attributes.pop(f"block_{side}_labels_")
    return attributes


def fitted_classifiers(X, row_labels, column_labels, n_clusters, params):
    """``(row_classifier_, column_classifier_)`` of a CDP fitted with parameters ``params`` (``get_params()``)
    to counts ``X`` (n_rows, n_cols), whose partitions are ``row_labels`` (n_rows,) and ``column_labels``
    (n_cols,) (its ``row_labels_``, ``column_labels_``; -1 for items set aside) with ``n_clusters`` (K_r, K_c):
    :func:`conjoined.predict.side_classifiers` with the likelihoods and thresholds the refinement uses (with
    ``mode="paper"`` too, whose mixtures are multinomial: ``*_likelihood`` choose the refinement's)."""
    with single_threaded_blas():
        return side_classifiers(
            sp.csr_matrix(X, dtype=np.float64), np.asarray(row_labels, np.int64),
            np.asarray(column_labels, np.int64), z_min=params["z_min"],
            min_size=_refinement_min_size(params["min_size"]),
            n_clusters=n_clusters, likelihoods=(params["row_likelihood"], params["column_likelihood"]))


def _other_side(side):
    return "column" if side == "row" else "row"


def _cluster_masks(clusters, labels):
    """(n_biclusters, max(labels) + 1) bool: entry (b, k) is True when ``k`` is among ``clusters[b]``."""
    masks = np.zeros((len(clusters), int(np.max(labels, initial=-1)) + 1), bool)
    for b, members in enumerate(clusters):
        masks[b, members] = True
    return masks


def pair_cluster_masks(pairs):
    """``(bicluster_row_clusters_, bicluster_column_clusters_)`` of biclusters that join no other block: each
    its pair's k and l alone (results saved before biclusters joined blocks)."""
    pairs = np.asarray(pairs, np.int64).reshape(-1, 2)
    return tuple(_cluster_masks(side[:, None], side) for side in pairs.T)


def _held_out(core, share, rng, side_names, unassigned):
    """``(fit part, held-out part, rows kept (n_rows,), columns kept (n_cols,))`` of the CSR counts ``core`` for
    ``CDP(holdout=share)``: each count thinned binomially (:func:`_thinned`); the items left without counts in the
    fit part are not kept. Warns (at ``fit``'s caller) of 0/1 data and of items not kept (naming them
    ``side_names`` and saying that they ``unassigned``); ValueError when fewer than 2 rows or columns are kept."""
    if core.data.max() <= 1:
        warnings.warn(
            "The counts are only 0s and 1s: a holdout of presence/absence data is not independent of the rest "
            "(each 1 falls in one part or the other, so the cells that shaped the partitions are empty in the "
            "held-out part) and the test loses real blocks (most of the binary 20 Newsgroups' biclusters); holdout "
            "suits counts",
            HoldoutWarning, stacklevel=user_stacklevel(),
        )
    held = _thinned(core, share, rng)
    fit_part = core - held
    fit_rows, fit_cols = (totals > 0 for totals in line_totals(fit_part))
    if fit_rows.sum() < 2 or fit_cols.sum() < 2:
        raise ValueError(f"holdout={share} leaves fewer than 2 rows or columns with counts to fit the partitions "
                         "on: lower it, or leave it None")
    if not (fit_rows.all() and fit_cols.all()):
        warnings.warn(
            f"holdout={share} left {(~fit_rows).sum()} {side_names[0]}(s) and {(~fit_cols).sum()} "
            f"{side_names[1]}(s) without counts to fit the partitions on: they are set aside and {unassigned}",
            AllZeroWarning, stacklevel=user_stacklevel(),
        )
    return fit_part, held, fit_rows, fit_cols


def _thinned(counts, share, rng):
    """Each count of the CSR matrix ``counts`` thinned binomially to ``share`` of it (its held-out part; the rest
    is ``counts`` minus it). Poisson counts split so are two independent Poisson matrices, at ``share`` and
    ``1 - share`` of the rates (count splitting, Neufeld et al., Biostatistics 2024)."""
    held = counts.sorted_indices()  # drawn in (row, column) order: the same split whatever the input's order
    held.data = rng.binomial(np.rint(held.data).astype(np.int64), share).astype(counts.dtype)
    held.eliminate_zeros()
    return held


def _expand(values, index, n, fill):
    """Per-item ``values`` of the items ``index`` (in that order) put back among all n items, ``fill`` elsewhere."""
    values = np.asarray(values)
    out = np.full((n,) + values.shape[1:], fill, dtype=values.dtype)
    out[index] = values
    return out


CDP = ConjoinedDirichletProcess
