"""Synthetic count matrices with known biclusters, and the real data sets the paper uses.

- :func:`make_biclusters_counts`: the paper's simulation generator (one multinomial of tokens over the cells).
- :func:`make_cdp_case` / :data:`CDP_CASES`: the paper's four simulation cases.
- :func:`make_marques_like`: a sparse over-dispersed count matrix of the size and sparsity of the single-cell data
  set (Marques et al. 2016), built directly as CSR.
- :func:`load_20news_w100`: the condensed 20 Newsgroups matrix (Roweis) from its MATLAB file.
"""

from __future__ import annotations

import numbers
from pathlib import Path

import numpy as np
import scipy.io
import scipy.sparse as sp
from numba import njit
from numba.np.random.random_methods import random_interval
from sklearn.utils import Bunch

from ._legacy_stream import legacy_generator
from ._validation import check_bool, check_int, check_positive
from .io import _mat_strings

__all__ = ["CDP_CASES", "load_20news_w100", "make_biclusters_counts", "make_cdp_case", "make_marques_like"]


def _as_generator(random_state):
    """A ``numpy.random.Generator`` from None, an int, a RandomState or a Generator (same seed -> same stream)."""
    if isinstance(random_state, np.random.Generator):
        return random_state
    if random_state is None:
        return np.random.default_rng()
    if isinstance(random_state, numbers.Integral) and not isinstance(random_state, bool):
        return np.random.default_rng(check_int(random_state, "random_state (the seed)"))
    if isinstance(random_state, np.random.RandomState):
        return np.random.default_rng(random_state.randint(np.iinfo(np.int64).max, dtype=np.int64))
    raise ValueError(f"random_state must be None, an int, a RandomState or a Generator, got {random_state!r}")


def _block_indices(index, n, *, name):
    """0-based integer indices selected by a slice, range, int array or bool mask along an axis of length n.
    Negative indices and slices that reach past the axis are refused: NumPy would count the first from the end
    and cut the second short, planting a block elsewhere or smaller than asked without a word."""
    given = index
    if isinstance(index, range):
        index = np.arange(index.start, index.stop, index.step)
    if isinstance(index, slice):
        # going down (a negative step), a bound past the last index is cut short too
        top = n if index.step is None or index.step > 0 else n - 1
        outside = [bound for bound in (index.start, index.stop)
                   if isinstance(bound, numbers.Integral) and not 0 <= bound <= top]
        if outside:
            raise ValueError(f"{name}: {index!r} reaches outside an axis of length {n} (0-based bounds, 0 to {top}; "
                             "None for the axis' end)")
    elif np.asarray(index).dtype.kind in "iu" and np.any(np.asarray(index) < 0):
        raise ValueError(f"{name} has negative indices ({given!r}); indices are 0-based, 0 to {n - 1}")
    try:
        selected = np.arange(n)[index]
    except IndexError as exc:
        raise ValueError(f"{name} does not fit an axis of length {n}: {exc}") from None
    selected = np.atleast_1d(selected)
    if selected.ndim != 1:
        raise ValueError(f"{name} must be a slice, range, 1-d int array or bool mask, got {index!r}")
    if selected.size == 0:
        raise ValueError(f"{name} selects no index")
    return selected


