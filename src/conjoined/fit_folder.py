"""A fit's folder: what ``conjoined fit`` writes (the :mod:`conjoined.cli` module docstring lists its files), what
``conjoined predict`` and ``conjoined plot`` read, and :func:`save_fit`, which writes one of a fit made in Python.
"""

from __future__ import annotations

import inspect
import json
import warnings
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import scipy.sparse as sp

from . import __version__
from ._validation import check_matrix, record_features, record_row_names
from .cdp import (
    AllZeroWarning,
    ConjoinedDirichletProcess,
    bicluster_members,
    fitted_classifiers,
    pair_cluster_masks,
    renamed_labels,
    repeatable_params,
)
from .io import (
    _npz_failure,
    atomic_output_dir,
    atomic_output_files,
    unique_names,
    write_json,
    write_table_csv,
    writing_results,
)
from .plot import name_fontsize, plot_biclusters, plot_k_trace, plot_membership, plot_theta
from .predict import label_probabilities

__all__ = ["draw_pictures", "load_fit", "save_fit"]


PICTURES = ("heatmap", "k_trace", "theta", "membership")


PICTURE_DPI = 120


HEATMAP_MAX_BICLUSTERS = 10


# Every array of model.npz: its kind and shape. A named size takes its value from the first array that has it.
_MODEL_LAYOUT = {
    "row_labels_": ("integer", ("n_rows",)),
    "column_labels_": ("integer", ("n_columns",)),
    "mixture_row_labels_": ("integer", ("n_rows",)),
    "mixture_column_labels_": ("integer", ("n_columns",)),
    "row_names": ("string", ("n_rows",)),
    "column_names": ("string", ("n_columns",)),
    "rows_": ("bool", ("n_biclusters", "n_rows")),
    "columns_": ("bool", ("n_biclusters", "n_columns")),
    "bicluster_pairs_": ("integer", ("n_biclusters", 2)),
    "bicluster_strength_": ("float", ("n_biclusters",)),
    "bicluster_row_clusters_": ("bool", ("n_biclusters", "n_joinable_row_clusters")),
    "bicluster_column_clusters_": ("bool", ("n_biclusters", "n_joinable_column_clusters")),
    "theta_": ("float", ("K_r", "K_c")),
    "row_membership_": ("float", ("n_rows", "K_r")),
    "column_membership_": ("float", ("n_columns", "K_c")),
    "n_row_clusters_": ("integer", ()),
    "n_column_clusters_": ("integer", ()),
    "row_k_trace": ("integer", ("n_row_iterations",)),
    "column_k_trace": ("integer", ("n_column_iterations",)),
    "row_k_values": ("integer", ("n_row_k_values",)),
    "row_k_probabilities": ("float", ("n_row_k_values",)),
    "column_k_values": ("integer", ("n_column_k_values",)),
    "column_k_probabilities": ("float", ("n_column_k_values",)),
}


_DTYPE_KINDS = {"string": "U", "integer": "iu", "bool": "b", "float": "f"}


# The fitted CDP's array attributes (sklearn's trailing underscore) that model.npz keeps as they are, for
# ``conjoined plot``; the rest of the layout is built from the fit (K traces and posteriors, names, K as a scalar).
_SAVED_ATTRIBUTES = tuple(name for name, (_, dims) in _MODEL_LAYOUT.items() if name.endswith("_") and dims)


# PDF and SVG files carry their creation date unless told not to, and SVG random ids unless salted: without both,
# the same fit draws the same bytes.
_UNDATED = {"pdf": {"CreationDate": None}, "svg": {"Date": None}}


def _bicluster_records(model, row_names, column_names):
    """One dict per bicluster for biclusters.json (see the module docstring)."""
    records = []
    for b, (k, l) in enumerate(np.asarray(model.bicluster_pairs_)):
        record = {
            "index": b,
            "pair": [int(k), int(l)],
            "row_clusters": np.flatnonzero(model.bicluster_row_clusters_[b]).tolist(),
            "column_clusters": np.flatnonzero(model.bicluster_column_clusters_[b]).tolist(),
            "strength": float(model.bicluster_strength_[b]),
        }
        for side, (members, membership), names in zip(("row", "column"), bicluster_members(model, b),
                                                     (row_names, column_names)):
            record[f"n_{side}s"] = int(members.size)
            record[f"{side}s"] = names[members].tolist()
            record[f"{side}_indices"] = members.tolist()
            record[f"{side}_membership"] = membership.tolist()
            record[f"mean_{side}_membership"] = float(membership.mean()) if members.size else 0.0
        records.append(record)
    return records


