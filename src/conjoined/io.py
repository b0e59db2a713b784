"""Reading count matrices from common file formats, and writing results atomically.

:func:`read_matrix` returns the matrix with the orientation CDP uses (rows = features such as words or genes,
columns = samples such as documents or cells) and any row/column names the file holds. It checks that the file
parses; the values themselves (negative, non-integer) are checked by the estimator, except that an AnnData file
whose matrix is not counts gets a specific hint (``.raw`` or a counts layer).
"""

from __future__ import annotations

import contextlib
import csv
import errno
import glob
import gzip
import json
import numbers
import os
import re
import shutil
import signal
import threading
import uuid
import warnings
import zipfile
import zlib
from collections.abc import Iterable, Mapping
from collections.abc import Set as AbstractSet
from pathlib import Path
from typing import NamedTuple

import numpy as np
import scipy.io
import scipy.sparse as sp

from ._interrupt import interruption_behind
from ._stack import user_stacklevel

__all__ = [
    "LabeledMatrix",
    "LeftoverWarning",
    "atomic_output_dir",
    "atomic_output_file",
    "atomic_output_files",
    "check_not_input",
    "input_format",
    "input_location",
    "is_within",
    "read_matrix",
    "write_json",
    "write_table_csv",
    "writing_results",
]

_SUFFIXES = {
    ".csv": "csv",
    ".csv.gz": "csv",
    ".tsv": "tsv",
    ".tsv.gz": "tsv",
    ".mtx": "mtx",
    ".mtx.gz": "mtx",
    ".npz": "npz",
    ".h5ad": "h5ad",
    ".mat": "mat",
}


class LabeledMatrix(NamedTuple):
    """A matrix read from a file, with the names found there.

    X : ndarray or scipy.sparse.csr_matrix, shape (n_rows, n_cols)
        Rows are features (words, genes), columns samples (documents, cells). Sparse formats stay sparse.
    row_names, column_names : ndarray of str, or None when the file holds none
    source_format : str
        One of "csv", "tsv", "mtx", "10x", "npz", "h5ad", "mat".
    variable : str or None
        For a .mat file, the variable read (given or the only candidate); None otherwise.
    """

    X: object
    row_names: np.ndarray | None
    column_names: np.ndarray | None
    source_format: str
    variable: str | None = None


def _one_line(exc):
    """``Type: first line of the message`` of an exception."""
    message = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {message[0]}" if message else type(exc).__name__


def _open_text(path):
    """Open a UTF-8 text file, transparently decompressing ``.gz``; a byte-order mark (as some editors and
    Excel write) is dropped, not read into the first name."""
    if str(path).endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8-sig")
    return open(path, encoding="utf-8-sig")


def unique_names(names, where=None):
    """Append ``-1``, ``-2``, ... to repeated names, keeping first occurrences and skipping a suffixed name that is
    a name already (as AnnData's ``var_names_make_unique``: g, g, g-1 -> g, g-2, g-1). Warns, naming ``where``
    (the file and which names), when a name repeats: the user looks for their names in the results."""
    names = [str(name) for name in names]
    taken, kept, suffixes, unique, renamed = set(names), set(), {}, [], []
    for name in names:
        if name not in kept:
            kept.add(name)
            unique.append(name)
            continue
        count = suffixes.get(name, 0) + 1
        while f"{name}-{count}" in taken:
            count += 1
        suffixes[name] = count
        taken.add(f"{name}-{count}")
        unique.append(f"{name}-{count}")
        renamed.append(unique[-1])
    if renamed and where is not None:
        original = renamed[0].rsplit("-", 1)[0]
        warnings.warn(f"{where}: {len(renamed)} repeated name(s) made unique by a suffix -1, -2, ... in the results "
                      f"(the second {original!r} is {renamed[0]!r})", UserWarning, stacklevel=user_stacklevel())
    return np.array(unique, dtype=str)


def _read_fields(path):
    """The tab-separated fields of each line of a text file (``.gz`` allowed), trailing blank lines left out."""
    try:
        with _open_text(path) as handle:
            lines = [line.rstrip("\r\n") for line in handle]
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: cannot read names ({_one_line(exc)})") from None
    except (EOFError, zlib.error) as exc:
        raise ValueError(f"{path}: cannot read names: the .gz file is truncated or corrupt ({exc})") from None
    while lines and not lines[-1]:
        lines.pop()
    return [line.split("\t") for line in lines]


def _names_of(fields, path, *, field=0, lines=None):
    """Unique names from the lines' ``fields`` (:func:`_read_fields`): each line's ``field``-th entry (the first
    one when the line is shorter). ``lines``: the lines' numbers in the file (1-based; default 1, 2, ...)."""
    names = [parts[field] if len(parts) > field else parts[0] for parts in fields]
    blank = [index for index, name in enumerate(names) if not name.strip()]
    if blank:
        line = blank[0] + 1 if lines is None else lines[blank[0]]
        raise ValueError(f"{path}: line {line} holds no name: every line must name its item")
    return unique_names(names, f"{path}")


# The files of a 10x folder: its matrix, and its features (genes) and barcodes, in the order they are looked for.
_10X_MATRIX = ("matrix.mtx.gz", "matrix.mtx")
_10X_FEATURES = ("features.tsv.gz", "features.tsv", "genes.tsv.gz", "genes.tsv")
_10X_BARCODES = ("barcodes.tsv.gz", "barcodes.tsv")


def _read_name_file(path, *, field=None):
    """Names from a text file (``.gz`` allowed), one per line; tab-separated lines give their ``field``-th entry
    (the first one when the line is shorter). By default the first, but the second (the gene symbol) of a 10x
    features file (``features.tsv``, ``genes.tsv``), as :func:`_read_10x` names a folder's genes."""
    if field is None:
        field = 1 if Path(path).name in _10X_FEATURES else 0
    return _names_of(_read_fields(path), path, field=field)


def _name_sequence(names, what):
    """``names`` (a list, tuple, array, pandas Index or other ordered iterable of str or numbers) as an array of
    str; TypeError for anything else (a mapping, a set, bytes, None or nested sequences among the names)."""
    expected = f"{what}_names must be a names file (str or path) or a sequence of names (str or numbers)"
    if isinstance(names, (Mapping, AbstractSet, bytes, bytearray)) or not isinstance(names, Iterable):
        raise TypeError(f"{expected}, got {type(names).__name__}")
    names = list(names)
    for name in names:
        if isinstance(name, (bool, np.bool_)) or not isinstance(name, (str, numbers.Number)):
            raise TypeError(f"{expected}; found {name!r} ({type(name).__name__}) among them")
    return np.asarray([str(name) for name in names], dtype=str)