def make_biclusters_counts(shape, blocks, n_tokens, p, random_state=None, shuffle=False):
    """Count matrix with planted biclusters: one multinomial of ``n_tokens`` tokens over the cells.

    The union of the bicluster cells is marked; each marked cell has probability ``p / #marked`` and every other
    cell ``(1 - p) / #other``, so the biclusters hold a share ``p`` of the tokens in expectation.

    Parameters
    ----------
    shape : (int, int)
        (n_rows, n_cols).
    blocks : list or tuple of (row_index, col_index)
        One pair per bicluster; each index is a slice, range, 1-d int array (0-based) or bool mask.
    n_tokens : int
        N, the total count of the matrix.
    p : float in [0, 1]
        Share of the tokens that fall in bicluster cells.
    random_state : None, int, RandomState or Generator
    shuffle : bool
        Permute rows and columns (the matrix and the truth consistently).

    Returns
    -------
    X : ndarray of int64, shape (n_rows, n_cols)
        ``X.sum() == n_tokens``.
    rows : ndarray of bool, shape (n_blocks, n_rows)
        ``rows[b, i]``: row i belongs to bicluster b.
    columns : ndarray of bool, shape (n_blocks, n_cols)
    """
    if not isinstance(shape, (tuple, list, np.ndarray)) or len(shape) != 2:
        raise ValueError(f"shape must be (n_rows, n_cols), got {shape!r}")
    n_rows = check_int(shape[0], "shape[0]", minimum=1)
    n_cols = check_int(shape[1], "shape[1]", minimum=1)
    n_tokens = check_int(n_tokens, "n_tokens", minimum=0)
    p = check_positive(p, "p", allow_zero=True)
    if p > 1:
        raise ValueError(f"p must be in [0, 1], got {p!r}")
    if not isinstance(blocks, (tuple, list)):
        raise ValueError(f"blocks must be a list of (row_index, col_index) pairs, got {blocks!r}")
    if len(blocks) == 0:
        raise ValueError("blocks is empty; give at least one (row_index, col_index) pair")
    shuffle = check_bool(shuffle, "shuffle")
    rng = _as_generator(random_state)

    rows = np.zeros((len(blocks), n_rows), dtype=bool)
    columns = np.zeros((len(blocks), n_cols), dtype=bool)
    for b, block in enumerate(blocks):
        if not isinstance(block, (tuple, list)) or len(block) != 2:
            raise ValueError(f"blocks[{b}] must be a (row_index, col_index) pair, got {block!r}")
        rows[b, _block_indices(block[0], n_rows, name=f"blocks[{b}] rows")] = True
        columns[b, _block_indices(block[1], n_cols, name=f"blocks[{b}] columns")] = True

    marked = (rows.T.astype(np.int64) @ columns.astype(np.int64)) > 0
    n_marked = int(marked.sum())
    n_other = marked.size - n_marked
    if n_other == 0 and p < 1:
        raise ValueError(f"the biclusters cover every cell, so p must be 1, got {p!r}")
    probabilities = np.where(marked, p / n_marked, (1.0 - p) / n_other if n_other else 0.0).ravel()
    X = (
        rng.multinomial(n_tokens, probabilities / probabilities.sum())
        .reshape(n_rows, n_cols)
        .astype(np.int64)
    )

    if shuffle:
        row_order = rng.permutation(n_rows)
        column_order = rng.permutation(n_cols)
        X = X[row_order][:, column_order]
        rows = rows[:, row_order]
        columns = columns[:, column_order]
    return X, rows, columns


def _inclusive(first, last):
    """The 1-based inclusive range ``first..last`` of the paper's table as a 0-based slice."""
    return slice(first - 1, last)


#: The paper's four simulation cases (its simulation table): case -> dict(shape, n_tokens, p, blocks), with blocks
#: as 0-based slices of the table's 1-based inclusive ranges.
CDP_CASES = {
    1: {"shape": (50, 50), "n_tokens": 4000, "p": 0.8, "blocks": [(_inclusive(1, 20), _inclusive(1, 20))]},
    2: {
        "shape": (20, 20),
        "n_tokens": 4000,
        "p": 0.5,
        "blocks": [(_inclusive(1, 4), _inclusive(1, 4)), (_inclusive(5, 12), _inclusive(5, 20))],
    },
    3: {
        "shape": (50, 50),
        "n_tokens": 4000,
        "p": 0.7,
        "blocks": [
            (_inclusive(1, 14), _inclusive(1, 14)),
            (_inclusive(15, 20), _inclusive(15, 20)),
            (_inclusive(21, 36), _inclusive(21, 25)),
            (_inclusive(40, 50), _inclusive(32, 46)),
        ],
    },
    4: {
        "shape": (100, 100),
        "n_tokens": 10000,
        "p": 0.7,
        "blocks": [
            (_inclusive(1, 13), _inclusive(1, 13)),
            (_inclusive(14, 20), _inclusive(14, 20)),
            (_inclusive(30, 35), _inclusive(30, 35)),
            (_inclusive(36, 40), _inclusive(36, 40)),
            (_inclusive(43, 50), _inclusive(43, 50)),
        ],
    },
}


