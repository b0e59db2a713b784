"""The ``conjoined`` command: fit CDP to a count matrix file, simulate, score and redraw pictures.

::

    conjoined fit counts.csv -o results            # biclusters, memberships, theta and pictures in results/
    conjoined fit counts.csv -o results --address scheduler:8786   # data passes on a Dask cluster
    conjoined simulate 2 -o case2.csv              # case 2 of the paper, and its truth in case2.truth.json
    conjoined score results case2.truth.json       # the paper's Jaccard score of the found biclusters
    conjoined predict results new.csv -o new.classes.csv   # new columns (or rows) into the fit's clusters
    conjoined plot results                         # redraw the pictures from results/

``fit`` writes into OUTDIR (all at once: into a temporary sibling first, moved into place when complete):

- ``biclusters.json``: ``shape``, ``n_row_clusters``, ``n_column_clusters`` and ``biclusters``, a list (strongest
  first) where each bicluster has its ``index``, its ``pair`` (k, l; its strongest block), the ``row_clusters`` and
  ``column_clusters`` whose blocks it joins, its ``strength``, ``rows`` (names, highest membership first), the
  matching ``row_indices`` (0-based) and ``row_membership`` (share of each row's tokens in the bicluster's row
  topics, its ``row_clusters``), their ``mean_row_membership``, and the same for the columns; and ``mixtures``, one
  record per DP mixture fitted (rows and columns, then both again each round): its ``side``, whether it ``settled``
  (false: its log posterior still trended at the end, and the fit warned; null: too few iterations to test), over
  how many ``n_samples`` after warm-up, the ``change`` of the log posterior over them (nats), the trend's ``z`` and
  ``late_z`` (over the last half; null when infinite) and ``n_clusters`` at the first and last of them
  (``CDP.dpmm_trends_``).
- ``row_membership.csv``, ``column_membership.csv``: one line per row (column) named as in the input, one
  column per topic (``k0``, ``k1``, ... or ``l0``, ...) holding the share of its tokens in that topic, then
  ``label``, its cluster in the partition the biclusters are read from, whose clusters are the topics (the
  refined one, ``row_labels_``; -1: a row set aside, all-zero or, with ``--holdout``, without counts
  to fit on), and ``label_probability``, that cluster's posterior probability for the row under the block
  model that decided it (``predict_row_proba``; 0 for a row set aside). The token shares and the label
  answer different questions: where a row's tokens went (a row of few counts spreads them), and which
  cluster its counts put it in.
- ``theta.csv``: theta, the joint probability of a token's row topic (lines ``k0``...) and column topic
  (columns ``l0``...).
- ``heatmap.png`` (the matrix sorted by cluster, the 10 strongest biclusters outlined), ``k_trace.png`` (K at
  each iteration of each side's mixture), ``theta.png``, ``membership.png`` (not with ``--no-plots``).
- ``params.json``: the estimator's parameters, the input file and how it was read, the conjoined version.
- ``matrix.npz`` (the fitted matrix, scipy.sparse) and ``model.npz`` (labels, biclusters, theta, memberships,
  K traces and names), from which ``conjoined plot`` redraws the pictures.

A truth file written by ``simulate`` has the same layout as ``biclusters.json`` (``shape`` and a list of
``biclusters`` with ``rows``, ``row_indices``, ``columns``, ``column_indices``), plus the ``case`` and
``seed``.

Exit status: 0 on success; 2 for a usage error, bad input (a file that is missing or does not parse,
negative or non-integer values, an empty matrix, an existing OUTDIR without ``--force``, with ``--force`` an
OUTDIR that is not an empty folder or an earlier fit's, an OUTDIR that is or holds an input or the current
directory) or too little memory, reported as one line ``conjoined: error: ...``
on stderr with nothing written; 130 when interrupted (Ctrl-C), 143 on SIGTERM and 129 on SIGHUP, with
nothing written either (a signal that arrives while the finished output is moved into place waits for the move,
and one may arrive as the summary is printed: the output is then whole, and the status still says the run was
interrupted; once the command has returned, a Ctrl-C is ignored); 141 (as for SIGPIPE) when stdout is closed early
(``conjoined fit ... | head -1``), after every output file was written. If OUTDIR appears, or comes to hold
files of the user's, while the fit runs, it is left as it is and the results go to ``OUTDIR.new`` instead (exit
status 2, the line saying so; a signal that arrives meanwhile gives its own status, and the line still says where
the results are).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import re
import select
import signal
import sys
import threading
import warnings
from pathlib import Path

import numpy as np
import scipy.io
import scipy.sparse as sp

from . import __version__
from ._interrupt import interruption_behind
from ._validation import check_matrix, line_totals
from .anndata import SINGLE_CELL_DEFAULTS
from .background import DEFAULT_MIN_SIZE, DEFAULT_Z_MIN
from .cdp import (
    DISPERSIONS,
    INITS,
    LIKELIHOODS,
    MODES,
    AllZeroWarning,
    ConjoinedDirichletProcess,
    bicluster_members,
    fitted_classifiers,
)
from .datasets import CDP_CASES, make_cdp_case
from .dpmm.estimator import BACKENDS, fresh_seed
from .extract import BACKGROUNDS
from .fit_folder import (
    PICTURE_DPI,
    check_replaceable_fit,
    default_names,
    draw_pictures,
    fitted_parameters,
    load_fit,
    side_names_of,
    write_fit,
)
from .io import (
    atomic_output_dir,
    atomic_output_files,
    check_not_input,
    input_format,
    input_location,
    is_within,
    kept_elsewhere,
    read_matrix,
    write_json,
    write_table_csv,
    writing_results,
)
from .metrics import jaccard_score
from .plot import block_label
from .predict import cluster_probabilities, label_probabilities, most_probable
from .reassign import check_token_total

__all__ = ["build_parser", "main"]

PROG = "conjoined"
PICTURE_DPI_RANGE = (10, 1200)  # below 6 dpi matplotlib cannot set the strips' 6-point labels
SIMULATION_FORMATS = (".csv", ".npz", ".mtx")
_SUMMARY_MAX_BICLUSTERS = 20
_SUMMARY_TOP_ROWS = 5


# Inputs of single-cell counts, whose genes and cells are read by profile unless the likelihoods are given
SINGLE_CELL_FORMATS = ("h5ad", "10x")


# parameters of the conjoined rounds and of the mixtures' spectral start, which mode="paper" does not run (its
# mixtures are multinomial and start from one cluster; the likelihood options still choose the refinement's)
PAPER_MODE_FIXES = ("n_rounds", "dispersion", "init")


class UserError(Exception):
    """A problem with what the user asked for, reported as one line and exit status 2."""


# ---------------------------------------------------------------------------------------------------- parser


def _estimator_options(parser):
    """Add the CDP parameters as options and return ``{parameter: flag}``; None (the default) means the
    estimator's."""
    defaults = ConjoinedDirichletProcess().get_params()
    group = parser.add_argument_group("CDP parameters (see conjoined.CDP)")
    flags = {}

    def add(flag, parameter, text, default_text=None, **kwargs):
        shown = defaults[parameter] if default_text is None else default_text
        group.add_argument(flag, dest=parameter, default=None, help=f"{text} (default: {shown})", **kwargs)
        flags[parameter] = flag

    add(
        "--row-alpha",
        "row_alpha",
        "Dirichlet-process concentration of the row mixture",
        type=float,
        metavar="A",
    )
    add("--column-alpha", "column_alpha", "concentration of the column mixture", type=float, metavar="A")
    add("--row-likelihood", "row_likelihood", "likelihood of the row mixture", choices=LIKELIHOODS,
        default_text=f"{defaults['row_likelihood']}; multinomial for .h5ad and 10x input")
    add("--column-likelihood", "column_likelihood", "likelihood of the column mixture", choices=LIKELIHOODS,
        default_text=f"{defaults['column_likelihood']}; multinomial for .h5ad and 10x input")
    add(
        "--row-beta",
        "row_beta",
        "prior of the row likelihood (Dirichlet beta or Gamma shape)",
        type=float,
        metavar="B",
    )
    add("--column-beta", "column_beta", "prior of the column likelihood", type=float, metavar="B")
    add("--n-iter", "n_iter", "iterations of every DP mixture run", type=int, metavar="N")
    add("--n-rounds", "n_rounds", "conjoined rounds after the independent runs", type=int, metavar="N")
    add(
        "--dispersion",
        "dispersion",
        "'auto' divides over-dispersed counts by their dispersion in the later conjoined rounds (a "
        "quasi-likelihood, for single-cell-like counts), 'none' keeps the mixtures' likelihoods as they are",
        choices=DISPERSIONS,
    )
    add("--init", "init", "where the first mixtures of Poisson sides start: 'spectral' from the partitions of the "
        "matrix's singular vectors above the noise of Poisson counts, 'one' from one cluster", choices=INITS)
    add("--n-reassign", "n_reassign", "sweeps of the token reassignment", type=int, metavar="N")
    add("--mode", "mode", "'paper' runs the published pipeline: multinomial mixtures, no conjoined rounds (so not "
        "with --n-rounds, --dispersion or --init; the likelihoods are the refinement's)", choices=MODES)
    add(
        "--seed",
        "random_state",
        "random seed: the same seed gives the same result",
        "drawn at random and recorded in params.json",
        type=int,
        metavar="S",
    )
    add("--n-jobs", "n_jobs", "threads of the DP mixtures", "every core", type=int, metavar="N")
    add(
        "--checkpoint",
        "checkpoint",
        "folder where the DP mixtures keep their checkpoints: the same command started again after an "
        "interruption resumes there (the folder keeps its first run's seed, drawn or given: started again without "
        "--seed it resumes with it; params.json records it)",
        "none",
        metavar="DIR",
    )
    add(
        "--backend",
        "backend",
        "where the DP mixtures' data passes run: 'dask' on a Dask cluster, an embedded local one unless "
        "--address is given (needs Dask: pip install 'dask[distributed]')",
        choices=BACKENDS,
    )
    add(
        "--address",
        "address",
        "address of a running Dask scheduler to run the data passes on; implies --backend dask",
        "none",
        metavar="HOST:PORT",
    )
    add(
        "--z-min",
        "z_min",
        ("z-score (Poisson, or over-dispersed where the counts are) a block needs above its background to be "
         "a bicluster"),
        f"{DEFAULT_Z_MIN:g}, raised to the 1%% family-wise level over the blocks tested",
        type=float,
        metavar="Z",
    )
    add(
        "--min-size",
        "min_size",
        "fewest rows and columns of a bicluster",
        DEFAULT_MIN_SIZE,
        type=int,
        metavar="N",
    )
    add(
        "--holdout",
        "holdout",
        "share of the counts held out to test the biclusters (count splitting: no biclusters from the partitions' "
        "noise, at a cost in power; 0.3-0.5 suit a check that anything stands out at all; for counts, not 0/1 data)",
        "none",
        type=float,
        metavar="SHARE",
    )
    add(
        "--background",
        "background",
        "the significance rule's background: 'auto' gives it row and column cluster levels where the data demand "
        "them, 'uniform' keeps the paper's one density",
        choices=BACKGROUNDS,
    )
    return flags


