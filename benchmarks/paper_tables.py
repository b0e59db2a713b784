"""Reproduce the CDP paper's Table 2 (Jaccard on four simulation cases) and Table 3 (runtime against DT2B).

Every method runs on the SAME replicates: replicate ``r`` of case ``c`` is
``make_cdp_case(c, shuffle=True)`` (rows and columns shuffled) drawn with a seed fixed by ``(c, r)``, and
every method gets the same fitting seed for that replicate. Methods and their settings (see
the baselines' docstrings):

- Plaid on log(X + 1); C & C (5 biclusters, delta 1) on the column-standardised matrix; Bimax on
  log(X + 1) > 1 (counts >= 2) with at most 100 biclusters (biclust's ``number=100``); Spectral (biclust's
  ``BCSpectral`` setting: 3 x 3 checkerboard, Kluger's log normalisation);
- DT2B with the true K: K_r = K_c = number of true blocks + 1 (the blocks plus the background), 500 sweeps,
  hyperparameters 0.5;
- CDP with its defaults, and CDP with the authors' options (``mode="paper"``,
  ``reassign_method="paper-code"``, ``extraction="paper-code"``) and the paper's 1000 DPMM iterations, as a
  separate column.

The runtime table (Table 3) is measured serially in the same run, after a warm-up fit of every method (so
numba's compilation is not timed), on the first replicates of case 2: CDP with the paper's settings and with
its defaults against DT2B(5, 5), (10, 10), (25, 25) with 500 sweeps. Every method uses one thread.

Usage::

    python benchmarks/paper_tables.py --replicates 30 --out docs/results
    python benchmarks/paper_tables.py --quick --out /tmp/paper_tables   # 3 replicates, to check the script
    python benchmarks/paper_tables.py --methods cdp --first-replicate 50 --replicates 1000 \
        --runtime-replicates 0 --jobs 2 --out /tmp/fresh   # CDP on 1,000 further replicates of each case

Outputs in ``--out``: ``jaccard_table.md`` / ``.csv`` (mean and sd per case and method, the paper's numbers
beside them), ``jaccard_replicates.csv`` (one row per fit), ``runtime_table.md`` / ``.csv``,
``runtime_replicates.csv`` and ``paper_tables.png``.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from conjoined.baselines import DT2B, Bimax, ChengChurch, Plaid, Spectral
from conjoined.cdp import ConjoinedDirichletProcess
from conjoined.datasets import make_cdp_case
from conjoined.metrics import jaccard_score

BASE_SEED = 20250601
CASES = (1, 2, 3, 4)
RUNTIME_CASE = 2


class Method(NamedTuple):
    label: str
    build: Callable[[int, int], object]  # (number of true blocks, seed) -> unfitted estimator
    paper_key: str | None  # column of the paper's Table 2 (None: not in it)


def _cdp_paper(seed):
    return ConjoinedDirichletProcess(
        mode="paper",
        reassign_method="paper-code",
        extraction="paper-code",
        n_iter=1000,
        random_state=seed,
        n_jobs=1,
    )


METHODS = {
    "plaid": Method("Plaid", lambda n_blocks, seed: Plaid(random_state=seed), "plaid"),
    "cheng-church": Method("C & C", lambda n_blocks, seed: ChengChurch(random_state=seed), "cheng-church"),
    "bimax": Method("Bimax", lambda n_blocks, seed: Bimax(max_biclusters=100), "bimax"),
    "spectral": Method("Spectral", lambda n_blocks, seed: Spectral(random_state=seed), None),
    "dt2b": Method(
        "DT2B (true K)", lambda n_blocks, seed: DT2B(n_blocks + 1, n_blocks + 1, random_state=seed), "dt2b"
    ),
    "cdp": Method(
        "CDP (defaults)", lambda n_blocks, seed: ConjoinedDirichletProcess(random_state=seed, n_jobs=1), "cdp"
    ),
    "cdp-paper": Method("CDP (paper options)", lambda n_blocks, seed: _cdp_paper(seed), "cdp"),
}

RUNTIME_METHODS = {
    "cdp-paper": Method("CDP (paper options, n_iter=1000)", lambda n_blocks, seed: _cdp_paper(seed), "cdp"),
    "cdp": Method("CDP (defaults)", METHODS["cdp"].build, None),
    "dt2b-5": Method(
        "DT2B(5, 5)", lambda n_blocks, seed: DT2B(5, 5, n_sweeps=500, random_state=seed), "dt2b-5"
    ),
    "dt2b-10": Method(
        "DT2B(10, 10)", lambda n_blocks, seed: DT2B(10, 10, n_sweeps=500, random_state=seed), "dt2b-10"
    ),
    "dt2b-25": Method(
        "DT2B(25, 25)", lambda n_blocks, seed: DT2B(25, 25, n_sweeps=500, random_state=seed), "dt2b-25"
    ),
}

# The paper's Table 2: mean (sd) Jaccard per case. It ran Spectral too but left it out ("accuracy so low").
PAPER_JACCARD = {
    "plaid": {1: (0.133, 0.06), 2: (0.862, 0.265), 3: (0.172, 0.087), 4: (0.316, 0.343)},
    "cheng-church": {1: (0.16, 0.00), 2: (0.016, 0.000), 3: (0.048, 0.000), 4: (0.008, 0.000)},
    "bimax": {1: (0.141, 0.005), 2: (0.098, 0.021), 3: (0.105, 0.012), 4: (0.101, 0.014)},
    "dt2b": {1: (0.806, 0.204), 2: (0.889, 0.118), 3: (0.236, 0.032), 4: (0.522, 0.087)},
    "cdp": {1: (0.69, 0.088), 2: (0.985, 0.081), 3: (0.25, 0.014), 4: (0.756, 0.033)},
}
# The paper's Table 3 (case 2, an i5-7600K): mean Jaccard, its sd, runtime in seconds.
PAPER_RUNTIME = {
    "cdp": (0.96, 0.02, 13.22),
    "dt2b-5": (0.41, 0.11, 4.23),
    "dt2b-10": (0.94, 0.13, 12.85),
    "dt2b-25": (0.98, 0.01, 73.45),
}


def replicate_seeds(case, replicate):
    """(data seed, fitting seed) of replicate ``replicate`` of ``case``: fixed, and shared by every method."""
    data_seed, fit_seed = np.random.SeedSequence([BASE_SEED, case, replicate]).generate_state(2)
    return int(data_seed), int(fit_seed)


def replicate_data(case, replicate):
    """``(X, rows, columns)`` of one replicate: the case's matrix with rows and columns shuffled."""
    data_seed, _ = replicate_seeds(case, replicate)
    return make_cdp_case(case, random_state=data_seed, shuffle=True)