def make_cdp_case(case, random_state=None, shuffle=False):
    """One draw of the paper's simulation case 1, 2, 3 or 4 (see :data:`CDP_CASES`).

    Returns ``(X, rows, columns)`` as :func:`make_biclusters_counts` does.
    """
    if isinstance(case, bool) or not isinstance(case, numbers.Integral) or case not in CDP_CASES:
        raise ValueError(f"case must be one of {sorted(CDP_CASES)}, got {case!r}")
    spec = CDP_CASES[case]
    return make_biclusters_counts(
        spec["shape"], spec["blocks"], spec["n_tokens"], spec["p"], random_state=random_state, shuffle=shuffle
    )


def _cluster_labels(n, n_clusters, rng):
    """Random labels in 0..n_clusters-1, every cluster non-empty, sizes 1 + Multinomial(n - K, Dirichlet(2))."""
    sizes = 1 + rng.multinomial(n - n_clusters, rng.dirichlet(np.full(n_clusters, 2.0)))
    return rng.permutation(np.repeat(np.arange(n_clusters), sizes))


def _negative_binomial_nonzero_probability(mean, dispersion):
    """P(X > 0) for X ~ NB(mean, dispersion): 1 - (1 + mean / dispersion) ** -dispersion."""
    return -np.expm1(-dispersion * np.log1p(mean / dispersion))


# truncated mean above which a zero-truncated NB value is drawn by rejection rather than by walking its CDF (one
# step per unit of the value); the draws of dispersions >= 0.5 stay below it, and so keep their values
INVERSE_CDF_LIMIT = 1e3
# largest gamma scale (mean / dispersion) make_marques_like accepts: its draws stay far below int64's range
MAX_GAMMA_SCALE = 1e15


@njit(cache=True, nogil=True)
def _fill_sparse_negative_binomial(
    indptr,
    nonzeros_per_block,
    columns_by_cluster,
    cluster_offsets,
    column_labels,
    row_means,
    dispersion,
    rng,
    indices,
    data,
):
    """Fill CSR ``indices``/``data`` row by row, drawing from the Generator ``rng``.

    Row i holds ``nonzeros_per_block[i, l]`` entries in column cluster l at uniformly drawn distinct columns (partial
    Fisher-Yates over that cluster's columns), each valued by a zero-truncated NB(row_means[i, l], dispersion) draw:
    by inverse CDF, or, where the truncated mean is above ``INVERSE_CDF_LIMIT`` (the inverse CDF walks one step
    per unit of the value), by gamma-Poisson draws until one is non-zero. ``columns_by_cluster`` is permuted in
    place; it stays a permutation of each cluster's columns.
    """
    n_rows, n_col_clusters = nonzeros_per_block.shape
    for i in range(n_rows):
        position = indptr[i]
        for cluster in range(n_col_clusters):
            start = cluster_offsets[cluster]
            size = cluster_offsets[cluster + 1] - start
            for t in range(nonzeros_per_block[i, cluster]):
                pick = start + t + np.int64(random_interval(rng.bit_generator, size - t - 1))
                chosen = columns_by_cluster[pick]
                columns_by_cluster[pick] = columns_by_cluster[start + t]
                columns_by_cluster[start + t] = chosen
                indices[position] = chosen
                position += 1
        indices[indptr[i] : indptr[i + 1]] = np.sort(indices[indptr[i] : indptr[i + 1]])
        for position in range(indptr[i], indptr[i + 1]):
            mean = row_means[i, column_labels[indices[position]]]
            success = mean / (mean + dispersion)
            log_zero = -dispersion * np.log1p(mean / dispersion)
            nonzero = -np.expm1(log_zero)
            if mean / nonzero > INVERSE_CDF_LIMIT:
                value = 0
                while value == 0:
                    value = rng.poisson(rng.gamma(dispersion, mean / dispersion))
                data[position] = value
                continue
            pmf = np.exp(log_zero) * dispersion * success / nonzero  # P(X = 1 | X > 0)
            target = rng.random()
            value = 1
            cumulative = pmf
            while cumulative < target:
                pmf *= (value + dispersion) / (value + 1) * success
                value += 1
                cumulative += pmf
                if pmf == 0.0 and value > mean:  # rounding left the total just below the target
                    break
            data[position] = value