def _dpi(text):
    """argparse type of --dpi: an integer in PICTURE_DPI_RANGE (above it a picture takes gigabytes)."""
    low, high = PICTURE_DPI_RANGE
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid int value: {text!r}") from None
    if not low <= value <= high:
        raise argparse.ArgumentTypeError(f"{value} is outside {low}..{high}")
    return value


def _reading_options(parser, transposed, read):
    """The options that say how INPUT is read (shared by fit and predict): what --transpose does (``transposed``)
    and what the transposed file's sides are called (``read``: its rows and columns as "fitted" or "read")."""
    parser.add_argument("--layer", help=".h5ad: the layer holding counts ('raw': adata.raw.X, all its genes; "
                        "default X)")
    parser.add_argument("--variable", help=".mat: the variable holding the matrix")
    parser.add_argument("--first-column", choices=("names", "counts"),
                        help=".csv/.tsv: the first column holds the row names, or counts (default: decided from the "
                        "file; a numeric column that looks like identifiers is refused until this says which)")
    parser.add_argument("--row-names", metavar="FILE",
                        help=f"text file with one name a line for the rows of INPUT (with --transpose, the columns "
                        f"{read}); tab-separated lines give their first field, a 10x features.tsv or genes.tsv its "
                        "second, the gene symbol")
    parser.add_argument("--column-names", metavar="FILE",
                        help=f"text file with one name a line for the columns of INPUT (with --transpose, the rows "
                        f"{read})")
    parser.add_argument("--transpose", action="store_true", help=f"the file holds samples as rows: {transposed}")