def _names_argument(names, expected, *, what, path):
    """Names given to :func:`read_matrix` (a names file or a sequence), checked against the matrix shape."""
    if isinstance(names, (str, os.PathLike)):
        names_path = Path(names)
        if not names_path.is_file():
            raise FileNotFoundError(f"{names_path}: no such file (the {what} names for {path})")
        names = _read_name_file(names_path)
    else:
        names = _name_sequence(names, what)
    if len(names) != expected:
        raise ValueError(f"{path}: {len(names)} {what} names given for a matrix with {expected} {what}s")
    return names


def input_format(path):
    """The format :func:`read_matrix` reads ``path`` (a ``pathlib.Path``) in: "10x" for a 10x folder or its
    matrix file, else by the name's suffix ("csv", "tsv", "mtx", "npz", "h5ad", "mat"); ValueError for a name of
    no known type."""
    if path.is_dir() or _is_10x_matrix(path):
        return "10x"
    lower = path.name.lower()
    for suffix in sorted(_SUFFIXES, key=len, reverse=True):
        if lower.endswith(suffix):
            return _SUFFIXES[suffix]
    supported = ", ".join(_SUFFIXES)
    raise ValueError(
        f"{path}: unknown file type; supported: {supported}, or a 10x folder (matrix.mtx + barcodes)"
    )


def _is_number(text):
    try:
        float(text)
    except ValueError:
        return False
    return True


# A header that names identifiers, not a sample: one of these words in any style ("ID", "GeneIDs", "doc_id",
# "entrez"), the same run together in lower case ("geneid", "probesetid"), or a whole header naming row names or
# written for an unnamed column by a tool (pandas' "Unnamed: 0", R's "X", readr's "...1", tibble's "rowname").
_ID_WORDS = frozenset({"id", "ids", "idx", "index", "uid", "entrez", "entrezgene", "accession"})
_RUN_TOGETHER_ID = re.compile(
    r"(gene|entrez|ensembl|probe|probeset|transcript|feature|word|term|doc|document|row|item|cell|sample)s?"
    r"(id|ids|idx|index)")
_ROW_NAME_HEADER = re.compile(
    r"(gene|word|feature|term|name|row|rowname)s?|row[._]names|x|unnamed: ?\d+|\.\.\.\d+")
# A header's words: runs of capitals (with a plural s: "IDs"), capitalised or lower-case words, each with the
# digits that follow it ("ID1" is one word, a sample's name, not "ID").
_HEADER_WORD = re.compile(r"[A-Z]{2,}s?(?![a-z])\d*|[A-Z]?[a-z]+\d*|[A-Z]\d*|\d+")
# A numeric first column rising strictly over this many lines or more is taken for identifiers: counts in random
# order do so with probability 1 / 10! (ties make it rarer). Falling columns are not: tables are sorted by a
# sample's counts, top genes first.
_RISING_ID_LINES = 10


def _row_id_evidence(header, values):
    """Why a numeric first column with a header of its own looks like row identifiers rather than counts: a
    phrase, or None when nothing suggests it.

    header : list of str, the table's header (the column's is ``header[0]``); values : its numbers (pandas Series).
    """
    name = header[0].strip()
    values = values.to_numpy(dtype=float)
    whole = bool(np.isfinite(values).all() and (values == np.round(values)).all())

    def shape(text):
        return re.sub(r"\d+", "#", text.strip())

    # a first sample named like the next ("ID_rep1", "ID_rep2") is a sample
    if whole and (len(header) < 2 or shape(name) != shape(header[1])):
        words = [word.lower() for word in _HEADER_WORD.findall(name)]
        if (_ROW_NAME_HEADER.fullmatch(name.lower())
                or any(word in _ID_WORDS or _RUN_TOGETHER_ID.fullmatch(word) for word in words)):
            return "has a header that names identifiers"
    if whole and len(values) >= _RISING_ID_LINES and (np.diff(values) > 0).all():
        shown = ", ".join(f"{value:.0f}" for value in values[:3])
        return f"holds integers that rise strictly over its {len(values)} lines ({shown}, ..., {values[-1]:.0f})"
    return None


def _quoted_first_field_only(line, sep):
    """Whether a data line quotes its first field and not its second: a column written as text (R's write.csv
    quotes strings, not numbers), so names even when they read as numbers."""
    fields = next(csv.reader([line], delimiter=sep, quoting=csv.QUOTE_NONE), [])
    return len(fields) > 1 and fields[0].lstrip().startswith('"') and not fields[1].lstrip().startswith('"')