def fit_one(case, replicate, method, registry=None):
    """Fit one method on one replicate.

    Returns a dict: case, replicate, method, jaccard, n_biclusters, seconds (fit time)."""
    registry = METHODS if registry is None else registry
    X, rows, columns = replicate_data(case, replicate)
    _, fit_seed = replicate_seeds(case, replicate)
    model = registry[method].build(rows.shape[0], fit_seed)
    start = time.perf_counter()
    with warnings.catch_warnings():
        # the paper's Cheng & Church call: the whole standardised matrix is its first bicluster, as there
        warnings.filterwarnings("ignore", message="the whole matrix", category=UserWarning)
        model.fit(X)
    seconds = time.perf_counter() - start
    return {
        "case": case,
        "replicate": replicate,
        "method": method,
        "jaccard": jaccard_score((model.rows_, model.columns_), (rows, columns)),
        "n_biclusters": int(model.rows_.shape[0]),
        "seconds": seconds,
    }


def run_jaccard_study(cases, n_replicates, methods, jobs=1, progress=True, first_replicate=0):
    """Every method on replicates ``first_replicate..first_replicate + n_replicates - 1`` of every case; one row
    per fit (DataFrame).

    ``jobs > 1`` fits in that many worker processes (each method single-threaded)."""
    replicates = range(first_replicate, first_replicate + n_replicates)
    tasks = [(case, replicate, method) for case in cases for replicate in replicates for method in methods]
    bar = tqdm(total=len(tasks), desc="Table 2 fits", file=sys.stderr, disable=not progress)
    records = []
    if jobs == 1:
        for task in tasks:
            records.append(fit_one(*task))
            bar.update()
    else:
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            for future in as_completed([pool.submit(fit_one, *task) for task in tasks]):
                records.append(future.result())
                bar.update()
    bar.close()
    records = pd.DataFrame(records)
    records["method"] = pd.Categorical(records["method"], categories=list(dict.fromkeys(methods)))
    return records.sort_values(["case", "method", "replicate"], ignore_index=True)


