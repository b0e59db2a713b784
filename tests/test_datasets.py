from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from conjoined.datasets import (
    CDP_CASES,
    load_20news_w100,
    make_biclusters_counts,
    make_cdp_case,
    make_marques_like,
)

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"

# The paper's simulation table, 1-based inclusive ranges.
TABLE = {
    1: ((50, 50), 4000, 0.8, [((1, 20), (1, 20))]),
    2: ((20, 20), 4000, 0.5, [((1, 4), (1, 4)), ((5, 12), (5, 20))]),
    3: (
        (50, 50),
        4000,
        0.7,
        [((1, 14), (1, 14)), ((15, 20), (15, 20)), ((21, 36), (21, 25)), ((40, 50), (32, 46))],
    ),
    4: (
        (100, 100),
        10000,
        0.7,
        [
            ((1, 13), (1, 13)),
            ((14, 20), (14, 20)),
            ((30, 35), (30, 35)),
            ((36, 40), (36, 40)),
            ((43, 50), (43, 50)),
        ],
    ),
}


def _mask(n, first, last):
    mask = np.zeros(n, dtype=bool)
    mask[first - 1 : last] = True
    return mask


@pytest.mark.parametrize("case", [1, 2, 3, 4])
def test_cdp_case_matches_the_table(case):
    shape, n_tokens, p, blocks = TABLE[case]
    assert CDP_CASES[case]["shape"] == shape
    assert CDP_CASES[case]["n_tokens"] == n_tokens
    assert CDP_CASES[case]["p"] == p
    X, rows, columns = make_cdp_case(case, random_state=0)
    assert X.shape == shape and X.dtype == np.int64
    assert X.sum() == n_tokens
    assert rows.shape == (len(blocks), shape[0]) and rows.dtype == bool
    assert columns.shape == (len(blocks), shape[1]) and columns.dtype == bool
    for b, ((r0, r1), (c0, c1)) in enumerate(blocks):
        np.testing.assert_array_equal(rows[b], _mask(shape[0], r0, r1))
        np.testing.assert_array_equal(columns[b], _mask(shape[1], c0, c1))


@pytest.mark.parametrize("case", [1, 2, 3, 4])
def test_block_cells_hold_about_p_of_the_tokens(case):
    _shape, n_tokens, p, _ = TABLE[case]
    X, rows, columns = make_cdp_case(case, random_state=1)
    marked = (rows.T.astype(int) @ columns.astype(int)) > 0
    share = X[marked].sum() / n_tokens
    # binomial standard deviation sqrt(p(1-p)/N) <= 0.008; allow 5 of them
    assert abs(share - p) < 5 * np.sqrt(p * (1 - p) / n_tokens)
    # the tokens spread evenly inside the marked cells and outside
    assert abs(X[marked].mean() - p * n_tokens / marked.sum()) < 0.1 * p * n_tokens / marked.sum()
    assert (
        abs(X[~marked].mean() - (1 - p) * n_tokens / (~marked).sum())
        < 0.1 * (1 - p) * n_tokens / (~marked).sum()
    )


def test_seed_reproducible_and_seeds_differ():
    a = make_cdp_case(3, random_state=7)
    b = make_cdp_case(3, random_state=7)
    c = make_cdp_case(3, random_state=8)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    assert not np.array_equal(a[0], c[0])
    d = make_cdp_case(3, random_state=np.random.RandomState(7))
    e = make_cdp_case(3, random_state=np.random.RandomState(7))
    np.testing.assert_array_equal(d[0], e[0])
    f = make_cdp_case(3, random_state=np.random.default_rng(7))
    g = make_cdp_case(3, random_state=np.random.default_rng(7))
    np.testing.assert_array_equal(f[0], g[0])


def test_shuffle_is_consistent():
    X, rows, _columns = make_cdp_case(3, random_state=3)
    Xs, rows_s, columns_s = make_cdp_case(3, random_state=3, shuffle=True)
    assert Xs.sum() == X.sum()
    assert not np.array_equal(Xs, X)
    assert not np.array_equal(rows_s, rows)
    # the planted cells of the returned (shuffled) truth carry the share p of the tokens
    marked = (rows_s.T.astype(int) @ columns_s.astype(int)) > 0
    assert abs(Xs[marked].sum() / Xs.sum() - 0.7) < 0.05
    np.testing.assert_array_equal(np.sort(rows_s.sum(axis=1)), np.sort(rows.sum(axis=1)))
    # the shuffle permutes the same underlying draw: the multiset of cell counts and of row sums is unchanged
    np.testing.assert_array_equal(np.sort(Xs.ravel()), np.sort(X.ravel()))
    np.testing.assert_array_equal(np.sort(Xs.sum(axis=1)), np.sort(X.sum(axis=1)))


