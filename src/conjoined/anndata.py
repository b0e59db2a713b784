"""CDP on an AnnData object, following scanpy's ``tl`` conventions: results are written into the object.

AnnData holds cells x genes (``obs`` x ``var``); CDP biclusters genes x cells, so genes are CDP's rows and
cells its columns. The matrix is transposed without densifying. Needs anndata and pandas (``pip install anndata pandas``, or the ``singlecell`` extra).
"""

from __future__ import annotations

import os
import warnings
from types import MappingProxyType, SimpleNamespace
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp

from ._stack import user_stacklevel
from ._validation import check_bool, check_matrix, is_count_matrix, line_totals
from .cdp import (
    AllZeroWarning,
    ConjoinedDirichletProcess,
    _cluster_masks,
    bicluster_members,
    pair_cluster_masks,
    repeatable_params,
)
from .dpmm.estimator import fresh_seed
from .predict import SideClassifier, cluster_probabilities, label_probabilities, most_probable

__all__ = ["cdp", "predict_cells", "predict_genes", "fitted_view", "SINGLE_CELL_DEFAULTS"]

#: CDP parameters that :func:`cdp` sets unless given. Genes and cells are read by profile: a cell's total
#: (library size) and a gene's total are nuisance, and under CDP's Poisson defaults the mixtures cut cell types
#: and gene programmes by depth (docs/tutorial.md, "Which likelihood for real counts").
SINGLE_CELL_DEFAULTS = MappingProxyType({"row_likelihood": "multinomial", "column_likelihood": "multinomial"})


def _require_anndata():
    try:
        import anndata
        import pandas
    except ImportError:
        raise ImportError(
            "conjoined.anndata needs anndata and pandas: pip install anndata pandas"
        ) from None
    return anndata, pandas


def _counts_source(adata, layer, use_raw):
    """``(matrix cells x genes, description)`` of the matrix to bicluster."""
    if layer is not None and use_raw:
        raise ValueError("give either layer= or use_raw=True, not both")
    if use_raw:
        if adata.raw is None:
            raise ValueError("use_raw=True but adata.raw is None")
        missing = adata.var_names.difference(adata.raw.var_names)
        if len(missing):
            raise ValueError(
                f"use_raw=True: {len(missing)} of adata.var_names are not in adata.raw.var_names "
                f"(e.g. {missing[0]!r})"
            )
        return adata.raw[:, adata.var_names].X, "adata.raw.X"
    if layer is None:
        return adata.X, "adata.X"
    if layer not in adata.layers:
        available = ", ".join(repr(name) for name in adata.layers) or "none"
        raise ValueError(f"adata has no layer {layer!r}; layers: {available}")
    return adata.layers[layer], f"adata.layers[{layer!r}]"


def _in_memory(matrix):
    """A backed AnnData's matrix read into memory (anndata's sparse dataset, an h5py dataset); others as they
    are. CDP needs every count at once."""
    if hasattr(matrix, "to_memory"):
        return matrix.to_memory()
    if type(matrix).__module__.startswith("h5py"):
        return matrix[()]
    return matrix


def _check_counts(matrix, where, adata):
    """Raise a ValueError naming the problem and where counts may be found when ``matrix`` is not counts."""
    if matrix is None:
        raise ValueError(f"{where} is None; pass layer= naming a layer of counts")
    if is_count_matrix(matrix):
        return
    others = [repr(name) for name, values in adata.layers.items()
              if where != f"adata.layers[{name!r}]" and _holds_counts(values)]
    layers = f"layers of counts: {', '.join(others)}" if others else "no other layer holds counts"
    raw = ("; adata.raw holds counts (use_raw=True)" if adata.raw is not None and where != "adata.raw.X"
           and _holds_counts(adata.raw.X) else "")
    try:
        check_matrix(matrix, name=where, counts=True)
    except ValueError as exc:
        raise ValueError(
            f"{exc}. CDP needs raw counts (non-negative integers), not normalised or log-transformed values: "
            f"pass layer= naming a counts layer ({layers}){raw}"
        ) from None


def _holds_counts(matrix):
    """Whether ``matrix`` (a layer, ``.raw.X``; backed or not) holds counts, for the hints of :func:`_check_counts`:
    False where it cannot be read."""
    try:
        return bool(is_count_matrix(_in_memory(matrix)))
    except (TypeError, ValueError, OSError):
        return False


def _check_writable(adata, copy):
    """ValueError, before any work, where the results could not be written: a view of a backed AnnData."""
    if adata.isbacked and adata.is_view and not copy:
        raise ValueError("adata is a view of a backed AnnData, which cannot be written into: pass copy=True")


def _check_key(key, name="key_added"):
    if not isinstance(key, str) or not key or "/" in key:
        raise ValueError(f"{name} must be a non-empty str without '/' (the prefix of every key written), "
                         f"got {key!r}")


def _check_size(matrix, where):
    """``(all-zero cells, all-zero genes)`` of ``matrix``; ValueError, in cells and genes, unless at least 2 cells
    and 2 genes have non-zero counts."""
    n_cells, n_genes = matrix.shape
    cells, genes = map(np.count_nonzero, line_totals(matrix))
    if cells < 2 or genes < 2:
        raise ValueError(
            f"{where}: {cells} of {n_cells} cell(s) (obs) and {genes} of {n_genes} gene(s) (var) have non-zero "
            "counts; CDP needs at least 2 of each"
        )
    return n_cells - cells, n_genes - genes


