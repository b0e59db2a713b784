"""Scores comparing found biclusters with true ones.

A set of biclusters is given as a ``(rows, columns)`` pair of bool arrays of shapes (n_biclusters, n_rows) and
(n_biclusters, n_cols), the format of :func:`sklearn.metrics.consensus_score` and of ``model.biclusters_``.
"""

from __future__ import annotations

import functools

import numpy as np
from scipy.optimize import linear_sum_assignment
from sklearn.metrics import consensus_score as _sklearn_consensus_score

__all__ = ["consensus_score", "jaccard_score", "recovery_score", "relevance_score"]


def _check_biclusters(biclusters, name):
    """``(rows, columns)`` as 2-d bool arrays with one line per bicluster.

    Empty input is no bicluster: 2-d arrays of shapes (0, n_rows) and (0, n_cols) keep their widths (checked
    against the other set's); anything else empty, such as ``([], [])``, becomes two (0, 0) arrays."""
    pairs_hint = ("; a list of one (rows, columns) pair per bicluster is not read: stack each side, "
                  "tuple(np.array(side) for side in zip(*pairs))")
    try:
        rows, columns = biclusters
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a (rows, columns) pair of bool arrays{pairs_hint}") from None
    try:
        rows = np.asarray(rows)
        columns = np.asarray(columns)
    except ValueError:
        raise ValueError(
            f"{name} rows and columns must be bool masks of shapes (n_biclusters, n_rows) and (n_biclusters, "
            f"n_cols), not lists of indices of different lengths{pairs_hint}"
        ) from None
    if rows.size == 0 and columns.size == 0 and not rows.ndim == columns.ndim == 2:
        return np.zeros((0, 0), dtype=bool), np.zeros((0, 0), dtype=bool)
    for what, array in (("rows", rows), ("columns", columns)):
        if not (array.size == 0 or array.dtype == bool
                or (array.dtype.kind in "iu" and np.isin(array, (0, 1)).all())):
            raise ValueError(
                f"{name} {what} must be a bool (or 0/1) array, True for a member of the bicluster; got dtype "
                f"{array.dtype}" + (" with values other than 0 and 1 (index lists are not accepted: give masks)"
                                    if array.dtype.kind in "iu" else "")
            )
    rows, columns = rows.astype(bool), columns.astype(bool)
    if rows.ndim != 2 or columns.ndim != 2 or rows.shape[0] != columns.shape[0]:
        raise ValueError(
            f"{name}: rows and columns must be 2-d with one line per bicluster, got shapes {rows.shape} and "
            f"{columns.shape}"
        )
    return rows, columns


def _check_pair(found, truth):
    """Validated (found, truth); ValueError if they describe different matrix shapes (an empty set given as 2-d
    arrays included)."""
    found = _check_biclusters(found, "found")
    truth = _check_biclusters(truth, "truth")
    if found[0].shape != (0, 0) and truth[0].shape != (0, 0):
        for what, a, b in (("rows", found[0], truth[0]), ("columns", found[1], truth[1])):
            if a.shape[1] != b.shape[1]:
                raise ValueError(
                    f"found and truth describe different numbers of {what}: {a.shape[1]} vs {b.shape[1]}"
                )
    return found, truth


def _zero_for_an_empty_set(score):
    """``score(found, truth, **options)`` on the two sets checked by :func:`_check_pair`; 0.0 without calling it
    when either set is empty."""

    @functools.wraps(score)
    def checked(found, truth, **options):
        found, truth = _check_pair(found, truth)
        if not (len(found[0]) and len(truth[0])):
            return 0.0
        return score(found, truth, **options)

    return checked


def _jaccard_from_sizes(intersection, size_a, size_b):
    """|a ∩ b| / |a ∪ b| from the intersection sizes (n_a, n_b) and the set sizes; 1 where both sets are empty
    (equal sets), so that a set of biclusters scores 1 against itself even when one of them is empty."""
    union = size_a[:, None] + size_b[None, :] - intersection
    return np.divide(intersection, union, out=np.ones(intersection.shape), where=union > 0)