def _write_membership_csv(path, membership, labels, probabilities, names, topic_prefix):
    """One line per item: its token shares ``membership`` (n, K), its cluster ``labels`` (n,) and that cluster's
    posterior probability under the block model, from ``probabilities`` (n, K) (0 for an item set aside)."""
    n_items, n_topics = membership.shape
    table = np.empty((n_items, n_topics + 2), dtype=object)
    table[:, :n_topics] = membership
    table[:, n_topics] = labels
    table[:, n_topics + 1] = label_probabilities(probabilities, labels, 0.0)
    write_table_csv(path, table, names, [f"{topic_prefix}{t}" for t in range(n_topics)] + ["label",
                                                                                          "label_probability"])


def _k_posterior_arrays(posterior):
    values = np.array(sorted(posterior), dtype=np.int64)
    return values, np.array([posterior[k] for k in values], dtype=np.float64)


def _save_model(path, model, row_names, column_names):
    arrays = {name: np.asarray(getattr(model, name)) for name in _SAVED_ATTRIBUTES}
    for side in ("row", "column"):
        arrays[f"n_{side}_clusters_"] = np.int64(getattr(model, f"n_{side}_clusters_"))
        arrays[f"{side}_k_trace"] = np.asarray(getattr(model, f"{side}_dpmm_").n_clusters_trace_)
        values, probabilities = _k_posterior_arrays(getattr(model, f"{side}_k_posterior_"))
        arrays[f"{side}_k_values"], arrays[f"{side}_k_probabilities"] = values, probabilities
    np.savez_compressed(path, row_names=row_names, column_names=column_names, **arrays)


def _check_model_layout(arrays, path):
    """Raise ValueError naming ``path`` unless ``arrays`` holds every array of _MODEL_LAYOUT, of its kind and
    shape."""
    missing = [name for name in _MODEL_LAYOUT if name not in arrays]
    if missing:
        raise ValueError(f"{path}: not a model.npz written by 'conjoined fit' (missing {', '.join(missing)})")
    sizes = {}
    for name, (kind, dims) in _MODEL_LAYOUT.items():
        array = arrays[name]
        if array.dtype.kind not in _DTYPE_KINDS[kind] or array.ndim != len(dims):
            raise ValueError(
                f"{path}: {name} is a {array.ndim}-d array of {array.dtype}, expected a {len(dims)}-d "
                f"array of {kind} values; is the file damaged?"
            )
        for dim, size in zip(dims, array.shape):
            if isinstance(dim, str):
                sizes.setdefault(dim, size)
        expected = tuple(dim if isinstance(dim, int) else sizes[dim] for dim in dims)
        if array.shape != expected:
            raise ValueError(
                f"{path}: {name} has shape {array.shape} where the other arrays give {expected}; is the file "
                "damaged?"
            )


def _load_model(path):
    """The saved fit as an object with the attributes the plot functions read, plus row_names/column_names."""
    try:
        with np.load(path, allow_pickle=False) as saved:
            arrays = {name: saved[name] for name in saved.files}
    except Exception as exc:  # noqa: BLE001 - any read failure is one line naming the file
        raise ValueError(f"{path}: cannot read the saved fit ({_npz_failure(path, exc)})") from None
    if "bicluster_row_clusters_" not in arrays and "bicluster_pairs_" in arrays:  # saved before biclusters joined blocks
        arrays["bicluster_row_clusters_"], arrays["bicluster_column_clusters_"] = pair_cluster_masks(
            arrays["bicluster_pairs_"])
    renamed_labels(arrays)
    for side in ("row", "column"):
        if f"mixture_{side}_labels_" not in arrays and f"{side}_labels_" in arrays:
            arrays[f"mixture_{side}_labels_"] = arrays[f"{side}_labels_"]  # saved when both were one
    _check_model_layout(arrays, path)
    model = SimpleNamespace(**{name: arrays[name] for name in _SAVED_ATTRIBUTES})
    for side in ("row", "column"):
        setattr(model, f"n_{side}_clusters_", int(arrays[f"n_{side}_clusters_"]))
        setattr(model, f"{side}_dpmm_", SimpleNamespace(n_clusters_trace_=arrays[f"{side}_k_trace"]))
        posterior = dict(zip(arrays[f"{side}_k_values"].tolist(), arrays[f"{side}_k_probabilities"].tolist()))
        setattr(model, f"{side}_k_posterior_", posterior)
    model.row_names, model.column_names = arrays["row_names"], arrays["column_names"]
    return model


