"""Cheng & Church (2000) biclustering: greedy search for submatrices with a small mean squared residue."""

from __future__ import annotations

import warnings

import numpy as np

from .._validation import check_bool, check_int, check_positive, keeping_state_on_failure
from ._preprocess import Baseline, as_generator, empty_biclusters, preprocess, validate_input

# Relative round-off tolerance of the comparisons with H (``ChengChurch.fit``).
ROUND_OFF = 1e-20


def _residue_scores(A, rows, columns):
    """Mean squared residue H(I, J) of ``A[rows][:, columns]`` and its row and column means d(i), d(j).

    The residue of a cell is ``a_ij - a_iJ - a_Ij + a_IJ`` (row mean, column mean and overall mean of the
    submatrix). Returns ``(H, d_rows (|I|,), d_columns (|J|,))``.
    """
    sub = A[np.ix_(rows, columns)]
    row_mean = sub.mean(axis=1, keepdims=True)
    column_mean = sub.mean(axis=0, keepdims=True)
    squared = (sub - row_mean - column_mean + sub.mean()) ** 2
    return squared.mean(), squared.mean(axis=1), squared.mean(axis=0)


def _multiple_node_deletion(A, rows, columns, max_msr, alpha, min_size):
    """Cheng & Church Algorithm 2: drop every row (column) whose d exceeds ``alpha * H``, while there are more
    than ``min_size`` rows (columns) and H exceeds ``max_msr`` (which includes the round-off tolerance, see
    ``ChengChurch.fit``). Updates the boolean masks in place."""
    while True:
        msr, d_rows, _ = _residue_scores(A, rows, columns)
        if msr <= max_msr:
            return
        removed = False
        if rows.sum() > min_size:
            drop = d_rows > alpha * msr
            if drop.any():
                rows[np.flatnonzero(rows)[drop]] = False
                removed = True
                msr, _, _ = _residue_scores(A, rows, columns)
        if columns.sum() > min_size:
            _, _, d_columns = _residue_scores(A, rows, columns)
            drop = d_columns > alpha * msr
            if drop.any():
                columns[np.flatnonzero(columns)[drop]] = False
                removed = True
        if not removed:
            return


def _single_node_deletion(A, rows, columns, max_msr):
    """Cheng & Church Algorithm 1: remove the single row or column with the largest d until H <= ``max_msr``
    (or a single row or column is left). Updates the masks in place."""
    while rows.sum() > 1 and columns.sum() > 1:
        msr, d_rows, d_columns = _residue_scores(A, rows, columns)
        if msr <= max_msr:
            return
        if d_rows.max() > d_columns.max():
            rows[np.flatnonzero(rows)[np.argmax(d_rows)]] = False
        else:
            columns[np.flatnonzero(columns)[np.argmax(d_columns)]] = False


def _node_addition(A, rows, columns, add_inverted_rows, tolerance):
    """Cheng & Church Algorithm 3: add every column, then every row, whose mean squared residue against the
    bicluster is at most H(I, J) (plus the round-off ``tolerance``); optionally add rows whose mirror image
    (negated row) qualifies. Repeats until nothing is added. Updates the masks in place and returns the per-row
    sign (+1, or -1 for inverted rows)."""
    sign = np.ones(A.shape[0])
    while True:
        n_before = rows.sum() + columns.sum()
        W = A * sign[:, None]
        msr, _, _ = _residue_scores(W, rows, columns)
        row_mean = W[:, columns].mean(axis=1)
        column_mean = W[rows].mean(axis=0)
        overall = W[np.ix_(rows, columns)].mean()
        residue = W[rows] - row_mean[rows, None] - column_mean + overall
        columns |= (residue**2).mean(axis=0) <= msr + tolerance

        msr, _, _ = _residue_scores(W, rows, columns)
        row_mean = W[:, columns].mean(axis=1)
        column_mean = W[rows][:, columns].mean(axis=0)
        overall = W[np.ix_(rows, columns)].mean()
        outside = ~rows
        W_out = W[np.ix_(outside, columns)]
        score = ((W_out - row_mean[outside, None] - column_mean + overall) ** 2).mean(axis=1)
        add = score <= msr + tolerance
        if add_inverted_rows:
            inverted_score = ((-W_out + row_mean[outside, None] - column_mean + overall) ** 2).mean(axis=1)
            inverted = ~add & (inverted_score <= msr + tolerance)
            sign[np.flatnonzero(outside)[inverted]] = -1.0
            add |= inverted
        rows[np.flatnonzero(outside)[add]] = True
        if rows.sum() + columns.sum() == n_before:
            return sign