def build_parser():
    """The argparse parser of the ``conjoined`` command."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Biclustering of count matrices with the Conjoined Dirichlet Process (CDP).",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    fit = commands.add_parser(
        "fit",
        help="bicluster a count matrix file",
        description="Bicluster a count matrix (rows: features such as words or genes; columns: samples such "
        "as documents or cells) and write the results into OUTDIR.",
    )
    fit.add_argument(
        "input",
        metavar="INPUT",
        help=".csv/.tsv (the header names the columns; a first column of text, or under an empty header "
        "field, names the rows), .mtx, a 10x folder, .npz "
        "(scipy.sparse), .h5ad (AnnData, read as genes x cells) or .mat (a cell array of strings as long as "
        "the rows or the columns names them)",
    )
    fit.add_argument(
        "-o",
        "--outdir",
        required=True,
        metavar="OUTDIR",
        help="results directory (must not exist; must not be, or hold, an input or the current directory)",
    )
    fit.add_argument(
        "--force", action="store_true",
        help="replace OUTDIR if it exists (once the fit is done); only an empty folder or an earlier fit's"
    )
    fit.add_argument("--quiet", action="store_true", help="no progress bars")
    fit.add_argument("--no-plots", action="store_true", help="skip the pictures (they need matplotlib)")
    _reading_options(fit, "bicluster its transpose", "fitted")
    fit.set_defaults(run=_run_fit, estimator_parameters=_estimator_options(fit))

    predict = commands.add_parser(
        "predict",
        help="classify new rows or columns with a fit",
        description="Classify the items of INPUT that are new to the fit in FITDIR (written by 'conjoined fit'): "
        "new columns over the fitted rows (new documents over the fitted words, new cells over the fitted genes) "
        "or new rows over the fitted columns, matched by name (by position where INPUT has no names). Each gets "
        "the posterior probability of every cluster of its side under the block model of the fit's partitions "
        "(CDP.predict_row_proba / predict_column_proba), its most probable cluster and the biclusters of that "
        "cluster, written to FILE.",
    )
    predict.add_argument("fitdir", metavar="FITDIR", help="an OUTDIR of 'conjoined fit'")
    predict.add_argument("input", metavar="INPUT", help="a count matrix in any format 'conjoined fit' reads")
    predict.add_argument("-o", "--output", required=True, metavar="FILE", help="the classification (.csv)")
    predict.add_argument("--side", choices=("rows", "columns"),
                         help="INPUT holds new rows or new columns, as read (after --transpose) (default: decided "
                         "from its names or its shape)")
    predict.add_argument("--force", action="store_true", help="replace FILE if it exists")
    _reading_options(predict, "read its transpose", "read")
    predict.set_defaults(run=_run_predict)

    simulate = commands.add_parser(
        "simulate",
        help="write one of the paper's simulation cases and its truth",
        description="Write a draw of the paper's simulation case CASE to FILE (.csv, .npz or .mtx) and the "
        "true biclusters to FILE's name with .truth.json in place of the extension.",
    )
    simulate.add_argument(
        "case",
        metavar="CASE",
        type=int,
        choices=sorted(CDP_CASES),
        help=f"simulation case, one of {sorted(CDP_CASES)}",
    )
    simulate.add_argument(
        "-o", "--output", required=True, metavar="FILE", help="matrix file: .csv, .npz or .mtx"
    )
    simulate.add_argument(
        "--seed",
        type=int,
        default=None,
        help="random seed (default: drawn at random and recorded in the truth file)",
    )
    simulate.add_argument("--shuffle", action="store_true", help="permute rows and columns")
    simulate.add_argument("--force", action="store_true", help="replace existing files")
    simulate.set_defaults(run=_run_simulate)

    score = commands.add_parser(
        "score",
        help="Jaccard score of found biclusters against the truth",
        description="Print the paper's Jaccard score (mean best-match Jaccard index of biclusters as sets of "
        "cells, the smaller of both directions) of FOUND against TRUTH.",
    )
    score.add_argument("found", metavar="FOUND", help="an OUTDIR of 'conjoined fit' or its biclusters.json")
    score.add_argument("truth", metavar="TRUTH", help="a truth .json written by 'conjoined simulate'")
    score.set_defaults(run=_run_score)

    demo = commands.add_parser(
        "demo",
        help="run CDP on a built-in simulation case and score it",
        description="Draw one of the paper's simulation cases (rows and columns shuffled), bicluster it with "
        "the default parameters, print the biclusters found beside the true ones and the paper's Jaccard score.",
    )
    demo.add_argument("--case", type=int, choices=sorted(CDP_CASES), default=3, help="simulation case (default 3)")
    demo.add_argument("--seed", type=int, default=0, help="seed of the simulation and of the fit (default 0)")
    demo.add_argument("--quiet", action="store_true", help="no progress bars")
    demo.set_defaults(run=_run_demo)

    plot = commands.add_parser(
        "plot",
        help="redraw the pictures of a fit",
        description="Redraw the pictures of OUTDIR (written by 'conjoined fit') from its matrix.npz and "
        "model.npz.",
    )
    plot.add_argument("outdir", metavar="OUTDIR")
    plot.add_argument("--format", default="png", choices=("png", "pdf", "svg"), help="picture format")
    plot.add_argument(
        "--dpi",
        type=_dpi,
        default=PICTURE_DPI,
        help=f"resolution of .png pictures and of the heatmap's image inside .pdf and .svg ones, "
        f"{PICTURE_DPI_RANGE[0]} to {PICTURE_DPI_RANGE[1]} (default: {PICTURE_DPI})",
    )
    plot.set_defaults(run=_run_plot)
    return parser


# ---------------------------------------------------------------------------------------------------- fit


def _absolute(path):
    """``path`` made absolute (None stays None): params.json must name its files wherever it is read from."""
    return None if path is None else str(Path(path).absolute())


def _read_counts(args):
    """``(X, row_names, column_names, matrix)``: INPUT read with the reading options, X validated counts (CSR or
    dense float64; transposed with --transpose), the names as read (None where the file has none) and ``matrix``
    the ``LabeledMatrix`` read (its format and, for .mat, variable)."""
    matrix = read_matrix(
        args.input,
        layer=args.layer,
        variable=args.variable,
        row_names=args.row_names,
        column_names=args.column_names,
        first_column=args.first_column,
    )
    # checked as the file holds it, so that an error's (row, column) is the file's; AnnData's cells x genes are
    # read as genes x cells
    read_as = " (read as genes x cells)" if matrix.source_format == "h5ad" else ""
    X = check_matrix(matrix.X, name=f"{args.input}{read_as}", counts=True)
    row_names, column_names = matrix.row_names, matrix.column_names
    if args.transpose:
        X = X.T.tocsr() if sp.issparse(X) else np.ascontiguousarray(X.T)
        row_names, column_names = column_names, row_names
    return X, row_names, column_names, matrix


def _read_input(args):
    """``_read_counts`` of a matrix to bicluster (refused when too small, all zeros or too large), names
    defaulting to 0, 1, ..."""
    X, row_names, column_names, matrix = _read_counts(args)
    if min(X.shape) < 2:
        raise UserError(
            f"{args.input}: the matrix is {X.shape[0]} x {X.shape[1]}: too narrow to bicluster (CDP needs at "
            "least 2 rows and 2 columns)"
        )
    row_totals, column_totals = line_totals(X)
    if row_totals.sum() == 0:
        raise UserError(
            f"{args.input}: the matrix (shape {X.shape}) holds only zeros: there is nothing to bicluster"
        )
    try:
        check_token_total(row_totals.sum())
    except ValueError as exc:
        raise UserError(f"{args.input}: {exc}") from None
    rows, columns = int((row_totals > 0).sum()), int((column_totals > 0).sum())
    if min(rows, columns) < 2:
        raise UserError(f"{args.input}: {rows} row(s) and {columns} column(s) hold counts: too few to bicluster "
                        "(CDP needs at least 2 rows and 2 columns with counts)")
    row_names = default_names(X.shape[0]) if row_names is None else np.asarray(row_names, dtype=str)
    column_names = default_names(X.shape[1]) if column_names is None else np.asarray(column_names, dtype=str)
    return X, row_names, column_names, matrix


def _in_flags(message, flags):
    """``message`` with the estimator's parameter name that begins it (its subject) replaced by the option that
    sets it; "None or" goes from what the option must be (None is the option left out, not a value to type)."""
    flagged = re.sub(r"^\w+", lambda subject: flags.get(subject[0], subject[0]), message)
    return flagged if flagged == message else flagged.replace(" must be None or ", " must be ", 1)


def _estimator_from_args(args, single_cell=False):
    """The estimator the options ask for, its parameters checked: UserError naming the options at fault.
    ``single_cell``: the input is single-cell counts (.h5ad, a 10x folder), whose likelihoods default to
    ``conjoined.anndata.SINGLE_CELL_DEFAULTS``, as ``conjoined.anndata.cdp``'s do."""
    flags = args.estimator_parameters
    given = {name: getattr(args, name) for name in flags if getattr(args, name) is not None}
    if single_cell:
        given = {**SINGLE_CELL_DEFAULTS, **given}
    if given.get("mode") == "paper":
        ignored = [flags[name] for name in PAPER_MODE_FIXES if name in given]
        if ignored:
            raise UserError(f"--mode paper runs the published pipeline (no conjoined rounds, mixtures started from "
                            "one cluster): "
                            f"{', '.join(ignored)} would have no effect; leave {'it' if len(ignored) == 1 else 'them'}"
                            " out")
    if given.get("address") is not None and given.setdefault("backend", "dask") != "dask":
        raise UserError(f"--address {given['address']} is a Dask scheduler address: it needs --backend dask")
    if given.get("random_state", 0) < 0:
        raise UserError(f"--seed must be >= 0, got {given['random_state']}")
    if given.get("checkpoint") is None:  # with one, the folder keeps the seed its first run drew
        given.setdefault("random_state", fresh_seed())
    model = ConjoinedDirichletProcess(verbose=not args.quiet, **given)
    try:
        model._check_params()
    except ValueError as exc:
        raise UserError(_in_flags(str(exc), flags)) from None
    return model