def _row_jaccard(a, b):
    """Jaccard index between the row sets of every bicluster of ``a`` and of ``b``, shape (n_a, n_b)."""
    a, b = a[0].astype(np.int64), b[0].astype(np.int64)
    return _jaccard_from_sizes(a @ b.T, a.sum(axis=1), b.sum(axis=1))


def _cell_jaccard(a, b):
    """Jaccard index between the cell sets (rows x columns) of every bicluster of ``a`` and of ``b``."""
    (a_rows, a_columns), (b_rows, b_columns) = ((m.astype(np.int64) for m in pair) for pair in (a, b))
    intersection = (a_rows @ b_rows.T) * (a_columns @ b_columns.T)
    a_size = a_rows.sum(axis=1) * a_columns.sum(axis=1)
    b_size = b_rows.sum(axis=1) * b_columns.sum(axis=1)
    return _jaccard_from_sizes(intersection, a_size, b_size)


def _mean_best_match(similarity):
    """Mean over the lines of the best similarity in that line."""
    return float(similarity.max(axis=1).mean())


@_zero_for_an_empty_set
def jaccard_score(found, truth):
    """The paper's score: symmetric mean best-match Jaccard index between biclusters as sets of cells.

    ``S(A, B) = mean over a in A of max over b in B of |a ∩ b| / |a ∪ b|`` and
    ``J = min(S(found, truth), S(truth, found))``; 0.0 if either set of biclusters is empty.

    Parameters
    ----------
    found, truth : (rows, columns)
        Bool arrays of shapes (n_biclusters, n_rows) and (n_biclusters, n_cols).

    Returns
    -------
    float in [0, 1]
    """
    similarity = _cell_jaccard(found, truth)
    return min(_mean_best_match(similarity), _mean_best_match(similarity.T))


@_zero_for_an_empty_set
def consensus_score(found, truth, *, similarity="jaccard"):
    """Hochreiter et al.'s consensus score of two sets of biclusters, as sklearn computes it; 0.0 if either set
    is empty.

    The biclusters of ``found`` and ``truth`` are matched one to one (Hungarian algorithm) by ``similarity``
    ("jaccard", or a function of two biclusters' rows and columns), and the matched similarities summed and
    divided by the larger set's size (:func:`sklearn.metrics.consensus_score`). The sets are checked as for
    :func:`jaccard_score`; sklearn refuses an empty set, which a fit that finds no bicluster gives. "jaccard" is
    :func:`jaccard_score`'s index between cell sets, 1 between two empty biclusters (sklearn's is 0 / 0 there,
    which its matching refuses).

    Returns
    -------
    float in [0, 1]
    """
    if isinstance(similarity, str) and similarity == "jaccard":
        matrix = _cell_jaccard(found, truth)
        matched = linear_sum_assignment(matrix, maximize=True)
        return float(matrix[matched].sum() / max(matrix.shape))
    return float(_sklearn_consensus_score(found, truth, similarity=similarity))


@_zero_for_an_empty_set
def relevance_score(found, truth):
    """Average bicluster relevance of Prelic et al. (2006): ``S_G(found, truth)``.

    For each found bicluster, the best Jaccard index between its row set and the row set of a true bicluster,
    averaged over the found biclusters (the paper's gene-dimension match score: columns are not compared). High
    when every found bicluster resembles some true one. 0.0 if either set is empty.
    """
    return _mean_best_match(_row_jaccard(found, truth))


@_zero_for_an_empty_set
def recovery_score(found, truth):
    """Average module recovery of Prelic et al. (2006): ``S_G(truth, found)``.

    For each true bicluster, the best Jaccard index between its row set and the row set of a found bicluster,
    averaged over the true biclusters (rows only, as in the paper). High when every true bicluster is found. 0.0 if
    either set is empty.
    """
    return _mean_best_match(_row_jaccard(truth, found))
