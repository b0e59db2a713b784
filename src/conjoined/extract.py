"""From token counts to biclusters: CDP's parameters (paper eq. 1-3) and three extraction rules.

A bicluster is a set of rows and a set of columns, found from a (row topic k, column topic l) pair, or under
the significance rule from several pairs of one lift joined (``row_clusters``, ``column_clusters``). The rules:

``"significance"`` (default)
    Works on the row and column partitions (``row_labels``, ``column_labels``: the estimator's point estimates)
    and the counts themselves. A block (k, l), the rows labelled k times the columns labelled l, is heavy when
    its total ``O`` stands at least ``z_min`` Poisson standard deviations above ``E = rho0_kl |rows| |cols|``,
    where ``rho0_kl`` is the block's background density: the density of the cells outside the heavy blocks,
    found by iterating from the matrix's overall density (a block of elevated counts inflates the overall
    density, which hides modest blocks such as case 2's). Blocks narrower than ``min_size`` rows or columns are
    not biclusters. By default ``z_min`` is 3, raised to the one-sided 1% family-wise level (Bonferroni) over the
    blocks tested when there are more than about 7 of them, so that large partitions do not yield chance
    biclusters. ``strength = (O - E) / sqrt(E)`` (over-dispersed counts: below).

    The background is one density, the paper's model, unless the light blocks demand more: then, from that
    fixed point on, it has a level for each row cluster and each column cluster, ``rho0_kl = rho0 u_k v_l``,
    fitted to the light blocks by empirical Bayes (levels Gamma-distributed around 1; a side's levels stay 1
    unless its clusters' totals differ beyond Poisson noise by five sigma of evidence). Real data need this:
    genes (words) of very different depths. Against one density, a cluster of highly expressed genes is
    "heavy" in every cell cluster, and highly expressed outsiders join every bicluster; with levels a
    bicluster is a block raised above the rest of its row and column clusters. A cluster heavy in most of its
    blocks takes the rest of its blocks as its baseline: from its median block down, the highest that none of
    its blocks falls clearly below (a cluster of deep genes, heavy against the uniform background wherever a
    cell cluster is large enough to show it); with one or two blocks and none light, its lowest (so a column
    cluster heavy in every row cluster turns levels on even over uniform light blocks). The levelled
    background also lets the blocks' totals be over-dispersed, when its reference blocks vary beyond Poisson
    noise by five sigma: each cell negative binomial around its mean, the variance's excess growing with the
    block's background and the spread of its items' depths (``_block_dispersion``), and ``z`` and the
    strength are then ``(O - E) / sqrt(dispersion E)``. Real counts are: a cluster of deep genes varies between
    cell clusters far beyond Poisson noise, and against a Poisson test it was a bicluster in most of them. On
    the partitions CDP finds for the simulation cases the background stays uniform and Poisson (the paper's
    four cases, 50 replicates each: always). A heavy block must also exceed its background by ``z_min ** 2``
    counts: against the level of a cluster with next to no counts in its light blocks, two counts would
    otherwise stand dozens of "standard deviations" high.

    Items get a depth of their own in the same way, when their counts demand it: within a cluster, genes
    (words, cells) differ in depth too, and an item deeper than its cluster stands above its cluster's
    background in every block. Each item's depth relative to its cluster's background is fitted by empirical
    Bayes (Gamma around 1, five sigma of evidence over all the items of a side) from its counts in its
    cluster's reference blocks (the light blocks that do not stand out, or the cluster's baseline), leaving
    out the cluster it is tested on; the tests below then take an item's background as its cluster's times
    its depth, and its count as negative binomial around it (the Gamma posterior of the depth: an item with
    few counts elsewhere has an uncertain depth). An outsider shallower than its cluster is tested against its
    cluster's background, as without depths: a word that is rare outside its own topic has a depth near zero,
    and its item-by-cluster variation, which the depth does not model, then passed for a raise (on 20
    Newsgroups, god and president joined the sports biclusters). On the simulation cases depths stay 1 (the
    paper's four cases, 50 replicates each: always), and the tests are Poisson.

    A row "favours" a heavy block when its count in the block's columns is likelier at the block's density
    ``rho`` than at ``rho0_kl`` (log-likelihood ratio ``O_i log(rho / rho0_kl) - |cols| (rho - rho0_kl) > 0``;
    with depths, at its own background raised by the block's lift over its members' backgrounds); columns
    likewise. A heavy block most of whose own rows or columns do not favour it was made heavy by a few
    stray members and is dropped; otherwise its bicluster holds its own rows and columns plus the outsiders
    that belong to it too: an outsider in cluster k' favours the block at its own background ``rho0_k'l``
    raised by the block's lift ``rho / rho0_kl``, and its count over the block's other side stands above its
    background by a likelihood-ratio z-score (signed root of the Poisson deviance) of ``z_min``, raised to the
    one-sided 1% family-wise level over the outsiders tested (at 3 alone, one of 30 outsiders would join by
    chance in about 4% of matrices). That is how a row that belongs to two blocks, labelled with one of them,
    joins the other: biclusters overlap. With levels, an outsider whose own block on the same columns is a
    bicluster is not tested (it is in that bicluster already; tested, it made near-copies of every bicluster
    of a cell cluster on single-cell data). Items set aside (label -1) join nothing.

    Blocks of one row cluster that stand at one lift over their backgrounds are one bicluster, and so are
    blocks of one column cluster (:func:`_joined_blocks`): a gene programme raised alike in three cell
    clusters of one cell type, which differ in other genes, is one bicluster over the three, not three. Joined
    rectangles of blocks join further (two that share a row or a column cluster, with every rectangle the box
    they span touches), the most alike first, while their blocks' totals stay within ``z_min`` of one lift
    (Pearson's chi-square, with the blocks' dispersions); where the lift differs by more, the blocks stay
    apart. The joined bicluster holds its clusters' rows and columns, and the outsiders that joined its
    blocks' biclusters on every one of its other side's clusters where they were tested, and on one at least;
    its ``strength`` is ``(O - E) / sqrt(dispersion E)`` of its blocks together, its pair its strongest block.
    Biclusters that end up identical are kept once.

    Measured on the four simulation cases from the CDP estimator's partitions (12 replicates): mean Jaccard 1.0,
    0.89, 1.0, 0.99, against 1.0, 0.88, 0.88, 0.98 for a rule on the token memberships after reassignment
    (membership >= 0.35 and enrichment >= 1), which let spurious one-row topics and stray columns in.
``"paper-code"``
    The rule of the authors' published code: each row goes to the topic(s) holding the largest share of its
    tokens, ``n_ik / n_i`` (their ``phi_r``, not the paper's; ties give several labels; a row without tokens
    goes nowhere), each column likewise; block (k, l) is kept when the mean of ``X`` over its cells is at
    least the mean plus the sample standard deviation of the means of all non-empty blocks;
    ``strength = block mean``. With a single non-empty block the standard deviation is undefined and nothing is
    kept (as the authors' R code, where the comparison with NA selects nothing). With exactly two blocks of
    different means nothing can pass (the larger mean is always below mean + sd); with equal means both pass.
    The authors' code also returns rows and columns swapped; that is not reproduced.
``"dt2b"``
    DT2B's rule (Rugeles et al. 2017 as run by the CDP authors): each raw count matrix is
    thresholded at its own mean plus sample standard deviation (over all its entries). Pair (k, l) is kept when
    ``n_kl`` passes the threshold of ``n_kl``; its rows are the rows i whose ``n_ik`` passes the threshold of the
    whole ``n_ik`` matrix, its columns likewise from ``n_jl``; ``strength = n_kl``. Kept pairs with no rows or no
    columns are dropped. (Thresholding each topic's column of ``n_ik`` separately instead scored lower on the
    simulation cases; neither reading reproduces the paper's DT2B scores for case 2.)
"""

from __future__ import annotations

import heapq
import itertools
import math
import sys
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp
from scipy.special import chdtrc, gammaln, logsumexp, xlogy
from scipy.stats import norm

from ._beta_binomial import beta_binomial_fits, in_sequence, item_log_likelihoods
from ._negative_binomial import best_shape
from ._pearson import cluster_shares, squared_residual_terms
from ._validation import check_int, check_matrix, check_positive
from .dpmm.sampler import MERGE_CHUNK_VALUES

__all__ = [
    "BACKGROUNDS", "RULES", "Biclusters", "TopicParameters", "extract_biclusters", "refine_partition",
    "topic_parameters",
]

RULES = ("significance", "paper-code", "dt2b")
# The significance rule's background: cluster levels when the light blocks demand them, or always one density.
BACKGROUNDS = ("auto", "uniform")
DEFAULT_Z_MIN = 3.0
FAMILY_ERROR = 0.01
DEFAULT_MIN_SIZE = 2
# Candidate Gamma shapes of the heavy blocks' densities (empirical Bayes), in units of the largest block total:
# from no pooling (shape far below every total) to one shared density (far above).
POOLING_SHAPES = np.logspace(-4, 4, 81)
# Candidate Gamma shapes of the clusters' background levels, in units of the largest cluster total; the
# evidence (twice the log-likelihood ratio, five sigma) the levels need over a uniform background; the most
# rounds of their alternating fit, which stops when no block's background moves by more than LEVEL_TOLERANCE
# (relative).
LEVEL_SHAPES = np.logspace(-9, 4, 131)
LEVELS_EVIDENCE = 25.0
LEVEL_ROUNDS = 100
LEVEL_TOLERANCE = 1e-6
# Standard deviations by which the reference blocks' totals must vary beyond Poisson noise before the levelled
# background takes them as over-dispersed (as the levels' five sigma).
DISPERSION_EVIDENCE = 5.0
# How the refinement reads a side: items of one depth (Poisson block model) or of any depth (multinomial profiles).
REFINE_LIKELIHOODS = ("poisson", "multinomial")
# Pairs of a side's clusters, the closest by the merges' Gaussian screen, judged by their items' counts at each
# merge by profile.
PROFILE_MERGE_CANDIDATES = 3
# Most alternations of the refinement's merges and EM rounds.
MERGE_PASSES = 5
# Rounds of the search for the heavy blocks and their background.
FIXED_POINT_ROUNDS = 50


class Biclusters(NamedTuple):
    """Extracted biclusters, strongest first.

    rows : ndarray of bool, shape (n_biclusters, n_rows)
    columns : ndarray of bool, shape (n_biclusters, n_cols)
    pairs : ndarray of int64, shape (n_biclusters, 2)
        The (row topic, column topic) of each bicluster: its strongest block where it joins several.
    strength : ndarray of float64, shape (n_biclusters,)
        The rule's score of each bicluster (see the module docstring).
    row_clusters, column_clusters : tuples of n_biclusters int64 arrays
        The row topics and the column topics whose blocks each bicluster joins (rule "significance"; the
        other rules: the pair's k and l alone).
    """

    rows: np.ndarray
    columns: np.ndarray
    pairs: np.ndarray
    strength: np.ndarray
    row_clusters: tuple
    column_clusters: tuple


class TopicParameters(NamedTuple):
    """CDP's parameters computed from token counts (paper eq. 1-3).

    phi_rows : ndarray, shape (n_rows, K_r)
        ``(n_ik + a_r) / (n_k + n_R a_r)``: column k is row topic k's distribution over the rows.
    phi_columns : ndarray, shape (n_cols, K_c)
        ``(n_jl + a_c) / (n_l + n_C a_c)``.
    theta : ndarray, shape (K_r, K_c)
        ``(n_kl + lam) / sum(n_kl + lam)``: joint distribution of a token's (row topic, column topic).
    row_membership : ndarray, shape (n_rows, K_r)
        ``n_ik / n_i``: share of row i's tokens in row topic k; rows with no tokens get all zeros.
    column_membership : ndarray, shape (n_cols, K_c)
        ``n_jl / n_j``, likewise.
    """

    phi_rows: np.ndarray
    phi_columns: np.ndarray
    theta: np.ndarray
    row_membership: np.ndarray
    column_membership: np.ndarray


def _membership(n_ik):
    totals = n_ik.sum(axis=1, keepdims=True)
    return np.divide(n_ik, totals, out=np.zeros(n_ik.shape), where=totals > 0)


def _phi(n_ik, prior):
    return (n_ik + prior) / (n_ik.sum(axis=0) + n_ik.shape[0] * prior)


def topic_parameters(counts, *, a_r, a_c, lam):
    """phi_rows, phi_columns, theta and the memberships of a token allocation.

    Parameters
    ----------
    counts : TokenCounts
        As returned by :func:`conjoined.reassign.reassign_tokens`.
    a_r, a_c, lam : float > 0
        The Dirichlet hyperparameters used for the reassignment.

    Returns
    -------
    TopicParameters
    """
    a_r = check_positive(a_r, "a_r")
    a_c = check_positive(a_c, "a_c")
    lam = check_positive(lam, "lam")
    n_kl, n_ik, n_jl = (np.asarray(a, dtype=np.float64) for a in counts)
    theta = n_kl + lam
    return TopicParameters(
        phi_rows=_phi(n_ik, a_r),
        phi_columns=_phi(n_jl, a_c),
        theta=theta / theta.sum(),
        row_membership=_membership(n_ik),
        column_membership=_membership(n_jl),
    )


