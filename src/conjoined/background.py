"""The background of a partition's blocks, and the heavy blocks that stand above it: the first half of
the significance rule (:mod:`conjoined.extract`) and the blocks of the refinement's model
(:mod:`conjoined.refine`).

Works on a row and a column partition (``row_labels``, ``column_labels``: the estimator's point estimates)
and the counts themselves. A block (k, l), the rows labelled k times the columns labelled l, is heavy when
its total ``O`` stands at least ``z_min`` Poisson standard deviations above ``E = rho0_kl |rows| |cols|``,
where ``rho0_kl`` is the block's background density: the density of the cells outside the heavy blocks,
found by iterating from the matrix's overall density (a block of elevated counts inflates the overall
density, which hides modest blocks such as case 2's). Blocks narrower than ``min_size`` rows or columns are
not biclusters. By default ``z_min`` is 3, raised to the one-sided 1% family-wise level (Bonferroni) over the
blocks tested when there are more than about 7 of them, so that large partitions do not yield chance
biclusters. ``strength = (O - E) / sqrt(E)`` (over-dispersed counts: below).

The background is one density, the paper's model, unless the light blocks demand more: then, from that fixed
point on, it has a level for each row cluster and each column cluster, ``rho0_kl = rho0 u_k v_l``, fitted to
the light blocks by empirical Bayes (levels Gamma-distributed around 1; a side's levels stay 1 unless its
clusters' totals differ beyond Poisson noise by five sigma of evidence). Real data need this: genes (words) of
very different depths. Against one density, a cluster of highly expressed genes is "heavy" in every cell
cluster, and highly expressed outsiders join every bicluster; with levels a bicluster is a block raised above
the rest of its row and column clusters. The same iteration also runs from levels fitted to every block, and
its fixed point is kept when it spends fewer parameters (heavy blocks, and each levelled side's clusters less
one): where rows and columns differ in depth alone, the light blocks left by one density are too few to demand
levels (:func:`_heavy_blocks`). A cluster heavy in most of its blocks takes the rest of its blocks as its
baseline: from its median block down, the highest that none of its blocks falls clearly below (a cluster of
deep genes, heavy against the uniform background wherever a cell cluster is large enough to show it); with one
or two blocks and none light, its lowest (so a column cluster heavy in every row cluster turns levels on even
over uniform light blocks). The levelled background also lets the blocks' totals be over-dispersed, when its
reference blocks vary beyond Poisson noise by five sigma: each cell negative binomial around its mean, the
variance's excess growing with the block's background and the spread of its items' depths
(``_block_dispersion``), and ``z`` and the strength are then ``(O - E) / sqrt(dispersion E)``. Real counts
are: a cluster of deep genes varies between cell clusters far beyond Poisson noise, and against a Poisson test
it was a bicluster in most of them. On the partitions CDP finds for the simulation cases the background stays
uniform and Poisson (the paper's four cases, 50 replicates each: always). A heavy block must also exceed its
background by ``z_min ** 2`` counts: against the level of a cluster with next to no counts in its light
blocks, two counts would otherwise stand dozens of "standard deviations" high.

Items get a depth of their own in the same way, when their counts demand it: within a cluster, genes (words,
cells) differ in depth too, and an item deeper than its cluster stands above its cluster's background in every
block. Each item's depth relative to its cluster's background is fitted by empirical Bayes (Gamma around 1, five
sigma of evidence over all the items of a side) from its counts in its cluster's reference blocks (the light
blocks that do not stand out, or the cluster's baseline), leaving out the cluster it is tested on; the
significance rule's tests (:mod:`conjoined.extract`) then take an item's background as its cluster's times its
depth, and its count as negative binomial around it (the Gamma posterior of the depth: an item with few counts
elsewhere has an uncertain depth). An outsider shallower than its cluster is tested against its cluster's
background, as without depths: a word that is rare outside its own topic has a depth near zero, and its
item-by-cluster variation, which the depth does not model, then passed for a raise (on 20 Newsgroups, god and
president joined the sports biclusters). On the simulation cases depths stay 1 (the paper's four cases, 50
replicates each: always), and the tests are Poisson.
"""

from __future__ import annotations

import math
import sys

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components
from scipy.stats import norm

from ._negative_binomial import best_shape
from ._validation import check_int, check_positive

__all__ = ["DEFAULT_MIN_SIZE", "DEFAULT_Z_MIN", "check_thresholds", "default_z_min"]

DEFAULT_Z_MIN = 3.0
FAMILY_ERROR = 0.01
DEFAULT_MIN_SIZE = 2
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
# Rounds of the search for the heavy blocks and their background.
FIXED_POINT_ROUNDS = 50
LARGEST_Z_MIN = math.sqrt(sys.float_info.max)