def summarize_jaccard(records):
    """Mean, sample sd (ddof=1) and count of the Jaccard score, and mean fit time, per (case, method), with
    the paper's mean and sd beside them (NaN where the paper has no number)."""
    summary = (
        records.groupby(["case", "method"], sort=False, observed=True)
        .agg(
            mean=("jaccard", "mean"),
            sd=("jaccard", "std"),
            n=("jaccard", "size"),
            seconds=("seconds", "mean"),
        )
        .reset_index()
    )
    paper = [
        PAPER_JACCARD.get(METHODS[m].paper_key, {}).get(c, (np.nan, np.nan))
        for c, m in zip(summary["case"], summary["method"])
    ]
    summary["paper_mean"] = [mean for mean, _ in paper]
    summary["paper_sd"] = [sd for _, sd in paper]
    return summary


def run_runtime_study(n_replicates, methods=tuple(RUNTIME_METHODS), progress=True):
    """Table 3: each runtime method on replicates ``0..n_replicates-1`` of case 2, timed one at a time.

    A warm-up fit of every method on replicate 0 comes first and is not recorded (numba compilation)."""
    for method in methods:
        fit_one(RUNTIME_CASE, 0, method, RUNTIME_METHODS)
    bar = tqdm(total=n_replicates * len(methods), desc="Table 3 fits", file=sys.stderr, disable=not progress)
    records = []
    for replicate in range(n_replicates):
        for method in methods:
            records.append(fit_one(RUNTIME_CASE, replicate, method, RUNTIME_METHODS))
            bar.update()
    bar.close()
    return pd.DataFrame(records)


def summarize_runtime(records):
    """Mean (sd) Jaccard and runtime per method, the paper's numbers, and the time ratios: this run over the
    paper, and each method over CDP with the paper's settings (this run and the paper)."""
    summary = (
        records.groupby("method", sort=False)
        .agg(
            jaccard_mean=("jaccard", "mean"),
            jaccard_sd=("jaccard", "std"),
            seconds_mean=("seconds", "mean"),
            seconds_sd=("seconds", "std"),
            n=("seconds", "size"),
        )
        .reset_index()
    )
    paper = [PAPER_RUNTIME.get(RUNTIME_METHODS[m].paper_key, (np.nan,) * 3) for m in summary["method"]]
    summary["paper_jaccard_mean"] = [row[0] for row in paper]
    summary["paper_jaccard_sd"] = [row[1] for row in paper]
    summary["paper_seconds"] = [row[2] for row in paper]
    summary["ratio_to_paper"] = summary["seconds_mean"] / summary["paper_seconds"]
    reference = summary.loc[summary["method"] == "cdp-paper", "seconds_mean"]
    summary["ratio_to_cdp"] = summary["seconds_mean"] / (reference.iloc[0] if len(reference) else np.nan)
    summary["paper_ratio_to_cdp"] = summary["paper_seconds"] / PAPER_RUNTIME["cdp"][2]
    return summary


def _mean_sd(mean, sd, digits=3, mean_digits=None):
    """``mean (sd)`` to ``digits`` decimals (the mean to ``mean_digits`` if given); "—" for a NaN mean."""
    if np.isnan(mean):
        return "—"
    mean_digits = digits if mean_digits is None else mean_digits
    return f"{mean:.{mean_digits}f}" + ("" if np.isnan(sd) else f" ({sd:.{digits}f})")


