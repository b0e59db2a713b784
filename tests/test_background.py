
import numpy as np
import pytest
from scipy.special import gammaln

from conjoined._negative_binomial import best_shape, negative_binomial_gain
from conjoined.background import (
    LEVEL_SHAPES,
    _block_dispersion,
    _cluster_levels,
    _depth_spread,
    _heavy_blocks,
    _heavy_fixed_point,
    _item_depths,
    _level_shape,
    _levelled_background,
    _parameters,
    _reference_blocks,
    _shrunk_levels,
)


def test_item_depths_are_one_for_poisson_items_and_left_out_per_cluster_otherwise():
    rng = np.random.default_rng(3)
    labels = np.repeat([0, 1, -1], [150, 150, 2])
    background = np.array([[1.0, 1.0, 2.0], [1.0, 3.0, 1.0]])
    reference = np.array([[True, True, False], [True, False, True]])  # (0, 2) and (1, 1) are heavy
    n_other = np.array([10.0, 20.0, 5.0])
    means = background[np.where(labels >= 0, labels, 0)] * n_other
    depths, shapes = _item_depths(rng.poisson(means).astype(float), labels, background, reference, n_other)
    np.testing.assert_array_equal(depths, 1.0)
    assert np.isinf(shapes).all()
    # Items ten-fold apart in depth: each entry (i, l) is the Gamma posterior of item i's depth from its
    # reference counts outside cluster l, under the shape fitted to all items' reference totals.
    aggregated = rng.poisson(means * rng.gamma(2.0, 0.5, labels.size)[:, None]).astype(float)
    depths, shapes = _item_depths(aggregated, labels, background, reference, n_other)
    on = reference[np.where(labels >= 0, labels, 0)] & (labels >= 0)[:, None]
    counts, expected = np.where(on, aggregated, 0), np.where(on, means, 0)
    s = _level_shape(counts.sum(axis=1), expected.sum(axis=1))
    assert np.isfinite(s)
    i = 7  # cluster 0: reference on clusters 0 and 1
    np.testing.assert_allclose(shapes[i], [s + counts[i, 1], s + counts[i, 0], s + counts[i, :2].sum()])
    np.testing.assert_allclose(depths[i], shapes[i] / (s + np.array([expected[i, 1], expected[i, 0],
                                                                     expected[i, :2].sum()])))
    np.testing.assert_array_equal(depths[-2:], 1.0)
    assert np.isinf(shapes[-2:]).all()


def test_levels_are_fitted_only_where_the_light_blocks_demand_them():
    sizes = np.full((3, 2), 50.0)
    light = np.ones((3, 2), bool)
    # Poisson-sized differences between clusters: one uniform background, the light blocks' density.
    observed = np.array([[100.0, 108.0], [95.0, 103.0], [98.0, 90.0]])
    np.testing.assert_array_equal(_cluster_levels(observed, sizes, light), np.full((3, 2), 594 / 300))
    # Row cluster 2 ten times deeper: its level is fitted (shrunk a little towards 1), the columns stay level,
    # and the background still accounts for the light blocks' total count.
    deep = np.array([[100.0, 108.0], [95.0, 103.0], [980.0, 1030.0]])
    background = _cluster_levels(deep, sizes, light)
    assert np.ptp(background, axis=1).max() == 0
    ratio = background[2, 0] / background[:2, 0].mean()
    assert 9.5 < ratio < 2010 / 203
    assert np.isclose((background * sizes).sum(), deep.sum(), rtol=1e-12)