def _read_table(path, sep, first_column):
    try:
        import pandas as pd
    except ImportError:
        raise ImportError("reading .csv/.tsv files needs pandas: pip install pandas") from None
    # Names are taken as written (pandas' own parse turns "001" into 1, "NA" into NaN, "TRUE" into True).
    raw = {"sep": sep, "header": None, "dtype": str, "keep_default_na": False}
    try:
        header = pd.read_csv(path, nrows=1, **raw).iloc[0].tolist()
        with _open_text(path) as handle:
            first_lines = [handle.readline(), handle.readline()]
        first_fields = list(csv.reader(first_lines, delimiter=sep))
        frame = pd.read_csv(path, sep=sep, header=0)
    except PermissionError:
        raise ValueError(f"{path}: cannot read it: permission denied") from None
    except pd.errors.EmptyDataError:
        raise ValueError(f"{path}: the file is empty") from None
    except UnicodeDecodeError:
        raise ValueError(
            f"{path}: not a text table (it holds bytes that are not UTF-8 text: a binary file, or text in another "
            "encoding, such as Latin-1, to be saved as UTF-8)") from None
    except Exception as exc:  # noqa: BLE001 - any parse failure becomes one line naming the file
        raise ValueError(f"{path}: cannot parse as a table ({_one_line(exc)})") from None
    # A first line of unquoted numbers only, as long as the next, may be counts (numpy's savetxt writes no header)
    # or numbers as names (pandas' to_csv of a frame with numeric column labels): refused rather than guessed,
    # except 0, 1, ..., the labels pandas writes for unnamed columns. (R's write.table quotes its names and writes
    # a header one field short.)
    if (all(map(_is_number, header)) and header != [str(i) for i in range(len(header))]
            and '"' not in first_lines[0] and len(first_fields) == 2 and len(first_fields[0]) == len(first_fields[1])):
        raise ValueError(
            f"{path}: the first line holds numbers only: column names, or a first line of counts without a "
            "header? Add a header line of column names (without names: 0,1,2,... as pandas writes them)"
        )

    def names_in_first_column():  # as written
        return unique_names(pd.read_csv(path, usecols=[0], **raw).iloc[1:, 0].tolist(), f"{path}, row names")

    if frame.shape[1] == 0:
        raise ValueError(f"{path}: the table has no columns")
    if frame.shape[0] == 0:
        raise ValueError(f"{path}: the table holds no values (no line after the header)")
    row_names = None
    column_names = header
    if isinstance(frame.index, pd.MultiIndex):
        raise ValueError(f"{path}: the header has {frame.shape[1]} fields, and the lines below it "
                         f"{frame.shape[1] + frame.index.nlevels} (at most one more, for row names)")
    if not isinstance(frame.index, pd.RangeIndex):
        # a header one field short (R's write.table): pandas reads the first column as the row names
        if first_column == "counts":
            raise ValueError(f"{path}: first_column='counts' (--first-column counts), but the lines below the "
                             "header have one field more than it: a row name first (as R's write.table writes "
                             "them), or a separator at the end of each line that the header does not have?")
        # An empty first field names the row names' column: then the header lacks a column's name, unless every
        # line ends with a separator the header does not (the last column empty throughout, said below).
        if header[0].strip() == "" and not frame.iloc[:, -1].isna().all():
            raise ValueError(f"{path}: the header has {len(header)} fields, the first of them empty (the row names' "
                             f"column), and the lines below it {len(header) + 1}: a column's name is missing from "
                             "the header, and which one cannot be told")
        row_names = names_in_first_column()
    else:
        # A first column without a header holds names even when they are numbers (pandas' to_csv writes its
        # index so); a header "NA" or "null" is a name, not a missing one.
        names = first_column == "names"
        if first_column is None:
            names = (header[0].strip() == "" or not pd.api.types.is_numeric_dtype(frame.iloc[:, 0])
                     or _quoted_first_field_only(first_lines[1], sep))
            evidence = None if names else _row_id_evidence(header, frame.iloc[:, 0])
            if evidence is not None:
                only = " (the table's only column)" if frame.shape[1] == 1 else ""
                raise ValueError(
                    f"{path}: the first column{only}, {header[0]!r}, is numeric and {evidence}: row names, or "
                    "counts? Say which: first_column='names' or 'counts' (--first-column names, or counts)"
                )
        if names:
            row_names = names_in_first_column()
            frame, column_names = frame.iloc[:, 1:], header[1:]
    # Every line ending with a separator (as some tools write them): the empty last field, unnamed and empty
    # throughout, is no column.
    if frame.shape[1] > 1 and str(column_names[-1]).strip() == "" and frame.iloc[:, -1].isna().all():
        frame, column_names = frame.iloc[:, :-1], column_names[:-1]
    for position, name in enumerate(frame.columns):
        if not pd.api.types.is_numeric_dtype(frame[name]):
            label = (repr(column_names[position]) if str(column_names[position]).strip() else
                     f"after {column_names[position - 1]!r} (no header)" if position else "1 (no header)")
            too_large = _integer_beyond_int64(frame[name])
            if too_large is not None:
                raise ValueError(f"{path}: column {label} holds {too_large}, a whole number beyond 64-bit integers "
                                 "(counts must be at most 2**53)")
            raise ValueError(
                f"{path}: column {label} is not numeric "
                + ("(first_column='counts', --first-column counts: no column holds names)"
                   if first_column == "counts" else "(only the first column may hold row names)")
            )
    if frame.shape[0] == 0 or frame.shape[1] == 0:
        other = next((other for other in (";", "\t", ",") if other != sep and other in first_lines[0]), None)
        hint = (f"; its lines hold {other!r}: is that its separator? (a .csv file is read with commas and a .tsv "
                "file with tabs: rewrite it with one of those)" if other is not None else "")
        raise ValueError(f"{path}: the table holds no values (shape {frame.shape}){hint}")
    missing = np.argwhere(frame.isna().to_numpy())
    if missing.size:
        row, column = missing[0]
        names = [f"{what} {str(names[index])!r}" for what, names, index in
                 (("row", row_names, row), ("column", column_names, column)) if names is not None]
        empty = frame.iloc[:, column].isna().all()
        raise ValueError(
            f"{path}: a missing value (an empty field, NA, or a line short of fields), first at (row, col) = "
            f"({row}, {column})" + (f": {', '.join(names)}" if names else "")
            + ("; that column is empty on every line: do the lines below the header end with a separator the "
               "header does not?" if empty else "")
        )
    _say_unnamed(path, column_names, row_names)
    return frame.to_numpy(), row_names, unique_names(column_names, f"{path}, column names")


def _say_unnamed(path, column_names, row_names):
    """Warn of the first empty column name and the first empty row name of a table: kept as written, but easy to
    lose (pandas reads an empty name back as a missing one) and most often a slip."""
    unnamed = next((position for position, name in enumerate(column_names) if not str(name).strip()), None)
    if unnamed is not None:
        before = f" (after {str(column_names[unnamed - 1])!r})" if unnamed else ""
        warnings.warn(f"{path}: column {unnamed + 1 + (row_names is not None)} of the header{before} has no name: "
                      "it is named '' in the results, which pandas reads back as a missing name",
                      UserWarning, stacklevel=user_stacklevel())
    if row_names is not None:
        unnamed = next((position for position, name in enumerate(row_names) if not name.strip()), None)
        if unnamed is not None:
            warnings.warn(f"{path}: line {unnamed + 2} holds no row name: it is named '' in the results, which "
                          "pandas reads back as a missing name", UserWarning, stacklevel=user_stacklevel())


def _csr_as_stored(matrix):
    """CSR holding the entries of the sparse ``matrix`` as stored, duplicates kept: scipy's conversion sums them
    in the stored dtype (8-bit integers wrap around) and the sum can hide a negative entry, which
    ``check_matrix`` then would not see."""
    coo = sp.coo_matrix(matrix)
    order = np.lexsort((coo.col, coo.row))
    indptr = np.concatenate([[0], np.cumsum(np.bincount(coo.row, minlength=coo.shape[0]))])
    return sp.csr_matrix((coo.data[order], coo.col[order], indptr), shape=coo.shape)


def _read_mtx(path):
    try:
        return _csr_as_stored(scipy.io.mmread(str(path)))
    except Exception as exc:  # noqa: BLE001
        raise ValueError(f"{path}: cannot parse as MatrixMarket ({_one_line(exc)})") from None


def _is_10x_matrix(path):
    """Whether ``path`` is the matrix file of a 10x folder: beside a features (or genes) file and a barcodes
    file, as Cell Ranger writes them (a matrix.mtx beside a names file of another kind is a MatrixMarket file)."""
    return (path.name in _10X_MATRIX and _first_existing(path.parent, _10X_FEATURES) is not None
            and _first_existing(path.parent, _10X_BARCODES) is not None)


def input_location(path):
    """What reading ``path`` reads: the 10x folder of a folder's matrix file (see :func:`read_matrix`), else
    ``path`` itself. Outputs must stay out of it."""
    path = Path(path)
    return path.parent if not path.is_dir() and _is_10x_matrix(path) else path


def is_within(path, location):
    """Whether ``path`` is ``location`` or lies inside it (symlinks followed)."""
    target, location = Path(os.path.realpath(path)), Path(os.path.realpath(location))
    return target == location or location in target.parents


def _first_existing(folder, names):
    for name in names:
        if (folder / name).is_file():
            return folder / name
    return None