def test_shuffle_permutes_matrix_and_truth_together():
    blocks = [(slice(0, 3), [1, 4]), (np.array([5, 6]), range(2, 5))]
    X, rows, columns = make_biclusters_counts((8, 6), blocks, 600, 1.0, random_state=0, shuffle=True)
    cells = (rows.T.astype(int) @ columns.astype(int)) > 0
    # with p = 1 every token lies in a bicluster cell of the returned (shuffled) truth
    assert X[~cells].sum() == 0 and X.sum() == 600
    assert rows.sum() == 5 and columns.sum() == 5


def test_block_index_forms():
    blocks = [(slice(0, 2), range(2)), (np.array([3]), np.array([False, False, True, True]))]
    _X, rows, columns = make_biclusters_counts((4, 4), blocks, 100, 0.9, random_state=0)
    np.testing.assert_array_equal(rows, [[1, 1, 0, 0], [0, 0, 0, 1]])
    np.testing.assert_array_equal(columns, [[1, 1, 0, 0], [0, 0, 1, 1]])


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"shape": (4, 4), "blocks": [], "n_tokens": 10, "p": 0.5}, "blocks is empty"),
        ({"shape": (4, 4), "blocks": [(slice(0, 2), slice(0, 2))], "n_tokens": 10, "p": 1.5}, "p must be in"),
        ({"shape": (4, 4), "blocks": [(slice(0, 2), slice(0, 2))], "n_tokens": -1, "p": 0.5}, "n_tokens"),
        ({"shape": (4, 4), "blocks": [(slice(2, 2), slice(0, 2))], "n_tokens": 10, "p": 0.5}, "selects no index"),
        # numpy would count a negative index from the end and cut a long slice short: the block planted elsewhere
        ({"shape": (4, 4), "blocks": [(slice(5, 6), slice(0, 2))], "n_tokens": 10, "p": 0.5}, "reaches outside"),
        ({"shape": (4, 4), "blocks": [(slice(0, 5), slice(0, 2))], "n_tokens": 10, "p": 0.5}, "reaches outside"),
        ({"shape": (4, 4), "blocks": [(slice(-2, None), [0])], "n_tokens": 10, "p": 0.5}, "reaches outside"),
        ({"shape": (4, 4), "blocks": [(slice(4, 0, -1), [0])], "n_tokens": 10, "p": 0.5}, r"0 to 3; None for"),
        ({"shape": (4, 4), "blocks": [(slice(3, -1, -1), [0])], "n_tokens": 10, "p": 0.5}, "reaches outside"),
        ({"shape": (4, 4), "blocks": [([-1], slice(0, 2))], "n_tokens": 10, "p": 0.5}, "negative indices"),
        ({"shape": (4, 4), "blocks": [(range(-1, 2), [0])], "n_tokens": 10, "p": 0.5}, r"negative.*range\(-1, 2\)"),
        ({"shape": (4, 4), "blocks": [([7], slice(0, 2))], "n_tokens": 10, "p": 0.5}, "does not fit"),
        (
            {"shape": (2, 2), "blocks": [(slice(0, 2), slice(0, 2))], "n_tokens": 10, "p": 0.5},
            "cover every cell",
        ),
        ({"shape": 4, "blocks": [(slice(0, 2), slice(0, 2))], "n_tokens": 10, "p": 0.5}, "shape must be"),
        ({"shape": (4, 4), "blocks": None, "n_tokens": 10, "p": 0.5}, "blocks must be a list"),
        ({"shape": (4, 4), "blocks": [5], "n_tokens": 10, "p": 0.5}, r"blocks\[0\] must be a \(row_index"),
        # None (numpy's newaxis) and a nested list would otherwise select every row, or a 2-d set of them
        ({"shape": (4, 4), "blocks": [(None, slice(0, 2))], "n_tokens": 10, "p": 0.5}, "1-d int array"),
        ({"shape": (4, 4), "blocks": [([[0, 1]], slice(0, 2))], "n_tokens": 10, "p": 0.5}, "1-d int array"),
    ],
)
def test_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        make_biclusters_counts(**kwargs)


@pytest.mark.parametrize("case", [5, 1.0, True])
def test_bad_case(case):
    with pytest.raises(ValueError, match="case must be one of"):
        make_cdp_case(case)


@pytest.mark.parametrize("shuffle", ["yes", None, 2])
def test_shuffle_must_be_bool(shuffle):
    with pytest.raises(ValueError, match="shuffle must be True or False"):
        make_cdp_case(1, random_state=0, shuffle=shuffle)


def test_negative_seed_is_named():
    with pytest.raises(ValueError, match=r"random_state \(the seed\) must be an integer >= 0, got -1"):
        make_cdp_case(1, random_state=-1)