def _summary(model, X, input_name, row_names):
    """The table printed after a fit."""
    n_biclusters = len(model.bicluster_pairs_)
    lines = [
        f"CDP on {input_name}: {X.shape[0]} rows x {X.shape[1]} columns, {X.sum():.0f} counts",
        (
            f"K_r = {model.n_row_clusters_} row clusters, K_c = {model.n_column_clusters_} column clusters, "
            f"{n_biclusters} bicluster(s)"
        ),
    ]
    if not n_biclusters:
        return "\n".join(lines + ["no (k, l) block stands out from the matrix's density (see --z-min)"])
    shown = range(min(n_biclusters, _SUMMARY_MAX_BICLUSTERS))
    blocks = [block_label(model, b) for b in shown]
    width = max(8, *map(len, blocks))
    lines.append("")
    lines.append(
        f"{'#':>3}  {'(k, l)':>{width}}  {'rows':>6}  {'columns':>7}  {'strength':>9}  top rows by membership"
    )
    for b in shown:
        top = bicluster_members(model, b)[0][0]
        top_names = ", ".join(row_names[top[:_SUMMARY_TOP_ROWS]])
        lines.append(
            f"{b:>3}  {blocks[b]:>{width}}  {int(model.rows_[b].sum()):>6}  {int(model.columns_[b].sum()):>7}  "
            f"{model.bicluster_strength_[b]:>9.2f}  {top_names}"
        )
    if n_biclusters > _SUMMARY_MAX_BICLUSTERS:
        lines.append(f"... and {n_biclusters - _SUMMARY_MAX_BICLUSTERS} more (see biclusters.json)")
    return "\n".join(lines)


def _draw_into_files():
    """A command draws into files: matplotlib's non-interactive backend, unless pyplot is in use already (main()
    called from a notebook), whose backend is then left alone."""
    if "matplotlib.pyplot" not in sys.modules and importlib.util.find_spec("matplotlib") is not None:
        import matplotlib

        matplotlib.use("Agg")


def _check_checkpoint_folder(checkpoint, outdir, inputs):
    """UserError where the --checkpoint folder lies in the output directory (which the results replace) or is,
    or lies in, an input."""
    for other, what in [(outdir, "the output directory"), *((path, f"the input {path}") for path in inputs)]:
        if is_within(checkpoint, other):
            raise UserError(f"--checkpoint {checkpoint} must not be, or be inside, {what}: choose a folder of its "
                            "own")


