"""Input checks shared by every estimator: one clear ValueError that names the problem.

Nothing here modifies what the user passed: converted arrays are copies when a conversion is needed.
"""

from __future__ import annotations

import functools
import numbers

import numpy as np
import scipy.sparse as sp
from sklearn.utils.validation import validate_data

# Beyond this, float64 sums no longer hold every integer: the most counts a matrix may hold in total.
MAX_EXACT_TOTAL = 2**53
# How far from whole numbers values may be and still be taken for counts with rounding errors (in messages only).
NEAR_WHOLE = 1e-6


def _describe_position(X, mask_fn):
    """(row, col) of the first entry where ``mask_fn(values)`` holds, for error messages."""
    if sp.issparse(X):
        coo = X.tocoo()  # keeps duplicate entries, in the order of X.data
        bad = np.flatnonzero(mask_fn(coo.data))
        if bad.size == 0:
            return None
        return int(coo.row[bad[0]]), int(coo.col[bad[0]])
    bad = np.argwhere(mask_fn(X))
    if bad.size == 0:
        return None
    return tuple(int(v) for v in bad[0])


def _check_not_text(values, name):
    """TypeError when ``values`` holds text: numpy would read "1" as 1.0 and hide a table read as strings."""
    if values.dtype.kind in "US" or (
        values.dtype.kind == "O" and any(isinstance(value, (str, bytes)) for value in values.ravel())  # np.str_ too
    ):
        raise TypeError(f"{name} holds text, not numbers (dtype {values.dtype})")


def check_matrix(X, *, name="X", min_rows=1, min_cols=1, counts=False, dtype=np.float64):
    """Validate a 2-d numeric matrix and return it as CSR (if sparse) or a C-contiguous ndarray of ``dtype``.

    Parameters
    ----------
    X : array-like or scipy.sparse matrix, shape (n_rows, n_cols)
    name : str
        Used in error messages.
    min_rows, min_cols : int
        Minimum accepted shape.
    counts : bool
        If True, values must be non-negative integers (counts).

    Raises
    ------
    TypeError
        Non-numeric values.
    ValueError
        Empty input, wrong number of dimensions, NaN/inf, negative or non-integer values (when ``counts``),
        naming the first offending position.
    """
    if sp.issparse(X):
        if X.ndim != 2:
            raise ValueError(f"{name} must be 2-dimensional, got a sparse array with {X.ndim} dimensions")
        if np.iscomplexobj(X):
            raise ValueError(f"Complex data not supported: {name} has complex values")
        # Negative counts are looked for among the entries as stored: summing duplicates could hide one. They are
        # summed in ``dtype``: scipy would sum them in the stored one, where 8-bit integers wrap around.
        stored = X if X.format in ("csr", "csc", "coo", "bsr") else X.tocoo()
        out = sp.csr_matrix(stored.astype(dtype))
        out.sum_duplicates()
        out.eliminate_zeros()
        values = out.data
    else:
        if X is None:
            raise ValueError(f"{name} is None; expected a 2-d array")
        if all(hasattr(X, attribute) for attribute in ("obs", "var", "layers")):
            raise TypeError(
                f"{name} is an AnnData object; pass one of its matrices (adata.X is cells x genes; adata.X.T, "
                "adata.layers[...].T or adata.obsm[...]), or for CDP use conjoined.anndata.cdp(adata)"
            )
        try:
            raw = np.asarray(X)
        except (TypeError, ValueError) as exc:  # ragged nested sequences, among others
            raise TypeError(f"{name} must be numeric: {exc}") from None
        if np.iscomplexobj(raw):
            raise ValueError(f"Complex data not supported: {name} has complex values")
        _check_not_text(raw, name)
        if raw.dtype == object and hasattr(X, "columns"):
            # a DataFrame of nullable columns (Float64, Int64) holds pd.NA: as NaN, it is named as a NaN is
            try:
                raw = X.to_numpy(dtype=np.float64, na_value=np.nan)
            except (TypeError, ValueError):
                pass  # not numbers: named below
        try:
            out = np.array(raw, dtype=dtype, order="C", copy=True)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"{name} must be numeric: {exc}") from None
        if out.ndim != 2:
            raise ValueError(
                f"{name} must be 2-dimensional (n_samples, n_features), got shape {out.shape}. Reshape your data "
                "with X.reshape(-1, 1) (one feature) or X.reshape(1, -1) (one sample)"
            )
        values = stored = out
    n_rows, n_cols = out.shape
    if n_rows == 0 or n_cols == 0:
        raise ValueError(
            # rows and columns first: on the command line rows are often features (genes, words); scikit-learn's
            # checks read the rest
            f"{name} is empty: {n_rows} row(s) x {n_cols} column(s), {n_rows} sample(s) and {n_cols} feature(s) "
            f"(shape={out.shape}) while a minimum of 1 is required."
        )
    if n_rows < min_rows:
        raise ValueError(f"{name} has {n_rows} row(s) (n_samples = {n_rows}); at least {min_rows} are required")
    if n_cols < min_cols:
        raise ValueError(f"{name} has {n_cols} column(s) ({n_cols} feature(s)); at least {min_cols} are required")
    if not np.all(np.isfinite(values)):
        pos = _describe_position(out, lambda v: ~np.isfinite(v))
        raise ValueError(f"{name} contains non-finite values (NaN or inf), first at (row, col) = {pos}")
    if counts:
        check_non_negative(stored, name)
        if np.any(values != np.round(values)):
            pos = _describe_position(out, lambda v: v != np.round(v))
            raise ValueError(
                f"{name} contains non-integer values, first at (row, col) = {pos}: {float(out[pos])!r}; counts must "
                f"be whole numbers{rounding_hint(values, name)}"
            )
    return out