def _genes_by_cells(matrix):
    """The transpose of a cells x genes matrix as CSR (sparse) or a C-ordered array, without densifying."""
    if sp.issparse(matrix):
        return sp.csr_matrix(matrix.T)
    return np.ascontiguousarray(np.asarray(matrix).T)


def _categorical(labels, n_clusters, pandas):
    """Labels 0..n_clusters-1 as a categorical of strings ``"0"``..; -1 (set aside) becomes missing."""
    categories = [str(k) for k in range(n_clusters)]
    values = np.where(labels >= 0, labels.astype(str), None)
    return pandas.Categorical(values, categories=categories)


def _k_posterior(posterior):
    values = np.array(sorted(posterior), dtype=np.int64)
    return {"K": values, "probability": np.array([posterior[k] for k in values], dtype=np.float64)}


def _storable_params(params):
    """Estimator parameters as .h5ad-writable values: None is left out, a path becomes its str, other
    non-scalars their repr."""
    storable = {}
    for name, value in params.items():
        if value is None:
            continue
        if isinstance(value, np.generic):
            value = value.item()
        if isinstance(value, os.PathLike):
            value = os.fspath(value)
        storable[name] = value if isinstance(value, (bool, int, float, str)) else repr(value)
    return storable


def cdp(adata, layer=None, key_added="cdp", copy=False, use_raw=False, **params):
    """Bicluster genes and cells of an AnnData with the Conjoined Dirichlet Process.

    Parameters
    ----------
    adata : anndata.AnnData, shape (n_cells, n_genes)
        The chosen matrix must hold raw counts (non-negative integers), dense or sparse; a backed AnnData's is
        read into memory (CDP needs every count at once), and ``copy=True`` returns an AnnData in memory.
    layer : str, optional
        ``adata.layers[layer]`` instead of ``adata.X``.
    key_added : str, default="cdp"
        Prefix of every key written.
    copy : bool, default=False
        Work on (and return) a copy instead of writing into ``adata``.
    use_raw : bool or None, default=False
        Use ``adata.raw.X`` restricted to ``adata.var_names`` (None: False): the results are written into
        ``adata``, whose genes they describe. ``conjoined fit --layer raw`` on the file fits every gene of
        ``.raw`` instead (often more than ``adata.var_names``, the variable genes).
    **params
        Parameters of :class:`conjoined.CDP` (``row_*`` is the gene side, ``column_*`` the cell side), e.g.
        ``row_alpha=10, n_iter=500, random_state=0``. Unlike ``CDP`` itself, whose Poisson defaults are the
        paper's simulations', genes and cells default to the multinomial likelihood
        (:data:`SINGLE_CELL_DEFAULTS`): pass ``row_likelihood="poisson"`` and/or
        ``column_likelihood="poisson"`` for CDP's defaults. With ``mode="paper"``, whose mixtures are multinomial
        anyway, they choose the refinement's likelihoods.

    Returns
    -------
    anndata.AnnData or None
        The copy when ``copy``, else None. Written (``key`` = ``key_added``; genes are CDP's rows, cells its
        columns):

        - ``obs[f"{key}_cluster"]``, ``var[f"{key}_cluster"]``: categorical cluster of each cell / gene
          (categories ``"0"``, ``"1"``, ...; missing for cells or genes set aside: all-zero ones, and with
          ``holdout`` those without counts to fit on), in the partitions the biclusters are read from, whose
          clusters are the topics (CDP's ``column_labels_`` / ``row_labels_``: the mixtures' partitions,
          refined unless ``refine=False``).
        - ``obs[f"{key}_probability"]``, ``var[f"{key}_probability"]``: the posterior probability of each cell's /
          gene's cluster under the block model that decided it (CDP's ``predict_column_proba`` /
          ``predict_row_proba`` of the fitted matrix; NaN for those set aside). It can be below 1/2: an item
          between clusters the block model barely tells apart, or, where the refinement ended short of its EM's
          fixed point, one the block model puts elsewhere (pbmc68k_reduced, ``cdp(adata, layer="counts",
          random_state=0)``: 190 of 765 genes and 12 of 700 cells under 1/2, 86 genes and 12 cells
          elsewhere). The cluster is the fit's decision either way.
        - ``obsm[f"{key}_membership"]`` (n_cells, K_c), ``varm[f"{key}_membership"]`` (n_genes, K_r): share of
          each cell's / gene's tokens in each topic.
        - ``obsm[f"{key}_biclusters"]`` (n_cells, B), ``varm[f"{key}_biclusters"]`` (n_genes, B): bool, member
          of bicluster b.
        - ``uns[key]``: ``biclusters`` (DataFrame, one line per bicluster, strongest first: ``k``, ``l``
          (its strongest block), ``gene_clusters``, ``cell_clusters`` (the clusters whose blocks it joins,
          as strings such as ``"3 7"``), ``strength``, ``n_genes``, ``n_cells``), ``bicluster_genes`` and ``bicluster_cells`` (dicts
          ``"b"`` -> array of names, highest membership first), ``theta`` (K_r, K_c), ``gene_k_posterior`` and
          ``cell_k_posterior`` (``K``, ``probability`` arrays: the posterior of the number of clusters of the
          last mixture run of each side, before the refinement merges and splits them into the clusters of
          ``obs`` / ``var``, often far fewer on real counts), ``gene_k_trace`` and ``cell_k_trace`` (K at
          each iteration of those runs), and ``params`` (the estimator's parameters,
          those left at None omitted, plus ``layer`` / ``use_raw``). Without ``random_state`` a seed is drawn at
          random (with ``checkpoint``, the folder's) and recorded there, so that the run can be repeated; a
          Generator or RandomState is recorded by its repr only (with ``checkpoint``, by the folder's seed). ``cell_classifier`` and ``gene_classifier``:
          what :func:`predict_cells` and :func:`predict_genes` need (CDP's ``column_classifier_`` and
          ``row_classifier_`` without the other side's clusters, which are ``var`` / ``obs[f"{key}_cluster"]``,
          and the number of items in each of those clusters).

        Everything round-trips through ``write_h5ad`` / ``read_h5ad``.

    Raises
    ------
    TypeError
        ``adata`` is not an AnnData, or a parameter that :class:`conjoined.CDP` does not have.
    ValueError
        A layer that does not exist, a matrix that is not counts (the message says what was found and where
        counts may be), fewer than 2 cells or 2 genes with non-zero counts, a ``key_added`` that is not a
        non-empty str without "/", ``copy`` / ``use_raw`` that are not bools, or a view of a backed AnnData
        without ``copy``.
    ImportError
        anndata or pandas is not installed.
    """
    anndata, pandas = _require_anndata()
    if not isinstance(adata, anndata.AnnData):
        raise TypeError(f"adata must be an anndata.AnnData, got {type(adata).__name__}")
    _check_key(key_added)
    copy = check_bool(copy, "copy")
    use_raw = False if use_raw is None else check_bool(use_raw, "use_raw")
    _check_writable(adata, copy)
    matrix, where = _counts_source(adata, layer, use_raw)
    matrix = _in_memory(matrix)
    _check_counts(matrix, where, adata)
    zero_cells, zero_genes = _check_size(matrix, where)
    for names, side in ((adata.obs_names, "obs"), (adata.var_names, "var")):
        if not names.is_unique:
            warnings.warn(f"adata.{side}_names are not unique (e.g. {str(names[names.duplicated()][0])!r}): the "
                          f"biclusters' lists of names cannot tell those items apart, and new items cannot be "
                          f"matched to them (adata.{side}_names_make_unique() renames them)",
                          stacklevel=user_stacklevel())
    if zero_cells or zero_genes:
        warnings.warn(
            f"{zero_genes} all-zero gene(s) and {zero_cells} all-zero cell(s) in {where} are set aside: their "
            f"{key_added}_cluster is missing", AllZeroWarning, stacklevel=user_stacklevel(),
        )
    # said above and below in genes and cells, not rows and columns
    unknown = sorted(set(params) - set(ConjoinedDirichletProcess().get_params()))
    if unknown:
        raise TypeError(f"conjoined.anndata.cdp() got {', '.join(map(repr, unknown))}, not a parameter of "
                        f"conjoined.CDP (its parameters: {', '.join(ConjoinedDirichletProcess().get_params())})")
    if params.get("random_state") is None and params.get("checkpoint") is None:
        params["random_state"] = fresh_seed()  # recorded in uns, so that the run can be repeated
    genes_by_cells = _genes_by_cells(matrix)
    model = ConjoinedDirichletProcess(**{**SINGLE_CELL_DEFAULTS, **params})._fit(
        genes_by_cells, all_zero_said=True, side_names=("gene", "cell"),
        unassigned=f"their {key_added}_cluster is missing")
    model._warn_unsettled(side_names=("gene", "cell"))

    with warnings.catch_warnings():  # the items set aside were named above
        warnings.simplefilter("ignore", AllZeroWarning)
        cell_probability, gene_probability = (
            label_probabilities(probabilities, labels, np.nan) for labels, probabilities in (
                (model.column_labels_, model.predict_column_proba(genes_by_cells)),
                (model.row_labels_, model.predict_row_proba(genes_by_cells))))
    gene_names = np.asarray(adata.var_names, dtype=str)
    cell_names = np.asarray(adata.obs_names, dtype=str)
    pairs = np.asarray(model.bicluster_pairs_, dtype=np.int64).reshape(-1, 2)
    index = [str(b) for b in range(len(pairs))]
    bicluster_genes, bicluster_cells = {}, {}
    for b in range(len(pairs)):
        (genes, _), (cells, _) = bicluster_members(model, b)  # highest membership in its topics first
        bicluster_genes[index[b]] = gene_names[genes]
        bicluster_cells[index[b]] = cell_names[cells]
    run = {"layer": layer} if layer is not None else {}
    results = {
        "biclusters": pandas.DataFrame(
            {
                "k": pairs[:, 0],
                "l": pairs[:, 1],
                "gene_clusters": _cluster_lists(model.bicluster_row_clusters_),
                "cell_clusters": _cluster_lists(model.bicluster_column_clusters_),
                "strength": np.asarray(model.bicluster_strength_, dtype=np.float64),
                "n_genes": model.rows_.sum(axis=1).astype(np.int64),
                "n_cells": model.columns_.sum(axis=1).astype(np.int64),
            },
            index=index,
        ),
        "bicluster_genes": bicluster_genes,
        "bicluster_cells": bicluster_cells,
        "theta": np.asarray(model.theta_, dtype=np.float64),
        "gene_k_posterior": _k_posterior(model.row_k_posterior_),
        "cell_k_posterior": _k_posterior(model.column_k_posterior_),
        "gene_k_trace": np.asarray(model.row_dpmm_.n_clusters_trace_, dtype=np.int64),
        "cell_k_trace": np.asarray(model.column_dpmm_.n_clusters_trace_, dtype=np.int64),
        "params": {**_storable_params(repeatable_params(model)), **run, "use_raw": use_raw},
        "gene_cluster_sizes": _cluster_sizes(model.row_labels_, model.n_row_clusters_),
        "cell_cluster_sizes": _cluster_sizes(model.column_labels_, model.n_column_clusters_),
        "cell_classifier": _storable_classifier(model.column_classifier_),
        "gene_classifier": _storable_classifier(model.row_classifier_),
    }

    # Everything is computed: only now is the AnnData written, so that an error or an interruption above leaves
    # it as it was (with copy=False, the previous run's results stay whole).
    if copy:  # a backed AnnData copies into memory, not into another file
        adata = adata.to_memory() if adata.isbacked else adata.copy()
    adata.obs[f"{key_added}_cluster"] = _categorical(model.column_labels_, model.n_column_clusters_, pandas)
    adata.var[f"{key_added}_cluster"] = _categorical(model.row_labels_, model.n_row_clusters_, pandas)
    adata.obs[f"{key_added}_probability"] = cell_probability
    adata.var[f"{key_added}_probability"] = gene_probability
    adata.obsm[f"{key_added}_membership"] = model.column_membership_
    adata.varm[f"{key_added}_membership"] = model.row_membership_
    adata.obsm[f"{key_added}_biclusters"] = np.ascontiguousarray(model.columns_.T)
    adata.varm[f"{key_added}_biclusters"] = np.ascontiguousarray(model.rows_.T)
    adata.uns[key_added] = results
    return adata if copy else None