class ChengChurch(Baseline):
    """Cheng & Church (2000) biclustering by mean squared residue.

    The mean squared residue of a submatrix (I, J) is
    ``H(I, J) = mean_{i in I, j in J} (a_ij - a_iJ - a_Ij + a_IJ)^2``: 0 for a perfectly additive bicluster
    (constant rows, columns or cells included). Each bicluster is found greedily from the whole matrix:
    multiple node deletion (Algorithm 2, only on a dimension with more than ``multiple_deletion_min_size``
    elements), single node deletion (Algorithm 1) until ``H <= max_msr``, then node addition (Algorithm 3),
    optionally with inverted rows. Before the next search the found submatrix is overwritten by random values
    drawn uniformly between the minimum and maximum of the (preprocessed) data, so it is not found again. The
    search stops early when a bicluster would have fewer than 2 rows or 2 columns (as in biclust's ``BCCC``).

    The defaults are the CDP paper's call, ``BCCC(scale(X), delta=1)``, for its comparison: on column z-scores
    the whole matrix has a mean squared residue below 1, so its first bicluster is the whole matrix and the
    others are found in the masking values, whatever the data (``fit`` warns). On data of your own, choose
    ``max_msr`` below the whole matrix's residue.

    Parameters
    ----------
    n_biclusters : int, default=5
        Number of biclusters to search for (the CDP paper used 5).
    max_msr : float, default=1.0
        delta: the largest mean squared residue accepted (biclust's ``BCCC`` default).
    deletion_threshold : float, default=1.5
        alpha (>= 1) of multiple node deletion (biclust's default; Cheng & Church used 1.2 on yeast data).
    multiple_deletion_min_size : int, default=100
        Multiple node deletion removes rows (columns) only while there are more than this many; below it only
        single node deletion is used (the threshold of Cheng & Church's experiments and of biclust). With this
        default the paper's simulations (at most 100 x 100) use single node deletion only.
    add_inverted_rows : bool, default=True
        Node addition may also add a row whose negation fits the bicluster (Cheng & Church's "inverted rows").
    preprocess : {"standardize", "log1p", None, "binarize"}, default="standardize"
        Transformation applied first (see ``conjoined.baselines._preprocess.preprocess``); the paper ran Cheng
        & Church on the column-standardised matrix.
    random_state : None, int, RandomState or Generator
        Draws the masking values.

    Attributes
    ----------
    rows_ : ndarray of bool, shape (n_biclusters_, n_rows)
    columns_ : ndarray of bool, shape (n_biclusters_, n_cols)
    n_biclusters_ : int
        Number of biclusters found (<= n_biclusters).
    inverted_rows_ : ndarray of bool, shape (n_biclusters_, n_rows)
        Rows added to a bicluster as mirror images.
    msr_ : ndarray of float, shape (n_biclusters_,)
        Mean squared residue of each bicluster (with its inverted rows negated) when it was found.

    Notes
    -----
    Input is densified (see ``conjoined.baselines._preprocess``); every step costs O(n_rows * n_cols).
    Node addition scores a candidate column over the bicluster's rows and a candidate row over its columns, as
    in the paper (biclust's implementation sums over all rows/columns instead).

    References
    ----------
    Cheng, Y. and Church, G. M. (2000). Biclustering of expression data. Proceedings of the Eighth
    International Conference on Intelligent Systems for Molecular Biology (ISMB), 93-103.
    """

    def __init__(self, n_biclusters=5, max_msr=1.0, deletion_threshold=1.5, multiple_deletion_min_size=100,
                 add_inverted_rows=True, preprocess="standardize", random_state=None):
        self.n_biclusters = n_biclusters
        self.max_msr = max_msr
        self.deletion_threshold = deletion_threshold
        self.multiple_deletion_min_size = multiple_deletion_min_size
        self.add_inverted_rows = add_inverted_rows
        self.preprocess = preprocess
        self.random_state = random_state

    @keeping_state_on_failure
    def fit(self, X, y=None):
        """Search ``X`` for up to ``n_biclusters`` biclusters with mean squared residue <= ``max_msr``.

        Parameters
        ----------
        X : array-like or sparse matrix, shape (n_rows, n_cols)
            Real values, finite, at least 2 x 2.
        y : ignored

        Returns
        -------
        self
        """
        n_biclusters = check_int(self.n_biclusters, "n_biclusters", minimum=1)
        max_msr = check_positive(self.max_msr, "max_msr", allow_zero=True)
        alpha = check_positive(self.deletion_threshold, "deletion_threshold")
        if alpha < 1:
            raise ValueError(f"deletion_threshold must be >= 1, got {self.deletion_threshold!r}")
        min_size = check_int(self.multiple_deletion_min_size, "multiple_deletion_min_size", minimum=1)
        add_inverted_rows = check_bool(self.add_inverted_rows, "add_inverted_rows")
        A = preprocess(validate_input(self, X), self.preprocess)
        rng = as_generator(self.random_state)
        low, high = A.min(), A.max()
        # Squared residues that are 0 in exact arithmetic (an exactly additive block) come out near eps^2 times
        # the squared values, at random above or below H: a tolerance far above that, far below any real residue.
        tolerance = ROUND_OFF * float(np.mean(A**2))
        n_rows, n_cols = A.shape
        whole_msr = _residue_scores(A, np.ones(n_rows, bool), np.ones(n_cols, bool))[0]
        if whole_msr <= max_msr + tolerance:
            warnings.warn(
                f"the whole matrix (preprocess={self.preprocess!r}) has a mean squared residue of "
                f"{whole_msr:.3g}, within max_msr={max_msr:g}: it is the first bicluster, and the next ones "
                f"are searched in the random values that mask it. Choose max_msr below {whole_msr:.3g} "
                "(Cheng & Church chose delta for each data set; on column-standardised data, the CDP paper's "
                "setting, the whole matrix is always below 1).", UserWarning, stacklevel=3)

        found_rows, found_columns, found_inverted, found_msr = [], [], [], []
        for _ in range(n_biclusters):
            rows = np.ones(n_rows, dtype=bool)
            columns = np.ones(n_cols, dtype=bool)
            _multiple_node_deletion(A, rows, columns, max_msr + tolerance, alpha, min_size)
            _single_node_deletion(A, rows, columns, max_msr + tolerance)
            if rows.sum() < 2 or columns.sum() < 2:
                break
            sign = _node_addition(A, rows, columns, add_inverted_rows, tolerance)
            found_rows.append(rows)
            found_columns.append(columns)
            found_inverted.append(sign < 0)
            found_msr.append(_residue_scores(A * sign[:, None], rows, columns)[0])
            A[np.ix_(rows, columns)] = rng.uniform(low, high, size=(rows.sum(), columns.sum()))

        if found_rows:
            self.rows_, self.columns_ = np.array(found_rows), np.array(found_columns)
            self.inverted_rows_ = np.array(found_inverted)
        else:
            self.rows_, self.columns_ = empty_biclusters(n_rows, n_cols)
            self.inverted_rows_ = np.zeros((0, n_rows), dtype=bool)
        self.msr_ = np.array(found_msr, dtype=np.float64)
        self.n_biclusters_ = len(found_rows)
        return self