def _reads_a_table(path):
    """Whether INPUT ``path`` is a .csv or .tsv file (read with pandas); False for a path of no known type, which
    the reader names."""
    try:
        return input_format(Path(path)) in ("csv", "tsv")
    except ValueError:
        return False


def _inputs(args):
    """The paths a command reads (INPUT, as :func:`conjoined.io.input_location` says, and the names files):
    what its outputs must not replace or write into."""
    return [path for path in (input_location(args.input), args.row_names, args.column_names) if path is not None]


def _run_fit(args, argv):
    no_matplotlib = not args.no_plots and importlib.util.find_spec("matplotlib") is None
    if no_matplotlib and _reads_a_table(args.input) and importlib.util.find_spec("pandas") is None:
        raise UserError("reading .csv/.tsv files needs pandas and the pictures matplotlib: pip install pandas "
                        "matplotlib (or pip install \"conjoined[all]\"), or pass --no-plots for the first alone")
    if no_matplotlib:
        raise UserError("the pictures need matplotlib: pip install matplotlib, or pass --no-plots")
    if not args.no_plots:
        _draw_into_files()
    X, row_names, column_names, matrix = _read_input(args)
    model = _estimator_from_args(args, single_cell=matrix.source_format in SINGLE_CELL_FORMATS)
    inputs = _inputs(args)
    if args.checkpoint is not None:
        _check_checkpoint_folder(args.checkpoint, args.outdir, inputs)
    with atomic_output_dir(args.outdir, force=args.force, keep=inputs,
                           replaceable=check_replaceable_fit) as staging:
        model._fit(X)
        model._warn_unsettled(n_iter_name="--n-iter")  # the mixtures that have not settled, with the option's name
        with writing_results(staging, args.outdir):
            source = {
                "path": _absolute(args.input),
                "format": matrix.source_format,
                "shape": list(X.shape),
                "layer": args.layer,
                "variable": matrix.variable,
                "first_column": args.first_column,
                "row_names": _absolute(args.row_names),
                "column_names": _absolute(args.column_names),
                "transpose": args.transpose,
            }
            write_fit(staging, model, X, row_names, column_names, source=source, command=[PROG, *argv],
                      pictures=not args.no_plots)
    print(_summary(model, X, args.input, row_names))
    if matrix.source_format in SINGLE_CELL_FORMATS and None in (args.row_likelihood, args.column_likelihood):
        print(f"\nSingle-cell input: genes and cells read by profile (row likelihood {model.row_likelihood}, column "
              f"likelihood {model.column_likelihood}), as conjoined.anndata.cdp reads them; --row-likelihood and "
              "--column-likelihood choose others")
    print(f"\nResults in {Path(args.outdir)}/")
    return 0


# ------------------------------------------------------------------------------------------------ simulate


def _truth_path(matrix_path):
    return matrix_path.with_name(matrix_path.name[: -len(matrix_path.suffix)] + ".truth.json")


def _write_matrix_file(path, suffix, X, row_names, column_names):
    if suffix == ".csv":
        write_table_csv(path, X, row_names, column_names)
    elif suffix == ".npz":
        sp.save_npz(path, sp.csr_matrix(X))
    else:
        with open(path, "wb") as handle:
            scipy.io.mmwrite(handle, sp.coo_matrix(X), field="integer")


def _check_seed(seed):
    if seed is not None and seed < 0:
        raise UserError(f"--seed must be >= 0, got {seed}")


def _run_simulate(args, argv):
    _check_seed(args.seed)
    output = Path(args.output)
    if output.suffix.lower() not in SIMULATION_FORMATS:
        raise UserError(f"{output}: the file name must end with one of {', '.join(SIMULATION_FORMATS)}")
    truth_path = _truth_path(output)
    for path in (output, truth_path):
        if (path.exists() or path.is_symlink()) and not args.force:
            raise UserError(f"{path} already exists; choose another name or use --force")
    if not output.absolute().parent.is_dir():
        raise UserError(f"{output.parent}: no such directory")
    seed = fresh_seed() if args.seed is None else args.seed
    X, rows, columns = make_cdp_case(args.case, random_state=seed, shuffle=args.shuffle)
    row_names = np.array([f"row{i}" for i in range(X.shape[0])])
    column_names = np.array([f"col{j}" for j in range(X.shape[1])])
    truth = {
        "case": args.case,
        "seed": seed,
        "shuffle": args.shuffle,
        "matrix": output.name,
        "shape": list(X.shape),
        "biclusters": [
            {
                "index": b,
                "rows": row_names[row_mask].tolist(),
                "row_indices": np.flatnonzero(row_mask).tolist(),
                "columns": column_names[column_mask].tolist(),
                "column_indices": np.flatnonzero(column_mask).tolist(),
            }
            for b, (row_mask, column_mask) in enumerate(zip(rows, columns))
        ],
    }
    # Both files are written under temporary names first, then replace the old pair together: a failed write or
    # an interruption leaves neither file half-written, and never a matrix beside another matrix's truth.
    with atomic_output_files([output, truth_path]) as (matrix_temporary, truth_temporary):
        _write_matrix_file(matrix_temporary, output.suffix.lower(), X, row_names, column_names)
        write_json(truth_temporary, truth)
    print(
        f"case {args.case}: {X.shape[0]} x {X.shape[1]} matrix, {int(X.sum())} counts, {len(rows)} true "
        f"bicluster(s) -> {output}, {truth_path}"
    )
    return 0


def _run_demo(args, argv):
    _check_seed(args.seed)
    X, rows, columns = make_cdp_case(args.case, random_state=args.seed, shuffle=True)
    spec = CDP_CASES[args.case]
    print(f"simulation case {args.case}: {X.shape[0]} x {X.shape[1]} counts, N = {int(X.sum())}, "
          f"p = {spec['p']} of the tokens in {len(rows)} planted block(s); rows and columns shuffled")
    model = ConjoinedDirichletProcess(random_state=args.seed, verbose=not args.quiet).fit(X)
    print(f"K_r = {model.n_row_clusters_} row clusters, K_c = {model.n_column_clusters_} column clusters, "
          f"{len(model.bicluster_pairs_)} bicluster(s) found")

    def span(mask):
        return ",".join(str(i) for i in np.flatnonzero(mask))

    for b, (row_mask, column_mask) in enumerate(zip(model.rows_, model.columns_)):
        print(f"  found {b}: strength {model.bicluster_strength_[b]:6.1f}, {row_mask.sum()} rows x "
              f"{column_mask.sum()} columns; rows {span(row_mask)}; columns {span(column_mask)}")
    for b, (row_mask, column_mask) in enumerate(zip(rows, columns)):
        print(f"  true  {b}: {row_mask.sum()} rows x {column_mask.sum()} columns; rows {span(row_mask)}; "
              f"columns {span(column_mask)}")
    score = jaccard_score((model.rows_, model.columns_), (rows, columns))
    print(f"Jaccard score (the paper's): {score:.3f}")
    return 0