class _Side(NamedTuple):
    """One side of an AnnData as the classifiers of new items see it."""

    name: str  # "cell" or "gene"
    other: str  # the other side's name
    frame: str  # where its items' annotations go: "obs" or "var"
    arrays: str  # where its items' arrays go: "obsm" or "varm"
    other_frame: str
    axis: int  # its items' axis in an AnnData (cells x genes)


_SIDES = {"cell": _Side("cell", "gene", "obs", "obsm", "var", 0),
          "gene": _Side("gene", "cell", "var", "varm", "obs", 1)}


def _cluster_sizes(labels, n_clusters):
    return np.bincount(labels[labels >= 0], minlength=n_clusters).astype(np.int64)


def _storable_classifier(classifier):
    """A side's classifier (:class:`conjoined.predict.SideClassifier`) as .h5ad-writable arrays; the other side's
    clusters are left to ``obs`` / ``var``."""
    return {
        "log_rates": classifier.log_rates,
        "exposure": classifier.exposure,
        "log_weights": classifier.log_weights,
        "dispersion": np.float64(classifier.dispersion),
        "weights_tempered": np.bool_(classifier.weights_tempered),
    }


def _stored_sizes(stored, side_name):
    """The number of items in each of a side's clusters at the fit (None in results written without them)."""
    sizes = stored.get(f"{side_name}_cluster_sizes")
    return None if sizes is None else np.asarray(sizes, dtype=np.int64)


