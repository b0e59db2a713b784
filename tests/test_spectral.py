"""The spectral starting partition: the blocks that stand above Poisson noise, nothing where none does."""

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.metrics import adjusted_rand_score

from conjoined.datasets import make_biclusters_counts
from conjoined.spectral import noise_edge, spectral_partition


def _blocks(n_blocks, shape, n_tokens, p, seed):
    rows = np.array_split(np.arange(shape[0]), n_blocks)
    cols = np.array_split(np.arange(shape[1]), n_blocks)
    X, row_sets, col_sets = make_biclusters_counts(shape, list(zip(rows, cols)), n_tokens, p, random_state=seed,
                                                   shuffle=True)
    return X, row_sets.argmax(axis=0), col_sets.argmax(axis=0)


def test_planted_blocks_are_the_partition():
    # 6 blocks tiling a 300 x 240 matrix: 5 singular values above the edge, 6 clusters a side
    X, row_truth, col_truth = _blocks(6, (300, 240), 30_000, 0.5, seed=0)
    rows, cols = spectral_partition(sp.csr_matrix(X), seed=0)
    assert np.unique(rows).size == 6 and np.unique(cols).size == 6
    assert adjusted_rand_score(row_truth, rows) == 1.0 and adjusted_rand_score(col_truth, cols) == 1.0
    # dense input, the same labels; the same seed, the same labels; shuffled rows, the same partition
    np.testing.assert_array_equal(spectral_partition(X, seed=0)[0], rows)
    # one side asked for: its labels as when both are, none for the other
    only_rows = spectral_partition(X, seed=0, sides=(True, False))
    np.testing.assert_array_equal(only_rows[0], rows)
    assert only_rows[1] is None
    order = np.random.default_rng(1).permutation(X.shape[0])
    assert adjusted_rand_score(rows[order], spectral_partition(X[order], seed=0)[0]) == 1.0


def test_many_weak_blocks_of_a_sparse_matrix():
    # 12 blocks on 600 x 480 at 0.14 counts a cell, a row holding 17 counts of which a quarter in its block:
    # too little for a mixture of rows started from one cluster, enough for the spectrum to start it close (draws
    # 0-3: adjusted Rand 0.84-0.88 on the rows, 0.90-0.96 on the columns; CDP's mixtures take it from there)
    X, row_truth, col_truth = _blocks(12, (600, 480), 40_000, 0.25, seed=0)
    rows, cols = spectral_partition(X, seed=3)
    assert np.unique(rows).size == 12
    assert adjusted_rand_score(row_truth, rows) > 0.8 and adjusted_rand_score(col_truth, cols) > 0.85


@pytest.mark.parametrize("seed", range(5))
def test_poisson_counts_without_blocks_give_no_partition(seed):
    # rows and columns of different depths, no interaction: every singular value but the first below the edge
    rng = np.random.default_rng(seed)
    rates = np.outer(rng.gamma(2.0, 1.0, 400), rng.gamma(2.0, 1.0, 300)) * 0.5
    assert spectral_partition(rng.poisson(rates), seed=seed) is None


@pytest.mark.parametrize("seed", range(3))
def test_sparse_counts_of_very_uneven_depths_give_no_partition(seed):
    # exponential depths, 0.05 counts a cell: rows and columns of one or two counts would carry singular vectors of
    # their own above the edge of even depths (12 row clusters of 1-2 rows each, without the regularisation and the
    # edge drawn from these totals)
    rng = np.random.default_rng(seed)
    rows, cols = rng.gamma(1.0, 1.0, 3000), rng.gamma(1.0, 1.0, 2000)
    X = rng.poisson(np.outer(rows / rows.sum(), cols / cols.sum()) * 300_000)
    assert spectral_partition(X[X.sum(axis=1) > 0][:, X.sum(axis=0) > 0], seed=seed) is None


def test_noise_edge_is_the_largest_singular_value_of_noise():
    # even depths: the edge of the noise's law, (sqrt(n) + sqrt(m)) / sqrt(N), halved by the regularisation (each
    # total doubled), and a draw of such counts has its second singular value just below the edge
    rng = np.random.default_rng(0)
    X = rng.poisson(2.0, size=(500, 200)).astype(float)
    rows, cols, n = X.sum(axis=1), X.sum(axis=0), X.sum()
    edge = noise_edge(rows, cols, np.random.default_rng(1))
    assert edge / ((np.sqrt(500) + np.sqrt(200)) / np.sqrt(n) / 2) == pytest.approx(1.0, abs=0.03)
    normalised = X / np.sqrt(np.outer(rows + rows.mean(), cols + cols.mean()))
    assert 0.97 < np.linalg.svd(normalised, compute_uv=False)[1] / edge < 1.01


def test_too_small_or_empty_matrices_give_no_partition():
    assert spectral_partition(np.array([[1, 2, 3], [4, 5, 6]]), seed=0) is None
    assert spectral_partition(np.zeros((5, 5)), seed=0) is None
    X, _, _ = _blocks(6, (300, 240), 30_000, 0.5, seed=0)
    X[0] = 0  # a row without counts is clustered, not an error
    rows, _ = spectral_partition(X, seed=0)
    assert rows.shape == (300,)