def _pyplot():
    """matplotlib.pyplot, with its backend as it is (the command chooses Agg; a notebook keeps its own)."""
    try:
        import matplotlib.pyplot as plt
    except ImportError as error:
        raise ImportError("the pictures need matplotlib: pip install matplotlib") from error
    return plt


def _heatmap_figsize(n_rows):
    """plot_biclusters' default size, taller where it names up to 100 rows, so that all their names fit:
    each takes 1.3 times its font size (the label and the gap the ticks keep between labels) along a heatmap
    that the strips, title, x labels and legend leave about 0.8 of the figure's height, less 2.5 inches."""
    width, height = inspect.signature(plot_biclusters).parameters["figsize"].default
    if n_rows <= 100:
        heatmap = 1.3 * name_fontsize(n_rows) / 72.0 * n_rows
        height = max(height, 2.5 + heatmap / 0.8)
    return width, height


def side_names_of(source_format):
    """What the rows and columns of a matrix read from ``source_format`` (``LabeledMatrix.source_format``; None
    for a fit made in Python) are called in pictures: genes and cells for single-cell input (.h5ad, 10x)."""
    return ("gene", "cell") if source_format in ("h5ad", "10x") else ("row", "column")


def draw_pictures(outdir, X, model, row_names, column_names, *, fmt="png", dpi=PICTURE_DPI,
                  side_names=("row", "column")):
    """Write heatmap, k_trace, theta and membership pictures of a fitted model into ``outdir``; returns paths.

    The heatmap outlines the ``HEATMAP_MAX_BICLUSTERS`` strongest biclusters (all are in biclusters.json).
    ``side_names``: what the rows and the columns are called on the pictures, such as ``("gene", "cell")``.
    """
    plt = _pyplot()
    drawers = {
        "heatmap": lambda: plot_biclusters(
            X,
            model,
            row_names=row_names,
            column_names=column_names,
            max_biclusters=HEATMAP_MAX_BICLUSTERS,
            figsize=_heatmap_figsize(X.shape[0]),
            side_names=side_names,
        ),
        "k_trace": lambda: plot_k_trace(model, side_names=side_names),
        "theta": lambda: plot_theta(model, side_names=side_names),
        "membership": lambda: plot_membership(model, side_names=side_names),
    }
    paths = [Path(outdir) / f"{name}.{fmt}" for name in PICTURES]
    # all drawn before any replaces an earlier one: a failure or an interruption leaves the previous set whole
    with atomic_output_files(paths) as temporaries, plt.rc_context({"svg.hashsalt": "conjoined"}):
        for name, temporary in zip(PICTURES, temporaries):
            figure = drawers[name]()
            try:
                figure.savefig(temporary, dpi=dpi, format=fmt, metadata=_UNDATED.get(fmt))
            finally:
                plt.close(figure)
    return paths


FIT_OUTPUTS = frozenset({"biclusters.json", "row_membership.csv", "column_membership.csv", "theta.csv",
                         "params.json", "matrix.npz", "model.npz",
                         *(f"{name}.{ext}" for name in PICTURES for ext in ("png", "pdf", "svg"))})  # fit's, plot's


# what file browsers leave in a folder they have shown: not the user's files
BROWSER_FILES = frozenset({".DS_Store", "Thumbs.db", "desktop.ini"})