def test_marques_like_small():
    X, row_labels, col_labels = make_marques_like(2000, 600, density=0.124, random_state=0)
    assert sp.isspmatrix_csr(X) and X.shape == (2000, 600)
    assert np.issubdtype(X.dtype, np.integer)
    X.check_format(full_check=True)
    assert X.has_sorted_indices and np.all(X.data >= 1)
    assert abs(X.nnz / (2000 * 600) - 0.124) < 0.005
    assert row_labels.shape == (2000,) and col_labels.shape == (600,)
    assert set(np.unique(row_labels)) == set(range(20)) and set(np.unique(col_labels)) == set(range(13))
    # over-dispersion: the variance of a block's counts exceeds its mean
    block = X[row_labels == 0][:, col_labels == 0].toarray()
    assert block.var() > 1.5 * block.mean()
    # block structure: module k is richer in cell type k mod 13 than elsewhere
    in_type = X[row_labels == 0][:, col_labels == 0].mean()
    elsewhere = X[row_labels == 0][:, col_labels != 0].mean()
    assert in_type > 3 * elsewhere
    again = make_marques_like(2000, 600, density=0.124, random_state=0)
    assert (again[0] != X).nnz == 0
    np.testing.assert_array_equal(again[1], row_labels)


def test_marques_like_negative_binomial_moments():
    # one module and one cell type: the counts of row i are NB(mu_i, r), so var = mu_i + mu_i^2 / r
    X, _row_labels, _col_labels = make_marques_like(
        300, 4000, density=0.3, n_row_clusters=1, n_col_clusters=1, random_state=2, dispersion=2.0
    )
    dense = X.toarray().astype(float)
    mean = dense.mean(axis=1)
    var = dense.var(axis=1)
    ratio = (var - mean) / mean**2  # estimates 1 / r
    assert abs(np.median(ratio) - 0.5) < 0.05
    assert abs(X.nnz / X.shape[0] / X.shape[1] - 0.3) < 0.01


def test_marques_like_deep_counts_follow_the_truncated_negative_binomial():
    # dispersion 0.02 with 30% non-zeros: one row's mean is about 1.1e6, so its non-zero values (zero-truncated
    # NB, mean 3.7e6) come from the gamma-Poisson path, not a walk along the CDF; checked by chi-square on
    # logarithmic bins against the exact distribution
    stats = pytest.importorskip("scipy.stats")
    density, r = 0.3, 0.02
    X, _, _ = make_marques_like(1, 20000, density=density, n_row_clusters=1, n_col_clusters=1, random_state=3,
                                dispersion=r)
    mean = r * ((1 - density) ** (-1 / r) - 1)  # P(X > 0) = density for the one row
    nb = stats.nbinom(r, r / (r + mean))
    edges = np.array([0, 1, 2, 4, 10, 30, 100, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, np.inf])
    truncated_cdf = np.append((nb.cdf(edges[:-1]) - nb.cdf(0)) / nb.sf(0), 1.0)
    expected = np.diff(truncated_cdf) * X.nnz
    observed = np.histogram(X.data, bins=edges + 0.5)[0]
    assert abs(X.nnz / X.shape[1] - density) < 0.01
    assert expected.min() > 5
    assert stats.chi2.sf(((observed - expected) ** 2 / expected).sum(), len(expected) - 1) > 0.01


def test_marques_like_bad_arguments():
    with pytest.raises(ValueError, match="density"):
        make_marques_like(100, 50, density=1.2)
    with pytest.raises(ValueError, match="n_col_clusters"):
        make_marques_like(100, 5, n_col_clusters=13)
    with pytest.raises(ValueError, match="dispersion=0.002 is too small for density=0.124"):
        make_marques_like(200, 100, dispersion=0.002)


def test_20news_w100():
    path = DATA / "20news_w100.mat"
    if not path.is_file():
        pytest.skip("20news_w100.mat not found in ../shared/data")
    news = load_20news_w100(path)
    assert sp.isspmatrix_csr(news.data) and news.data.dtype == np.float64
    assert news.data.shape == (100, 16242)
    assert news.data.nnz == 65451
    assert set(np.unique(news.data.data)) == {1.0}
    assert news.row_names.shape == (100,) and news.row_names[0] == "aids"
    assert news.column_groups.shape == (16242,)
    assert set(np.unique(news.column_groups)) == {0, 1, 2, 3}
    assert len(news.group_names) == 4 and news.group_names[0].startswith("comp")


def test_20news_missing_and_garbled(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such file"):
        load_20news_w100(tmp_path / "absent.mat")
    with pytest.raises(IsADirectoryError, match="is a folder: give the 20news_w100.mat file in it"):
        load_20news_w100(tmp_path)
    garbled = tmp_path / "garbled.mat"
    garbled.write_bytes(b"this is not a MATLAB file at all" * 10)
    with pytest.raises(ValueError, match="garbled.mat"):
        load_20news_w100(garbled)
