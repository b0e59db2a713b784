"""The significance rule on single-cell-like counts read with their true partitions: what gene depths cost.

``make_marques_like`` draws genes x cells with lognormal gene depths (a factor e^2 either way is common),
negative-binomial noise (dispersion 0.5) and 20 gene modules, module k raised eight-fold in cell type k mod 13.
The rule (``extract_biclusters``) reads each matrix with its true gene and cell partitions, so what it can get
wrong is which blocks stand and who joins them. The truth is the 13 patterns x their cell types: modules k and
k + 13 are raised alike in one cell type, and the rule joins blocks of one cell cluster that stand at one lift.
For each draw it prints the mean Jaccard (``conjoined.metrics.jaccard_score``) and the genes that joined a
bicluster from a module it does not join, with the default background (cluster levels, item depths) and with
``background="uniform"`` (the paper's one density).

    python benchmarks/gene_depths.py [--draws 3] [--shape 2000 800]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from conjoined.datasets import make_marques_like
from conjoined.extract import extract_biclusters
from conjoined.metrics import jaccard_score
from conjoined.reassign import TokenCounts

N_MODULES, N_CELL_TYPES = 20, 13


def draws(doc, argv=None):
    """Parse ``--draws`` and ``--shape`` (a script's options, ``doc`` its docstring) and yield
    ``(seed, X, genes, cells)`` for draws 0, 1, ... of ``make_marques_like`` at that shape."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--draws", type=int, default=3)
    parser.add_argument("--shape", type=int, nargs=2, default=(2000, 800), metavar=("GENES", "CELLS"))
    args = parser.parse_args(argv)
    for seed in range(args.draws):
        yield (seed, *make_marques_like(*args.shape, n_row_clusters=N_MODULES, n_col_clusters=N_CELL_TYPES,
                                        random_state=seed))


def main(argv=None):
    for seed, X, genes, cells in draws(__doc__, argv):
        n_genes, n_cells = X.shape
        if seed == 0:
            print(f"{n_genes} genes x {n_cells} cells, {N_MODULES} modules, {N_CELL_TYPES} cell types, "
                  "true partitions")
        truth = (np.array([genes % N_CELL_TYPES == k for k in range(N_CELL_TYPES)]),
                 np.array([cells == k for k in range(N_CELL_TYPES)]))
        # the significance rule reads the partitions, not the token counts: empty ones of the right shapes
        counts = TokenCounts(np.zeros((N_MODULES, N_CELL_TYPES)), np.zeros((n_genes, N_MODULES)),
                             np.zeros((n_cells, N_CELL_TYPES)))
        line = [f"draw {seed}:"]
        for background in ("auto", "uniform"):
            start = time.perf_counter()
            found = extract_biclusters(X, counts, row_labels=genes, column_labels=cells, background=background)
            seconds = time.perf_counter() - start
            joiners = sum(int((rows & ~np.isin(genes, modules)).sum())
                          for rows, modules in zip(found.rows, found.row_clusters))
            line.append(f"{background}: {len(found.pairs)} biclusters, Jaccard "
                        f"{jaccard_score((found.rows, found.columns), truth):.3f}, {joiners} genes joined "
                        f"from other modules ({seconds:.1f} s);")
        print(" ".join(line))


if __name__ == "__main__":
    main()