def _block_sums(X, row_sets, column_sets):
    """(K_r, K_c) totals of X over rows in row_sets[k] (bool (K_r, n_rows)) and columns in column_sets[l]."""
    return np.asarray(row_sets.astype(np.float64) @ X @ column_sets.T.astype(np.float64))


def _mean_plus_sd(values):
    """Mean plus sample standard deviation; +inf when fewer than two values (the sd is undefined)."""
    values = np.asarray(values, dtype=np.float64).ravel()
    if values.size < 2:
        return np.inf
    return values.mean() + values.std(ddof=1)


def _assemble(row_sets, column_sets, keep, strength):
    """Biclusters for the kept (k, l) pairs with non-empty rows and columns, strongest first."""
    keep = keep & row_sets.any(axis=1)[:, None] & column_sets.any(axis=1)[None, :]
    pairs = np.argwhere(keep)
    order = np.argsort(-strength[keep], kind="stable")
    pairs = pairs[order]
    return Biclusters(
        rows=row_sets[pairs[:, 0]],
        columns=column_sets[pairs[:, 1]],
        pairs=pairs.astype(np.int64),
        strength=strength[pairs[:, 0], pairs[:, 1]].astype(np.float64),
        row_clusters=tuple(pairs[:, :1].astype(np.int64)),
        column_clusters=tuple(pairs[:, 1:].astype(np.int64)),
    )


def _indicator(labels, n_clusters):
    """(n_clusters, n) bool: item i has label k (labels -1 belong to nothing)."""
    return np.arange(n_clusters)[:, None] == np.asarray(labels)[None, :]


def _counts_over_clusters(matrix, labels, n_clusters):
    """(n, n_clusters) float: each row of ``matrix`` (n, m), dense or sparse, summed over the columns of each
    cluster of ``labels`` (m,) (labels -1 belong to nothing)."""
    kept = labels >= 0
    indicator = sp.csr_matrix((np.ones(int(kept.sum())), (np.flatnonzero(kept), labels[kept])),
                              shape=(labels.shape[0], n_clusters))
    counts = matrix @ indicator
    return np.asarray(counts.todense() if sp.issparse(counts) else counts, dtype=np.float64)


def _level_shape(totals, expected):
    """Shape ``s`` of Gamma(s, rate s) cluster levels behind ``totals`` ~ Poisson(level x ``expected``) (1-d
    arrays, entries with ``expected`` 0 ignored), the one maximising the totals' negative-binomial marginal
    likelihood over ``LEVEL_SHAPES`` times the largest total; inf (every level 1) unless that likelihood beats
    the Poisson one of levels 1 by ``LEVELS_EVIDENCE`` (twice the log-likelihood ratio), or the largest shape
    is best."""
    keep = expected > 0
    totals, expected = totals[keep], expected[keep]
    if totals.size < 2:
        return np.inf
    shapes = LEVEL_SHAPES * max(totals.max(), 1.0)
    best, gain = best_shape(shapes, np.asarray(totals, np.float64), np.asarray(expected, np.float64))
    if best == shapes.size - 1 or 2 * gain < LEVELS_EVIDENCE:
        return np.inf
    return float(shapes[best])


def _cluster_levels(observed, sizes, light):
    """Background of the light blocks with a level for each row and each column cluster.

    ``observed``, ``sizes`` (K_r, K_c): block totals and cells; ``light`` (K_r, K_c) bool: the blocks the
    background is fitted on (at least one with counts). Model: a light block's total is Poisson with mean
    ``rho0 u_k v_l sizes[k, l]``. The levels ``u`` (K_r,) and ``v`` (K_c,) are Gamma-distributed around 1 and
    each gets its posterior mean given the others, with the shape of :func:`_level_shape`, alternately until
    no block's background moves by more than ``LEVEL_TOLERANCE`` (relative; at most ``LEVEL_ROUNDS`` rounds); ``rho0`` keeps the light blocks' expected total equal to their observed total. When the
    clusters' totals differ by no more than Poisson noise allows, the levels stay 1 and the background is one
    density, the light blocks' (a uniform background: the simulation cases); only data that clearly demand
    levels (genes or cells of very different depths) get them. Returns the background density of each block
    (K_r, K_c): ``rho0 u_k v_l``.
    """
    light_sizes = np.where(light, sizes, 0.0)
    light_observed = np.where(light, observed, 0.0)
    u, v = np.ones(observed.shape[0]), np.ones(observed.shape[1])
    rho0 = light_observed.sum() / light_sizes.sum()
    background = np.full(observed.shape, rho0)
    for _ in range(LEVEL_ROUNDS):
        u = _shrunk_levels(light_observed.sum(axis=1), rho0 * light_sizes @ v)
        v = _shrunk_levels(light_observed.sum(axis=0), rho0 * u @ light_sizes)
        rho0 = light_observed.sum() / (light_sizes * np.outer(u, v)).sum()
        # rho0, u and v are identified only up to scale between them: test their product
        new_background = rho0 * np.outer(u, v)
        settled = bool((np.abs(new_background - background) <= LEVEL_TOLERANCE * np.abs(background)).all())
        background = new_background
        if settled:
            break
    return background


def _shrunk_levels(totals, expected):
    """Posterior-mean levels ``(s + totals) / (s + expected)`` under the shape ``s`` of :func:`_level_shape`
    (all 1 when it is inf)."""
    shape = _level_shape(totals, expected)
    if np.isinf(shape):
        return np.ones_like(totals, dtype=np.float64)
    return (shape + totals) / (shape + expected)


def _heavy_blocks(observed, sizes, z_min, eligible, initial_density, levels, spread=None):
    """Heavy blocks and the background, iterated to a fixed point from the uniform ``initial_density`` (see the
    module docstring): ``(heavy, background (K_r, K_c), z, dispersion (K_r, K_c))``, ``background`` the
    density a block's cells would have outside every heavy block: the light blocks' density; ``dispersion``
    the variance of each block's total over its Poisson variance (ones for the uniform background).

    With ``levels``, the iteration goes on from that fixed point with the light blocks' background fitted with
    row and column cluster levels where they demand them, and their over-dispersion where they show one
    (:func:`_levelled_background`; ``spread``: ``(rows' (K_r,), columns' (K_c,))`` :func:`_depth_spread`,
    ones if None). Starting from the uniform fixed point matters: from the matrix's density, a weak block
    filling most of one row cluster (before it is found heavy) passes for a level of that cluster (a stress
    design with blocks 1.5-3 times the background: four of 40 replicates lost a block that way). A partition
    with a single cluster on a side keeps the uniform background.
    """
    state = _heavy_fixed_point(observed, sizes, z_min, eligible, np.full(observed.shape, float(initial_density)),
                               _uniform_background)
    # with one cluster on a side, a block has no rest of its cluster to stand above: its level would absorb it
    if levels and min((sizes > 0).any(axis=1).sum(), (sizes > 0).any(axis=0).sum()) >= 2:
        if spread is None:
            spread = (np.ones(observed.shape[0]), np.ones(observed.shape[1]))
        state = _heavy_fixed_point(observed, sizes, z_min, eligible, state[1],
                                   lambda *args: _levelled_background(*args, spread))
    return state


def _heavy_fixed_point(observed, sizes, z_min, eligible, background, fit):
    """``(heavy, background, z, dispersion)``: blocks heavy against ``background`` (K_r, K_c) and a
    ``dispersion`` (K_r, K_c) (:func:`_heavy_against`; ones to start), both re-fitted by
    ``fit(observed, sizes, light, z, z_min, background, dispersion) -> (background, dispersion)`` on the blocks
    with cells that are not heavy, until nothing changes. After ``FIXED_POINT_ROUNDS`` rounds without a fixed
    point (the fit can alternate between two states), the last fit is kept and ``heavy`` and ``z`` are those
    against it."""
    heavy = np.zeros(observed.shape, bool)
    dispersion = np.ones(observed.shape)
    for _ in range(FIXED_POINT_ROUNDS):
        now, z = _heavy_against(observed, sizes, z_min, eligible, background, dispersion)
        rest = ~now & (sizes > 0)
        if rest.any() and observed[rest].sum() > 0:
            new_background, new_dispersion = fit(observed, sizes, rest, z, z_min, background, dispersion)
        else:
            new_background, new_dispersion = background, dispersion
        if (np.array_equal(now, heavy) and np.array_equal(new_background, background)
                and np.array_equal(new_dispersion, dispersion)):
            return heavy, background, z, dispersion
        heavy, background, dispersion = now, new_background, new_dispersion
    heavy, z = _heavy_against(observed, sizes, z_min, eligible, background, dispersion)
    return heavy, background, z, dispersion


def _heavy_against(observed, sizes, z_min, eligible, background, dispersion):
    """``(heavy, z)``: ``z = (O - E) / sqrt(dispersion x E)`` of each block's total ``O`` against ``E =
    background x sizes`` (``dispersion`` (K_r, K_c): the total's variance over its Poisson variance, 1 for
    Poisson counts); a block is heavy when it is eligible, ``z >= z_min`` and its excess ``O - E`` is at least
    ``z_min ** 2`` counts. The excess matters where ``E`` is near zero, as with the level of a cluster that has
    next to no counts in its light blocks: there a couple of counts stand many "standard deviations" above
    it, while no count of fewer than ``z_min ** 2`` events can tell ``z_min`` standard deviations apart.
    (Where ``E >= z_min ** 2`` and the counts are Poisson it follows from ``z >= z_min``.)"""
    expected = background * sizes
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(sizes > 0, (observed - expected) / np.sqrt(dispersion * expected), 0.0)
    return eligible & (z >= z_min) & (observed - expected >= z_min ** 2), z


def _uniform_background(observed, sizes, light, z, z_min, background, dispersion):
    """One density for every block, the ``light`` blocks' (K_r, K_c), and Poisson counts (dispersion 1)."""
    return np.full(observed.shape, observed[light].sum() / sizes[light].sum()), np.ones(observed.shape)


def _levelled_background(observed, sizes, light, z, z_min, background, dispersion, spread):
    """The light blocks' background with cluster levels (:func:`_cluster_levels`) and its dispersion
    (:func:`_block_dispersion`), both fitted on the reference blocks (:func:`_reference_blocks`, chosen
    against the current ``background`` and ``dispersion``); or, when they do not demand levels, their
    uniform density and Poisson counts, the paper's model (a dispersion estimated around one density took up
    the structure that levels would have fitted). ``spread``: as for :func:`_block_dispersion`."""
    reference = _reference_blocks(observed, sizes, light, z, z_min, background, dispersion)
    if observed[reference].sum() > 0:
        fitted = _cluster_levels(observed, sizes, reference)
        if _has_levels(fitted):
            return fitted, _block_dispersion(observed, sizes, fitted, reference, spread)
    return _uniform_background(observed, sizes, light, z, z_min, background, dispersion)


def _depth_spread(X, labels, n_clusters, axis):
    """How unequal the depths of each cluster's items are (rows: ``axis`` 0, columns: 1): ``n sum_i (t_i^2 -
    t_i) / (sum_i t_i)^2`` over the cluster's n items and their totals t_i (``t_i`` removes the Poisson part of
    ``t_i^2``), at least 1, its value for items of one depth (K,). Items labelled -1 count in no cluster. The
    cells of a block, at means ``rho d_i e_j`` for depths d, e of mean 1, have ``sum mu^2 = rho E h_k h_l``
    (E the block's expected total, h these spreads): over-dispersion per cell weighs more in a block of
    unequal depths (:func:`_block_dispersion`)."""
    totals = np.asarray(X.sum(axis=1 - axis), dtype=np.float64).ravel()
    labelled = labels >= 0
    own, totals = labels[labelled], totals[labelled]
    members = np.bincount(own, minlength=n_clusters)
    first = np.bincount(own, weights=totals, minlength=n_clusters)
    second = np.bincount(own, weights=totals ** 2 - totals, minlength=n_clusters)
    with np.errstate(divide="ignore", invalid="ignore"):
        spread = np.where(first > 0, members * second / first ** 2, 1.0)
    return np.maximum(spread, 1.0)


def _block_dispersion(observed, sizes, background, reference, spread):
    """Each block's variance over its Poisson variance (K_r, K_c): ``1 + c background h_k h_l``.

    Model: a cell's count is negative binomial around its mean ``mu`` (variance ``mu + c mu^2``), so a
    block's total has variance ``E + c sum mu^2 = E (1 + c background h_k h_l)`` (``spread``: ``(h (K_r,),
    h (K_c,))`` of :func:`_depth_spread`). The over-dispersion ``c`` comes from the ``reference`` blocks,
    ``c = sum m ((O - E)^2 - O) / E / sum m^2`` with ``m = background h_k h_l``: each block's moment estimate
    ``((O - E)^2 - O) / (E m)`` weighted by its inverse variance under Poisson counts, ``m^2 / 2`` (Dean's score
    test for this alternative; unweighted, the largest blocks' Poisson noise drowned the others' evidence).
    It is 0 unless it stands ``DISPERSION_EVIDENCE`` standard errors (``sqrt(2 / sum m^2)``) above 0: Poisson
    counts (the simulation cases) keep a dispersion of 1. Real counts (genes, words) are
    over-dispersed, most of all where deep: a cluster of deep genes varies between cell clusters far beyond
    Poisson noise, and against a Poisson test every one of its blocks passed for a bicluster."""
    expected = background * sizes
    per_unit = background * np.outer(*spread)
    on = reference & (expected > 0) & (per_unit > 0)
    weight = per_unit[on]
    surplus = (weight * ((observed[on] - expected[on]) ** 2 - observed[on]) / expected[on]).sum()
    information = (weight ** 2).sum()
    if information <= 0 or surplus <= DISPERSION_EVIDENCE * np.sqrt(2 * information):
        return np.ones(observed.shape)
    return 1.0 + surplus / information * per_unit