def _integer_beyond_int64(values):
    """The first of ``values`` (a table's column that pandas read as text) written as a whole number beyond
    int64, which pandas keeps as text, when every value is a number; else None."""
    texts = [value.strip() for value in values if isinstance(value, str)]  # the others are numbers or NaN
    try:
        [float(text) for text in texts]
    except ValueError:
        return None
    return next((text for text in texts if re.fullmatch(r"[+-]?\d+", text) and abs(int(text)) > 2**63 - 1), None)


def _read_10x(folder, names_given=(False, False)):
    """10x folder: matrix.mtx(.gz) is genes x cells; names from features/genes.tsv(.gz) (symbol column, made unique)
    and barcodes.tsv(.gz). Features of other types than "Gene Expression" (antibody capture, CRISPR guides, ...:
    the third column of features.tsv) are left out with a warning, as ``scanpy.read_10x_mtx`` leaves them out:
    their counts are on other scales. A folder without gene expression features keeps all of them. A folder
    without features or barcodes is read with a warning, unless ``names_given`` ``(rows, columns)`` says the
    caller names those items."""
    matrix_path = _first_existing(folder, _10X_MATRIX)
    if matrix_path is None:
        raise ValueError(f"{folder}: a folder must be a 10x output with matrix.mtx or matrix.mtx.gz")
    X = _read_mtx(matrix_path)
    features = _first_existing(folder, _10X_FEATURES)
    barcodes = _first_existing(folder, _10X_BARCODES)
    row_names = None
    if features is not None:
        fields = _read_fields(features)
        if len(fields) != X.shape[0]:
            raise ValueError(f"{features}: {len(fields)} names but {matrix_path.name} has {X.shape[0]} rows")
        kept = _gene_expression_features(fields, features)
        if not kept.all():
            X = sp.csr_matrix(X)[kept] if sp.issparse(X) else X[kept]
        row_names = _names_of([parts for parts, keep in zip(fields, kept) if keep], features, field=1,
                              lines=list(np.flatnonzero(kept) + 1))
    column_names = None if barcodes is None else _read_name_file(barcodes)
    if column_names is not None and len(column_names) != X.shape[1]:
        raise ValueError(f"{barcodes}: {len(column_names)} names but {matrix_path.name} has {X.shape[1]} columns")
    missing = [(what, items) for what, items, found, given in (
        ("features.tsv(.gz) or genes.tsv(.gz)", "genes", features, names_given[0]),
        ("barcodes.tsv(.gz)", "cells", barcodes, names_given[1])) if found is None and not given]
    if missing:
        files, items = zip(*missing)
        warnings.warn(f"{folder}: no {' and no '.join(files)}: its {' and '.join(items)} are unnamed, known by "
                      "their position only", UserWarning, stacklevel=user_stacklevel())
    return X, row_names, column_names


def _gene_expression_features(fields, path):
    """(n,) bool: the features of a 10x features file (its lines' ``fields``) to keep, the "Gene Expression" ones
    when their types (third column) name both that and others (warning of the others), else all."""
    types = np.array([parts[2] if len(parts) > 2 else "" for parts in fields], dtype=object)
    kept = types == "Gene Expression"
    if not kept.any() or kept.all():
        return np.ones(len(fields), bool)
    left, counts = np.unique(types[~kept].astype(str), return_counts=True)
    listed = ", ".join(f"{count} {name or '(no type)'}" for name, count in zip(left, counts))
    warnings.warn(f"{path}: {int((~kept).sum())} of {len(fields)} features are not \"Gene Expression\" ({listed}) "
                  "and are left out, as scanpy.read_10x_mtx leaves them out; to bicluster them, give their rows "
                  "as a .mtx file with --row-names", UserWarning, stacklevel=user_stacklevel())
    return kept


def _read_npz(path):
    try:
        return _csr_as_stored(sp.load_npz(path))
    except Exception as exc:  # noqa: BLE001
        raise ValueError(
            f"{path}: not a scipy.sparse .npz file (write one with scipy.sparse.save_npz) "
            f"({_npz_failure(path, exc)})"
        ) from None


def _npz_failure(path, exc):
    """Why ``path`` could not be read as a .npz file, in one line: "not a zip archive" where it is a file but not
    a zip archive, as every .npz file is (NumPy reads such a file as a pickle, and its error advises
    ``allow_pickle``, which no .npz file needs), else the exception's first line."""
    if os.path.isfile(path) and not zipfile.is_zipfile(path):
        return "not a zip archive, as .npz files are"
    return _one_line(exc)


def _non_integer_example(matrix):
    """A finite non-integer stored value of ``matrix``, or None when every finite value is a whole number.

    NaN and infinity are left to the matrix check, which reports them as non-finite values.
    """
    values = matrix.data if sp.issparse(matrix) else np.asarray(matrix)
    bad = values[(values != np.round(values)) & ~np.isnan(values)]  # round(inf) is inf: only NaN differs
    return None if bad.size == 0 else float(bad.flat[0])


def _read_h5ad(path, layer):
    """AnnData is cells x genes; return genes x cells with var_names as rows and obs_names as columns."""
    try:
        import anndata
    except ImportError:
        raise ImportError("reading .h5ad files needs anndata: pip install anndata") from None
    try:
        with warnings.catch_warnings():  # repeated names are made unique below, as anndata's warning asks
            warnings.filterwarnings("ignore", message=".* names are not unique", category=UserWarning)
            adata = anndata.read_h5ad(path)
    except Exception as exc:  # noqa: BLE001
        raise ValueError(f"{path}: cannot read as AnnData ({_one_line(exc)})") from None
    choices = list(adata.layers.keys()) + (["raw"] if adata.raw is not None else [])
    if layer is None:
        matrix, var_names, what = adata.X, adata.var_names, "X"
    elif layer in adata.layers:
        matrix, var_names, what = adata.layers[layer], adata.var_names, f"layers[{layer!r}]"
    elif layer == "raw" and adata.raw is not None:
        matrix, var_names, what = adata.raw.X, adata.raw.var_names, "raw.X"
    else:
        raise ValueError(
            f"{path}: no layer {layer!r}; available: X (the default){''.join(', ' + c for c in choices)}"
        )
    if matrix is None:
        raise ValueError(f"{path}: {what} is empty; choose a layer among {choices or ['(none)']}")
    example = _non_integer_example(matrix)
    if example is not None:
        hint = f"layers: {list(adata.layers.keys())}" if len(adata.layers) else "no layers"
        if adata.raw is not None and what != "raw.X":
            hint = f".raw exists: try the layer raw (layer='raw', --layer raw) ({hint})"
        raise ValueError(
            f"{path}: {what} holds non-integer values (e.g. {example:g}): it looks normalised or log-transformed, "
            f"and CDP needs raw counts; {hint}"
        )
    X = sp.csr_matrix(matrix.T) if sp.issparse(matrix) else np.ascontiguousarray(np.asarray(matrix).T)
    # as the 10x and table readers do (anndata only warns of repeated names): results must tell items apart
    return (X, unique_names(np.asarray(var_names, dtype=str), f"{path}, gene names (var_names)"),
            unique_names(np.asarray(adata.obs_names, dtype=str), f"{path}, cell names (obs_names)"))