# ---------------------------------------------------------------------------------------------------- score


def _is_integer(value):
    """True for a JSON integer (bool excluded)."""
    return isinstance(value, int) and not isinstance(value, bool)


def _checked_indices(values, size, where):
    """The JSON list ``values`` as an int64 array of indices in 0..size-1; ValueError naming ``where``."""
    if not isinstance(values, list) or not all(_is_integer(value) for value in values):
        raise ValueError(f"{where} must be a list of integers")
    outside = [value for value in values if not 0 <= value < size]
    if outside:
        raise ValueError(f"{where}: index {outside[0]} is outside 0..{size - 1}")
    return np.array(values, dtype=np.int64)


def _bicluster_sets(content):
    """``(shape, rows, columns, (row names, column names))`` of a parsed biclusters/truth file: the matrix shape
    and, per bicluster, its row and its column indices, and their names where every bicluster lists them (else
    None for that side); ValueError naming the first problem."""
    if not isinstance(content, dict) or "shape" not in content or "biclusters" not in content:
        raise ValueError("not a biclusters/truth file (needs 'shape' and 'biclusters')")
    shape = content["shape"]
    if not (isinstance(shape, list) and len(shape) == 2 and all(_is_integer(n) and n >= 1 for n in shape)):
        raise ValueError(f"'shape' must be a list of 2 integers >= 1, got {json.dumps(shape)[:60]}")
    biclusters = content["biclusters"]
    if not isinstance(biclusters, list) or not all(isinstance(b, dict) for b in biclusters):
        raise ValueError("'biclusters' must be a list of objects")
    rows, columns, row_names, column_names = [], [], [], []
    for b, bicluster in enumerate(biclusters):
        for key, size, sets, names, name_key in (("row_indices", shape[0], rows, row_names, "rows"),
                                                 ("column_indices", shape[1], columns, column_names, "columns")):
            if key not in bicluster:
                raise ValueError(f"bicluster {b} has no {key!r}")
            sets.append(_checked_indices(bicluster[key], size, f"bicluster {b}: {key!r}"))
            given = bicluster.get(name_key)
            named = (isinstance(given, list) and len(given) == len(sets[-1])
                     and all(isinstance(name, str) for name in given))
            names.append(given if named else None)
    names = tuple(None if any(n is None for n in side) else side for side in (row_names, column_names))
    return tuple(shape), rows, columns, names


def _read_bicluster_json(path, what):
    """``(shape, rows, columns, names, path)`` (see _bicluster_sets) of a biclusters.json (or its OUTDIR) or
    truth."""
    path = Path(path)
    if path.is_dir():
        path = path / "biclusters.json"
    if not path.is_file():
        raise UserError(f"{path}: no such file ({what})")
    try:
        with open(path, encoding="utf-8") as handle:
            content = json.load(handle)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise UserError(f"{path}: cannot read as JSON ({type(exc).__name__}: {exc})") from None
    try:
        return (*_bicluster_sets(content), path)
    except ValueError as exc:
        raise UserError(f"{path}: {exc}") from None


def _membership_masks(*item_sets):
    """Bool masks, one (n_biclusters, n_used) array per list of item arrays (indices, or names), over the n_used
    items any set holds: Jaccard indices only count members, and the masks stay as small as the files whatever
    the matrix shape."""
    used = np.unique(np.concatenate([np.asarray(items) for sets in item_sets for items in sets] or [[]]))
    masks = []
    for sets in item_sets:
        mask = np.zeros((len(sets), used.size), dtype=bool)
        for b, items in enumerate(sets):
            mask[b, np.searchsorted(used, np.asarray(items))] = True
        masks.append(mask)
    return masks


def _run_score(args, argv):
    found_shape, found_rows, found_columns, found_names, found_path = _read_bicluster_json(
        args.found, "the found biclusters"
    )
    truth_shape, truth_rows, truth_columns, truth_names, truth_path = _read_bicluster_json(args.truth, "the truth")
    if found_shape != truth_shape:
        raise UserError(
            f"{found_path} is for a {found_shape} matrix but {truth_path} for a {truth_shape} one"
        )
    masks, matched = [], []
    sides = (("rows", found_rows, truth_rows, found_names[0], truth_names[0]),
             ("columns", found_columns, truth_columns, found_names[1], truth_names[1]))
    for side, found, truth, found_named, truth_named in sides:
        # Items are matched by name where both files name them and share names (a fit of the same matrix with its
        # rows or columns in another order, as the simulation's truth names them); by position otherwise (a
        # matrix without names, whose fit names its items by position).
        by_name = (found_named is not None and truth_named is not None
                   and bool({n for names in found_named for n in names} & {n for names in truth_named for n in names}))
        masks.append(_membership_masks(found_named, truth_named) if by_name else _membership_masks(found, truth))
        matched.append(f"{side} by {'name' if by_name else 'position'}")
    score = jaccard_score((masks[0][0], masks[1][0]), (masks[0][1], masks[1][1]))
    print(f"Jaccard score: {score:.4f} ({len(found_rows)} found, {len(truth_rows)} true bicluster(s); "
          f"{' and '.join(matched)})")
    return 0


# ------------------------------------------------------------------------------------------------- predict