def _reference_blocks(observed, sizes, light, z, z_min, background, dispersion):
    """(K_r, K_c) bool: the blocks that say what a cluster's background is: the light blocks that do not stand
    out (``z < z_min``: a block too narrow to be heavy may still stand out, and levels fitted to it would
    explain its excess away and shift every other block's background), unless they are a minority of the
    cluster's blocks.

    A bicluster is a block raised above the rest of its row and column clusters. A cluster heavy in most of
    its blocks says little of its own level through its light blocks: against the uniform fixed point a
    cluster of deep genes is heavy in most cell clusters, light only in a few small ones (no power), and
    their level made every other block a bicluster. Such a cluster takes the rest of its blocks as its
    baseline (:func:`_cluster_baselines`). Row and column clusters are judged on the same light blocks: a
    block belongs to the reference of a row cluster judged this way by the row's choice, likewise for
    columns, and by either's where both are. Any cluster left without a reference block takes its lowest (by
    density over the current ``background``): the highly expressed genes of single-cell data, heavy in every
    cell cluster. The rule treats rows and columns alike (the transpose gives the transpose)."""
    start = light & (z < z_min)
    expected = background * sizes
    row_judged, row_choice = _cluster_baselines(observed, expected, dispersion, start, z_min)
    column_judged, column_choice = _cluster_baselines(observed.T, expected.T, dispersion.T, start.T, z_min)
    rows_only = row_judged[:, None] & ~column_judged[None, :]
    columns_only = ~row_judged[:, None] & column_judged[None, :]
    both = row_judged[:, None] & column_judged[None, :]
    reference = np.where(rows_only, row_choice, np.where(columns_only, column_choice.T, start))
    reference |= both & (row_choice | column_choice.T)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(expected > 0, observed / expected, np.inf)
    bare_rows = np.flatnonzero(~reference.any(axis=1) & (expected > 0).any(axis=1))
    bare_columns = np.flatnonzero(~reference.any(axis=0) & (expected > 0).any(axis=0))
    reference[bare_rows, np.argmin(ratio[bare_rows], axis=1)] = True
    reference[np.argmin(ratio[:, bare_columns], axis=0), bare_columns] = True
    return reference