def check_replaceable_fit(outdir):
    """ValueError unless ``outdir`` is missing, an empty folder, or the folder of an earlier fit holding only what
    ``fit`` writes: ``--force`` must not delete a user's files behind a mistyped OUTDIR."""
    outdir = Path(outdir)
    if not (outdir.exists() or outdir.is_symlink()):
        return
    if not outdir.is_dir():
        raise ValueError(f"{outdir} is a file, not the folder of an earlier fit: --force replaces only such a folder")
    entries = sorted(entry.name for entry in outdir.iterdir()
                     if not (entry.name in BROWSER_FILES and entry.is_file() and not entry.is_symlink()))
    # fit writes files only: a folder under one of their names is the user's
    foreign = [name for name in entries if name not in FIT_OUTPUTS or not (outdir / name).is_file()]
    if foreign or (entries and "biclusters.json" not in entries):
        shown = ", ".join((foreign or entries)[:5]) + (", ..." if len(foreign or entries) > 5 else "")
        raise ValueError(f"{outdir} is not the folder of an earlier fit (it holds {shown}): --force replaces only "
                        "such a folder; choose another OUTDIR or remove it yourself")


def _mixture_records(model):
    """One dict per DPMM the fit ran, for biclusters.json (see the module docstring)."""
    def finite(value):
        return float(value) if np.isfinite(value) else None

    return [{"side": fit.side, "settled": fit.trend.settled, "n_samples": fit.trend.n_samples,
             "change": finite(fit.trend.change), "z": finite(fit.trend.z), "late_z": finite(fit.trend.late_z),
             "n_clusters": list(fit.n_clusters)} for fit in model.dpmm_trends_]


def write_fit(folder, model, X, row_names, column_names, *, source=None, command=None, pictures=True):
    """Write every file of a fit's folder (the :mod:`conjoined.cli` module docstring lists them) of the fitted
    CDP ``model`` and its matrix ``X`` into the existing ``folder``; ``source``: how the matrix was read (the
    ``input`` of params.json), ``command``: the command line, both None for a fit made in Python."""
    write_json(
        folder / "biclusters.json",
        {
            "shape": list(X.shape),
            "n_row_clusters": model.n_row_clusters_,
            "n_column_clusters": model.n_column_clusters_,
            "biclusters": _bicluster_records(model, row_names, column_names),
            "mixtures": _mixture_records(model),
        },
    )
    with warnings.catch_warnings():  # items set aside were named by the fit's warning
        warnings.simplefilter("ignore", AllZeroWarning)
        # X is the fitted matrix, its names checked by the caller
        warnings.filterwarnings("ignore", message="X does not have valid feature names")
        row_probabilities, column_probabilities = model.predict_row_proba(X), model.predict_column_proba(X)
    _write_membership_csv(folder / "row_membership.csv", model.row_membership_, model.row_labels_,
                          row_probabilities, row_names, "k")
    _write_membership_csv(folder / "column_membership.csv", model.column_membership_, model.column_labels_,
                          column_probabilities, column_names, "l")
    write_table_csv(
        folder / "theta.csv",
        model.theta_,
        [f"k{k}" for k in range(model.theta_.shape[0])],
        [f"l{l}" for l in range(model.theta_.shape[1])],
    )
    sp.save_npz(folder / "matrix.npz", sp.csr_matrix(X))
    _save_model(folder / "model.npz", model, row_names, column_names)
    write_json(
        folder / "params.json",
        {
            "conjoined_version": __version__,
            "command": command,
            "input": source,
            "estimator": {name: value for name, value in repeatable_params(model).items() if name != "verbose"},
        },
    )
    if pictures:
        draw_pictures(folder, X, model, row_names, column_names,
                      side_names=side_names_of(None if source is None else source["format"]))


def load_fit(outdir, needed=("matrix.npz", "model.npz")):
    """``(X, model)`` of a fit's folder: its fitted matrix (CSR) and its model.npz as an object with the fitted
    attributes the plot functions read (``rows_``, ``theta_``, ``row_membership_``, ...) and ``row_names``,
    ``column_names``, checked against each other; FileNotFoundError or ValueError naming what is missing or
    damaged (``needed``: the files the caller reads, all checked before any is)."""
    outdir = Path(outdir)
    for name in needed:
        if not (outdir / name).is_file():
            raise FileNotFoundError(
                f"{outdir / name}: no such file; is {outdir} an OUTDIR written by 'conjoined fit'?"
            )
    try:
        X = sp.load_npz(outdir / "matrix.npz").tocsr()
    except Exception as exc:  # noqa: BLE001
        raise ValueError(f"{outdir / 'matrix.npz'}: cannot read ({type(exc).__name__}: {exc})") from None
    model = _load_model(outdir / "model.npz")
    if X.shape != (model.row_labels_.size, model.column_labels_.size):
        raise ValueError(
            f"{outdir}: matrix.npz has shape {X.shape} but model.npz labels "
            f"{model.row_labels_.size} rows and {model.column_labels_.size} columns"
        )
    return X, model


