"""CDP on the condensed 20 Newsgroups (100 words x 16,242 documents), the paper's text-mining study.

    python examples/newsgroups.py [PATH_TO_20news_w100.mat] [--out DIR] [--quick] [--config NAME ...]

Settings are the paper's (words: alpha=10, beta=1; documents: alpha=100, beta=1; 1000 iterations), run in
three configurations, because the paper's choices of likelihood and pipeline are not the library's defaults:

- ``defaults``: the library's pipeline (Poisson likelihood on both sides, conjoined rounds) with the paper's
  hyperparameters.
- ``text``: the same, but a multinomial likelihood on the document side. A document's total here is the number
  of distinct words (of the 100) it uses, which says how long the post is, not what it is about: a nuisance,
  as a cell's library size is in single-cell data, and the multinomial ignores it. Words keep the Poisson
  likelihood, which sees how much a word counts in each document cluster.
- ``paper``: the published pipeline (``mode="paper"``: independent multinomial mixtures on the raw matrix),
  for fidelity to the paper's Table 4.

For each it prints the heavy biclusters with their top words (like the paper's Table 4), the newsgroup make-up
of each document cluster and the NMI of the document clusters against the four newsgroups, and saves the
pictures of ``conjoined fit`` (heatmap, K traces, theta, memberships) into ``OUT/<configuration>/``.
``--quick`` runs 20 iterations (for CI).
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.metrics import adjusted_mutual_info_score, normalized_mutual_info_score

from conjoined.cdp import ConjoinedDirichletProcess
from conjoined.datasets import load_20news_w100
from conjoined.fit_folder import draw_pictures
from conjoined.plot import block_label

PROJECT_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_PATH = PROJECT_ROOT.parent / "shared" / "data" / "20news_w100.mat"
PAPER_HYPERPARAMETERS = {"row_alpha": 10.0, "row_beta": 1.0, "column_alpha": 100.0, "column_beta": 1.0}
CONFIGURATIONS = {
    "defaults": {},
    "text": {"column_likelihood": "multinomial"},
    "paper": {"mode": "paper"},
}
FULL_ITERATIONS = 1000
QUICK_ITERATIONS = 20
SHOWN_BICLUSTERS = 10
TOP_WORDS = 10
SHOWN_DOCUMENT_CLUSTERS = 25


def heavy_bicluster_table(model, words, groups, group_names):
    """The strongest biclusters: (k, l), strength, size, the groups of their documents and their top words."""
    short = [name.rstrip(".*") for name in group_names]
    shown = range(min(SHOWN_BICLUSTERS, len(model.bicluster_pairs_)))
    blocks = [block_label(model, b) for b in shown]
    width = max(9, *map(len, blocks)) if blocks else 9
    header = (
        f"{'#':>3}  {'(k, l)':>{width}}  {'strength':>8}  {'words':>5}  {'docs':>5}  "
        f"{'  '.join(f'{name:>5}' for name in short)}  top words (by their topics' phi)"
    )
    lines = [header]
    for b in shown:
        topics = np.flatnonzero(model.bicluster_row_clusters_[b])
        members = np.flatnonzero(model.rows_[b])
        phi = model.phi_rows_[np.ix_(members, topics)].max(axis=1)
        top = members[np.argsort(-phi, kind="stable")][:TOP_WORDS]
        documents = np.flatnonzero(model.columns_[b])
        shares = np.bincount(groups[documents], minlength=len(group_names)) / max(documents.size, 1)
        lines.append(
            f"{b:>3}  {blocks[b]:>{width}}  {model.bicluster_strength_[b]:>8.1f}  {members.size:>5}  "
            f"{documents.size:>5}  {'  '.join(f'{share:>5.0%}' for share in shares)}  {', '.join(words[top])}"
        )
    return "\n".join(lines)


def document_cluster_table(labels, groups, group_names):
    """Size and newsgroup make-up (percent of the cluster) of each document cluster, largest first."""
    short = [name.rstrip(".*") for name in group_names]
    clusters, sizes = np.unique(labels, return_counts=True)
    order = np.argsort(-sizes, kind="stable")
    lines = [f"{'cluster':>7}  {'docs':>5}  {'  '.join(f'{name:>5}' for name in short)}  majority"]
    for cluster, size in zip(
        clusters[order][:SHOWN_DOCUMENT_CLUSTERS], sizes[order][:SHOWN_DOCUMENT_CLUSTERS]
    ):
        counts = np.bincount(groups[labels == cluster], minlength=len(group_names))
        shares = counts / size
        name = "set aside" if cluster < 0 else str(cluster)
        lines.append(
            f"{name:>7}  {size:>5}  {'  '.join(f'{share:>5.0%}' for share in shares)}  "
            f"{group_names[int(np.argmax(counts))]}"
        )
    if len(clusters) > SHOWN_DOCUMENT_CLUSTERS:
        rest = sizes[order][SHOWN_DOCUMENT_CLUSTERS:]
        lines.append(f"... and {rest.size} smaller clusters holding {rest.sum()} documents")
    return "\n".join(lines)


def run_configuration(name, data, n_iter, seed, outdir):
    params = {**PAPER_HYPERPARAMETERS, **CONFIGURATIONS[name], "n_iter": n_iter, "random_state": seed}
    model = ConjoinedDirichletProcess(**params)
    print(
        f"\n=== configuration {name!r}: CDP({', '.join(f'{key}={value!r}' for key, value in params.items())})"
    )
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the all-zero documents are set aside: reported below
        model.fit(data.data)
    elapsed = time.perf_counter() - start
    set_aside = int((model.column_labels_ < 0).sum())
    print(
        f"fitted in {elapsed:.1f} s: K_r = {model.n_row_clusters_} word clusters, K_c = "
        f"{model.n_column_clusters_} document clusters, {len(model.bicluster_pairs_)} biclusters"
        + (f"; {set_aside} documents without any of the 100 words set aside" if set_aside else "")
    )

    print(
        f"\n--- heavy biclusters (strongest {SHOWN_BICLUSTERS}; columns: share of the bicluster's documents "
        "in each newsgroup)"
    )
    print(heavy_bicluster_table(model, data.row_names, data.column_groups, data.group_names))

    # the document clusters the biclusters are read from (the mixture's, refined), whose indices they name
    labels = model.column_labels_
    print("\n--- document clusters: newsgroup make-up (percent of the cluster)")
    print(document_cluster_table(labels, data.column_groups, data.group_names))
    assigned = labels >= 0
    truth, found = data.column_groups[assigned], labels[assigned]
    print(
        f"NMI against the four newsgroups: {normalized_mutual_info_score(truth, found):.3f} "
        f"(adjusted for chance, AMI: {adjusted_mutual_info_score(truth, found):.3f})"
    )

    pictures = outdir / name
    pictures.mkdir(parents=True, exist_ok=True)
    for path in draw_pictures(pictures, data.data, model, data.row_names, None, side_names=("word", "document")):
        print(f"saved {path}")
    return model


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", nargs="?", default=DEFAULT_PATH, type=Path, help=f"default: {DEFAULT_PATH}")
    parser.add_argument(
        "--out", type=Path, default=Path("newsgroups_output"), help="directory for the pictures"
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"{QUICK_ITERATIONS} iterations instead of {FULL_ITERATIONS} (for CI)",
    )
    parser.add_argument("--config", nargs="+", choices=list(CONFIGURATIONS), default=list(CONFIGURATIONS))
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    try:
        data = load_20news_w100(args.path)
    except (OSError, ValueError) as exc:
        print(f"newsgroups.py: error: {exc}", file=sys.stderr)
        return 2
    n_iter = QUICK_ITERATIONS if args.quick else FULL_ITERATIONS
    args.out.mkdir(parents=True, exist_ok=True)
    print(
        f"Condensed 20 Newsgroups: {data.data.shape[0]} words x {data.data.shape[1]} documents, "
        f"{data.data.nnz} non-zeros; newsgroups {', '.join(data.group_names)} "
        f"({', '.join(str(n) for n in np.bincount(data.column_groups))} documents)"
    )
    print(f"{n_iter} iterations{' (--quick)' if args.quick else ''}, seed {args.seed}")
    for name in args.config:
        run_configuration(name, data, n_iter, args.seed, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
