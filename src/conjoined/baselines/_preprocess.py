"""Preprocessing the CDP paper applied before running each baseline, and the baselines' shared helpers.

The paper (Ngo et al., "Experimental Results") ran the R package biclust on count matrices transformed as
follows (read from the authors' simulation scripts): Cheng & Church on ``scale(X)`` (column z-scores of the
counts), Plaid on ``log(X + 1)``, Bimax on ``log(X + 1)`` passed straight to ``BCBimax``, whose C code
truncates every value to an integer and treats non-zero as 1: effectively ``log(X + 1) >= 1``, i.e. counts of
at least 2. Spectral ran on the raw counts with biclust's default log normalisation.

All of these transforms are dense by nature (``log1p`` keeps zeros, but standardising and the baselines
themselves do not), so every function here returns a dense float64 array: the baselines are meant for small
matrices such as the paper's simulations (at most 100 x 100), not for large sparse data."""

from __future__ import annotations

import numbers

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, BiclusterMixin

from .._validation import check_matrix, record_features

PREPROCESS_METHODS = (None, "log1p", "standardize", "binarize")


def _dense(X):
    return X.toarray() if sp.issparse(X) else np.asarray(X, dtype=np.float64)


def binarize_threshold(values, threshold):
    """The numeric cut-off for ``threshold`` ("median", "mean" of ``values``, or a finite number)."""
    if isinstance(threshold, str):
        if threshold == "median":
            return float(np.median(values))
        if threshold == "mean":
            return float(np.mean(values))
        raise ValueError(f"binarize threshold must be 'median', 'mean' or a number, got {threshold!r}")
    if isinstance(threshold, bool) or not isinstance(threshold, numbers.Real) or not np.isfinite(threshold):
        raise ValueError(f"binarize threshold must be 'median', 'mean' or a finite number, got {threshold!r}")
    return float(threshold)


def preprocess(X, method, *, threshold=1.0):
    """Transform a validated matrix as the paper did before a baseline; always returns a new dense array.

    Parameters
    ----------
    X : ndarray or scipy.sparse matrix, shape (n_rows, n_cols)
        Finite values (already checked by ``conjoined._validation.check_matrix``). Sparse input is densified.
    method : {None, "log1p", "standardize", "binarize"}
        - ``None``: the values as given (dense float64 copy).
        - ``"log1p"``: ``log(X + 1)`` (Plaid in the paper). Needs ``X >= 0``.
        - ``"standardize"``: every column of ``X`` itself (no log) centred to mean 0 and scaled to unit sample
          standard deviation (``ddof=1``), as R's ``scale()`` does; a constant column becomes all zeros
          instead of R's NaN. This is the "standardised matrix" the paper gave Cheng & Church.
        - ``"binarize"``: ``log(X + 1) > t`` as 0.0 / 1.0 (Bimax in the paper), ``t`` from ``threshold``.
          Needs ``X >= 0``.
    threshold : float or {"median", "mean"}, default=1.0
        Only for ``"binarize"``: the cut-off ``t`` on the ``log(X + 1)`` scale (strictly greater values become
        1). The default 1.0 reproduces what the paper's ``BCBimax(log(X + 1))`` call did (for counts:
        ``X >= 2``). ``"median"`` is the default of biclust's ``binarize()`` (for count matrices that are more
        than half zeros it gives ``X > 0``); ``"mean"`` uses the mean of ``log(X + 1)``.

    Returns
    -------
    ndarray of float64, shape (n_rows, n_cols)
    """
    if method not in PREPROCESS_METHODS:
        raise ValueError(f"preprocess must be one of {PREPROCESS_METHODS}, got {method!r}")
    values = _dense(X).astype(np.float64, copy=True)
    if method is None:
        return values
    if method == "standardize":
        centred = values - values.mean(axis=0)
        scale = values.std(axis=0, ddof=1) if values.shape[0] > 1 else np.zeros(values.shape[1])
        return np.divide(centred, scale, out=np.zeros_like(centred), where=scale > 0)
    if np.any(values < 0):
        raise ValueError(
            f"preprocess={method!r} takes log(X + 1) and needs non-negative data (counts); "
            "X has negative values (Negative values in data)"
        )
    logged = np.log1p(values)
    if method == "log1p":
        return logged
    return (logged > binarize_threshold(logged, threshold)).astype(np.float64)


class Baseline(BiclusterMixin, BaseEstimator):
    """What the baselines share as scikit-learn estimators: dense or sparse input (densified, module docstring),
    the features of the data they were fitted on recorded, and their input tagged non-negative where their
    preprocessing takes a log (``log1p``, ``binarize``)."""

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.input_tags.positive_only = getattr(self, "preprocess", None) in ("log1p", "binarize")
        return tags


def validate_input(estimator, X, *, min_rows=2, min_cols=2, counts=False):
    """``check_matrix`` for the baselines (real values, or counts with ``counts``; finite, non-empty, at least
    ``min_rows`` x ``min_cols``), recording the features of ``X`` on ``estimator``."""
    checked = check_matrix(X, name="X", min_rows=min_rows, min_cols=min_cols, counts=counts)
    record_features(estimator, X, reset=True)
    return checked


def as_generator(random_state):
    """``numpy.random.Generator`` from None, an int, a ``RandomState`` or a ``Generator`` (returned as is)."""
    if isinstance(random_state, np.random.Generator):
        return random_state
    if isinstance(random_state, np.random.RandomState):
        return np.random.default_rng(random_state.randint(np.iinfo(np.int32).max))
    is_int = isinstance(random_state, numbers.Integral) and not isinstance(random_state, bool)
    if is_int and random_state < 0:
        raise ValueError(f"random_state must be an integer seed >= 0, got {random_state!r}")
    if random_state is None or is_int:
        return np.random.default_rng(random_state)
    raise ValueError(f"random_state must be None, an int, a RandomState or a Generator, got {random_state!r}")


def empty_biclusters(n_rows, n_cols):
    """Boolean ``(rows, columns)`` of shapes (0, n_rows) and (0, n_cols): the result when nothing is found."""
    return np.zeros((0, n_rows), dtype=bool), np.zeros((0, n_cols), dtype=bool)