def _is_numeric_matrix(value):
    """A 2-d numeric matrix with both dimensions > 1 (vectors and scalars are not candidates)."""
    if sp.issparse(value):
        return min(value.shape) > 1
    return (
        isinstance(value, np.ndarray)
        and value.ndim == 2
        and value.dtype.kind in "biuf"
        and min(value.shape) > 1
    )


def _mat_strings(value):
    """The strings of a MATLAB cell array of strings or char matrix as ``scipy.io.loadmat`` returns it (a vector:
    at most one dimension above 1), as a 1-d array of str; None for any other variable."""
    if not isinstance(value, np.ndarray) or sum(size > 1 for size in value.shape) > 1:
        return None
    if value.dtype.kind == "U":  # a char matrix: its rows padded with spaces, which MATLAB's cellstr drops
        return np.char.rstrip(value.ravel().astype(str), " ")
    if value.dtype.kind != "O":
        return None
    strings = []
    for cell in value.ravel():
        if not (isinstance(cell, np.ndarray) and cell.dtype.kind == "U" and cell.size <= 1):
            return None
        strings.append(str(cell.ravel()[0]) if cell.size else "")
    return np.array(strings, dtype=str)


def _mat_names(contents, shape, path):
    """``(row names, column names)`` of a matrix of ``shape`` from the file's string vectors: the one whose
    length is the number of rows (columns); None where no variable or several have that length, or when the
    matrix is square (rows and columns cannot be told apart). Warns, naming ``path``, of string vectors left
    unused where they may be the items' names: several of one side's length, or none fitting while the file
    holds some, or a square matrix (a list of another length beside named items, such as 20 Newsgroups' four
    ``groupnames``, is not)."""
    strings = {key: found for key, value in contents.items()
               if not key.startswith("__") and (found := _mat_strings(value)) is not None}
    lengths = {}
    for key, values in strings.items():
        lengths.setdefault(values.shape[0], []).append(key)
    square = shape[0] == shape[1]
    names = tuple(None if square or len(lengths.get(n, [])) != 1 else strings[lengths[n][0]] for n in shape)
    ambiguous = [key for n in set(shape) if len(lengths.get(n, [])) > 1 for key in lengths[n]]
    unused = [key for key in (strings if square or all(name is None for name in names) else ambiguous)
              if strings[key].shape[0] > 1]  # a single string is a title
    if unused:
        why = ("the matrix is square: which side they name cannot be told" if square else
               f"the matrix has {shape[0]} rows and {shape[1]} columns, and each side takes the one list of its "
               "length")
        listed = ", ".join(f"{key!r} ({strings[key].shape[0]})" for key in unused)
        warnings.warn(f"{path}: list(s) of names {listed} left unused ({why}); give names with row_names= / "
                      "column_names= (--row-names, --column-names)", UserWarning, stacklevel=user_stacklevel())
    return names