def _cluster_column(adata, frame, key):
    column = f"{key}_cluster"
    if column not in getattr(adata, frame):
        raise KeyError(f"reference.{frame} has no {column!r}: it is not the AnnData conjoined.anndata.cdp wrote "
                       f"into with key_added={key!r}")
    return getattr(adata, frame)[column]


def _reference_classifier(reference, key, side):
    """The stored classifier of ``reference``'s new ``side`` items over the other side's clustered items,
    ``(SideClassifier, their names)``; a clear error when :func:`cdp` stored none or the reference's other side is
    not the one it was fitted on."""
    if key not in reference.uns:
        raise KeyError(f"reference.uns has no {key!r}: run conjoined.anndata.cdp(reference, key_added={key!r}) "
                       "first")
    stored = reference.uns[key]
    if f"{side.name}_classifier" not in stored:
        raise KeyError(f"reference.uns[{key!r}] holds no {side.name}_classifier: it was written by an older "
                       "version of conjoined; run conjoined.anndata.cdp on the reference again")
    fitted = stored[f"{side.name}_classifier"]
    sizes = _stored_sizes(stored, side.other)
    if sizes is None:
        raise KeyError(f"reference.uns[{key!r}] holds no {side.other}_cluster_sizes: it was written by an older "
                       "version of conjoined; run conjoined.anndata.cdp on the reference again")
    other_labels, _ = _read_clusters(_cluster_column(reference, side.other_frame, key), sizes)
    found = _cluster_sizes(other_labels, len(sizes))
    if found.sum() != sizes.sum():  # unequal counts over a whole side: _read_clusters has said so
        raise ValueError(
            f"reference.{side.other_frame}[{key + '_cluster'!r}] is not what conjoined.anndata.cdp wrote: "
            f"{sizes.sum()} {side.other}s in its {len(sizes)} clusters then, {found.sum()} now, cluster by cluster "
            f"{sizes.tolist()[:8]} then, {found.tolist()[:8]} now ({side.other}s subset, or their clusters "
            f"changed, after the fit?); new {side.name}s are classified over the fitted {side.other}s' clusters")
    clustered = other_labels >= 0  # items set aside in the fit classify nothing
    names = (reference.var_names if side.other == "gene" else reference.obs_names)[clustered]
    if not names.is_unique:
        raise ValueError(f"the reference's {side.other} names are not unique (e.g. "
                         f"{str(names[names.duplicated()][0])!r}): new {side.name}s' {side.other}s cannot be "
                         "matched to them by name")
    arrays = (np.asarray(fitted[field], np.float64) for field in ("log_rates", "exposure", "log_weights"))
    return SideClassifier(*arrays, float(fitted["dispersion"]), other_labels[clustered],
                          bool(fitted.get("weights_tempered", False))), names


