"""The full CDP pipeline on over-dispersed single-cell-like counts, with and without the dispersion.

``make_marques_like`` draws genes x cells (negative-binomial noise of size 0.5, lognormal gene depths, 20 gene
modules, module k raised eight-fold in cell type k mod 13). Each draw is fitted by
``CDP(row_likelihood="multinomial", column_likelihood="multinomial")`` with ``dispersion="none"`` (the mixtures'
likelihoods as they are) and ``dispersion="auto"`` (the conjoined rounds after the first divide the over-dispersed
features of a multinomial side by their dispersion). For each fit it prints the cell and gene clusters of the
mixtures (``mixture_column_labels_``, ``mixture_row_labels_``), their adjusted Rand index against the 13 cell
types and the 13 distinct gene patterns (modules k and k + 13 are raised in the same cell type), the same for the
refined partitions the biclusters are read from (``column_labels_``, ``row_labels_``), the mean Jaccard of the
biclusters against the 13 true ones (``conjoined.metrics.jaccard_score``) and the fit's time.

    python benchmarks/overdispersion.py [--draws 3] [--shape 2000 800]
"""

from __future__ import annotations

import time

import numpy as np
from gene_depths import N_CELL_TYPES, N_MODULES, draws
from sklearn.metrics import adjusted_rand_score

from conjoined import CDP
from conjoined.metrics import jaccard_score


def main(argv=None):
    for seed, X, genes, cells in draws(__doc__, argv):
        if seed == 0:
            print(f"{X.shape[0]} genes x {X.shape[1]} cells, {N_MODULES} modules in {N_CELL_TYPES} cell types; "
                  "CDP with multinomial likelihoods, default settings otherwise")
            print("draw  dispersion  cell clusters  cell ARI  refined cells  refined ARI  gene clusters  gene ARI"
                  "  refined genes  refined ARI  biclusters  Jaccard  seconds")
        patterns = genes % N_CELL_TYPES
        truth = (np.array([patterns == k for k in range(N_CELL_TYPES)]),
                 np.array([cells == k for k in range(N_CELL_TYPES)]))
        for dispersion in ("none", "auto"):
            start = time.perf_counter()
            model = CDP(row_likelihood="multinomial", column_likelihood="multinomial", dispersion=dispersion,
                        random_state=seed).fit(X)
            seconds = time.perf_counter() - start
            columns = []
            for labels, truth_labels in ((model.mixture_column_labels_, cells), (model.column_labels_, cells),
                                         (model.mixture_row_labels_, patterns), (model.row_labels_, patterns)):
                columns += [np.unique(labels[labels >= 0]).size, adjusted_rand_score(truth_labels, labels)]
            print(f"{seed:4d}  {dispersion:>10}  {columns[0]:13d}  {columns[1]:8.3f}  {columns[2]:13d}"
                  f"  {columns[3]:11.3f}  {columns[4]:13d}  {columns[5]:8.3f}  {columns[6]:13d}  {columns[7]:11.3f}"
                  f"  {model.n_biclusters_:10d}  {jaccard_score((model.rows_, model.columns_), truth):7.3f}"
                  f"  {seconds:7.1f}", flush=True)


if __name__ == "__main__":
    main()