def _assert_levels_fixed_point(observed, sizes, light):
    """The levelled background is a fixed point of the plain alternation of posterior means (a few rounds
    suffice), with the light blocks' total."""
    background = _cluster_levels(observed, sizes, light)
    # At the fixed point each side's levels average 1, which makes rho0, u and v the background's means.
    rho0 = background.mean()
    u, v = background.mean(axis=1) / rho0, background.mean(axis=0) / rho0
    np.testing.assert_allclose(background, rho0 * np.outer(u, v), rtol=1e-12)
    light_sizes, light_observed = np.where(light, sizes, 0.0), np.where(light, observed, 0.0)
    new_u, row_shape = _shrunk_levels(light_observed.sum(axis=1), rho0 * light_sizes @ v)
    new_v, column_shape = _shrunk_levels(light_observed.sum(axis=0), rho0 * u @ light_sizes)
    assert np.isfinite(row_shape) and np.isfinite(column_shape)
    np.testing.assert_allclose(new_u, u, rtol=1e-6)
    np.testing.assert_allclose(new_v, v, rtol=1e-6)
    assert np.isclose((background * light_sizes).sum(), light_observed.sum(), rtol=1e-12)
    return u, v


def test_levels_settle_at_the_fixed_point_of_their_posterior_means(monkeypatch):
    # Both sides' clusters of different depths, row cluster 3 without light blocks. The likelihood leaves the
    # scale shared by rho0 and the levels free; the plain alternation crawled along it (here about 20% off its
    # fixed point after 100 rounds, 21,821 rounds to settle).
    monkeypatch.setattr("conjoined.background.LEVEL_ROUNDS", 20)
    rng = np.random.default_rng(0)
    sizes = rng.integers(20, 400, (12, 1)) * rng.integers(20, 400, (1, 8)).astype(float)
    observed = rng.poisson(0.05 * np.outer(rng.gamma(2.0, 0.5, 12), rng.gamma(2.0, 0.5, 8)) * sizes).astype(float)
    light = rng.random((12, 8)) < 0.85
    light[3] = False
    u, _ = _assert_levels_fixed_point(observed, sizes, light)
    assert u[3] == pytest.approx(1.0, rel=1e-6)


def test_levels_settle_where_light_blocks_link_the_clusters_into_separate_groups(monkeypatch):
    # Two biclusters on the diagonal of 6 x 6 clusters of different depths: the light blocks link row clusters
    # 0-2 with column clusters 3-5 and the others together, and each group's scale between its rows and its
    # columns is free in the likelihood as well (the background of the heavy blocks, across the groups,
    # depends on it). Rescaling each side to mean 1 alone still hit the 100 rounds, 28% off the fixed point.
    monkeypatch.setattr("conjoined.background.LEVEL_ROUNDS", 20)
    rng = np.random.default_rng(1)
    sizes = np.outer(rng.integers(50, 2000, 6), rng.integers(50, 2000, 6)).astype(float)
    groups = np.arange(6) // 3
    heavy = groups[:, None] == groups[None, :]
    depths = np.outer(rng.gamma(3.0, 1 / 3, 6), rng.gamma(3.0, 1 / 3, 6))
    observed = rng.poisson(0.01 * depths * sizes * np.where(heavy, 5, 1)).astype(float)
    _assert_levels_fixed_point(observed, sizes, ~heavy)


def test_level_evidence_is_exact_for_large_totals():
    # Poisson totals of 1e9 per cluster: no level is demanded (from gammaln differences the evidence erred by
    # tens and demanded levels in 3 of 20 such draws); a 14% spread of levels is.
    rng = np.random.default_rng(0)
    expected = np.full(300, 1e9)
    for _ in range(5):
        assert _level_shape(rng.poisson(expected).astype(float), expected) == np.inf
    assert np.isfinite(_level_shape(rng.poisson(expected * rng.gamma(50, 1 / 50, 300)).astype(float), expected))
    # the gain against the same formula with gammaln where that is exact, and at a large shape against its
    # value at 60 digits (mpmath), -4.99975001666550e-05, to 1e-6 (the evidence needs about 0.1)
    shape, totals, mean = np.array([0.5, 15.0, 1e4]), np.array([30.0, 30.0, 1e6]), np.array([20.0, 20.0, 1.01e6])
    direct = (gammaln(shape + totals) - gammaln(shape) - totals * np.log(shape)
              - (shape + totals) * np.log1p(mean / shape) + mean)
    np.testing.assert_allclose(negative_binomial_gain(shape, totals, mean), direct, rtol=1e-9)
    np.testing.assert_allclose(negative_binomial_gain(1e13, 1e9, 1e9), -4.99975001666550e-05, rtol=0, atol=1e-6)