def _over_fitted(matrix, given, fitted, side, where, own):
    """The new ``side`` items of ``matrix`` (cells x genes) over the ``fitted`` items of the other side, matched by
    name (``given``, the names along the other side's axis) and put in the order of ``fitted`` (items the fit did
    not have dropped): an (n_new, n_fitted) matrix. ValueError naming a fitted item that is missing or repeated,
    and saying so where the new items' own names (``own``) hold the fitted ones: an AnnData of genes x cells."""
    position = {}
    for index, name in enumerate(given):
        position.setdefault(name, []).append(index)
    repeated = next((name for name in fitted if len(position.get(name, ())) > 1), None)
    if repeated is not None:
        raise ValueError(f"{repeated!r} names more than one of {where}'s {side.other}s: a fitted {side.other} "
                         "must be named once")
    missing = [name for name in fitted if name not in position]
    if missing:
        raise ValueError(
            f"{len(missing)} of the reference's {len(fitted)} {side.other}s are not in {where}'s {side.other}s "
            f"(e.g. {str(missing[0])!r}): new {side.name}s are classified over every fitted {side.other}. "
            f"{side.other.capitalize()}s measured but dropped (for having no counts, say) can be put back as zeros; "
            f"data that never measured them cannot be classified against this reference"
            + (f". The fitted {side.other}s name {where}'s {side.name}s: an AnnData holds cells x genes, and this "
               "one genes x cells (pass adata.T)" if set(fitted) <= set(own) else ""))
    order = np.array([position[name][0] for name in fitted], dtype=np.int64)
    return matrix[:, order] if side.axis == 0 else matrix[order].T


def _new_counts(adata, side, layer, use_raw):
    """``(matrix cells x genes, the names along the other side's axis, description)`` of the new items' counts.
    New cells are read over every gene of ``.raw`` with ``use_raw``; new genes, which are written into ``var``,
    over ``.raw``'s columns of ``var_names``, as :func:`cdp` reads it."""
    if side.name == "cell" and use_raw:
        _counts_source(adata, layer, use_raw)  # the same errors as cdp's
        return adata.raw.X, adata.raw.var_names, "adata.raw.X"
    matrix, where = _counts_source(adata, layer, use_raw)
    return matrix, (adata.var_names if side.name == "cell" else adata.obs_names), where


def _side_categories(reference, side, key, n_clusters):
    """The names of the reference's clusters of ``side``, as its ``*_cluster`` column names them (renamed or not;
    :func:`_read_clusters`), or ``"0"``, ``"1"``, ... with a warning where they cannot be matched to the
    clusters."""
    numbers = [str(k) for k in range(n_clusters)]
    column = getattr(reference, side.frame).get(f"{key}_cluster")
    if column is None:
        return numbers
    try:
        return _read_clusters(column, _known_sizes(reference.uns[key], side.name, n_clusters))[1]
    except ValueError as exc:
        warnings.warn(f"{exc}; the new {side.name}s' clusters are named by their numbers",
                      stacklevel=user_stacklevel())
        return numbers


def _same_results(stored, other):
    """Whether two ``uns`` entries hold the same results (nested dicts of arrays, DataFrames and scalars), as a
    copy of an AnnData (``adata.raw.to_adata()``, ``adata[:, genes].copy()``) holds its fit's: the same values,
    whatever types ``write_h5ad`` / ``read_h5ad`` stored them as (fixed-width strings read back as objects,
    NumPy scalars as Python ones)."""
    if isinstance(stored, dict) or isinstance(other, dict):
        return (isinstance(stored, dict) and isinstance(other, dict) and stored.keys() == other.keys()
                and all(_same_results(stored[name], other[name]) for name in stored))
    if hasattr(stored, "columns") or hasattr(other, "columns"):  # pandas DataFrames
        return (hasattr(stored, "columns") and hasattr(other, "columns")
                and list(map(str, stored.columns)) == list(map(str, other.columns))
                and _same_values(stored.index, other.index)
                and all(_same_values(stored[name].to_numpy(), other[name].to_numpy()) for name in stored.columns))
    return _same_values(stored, other)


def _same_values(stored, other):
    """Whether two arrays or scalars hold the same values: numbers (booleans among them) as numbers, NaN equal to
    NaN, anything else as strings."""
    stored, other = np.asarray(stored), np.asarray(other)
    if stored.shape != other.shape:
        return False
    if stored.dtype.kind in "biuf" and other.dtype.kind in "biuf":
        return bool(np.array_equal(stored, other, equal_nan=True))
    if stored.dtype.kind in "biuf" or other.dtype.kind in "biuf":
        return False
    return bool(np.array_equal(stored.astype(str), other.astype(str)))