def _new_items_side(args, X, row_names, column_names, model):
    """"rows" or "columns": which side of INPUT holds items new to the fit (--side, or the side whose other side
    holds the fit's items, by names (others may be there too: they are left out) or, where INPUT has none, by
    length); UserError when it cannot tell."""
    if args.side is not None:
        return args.side
    fitted = {"columns": (model.row_names, row_names, X.shape[0]), "rows": (model.column_names, column_names,
                                                                            X.shape[1])}
    matching = [side for side, (names, given, n) in fitted.items()
                if (set(given) >= set(names) if given is not None else n == len(names))]
    if len(matching) == 1:
        return matching[0]
    if matching:
        raise UserError(f"{args.input}: its rows match the fitted rows and its columns the fitted columns: say "
                        "which are new with --side rows or --side columns")
    unknown = []  # what each named side of INPUT lacks of the fit's items
    for what, names, given in (("row", model.row_names, row_names), ("column", model.column_names, column_names)):
        if given is not None:
            present = set(given)
            missing = [name for name in names if name not in present]
            unknown.append(f"{what}s lack {len(missing)} of the {len(names)} fitted {what}s, "
                           f"{str(missing[0])!r} among them")
    # a side INPUT could match by position, but not by its names, against a fit whose items have none
    unnamed = [what for what, names, given, n in (("rows", model.row_names, row_names, X.shape[0]),
                                                  ("columns", model.column_names, column_names, X.shape[1]))
               if given is not None and n == len(names) and np.array_equal(names, default_names(len(names)))]
    raise UserError(
        f"{args.input}: neither do its rows ({X.shape[0]}) hold the fitted rows ({len(model.row_names)}) nor its "
        f"columns ({X.shape[1]}) the fitted columns ({len(model.column_names)}), by name or, without names, by "
        "number" + (f" (its {'; its '.join(unknown)})" if unknown else "") + ": new columns need counts over the "
        "fitted rows, new rows over the fitted columns"
        + _transpose_hint(args, row_names, column_names, model)
        + (f"; the fit's {' and '.join(unnamed)} have no names but their numbers 0, 1, ... (a matrix without "
           "names, or conjoined.save_fit without row_names= / column_names=): give INPUT without names to match "
           "by position" if unnamed else ""))


def _transpose_hint(args, row_names, column_names, model):
    """The part of :func:`_new_items_side`'s error on --transpose: said plainly where the file's transpose holds
    the fit's items by name (a file in the layout of a fit made with --transpose, read without it)."""
    holds = [f"its {mine} hold the fitted {theirs}" for mine, given, theirs, fitted in (
        ("columns", column_names, "rows", model.row_names), ("rows", row_names, "columns", model.column_names))
        if given is not None and set(given) >= set(fitted)]
    if args.transpose:
        return ""
    if holds:
        return f"; {' and '.join(holds)}: the file is laid out the other way, add --transpose"
    return " (--transpose reads the file's transpose)"


def _aligned(X, given, fitted, axis, where):
    """X with its ``axis`` (0: rows) put in the order of the ``fitted`` names, by ``given`` names (None: by
    position, the lengths checked); UserError naming a fitted name INPUT lacks; names the fit lacks are left out
    with a warning (a new sample's genes beyond those fitted, as ``anndata.predict_cells`` leaves them out)."""
    if given is None:
        if X.shape[axis] != len(fitted):
            raise UserError(f"{where}: {X.shape[axis]} lines where the fit has {len(fitted)}")
        return X
    position = {name: index for index, name in enumerate(given)}
    missing = [name for name in fitted if name not in position]
    if missing:
        raise UserError(f"{where}: {len(missing)} of the fit's names missing (e.g. {str(missing[0])!r})")
    extra = len(given) - len(fitted)
    if extra:
        fitted_names = set(fitted)
        example = next(name for name in given if name not in fitted_names)
        warnings.warn(f"{where}: {extra} name(s) the fit does not have (e.g. {str(example)!r}) are left out")
    order = np.array([position[name] for name in fitted])
    return X[order] if axis == 0 else X[:, order]


def _run_predict(args, argv):
    X_fit, model = load_fit(args.fitdir, ("matrix.npz", "model.npz", "params.json"))
    params = fitted_parameters(args.fitdir)
    output = Path(args.output)
    if output.is_dir():
        raise UserError(f"{output} is a directory: give the file to write, such as {output / 'classes.csv'}")
    if (output.exists() or output.is_symlink()) and not args.force:
        raise UserError(f"{output} already exists; choose another name or use --force")
    if not output.absolute().parent.is_dir():
        raise UserError(f"{output}: its folder {output.parent} does not exist, or is not a folder")
    if Path(os.path.realpath(output)).parent == Path(args.fitdir).resolve():  # where it writes, links followed
        raise UserError(f"{output}: write it outside the fit's folder {args.fitdir} (it holds the fit's own files "
                        "only)")
    check_not_input(output, _inputs(args))
    X, row_names, column_names, _ = _read_counts(args)
    side = _new_items_side(args, X, row_names, column_names, model)
    classifiers = fitted_classifiers(X_fit, model.row_labels_, model.column_labels_,
                                     (model.n_row_clusters_, model.n_column_clusters_), params)
    if side == "columns":
        items = _aligned(X, row_names, model.row_names, 0, f"{args.input}, its rows").T
        names, classifier, clusters, prefix = column_names, classifiers[1], model.bicluster_column_clusters_, "l"
    else:
        items = _aligned(X, column_names, model.column_names, 1, f"{args.input}, its columns")
        names, classifier, clusters, prefix = row_names, classifiers[0], model.bicluster_row_clusters_, "k"
    names = default_names(items.shape[0]) if names is None else np.asarray(names, dtype=str)
    probabilities = cluster_probabilities(classifier, items)
    labels = most_probable(probabilities)
    classified = labels >= 0
    if not classified.all():
        warnings.warn(f"{(~classified).sum()} new {side[:-1]}(s) of {args.input} have no counts in the fit's "
                      "clusters: label -1, probabilities 0", AllZeroWarning)
    table = np.empty((len(names), probabilities.shape[1] + 3), dtype=object)
    table[:, :-3] = probabilities
    table[:, -3] = labels
    table[:, -2] = label_probabilities(probabilities, labels, 0.0)
    table[:, -1] = [" ".join(map(str, np.flatnonzero(clusters[:, label]))) if label >= 0 else "" for label in labels]
    write_table_csv(output, table, names, [f"{prefix}{c}" for c in range(probabilities.shape[1])]
                    + ["label", "label_probability", "biclusters"])
    sizes = np.bincount(labels[labels >= 0], minlength=probabilities.shape[1])
    counts = [f"{prefix}{c}: {n}" for c, n in enumerate(sizes) if n]
    counts += [f"unassigned: {(~classified).sum()}"] if not classified.all() else []
    item = side if len(names) != 1 else side[:-1]
    print(f"{len(names)} new {item} of {args.input} classified among the fit's {probabilities.shape[1]} "
          f"{side[:-1]} clusters ({', '.join(counts)}); written to {output}")
    return 0