def _cluster_baselines(observed, expected, dispersion, start, z_min):
    """The reference blocks chosen for the clusters along axis 0 whose ``start`` blocks (light, not standing
    out) are a minority of their three or more blocks with expected counts: ``(judged (K,), choice (K, L))``,
    ``choice`` meaningful in the judged rows. Such a cluster's baseline is the highest of its blocks, from its
    (lower) median down by density over ``expected``, that none of its blocks falls below by ``z_min``
    (against ``dispersion``, as :func:`_heavy_against`), together with the blocks within ``z_min`` of it: the
    rest of the cluster, unless some blocks lie clearly below the rest (then the low ones are the background
    and the others raised). A baseline of zero counts takes only the blocks without counts."""
    judged = np.zeros(observed.shape[0], bool)
    choice = np.zeros(observed.shape, bool)
    for k in range(observed.shape[0]):
        blocks = np.flatnonzero(expected[k] > 0)
        if blocks.size < 3 or 2 * start[k].sum() >= blocks.size:
            continue
        counts, means, widths = observed[k, blocks], expected[k, blocks], dispersion[k, blocks]
        ratio = counts / means
        by_ratio = np.argsort(ratio, kind="stable")
        for candidate in by_ratio[:(blocks.size - 1) // 2 + 1][::-1]:
            base = ratio[candidate] * means
            with np.errstate(divide="ignore", invalid="ignore"):
                z_base = np.where(base > 0, (counts - base) / np.sqrt(widths * base),
                                  np.where(counts > 0, np.inf, 0.0))
            if (z_base >= -z_min).all():
                break
        judged[k] = True
        choice[k, blocks[np.abs(z_base) < z_min]] = True
        choice[k, blocks[candidate]] = True
    return judged, choice


def _item_depths(aggregated, labels, background_side, reference, n_other):
    """Each item's depth relative to its cluster's background, left out of each other-side cluster in turn:
    ``(depths (n, L), shapes (n, L))``.

    ``aggregated`` (n, L): each item's count over the other side's clusters, which have ``n_other`` (L,)
    members; ``background_side``, ``reference`` (K, L): the background density and the reference blocks
    (:func:`_reference_blocks`), this side's clusters along axis 0. Model: an item's count over its cluster's
    reference blocks is Poisson with mean ``w x`` its cluster's background there, its depth ``w``
    Gamma-distributed around 1 (empirical Bayes, the shape ``s`` of :func:`_level_shape`: depths stay 1 unless
    the items differ beyond Poisson noise by five sigma of evidence, as genes and words of real data do and
    the items of the simulation cases do not). Entry (i, l) is the depth's posterior given the item's
    reference counts outside cluster l (an item tested on l is judged against its depth elsewhere, not
    against a depth its counts on l have raised): Gamma with mean ``depths[i, l]`` and shape ``shapes[i, l]``
    (``s`` plus those counts). Its count over cluster l's cells is then negative binomial around its
    background there (:func:`_signed_root_deviance`): an item with few counts elsewhere has an uncertain depth,
    and that uncertainty widens what counts as raised. Without evidence for depths: depths 1, shapes inf (the
    Poisson of a cluster's shared rate). Items labelled -1 get 1 and inf.
    """
    own = np.where(labels >= 0, labels, 0)
    on = reference[own] & (labels >= 0)[:, None]
    counts = np.where(on, aggregated, 0.0)
    expected = np.where(on, background_side[own] * n_other[None, :], 0.0)
    shape = _level_shape(counts.sum(axis=1), expected.sum(axis=1))
    if np.isinf(shape):
        return np.ones(aggregated.shape), np.full(aggregated.shape, np.inf)
    shapes = shape + counts.sum(axis=1, keepdims=True) - counts
    shapes[labels < 0] = np.inf
    depths = shapes / (shape + expected.sum(axis=1, keepdims=True) - expected)
    depths[labels < 0] = 1.0
    return depths, shapes


def _block_total(X, rows, columns):
    return float(rows.astype(np.float64) @ X @ columns.astype(np.float64))


def _signed_root_deviance(counts, expected, shapes):
    """Likelihood-ratio z-scores of ``counts`` against means ``expected`` (broadcastable, expected > 0): the
    signed square root of the deviance, positive for an excess; negative binomial of shape ``shapes`` where it
    is finite (an item's count around its uncertain depth, :func:`_item_depths`), Poisson where it is inf.
    Unlike ``(counts - expected) / sqrt(expected)`` it does not overstate an excess of a small skewed count,
    which matters for the many single rows and columns tested as outsiders (heavy blocks, whole blocks of
    counts, keep the simpler score)."""
    deviance = 2 * (xlogy(counts, counts / expected) - (counts - expected))
    finite = np.isfinite(shapes)
    if finite.any():
        r = np.where(finite, shapes, 1.0)
        negative_binomial = 2 * (xlogy(counts, counts / expected) - (counts + r) * np.log((counts + r) / (expected + r)))
        deviance = np.where(finite, negative_binomial, deviance)
    return np.sign(counts - expected) * np.sqrt(np.maximum(deviance, 0.0))


def _favouring(counts, expected, lift, shapes):
    """Items whose ``counts`` are likelier at their background means ``expected`` raised by ``lift`` than at
    ``expected``: Poisson log-likelihood ratio ``counts log(lift) - expected (lift - 1) > 0``, or negative
    binomial of shape ``shapes`` where it is finite (as :func:`_signed_root_deviance`)."""
    ratio = counts * np.log(lift) - expected * (lift - 1)
    finite = np.isfinite(shapes)
    if finite.any():
        r = np.where(finite, shapes, 1.0)
        ratio = np.where(finite, counts * np.log(lift) - (counts + r) * np.log1p(expected * (lift - 1) / (expected + r)),
                         ratio)
    return ratio > 0


def _side_counts(X, rows, columns):
    """Each row's count over ``columns`` (n_rows,) and each column's count over ``rows`` (n_cols,)."""
    return (np.asarray(X @ columns.astype(np.float64)).ravel(),
            np.asarray(rows.astype(np.float64) @ X).ravel())


def _lifts(total, rho0, rows, columns, depths):
    """The lift of a block with ``total`` counts over its background ``rho0``, as its rows see it and as its
    columns see it: ``total`` over the background's expected total with that side's members at their depths
    (``depths``: ``(row depths (n_rows,), column depths (n_cols,))``). With depths 1 both are the block's
    density over ``rho0``."""
    return tuple(total / (rho0 * n_other * depth[own].sum())
                 for own, n_other, depth in zip((rows, columns), (columns.sum(), rows.sum()), depths))


def _stands(X, rows, columns, rho0, depths, shapes):
    """Whether a heavy block is a bicluster of its own: denser than its background ``rho0``, and most of its
    rows and most of its columns "favour" it (:func:`_favouring`: their count over the block's other side
    likelier at their background, ``rho0`` times their depth, raised by the block's lift than at their
    background). ``depths``, ``shapes``: ``(rows' (n_rows,), columns' (n_cols,))`` depths on the block and
    their shapes (:func:`_item_depths`). A block that fails was made heavy by a few stray members."""
    row_index, column_index = np.flatnonzero(rows), np.flatnonzero(columns)
    block = X[row_index][:, column_index]
    lifts = _lifts(block.sum(), rho0, rows, columns, depths)
    sides = ((np.asarray(block.sum(axis=1)).ravel(), column_index.size, row_index),
             (np.asarray(block.sum(axis=0)).ravel(), row_index.size, column_index))
    return all(lift > 1 and _favouring(counts, rho0 * n_other * depth[members], lift, shape[members]).mean() >= 0.5
               for lift, (counts, n_other, members), depth, shape in zip(lifts, sides, depths, shapes))


def _refine(X, rows, columns, rho0, z_min, outsiders, depths):
    """The bicluster of a heavy block that stands (:func:`_stands`): its rows and columns, plus outsiders that
    belong to it too.

    ``rho0``: the background density of the block's cells; ``depths``: its members' depths as for
    :func:`_lifts`. ``outsiders``: ``((row backgrounds (n_rows,), their shapes), (column backgrounds (n_cols,),
    their shapes))`` (:func:`_outsider_backgrounds`), NaN backgrounds for items that may not join. An outsider
    joins when its count over the block's other side is likelier raised by the block's lift over its background
    than at its background (it "favours" the block), and that count's likelihood-ratio z-score against its
    background reaches ``z_min``, or the one-sided ``FAMILY_ERROR`` family-wise level over the outsiders tested
    if higher (overlap needs evidence, not a coin flip, and not the luckiest of many). Everything is measured
    against the block as labelled, so one joiner cannot pull in the next.
    """
    lifts = _lifts(_block_total(X, rows, columns), rho0, rows, columns, depths)
    tested = [~own & np.isfinite(background) for own, (background, _) in zip((rows, columns), outsiders)]
    z_join = max(z_min, float(norm.isf(FAMILY_ERROR / max(sum(t.sum() for t in tested), 1))))
    joined = []
    for own, n_other, counts, (background, shapes), test, lift in zip(
            (rows, columns), (columns.sum(), rows.sum()), _side_counts(X, rows, columns), outsiders, tested, lifts):
        expected = np.where(test, background, rho0) * n_other
        joins = test & _favouring(counts, expected, lift, shapes) & (
            _signed_root_deviance(counts, expected, shapes) >= z_join)
        joined.append(own | joins)
    return joined[0], joined[1]


def default_z_min(n_blocks):
    """3, or the one-sided ``FAMILY_ERROR`` family-wise (Bonferroni) level over ``n_blocks`` tests if higher."""
    return max(DEFAULT_Z_MIN, float(norm.isf(FAMILY_ERROR / max(n_blocks, 1))))


def _outsider_backgrounds(labels, background_side, closed, depths):
    """For each other-side cluster l, the background density of each item's own cells over cluster l, times
    its depth there where that is above 1, and that depth's shape (inf where the depth is at most 1; ``depths``:
    ``(depths (n, L), shapes (n, L))`` of :func:`_item_depths`): ``(backgrounds (L, n), shapes (L, n))``,
    backgrounds NaN where the item may not join a block on l: its own block there is ``closed`` (K, L), or it is
    set aside (label -1). ``background_side`` (K, L), this side's clusters along axis 0. A shallow item is judged
    at its cluster's background (module docstring)."""
    labelled = labels >= 0
    own = np.where(labelled, labels, 0)
    deeper = depths[0] > 1
    out = (background_side[own] * np.where(deeper, depths[0], 1.0)).T
    out[closed[own].T] = np.nan
    out[:, ~labelled] = np.nan
    return out, np.where(deeper, depths[1], np.inf).T


def _backgrounds(X, row_labels, column_labels, z_min, min_size, levels):
    """The blocks of a partition and their backgrounds as the significance rule sees them: what
    :func:`_heavy_of_partition` returns, then the rows' and the columns' depths (:func:`_item_depths`; 1, of
    shape inf, without ``levels``): ``(row_sets, column_sets, heavy, background, z, z_min, dispersion,
    observed, row_depths, column_depths)``, each depths ``(depths, shapes)``, (n_rows, K_c) for the rows and (n_cols, K_r)
    for the columns."""
    row_sets, column_sets, heavy, background, z, z_min, dispersion, observed = _heavy_of_partition(
        X, row_labels, column_labels, z_min, min_size, levels)
    if not levels:
        return (row_sets, column_sets, heavy, background, z, z_min, dispersion, observed, *(
            (np.ones((n, K)), np.full((n, K), np.inf)) for n, K in zip(X.shape, heavy.shape[::-1])))
    row_sizes, column_sizes = row_sets.sum(axis=1).astype(np.float64), column_sets.sum(axis=1).astype(np.float64)
    by_column_cluster = np.asarray(X @ column_sets.T.astype(np.float64))
    by_row_cluster = np.asarray(X.T @ row_sets.T.astype(np.float64))
    sizes = np.outer(row_sizes, column_sizes)
    reference = _reference_blocks(observed, sizes, ~heavy & (sizes > 0), z, z_min, background, dispersion)
    row_depths = _item_depths(by_column_cluster, row_labels, background, reference, column_sizes)
    column_depths = _item_depths(by_row_cluster, column_labels, background.T, reference.T, row_sizes)
    return row_sets, column_sets, heavy, background, z, z_min, dispersion, observed, row_depths, column_depths


def _significance_rule(X, row_labels, column_labels, z_min, min_size, levels=True):
    """The significance rule (module docstring); ``levels``: let the background have row and column cluster
    levels, and items their depths, when the data demand them (:func:`_cluster_levels`,
    :func:`_item_depths`)."""
    n_rows, n_cols = X.shape
    (row_sets, column_sets, heavy, background, z, z_min, dispersion, observed, row_depths,
     column_depths) = _backgrounds(X, row_labels, column_labels, z_min, min_size, levels)
    standing = np.zeros(heavy.shape, bool)
    for k, l in np.argwhere(heavy):
        standing[k, l] = _stands(X, row_sets[k], column_sets[l], background[k, l],
                                 (row_depths[0][:, l], column_depths[0][:, k]),
                                 (row_depths[1][:, l], column_depths[1][:, k]))
    # With levels, an item whose own block on l is a bicluster is in it already; tested against every other
    # block on l as well, it made near-copies of them on real data. The uniform background keeps testing it:
    # there it is what reunites one block cut into two clusters (measured on the simulation cases).
    closed = standing if _has_levels(background) else np.zeros(heavy.shape, bool)
    row_outsiders = _outsider_backgrounds(row_labels, background, closed, row_depths)
    column_outsiders = _outsider_backgrounds(column_labels, background.T, closed.T, column_depths)
    members = {}
    totals = tuple(np.asarray(X.sum(axis=axis), np.float64).ravel() for axis in (1, 0))
    for k, l in np.argwhere(standing).tolist():
        members[k, l] = _refine(
            X, row_sets[k], column_sets[l], background[k, l], z_min,
            ((row_outsiders[0][l], row_outsiders[1][l]), (column_outsiders[0][k], column_outsiders[1][k])),
            (row_depths[0][:, l], column_depths[0][:, k]))
    expected = background * np.outer(row_sets.sum(axis=1), column_sets.sum(axis=1))
    found = []
    for row_clusters, column_clusters in _joined_blocks(observed, expected, dispersion, standing, z_min):
        blocks = [(k, l) for k in row_clusters for l in column_clusters]
        r = _joined_members(np.array([np.logical_or.reduce([members[k, l][0] for k in row_clusters])
                                      for l in column_clusters]), ~np.isfinite(row_outsiders[0][list(column_clusters)]))
        c = _joined_members(np.array([np.logical_or.reduce([members[k, l][1] for l in column_clusters])
                                      for k in row_clusters]), ~np.isfinite(column_outsiders[0][list(row_clusters)]))
        own_rows, own_columns = np.isin(row_labels, row_clusters), np.isin(column_labels, column_clusters)
        r = own_rows | (r & _raised_against_themselves(X, own_columns, totals[0]))
        c = own_columns | (c & _raised_against_themselves(X.T, own_rows, totals[1]))
        index = np.ix_(row_clusters, column_clusters)
        excess = (observed[index] - expected[index]).sum()
        strength = excess / np.sqrt((dispersion[index] * expected[index]).sum())
        lead = max(blocks, key=lambda kl: z[kl])
        found.append((r, c, lead, strength, row_clusters, column_clusters))
    rows, columns, pairs, strength, row_groups, column_groups = [], [], [], [], [], []
    for r, c, lead, score, row_clusters, column_clusters in sorted(found, key=lambda f: -f[3]):
        if any(np.array_equal(r, r2) and np.array_equal(c, c2) for r2, c2 in zip(rows, columns)):
            continue
        rows.append(r)
        columns.append(c)
        pairs.append(lead)
        strength.append(score)
        row_groups.append(np.asarray(row_clusters, np.int64))
        column_groups.append(np.asarray(column_clusters, np.int64))
    return Biclusters(
        rows=np.array(rows, bool).reshape(-1, n_rows),
        columns=np.array(columns, bool).reshape(-1, n_cols),
        pairs=np.array(pairs, np.int64).reshape(-1, 2),
        strength=np.array(strength, np.float64),
        row_clusters=tuple(row_groups),
        column_clusters=tuple(column_groups),
    )


def _raised_against_themselves(X, other, totals):
    """(n,) bool: the rows of ``X`` (n, m) whose mean count over the columns ``other`` (m,) bool is above their mean
    count over the other columns (all, when ``other`` is every column); ``totals`` (n,): the rows' totals.

    An outsider joins a bicluster by standing above its background there, its cluster's level times its depth
    (:func:`_refine`), and an item can stand far above its cluster's level on documents where its cluster is
    rare while being rarer there than elsewhere: on 20 Newsgroups, memory, software and mac joined the religion
    biclusters, 72 of the 322 members of the 17 biclusters were depleted in their columns. It must also be
    raised against itself, over the bicluster's own other side as labelled (its clusters' members): an item of
    two blocks, labelled with the denser, is raised over the other bicluster's columns as a whole, even where
    one of its clusters alone would not show it. Every item of the other side weighs alike. Known limit: the
    other columns include the item's own block, so an item of a wide dense block and a narrower one over little
    background stays out of the narrower (tests/test_extract.py, xfail). Leaving its own biclusters' columns
    out let noise in and still counted its other blocks against it; comparing with its lowest cluster level at
    the bicluster's lift kept most depleted members (docs/results.md, thirty-sixth session)."""
    inside = np.asarray(X @ other.astype(np.float64)).ravel()
    n_inside, n_rest = other.sum(), other.size - other.sum()
    return (n_rest == 0) | (inside * n_rest > (totals - inside) * n_inside)


def _joined_members(members, untested):
    """The members on one side of a bicluster that joins blocks: ``members`` (L, n), those of its blocks'
    biclusters on each of the other side's L clusters it spans, ``untested`` (L, n) the items not tested as
    outsiders there (:func:`_outsider_backgrounds`: their own block there is a bicluster, or they are set
    aside). An item belongs when it is a member wherever it was tested, and somewhere: raised wherever the
    bicluster spans, not on one of its parts only."""
    return (members | untested).all(axis=0) & members.any(axis=0)


def _joined_blocks(observed, expected, dispersion, standing, z_min):
    """The standing blocks joined into rectangles of one lift: a list of ``(row clusters, column clusters)``,
    sorted tuples of cluster indices; every block of a rectangle stands, and every standing block is in one.

    Each standing block starts as its own rectangle. Two rectangles that share a row cluster or a column
    cluster span a box (their row clusters x their column clusters); the box grows to take in every rectangle
    it touches, until it holds them whole. When all its blocks stand and share one lift over their
    backgrounds, its rectangles are joined into it, the most alike box first. One lift: Pearson's statistic of
    the blocks' totals ``observed`` (K_r, K_c) around ``lift x expected``, within the two-sided level of
    ``z_min`` of a chi-square on (blocks - 1) degrees of freedom. Each block's variance is ``lift x expected``
    times its dispersion at its own lift: ``dispersion`` (:func:`_block_dispersion`) holds ``1 + c rho0 h h`` at
    the background's mean, and a negative-binomial cell's excess variance grows with its mean, so a block
    raised ``observed / expected`` times has ``1 + (dispersion - 1) observed / expected``. A gene programme
    raised alike in three cell clusters of one cell type is one bicluster, not three; where its lift differs it
    stays apart. (Joining only rectangles with the same row or the same column clusters, a grid of blocks at
    one lift could end in a pinwheel of rectangles none of which can join another.)"""
    level = 2 * norm.sf(z_min)
    blocks = np.argwhere(standing)
    owner = np.full(standing.shape, -2)  # the rectangle of each standing block; -2: not standing
    owner[standing] = np.arange(len(blocks))
    with np.errstate(divide="ignore", invalid="ignore"):  # no background at all: NaN, nothing joins
        raised = 1 + (dispersion - 1) * np.maximum(observed / expected, 1.0)
        # summed over blocks, they give Pearson's statistic of one lift (_one_lift_pearson)
        terms = np.stack([observed, expected, observed ** 2 / (raised * expected), observed / raised,
                          expected / raised, np.ones(observed.shape)], axis=-1)
    # a merge makes one rectangle of at least two: there are fewer than twice as many rectangles as blocks
    sums = np.zeros((2 * len(blocks), terms.shape[-1]))
    sums[:len(blocks)] = terms[standing]
    rectangles = {i: ((k,), (l,)) for i, (k, l) in enumerate(blocks.tolist())}
    # the row and column clusters of each rectangle
    row_sets = np.zeros((len(sums), standing.shape[0]), bool)
    column_sets = np.zeros((len(sums), standing.shape[1]), bool)
    row_sets[np.arange(len(blocks)), blocks[:, 0]] = column_sets[np.arange(len(blocks)), blocks[:, 1]] = True

    def p_one_lift(held_sums):
        """The p-value of one lift for blocks with these summed ``terms`` (..., 6)."""
        statistic, _, n = _one_lift_pearson(held_sums)
        return chdtrc(n - 1, statistic)

    def box_of(a, b):
        """The box that holds rectangles a and b and every rectangle it touches, as ``(row clusters, column
        clusters)``, and the rectangles it holds; None if a block of it does not stand, or if the rectangles it
        holds so far differ in lift beyond what any box may show."""
        (rows_a, columns_a), (rows_b, columns_b) = rectangles[a], rectangles[b]
        if rows_a == rows_b or columns_a == columns_b:  # the two make up the box
            return (tuple(sorted(set(rows_a) | set(rows_b))), tuple(sorted(set(columns_a) | set(columns_b)))), \
                (min(a, b), max(a, b))
        rows, columns = row_sets[[a, b]].any(axis=0), column_sets[[a, b]].any(axis=0)
        while True:
            inside = owner[np.ix_(rows, columns)]
            if inside.min() < 0:
                return None
            flags = np.zeros(len(sums), bool)
            flags[inside.ravel()] = True
            held = np.flatnonzero(flags)
            # no box that holds these rectangles passes: the least statistic over lifts of the blocks held so
            # far bounds the box's from below, and the box has at most every standing block (the p-value grows
            # with the degrees of freedom); taken a hair lower, as the two are equal where the pooled lift is
            # the least statistic's and rounding must not put the bound above the statistic
            least = _one_lift_pearson(sums[held].sum(axis=0))[1] * (1 - 1e-9)
            if chdtrc(len(blocks) - 1, least) <= level:
                return None
            # every block of the box belongs to a held rectangle: the box only grows
            grown_rows, grown_columns = row_sets[held].any(axis=0), column_sets[held].any(axis=0)
            if grown_rows.sum() == rows.sum() and grown_columns.sum() == columns.sum():
                return (tuple(np.flatnonzero(rows).tolist()), tuple(np.flatnonzero(columns).tolist())), \
                    tuple(held.tolist())
            rows, columns = grown_rows, grown_columns

    def offer(index):
        """Put on the heap the boxes of rectangle ``index`` with each rectangle it shares a cluster with."""
        rows, columns = map(list, rectangles[index])
        neighbours = np.union1d(owner[rows].ravel(), owner[:, columns].ravel())
        # a box holds the rectangle's rows on the other's columns and the other's rows on its columns
        rows_open, columns_open = standing[:, columns].all(axis=1), standing[rows].all(axis=0)
        for other in neighbours[(neighbours >= 0) & (neighbours != index)].tolist():
            other_rows, other_columns = rectangles[other]
            if not (rows_open[list(other_rows)].all() and columns_open[list(other_columns)].all()):
                continue
            found = box_of(index, other)
            if found is not None:
                p = float(p_one_lift(sums[list(found[1])].sum(axis=0)))
                if p > level:
                    heapq.heappush(candidates, (-p, found[0], found[1]))

    # The first boxes are pairs of blocks in one row or one column cluster: their p-values at once.
    candidates = []
    for axis in (0, 1):
        line = blocks[:, axis]
        order = np.argsort(line, kind="stable")
        starts = np.searchsorted(line[order], np.unique(line))
        for members in np.split(order, starts[1:]):
            first, second = np.triu_indices(len(members), 1)
            a, b = members[first], members[second]
            p = p_one_lift(sums[a] + sums[b])
            for i, j, p_ij in zip(a.tolist(), b.tolist(), p.tolist()):
                if p_ij > level:
                    box = box_of(i, j)[0]
                    candidates.append((-p_ij, box, (min(i, j), max(i, j))))
    heapq.heapify(candidates)
    numbers = itertools.count(len(blocks))
    while candidates:
        _, box, held = heapq.heappop(candidates)
        # A box is its rectangles' blocks and nothing else: while they all stand as they were, it is as it was.
        # Otherwise the candidate is stale, and the rectangle that took one of them offered its own.
        if all(r in rectangles for r in held):
            index = next(numbers)
            sums[index] = sums[list(held)].sum(axis=0)
            for r in held:
                del rectangles[r]
            rectangles[index] = box
            row_sets[index, list(box[0])] = column_sets[index, list(box[1])] = True
            owner[np.ix_(*box)] = index
            offer(index)
    return list(rectangles.values())


def _one_lift_pearson(sums):
    """Pearson's statistic of blocks around their pooled lift ``L = O / E``, its least over all lifts, and the
    number of blocks, from their summed ``terms`` (..., 6) of :func:`_joined_blocks`: ``(O, E, A, B, C, n)``,
    over the blocks of ``O``, ``E``, ``O^2 / (r E)``, ``O / r``, ``E / r`` (r: a block's dispersion at its lift)
    and 1. The statistic at lift L is ``A / L - 2 B + L C``, least at ``L = sqrt(A / C)``: ``2 sqrt(A C) - 2 B``.
    NaN where ``E`` is 0."""
    observed, expected, a, b, c, n = (sums[..., i] for i in range(6))
    with np.errstate(divide="ignore", invalid="ignore"):
        lift = observed / expected
        return (np.maximum(a / lift - 2 * b + lift * c, 0.0), np.maximum(2 * np.sqrt(a * c) - 2 * b, 0.0), n)


def _has_levels(background):
    """Whether a background (K_r, K_c) has cluster levels (is not one uniform density)."""
    return bool(np.ptp(background) > 0)


def _heavy_of_partition(X, row_labels, column_labels, z_min, min_size, levels=False):
    """The blocks of a partition as the significance rule sees them (labels -1 belong to no block):
    ``(row_sets (K_r, n_rows), column_sets (K_c, n_cols), heavy (K_r, K_c) bool, background (K_r, K_c),
    z (K_r, K_c), z_min, dispersion (K_r, K_c), observed (K_r, K_c) block totals)``, with z_min at its default level if None and ``levels`` as
    for :func:`_heavy_blocks` (with the clusters' depth spreads, :func:`_depth_spread`)."""
    row_labels, column_labels = np.asarray(row_labels), np.asarray(column_labels)
    K_r, K_c = int(np.max(row_labels)) + 1, int(np.max(column_labels)) + 1
    row_sets, column_sets = _indicator(row_labels, K_r), _indicator(column_labels, K_c)
    observed = _block_sums(X, row_sets, column_sets)
    spread = (_depth_spread(X, row_labels, K_r, 0), _depth_spread(X, column_labels, K_c, 1)) if levels else None
    heavy, background, z, z_min, dispersion = _heavy_of_blocks(
        observed, row_sets.sum(axis=1), column_sets.sum(axis=1), z_min, min_size, _overall_density(X), levels,
        spread)
    return row_sets, column_sets, heavy, background, z, z_min, dispersion, observed


def _overall_density(X):
    return X.sum() / (X.shape[0] * X.shape[1])


def _heavy_of_blocks(observed, n_rows, n_cols, z_min, min_size, initial_density, levels=False, spread=None):
    """``(heavy, background (K_r, K_c), z, z_min, dispersion (K_r, K_c))`` of blocks with totals ``observed``
    (K_r, K_c) and cluster sizes ``n_rows`` (K_r,), ``n_cols`` (K_c,) (:func:`_heavy_blocks` from
    ``initial_density``, with ``levels`` and ``spread``; blocks narrower than ``min_size`` are not eligible;
    z_min at its default level if None)."""
    sizes = np.outer(n_rows, n_cols).astype(np.float64)
    eligible = (n_rows[:, None] >= min_size) & (n_cols[None, :] >= min_size)
    if z_min is None:
        z_min = default_z_min(int(eligible.sum()))
    heavy, background, z, dispersion = _heavy_blocks(observed, sizes, z_min, eligible, initial_density, levels,
                                                     spread)
    return heavy, background, z, z_min, dispersion


def _pooling(sums, cells, heavy):
    """``(pooled density, shape)`` of the Gamma distribution of the heavy blocks' densities (see
    :func:`_pooled_heavy_densities`); shape 0, every block at its own density, with fewer than two heavy blocks
    with cells."""
    counted = heavy & (cells > 0)
    if counted.sum() < 2 or sums[counted].sum() <= 0:
        return 1.0, 0.0
    totals, sizes = sums[counted], cells[counted]
    pooled = totals.sum() / sizes.sum()
    shapes = POOLING_SHAPES * totals.max()
    shape = shapes[:, None]
    means = sizes[None, :] * pooled
    log_marginal = (gammaln(shape + totals) - gammaln(shape) - shape * np.log1p(means / shape)
                    + xlogy(totals, means / (shape + means))).sum(axis=1)
    return pooled, float(shapes[np.argmax(log_marginal)])


def _shrunk_densities(sums, cells, pooled, shape):
    """Posterior-mean densities ``(shape + sums) / (shape / pooled + cells)`` of blocks with totals ``sums`` over
    ``cells`` (arrays of one shape) under the Gamma(shape, mean ``pooled``) distribution of
    :func:`_pooling`: their own densities at shape 0; 0 for blocks without cells."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(cells > 0, (shape + sums) / (shape / pooled + cells), 0.0)


def _pooled_heavy_densities(sums, cells, heavy):
    """Empirical-Bayes densities (K, L) of the heavy blocks; other blocks keep their own density.

    ``sums``, ``cells`` (K, L): counts and number of cells of each block. The heavy blocks' densities are taken
    as draws from a Gamma distribution with mean ``rho_h``, their pooled density, and shape ``kappa``; given
    them, a block's total is Poisson, so it is negative binomial given ``kappa`` alone. ``kappa`` maximises that
    marginal likelihood over ``POOLING_SHAPES`` times the largest block total (:func:`_pooling`), and each block
    gets its posterior mean density ``(kappa + O) / (kappa / rho_h + C)``. Blocks whose totals differ no more
    than Poisson noise allows get (nearly) one shared density; blocks of clearly different densities keep their
    own. A small block's density, estimated from few cells, is otherwise the noisiest number in the model.
    Blocks without cells get 0; with fewer than two heavy blocks with cells, every block keeps its own density.
    """
    densities = _shrunk_densities(sums, cells, 1.0, 0.0)
    densities[heavy] = _shrunk_densities(sums[heavy], cells[heavy], *_pooling(sums, cells, heavy))
    return densities


def _light_density(sums, cells, heavy):
    """Maximum-likelihood density of the blocks that are not heavy: their counts over their cells (0 without
    cells)."""
    light_cells = cells[~heavy].sum()
    return sums[~heavy].sum() / light_cells if light_cells > 0 else 0.0


def _membership_em(labels, n_clusters, log_likelihood, n_iter=50, tol=1e-8):
    """Soft EM of one side's memberships; returns hard labels (each item's most probable cluster).

    ``labels`` (n,): the starting partition, -1 for items set aside (they stay -1); ``n_clusters``: K, at least
    ``labels.max() + 1`` (clusters keep their indices; one may end up empty). ``log_likelihood(resp)`` gives
    the labelled items' log-likelihood (n_labelled, K) under each cluster given their responsibilities
    ``resp`` (n_labelled, K) (a model may re-estimate its parameters from them); the mixing weights are the
    clusters' shares of the responsibilities."""
    active = labels >= 0
    resp = np.eye(n_clusters)[labels[active]]
    for _ in range(n_iter):
        with np.errstate(divide="ignore"):
            log_post = log_likelihood(resp) + np.log(resp.sum(axis=0))[None, :]
        new = np.exp(log_post - logsumexp(log_post, axis=1, keepdims=True))
        converged = np.abs(new - resp).max() < tol
        resp = new
        if converged:
            break
    out = labels.copy()
    out[active] = np.argmax(resp, axis=1)
    return out