def _predict(adata, reference, side, key, key_added, layer, use_raw, copy):
    """:func:`predict_cells` and :func:`predict_genes`: ``side`` is ``_SIDES["cell"]`` or ``_SIDES["gene"]``."""
    anndata, pandas = _require_anndata()
    for argument, value in (("adata", adata), ("reference", reference)):
        if not isinstance(value, anndata.AnnData):
            raise TypeError(f"{argument} must be an anndata.AnnData, got {type(value).__name__}")
    _check_key(key, "key")
    key_added = key if key_added is None else key_added
    _check_key(key_added)
    # A copy of the reference's AnnData (adata.raw.to_adata(): its cells and their results, all genes) holds the
    # fit's results; new genes' clusters written beside them are the same fit's, so long as no item's are replaced.
    copied = (key_added == key and _same_results(adata.uns.get(key_added), reference.uns.get(key))
              and f"{key_added}_cluster" not in getattr(adata, side.frame))
    if key_added in adata.uns and not copied:
        raise ValueError(f"adata.uns holds {key_added!r}, results of conjoined.anndata.cdp that new {side.name}s' "
                         f"clusters would overwrite in part: pass key_added= another prefix")
    copy = check_bool(copy, "copy")
    use_raw = False if use_raw is None else check_bool(use_raw, "use_raw")
    _check_writable(adata, copy)
    classifier, fitted = _reference_classifier(reference, key, side)
    matrix, given, where = _new_counts(adata, side, layer, use_raw)
    matrix = _in_memory(matrix)
    _check_counts(matrix, where, adata)
    matrix = sp.csr_matrix(matrix) if sp.issparse(matrix) else np.asarray(matrix)
    items = _over_fitted(matrix, given, fitted, side, where, getattr(adata, side.frame).index)
    probabilities = cluster_probabilities(classifier, items)
    labels = most_probable(probabilities)
    unclassified = int((labels < 0).sum())
    if unclassified:
        warnings.warn(f"{unclassified} new {side.name}(s) of {where} have no counts in the reference's "
                      f"{side.other}s: their {key_added}_cluster is missing", AllZeroWarning,
                      stacklevel=user_stacklevel())
    n_clusters = probabilities.shape[1]
    masks = _joined_clusters(reference.uns[key]["biclusters"])[
        "bicluster_column_clusters_" if side.name == "cell" else "bicluster_row_clusters_"]
    joined = np.zeros((masks.shape[0], n_clusters + 1), dtype=bool)  # the last column: unassigned
    joined[:, : masks.shape[1]] = masks
    categories = _side_categories(reference, side, key, n_clusters)

    probability = label_probabilities(probabilities, labels, np.nan)
    biclusters = joined[:, labels].T
    if copied:
        _keep_fitted(reference, side, key, n_clusters, getattr(adata, side.frame).index, labels, probability,
                     biclusters)

    if copy:
        adata = adata.to_memory() if adata.isbacked else adata.copy()
    annotations, arrays = getattr(adata, side.frame), getattr(adata, side.arrays)
    annotations[f"{key_added}_cluster"] = pandas.Categorical.from_codes(labels, categories=categories)
    annotations[f"{key_added}_probability"] = probability
    arrays[f"{key_added}_cluster_probability"] = probabilities
    arrays[f"{key_added}_biclusters"] = np.ascontiguousarray(biclusters)
    return adata if copy else None


def _keep_fitted(reference, side, key, n_clusters, names, labels, probability, biclusters):
    """In a copy of the reference's AnnData, the ``side`` items the reference was fitted on keep the fit's
    cluster, its probability and their biclusters (an item that joined another cluster's bicluster as an
    outsider stays in it): ``labels`` (n,), ``probability`` (n,) and ``biclusters`` (n, B), computed for every
    item named ``names``, are overwritten in place where a name is the reference's (``n_clusters``: the side's
    K). The classifier reads the block model, which puts some fitted items elsewhere where the refinement ended
    short of its fixed point; the fit's results, which ``uns`` describes, are the fit's."""
    frame, arrays = getattr(reference, side.frame), getattr(reference, side.arrays)
    fitted_labels, _ = _read_clusters(frame[f"{key}_cluster"], _known_sizes(reference.uns[key], side.name, n_clusters))
    position = {}
    for index, name in enumerate(frame.index):
        position.setdefault(name, index)
    where = np.array([position.get(name, -1) for name in names], dtype=np.int64)
    fitted = where >= 0
    labels[fitted] = fitted_labels[where[fitted]]
    probability[fitted] = np.asarray(frame[f"{key}_probability"], dtype=np.float64)[where[fitted]]
    biclusters[fitted] = np.asarray(arrays[f"{key}_biclusters"], dtype=bool)[where[fitted]]