def _is_hdf5(path):
    """Whether the file starts with HDF5's signature, at byte 0 or after a user block of 512 bytes (MATLAB's)."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(520)
    except OSError:
        return False
    signature = b"\x89HDF\r\n\x1a\n"
    return head.startswith(signature) or head[512:520] == signature


def _read_mat(path, variable):
    try:
        contents = scipy.io.loadmat(str(path))
    except NotImplementedError:
        raise ValueError(
            f"{path}: MATLAB v7.3 (HDF5) files are not supported; save with -v7 or convert to .h5ad/.mtx"
        ) from None
    except Exception as exc:  # noqa: BLE001
        if _is_hdf5(path):  # v7.3 without MATLAB's header, or another HDF5 file named .mat
            raise ValueError(f"{path}: an HDF5 file, as MATLAB v7.3 writes them: not supported; save with -v7 or "
                             "convert to .h5ad/.mtx") from None
        raise ValueError(f"{path}: cannot parse as a MATLAB file ({_one_line(exc)})") from None
    candidates = sorted(
        key for key, value in contents.items() if not key.startswith("__") and _is_numeric_matrix(value)
    )
    if variable is None:
        if len(candidates) != 1:
            raise ValueError(
                f"{path}: {len(candidates)} matrix variables ({', '.join(candidates) or 'none'}); choose one with "
                "variable= (--variable)"
            )
        variable = candidates[0]
    elif variable not in contents or variable.startswith("__"):
        raise ValueError(
            f"{path}: no variable {variable!r}; matrix variables: {', '.join(candidates) or 'none'}"
        )
    elif variable not in candidates:
        value = contents[variable]
        what = (f"a {value.shape[0]} x {value.shape[1]} array, too narrow to bicluster"
                if getattr(value, "ndim", 0) == 2 and (sp.issparse(value) or value.dtype.kind in "biuf")
                else "not a 2-d numeric matrix")
        raise ValueError(
            f"{path}: variable {variable!r} is {what}; candidates: {candidates}"
        )
    value = contents[variable]
    X = sp.csr_matrix(value) if sp.issparse(value) else np.ascontiguousarray(value)
    return (X, *_mat_names(contents, X.shape, path), variable)


def read_matrix(path, *, layer=None, variable=None, row_names=None, column_names=None, first_column=None):
    """Read a count matrix (rows = features such as genes or words, columns = samples such as cells or documents).

    Formats, chosen by the extension:

    - ``.csv``/``.tsv`` (optionally ``.gz``): the header gives the column names; the first column gives the row
      names when it is non-numeric, its header is empty (as pandas' ``to_csv`` writes an index) or the header
      is one field short (as R's ``write.table`` writes row names). Names are kept as written ("001", "NA").
      A numeric first column quoted where the counts are not (R's ``write.csv`` quotes text) is names too. One
      with a header of its own is counts, unless its whole numbers look like identifiers: a header naming them
      ("ID", "GeneIDs", "doc_id", "geneid", "index", "entrez"; pandas' "Unnamed: 0", R's "X"; not a sample named
      like the next, "ID_rep1" and "ID_rep2") or values rising strictly over 10 lines or more. That is refused
      rather than guessed: ``first_column`` says which it is.
      A first line of unquoted numbers only, as many as on the next line, is refused: it may be counts without a
      header (numpy's ``savetxt``) or numbers as names (except 0, 1, ..., the labels pandas writes for unnamed
      columns, read as names). Dense.
    - ``.mtx``/``.mtx.gz``: MatrixMarket, kept as stored. Sparse.
    - a folder holding a 10x output: ``matrix.mtx(.gz)`` (genes x cells), ``features.tsv(.gz)`` or
      ``genes.tsv(.gz)`` (row names: the gene symbols, made unique) and ``barcodes.tsv(.gz)`` (column names;
      either file missing: a warning, those items unnamed). Features whose type (features.tsv's third column)
      is not "Gene Expression", such as antibody capture, are left out with a warning where gene expression
      features are present, as ``scanpy.read_10x_mtx`` does. The folder's ``matrix.mtx(.gz)`` itself, beside
      a features (or genes) file and a barcodes file, is read as the folder.
    - ``.npz``: written by ``scipy.sparse.save_npz``. Sparse.
    - ``.h5ad``: AnnData (cells x genes) returned transposed, genes x cells, with ``var_names`` as rows and
      ``obs_names`` as columns. ``layer`` picks ``adata.layers[layer]`` (``"raw"``: ``adata.raw.X``); default X.
    - ``.mat``: MATLAB v5 (``scipy.io.loadmat``); ``variable`` names the matrix, needed unless the file holds
      exactly one 2-d numeric variable with both dimensions > 1. The row (column) names are the file's cell
      array of strings or char matrix whose length is the number of rows (columns), when exactly one is (the
      20 Newsgroups file's ``wordlist``); none for a square matrix.

    Parameters
    ----------
    path : str or Path
    layer : str, optional
        AnnData only.
    variable : str, optional
        MATLAB only.
    row_names, column_names : str, Path or sequence of names, optional
        Names replacing those of the file: a text file (``.gz`` allowed) with one name per line (first
        tab-separated field; of a 10x ``features.tsv`` or ``genes.tsv``, the second, the gene symbol, as a 10x
        folder's genes are named), or the names themselves (a list, tuple, array, pandas Index or other ordered
        iterable of str or numbers, numbers written as text). Their count must match the matrix.
    first_column : {"names", "counts"}, optional
        Tables only: the first column holds the row names, or counts (even under an empty header field; with a
        header one field short, an error). Default: decided from the file, as above.

    Returns
    -------
    LabeledMatrix

    Raises
    ------
    FileNotFoundError
        ``path`` (or a names file) does not exist.
    ValueError
        Unknown extension, a file that does not parse (a names file too, damaged ``.gz`` included), an ambiguous
        or absent variable/layer, a table's first column that may be names or counts, names of the wrong length,
        or an AnnData matrix with finite non-integer values; the message names the file and the problem.
    TypeError
        ``row_names`` or ``column_names`` is neither a path nor an ordered sequence of str or numbers.
    ImportError
        pandas (tables) or anndata (.h5ad) is not installed.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file or directory")
    source_format = input_format(path)
    if layer is not None and source_format != "h5ad":
        raise ValueError(f"{path}: layer= (--layer) applies to .h5ad files only")
    if variable is not None and source_format != "mat":
        raise ValueError(f"{path}: variable= (--variable) applies to .mat files only")
    if first_column is not None:
        if first_column not in ("names", "counts"):
            raise ValueError(f"first_column must be None, 'names' or 'counts', got {first_column!r}")
        if source_format not in ("csv", "tsv"):
            raise ValueError(f"{path}: first_column= (--first-column) applies to .csv and .tsv files only")
    file_row_names = file_column_names = None
    if source_format in ("csv", "tsv"):
        X, file_row_names, file_column_names = _read_table(path, "," if source_format == "csv" else "\t",
                                                           first_column)
    elif source_format == "mtx":
        X = _read_mtx(path)
    elif source_format == "10x":
        X, file_row_names, file_column_names = _read_10x(input_location(path),
                                                         (row_names is not None, column_names is not None))
    elif source_format == "npz":
        X = _read_npz(path)
    elif source_format == "h5ad":
        X, file_row_names, file_column_names = _read_h5ad(path, layer)
    else:
        X, file_row_names, file_column_names, variable = _read_mat(path, variable)
    if row_names is not None:
        file_row_names = _names_argument(row_names, X.shape[0], what="row", path=path)
    if column_names is not None:
        file_column_names = _names_argument(column_names, X.shape[1], what="column", path=path)
    return LabeledMatrix(X, file_row_names, file_column_names, source_format, variable)


def _temporary_sibling(path, kind):
    """A fresh hidden name beside ``path`` (``.stem.kind-xxxxxxxxxxxx.suffix``).

    The extension is kept: numpy and scipy append one to names lacking it, and matplotlib picks the format by it.
    """
    path = Path(path)
    return path.with_name(f".{path.stem}.{kind}-{uuid.uuid4().hex[:12]}{path.suffix}")


def _leftovers(path):
    """The hidden siblings of ``path`` that :func:`atomic_output_dir` makes: an earlier run's staging or
    moved-aside folders, left where it was killed before it could remove them."""
    path = Path(path)
    stem, suffix = glob.escape(path.stem), glob.escape(path.suffix)
    return sorted({sibling.name for kind in ("partial", "replaced")
                   for sibling in path.parent.glob(f".{stem}.{kind}-{'[0-9a-f]' * 12}{suffix}")})


def _entry_location(path):
    """Where the directory entry ``path`` names: its folder resolved, its own name kept (a symlink stays itself,
    as a rename moves the link, not its target)."""
    absolute = Path(os.path.abspath(path))
    return absolute.parent.resolve() / absolute.name if absolute.name else absolute


def _without_detours(path):
    """``path`` without ``..`` through a folder of its own ("fit/../fit" is "fit": through itself, the path would
    lose its way once the old folder is moved aside); resolved instead where a symlink makes ``..`` lead elsewhere
    ("link/../out" is the folder beside the link's target)."""
    normal = os.path.normpath(path)
    if os.path.realpath(normal) == os.path.realpath(path):
        return Path(normal)
    return Path(os.path.realpath(path))


def _check_replaceable_dir(path, keep):
    """Raise ValueError when replacing the directory ``path`` would remove the current directory or a path of
    ``keep``, or when ``path`` lies inside a folder of ``keep`` (writing there would change an input)."""
    target = _entry_location(path)
    here = Path.cwd().resolve()
    if target == here or target in here.parents:
        raise ValueError(
            f"{path}: the output directory must not be the current directory or a folder holding it"
        )
    for kept in keep:
        for location in {_entry_location(kept), Path(kept).resolve()}:
            if location == target or target in location.parents:
                raise ValueError(
                    f"{path}: the output directory must not be, or hold, the input {kept} (replacing it would "
                    "delete the input); choose another output directory"
                )
            if location.is_dir() and location in target.parents:
                raise ValueError(
                    f"{path}: the output directory must not be inside the input folder {kept} (it would change "
                    "the input); choose another output directory"
                )


@contextlib.contextmanager
def atomic_output_dir(path, force=False, *, keep=(), replaceable=None):
    """Write a results directory all at once: yield a temporary sibling directory, move it into place on success.

    Parameters
    ----------
    path : str or Path
        The final directory. Missing parent directories are created (and removed again on failure).
    force : bool
        Replace an existing ``path``, but only once the block has succeeded.
    keep : iterable of str or Path
        Paths that must survive, such as the input files: ``path`` must not be one of them or a folder holding
        one (symlinks followed).
    replaceable : callable, optional
        ``replaceable(path)`` raises unless ``path``, if it exists, may be replaced (with ``force``), as when it
        must hold only an earlier run's files. Called before the block and again just before the swap, since
        ``path`` may have changed meanwhile.

    Yields
    ------
    Path
        The temporary directory to write into (same parent as ``path``, so the final move is a rename).

    Raises
    ------
    ValueError
        ``path`` is empty, is the current directory or a folder holding it, is (or holds) a path of ``keep``, or
        lies inside a folder of ``keep``.
    FileExistsError
        ``path`` exists and ``force`` is False.

    Both are raised before anything is written, as is what ``replaceable`` raises. If the block raises, the
    temporary directory (and any parent created for it) is removed and the exception propagates; an existing
    ``path`` is left untouched. If ``path`` may no longer be replaced once the block is done (it appeared
    without ``force``, or ``replaceable`` now raises), the finished results are moved to a free sibling name
    instead (``<name>.new``, ``<name>.new-2``, ...), and a :class:`ResultsKeptElsewhere` (a FileExistsError)
    says why and where.
    """
    if not os.fspath(path):
        raise ValueError("the output directory name is empty")
    path = _without_detours(path)
    _check_replaceable_dir(path, keep)
    if (path.exists() or path.is_symlink()) and not force:
        raise FileExistsError(
            f"{path} already exists; choose another output directory, or replace it (force=True; --force on the "
            "command line)"
        )
    if replaceable is not None:
        replaceable(path)
    parent = path.absolute().parent
    created_parents = []
    ancestor = parent
    while not ancestor.exists():
        created_parents.append(ancestor)
        ancestor = ancestor.parent
    if not ancestor.is_dir():  # mkdir would say "File exists" of it
        error = NotADirectoryError(f"cannot write the results to {path}: {ancestor} is a file, not a folder")
        error.errno = errno.ENOTDIR
        raise error
    leftovers = _leftovers(parent / path.name)  # said before anything is made: a warning raised leaves nothing
    if leftovers:
        shown = ", ".join(leftovers[:3]) + (", ..." if len(leftovers) > 3 else "")
        warnings.warn(f"{parent}: {len(leftovers)} hidden folder(s) left by an earlier run writing {path.name} that "
                      f"was killed before it finished ({shown}); remove them unless that run is still going",
                      LeftoverWarning, stacklevel=user_stacklevel())
    staging = _temporary_sibling(parent / path.name, "partial")
    try:
        parent.mkdir(parents=True, exist_ok=True)
        staging.mkdir()
    except OSError as exc:  # named by the output the user chose, not by the hidden staging folder
        for directory in created_parents:
            with contextlib.suppress(OSError):
                directory.rmdir()
        named = type(exc)(f"cannot write the results to {path}: {exc.strerror}")
        named.errno = exc.errno
        raise named from None
    try:
        yield staging
        with _signals_deferred():
            if path.exists() or path.is_symlink():
                _check_still_replaceable(staging, path, force, replaceable)
                previous = _temporary_sibling(parent / path.name, "replaced")
                os.replace(path, previous)
                try:
                    os.replace(staging, path)
                except OSError:
                    os.replace(previous, path)
                    raise
                if previous.is_dir() and not previous.is_symlink():
                    shutil.rmtree(previous)
                else:
                    previous.unlink()
            else:
                os.replace(staging, path)
    except BaseException as exc:
        with _signals_deferred():
            if kept_elsewhere(exc) is None:
                shutil.rmtree(staging, ignore_errors=True)
            for directory in created_parents:  # deepest first; stops at one that is no longer empty
                try:
                    directory.rmdir()
                except OSError:
                    break
        raise


@contextlib.contextmanager
def writing_results(staging, path):
    """Around the writing of the results into ``staging`` (from :func:`atomic_output_dir`): an OSError raised in the
    block, about a file in ``staging`` or about no file (a write to a full disk names none), is said of the output
    ``path`` the user chose, not of the hidden folder; one about a file elsewhere passes as it is."""
    try:
        yield
    except OSError as exc:
        writing = ""
        if exc.filename is not None:
            try:
                inner = Path(os.fsdecode(exc.filename)).absolute().relative_to(Path(staging).absolute())
            except (TypeError, ValueError):
                inner = None
            if inner is None:
                raise
            writing = "" if inner == Path() else f" (writing {inner})"
        named = type(exc)(f"cannot write the results to {path}: {exc.strerror or exc}{writing}")
        named.errno = exc.errno
        raise named from exc


class LeftoverWarning(UserWarning):
    """Hidden folders beside an output directory, left by an earlier run killed while writing it."""


class ResultsKeptElsewhere(FileExistsError):
    """The finished results could not replace the output directory; they are in ``kept``."""

    def __init__(self, message, kept):
        super().__init__(message)
        self.kept = kept


def kept_elsewhere(exc):
    """The :class:`ResultsKeptElsewhere` that ``exc`` is, or that it interrupted (a signal held during the swap
    is raised after it), else None."""
    return interruption_behind(exc, (ResultsKeptElsewhere,))


def _check_still_replaceable(staging, path, force, replaceable):
    """Before the swap: unless ``path`` may still be replaced, move the finished ``staging`` to a free sibling of
    ``path`` and raise :class:`ResultsKeptElsewhere` saying why and where, so that neither the user's files nor
    the results are lost."""
    try:
        if not force:
            raise FileExistsError(f"{path} was created while the results were computed")
        if replaceable is not None:
            replaceable(path)
    except Exception as exc:
        kept = _keep_results(staging, path)
        raise ResultsKeptElsewhere(f"{exc}; {path} is left as it is, and the results are in {kept}", kept) from exc


def _keep_results(staging, path):
    """Move ``staging`` to the first free name of ``<path>.new``, ``<path>.new-2``, ... and return it; a name
    taken meanwhile (another run's) is passed over. ``staging`` itself if it cannot be moved."""
    for n in range(1, 1000):
        kept = path.with_name(f"{path.name}.new" if n == 1 else f"{path.name}.new-{n}")
        if kept.exists() or kept.is_symlink():
            continue
        try:
            os.replace(staging, kept)
            return kept
        except OSError as error:
            if error.errno not in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR, errno.EISDIR):
                break
    return staging


@contextlib.contextmanager
def _signals_deferred():
    """Hold SIGINT, SIGTERM and SIGHUP until the block is done, so that swapping the output into place, or
    removing a partial one, is not left half done; the first that arrived meanwhile is raised again after, to
    the handler it would have met. (A thread's signal mask would not do: a process-directed signal goes to
    another thread, numba's or BLAS's, and Python runs its handler in the main thread all the same.) Outside
    the main thread, where handlers cannot be set, the block runs as it is."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held = [signal.SIGINT, signal.SIGTERM] + ([signal.SIGHUP] if hasattr(signal, "SIGHUP") else [])
    arrived = []
    previous = {signum: signal.signal(signum, lambda signum, frame: arrived.append(signum)) for signum in held
                if signal.getsignal(signum) is not None}  # None: a handler set outside Python, kept
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if arrived:
            signal.raise_signal(arrived[0])


def _json_default(value):
    """JSON form of numpy scalars and arrays and of paths."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


@contextlib.contextmanager
def atomic_output_files(paths):
    """Write several files all at once: yield a list of temporary names, one beside each of ``paths``, which
    replace them on success, one after the other with SIGINT, SIGTERM and SIGHUP held (none can stop the
    replacement half done); if one cannot be replaced, those replaced before it get their old files back.

    A temporary name keeps the extension of its path. A path that is a symlink is written through: the file it
    leads to is replaced, and the link kept. If the block raises, the temporary files are removed and the
    exception propagates (an OSError about a temporary file, or about none, as a write to a full disk, said of
    ``paths``); existing files are left untouched.

    Raises
    ------
    IsADirectoryError
        A path is a directory, or a symlink to one.
    ValueError
        A path exists but is not a regular file (a device, a pipe, ``/dev/stdout``): it cannot be replaced.
    FileNotFoundError
        The folder of a path does not exist.

    All three are raised before the block runs.
    """
    targets = [_written_file(path) for path in paths]
    temporaries = [_temporary_sibling(target, "partial") for target in targets]
    try:
        yield temporaries
        with _signals_deferred():
            _replace_together(temporaries, targets)
    except OSError as exc:
        # said of the file the user named, not of its hidden temporary name (a read-only folder); a write to a full
        # disk names no file: said of the files being written
        if exc.filename is None and exc.errno is not None:
            named = type(exc)(f"cannot write {' and '.join(map(os.fspath, paths))}: {exc.strerror}")
            named.errno = exc.errno
            raise named from exc
        named = dict(zip(map(os.fspath, temporaries), paths))
        target = None if exc.filename is None else named.get(os.fsdecode(exc.filename))
        if target is None:
            raise
        raise type(exc)(exc.errno, exc.strerror, os.fspath(target)) from exc
    finally:
        for temporary in temporaries:
            # a read-only file system refuses to remove even a name that is not there (EROFS, not ENOENT): that
            # must not replace the error said of the user's file
            with contextlib.suppress(OSError):
                temporary.unlink(missing_ok=True)


def _replace_together(temporaries, targets):
    """Move each temporary file onto its target; if a move fails, the targets already replaced get their old
    files back, and the error propagates. With several files, each old file is kept aside first under a hidden
    name (a hard link where the file system has them, so the target never goes missing)."""
    done = []  # (target replaced, its old file kept aside, or None where it had none)
    try:
        for temporary, target in zip(temporaries, targets):
            aside = None
            if len(targets) > 1 and target.exists():
                aside = _temporary_sibling(target, "replaced")
                try:
                    os.link(target, aside)
                except OSError:
                    os.replace(target, aside)
            try:
                os.replace(temporary, target)
            except BaseException:
                if aside is not None:
                    os.replace(aside, target)
                raise
            done.append((target, aside))
    except BaseException:
        for target, aside in reversed(done):
            if aside is not None:
                os.replace(aside, target)
            else:
                target.unlink(missing_ok=True)
        raise
    for _, aside in done:
        if aside is not None:
            with contextlib.suppress(OSError):  # every file is in place: a leftover must not undo that
                aside.unlink()


@contextlib.contextmanager
def atomic_output_file(path):
    """Write a file all at once: yield a temporary name beside ``path``, which replaces ``path`` on success
    (:func:`atomic_output_files` of one path)."""
    with atomic_output_files([path]) as (temporary,):
        yield temporary


def _written_file(path):
    """The file that writing ``path`` replaces: ``path``, or the file a symlink at ``path`` leads to; checked as
    :func:`atomic_output_files` says."""
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(f"{path} is a directory: cannot replace it with a file")
    if path.exists() and not path.is_file():
        raise ValueError(f"{path} is not a regular file (a device, a pipe or a socket): cannot replace it; write "
                         "to a file")
    target = Path(os.path.realpath(path)) if path.is_symlink() else path
    if not target.parent.is_dir():
        raise FileNotFoundError(f"{path}: its folder {target.parent} does not exist")
    return target


def check_not_input(path, inputs):
    """Raise ValueError when writing the file ``path`` would replace one of ``inputs`` (files or folders), or
    write into one of their folders (symlinks followed)."""
    for kept in inputs:
        if is_within(path, kept):
            inside = os.path.realpath(path) != os.path.realpath(kept)
            raise ValueError(f"{path} is {'inside ' if inside else ''}the input {kept}: choose another output file")


def write_json(path, obj):
    """Write ``obj`` as indented JSON (numpy scalars and arrays converted), ending with a newline, all at once.

    Raises
    ------
    ValueError
        ``obj`` holds NaN or infinity, which JSON cannot represent (nothing is written).
    TypeError
        ``obj`` holds a value with no JSON form (nothing is written).
    """
    try:
        text = json.dumps(obj, indent=2, default=_json_default, allow_nan=False)
    except ValueError as exc:
        raise ValueError(f"{path}: cannot write as JSON ({exc})") from None
    with atomic_output_file(path) as temporary:
        temporary.write_text(text + "\n", encoding="utf-8")


def write_table_csv(path, array, row_names=None, column_names=None):
    """Write a 2-d array as CSV: a header of column names, then one line per row starting with its name; all at
    once (``atomic_output_file``).

    Parameters
    ----------
    path : str or Path
    array : array-like, shape (n_rows, n_cols)
        Dense values; bools are written as 0/1.
    row_names, column_names : sequence of str, optional
        Default: the indices 0..n-1.
    """
    array = np.asarray(array)
    if array.ndim != 2:
        raise ValueError(f"write_table_csv needs a 2-d array, got shape {array.shape}")
    if array.dtype == bool:
        array = array.astype(np.int8)
    n_rows, n_cols = array.shape
    row_names = range(n_rows) if row_names is None else row_names
    column_names = range(n_cols) if column_names is None else column_names
    if len(row_names) != n_rows or len(column_names) != n_cols:
        raise ValueError(
            f"{len(row_names)} row names and {len(column_names)} column names for an array of shape {array.shape}"
        )
    with atomic_output_file(path) as temporary, open(temporary, "w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")  # not csv's \r\n: cut, awk and grep keep a \r
        writer.writerow(["", *(str(name) for name in column_names)])
        for name, values in zip(row_names, array.tolist()):
            writer.writerow([str(name), *values])