def block_rates(sums, cells, heavy):
    """(K, L) density per cell of each block under the block model: the heavy blocks' pooled by empirical Bayes
    (:func:`_pooled_heavy_densities`), one background density (:func:`_light_density`) elsewhere; at least the
    smallest positive double (a block without cells, or at a zero density, keeps a finite log)."""
    rate = np.where(heavy, _pooled_heavy_densities(sums, cells, heavy), _light_density(sums, cells, heavy))
    return np.where(np.isfinite(rate) & (rate > 0), rate, np.finfo(np.float64).tiny)


def _block_model_em(aggregated, labels, n_other, heavy):
    """Soft EM of one side's memberships under the block model, the other side fixed; returns hard labels.

    ``aggregated`` (n, L): each item's counts summed over the other side's clusters, which have ``n_other``
    (L,) members. Item i in cluster k has Poisson counts of rate ``rate[k, l]`` per cell over cluster l:
    the heavy block's density where (k, l) is heavy (empirical Bayes, pooled towards the other heavy blocks:
    ``_pooled_heavy_densities``), the shared background density elsewhere; mixing weights are the clusters'
    shares. Rates and weights are re-estimated from the responsibilities (the borderline items count by their
    probability, which tempers the optimism of rates estimated from hard members only). Items with label -1
    stay -1; clusters keep their indices (one may end up empty).
    """
    X_a = aggregated[labels >= 0]

    def log_likelihood(resp):
        rate = block_rates(resp.T @ X_a, np.outer(resp.sum(axis=0), n_other), heavy)
        return X_a @ np.log(rate).T - (rate * n_other[None, :]).sum(axis=1)[None, :]

    return _membership_em(labels, heavy.shape[0], log_likelihood)


def _block_profiles(X, rows, columns, z_min, min_size, axis):
    """Log-profiles (K, L) of one side's clusters (rows: ``axis`` 0, columns: 1) over the other side's L
    clusters, under the significance rule's model with its background levels (``levels=True``): block (k, l)
    expects ``background[k, l] x cells`` counts, times the heavy block's lift (its total over that, pooled
    by empirical Bayes across the heavy blocks, :func:`_pooled_heavy_densities`) where it is heavy. Row k of
    the result is the share of cluster k's expected counts that falls in each other-side cluster: what an item
    of cluster k spreads its counts over whatever its depth (the cluster's own level cancels). Shares are at
    least the smallest positive double (an empty cluster has them all there; the EM gives it no weight).
    Cluster indices are the labels' (0 .. max)."""
    row_sets, column_sets, heavy, background, *_, observed = _heavy_of_partition(X, rows, columns, z_min,
                                                                                 min_size, levels=True)
    expected = background * np.outer(row_sets.sum(axis=1), column_sets.sum(axis=1))
    means = np.moveaxis(expected * np.where(heavy, _pooled_heavy_densities(observed, expected, heavy), 1.0), axis, 0)
    shares = means / np.maximum(means.sum(axis=1, keepdims=True), np.finfo(np.float64).tiny)
    return np.log(np.maximum(shares, np.finfo(np.float64).tiny))


def _profile_em(aggregated, labels, log_profiles):
    """Soft EM of one side's memberships when items differ in depth (the multinomial likelihood): item i in
    cluster k has counts ``aggregated[i]`` (over the other side's clusters) multinomial with the cluster's
    profile, ``exp(log_profiles[k])`` (:func:`_block_profiles`, held fixed; the mixing weights are
    re-estimated). Returns hard labels; -1 stays -1."""
    log_likelihood = aggregated[labels >= 0] @ log_profiles.T
    return _membership_em(labels, log_profiles.shape[0], lambda resp: log_likelihood)


def _block_log_likelihood(observed, sizes, heavy, background, pooling):
    """Poisson log-likelihood of the counts of each block, factorials dropped: a heavy block at its posterior-mean
    density under ``pooling`` (``(pooled density, shape)`` of :func:`_pooling`; :func:`_shrunk_densities`), every
    other block at ``background``. All arrays broadcast to one shape; returns that shape."""
    rate = np.where(heavy, _shrunk_densities(observed, sizes, *pooling), background)
    return xlogy(observed, rate) - rate * sizes