def predict_cells(adata, reference, key="cdp", key_added=None, layer=None, use_raw=False, copy=False):
    """Classify new cells among the cell clusters of a reference fitted by :func:`cdp`.

    Each new cell is read by its counts summed over the reference's gene clusters and gets the posterior
    probability of each cell cluster under the block model that decided the reference's cells
    (:mod:`conjoined.predict`; CDP's ``predict_column_proba``): a second sample or batch mapped onto the
    reference. The reference is not changed.

    Parameters
    ----------
    adata : anndata.AnnData, shape (n_new_cells, n_genes)
        The new cells: raw counts in the chosen matrix, over genes named as the reference's (matched by name;
        every gene with a reference cluster must be there, once; others are left out).
    reference : anndata.AnnData
        An AnnData that :func:`cdp` wrote into under ``key``, with the genes it was fitted on and their clusters
        ``var[f"{key}_cluster"]`` (whose categories may have been renamed).
    key : str, default="cdp"
        The reference's ``key_added``.
    key_added : str, optional
        Prefix of the keys written into ``adata`` (None: ``key``); refused if ``adata.uns`` holds it (results of
        :func:`cdp`, which the new clusters would overwrite in part: the reference itself, say), unless those
        are the reference's own and the new items have no clusters under that prefix yet (a copy of the
        reference's AnnData, such as ``reference.raw.to_adata()`` for genes beyond the fitted ones, also read
        back from an .h5ad file; the items of such a copy that the reference was fitted on keep the fit's
        cluster, probability and biclusters, and only the others are classified).
    layer : str, optional
        ``adata.layers[layer]`` instead of ``adata.X``.
    use_raw : bool, default=False
        ``adata.raw.X`` over all its genes instead.
    copy : bool, default=False
        Work on (and return) a copy instead of writing into ``adata``.

    Returns
    -------
    anndata.AnnData or None
        The copy when ``copy``, else None. Written (``key`` = ``key_added``):

        - ``obs[f"{key}_cluster"]``: the most probable cell cluster (categorical, the categories of the
          reference's ``obs[f"{key}_cluster"]``, renamed or not; missing for a cell without counts in the fitted
          genes, with an ``AllZeroWarning``).
        - ``obs[f"{key}_probability"]``: the posterior probability of that cluster (NaN where missing).
        - ``obsm[f"{key}_cluster_probability"]`` (n_new_cells, K_c): each cell cluster's probability (zeros where
          missing).
        - ``obsm[f"{key}_biclusters"]`` (n_new_cells, B): bool, the biclusters whose cell clusters hold the cell's
          cluster (the reference's ``uns[key]["biclusters"]``, in its order; the test that lets a fitted cell join
          a bicluster of another cluster is not run on new cells).

    Raises
    ------
    TypeError
        ``adata`` or ``reference`` is not an AnnData.
    KeyError
        ``reference`` holds no results of :func:`cdp` under ``key`` (or results of a version that stored no
        classifier).
    ValueError
        A reference gene missing from ``adata`` or named twice there, reference genes not named uniquely, a
        reference whose genes or gene clusters changed after its fit, a matrix that is not counts, a
        ``key_added`` already holding :func:`cdp`'s results, or the bad options :func:`cdp` refuses.
    """
    return _predict(adata, reference, _SIDES["cell"], key, key_added, layer, use_raw, copy)


def predict_genes(adata, reference, key="cdp", key_added=None, layer=None, use_raw=False, copy=False):
    """Classify new genes among the gene clusters of a reference fitted by :func:`cdp`: :func:`predict_cells`
    with genes and cells swapped.

    Each new gene is read by its counts summed over the reference's cell clusters (CDP's ``predict_row_proba``):
    genes left out of the fit, such as those beyond the highly variable ones, put into the fitted gene
    programmes. ``adata`` (n_cells, n_new_genes) holds the new genes over cells named as the reference's (every
    cell with a reference cluster there, once); ``use_raw=True`` reads ``adata.raw.X`` over ``var_names``, as
    :func:`cdp` does. Written: ``var[f"{key}_cluster"]``, ``var[f"{key}_probability"]``,
    ``varm[f"{key}_cluster_probability"]`` (n_new_genes, K_r) and ``varm[f"{key}_biclusters"]`` (n_new_genes, B),
    as :func:`predict_cells` writes for cells; it raises as :func:`predict_cells` does.
    """
    return _predict(adata, reference, _SIDES["gene"], key, key_added, layer, use_raw, copy)


def _cluster_lists(masks):
    """Each bicluster's joined clusters as one string ("8 22"), which .h5ad files store as they are."""
    return np.array([" ".join(str(k) for k in np.flatnonzero(mask)) for mask in masks], dtype=object)


def _joined_clusters(table):
    """``bicluster_row_clusters_`` and ``bicluster_column_clusters_`` from the biclusters table: masks one past
    the largest cluster a bicluster joins (the pairs alone in a table stored before biclusters joined blocks)."""
    if "gene_clusters" not in table:
        masks = pair_cluster_masks(np.column_stack([table["k"], table["l"]]))
    else:
        masks = []
        for column in ("gene_clusters", "cell_clusters"):
            clusters = [np.array(str(text).split(), np.int64) for text in table[column]]
            masks.append(_cluster_masks(clusters, np.concatenate([np.empty(0, np.int64), *clusters])))
    return dict(zip(("bicluster_row_clusters_", "bicluster_column_clusters_"), masks))