# ---------------------------------------------------------------------------------------------------- plot


def _run_plot(args, argv):
    X, model = load_fit(args.outdir)
    _draw_into_files()
    side_names = side_names_of(_recorded_input_format(args.outdir))
    for path in draw_pictures(Path(args.outdir), X, model, model.row_names, model.column_names, fmt=args.format,
                              dpi=args.dpi, side_names=side_names):
        print(path)
    return 0


def _recorded_input_format(outdir):
    """The input format params.json records for a fit's folder (``input.format``); None for a fit made in Python
    or a params.json that does not say."""
    try:
        source = json.loads((Path(outdir) / "params.json").read_text(encoding="utf-8")).get("input")
    except (OSError, ValueError, AttributeError):
        return None
    return source.get("format") if isinstance(source, dict) else None


# ---------------------------------------------------------------------------------------------------- main


def _print_warning(message, category, filename, lineno, file=None, line=None):
    print(f"{PROG}: warning: {message}", file=sys.stderr)


def _kept_note(interruption):
    """What an interruption that arrived while finished results were being kept elsewhere must still say."""
    kept = kept_elsewhere(interruption)
    return "" if kept is None else f" after the fit: {_one_line(kept)}"


def _one_line(exc):
    return "; ".join(part.strip() for part in str(exc).splitlines() if part.strip()) or type(exc).__name__


def _dispatch(argv):
    """Parse ``argv`` and run its subcommand; returns the exit status."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # --help, --version and usage errors (argparse has printed the message)
        return exc.code
    with warnings.catch_warnings():
        warnings.showwarning = _print_warning
        return args.run(args, argv)


def _stdout_is_closed_pipe():
    """True when stdout is a pipe whose reader has gone (poll reports an error on it); True where poll is not
    available, as the likeliest case."""
    if not hasattr(select, "poll"):
        return True
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & select.POLLERR for _, events in poller.poll(0))
    except (OSError, ValueError):  # stdout replaced by an object without a file descriptor
        return False


def _stdout_closed():
    """Exit status when stdout was closed early (``conjoined ... | head``): as after SIGPIPE, silently.

    stdout is pointed at devnull so that Python's flush at exit does not fail again (the idiom of the Python
    documentation, https://docs.python.org/3/library/signal.html#note-on-sigpipe).
    """
    _to_devnull(sys.stdout.fileno())
    return 128 + 13  # SIGPIPE


def _to_devnull(fileno):
    """Point the descriptor ``fileno`` at devnull: a stream's buffer, and Python's flush at exit, then succeed."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fileno)
    os.close(devnull)


class _Terminated(BaseException):
    """SIGTERM or SIGHUP (``timeout``, a batch scheduler, a closed terminal): raised like KeyboardInterrupt, so
    that half-written outputs are removed on the way out."""

    def __init__(self, signum):
        super().__init__(signum)
        self.signum = signum


def _raise_terminated(signum, frame):
    raise _Terminated(signum)


@contextlib.contextmanager
def _terminate_cleanly():
    """While the block runs, SIGTERM and SIGHUP raise :class:`_Terminated` where they would have killed the
    process (a signal ignored, as SIGHUP under ``nohup``, or handled by the caller is left as it is), and in the
    main thread only: elsewhere, as in a notebook's worker thread, signals cannot be caught."""
    signums = [signal.SIGTERM] + ([signal.SIGHUP] if hasattr(signal, "SIGHUP") else [])
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {signum: signal.signal(signum, _raise_terminated) for signum in signums
                if signal.getsignal(signum) == signal.SIG_DFL}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


class _SideOutput:
    """The command's stderr, which carries side output only (progress lines, warnings, the last status line):
    where it cannot be written (``2>&1 | head -1`` once the reader has gone, ``2>/dev/full``), what is left of it
    goes to devnull and the run goes on, so that a fit still writes its results; the exit status is then the
    run's. The descriptor stays on devnull for the rest of the process (its buffer, and Python's flush at exit,
    then succeed). A non-blocking stderr that is full for now (EAGAIN) loses that text only. ``wrapped_stream``
    is the stream; other attributes are the stream's."""

    def __init__(self, stream):
        self.wrapped_stream = stream

    def _failed(self, error):
        if isinstance(error, BlockingIOError):
            return
        with contextlib.suppress(OSError, ValueError):
            _to_devnull(self.wrapped_stream.fileno())

    def write(self, text):
        try:
            return self.wrapped_stream.write(text)
        except OSError as error:
            self._failed(error)
            return len(text)

    def flush(self):
        try:
            self.wrapped_stream.flush()
        except OSError as error:
            self._failed(error)

    def __getattr__(self, name):
        return getattr(self.wrapped_stream, name)


def main(argv=None):
    """Run the ``conjoined`` command with ``argv`` (default: ``sys.argv[1:]``); returns the exit status."""
    stderr, sys.stderr = sys.stderr, _SideOutput(sys.stderr)
    try:
        return _main(argv)
    finally:
        sys.stderr = stderr


def _main(argv):
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        try:
            with _terminate_cleanly():
                status = _dispatch(argv)
            sys.stdout.flush()  # a closed stdout pipe shows here, not in Python's flush at exit
            return status
        except Exception as exc:
            interruption = interruption_behind(exc, (KeyboardInterrupt, _Terminated))
            if interruption is None:
                raise
            raise interruption from None
    except _Terminated as exc:
        print(f"{PROG}: terminated by signal {exc.signum}{_kept_note(exc)}", file=sys.stderr)
        return 128 + exc.signum
    except BrokenPipeError as exc:
        if _stdout_is_closed_pipe():
            return _stdout_closed()
        print(f"{PROG}: error: {_one_line(exc)}", file=sys.stderr)  # another pipe broke (a worker, a subprocess)
        return 2
    except (UserError, ValueError, OSError, ImportError) as exc:
        print(f"{PROG}: error: {_one_line(exc)}", file=sys.stderr)
        return 2
    except MemoryError as exc:
        print(f"{PROG}: error: out of memory ({_one_line(exc)})", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:
        print(f"{PROG}: interrupted{_kept_note(exc)}", file=sys.stderr)
        return 130