def test_the_shape_search_finds_the_grid_s_best_shape_when_the_gain_has_two_peaks():
    """A cluster with next to no counts in its light blocks gives the summed gain two peaks (shape indices 55 and
    72, 0.36 nats apart; a helper's example): the first, highest, is the grid's answer."""
    totals = np.array([2.0, 432, 8861, 1454, 2208, 1313, 3723, 482, 1204, 24480, 1591])
    expected = np.array([32.0, 472.9, 8583.7, 1421.3, 2301.1, 1382.3, 3839.1, 467.6, 1270.6, 23455.8, 1724.5])
    shapes = LEVEL_SHAPES * totals.max()
    gains = negative_binomial_gain(shapes[:, None], totals, expected).sum(axis=1)
    peaks = np.flatnonzero((gains[1:-1] > gains[:-2]) & (gains[1:-1] > gains[2:])) + 1
    assert peaks.tolist() == [55, 72]
    best, gain = best_shape(shapes, totals, expected)
    assert best == np.argmax(gains) == 55 and gain == pytest.approx(gains.max(), rel=1e-12)
    assert _level_shape(totals, expected) == shapes[55]


def test_levels_start_from_the_uniform_fixed_point():
    # The block totals of a replicate of a stress design (3 blocks 1.5-3 times the background on 30 x 30) as
    # the refinement partitioned it: row clusters of 10, 7 and 13, column clusters of 10 and 20; densities 8.7
    # and 3.9 in blocks (0, 0) and (2, 1), 2.6-3.0 elsewhere. From the uniform fixed point (both blocks heavy)
    # the light blocks are uniform and no level is fitted. From the matrix's density, 3.85, block (2, 1) starts
    # light, and row cluster 2's excess demands a level that hides the block for good.
    sizes = np.outer([10.0, 7.0, 13.0], [10.0, 20.0])
    observed = np.array([[872.0, 601.0], [185.0, 389.0], [395.0, 1020.0]])
    eligible = np.ones((3, 2), bool)
    density = observed.sum() / sizes.sum()
    heavy, background, _, dispersion = _heavy_blocks(observed, sizes, 3.0, eligible, density, True)
    np.testing.assert_array_equal(heavy, [[True, False], [False, False], [False, True]])
    np.testing.assert_array_equal(dispersion, np.ones((3, 2)))
    np.testing.assert_allclose(background, (601 + 185 + 389 + 395) / (200 + 70 + 140 + 130), rtol=1e-15)
    from_density = _heavy_fixed_point(observed, sizes, 3.0, eligible, np.full((3, 2), density),
                                      lambda *args: _levelled_background(*args, (np.ones(3), np.ones(2))))
    np.testing.assert_array_equal(from_density[0], [[True, False], [False, False], [False, False]])
    assert np.ptp(from_density[1]) > 0