def _classification_score(observed, n_rows, n_cols, z_min, min_size, initial_density, members=None,
                          dispersion=1.0):
    """Classification log-likelihood of a partition under the block model, and its heavy blocks.

    ``observed`` (K_r, K_c): block totals; ``n_rows`` (K_r,), ``n_cols`` (K_c,): cluster sizes (all > 0), in
    items, or in exposures on a side whose items differ in depth (:func:`_cluster_sizes`); ``members``:
    ``(rows', columns')`` member counts for the labels' term, the sizes themselves if None. The
    heavy blocks are the significance rule's (:func:`_heavy_of_blocks`); the score is the counts' log-likelihood
    at the densities of the refinement's EM (factorials dropped): the heavy blocks' pooled by empirical Bayes
    (:func:`_pooled_heavy_densities`), one maximum-likelihood density shared by all other blocks; plus the
    log-probability of the labels at their clusters' shares (``sum m_k log(m_k / m)`` on each side, m the
    member counts). With over-dispersed counts the counts' term is a quasi-likelihood: divided by
    ``dispersion``, their variance over the Poisson variance (:func:`_merge_dispersion`). Returns
    ``(score, heavy, background density, pooling, z_min)``, ``pooling`` as :func:`_pooling` gives it.
    """
    heavy, _, _, z_min, _ = _heavy_of_blocks(observed, n_rows, n_cols, z_min, min_size, initial_density)
    sizes = np.outer(n_rows, n_cols)
    background = _light_density(observed, sizes, heavy)
    pooling = _pooling(observed, sizes, heavy)
    score = _block_log_likelihood(observed, sizes, heavy, background, pooling).sum() / dispersion
    score += sum(xlogy(m, m / m.sum()).sum() for m in (members or (n_rows, n_cols)))
    return score, heavy, background, pooling, z_min