def fitted_view(adata, key_added="cdp"):
    """What :func:`cdp` stored in ``adata``, as an object with a fitted CDP's attribute names (rows = genes,
    columns = cells), which the :mod:`conjoined.plot` functions accept.

    Attributes: ``row_labels_``, ``column_labels_`` (the stored clusters, as CDP's; -1 where the cluster is
    missing), ``rows_`` (B, n_genes),
    ``columns_`` (B, n_cells), ``bicluster_pairs_``, ``bicluster_row_clusters_``, ``bicluster_column_clusters_``
    (their widths one past the largest cluster a bicluster joins), ``bicluster_strength_``, ``theta_``,
    ``row_membership_``, ``column_membership_``, ``n_row_clusters_``, ``n_column_clusters_``,
    ``row_k_posterior_``, ``column_k_posterior_``, and ``row_dpmm_`` / ``column_dpmm_`` holding
    ``n_clusters_trace_``.
    """
    if key_added not in adata.uns:
        raise KeyError(
            f"adata.uns has no {key_added!r}: run conjoined.anndata.cdp(adata, key_added={key_added!r})"
        )
    stored = adata.uns[key_added]
    table = stored["biclusters"]
    theta = np.asarray(stored["theta"])
    row_labels, _ = _read_clusters(adata.var[f"{key_added}_cluster"], _known_sizes(stored, "gene", theta.shape[0]))
    column_labels, _ = _read_clusters(adata.obs[f"{key_added}_cluster"],
                                      _known_sizes(stored, "cell", theta.shape[1]))
    return SimpleNamespace(
        row_labels_=row_labels,
        column_labels_=column_labels,
        rows_=np.asarray(adata.varm[f"{key_added}_biclusters"], dtype=bool).T,
        columns_=np.asarray(adata.obsm[f"{key_added}_biclusters"], dtype=bool).T,
        bicluster_pairs_=np.column_stack([table["k"], table["l"]]).astype(np.int64).reshape(-1, 2),
        **_joined_clusters(table),
        bicluster_strength_=np.asarray(table["strength"], dtype=np.float64),
        theta_=theta,
        row_membership_=np.asarray(adata.varm[f"{key_added}_membership"]),
        column_membership_=np.asarray(adata.obsm[f"{key_added}_membership"]),
        n_row_clusters_=theta.shape[0],
        n_column_clusters_=theta.shape[1],
        row_k_posterior_=_posterior_dict(stored["gene_k_posterior"]),
        column_k_posterior_=_posterior_dict(stored["cell_k_posterior"]),
        row_dpmm_=SimpleNamespace(n_clusters_trace_=np.asarray(stored["gene_k_trace"])),
        column_dpmm_=SimpleNamespace(n_clusters_trace_=np.asarray(stored["cell_k_trace"])),
    )


def _known_sizes(stored, side_name, n_clusters):
    """The side's cluster sizes at the fit, or zeros (sizes unknown: nothing to check against) for results
    written without them."""
    sizes = _stored_sizes(stored, side_name)
    return np.zeros(n_clusters, np.int64) if sizes is None else sizes


def _read_clusters(column, sizes):
    """``(labels (n,) int64, names)`` of a ``*_cluster`` column written by :func:`cdp`: each item's cluster
    0..K-1 (-1 where missing) and each cluster's name, K = ``len(sizes)``, ``sizes`` the clusters' sizes at the
    fit (zeros: unknown).

    Read from the values where they are the numbers "0", "1", ... that :func:`cdp` wrote, whatever the order of
    the categories (sorted, or some dropped by a subset); otherwise, categories renamed (to cell types, say),
    from their codes, which hold the clusters' order when the categories are renamed in place and all K kept.
    Either way the items must count up to the clusters' sizes (a side as whole as at the fit) or stay within
    them (a subset). ValueError where they cannot be trusted: fewer than K categories that are not the numbers
    (renamed, then subset), or counts beyond the sizes (renumbered, renamed and reordered, clusters merged)."""
    n_clusters = len(sizes)
    values = np.asarray(column.astype(object), dtype=object)
    missing = np.array([value is None or value != value for value in values], dtype=bool)
    labels = np.full(values.shape, -1, dtype=np.int64)
    present = np.asarray(values[~missing], dtype=str)
    numbers = [str(k) for k in range(n_clusters)]
    if np.isin(present, numbers).all():
        labels[~missing] = present.astype(np.int64)
        names = numbers
    else:
        names = list(getattr(getattr(column, "cat", None), "categories", ()))
        if len(names) != n_clusters:
            raise ValueError(f"{column.name!r}: its values are neither the cluster numbers conjoined.anndata.cdp "
                             f"wrote nor {n_clusters} categories, one per cluster (renamed, then subset?), so they "
                             "cannot be matched to the fit's clusters")
        labels[~missing] = np.asarray(column.cat.codes)[~missing]
    found = _cluster_sizes(labels, n_clusters)
    beyond = np.any(found > sizes) or (found.sum() == sizes.sum() and not np.array_equal(found, sizes))
    if sizes.sum() > 0 and beyond:
        added = (" Or items classified after the fit (predict_genes, predict_cells) written beside the fitted ones, "
                 "in a copy of the fitted AnnData: read the fit from the AnnData it was fitted on"
                 if found.sum() > sizes.sum() else "")
        raise ValueError(f"{column.name!r}: its clusters do not count up to the fit's cluster sizes "
                         f"({found.tolist()[:8]} items now, {sizes.tolist()[:8]} at the fit): renumbered, reordered "
                         "or merged after the fit? Rename the categories in place (rename_categories), or keep the "
                         f"numbers cdp wrote.{added}")
    return labels, names


def _posterior_dict(stored):
    return {int(k): float(p) for k, p in zip(stored["K"], stored["probability"])}