def test_levels_from_every_block_where_the_uniform_fixed_point_hides_them():
    # Block totals at row level x column level (no block raised) on a partition with a shallow row cluster (2)
    # and a shallow column cluster (2). Against one density 14 of the other 15 blocks are heavy, and the light
    # blocks left, the shallow clusters' cross and block (5, 0), hold too few counts to demand levels: from the
    # uniform fixed point the background stays one density. From levels fitted to every block, none is heavy:
    # 5 + 3 parameters for the levels against 14 heavy blocks.
    sizes = np.outer([4.0, 11.0, 2.0, 5.0, 4.0, 4.0], [15.0, 15.0, 2.0, 8.0])
    levels = np.outer([3.0, 1.4, 0.15, 2.2, 4.1, 0.8], [0.8, 2.0, 0.15, 4.0])
    observed = np.round(levels * sizes)
    eligible = np.ones(sizes.shape, bool)
    uniform = _heavy_blocks(observed, sizes, 3.0, eligible, observed.sum() / sizes.sum(), False)
    assert uniform[0].sum() == 14
    from_uniform = _heavy_fixed_point(observed, sizes, 3.0, eligible, uniform[1],
                                      lambda *args: _levelled_background(*args, (np.ones(6), np.ones(4))))
    assert from_uniform[0].sum() == 14 and np.ptp(from_uniform[1]) == 0
    heavy, background, _, _ = _heavy_blocks(observed, sizes, 3.0, eligible, observed.sum() / sizes.sum(), True)
    assert not heavy.any()
    # the levels, shrunk towards 1 where a cluster has few counts (the shallow ones: within 20%)
    deep = np.ix_([0, 1, 3, 4, 5], [0, 1, 3])
    np.testing.assert_allclose((background / levels)[deep], background[0, 0] / levels[0, 0], rtol=0.005)
    np.testing.assert_allclose(background / levels, background[0, 0] / levels[0, 0], rtol=0.2)
    assert _parameters((heavy, background), sizes) == 8
    # levels on one side only cost that side's occupied clusters less one (row cluster 1 here has no cells)
    one_side = np.outer([1.0, 1.0, 2.0, 3.0], np.ones(3))
    with_empty = np.outer([2.0, 0.0, 3.0, 1.0], [4.0, 5.0, 6.0])
    assert _parameters((np.eye(4, 3, dtype=bool), one_side), with_empty) == 3 + 2
    # two blocks raised three- and two-fold over the same levels are found, and only they
    observed[0, 0] *= 3
    observed[3, 1] *= 2
    heavy = _heavy_blocks(observed, sizes, 3.0, eligible, observed.sum() / sizes.sum(), True)[0]
    np.testing.assert_array_equal(np.argwhere(heavy), [[0, 0], [3, 1]])


def test_a_cluster_heavy_everywhere_gets_its_lowest_block_as_baseline():
    # Row cluster 0 is ten times deeper than the others in every column cluster and twice that again in
    # column cluster 2: against the uniform fixed point all three of its blocks are heavy, so no light block
    # tells its level. Its lowest block is its baseline: only the doubled block stays heavy.
    sizes = np.full((4, 3), 100.0)
    observed = np.full((4, 3), 200.0)
    observed[0] = [2000.0, 2100.0, 4000.0]
    eligible = np.ones((4, 3), bool)
    density = observed.sum() / sizes.sum()
    heavy, _, _, _ = _heavy_blocks(observed, sizes, 3.0, eligible, density, True)
    np.testing.assert_array_equal(heavy, np.eye(4, 3, k=2, dtype=bool))
    assert _heavy_blocks(observed, sizes, 3.0, eligible, density, False)[0][0].all()


def test_depth_spread_by_hand():
    # Cluster 0: rows with totals 10 and 30: 2 x ((100 - 10) + (900 - 30)) / 40^2 = 1.2. Cluster 1: one row of
    # total 5, 20 / 25 = 0.8 below one depth's 1: 1. The row labelled -1 counts nowhere.
    X = np.array([[4, 6], [10, 20], [2, 3], [50, 50]])
    labels = np.array([0, 0, 1, -1])
    np.testing.assert_allclose(_depth_spread(X, labels, 2, 0), [1.2, 1.0], rtol=1e-15)
    np.testing.assert_allclose(_depth_spread(X.T, labels, 2, 1), [1.2, 1.0], rtol=1e-15)