def fitted_parameters(outdir):
    """The estimator's parameters recorded in OUTDIR/params.json (CDP's ``get_params()`` but verbose), with the
    defaults of the parameters a fit of an older version did not record."""
    path = Path(outdir) / "params.json"
    try:
        recorded = json.loads(path.read_text(encoding="utf-8"))["estimator"]
        params = {**ConjoinedDirichletProcess().get_params(), **recorded}
        ConjoinedDirichletProcess(**params)._check_params()
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{path}: cannot read the fit's parameters ({' '.join(str(exc).split())})") from None
    return params


def default_names(n):
    """Names ``"0"``, ``"1"``, ... of ``n`` items that have none."""
    return np.array([str(i) for i in range(n)])


def save_fit(model, X, path, *, row_names=None, column_names=None, force=False, pictures=True):
    """Write the folder that ``conjoined fit`` writes for a CDP fitted in Python, all at once.

    ``conjoined plot`` then redraws its pictures, ``conjoined predict`` classifies new rows or columns against it,
    and ``conjoined score`` reads its biclusters.json.

    Parameters
    ----------
    model : ConjoinedDirichletProcess
        Fitted on ``X``.
    X : array-like or sparse matrix of counts, shape (n_rows, n_cols)
        The matrix ``model`` was fitted on.
    path : str or Path
        The folder to write; it must not exist, unless ``force`` (then it must be an empty folder or an earlier
        fit's: nothing else is replaced).
    row_names, column_names : sequences of str, optional
        Default: the DataFrame's index and columns the model was fitted on, else "0", "1", ...
    force : bool
    pictures : bool
        Draw heatmap, k_trace, theta and membership (PNG; needs matplotlib).

    Returns
    -------
    Path
        ``path``.
    """
    if not isinstance(model, ConjoinedDirichletProcess) or not hasattr(model, "bicluster_pairs_"):
        raise ValueError(f"model must be a fitted ConjoinedDirichletProcess, got {type(model).__name__}")
    frame_names = (None, None)
    if hasattr(X, "columns") and hasattr(X, "index"):  # a DataFrame: its names must be the fitted ones, in order
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="X has feature names, but")  # fitted on an array: no names
            record_features(model, X, reset=False)
        record_row_names(model, X, reset=False)
        frame_names = (X.index, X.columns)
    X = check_matrix(X, name="X", counts=True)
    if X.shape != (model.row_labels_.size, model.column_labels_.size):
        raise ValueError(f"X has shape {X.shape}, but the model was fitted on {model.row_labels_.size} rows and "
                         f"{model.column_labels_.size} columns")
    refitted = fitted_classifiers(X, model.row_labels_, model.column_labels_,
                                  (model.n_row_clusters_, model.n_column_clusters_), model.get_params())
    saved = (model.row_classifier_, model.column_classifier_)
    if not all(classifier.weights_tempered for classifier in saved):
        raise ValueError("the model was fitted by an earlier version of conjoined, whose classifier of new items "
                         "this one does not write: fit it again")
    if not all(np.allclose(new.log_rates, old.log_rates) and np.allclose(new.exposure, old.exposure)
               for new, old in zip(refitted, saved)):
        raise ValueError("X is not the matrix the model was fitted on: its counts over the fitted clusters differ")
    names = []
    for given, frame, fitted, n, what in (
            (row_names, frame_names[0], getattr(model, "row_names_in_", None), X.shape[0], "row_names"),
            (column_names, frame_names[1], getattr(model, "feature_names_in_", None), X.shape[1], "column_names")):
        chosen = next((candidate for candidate in (given, frame, fitted) if candidate is not None), None)
        chosen = default_names(n) if chosen is None else unique_names(chosen, where=what)
        if chosen.shape != (n,):
            raise ValueError(f"{what} must hold {n} names, got shape {chosen.shape}")
        names.append(chosen)
    if pictures:
        _pyplot()  # before the fit's folder is begun
    with atomic_output_dir(path, force=force, replaceable=check_replaceable_fit) as staging:
        with writing_results(staging, path):
            write_fit(staging, model, X, *names, pictures=pictures)
    return Path(path)
