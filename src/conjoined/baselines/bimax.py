"""Bimax (Prelic et al. 2006): every inclusion-maximal all-ones submatrix of a binary matrix."""

from __future__ import annotations

import warnings

import numpy as np
import scipy.sparse as sp

from .._validation import check_int, keeping_state_on_failure
from ._preprocess import Baseline, empty_biclusters, preprocess, validate_input


def _column_masks(B):
    """Each row of the 0/1 matrix ``B`` as a Python int whose bit ``j`` is ``B[i, j]``."""
    weights = 1 << np.arange(B.shape[1], dtype=object)
    return [int(np.sum(weights[np.flatnonzero(row)])) for row in B]


def _bits(mask, n):
    return np.array([(mask >> j) & 1 for j in range(n)], dtype=bool)


def _enumerate_maximal(row_masks, n_cols, min_rows, min_cols, limit):
    """Prelic's divide and conquer over rows given as column bitmasks.

    A problem is ``(rows, columns, required)``: candidate row indices, a column bitmask, and a tuple of column
    bitmasks every bicluster of the problem must intersect (the "Z" sets that keep the two halves of a split
    from reporting the same bicluster twice). Returns ``[(row_index_list, column_mask), ...]`` in discovery
    order.
    """
    found = []
    stack = [(list(range(len(row_masks))), (1 << n_cols) - 1, ())]
    while stack and (limit is None or len(found) < limit):
        rows, columns, required = stack.pop()
        if columns.bit_count() < min_cols:
            continue
        # reduce: a row can only belong to a bicluster of this problem if it has a one in every required set
        rows = [
            i for i in rows
            if row_masks[i] & columns and all(row_masks[i] & columns & z for z in required)
        ]
        if len(rows) < min_rows:
            continue
        mixed = next((i for i in rows if row_masks[i] & columns != columns), None)
        if mixed is None:
            found.append((rows, columns))
            continue
        left = row_masks[mixed] & columns  # C_U: the columns where the split row has ones
        right = columns & ~left  # C_V
        in_left, in_right, in_both = [], [], []
        for i in rows:
            ones = row_masks[i] & columns
            if ones & right == 0:
                in_left.append(i)
            elif ones & left == 0:
                in_right.append(i)
            else:
                in_both.append(i)
        # pushed in reverse so that the C_U half is explored first, as in the recursive formulation
        if in_right and not in_both:
            stack.append((in_right, right, required))
        elif in_both:
            stack.append((in_both + in_right, columns, required + (right,)))
        stack.append((in_left + in_both, left, required))
    return found