def test_block_dispersion_by_hand():
    # Four reference blocks expecting 100 counts each (background 10 over 10 cells), row cluster 1 of depth
    # spread 2: m = background x spreads = 10, 10, 20, 20. Weighted surplus of variance, sum m ((O - E)^2 - O)
    # / E: (10 (100 - 110) + 10 (100 - 90) + 20 (900 - 130) + 20 (900 - 70)) / 100 = 320; information sum m^2
    # = 1000; c = 0.32 stands 320 / sqrt(2 x 1000) = 7.2 standard errors above 0. Each block's variance over
    # its Poisson variance: 1 + c m.
    sizes, background = np.full((2, 2), 10.0), np.full((2, 2), 10.0)
    observed = np.array([[110.0, 90.0], [130.0, 70.0]])
    spread = (np.array([1.0, 2.0]), np.array([1.0, 1.0]))
    dispersion = _block_dispersion(observed, sizes, background, np.ones((2, 2), bool), spread)
    np.testing.assert_allclose(dispersion, 1 + 0.32 * np.array([[10.0, 10.0], [20.0, 20.0]]), rtol=1e-14)
    # as Poisson noise allows (weighted surplus -30), or from the two blocks of row cluster 0 alone (0): none
    quiet = np.array([[110.0, 90.0], [105.0, 95.0]])
    np.testing.assert_array_equal(_block_dispersion(quiet, sizes, background, np.ones((2, 2), bool), spread),
                                  np.ones((2, 2)))
    row_0 = np.array([[True, True], [False, False]])
    np.testing.assert_array_equal(_block_dispersion(observed, sizes, background, row_0, spread), np.ones((2, 2)))


def test_a_cluster_heavy_in_most_blocks_takes_the_rest_of_its_blocks_as_baseline():
    # Row cluster 1 stands three times above a background of 1 in four of its five column clusters; in the
    # fifth, of 5 cells only, it has 4 counts: light, for lack of power. The rest of the cluster is its four
    # large blocks: from its median block (density 3) down, the highest baseline no block falls below by z_min
    # is the median itself (the small block: (4 - 15) / sqrt(15) = -2.8), and every block is within z_min of
    # it. Row cluster 0 is at the background everywhere.
    sizes = np.array([[100.0, 100.0, 100.0, 100.0, 5.0]] * 2)
    background = np.ones((2, 5))
    observed = np.array([[100.0, 100.0, 100.0, 100.0, 5.0], [300.0, 320.0, 290.0, 310.0, 4.0]])
    z = (observed - sizes) / np.sqrt(sizes)
    light = z < 3.0
    reference = _reference_blocks(observed, sizes, light, z, 3.0, background, np.ones((2, 5)))
    np.testing.assert_array_equal(reference, np.ones((2, 5), bool))
    # with 40 counts in a large fifth block the low block is clearly below the rest (z = -15 against the
    # median): it is the background and the four others are raised
    observed[1, 4], sizes[:, 4] = 40.0, 100.0
    observed[0, 4] = 100.0
    z = (observed - sizes) / np.sqrt(sizes)
    reference = _reference_blocks(observed, sizes, z < 3.0, z, 3.0, background, np.ones((2, 5)))
    np.testing.assert_array_equal(reference, [[True] * 5, [False, False, False, False, True]])


def test_a_baseline_of_zero_counts_takes_only_the_blocks_without_counts():
    # Row cluster 1 heavy in four of five blocks and empty in the fifth (100 cells, background 1 per cell): the
    # empty block lies clearly below the rest, so the descent reaches it; a baseline of zero counts is the
    # empty block alone, not every block of the cluster.
    sizes, background = np.full((2, 5), 100.0), np.ones((2, 5))
    observed = np.array([[100.0] * 5, [300.0, 320.0, 290.0, 310.0, 0.0]])
    z = (observed - sizes) / np.sqrt(sizes)
    reference = _reference_blocks(observed, sizes, z < 3.0, z, 3.0, background, np.ones((2, 5)))
    np.testing.assert_array_equal(reference, [[True] * 5, [False, False, False, False, True]])