def rounding_hint(values, name):
    """For values within ``NEAR_WHOLE`` of whole numbers: that they are counts with rounding errors, and the way
    out; otherwise nothing."""
    if np.all(np.abs(values - np.round(values)) <= NEAR_WHOLE):
        return (f" (every value of {name} is within {NEAR_WHOLE:g} of a whole number: counts with rounding errors? "
                f"np.rint({name}) rounds them)")
    return ""


def check_non_negative(X, name="X"):
    """ValueError naming the first negative value of ``X``, a dense array or a sparse matrix as stored (summing
    its duplicate entries could hide one)."""
    if sp.issparse(X) and X.format not in ("csr", "csc", "coo", "bsr"):
        X = X.tocoo()
    if np.any((X.data if sp.issparse(X) else np.asarray(X)) < 0):
        pos = _describe_position(X, lambda v: v < 0)
        raise ValueError(
            f"{name} contains negative values (Negative values in data), first at (row, col) = {pos}; "
            "counts must be >= 0"
        )


def record_features(estimator, X, *, reset):
    """Set (``reset``) or check ``n_features_in_`` and ``feature_names_in_`` from the input as the user gave it.

    ``X`` is the caller's object before conversion, so a pandas DataFrame's column names are seen; the values are
    left to :func:`check_matrix`. As in scikit-learn, names that differ from those seen in fit are a ValueError,
    names given on one side only a warning.
    """
    validate_data(estimator, X, reset=reset, skip_check_array=True)


def string_names(labels):
    """A pandas index (a DataFrame's ``index`` or ``columns``) as an object array when its names are all strings
    (as scikit-learn takes column names), else None."""
    names = np.asarray(labels, dtype=object)
    return names if names.size and all(isinstance(name, str) for name in names) else None


def _string_index(X):
    """A pandas DataFrame's row names as an object array when they are all strings, else None."""
    if getattr(X, "index", None) is None or not hasattr(X, "columns"):
        return None
    return string_names(X.index)


def record_row_names(estimator, X, *, reset):
    """Set (``reset``) or check ``row_names_in_``, a DataFrame's row names, as :func:`record_features` does the
    column names: new columns over the fitted rows must name them alike, in the same order, where both are
    named."""
    names = _string_index(X)
    if reset:
        if names is None:
            vars(estimator).pop("row_names_in_", None)
        else:
            estimator.row_names_in_ = names
        return
    fitted = getattr(estimator, "row_names_in_", None)
    if names is None or fitted is None:
        return
    if len(names) == len(fitted) and not (names == fitted).all():
        first = int(np.flatnonzero(names != fitted)[0])
        raise ValueError(f"X's row names differ from those seen in fit: row {first} is {names[first]!r}, fitted "
                         f"{fitted[first]!r} (new columns are read over the fitted rows, in their order)")


def keeping_state_on_failure(fit):
    """Decorator of ``fit``: when it raises (bad input found late, a lost cluster, Ctrl-C), the estimator's
    attributes are put back as they were, so that a fitted estimator is not left half-updated (say, the new
    ``n_features_in_`` with the old clusters). ``fit`` must bind new objects to its attributes, not change the
    old ones in place."""

    @functools.wraps(fit)
    def wrapper(self, *args, **kwargs):
        before = dict(vars(self))
        try:
            return fit(self, *args, **kwargs)
        except BaseException:
            vars(self).clear()
            vars(self).update(before)
            raise

    return wrapper


def line_totals(X):
    """``(row totals (n_rows,), column totals (n_cols,))`` of a 2-d array or scipy.sparse matrix, as flat arrays."""
    return np.asarray(X.sum(axis=1)).ravel(), np.asarray(X.sum(axis=0)).ravel()


def is_count_matrix(X):
    """True when every stored value of ``X`` (dense or sparse) is a finite non-negative integer."""
    values = X.data if sp.issparse(X) else np.asarray(X)
    return bool(np.all(np.isfinite(values)) and np.all(values >= 0) and np.all(values == np.round(values)))


def _finite(value):
    """Whether the real number ``value`` is finite as a float (an int past the float range is not)."""
    try:
        return bool(np.isfinite(float(value)))
    except OverflowError:
        return False


def check_positive(value, name, *, allow_zero=False):
    """Raise ValueError unless ``value`` is a finite real number > 0 (or >= 0 with ``allow_zero``)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not _finite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    if value < 0 or (value == 0 and not allow_zero):
        raise ValueError(f"{name} must be {'>= 0' if allow_zero else '> 0'}, got {value!r}")
    return float(value)


def check_int(value, name, *, minimum=0):
    """Raise ValueError unless ``value`` is an integer >= ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def check_labels(labels, n, name):
    """``labels`` (n,) of a partition, checked: integers, cluster indices >= 0 or -1 for items set aside, at
    least one item in a cluster."""
    if labels is None:
        raise ValueError(f"{name} is required: the partition the blocks are made of")
    labels = np.asarray(labels)
    if labels.shape != (n,) or not np.issubdtype(labels.dtype, np.integer):
        raise ValueError(f"{name} must be an integer array of shape ({n},), got {labels.dtype} {labels.shape}")
    if labels.min() < -1 or labels.max() < 0:
        raise ValueError(f"{name} must hold cluster indices >= 0 (or -1 for items set aside)")
    return labels


def check_bool(value, name):
    """``value`` as a bool; ValueError unless it is True or False (a numpy bool, 0 or 1 included)."""
    if not (isinstance(value, (bool, np.bool_)) or (isinstance(value, numbers.Integral) and value in (0, 1))):
        raise ValueError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def check_verbose(value):
    """``verbose`` as a bool: True or False, or a non-negative integer level as in scikit-learn (0: quiet)."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    return check_int(value, "verbose (True, False or a level >= 0)") > 0