class Bimax(Baseline):
    """All inclusion-maximal biclusters of ones in a binary matrix (Bimax, Prelic et al. 2006).

    The divide and conquer of Prelic et al.: pick a row with both zeros and ones among the current columns;
    its ones ``C_U`` and zeros ``C_V`` split the columns. Rows with ones only in ``C_U`` (``G_U``), only in
    ``C_V`` (``G_V``) or in both (``G_W``) define two sub-problems: ``(G_U + G_W) x C_U`` and
    ``(G_W + G_V) x all columns`` restricted to biclusters that use at least one column of ``C_V`` (or simply
    ``G_V x C_V`` when ``G_W`` is empty). Every maximal all-ones bicluster with at least ``min_rows`` rows and
    ``min_cols`` columns is reported exactly once and nothing non-maximal is reported. The number of maximal
    biclusters can grow exponentially with the matrix size: ``max_biclusters`` stops the enumeration early
    (biclust's ``BCBimax`` used ``number=100``).

    Parameters
    ----------
    min_rows, min_cols : int, default=2
        Smallest bicluster reported (>= 1).
    max_biclusters : int or None, default=None
        Stop after this many biclusters (in the order the depth-first search finds them); None: all of them.
    preprocess : {"binarize", None}, default="binarize"
        ``"binarize"``: ``log(X + 1) > binarize_threshold`` (X must be non-negative, e.g. counts). ``None``:
        ``X`` is already binary and must contain only 0 and 1.
    binarize_threshold : float or {"median", "mean"}, default=1.0
        Cut-off on the ``log(X + 1)`` scale for ``preprocess="binarize"``: cells strictly above it become 1.
        The default is what the paper's call ``BCBimax(log(X + 1))`` did in effect (biclust truncates the
        values to integers and treats non-zero as 1): counts >= 2. ``"median"`` is biclust's ``binarize()``
        default.

    Attributes
    ----------
    rows_ : ndarray of bool, shape (n_biclusters_, n_rows)
    columns_ : ndarray of bool, shape (n_biclusters_, n_cols)
    n_biclusters_ : int
        Number of biclusters found.
    binary_matrix_ : ndarray of bool, shape (n_rows, n_cols)
        The binary matrix that was searched.

    Notes
    -----
    Input is densified (see ``conjoined.baselines._preprocess``). Runs in pure Python on rows stored as column
    bitmasks: intended for the small matrices of the paper's simulations.

    References
    ----------
    Prelic, A., Bleuler, S., Zimmermann, P., Wille, A., Buhlmann, P., Gruissem, W., Hennig, L., Thiele, L. and
    Zitzler, E. (2006). A systematic comparison and evaluation of biclustering methods for gene expression
    data. Bioinformatics 22(9), 1122-1129.
    """

    def __init__(self, min_rows=2, min_cols=2, max_biclusters=None, preprocess="binarize",
                 binarize_threshold=1.0):
        self.min_rows = min_rows
        self.min_cols = min_cols
        self.max_biclusters = max_biclusters
        self.preprocess = preprocess
        self.binarize_threshold = binarize_threshold

    @keeping_state_on_failure
    def fit(self, X, y=None):
        """Find the maximal all-ones biclusters of ``X`` (binarised first unless ``preprocess=None``).

        Parameters
        ----------
        X : array-like or sparse matrix, shape (n_rows, n_cols)
        y : ignored

        Returns
        -------
        self
        """
        min_rows = check_int(self.min_rows, "min_rows", minimum=1)
        min_cols = check_int(self.min_cols, "min_cols", minimum=1)
        limit = None if self.max_biclusters is None else check_int(self.max_biclusters, "max_biclusters")
        if self.preprocess not in ("binarize", None):
            raise ValueError(f"preprocess must be 'binarize' or None, got {self.preprocess!r}")
        data = validate_input(self, X, min_rows=1, min_cols=1)
        if self.preprocess is None:
            binary = preprocess(data, None)
            if not np.all((binary == 0) | (binary == 1)):
                raise ValueError(
                    "X must contain only 0 and 1 when preprocess=None; use preprocess='binarize' for counts"
                )
        else:
            binary = preprocess(data, "binarize", threshold=self.binarize_threshold)
            if not binary.any() and (data.data if sp.issparse(data) else data).any():
                warnings.warn(
                    f"binarizing X at log(X + 1) > {self.binarize_threshold} leaves no 1 (is X already 0/1? then "
                    "pass preprocess=None): no bicluster can be found", UserWarning, stacklevel=3)
        binary = binary.astype(bool)
        n_rows, n_cols = binary.shape

        found = []
        if limit != 0:
            found = _enumerate_maximal(_column_masks(binary), n_cols, min_rows, min_cols, limit)
        if found:
            rows = np.zeros((len(found), n_rows), dtype=bool)
            for b, (row_index, _) in enumerate(found):
                rows[b, row_index] = True
            columns = np.array([_bits(mask, n_cols) for _, mask in found], dtype=bool)
        else:
            rows, columns = empty_biclusters(n_rows, n_cols)
        self.rows_, self.columns_ = rows, columns
        self.n_biclusters_ = len(found)
        self.binary_matrix_ = binary
        return self