def test_reference_blocks_treat_rows_and_columns_alike_and_leave_no_cluster_without_one():
    # Random block totals around random backgrounds: the rule on the transpose is the transpose of the rule,
    # and every cluster with expected counts keeps at least one reference block.
    rng = np.random.default_rng(0)
    for _ in range(300):
        K, L = rng.integers(2, 7, size=2)
        sizes = rng.integers(1, 50, size=(K, L)).astype(np.float64)
        background = rng.gamma(2.0, 1.0, size=(K, L))
        observed = rng.poisson(background * sizes * rng.choice([1.0, 3.0], size=(K, L), p=[0.4, 0.6]))
        observed = observed.astype(np.float64)
        dispersion = 1 + rng.gamma(1.0, 1.0, size=(K, L))
        z = (observed - background * sizes) / np.sqrt(dispersion * background * sizes)
        light = z < 3.0
        reference = _reference_blocks(observed, sizes, light, z, 3.0, background, dispersion)
        transposed = _reference_blocks(observed.T, sizes.T, light.T, z.T, 3.0, background.T, dispersion.T)
        np.testing.assert_array_equal(transposed, reference.T)
        assert reference.any(axis=1).all() and reference.any(axis=0).all()


def test_over_dispersed_block_totals_are_tested_against_their_own_noise():
    # Eight row clusters at lognormal levels x ten column clusters of 100 cells, 2 counts per cell, each
    # block's total drawn with the variance of negative-binomial cells (c = 2: variance E (1 + 2 x 2 u_k));
    # block (5, 7) at three times its level, block (2, 3) at 1.35 times (within that noise). The levelled
    # background finds the dispersion (2-8 times Poisson) and only block (5, 7) is heavy; against Poisson noise
    # seven blocks would stand 3 standard deviations above the same background, block (2, 3) among them.
    rng = np.random.default_rng(0)
    sizes = np.full((8, 10), 100.0)
    level = np.exp(rng.normal(0.0, 0.5, 8))
    mean = np.outer(level, np.ones(10)) * sizes * 2.0
    observed = np.round(rng.normal(mean, np.sqrt((1 + 4.0 * level[:, None]) * mean)))
    observed[2, 3], observed[5, 7] = np.round(mean[2, 3] * 1.35), np.round(mean[5, 7] * 3)
    heavy, background, z, dispersion = _heavy_blocks(observed, sizes, 3.0, np.ones((8, 10), bool),
                                                     observed.sum() / sizes.sum(), True)
    np.testing.assert_array_equal(np.argwhere(heavy), [[5, 7]])
    assert dispersion.min() > 2 and dispersion.max() < 9
    poisson_z = (observed - background * sizes) / np.sqrt(background * sizes)
    assert (poisson_z >= 3).sum() == 7 and poisson_z[2, 3] >= 3 and z[2, 3] < 3


def test_heavy_fixed_point_that_never_settles_returns_a_consistent_state():
    # A background fit that alternates between two densities: after the rounds run out, heavy and z are those
    # against the background returned.
    observed, sizes = np.array([[100.0, 30.0]]), np.array([[10.0, 10.0]])
    flips = iter(np.tile([2.0, 5.0], 100))

    def alternating(observed, sizes, light, z, z_min, background, dispersion):
        return np.full(observed.shape, next(flips)), np.full(observed.shape, 2.0)

    heavy, background, z, dispersion = _heavy_fixed_point(observed, sizes, 3.0, np.ones((1, 2), bool),
                                                          np.full((1, 2), 2.0), alternating)
    expected = background * sizes
    np.testing.assert_array_equal(dispersion, np.full((1, 2), 2.0))
    np.testing.assert_allclose(z, (observed - expected) / np.sqrt(2 * expected))
    np.testing.assert_array_equal(heavy, (z >= 3.0) & (observed - expected >= 9.0))