def _block_sums(X, row_sets, column_sets):
    """(K_r, K_c) totals of X over rows in row_sets[k] (bool (K_r, n_rows)) and columns in column_sets[l]."""
    return _dense(_sparse_sets(row_sets) @ X @ _sparse_sets(column_sets).T)


def _sparse_sets(sets):
    """Bool (K, n) sets as a sparse float matrix: products with X then cost its non-zeros once, not K times."""
    return sp.csr_matrix(sets, dtype=np.float64)


def _dense(matrix):
    """``matrix`` (sparse or dense) as a float ndarray."""
    return np.asarray(matrix.todense() if sp.issparse(matrix) else matrix, dtype=np.float64)


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
    background is fitted on (at least one with counts). Model: a light block's total is Poisson with mean ``rho0
    u_k v_l sizes[k, l]``. The levels ``u`` (K_r,) and ``v`` (K_c,) are Gamma-distributed around 1 and each gets
    its posterior mean given the others, with the shape of :func:`_level_shape`, alternately until no block's
    background moves by more than ``LEVEL_TOLERANCE`` (relative; at most ``LEVEL_ROUNDS`` rounds); ``rho0`` keeps
    the light blocks' expected total equal to their observed total. When the clusters' totals differ by no more
    than Poisson noise allows, the levels stay 1 and the background is one density, the light blocks' (a uniform
    background: the simulation cases); only data that clearly demand levels (genes or cells of very different
    depths) get them. Returns the background density of each block (K_r, K_c): ``rho0 u_k v_l``.

    The likelihood leaves free the scale shared by ``rho0`` and the levels, and, where the light blocks link the
    clusters into separate groups (rows R and columns C), the scale moved from ``u_R`` to ``v_C``; only the levels'
    prior pins them (so the background of a block across two groups, which no light block measures, is the prior's),
    and the plain alternation crawled along them (on single-cell data, tens of thousands of rounds; the light blocks
    of real data have formed one group). Each round therefore puts the levels where a fixed point has them along
    those directions: there, summing ``u_k (s_u + E_k) = s_u + T_k`` over a group's rows and ``v_l (s_v + E_l) = s_v
    + T_l`` over its columns, both sums of expected counts being the group's expected total ``X``, gives ``s_u (|R| -
    sum_R u) = X - T = s_v (|C| - sum_C v)`` (:func:`_balance_groups`), and over all clusters (rho0 makes the light
    blocks' ``X`` their ``T``) each side's levels average 1. The fixed points are the plain alternation's
    (tests/test_background.py checks the result against its updates).
    """
    light_sizes = np.where(light, sizes, 0.0)
    light_observed = np.where(light, observed, 0.0)
    row_totals, column_totals = light_observed.sum(axis=1), light_observed.sum(axis=0)
    row_groups, column_groups = _light_groups(light_sizes)
    u, v = np.ones(observed.shape[0]), np.ones(observed.shape[1])
    rho0 = light_observed.sum() / light_sizes.sum()
    background = np.full(observed.shape, rho0)
    for _ in range(LEVEL_ROUNDS):
        u, row_shape = _shrunk_levels(row_totals, rho0 * light_sizes @ v)
        u /= u.mean()
        v, column_shape = _shrunk_levels(column_totals, rho0 * u @ light_sizes)
        v /= v.mean()
        if row_groups.max() > 0 and np.isfinite(row_shape) and np.isfinite(column_shape):
            _balance_groups(u, v, row_shape, column_shape, row_groups, column_groups)
        rho0 = light_observed.sum() / (light_sizes * np.outer(u, v)).sum()
        new_background = rho0 * np.outer(u, v)
        settled = bool((np.abs(new_background - background) <= LEVEL_TOLERANCE * np.abs(background)).all())
        background = new_background
        if settled:
            break
    return background


def _light_groups(light_sizes):
    """The groups of clusters that light blocks link (connected components of the bipartite graph whose edges
    are the blocks with light cells, ``light_sizes`` (K_r, K_c) > 0): ``(row_groups (K_r,), column_groups
    (K_c,))``, numbered from 0; a cluster without light cells gets -1."""
    linked = sp.csr_matrix(light_sizes > 0)
    graph = sp.bmat([[None, linked], [linked.T, None]])
    _, labels = connected_components(graph, directed=False)
    n_rows = light_sizes.shape[0]
    has_light = np.concatenate([linked.getnnz(axis=1) > 0, linked.getnnz(axis=0) > 0])
    _, numbered = np.unique(labels[has_light], return_inverse=True)
    labels = np.full(labels.shape, -1)
    labels[has_light] = numbered
    return labels[:n_rows], labels[n_rows:]


def _balance_groups(u, v, row_shape, column_shape, row_groups, column_groups):
    """Move each group's scale between its row levels and its column levels (``u_R c``, ``v_C / c``, which
    leaves its light blocks' background as it is) to where a fixed point of :func:`_cluster_levels` has it,
    ``s_u (|R| - c sum_R u) = s_v (|C| - sum_C v / c)``, then rescale each side to mean 1. ``u``, ``v`` are
    changed in place."""
    for group in range(row_groups.max() + 1):
        rows, columns = row_groups == group, column_groups == group
        # the positive root of a c^2 + b c - d = 0, in the form that does not cancel
        a, d = row_shape * u[rows].sum(), column_shape * v[columns].sum()
        b = column_shape * columns.sum() - row_shape * rows.sum()
        root = math.sqrt(b * b + 4 * a * d)
        scale = 2 * d / (b + root) if b > 0 else (root - b) / (2 * a)
        u[rows] *= scale
        v[columns] /= scale
    u /= u.mean()
    v /= v.mean()


def _shrunk_levels(totals, expected):
    """``(levels, s)``: posterior-mean levels ``(s + totals) / (s + expected)`` under the shape ``s`` of
    :func:`_level_shape` (all 1 when it is inf)."""
    shape = _level_shape(totals, expected)
    if np.isinf(shape):
        return np.ones_like(totals, dtype=np.float64), shape
    return (shape + totals) / (shape + expected), shape


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

    The uniform fixed point's light blocks can hide levels, too: where rows and columns differ in depth alone
    (counts at row depth x column depth, no block raised), a mixture groups them by depth, every block but
    those of the shallowest clusters stands above one density, and the few light blocks left hold too few
    counts to demand levels (five sigma), so that most blocks were reported as biclusters. The iteration is
    therefore also run from levels fitted to every block (the independence of rows and columns), and its
    fixed point is kept when it has levels and describes the blocks with fewer parameters
    (:func:`_parameters`: a heavy block costs one, a side's levels its clusters less one); on a tie, the
    fixed point reached from the uniform one. When that one keeps one density and has fewer heavy blocks than
    the smaller side has clusters (with cells), it is therefore always kept, as on the paper's simulation cases.
    """
    state = _heavy_fixed_point(observed, sizes, z_min, eligible, np.full(observed.shape, float(initial_density)),
                               _uniform_background)
    # with one cluster on a side, a block has no rest of its cluster to stand above: its level would absorb it
    if levels and min((sizes > 0).any(axis=1).sum(), (sizes > 0).any(axis=0).sum()) >= 2:
        if spread is None:
            spread = (np.ones(observed.shape[0]), np.ones(observed.shape[1]))
        def fit(*args):
            return _levelled_background(*args, spread)
        state = _heavy_fixed_point(observed, sizes, z_min, eligible, state[1], fit)
        independence = _cluster_levels(observed, sizes, sizes > 0)
        if _has_levels(independence):
            from_independence = _heavy_fixed_point(observed, sizes, z_min, eligible, independence, fit)
            if (_has_levels(from_independence[1])
                    and _parameters(from_independence, sizes) < _parameters(state, sizes)):
                state = from_independence
    return state


def _parameters(state, sizes):
    """How many parameters a fixed point ``(heavy, background, ...)`` of :func:`_heavy_fixed_point` spends on
    the blocks beyond one density: one for each heavy block, and K - 1 for a side whose K clusters (those with
    cells, ``sizes`` (K_r, K_c) > 0) have levels. The over-dispersion of a levelled background is not counted:
    both fixed points compared may have one."""
    heavy, background = state[:2]
    occupied = background[np.ix_((sizes > 0).any(axis=1), (sizes > 0).any(axis=0))]
    count = int(heavy.sum())
    if np.ptp(occupied, axis=0).max() > 0:
        count += occupied.shape[0] - 1
    if np.ptp(occupied, axis=1).max() > 0:
        count += occupied.shape[1] - 1
    return count


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

    ``aggregated`` (n, L): each item's count over the other side's clusters, which have ``n_other`` (L,) members;
    ``background_side``, ``reference`` (K, L): the background density and the reference blocks
    (:func:`_reference_blocks`), this side's clusters along axis 0. Model: an item's count over its cluster's
    reference blocks is Poisson with mean ``w x`` its cluster's background there, its depth ``w``
    Gamma-distributed around 1 (empirical Bayes, the shape ``s`` of :func:`_level_shape`: depths stay 1 unless
    the items differ beyond Poisson noise by five sigma of evidence, as genes and words of real data do and the
    items of the simulation cases do not). Entry (i, l) is the depth's posterior given the item's reference
    counts outside cluster l (an item tested on l is judged against its depth elsewhere, not against a depth its
    counts on l have raised): Gamma with mean ``depths[i, l]`` and shape ``shapes[i, l]`` (``s`` plus those
    counts). Its count over cluster l's cells is then negative binomial around its background there
    (:func:`extract._signed_root_deviance`): an item with few counts elsewhere has an uncertain depth, and that
    uncertainty widens what counts as raised. Without evidence for depths: depths 1, shapes inf (the Poisson of a
    cluster's shared rate). Items labelled -1 get 1 and inf.
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


def default_z_min(n_blocks):
    """3, or the one-sided ``FAMILY_ERROR`` family-wise (Bonferroni) level over ``n_blocks`` tests if higher."""
    return max(DEFAULT_Z_MIN, float(norm.isf(FAMILY_ERROR / max(n_blocks, 1))))


def _backgrounds(X, row_labels, column_labels, z_min, min_size, levels):
    """The blocks of a partition and their backgrounds as the significance rule sees them: what
    :func:`_heavy_of_partition` returns, then the rows' and the columns' depths (:func:`_item_depths`; 1, of
    shape inf, without ``levels``) and the items' counts over the other side's clusters: ``(row_sets,
    column_sets, heavy, background, z, z_min, dispersion, observed, row_depths, column_depths, item_counts)``,
    each depths ``(depths, shapes)``, (n_rows, K_c) for the rows and (n_cols, K_r) for the columns, and
    ``item_counts`` ``(rows' (n_rows, K_c), columns' (n_cols, K_r))``."""
    row_sets, column_sets, heavy, background, z, z_min, dispersion, observed = _heavy_of_partition(
        X, row_labels, column_labels, z_min, min_size, levels)
    by_column_cluster = _counts_over_clusters(X, np.asarray(column_labels), column_sets.shape[0])
    by_row_cluster = _counts_over_clusters(X.T, np.asarray(row_labels), row_sets.shape[0])
    if not levels:
        return (row_sets, column_sets, heavy, background, z, z_min, dispersion, observed, *(
            (np.ones((n, K)), np.full((n, K), np.inf)) for n, K in zip(X.shape, heavy.shape[::-1])),
            (by_column_cluster, by_row_cluster))
    row_sizes, column_sizes = row_sets.sum(axis=1).astype(np.float64), column_sets.sum(axis=1).astype(np.float64)
    sizes = np.outer(row_sizes, column_sizes)
    reference = _reference_blocks(observed, sizes, ~heavy & (sizes > 0), z, z_min, background, dispersion)
    row_depths = _item_depths(by_column_cluster, row_labels, background, reference, column_sizes)
    column_depths = _item_depths(by_row_cluster, column_labels, background.T, reference.T, row_sizes)
    return (row_sets, column_sets, heavy, background, z, z_min, dispersion, observed, row_depths, column_depths,
            (by_column_cluster, by_row_cluster))


def _has_levels(background):
    """Whether a background (K_r, K_c) has cluster levels (is not one uniform density)."""
    return bool(np.ptp(background) > 0)


def _heavy_of_partition(X, row_labels, column_labels, z_min, min_size, levels=False):
    """The blocks of a partition as the significance rule sees them (labels -1 belong to no block): ``(row_sets
    (K_r, n_rows), column_sets (K_c, n_cols), heavy (K_r, K_c) bool, background (K_r, K_c), z (K_r, K_c), z_min,
    dispersion (K_r, K_c), observed (K_r, K_c) block totals)``, with z_min at its default level if None and
    ``levels`` as for :func:`_heavy_blocks` (with the clusters' depth spreads, :func:`_depth_spread`)."""
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


def check_thresholds(z_min, min_size):
    """``(z_min, min_size)`` of the significance rule, checked: z_min None (its default level) or a number >= 0,
    min_size None (``DEFAULT_MIN_SIZE``) or an integer >= 1."""
    z_min = None if z_min is None else check_positive(z_min, "z_min", allow_zero=True)
    if z_min is not None and z_min > LARGEST_Z_MIN:
        raise ValueError(f"z_min must be at most {LARGEST_Z_MIN:.3g} (a block must exceed its background by "
                         f"z_min ** 2 counts), got {z_min!r}")
    min_size = DEFAULT_MIN_SIZE if min_size is None else check_int(min_size, "min_size", minimum=1)
    return z_min, min_size