def make_marques_like(
    n_rows=23226,
    n_cols=5053,
    density=0.124,
    n_row_clusters=20,
    n_col_clusters=13,
    random_state=None,
    *,
    fold_change=8.0,
    dispersion=0.5,
):
    """Sparse over-dispersed count matrix with block structure, of the size and sparsity of the Marques et al. data.

    Model (genes x cells by default; every cluster non-empty, sizes drawn from a Dirichlet(2) share)::

        gene module  k_i ~ cluster labels of the rows        cell type  l_j ~ cluster labels of the columns
        gene scale   g_i ~ LogNormal(0, 1)
        block level  B[k, l] = fold_change if l == k mod n_col_clusters else 1
        X[i, j]      ~ NegativeBinomial(mean = c * g_i * B[k_i, l_j], dispersion)   (gamma-Poisson; variance
                       mean + mean**2 / dispersion)

    The scalar ``c`` is solved (bisection) so that the expected share of non-zero cells equals ``density``. Since
    the mean is constant along a row within a column cluster, the matrix is drawn exactly without touching the zero
    cells: the number of non-zeros of row i in cluster l is Binomial(|l|, P(X > 0)), their columns are a uniform
    subset of the cluster, and their values are zero-truncated negative-binomial draws. Memory is that of the CSR
    result (about 12 bytes per non-zero: ~180 MB at the default size, ~14.5 million non-zeros).

    Parameters
    ----------
    n_rows, n_cols : int
        Genes and cells (defaults: 23,226 x 5,053 as in Marques et al. 2016).
    density : float in (0, 1)
        Expected share of non-zero cells (default 0.124, i.e. 87.6% zeros).
    n_row_clusters, n_col_clusters : int
        Gene modules and cell types; each must not exceed its axis length.
    random_state : None, int, RandomState or Generator
    fold_change : float > 0
        Mean of a module in its own cell type relative to elsewhere.
    dispersion : float > 0
        Negative-binomial size parameter (smaller is more over-dispersed). Few zeros at a small dispersion need
        enormous means (at density 0.124, dispersion 0.005 draws counts up to about 1e13); a dispersion too small
        for ``density``, whose counts would pass int64's range, is a ValueError.

    Returns
    -------
    X : scipy.sparse.csr_matrix of int64, shape (n_rows, n_cols)
        Sorted indices, no explicit zeros.
    row_labels : ndarray of int64, shape (n_rows,)
        Gene module of each row.
    col_labels : ndarray of int64, shape (n_cols,)
        Cell type of each column.
    """
    n_rows = check_int(n_rows, "n_rows", minimum=1)
    n_cols = check_int(n_cols, "n_cols", minimum=1)
    density = check_positive(density, "density")
    if density >= 1:
        raise ValueError(f"density must be in (0, 1), got {density!r}")
    n_row_clusters = check_int(n_row_clusters, "n_row_clusters", minimum=1)
    n_col_clusters = check_int(n_col_clusters, "n_col_clusters", minimum=1)
    if n_row_clusters > n_rows:
        raise ValueError(f"n_row_clusters={n_row_clusters} exceeds n_rows={n_rows}")
    if n_col_clusters > n_cols:
        raise ValueError(f"n_col_clusters={n_col_clusters} exceeds n_cols={n_cols}")
    fold_change = check_positive(fold_change, "fold_change")
    dispersion = check_positive(dispersion, "dispersion")
    rng = _as_generator(random_state)

    row_labels = _cluster_labels(n_rows, n_row_clusters, rng)
    col_labels = _cluster_labels(n_cols, n_col_clusters, rng)
    gene_scale = rng.lognormal(0.0, 1.0, size=n_rows)
    block_level = np.ones((n_row_clusters, n_col_clusters))
    block_level[np.arange(n_row_clusters), np.arange(n_row_clusters) % n_col_clusters] = fold_change
    relative_means = gene_scale[:, None] * block_level[row_labels]  # (n_rows, n_col_clusters)
    cluster_sizes = np.bincount(col_labels, minlength=n_col_clusters)

    def expected_density(log_scale):
        nonzero = _negative_binomial_nonzero_probability(np.exp(log_scale) * relative_means, dispersion)
        return float(nonzero.sum(axis=0) @ cluster_sizes) / (n_rows * n_cols)

    low, high = -50.0, 50.0
    for _ in range(80):  # halves a width of 100 in log-scale down to below 1e-20
        middle = 0.5 * (low + high)
        low, high = (middle, high) if expected_density(middle) < density else (low, middle)
    log_scale = 0.5 * (low + high)
    row_means = np.exp(log_scale) * relative_means
    if row_means.max() / dispersion > MAX_GAMMA_SCALE or not np.isclose(expected_density(log_scale), density):
        raise ValueError(
            f"dispersion={dispersion!r} is too small for density={density!r}: so few zeros would need counts "
            "beyond int64's range; raise dispersion or lower density"
        )

    nonzero_probability = _negative_binomial_nonzero_probability(row_means, dispersion)
    nonzeros_per_block = rng.binomial(cluster_sizes[None, :], nonzero_probability).astype(np.int64)
    indptr = np.zeros(n_rows + 1, dtype=np.int64)
    np.cumsum(nonzeros_per_block.sum(axis=1), out=indptr[1:])
    indices = np.empty(indptr[-1], dtype=np.int32)
    data = np.empty(indptr[-1], dtype=np.int64)
    columns_by_cluster = np.argsort(col_labels, kind="stable").astype(np.int32)
    cluster_offsets = np.concatenate([[0], np.cumsum(cluster_sizes)]).astype(np.int64)
    _fill_sparse_negative_binomial(
        indptr,
        nonzeros_per_block,
        columns_by_cluster,
        cluster_offsets,
        col_labels.astype(np.int64),
        row_means,
        dispersion,
        legacy_generator(int(rng.integers(2**31 - 1))),
        indices,
        data,
    )
    X = sp.csr_matrix((data, indices, indptr), shape=(n_rows, n_cols))
    X.has_sorted_indices = True
    return X, row_labels.astype(np.int64), col_labels.astype(np.int64)