def _merge_candidates(observed, n_own, n_other, heavy, background, pooling, z_min, min_size, members=None,
                      dispersion=1.0):
    """Pairs ``(a, b, gain)`` (arrays), a < b, of one side's clusters ranked by the score's gain from merging
    them: the pairs with a positive gain of which at least one cluster has a heavy block (merging two clusters
    without one could only create a block, and finding blocks is the mixtures' job). ``observed`` (K, L) holds
    this side's clusters along axis 0. The gain is approximate: the merged cluster's blocks are judged heavy
    against the current background density, the other blocks keep their heaviness and z_min its level, and the
    heavy blocks' densities are shrunk by the current ``pooling`` (:func:`_pooling`); the background density
    is re-estimated from the light blocks that result (a block that turns light raises it). Where none of that
    changes, the gain is exact. ``n_own``, ``n_other``: cluster sizes, ``members``: this side's member counts,
    ``dispersion``: as for :func:`_classification_score`."""
    members = n_own if members is None else members
    a, b = np.triu_indices(observed.shape[0], k=1)
    carries = heavy.any(axis=1)
    keep = carries[a] | carries[b]
    a, b = a[keep], b[keep]
    sizes = n_own[:, None] * n_other[None, :]

    def heavy_part(obs, cells, is_heavy):
        return np.where(is_heavy, _block_log_likelihood(obs, cells, True, 0.0, pooling), 0.0).sum(axis=1)

    def light_total(values, is_heavy):
        return np.where(is_heavy, 0.0, values).sum(axis=1)

    own_heavy = heavy_part(observed, sizes, heavy)
    light_observed, light_sizes = light_total(observed, heavy), light_total(sizes, heavy)
    base = xlogy(light_observed.sum(), background) - background * light_sizes.sum()
    gain = np.empty(a.shape[0])
    chunk = max(1, MERGE_CHUNK_VALUES // max(observed.shape[1], 1))
    for lo in range(0, a.shape[0], chunk):  # (pairs, L) temporaries, a bounded number of values at a time
        first, second = a[lo:lo + chunk], b[lo:lo + chunk]
        merged_observed, merged_n = observed[first] + observed[second], n_own[first] + n_own[second]
        merged_sizes = merged_n[:, None] * n_other[None, :]
        with np.errstate(divide="ignore", invalid="ignore"):
            z = (merged_observed - background * merged_sizes) / np.sqrt(background * merged_sizes)
        merged_heavy = (z >= z_min) & (merged_n[:, None] >= min_size) & (n_other[None, :] >= min_size)
        new_light_observed = (light_observed.sum() - light_observed[first] - light_observed[second]
                              + light_total(merged_observed, merged_heavy))
        new_light_sizes = (light_sizes.sum() - light_sizes[first] - light_sizes[second]
                           + light_total(merged_sizes, merged_heavy))
        new_background = np.divide(new_light_observed, new_light_sizes, out=np.zeros_like(new_light_sizes),
                                   where=new_light_sizes > 0)
        gain[lo:lo + chunk] = (
            (heavy_part(merged_observed, merged_sizes, merged_heavy) - own_heavy[first] - own_heavy[second]
             + xlogy(new_light_observed, new_background) - new_background * new_light_sizes - base) / dispersion
            + _labels_gain(members[first], members[second])
        )
    order = np.argsort(-gain, kind="stable")
    order = order[gain[order] > 0]
    return a[order], b[order], gain[order]


def _merged(values, a, b):
    """``values`` with entry b (along axis 0) added into entry a < b and removed."""
    out = np.delete(values, b, axis=0)
    out[a] += values[b]
    return out


def _merged_partition(observed, n, members, axis, a, b, z_min, min_size, initial_density, dispersion):
    """``(observed, n, members, scored)`` of the partition with clusters a < b of the rows (``axis`` 0) or the
    columns (1) merged; arguments as for :func:`_first_merge`."""
    merged_observed = np.moveaxis(_merged(np.moveaxis(observed, axis, 0), a, b), 0, axis)
    merged_n, merged_members = list(n), list(members)
    merged_n[axis] = _merged(n[axis], a, b)
    merged_members[axis] = _merged(members[axis], a, b)
    scored = _classification_score(merged_observed, *merged_n, z_min, min_size, initial_density, merged_members,
                                   dispersion)
    return merged_observed, merged_n, merged_members, scored


def _first_merge(observed, n, members, scored, z_min, min_size, initial_density, dispersion):
    """The first merge of clusters a < b of the rows (axis 0) or the columns (axis 1), in the order of
    :func:`_merge_candidates`, that raises the exact classification score and leaves a heavy block:
    ``(axis, a, b, merged observed, merged n, merged members, merged scored)``, or None if there is none.
    ``observed``, ``n = [n_rows, n_cols]`` (sizes), ``members`` (member counts, likewise) and ``dispersion``
    as for :func:`_classification_score`, ``scored`` what it returns for them."""
    score, heavy, background, pooling, z_level = scored
    if not heavy.any():
        return None
    for axis in (0, 1):
        for a, b, _ in zip(*_merge_candidates(np.moveaxis(observed, axis, 0), n[axis], n[1 - axis],
                                              np.moveaxis(heavy, axis, 0), background, pooling, z_level,
                                              min_size, members[axis], dispersion)):
            merged = _merged_partition(observed, n, members, axis, a, b, z_min, min_size, initial_density,
                                       dispersion)
            if merged[3][0] > score and merged[3][1].any():
                return axis, a, b, *merged
    return None


class _ProfileSums(NamedTuple):
    """One side's clusters summed for :func:`_profile_log_likelihood`, from their items' counts ``x_il`` over the
    other side's L clusters (the features) and totals ``t_i``; items without counts left out. For feature f
    taken first, feature f is read against the items' totals and every other feature l against ``t_i - x_if``
    (their rest).

    ``sums`` (K, L): sum x_il; ``squares`` (K, L, L): [k, f, l] sum x_il^2 / (t_i - x_if) over items with a
    rest, and on the diagonal sum x_if^2 / t_i; ``exposure``, ``log_exposure``, ``counted`` (K, L): sum, sum of
    logs and number of the items' rests ``t_i - x_if`` (> 0); ``total``, ``log_total``, ``items`` (K,): the
    same of the totals.
    """

    sums: np.ndarray
    squares: np.ndarray
    exposure: np.ndarray
    log_exposure: np.ndarray
    counted: np.ndarray
    total: np.ndarray
    log_total: np.ndarray
    items: np.ndarray


def _profile_sums(aggregated, position, n_clusters):
    """:class:`_ProfileSums` of items with counts ``aggregated`` (n, L) in clusters ``position`` (n,)."""
    aggregated = np.asarray(aggregated, dtype=np.float64)
    totals = aggregated.sum(axis=1)
    on = totals > 0
    aggregated, position, totals = aggregated[on], position[on], totals[on]
    membership = sp.csr_matrix((np.ones(position.shape[0]), (position, np.arange(position.shape[0]))),
                               shape=(n_clusters, position.shape[0]))
    rest = totals[:, None] - aggregated
    has_rest = rest > 0
    inverse_rest = np.divide(1.0, rest, out=np.zeros_like(rest), where=has_rest)
    squared = aggregated ** 2
    squares = np.stack([membership @ (squared * inverse_rest[:, [f]]) for f in range(aggregated.shape[1])],
                       axis=1)
    diagonal = np.arange(aggregated.shape[1])
    squares[:, diagonal, diagonal] = membership @ (squared / totals[:, None])
    log_rest = np.log(np.where(has_rest, rest, 1.0))
    return _ProfileSums(
        membership @ aggregated, squares, membership @ rest, membership @ log_rest,
        membership @ has_rest.astype(np.float64), membership @ totals, membership @ np.log(totals),
        np.asarray(membership.sum(axis=1)).ravel(),
    )


def _profile_log_likelihood(sums):
    """The items' Gaussian pseudo-likelihood (variance ``phi mu``, Poisson's times a dispersion) of clusters with
    :class:`_ProfileSums` ``sums`` (leading axes ...), with each feature f read first: ``sum_l -(n_l log 2 pi
    phi_l + P_l / phi_l + sum_i log mu_il) / 2``, mu_il = e_il p_l, e_il the exposure (the item's total for
    feature f, its rest for the others), p_l the share ``sum x_il / sum e_il``, P_l Pearson's statistic
    ``sum (x_il - mu_il)^2 / mu_il`` and phi_l its maximum-likelihood dispersion ``P_l / n_l``, at least 1
    (multinomial noise is the least there is). Features without counts add nothing. Returns (..., L): [..., f]
    with feature f first."""
    is_first = np.eye(sums.sums.shape[-1], dtype=bool)

    def by_first(first, rest):  # (..., L first, L feature)
        return np.where(is_first, first[..., None, None], rest[..., :, None])

    exposure = by_first(sums.total, sums.exposure)
    counted = by_first(sums.items, sums.counted)
    observed = sums.sums[..., None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        share = observed / exposure
        pearson = sums.squares / share - observed
        dispersion = np.maximum(pearson / counted, 1.0)
        terms = -(counted * np.log(2 * np.pi * dispersion) + pearson / dispersion
                  + by_first(sums.log_total, sums.log_exposure) + counted * np.log(share)) / 2
    return np.where(observed > 0, terms, 0.0).sum(axis=-1)


def _profile_merge(aggregated, position, members):
    """The merge of one side's clusters that its items' profiles call one population by the widest margin:
    ``(a, b)``, a < b, or None. ``aggregated`` (n, L): the labelled items' counts over the other side's
    clusters, ``position`` (n,): their clusters, 0 .. K-1; ``members`` (K,): the clusters' member counts.

    Every pair is screened by a Gaussian pseudo-likelihood that needs only the clusters' sums
    (:func:`_profile_screen`); the ``PROFILE_MERGE_CANDIDATES`` closest pairs are judged by their items' counts
    (:func:`_sequential_merge_margin`), and the best of those that gains merges. Two clusters of which only
    one has counts in a feature are not one population, nor are two without counts."""
    margin, a, b = _profile_screen(aggregated, position, members)
    aggregated = np.asarray(aggregated, dtype=np.float64)
    best, best_margin = None, 0.0
    for candidate in np.argsort(-margin, kind="stable")[:PROFILE_MERGE_CANDIDATES]:
        if not margin[candidate] > -np.inf:
            break
        first, second = a[candidate], b[candidate]
        judged = _sequential_merge_margin(aggregated[position == first], aggregated[position == second])
        if judged > best_margin:
            best, best_margin = (int(first), int(second)), judged
    return best


def _profile_screen(aggregated, position, members):
    """Every pair (a, b), a < b, of one side's clusters screened for a merge by profile (arguments as for
    :func:`_profile_merge`): ``(margin, a, b)``, each (K (K - 1) / 2,), the margin -inf for a pair with a
    feature only one of them has counts in, or without counts.

    The margin: the labels' gain (``m log m`` of the merged cluster less its parts') plus the parameters saved
    (two per feature, less one, at ``log(m) / 2`` each, m the pair's items: BIC), less the items' likelihood
    lost (:func:`_profile_log_likelihood`, at the feature read first that fits best: for each cluster and for
    the pair). A Gaussian on Poisson's variance times a dispersion per feature, computed from the clusters'
    sums, so every pair costs O(L^2); it ranks pairs well but is too symmetric for a skewed population: an
    unequal cut of one cell type along its genes' noise (a compact low part, a spread tail) fits its two parts
    better than their union (docs/scale.md)."""
    n_clusters = members.shape[0]
    a, b = np.triu_indices(n_clusters, k=1)
    margin = np.empty(a.shape[0])
    if a.size == 0:
        return margin, a, b
    sums = _profile_sums(aggregated, position, n_clusters)
    chunk = max(1, MERGE_CHUNK_VALUES // sums.sums.shape[1] ** 2)  # (chunk, L, L) temporaries at a time

    def best_fit(index):
        return _profile_log_likelihood(_ProfileSums(*(value[index] for value in sums))).max(axis=-1)

    own = np.concatenate([best_fit(slice(lo, lo + chunk)) for lo in range(0, n_clusters, chunk)])
    for lo in range(0, a.shape[0], chunk):
        first, second = a[lo:lo + chunk], b[lo:lo + chunk]
        pair = _ProfileSums(*(value[first] + value[second] for value in sums))
        loss = own[first] + own[second] - _profile_log_likelihood(pair).max(axis=-1)
        with np.errstate(divide="ignore"):
            saved = (2 * (pair.sums > 0).sum(axis=1) - 1) / 2 * np.log(pair.items)
        one_sided = ((sums.sums[first] > 0) != (sums.sums[second] > 0)).any(axis=1)
        margin[lo:lo + chunk] = np.where(one_sided | (pair.items == 0), -np.inf,
                                         _labels_gain(members[first], members[second]) + saved - loss)
    return np.where(np.isnan(margin), -np.inf, margin), a, b


def _labels_gain(first, second):
    """What merging clusters of ``first`` and ``second`` members gains in the labels' log-likelihood at their
    clusters' shares: ``m log m`` of the merged cluster less its parts'."""
    return xlogy(first + second, first + second) - xlogy(first, first) - xlogy(second, second)


def _sequential_merge_margin(first, second):
    """How much merging two clusters gains, judged by their items' counts ``first`` (m1, L) and ``second``
    (m2, L) over the other side's clusters, under a generalized Dirichlet-multinomial
    (``conjoined._beta_binomial``: each feature a beta-binomial given what the features before it leave, fitted
    within each cluster and within the pair), the features read in the order of the spread of the pair's
    items' shares weighted by their totals, ``sum_i (x_il - t_i p_l)^2 / t_i``, largest first. Items without
    counts say nothing and are left out. Positive: one population.

    Two clusters against one population, by BIC. The two differ from one population only in the features where
    their separate fits gain more than the two parameters each such feature costs (``log m``, m the items);
    elsewhere they share the pair's fit. In those features, item i's log-likelihood under cluster k's fits less
    under the pair's is ``d_ik``, and ``w_k`` is cluster k's share of the items. The two clusters' score is a
    classification likelihood in which each item pays for its label only as far as its counts resolve its
    share: ``sum_i [c_i + (1 - r_i) (u_i - c_i)]``, with ``c_i = log w_z + d_iz`` (its own cluster z: the
    classification likelihood), ``u_i = log(w_1 exp(d_i1) + w_2 exp(d_i2))`` (the mixture likelihood, which
    charges an item that fits both clusters alike nothing for its label) and ``r_i`` its credibility, the
    share of its observed shares' variance that is its own share's rather than the counts' noise,
    ``n tau / (1 + n tau)`` (n its trials, tau the pair's intra-cluster correlation ``1 / (a + b + 1)``),
    averaged over those features. The margin: their parameters and the weight (``(|D| + 1/2) log m``, D those
    features) less that score.

    Why both likelihoods. A deep item's label is charged in full, as in a classification likelihood: one
    population cut along its noise fits its two halves better, but its deep items near the cut fit both
    halves alike, and their labels' cost joins the halves (by the mixture likelihood alone, four cell types cut
    in two at 23,226 x 5,053 stayed apart, their halves differing by 1-3 nats beyond the parameters). A
    shallow item's counts cannot tell its cluster, whatever the clusters are: charged for its label, it made
    clusters of many short documents merge on their labels alone (20 Newsgroups with a multinomial likelihood on
    both sides: 24 x 10 clusters down to 2 x 2, document NMI 0.386 -> 0.173), and two populations whose items
    were half shallow merge.

    Feature by feature, because the two populations may share their parameters in the features where they agree:
    charged for separate parameters in every feature, a pair that differs in one or two features would have its
    merge paid for by all the others (on pbmc68k_reduced, two dendritic clusters of 85 and 65 cells that differ
    by 75 and 81 nats in two of 44 gene clusters; on over-dispersed draws whose mixtures were not tempered, cell
    types of 8 and 9 cells joined to others).

    A beta share per feature fits a skewed population, and cutting one population gains at most about the
    labels' cost (with each part fitted perfectly, exactly that). The order: in a composition, an item's share
    of one feature moves its shares of all the others; read first, the feature whose share varies most takes
    its variation, and the features after it are read against what it leaves, so that this variation is not
    counted again in each (it would hide two populations' difference in another feature as over-dispersion)."""
    first, second = first[first.sum(axis=1) > 0], second[second.sum(axis=1) > 0]
    both = np.vstack([first, second])
    totals = both.sum(axis=1, keepdims=True)
    spread = ((both - totals * (both.sum(axis=0) / totals.sum())) ** 2 / totals).sum(axis=0)
    x, trials = in_sequence(both, np.argsort(-spread, kind="stable"))
    m, m1 = both.shape[0], first.shape[0]
    fits = [beta_binomial_fits(x[part], trials[part]) for part in (slice(None, m1), slice(m1, None), slice(None))]
    apart = fits[0][0] + fits[1][0] - fits[2][0] > np.log(m)
    penalty = (apart.sum() + 0.5) * np.log(m)
    if not apart.any():
        return penalty
    x, trials = np.ascontiguousarray(x[:, apart]), np.ascontiguousarray(trials[:, apart])
    first_fit, second_fit, pair_fit = (item_log_likelihoods(x, trials, log_a[apart], log_b[apart]).sum(axis=1)
                                       for _, log_a, log_b in fits)
    by_cluster = np.column_stack([np.log(m1 / m) + first_fit, np.log1p(-m1 / m) + second_fit]) - pair_fit[:, None]
    classification = by_cluster[np.arange(m), (np.arange(m) >= m1).astype(int)]
    mixture = np.logaddexp(by_cluster[:, 0], by_cluster[:, 1])
    tau = 1.0 / (np.exp(fits[2][1][apart]) + np.exp(fits[2][2][apart]) + 1.0)
    credibility = (trials * tau / (1.0 + trials * tau)).mean(axis=1)
    return penalty - (classification + (1.0 - credibility) * (mixture - classification)).sum()


def _cluster_sizes(X, labels, ids, axis, likelihood):
    """Sizes (len(ids),) of one side's clusters ``ids`` (rows: ``axis`` 0, columns: 1) in the block model: their
    member counts under the Poisson likelihood (items of one depth); under the multinomial likelihood their
    exposures, each cluster's total count over the mean total of the side's labelled items. With exposures,
    two clusters whose items spread their counts alike have the same block densities whatever their depths."""
    labelled = labels[labels >= 0]
    if likelihood != "multinomial":
        return np.bincount(labelled)[ids].astype(np.float64)
    totals = np.asarray(X.sum(axis=1 - axis)).ravel()[labels >= 0]
    return np.bincount(labelled, weights=totals)[ids] / totals.mean()


def _merge_dispersion(X, rows, columns, likelihoods):
    """The counts' variance over their Poisson variance in the merges' score (:func:`_classification_score`),
    when a side is read by profile (the multinomial likelihood, real counts; 1 otherwise): Pearson's statistic
    of the items' counts over the other side's clusters around their cluster's profile scaled to their own
    total, ``sum (x_il - t_i p_kl)^2 / (t_i p_kl)``, over its degrees of freedom ``(n - K)(L - 1)``, pooled
    over both sides; 1 unless the statistic exceeds its degrees of freedom by ``DISPERSION_EVIDENCE`` of its
    standard deviations under multinomial counts (``sqrt(2 df)``). It measures how far the items of one cluster differ beyond
    multinomial noise: the noise against which two clusters' blocks must be told apart. Real counts vary far
    beyond Poisson noise (on single-cell-like counts, genes of one module cut into clusters of different depths
    stayed apart, each merge losing 10-60 nats of Poisson likelihood for a few hundred of labels). Measured
    between items, not between blocks: the blocks' own dispersion (:func:`_block_dispersion`) also takes up
    whatever the background's levels do not fit, which is what the merges test."""
    if "multinomial" not in likelihoods:
        return 1.0
    statistic = degrees = 0.0
    for side, labels, other in ((X, rows, columns), (X.T, columns, rows)):
        labelled = labels >= 0
        aggregated = sp.csr_matrix(_counts_over_clusters(side, other, int(other.max()) + 1))[labelled]
        totals = np.asarray(aggregated.sum(axis=1)).ravel()
        z, _, _, sums, share = cluster_shares(aggregated, labels[labelled], totals)
        statistic += squared_residual_terms(aggregated, z, totals, share)[1].sum() - totals.sum()
        features = int((sums.sum(axis=0) > 0).sum())
        degrees += (int((totals > 0).sum()) - int((sums.sum(axis=1) > 0).sum())) * max(features - 1, 0)
    if degrees <= 0 or statistic - degrees <= DISPERSION_EVIDENCE * np.sqrt(2 * degrees):
        return 1.0
    return statistic / degrees


def _merge_clusters(X, rows, columns, z_min, min_size, likelihoods):
    """Merge clusters, one pair at a time, until no candidate merge raises the partition's classification score
    (:func:`_first_merge`, rows tried before columns) and no pair of clusters of a side read by profile is one
    population by their items' profiles (:func:`_first_profile_merge`), among the merges that leave a heavy
    block. ``likelihoods``: (rows', columns') likelihood, which sets what a cluster's size is
    (:func:`_cluster_sizes`) and which sides are read by profile (the multinomial likelihood). Returns new
    label arrays (labels -1 stay -1; a merged cluster takes the lower index), or None if nothing merged."""
    labels = [rows.copy(), columns.copy()]
    ids = [np.unique(side[side >= 0]) for side in labels]
    sets = [_indicator(side, int(side.max()) + 1)[side_ids] for side, side_ids in zip(labels, ids)]
    observed = _block_sums(X, *sets)
    members = [side_sets.sum(axis=1).astype(np.float64) for side_sets in sets]
    n = [_cluster_sizes(X, side, side_ids, axis, likelihood)
         for axis, (side, side_ids, likelihood) in enumerate(zip(labels, ids, likelihoods))]
    initial_density = _overall_density(X)
    dispersion = _merge_dispersion(X, rows, columns, likelihoods)
    scored = _classification_score(observed, *n, z_min, min_size, initial_density, members, dispersion)
    merged_any = False
    while True:
        merge = _first_merge(observed, n, members, scored, z_min, min_size, initial_density, dispersion)
        if merge is None:
            merge = _first_profile_merge(X, labels, ids, members, likelihoods, observed, n, scored, z_min,
                                         min_size, initial_density, dispersion)
        if merge is None:
            break
        axis, a, b, observed, n, members, scored = merge
        labels[axis][labels[axis] == ids[axis][b]] = ids[axis][a]
        ids[axis] = np.delete(ids[axis], b)
        merged_any = True
    return (labels[0], labels[1]) if merged_any else None


def _first_profile_merge(X, labels, ids, members, likelihoods, observed, n, scored, z_min, min_size,
                         initial_density, dispersion):
    """:func:`_profile_merge` on each side read by profile, rows first, when it leaves a heavy block: as
    :func:`_first_merge` returns, or None."""
    if not scored[1].any():
        return None
    for axis, likelihood in enumerate(likelihoods):
        if likelihood != "multinomial":
            continue
        own, other = labels[axis], labels[1 - axis]
        counts = _counts_over_clusters(X if axis == 0 else X.T, other, int(other.max()) + 1)
        aggregated = counts[own >= 0][:, ids[1 - axis]]
        pair = _profile_merge(aggregated, np.searchsorted(ids[axis], own[own >= 0]), members[axis])
        if pair is None:
            continue
        merged = _merged_partition(observed, n, members, axis, *pair, z_min, min_size, initial_density,
                                   dispersion)
        if merged[3][1].any():
            return axis, *pair, *merged
    return None


def _em_rounds(X, rows, columns, z_min, min_size, n_rounds, likelihoods):
    """Up to ``n_rounds`` rounds of EM on the rows given the columns, then on the columns given the rows; stops
    early when a round moves nothing. ``likelihoods``: (rows', columns') likelihood, "poisson"
    (:func:`_block_model_em`) or "multinomial" (:func:`_profile_em`). Returns new label arrays."""
    for _ in range(n_rounds):
        before = rows, columns
        for axis, (side, likelihood) in enumerate(zip(("rows", "columns"), likelihoods)):
            heavy = _heavy_of_partition(X, rows, columns, z_min, min_size)[2]
            if not heavy.any():
                break
            if side == "rows":
                other, matrix, own, heavy_side = columns, X, rows, heavy
            else:
                other, matrix, own, heavy_side = rows, X.T, columns, heavy.T
            n_other_clusters = heavy_side.shape[1]
            keep = other >= 0
            aggregated = _counts_over_clusters(matrix, other, n_other_clusters)
            if likelihood == "multinomial":
                refined = _profile_em(aggregated, own, _block_profiles(X, rows, columns, z_min, min_size, axis))
            else:
                n_other = np.bincount(other[keep], minlength=n_other_clusters).astype(np.float64)
                # clusters beyond the current maximum label have no block row yet: pad heavy to every label
                n_own = max(int(own.max()) + 1, heavy_side.shape[0])
                padded = np.zeros((n_own, n_other_clusters), bool)
                padded[: heavy_side.shape[0]] = heavy_side
                refined = _block_model_em(aggregated, own, n_other, padded)
            if side == "rows":
                rows = refined
            else:
                columns = refined
        if np.array_equal(before[0], rows) and np.array_equal(before[1], columns):
            break
    return rows, columns


def _refined(X, rows, columns, z_min, min_size, n_rounds, likelihoods):
    """:func:`_em_rounds` from (rows, columns), or (rows, columns) themselves when the rounds leave no cluster on
    a side or fewer heavy blocks than they started with."""
    start = _heavy_of_partition(X, rows, columns, z_min, min_size)[2].sum()
    new_rows, new_columns = _em_rounds(X, rows, columns, z_min, min_size, n_rounds, likelihoods)
    if new_rows.max() < 0 or new_columns.max() < 0:
        return rows, columns
    if _heavy_of_partition(X, new_rows, new_columns, z_min, min_size)[2].sum() < start:
        return rows, columns
    return new_rows, new_columns


def refine_partition(X, row_labels, column_labels, *, z_min=None, min_size=None, n_rounds=10,
                     row_likelihood="poisson", column_likelihood="poisson"):
    """Refine a row and a column partition under the block model behind the significance rule.

    The model: every cell of a heavy block (k, l) (as the significance rule finds them) has Poisson counts at
    that block's density, every other cell at one shared background density. The heavy blocks' densities are
    pooled by empirical Bayes: one shared density when they differ by no more than Poisson noise, their own
    when they clearly differ, in between otherwise (a small block's density from its few cells is too noisy to
    decide its borderline rows alone). The background here is uniform: the cluster levels that the
    significance rule gives the background of real data (module docstring) are not part of this model, so on
    such data the refinement sees many blocks of highly expressed genes as heavy. That holds for a side read
    with the Poisson likelihood (items of one depth). A side read with the multinomial likelihood (items of
    any depth: genes, cells, documents) is read by profile instead: in step 1, each item by its profile over
    the other side's clusters, against its cluster's profile under the significance rule's model with its
    levels (:func:`_block_profiles`; a deep gene and a shallow one of one pattern have the same); in step 2,
    each cluster weighs in by its exposure, its total count over the mean item's, instead of its member count
    (:func:`_cluster_sizes`), so that two clusters whose items spread their counts alike have the same block
    densities whatever their depths. Three steps:

    1. Rows are re-assigned by a soft EM of their memberships given the column partition (mixing weights, block
       and background densities re-estimated), hardened by their most probable cluster, then columns likewise
       given the rows, for up to ``n_rounds`` rounds or until nothing moves. This is the plug-in version of
       classifying each row by its likelihood ratio against the background with the prior odds of the
       clusters: a DP mixture's posterior summary leaves borderline rows of a small block out more often than
       the block's own densities would (a small cluster's rates are uncertain and its prior weight is small).
       Rounds that leave fewer heavy blocks than they started from are not kept (EM can empty a small cluster;
       adding blocks is the mixtures' job, not this step's).
    2. Clusters of one side are merged, a pair at a time, while a candidate merge raises the classification
       log-likelihood: the counts' likelihood at step 1's densities (the heavy blocks' pooled, one background)
       plus the log-probability of the labels at their clusters' shares, the heavy blocks re-found by the
       significance test after each merge. A mixture can set apart a handful of background rows whose counts
       are high by chance; their block then passes the significance test, which does not know that its rows
       were picked for their high counts. The labels' term charges for that choice. The pooled densities matter
       when both sides are over-split: at their own densities, clusters cut from one block would each fit their
       noise and stay apart. Candidates are the merges that involve a cluster with a heavy block and gain by an
       approximate score (the other blocks' heaviness and the pooling held, the background re-estimated), each
       checked exactly; at least one heavy block must remain. When a side is read by profile (real counts),
       the counts' term is a quasi-likelihood, divided by the items' over-dispersion within their clusters
       (:func:`_merge_dispersion`; one number for the merges of both sides): against Poisson noise, clusters
       of one pattern whose blocks differ by the noise of over-dispersed counts never merged. When no such
       merge is left, two clusters of a side read by profile also merge when their items' profiles are one
       population's (:func:`_profile_merge`: the items' counts under a generalized Dirichlet-multinomial,
       each feature's share and over-dispersion fitted in each cluster and in the pair; the two clusters'
       labels charged to each item as far as its counts resolve its share, against the parameters saved),
       and the merges by score resume: a mixture can cut a cell type
       in two along the noise of a few deep genes, and the halves' blocks then differ far beyond the noise
       within all clusters, but their cells remain one population.
    3. If anything merged, step 1 again from the merged partition, and step 2 again after it, up to
       ``MERGE_PASSES`` times, until nothing merges: the EM rounds after the merges can move items so that a pair
       the merges left now gains.

    Labels -1 (items set aside) stay -1; cluster indices are kept (a merged cluster takes the lower of the two),
    so a cluster may end up empty.

    Parameters
    ----------
    X : array-like or sparse matrix of counts, shape (n_rows, n_cols)
    row_labels, column_labels : int arrays (n_rows,), (n_cols,)
    z_min, min_size : as for the significance rule of :func:`extract_biclusters`
    n_rounds : int >= 0
        Rounds of step 1 (0: no EM; the merges still apply).
    row_likelihood, column_likelihood : {"poisson", "multinomial"}, default="poisson"
        How each side is read (above): the likelihood of the side's DP mixture.

    Returns
    -------
    (row_labels, column_labels) : int64 arrays
    """
    X = check_matrix(X, name="X", counts=True)
    X = sp.csr_matrix(X, dtype=np.float64)
    row_labels = _check_labels(row_labels, X.shape[0], "row_labels").astype(np.int64)
    column_labels = _check_labels(column_labels, X.shape[1], "column_labels").astype(np.int64)
    z_min, min_size = check_thresholds(z_min, min_size)
    n_rounds = check_int(n_rounds, "n_rounds", minimum=0)
    likelihoods = (row_likelihood, column_likelihood)
    for name, likelihood in zip(("row_likelihood", "column_likelihood"), likelihoods):
        if likelihood not in REFINE_LIKELIHOODS:
            raise ValueError(f"{name} must be one of {REFINE_LIKELIHOODS}, got {likelihood!r}")
    rows, columns = _refined(X, row_labels, column_labels, z_min, min_size, n_rounds, likelihoods)
    for _ in range(MERGE_PASSES):
        merged = _merge_clusters(X, rows, columns, z_min, min_size, likelihoods)
        if merged is None:
            break
        rows, columns = _refined(X, *merged, z_min, min_size, n_rounds, likelihoods)
    return rows, columns


def _largest_shares(n_ik):
    """Bool (K, n): item i is in topic k when k holds the largest share of its tokens, n_ik / n_i (ties: several
    topics; the authors' ``which(x == max(x))`` on ``x / sum(x)``); an item without tokens is in none (their
    0 / 0)."""
    n_ik = np.asarray(n_ik, dtype=np.float64)
    return ((n_ik == n_ik.max(axis=1, keepdims=True)) & (n_ik.sum(axis=1) > 0)[:, None]).T


def _paper_code_rule(X, counts):
    row_sets = _largest_shares(counts.n_ik)
    column_sets = _largest_shares(counts.n_jl)
    n_cells = np.outer(row_sets.sum(axis=1), column_sets.sum(axis=1))
    non_empty = n_cells > 0
    block_mean = np.zeros(n_cells.shape)
    block_mean[non_empty] = _block_sums(X, row_sets, column_sets)[non_empty] / n_cells[non_empty]
    keep = non_empty & (block_mean >= _mean_plus_sd(block_mean[non_empty]))
    return _assemble(row_sets, column_sets, keep, block_mean)


def _dt2b_rule(counts):
    n_kl, n_ik, n_jl = (np.asarray(a, dtype=np.float64) for a in counts)
    row_sets = (n_ik >= _mean_plus_sd(n_ik)).T
    column_sets = (n_jl >= _mean_plus_sd(n_jl)).T
    return _assemble(row_sets, column_sets, n_kl >= _mean_plus_sd(n_kl), n_kl)


LARGEST_Z_MIN = math.sqrt(sys.float_info.max)


def check_thresholds(z_min, min_size):
    """``(z_min, min_size)`` of the significance rule, checked: z_min None (its default level) or a number >= 0,
    min_size None (``DEFAULT_MIN_SIZE``) or an integer >= 1."""
    z_min = None if z_min is None else check_positive(z_min, "z_min", allow_zero=True)
    if z_min is not None and z_min > LARGEST_Z_MIN:
        raise ValueError(f"z_min must be at most {LARGEST_Z_MIN:.3g} (a block must exceed its background by "
                         f"z_min ** 2 counts), got {z_min!r}")
    min_size = DEFAULT_MIN_SIZE if min_size is None else check_int(min_size, "min_size", minimum=1)
    return z_min, min_size


def check_background(background):
    """The significance rule's ``background``, checked: None ("auto") or one of ``BACKGROUNDS``."""
    if background is None:
        return "auto"
    if background not in BACKGROUNDS:
        raise ValueError(f"background must be one of {BACKGROUNDS}, got {background!r}")
    return background


def _check_counts(X, counts):
    n_kl, n_ik, n_jl = (np.asarray(a) for a in counts)
    if n_kl.ndim != 2 or n_ik.ndim != 2 or n_jl.ndim != 2:
        raise ValueError(
            "counts must hold 2-d arrays n_kl (K_r, K_c), n_ik (n_rows, K_r), n_jl (n_cols, K_c)"
        )
    if n_ik.shape != (X.shape[0], n_kl.shape[0]):
        raise ValueError(
            f"counts.n_ik has shape {n_ik.shape}; expected (n_rows, K_r) = {(X.shape[0], n_kl.shape[0])}"
        )
    if n_jl.shape != (X.shape[1], n_kl.shape[1]):
        raise ValueError(
            f"counts.n_jl has shape {n_jl.shape}; expected (n_cols, K_c) = {(X.shape[1], n_kl.shape[1])}"
        )


def _check_labels(labels, n, name):
    if labels is None:
        raise ValueError(f"rule 'significance' needs {name} (the partition the blocks are made of)")
    labels = np.asarray(labels)
    if labels.shape != (n,) or not np.issubdtype(labels.dtype, np.integer):
        raise ValueError(f"{name} must be an integer array of shape ({n},), got {labels.dtype} {labels.shape}")
    if labels.min() < -1 or labels.max() < 0:
        raise ValueError(f"{name} must hold cluster indices >= 0 (or -1 for items set aside)")
    return labels


def extract_biclusters(
    X,
    counts,
    *,
    rule="significance",
    row_labels=None,
    column_labels=None,
    z_min=None,
    min_size=None,
    background=None,
):
    """Biclusters by one of the rules of the module docstring.

    Parameters
    ----------
    X : array-like or sparse matrix of counts, shape (n_rows, n_cols)
        The matrix the tokens come from.
    counts : TokenCounts
        Token counts of the allocation (n_kl (K_r, K_c), n_ik (n_rows, K_r), n_jl (n_cols, K_c)).
    rule : {"significance", "paper-code", "dt2b"}
    row_labels, column_labels : int arrays (n_rows,), (n_cols,), rule "significance" only (required there)
        The row and column partitions (-1: set aside; such items are in no block and join no bicluster).
    z_min : float, rule "significance" only
        Minimum z-score of a heavy block (Poisson, or over-dispersed where the levelled background finds the
        counts so). Default: 3, or the 1% family-wise level if higher. Also the
        least likelihood-ratio z-score of an outsider joining a block; the family-wise level over the outsiders
        tested applies when higher, whatever ``z_min``.
    min_size : int, rule "significance" only
        Minimum rows and columns of a heavy block. Default 2.
    background : {"auto", "uniform"}, rule "significance" only
        "auto" (default): one background density unless the light blocks demand a level for each row and column
        cluster (module docstring); "uniform": always one density, the paper's model.

    Returns
    -------
    Biclusters
        Strongest first; empty arrays (0 biclusters) when nothing passes.
    """
    if rule not in RULES:
        raise ValueError(f"rule must be one of {RULES}, got {rule!r}")
    given = {
        "row_labels": row_labels,
        "column_labels": column_labels,
        "z_min": z_min,
        "min_size": min_size,
        "background": background,
    }
    used = {
        "significance": ("row_labels", "column_labels", "z_min", "min_size", "background"),
        "paper-code": (),
        "dt2b": (),
    }[rule]
    unused = [name for name, value in given.items() if value is not None and name not in used]
    if unused:
        raise ValueError(
            f"rule {rule!r} does not use {', '.join(unused)}; it takes: {', '.join(used) or 'nothing'}"
        )
    X = check_matrix(X, name="X", counts=True)
    X = X if sp.issparse(X) else sp.csr_matrix(X)
    _check_counts(X, counts)
    if rule == "significance":
        row_labels = _check_labels(row_labels, X.shape[0], "row_labels")
        column_labels = _check_labels(column_labels, X.shape[1], "column_labels")
        z_min, min_size = check_thresholds(z_min, min_size)
        background = check_background(background)
        return _significance_rule(X, row_labels, column_labels, z_min, min_size, levels=background == "auto")
    if rule == "paper-code":
        return _paper_code_rule(X, counts)
    return _dt2b_rule(counts)