def _markdown(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def jaccard_markdown(summary):
    """Table 2 layout: a row per case (best mean in bold) followed by the paper's row; a column per method. Our
    means have four decimals: rounded to three, a mean of 0.9495 would read as the 0.95 goal."""
    methods = list(dict.fromkeys(summary["method"]))
    rows = []
    for case, group in summary.groupby("case", sort=True):
        by_method = group.set_index("method")
        best = by_method["mean"].max()
        ours = [_mean_sd(by_method.at[m, "mean"], by_method.at[m, "sd"], mean_digits=4) for m in methods]
        ours = [
            f"**{cell}**" if np.isclose(by_method.at[m, "mean"], best) else cell
            for cell, m in zip(ours, methods)
        ]
        rows.append([f"{case}"] + ours)
        rows.append(
            [f"{case}, paper"]
            + [_mean_sd(by_method.at[m, "paper_mean"], by_method.at[m, "paper_sd"]) for m in methods]
        )
    return _markdown(["Case"] + [METHODS[m].label for m in methods], rows)


def runtime_markdown(summary):
    """Table 3 layout with the paper's numbers and the time ratios beside each method."""
    header = [
        "Method",
        "Jaccard",
        "paper Jaccard",
        "time (s)",
        "paper time (s)",
        "time / paper time",
        "time / CDP time",
        "paper: time / CDP time",
    ]
    rows = []
    for row in summary.itertuples():
        rows.append(
            [
                RUNTIME_METHODS[row.method].label,
                _mean_sd(row.jaccard_mean, row.jaccard_sd),
                _mean_sd(row.paper_jaccard_mean, row.paper_jaccard_sd, digits=2),
                _mean_sd(row.seconds_mean, row.seconds_sd, digits=2),
                _mean_sd(row.paper_seconds, np.nan, digits=2),
                _mean_sd(row.ratio_to_paper, np.nan, digits=3),
                _mean_sd(row.ratio_to_cdp, np.nan, digits=2),
                _mean_sd(row.paper_ratio_to_cdp, np.nan, digits=2),
            ]
        )
    return _markdown(header, rows)


def plot_results(jaccard_summary, runtime_summary, path):
    """Save the figure to ``path``. Left: mean Jaccard per case and method (error bars: sd; black marks: the
    paper). Right: Table 3 times (log scale; black marks: the paper's times), each bar labelled with its
    method's mean Jaccard (and the paper's)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    has_runtime = runtime_summary is not None and len(runtime_summary)
    fig, axes = plt.subplots(
        1,
        2 if has_runtime else 1,
        figsize=(15, 5.5) if has_runtime else (9, 5.5),
        gridspec_kw={"width_ratios": [1.6, 1]} if has_runtime else None,
        squeeze=False,
    )
    ax = axes[0, 0]
    methods = list(dict.fromkeys(jaccard_summary["method"]))
    cases = sorted(jaccard_summary["case"].unique())
    width = 0.8 / len(methods)
    colours = plt.get_cmap("tab10")
    for i, method in enumerate(methods):
        part = jaccard_summary[jaccard_summary["method"] == method].set_index("case").loc[cases]
        x = np.arange(len(cases)) - 0.4 + (i + 0.5) * width
        ax.bar(
            x,
            part["mean"],
            width,
            yerr=part["sd"].fillna(0),
            capsize=2,
            color=colours(i),
            label=METHODS[method].label,
            error_kw={"elinewidth": 0.8},
        )
        ax.scatter(
            x,
            part["paper_mean"],
            marker="_",
            s=120,
            color="black",
            linewidths=2,
            zorder=3,
            label="paper (Table 2)" if i == 0 else None,
        )
    ax.set_xticks(np.arange(len(cases)), [f"case {c}" for c in cases])
    ax.set_ylim(0, 1.08)
    ax.set_ylabel("Jaccard score (mean ± sd)")
    n = int(jaccard_summary["n"].min())
    ax.set_title(f"Table 2: Jaccard per case ({n} replicates)")
    ax.legend(ncol=4, fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.08), frameon=False)
    ax.grid(axis="y", alpha=0.3)

    if has_runtime:
        ax = axes[0, 1]
        labels = [RUNTIME_METHODS[m].label for m in runtime_summary["method"]]
        y = np.arange(len(labels))[::-1]
        ax.barh(
            y,
            runtime_summary["seconds_mean"],
            xerr=runtime_summary["seconds_sd"].fillna(0),
            capsize=3,
            color="tab:blue",
            alpha=0.8,
            label="this run (1 thread)",
        )
        ax.scatter(
            runtime_summary["paper_seconds"],
            y,
            marker="|",
            s=200,
            color="black",
            linewidths=2,
            zorder=3,
            label="paper (i5-7600K)",
        )
        for yi, row in zip(y, runtime_summary.itertuples()):
            paper = "" if np.isnan(row.paper_jaccard_mean) else f" (paper {row.paper_jaccard_mean:.2f})"
            ax.text(
                row.seconds_mean * 1.1,
                yi + 0.28,
                f"J = {row.jaccard_mean:.2f}{paper}",
                fontsize=8,
                va="center",
            )
        ax.set_yticks(y, labels, fontsize=9)
        ax.set_xscale("log")
        ax.set_xlabel("seconds per fit (mean ± sd, log scale)")
        ax.set_title(
            f"Table 3: runtime on case {RUNTIME_CASE} ({int(runtime_summary['n'].min())} replicates)"
        )
        ax.legend(fontsize=8, loc="lower right")
        ax.grid(axis="x", alpha=0.3, which="both")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--replicates", type=int, default=None, help="replicates per case (default 30; 3 with --quick)"
    )
    parser.add_argument(
        "--first-replicate",
        type=int,
        default=0,
        help="index of the first replicate (default 0: Table 2's; 50 and up: draws the published table never saw)",
    )
    parser.add_argument("--cases", type=int, nargs="+", default=list(CASES), choices=CASES)
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS))
    parser.add_argument(
        "--runtime-replicates",
        type=int,
        default=None,
        help="replicates of the runtime table (default 10; 2 with --quick; 0 skips it)",
    )
    parser.add_argument(
        "--jobs", type=int, default=1, help="worker processes for the Jaccard table (default 1)"
    )
    parser.add_argument("--out", type=Path, default=Path("paper_tables_results"), help="output directory")
    parser.add_argument("--quick", action="store_true", help="few replicates, to check that everything runs")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    args = parser.parse_args(argv)
    if args.replicates is None:
        args.replicates = 3 if args.quick else 30
    if args.runtime_replicates is None:
        args.runtime_replicates = 2 if args.quick else 10
    if args.replicates < 1 or args.runtime_replicates < 0 or args.jobs < 1 or args.first_replicate < 0:
        parser.error("--replicates and --jobs must be >= 1, --runtime-replicates and --first-replicate >= 0")
    return args


def main(argv=None):
    args = parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    progress = not args.no_progress
    start = time.perf_counter()

    records = run_jaccard_study(args.cases, args.replicates, args.methods, jobs=args.jobs, progress=progress,
                                first_replicate=args.first_replicate)
    summary = summarize_jaccard(records)
    records.to_csv(args.out / "jaccard_replicates.csv", index=False, float_format="%.6g")
    summary.to_csv(args.out / "jaccard_table.csv", index=False, float_format="%.6g")
    table2 = jaccard_markdown(summary)
    (args.out / "jaccard_table.md").write_text(table2 + "\n")
    last = args.first_replicate + args.replicates - 1
    print(f"Table 2: mean (sd) Jaccard over {args.replicates} replicates ({args.first_replicate}..{last}); 'paper' "
          "rows: the published Table 2\n")
    print(table2 + "\n")

    runtime_summary = None
    if args.runtime_replicates:
        runtime_records = run_runtime_study(args.runtime_replicates, progress=progress)
        runtime_summary = summarize_runtime(runtime_records)
        runtime_records.to_csv(args.out / "runtime_replicates.csv", index=False, float_format="%.6g")
        runtime_summary.to_csv(args.out / "runtime_table.csv", index=False, float_format="%.6g")
        table3 = runtime_markdown(runtime_summary)
        (args.out / "runtime_table.md").write_text(table3 + "\n")
        print(
            f"Table 3: case {RUNTIME_CASE}, {args.runtime_replicates} replicates, mean (sd); "
            "CDP time = CDP with the paper's settings\n"
        )
        print(table3 + "\n")

    plot_results(summary, runtime_summary, args.out / "paper_tables.png")
    print(f"Wrote {args.out}/ in {time.perf_counter() - start:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