# Where the condensed 20 Newsgroups file is published (Sam Roweis's data page, https://cs.nyu.edu/~roweis/data.html).
ROWEIS_20NEWS_URL = "https://cs.nyu.edu/~roweis/data/20news_w100.mat"


def load_20news_w100(path):
    """Condensed 20 Newsgroups (Sam Roweis's ``20news_w100.mat``, downloaded from ``ROWEIS_20NEWS_URL``): 100 words
    x 16,242 documents.

    Parameters
    ----------
    path : str or Path
        The MATLAB file (variables ``documents``, ``wordlist``, ``newsgroups``, ``groupnames``).

    Returns
    -------
    Bunch with
        data : scipy.sparse.csr_matrix of float64, shape (100, 16242)
            1 where the word occurs in the document (65,451 non-zeros).
        row_names : ndarray of str, shape (100,)
            The words.
        column_groups : ndarray of int64, shape (16242,)
            Meta-group of each document, 0..3.
        group_names : list of 4 str
            ``['comp.*', 'rec.*', 'sci.*', 'talk.*']``.
    """
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(f"{path} is a folder: give the 20news_w100.mat file in it")
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file (the 20news_w100.mat file of Sam Roweis's data page, "
                                f"{ROWEIS_20NEWS_URL})")
    try:
        contents = scipy.io.loadmat(str(path))
    except Exception as exc:  # noqa: BLE001 - any parse failure is reported as one line naming the file
        raise ValueError(f"{path}: not a readable MATLAB file ({type(exc).__name__}: {exc})") from None
    missing = [key for key in ("documents", "wordlist", "newsgroups", "groupnames") if key not in contents]
    if missing:
        raise ValueError(f"{path}: missing variable(s) {missing}; is this 20news_w100.mat?")
    data = sp.csr_matrix(contents["documents"], dtype=np.float64)
    words, group_names = _mat_strings(contents["wordlist"]), _mat_strings(contents["groupnames"])
    if words is None or group_names is None:
        raise ValueError(f"{path}: wordlist and groupnames must be cell arrays of strings; is this 20news_w100.mat?")
    groups = np.ravel(contents["newsgroups"]).astype(np.int64) - 1
    if data.shape != (words.size, groups.size):
        raise ValueError(
            f"{path}: documents has shape {data.shape} but there are {words.size} words and {groups.size} documents"
        )
    return Bunch(data=data, row_names=words, column_groups=groups, group_names=group_names.tolist())
