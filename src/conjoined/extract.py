"""From token counts to biclusters: CDP's parameters (paper eq. 1-3) and three extraction rules.

A bicluster is a set of rows and a set of columns, found from a (row topic k, column topic l) pair, or under
the significance rule from several pairs of one lift joined (``row_clusters``, ``column_clusters``). The rules:

``"significance"`` (default)
    Works on the row and column partitions (``row_labels``, ``column_labels``: the estimator's point estimates)
    and the counts themselves. A block (k, l), the rows labelled k times the columns labelled l, is heavy when
    its total ``O`` stands at least ``z_min`` standard deviations above ``E``, its expected total at its
    background density (the density of the cells outside the heavy blocks; :mod:`conjoined.background`).
    Blocks narrower than ``min_size`` rows or columns are not biclusters. By default ``z_min`` is 3, raised to
    the one-sided 1% family-wise level (Bonferroni) over the blocks tested when there are more than about 7 of
    them. ``strength = (O - E) / sqrt(E)``, or ``(O - E) / sqrt(dispersion E)`` with over-dispersed counts.

    The background is one density, the paper's model, unless the light blocks demand more: a level for each row
    cluster and each column cluster, blocks' totals over-dispersed, and a depth for each item, each fitted by
    empirical Bayes and taken only on five sigma of evidence (:mod:`conjoined.background`, which also finds the
    heavy blocks). Real data need all three; on the partitions CDP finds for the simulation cases the
    background stays uniform and Poisson, and depths stay 1.

    A row "favours" a heavy block when its count in the block's columns is likelier at the block's density
    ``rho`` than at ``rho0_kl`` (log-likelihood ratio ``O_i log(rho / rho0_kl) - |cols| (rho - rho0_kl) > 0``;
    with depths, at its own background raised by the block's lift over its members' backgrounds); columns
    likewise. A heavy block most of whose own rows or columns do not favour it was made heavy by a few
    stray members and is dropped. So is a block beside a denser bicluster on its columns (another row
    cluster's standing block on the same column cluster, at a lift that is not one with its own: the Pearson
    test of the joins below) that is not heavy without one of its rows, and likewise for columns beside a
    denser bicluster on its rows (blocks judged from the highest lift down, each against the denser ones still
    standing; a side of one member is not tested). Such a block is most often the rest of a cluster made heavy
    by one member of the denser block that the partition left out, and reported as a bicluster of its own it
    covers the denser block's columns a second time (case 2's background rows over the small block's columns,
    with one of the small block's rows among them). The test also drops a block beside a denser one that is
    heavy by so little that no row can be spared (z below about ``z_min / sqrt(1 - 1/n)`` with n like rows):
    beside a denser bicluster a block needs that much more evidence. Where nothing denser is beside it, a block
    that rests on a few rows is kept: it can be all that is left of a small block whose rows a mixture merged
    into a larger cluster. Otherwise its bicluster holds its own rows and columns plus the outsiders that
    belong to it too: an outsider in cluster k' favours the block at its own background ``rho0_k'l`` raised by
    the block's lift ``rho / rho0_kl``, and its count over the block's other side stands above its
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
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp
from scipy.special import chdtrc, xlogy
from scipy.stats import norm

from ._validation import check_labels, check_matrix, check_positive
from .background import FAMILY_ERROR, _backgrounds, _block_sums, _has_levels, _heavy_against, check_thresholds

__all__ = ["BACKGROUNDS", "RULES", "Biclusters", "TopicParameters", "extract_biclusters", "topic_parameters"]

RULES = ("significance", "paper-code", "dt2b")
# The significance rule's background: cluster levels when the light blocks demand them, or always one density.
BACKGROUNDS = ("auto", "uniform")


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


def _block_total(X, rows, columns):
    return float(rows.astype(np.float64) @ X @ columns.astype(np.float64))


def _signed_root_deviance(counts, expected, shapes):
    """Likelihood-ratio z-scores of ``counts`` against means ``expected`` (broadcastable, expected > 0): the
    signed square root of the deviance, positive for an excess; negative binomial of shape ``shapes`` where it
    is finite (an item's count around its uncertain depth, :func:`background._item_depths`), Poisson where it is inf.
    Unlike ``(counts - expected) / sqrt(expected)`` it does not overstate an excess of a small skewed count,
    which matters for the many single rows and columns tested as outsiders (heavy blocks, whole blocks of
    counts, keep the simpler score)."""
    deviance = 2 * (xlogy(counts, counts / expected) - (counts - expected))
    finite = np.isfinite(shapes)
    if finite.any():
        r = np.where(finite, shapes, 1.0)
        negative_binomial = 2 * (xlogy(counts, counts / expected)
                                 - (counts + r) * np.log((counts + r) / (expected + r)))
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
        ratio = np.where(finite,
                         counts * np.log(lift) - (counts + r) * np.log1p(expected * (lift - 1) / (expected + r)),
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
    their shapes (:func:`background._item_depths`). A block that fails was made heavy by a few stray members."""
    row_index, column_index = np.flatnonzero(rows), np.flatnonzero(columns)
    block = X[row_index][:, column_index]
    lifts = _lifts(block.sum(), rho0, rows, columns, depths)
    sides = ((np.asarray(block.sum(axis=1)).ravel(), column_index.size, row_index),
             (np.asarray(block.sum(axis=0)).ravel(), row_index.size, column_index))
    return all(lift > 1 and _favouring(counts, rho0 * n_other * depth[members], lift, shape[members]).mean() >= 0.5
               for lift, (counts, n_other, members), depth, shape in zip(lifts, sides, depths, shapes))


def _heavy_without_any_one(counts, expected, dispersion, z_min):
    """Whether a heavy block stays heavy (:func:`background._heavy_against`: ``z >= z_min`` and an excess of at
    least ``z_min ** 2`` counts) without any one of its members on one side: ``counts`` (m,), each
    member's count over the block's other side, ``expected`` (m,) its expected count at the background (summing
    to the heavy test's expected total), ``dispersion`` the block total's variance over the Poisson variance.
    A side of one member is not tested (nothing would be left: ``min_size`` 1 let such blocks in)."""
    if counts.size < 2:
        return True
    heavy, _ = _heavy_against(counts.sum() - counts, expected.sum() - expected, z_min, True, 1.0, dispersion)
    return bool(heavy.all())


def _without_strays(standing, observed, expected, dispersion, item_counts, item_depths, labels, z_min):
    """``standing`` (K_r, K_c) without the blocks beside a denser bicluster that rest on one item (module
    docstring): a block with a standing block of higher lift on its column cluster (its row cluster), not one lift
    with its own (Pearson's statistic of the two beyond the two-sided level of ``z_min``, as
    :func:`_joined_blocks` tests it), must stay heavy without any one of its rows (its columns)
    (:func:`_heavy_without_any_one`). Blocks are judged from the highest lift down, each against the denser
    blocks still standing.

    ``observed``, ``expected``, ``dispersion`` (K_r, K_c): the blocks' totals, expected totals at the background
    and dispersions; ``item_counts``: ``(rows' counts over each column cluster (n_rows, K_c), columns' over each
    row cluster (n_cols, K_r))``; ``item_depths``: their depths, likewise; ``labels``: ``(row labels, column
    labels)``, -1 in no block."""
    level = 2 * norm.sf(z_min)
    terms = _one_lift_terms(observed, expected, dispersion)
    with np.errstate(divide="ignore", invalid="ignore"):
        lift = observed / expected
    kept = standing.copy()
    for k, l in sorted(np.argwhere(standing).tolist(), key=lambda kl: -lift[kl[0], kl[1]]):
        # side 0: the rows, against the blocks on column cluster l; side 1: the columns, on row cluster k
        for line, own_cluster, other_cluster, counts, depths, own_labels in (
                ((slice(None), l), k, l, item_counts[0], item_depths[0], labels[0]),
                ((k, slice(None)), l, k, item_counts[1], item_depths[1], labels[1])):
            statistic = _one_lift_pearson(terms[k, l] + terms[line][kept[line]])[0]
            denser = (lift[line][kept[line]] > lift[k, l]) & (chdtrc(1, statistic) <= level)
            if not denser.any():
                continue
            members = own_labels == own_cluster
            depth = depths[members, other_cluster]
            if not _heavy_without_any_one(counts[members, other_cluster], expected[k, l] * depth / depth.sum(),
                                          dispersion[k, l], z_min):
                kept[k, l] = False
                break
    return kept


def _bicluster_members(X, rows, columns, rho0, z_min, outsiders, depths):
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


def _outsider_backgrounds(labels, background_side, closed, depths):
    """For each other-side cluster l, the background density of each item's own cells over cluster l, times
    its depth there where that is above 1, and that depth's shape (inf where the depth is at most 1; ``depths``:
    ``(depths (n, L), shapes (n, L))`` of :func:`background._item_depths`): ``(backgrounds (L, n), shapes (L, n))``,
    backgrounds NaN where the item may not join a block on l: its own block there is ``closed`` (K, L), or it is
    set aside (label -1). ``background_side`` (K, L), this side's clusters along axis 0. A shallow item is judged
    at its cluster's background (:mod:`conjoined.background`)."""
    labelled = labels >= 0
    own = np.where(labelled, labels, 0)
    deeper = depths[0] > 1
    out = (background_side[own] * np.where(deeper, depths[0], 1.0)).T
    out[closed[own].T] = np.nan
    out[:, ~labelled] = np.nan
    return out, np.where(deeper, depths[1], np.inf).T


def _significance_rule(X, row_labels, column_labels, z_min, min_size, levels=True):
    """The significance rule (module docstring); ``levels``: let the background have row and column cluster
    levels, and items their depths, when the data demand them (:func:`background._cluster_levels`,
    :func:`background._item_depths`)."""
    n_rows, n_cols = X.shape
    (row_sets, column_sets, heavy, background, z, z_min, dispersion, observed, row_depths,
     column_depths, item_counts) = _backgrounds(X, row_labels, column_labels, z_min, min_size, levels)
    standing = np.zeros(heavy.shape, bool)
    for k, l in np.argwhere(heavy):
        standing[k, l] = _stands(X, row_sets[k], column_sets[l], background[k, l],
                                 (row_depths[0][:, l], column_depths[0][:, k]),
                                 (row_depths[1][:, l], column_depths[1][:, k]))
    expected = background * np.outer(row_sets.sum(axis=1), column_sets.sum(axis=1))
    standing = _without_strays(standing, observed, expected, dispersion, item_counts,
                               (row_depths[0], column_depths[0]), (row_labels, column_labels), z_min)
    # With levels, an item whose own block on l is a bicluster is in it already; tested against every other
    # block on l as well, it made near-copies of them on real data. The uniform background keeps testing it:
    # there it is what reunites one block cut into two clusters (measured on the simulation cases).
    closed = standing if _has_levels(background) else np.zeros(heavy.shape, bool)
    row_outsiders = _outsider_backgrounds(row_labels, background, closed, row_depths)
    column_outsiders = _outsider_backgrounds(column_labels, background.T, closed.T, column_depths)
    members = {}
    totals = tuple(np.asarray(X.sum(axis=axis), np.float64).ravel() for axis in (1, 0))
    for k, l in np.argwhere(standing).tolist():
        members[k, l] = _bicluster_members(
            X, row_sets[k], column_sets[l], background[k, l], z_min,
            ((row_outsiders[0][l], row_outsiders[1][l]), (column_outsiders[0][k], column_outsiders[1][k])),
            (row_depths[0][:, l], column_depths[0][:, k]))
    found = []
    for row_clusters, column_clusters in _joined_blocks(observed, expected, dispersion, standing, z_min):
        blocks = [(k, l) for k in row_clusters for l in column_clusters]
        r = _joined_members(np.array([np.logical_or.reduce([members[k, l][0] for k in row_clusters])
                                      for l in column_clusters]),
                            ~np.isfinite(row_outsiders[0][list(column_clusters)]))
        c = _joined_members(np.array([np.logical_or.reduce([members[k, l][1] for l in column_clusters])
                                      for k in row_clusters]),
                            ~np.isfinite(column_outsiders[0][list(row_clusters)]))
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
    (:func:`_bicluster_members`), and an item can stand far above its cluster's level on documents where its
    cluster is rare while being rarer there than elsewhere: on 20 Newsgroups, memory, software and mac joined the
    religion biclusters, 72 of the 322 members of the 17 biclusters were depleted in their columns. It must also
    be raised against itself, over the bicluster's own other side as labelled (its clusters' members): an item of
    two blocks, labelled with the denser, is raised over the other bicluster's columns as a whole, even where one
    of its clusters alone would not show it. Every item of the other side weighs alike. Known limit: the other
    columns include the item's own block, so an item of a wide dense block and a narrower one over little
    background stays out of the narrower (tests/test_extract.py, xfail). Leaving its own biclusters' columns out
    let noise in and still counted its other blocks against it; comparing with its lowest cluster level at the
    bicluster's lift kept most depleted members (docs/results.md, "New rows and columns, and outsiders raised
    against themselves")."""
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

    Each standing block starts as its own rectangle. Two rectangles that share a row cluster or a column cluster
    span a box (their row clusters x their column clusters); the box grows to take in every rectangle it touches,
    until it holds them whole. When all its blocks stand and share one lift over their backgrounds, its
    rectangles are joined into it, the most alike box first. One lift: Pearson's statistic of the blocks' totals
    ``observed`` (K_r, K_c) around ``lift x expected``, within the two-sided level of ``z_min`` of a chi-square
    on (blocks - 1) degrees of freedom. Each block's variance is ``lift x expected`` times its dispersion at its
    own lift: ``dispersion`` (:func:`background._block_dispersion`) holds ``1 + c rho0 h h`` at the background's
    mean, and a negative-binomial cell's excess variance grows with its mean, so a block raised ``observed /
    expected`` times has ``1 + (dispersion - 1) observed / expected``. A gene programme raised alike in three
    cell clusters of one cell type is one bicluster, not three; where its lift differs it stays apart. (Joining
    only rectangles with the same row or the same column clusters, a grid of blocks at one lift could end in a
    pinwheel of rectangles none of which can join another.)"""
    level = 2 * norm.sf(z_min)
    blocks = np.argwhere(standing)
    owner = np.full(standing.shape, -2)  # the rectangle of each standing block; -2: not standing
    owner[standing] = np.arange(len(blocks))
    terms = _one_lift_terms(observed, expected, dispersion)
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


def _one_lift_terms(observed, expected, dispersion):
    """(K_r, K_c, 6) terms of each block that, summed over blocks, :func:`_one_lift_pearson` reads (see
    :func:`_joined_blocks` for the dispersion at a block's lift); NaN where there is no background at all, so
    that nothing is one lift with such a block."""
    with np.errstate(divide="ignore", invalid="ignore"):
        raised = 1 + (dispersion - 1) * np.maximum(observed / expected, 1.0)
        return np.stack([observed, expected, observed ** 2 / (raised * expected), observed / raised,
                         expected / raised, np.ones(observed.shape)], axis=-1)


def _one_lift_pearson(sums):
    """Pearson's statistic of blocks around their pooled lift ``L = O / E``, its least over all lifts, and the
    number of blocks, from their summed ``terms`` (..., 6) of :func:`_one_lift_terms`: ``(O, E, A, B, C, n)``,
    over the blocks of ``O``, ``E``, ``O^2 / (r E)``, ``O / r``, ``E / r`` (r: a block's dispersion at its lift)
    and 1. The statistic at lift L is ``A / L - 2 B + L C``, least at ``L = sqrt(A / C)``: ``2 sqrt(A C) - 2 B``.
    NaN where ``E`` is 0."""
    observed, expected, a, b, c, n = (sums[..., i] for i in range(6))
    with np.errstate(divide="ignore", invalid="ignore"):
        lift = observed / expected
        return (np.maximum(a / lift - 2 * b + lift * c, 0.0), np.maximum(2 * np.sqrt(a * c) - 2 * b, 0.0), n)


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
        cluster (:mod:`conjoined.background`); "uniform": always one density, the paper's model.

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
        row_labels = check_labels(row_labels, X.shape[0], "row_labels")
        column_labels = check_labels(column_labels, X.shape[1], "column_labels")
        z_min, min_size = check_thresholds(z_min, min_size)
        background = check_background(background)
        return _significance_rule(X, row_labels, column_labels, z_min, min_size, levels=background == "auto")
    if rule == "paper-code":
        return _paper_code_rule(X, counts)
    return _dt2b_rule(counts)
