"""A whole CDP fit on single-cell-like counts of a chosen size: time, memory, clusters and biclusters.

``make_marques_like`` (draw 0 of ``gene_depths.draws``) draws genes x cells with lognormal gene depths,
negative-binomial noise of size 0.5, 20 gene modules and 13 cell types (module k raised eight-fold in cell type
k mod 13; the truth is the 13 patterns x their cell types). The fit uses the paper's single-cell hyperparameters
(genes alpha=10, beta=0.1; cells alpha=10, beta=1) and one of two likelihood settings:

- ``singlecell``: multinomial cells, Poisson genes (``examples/pbmc.py``'s ``singlecell`` until the
  twenty-seventh session);
- ``multinomial``: multinomial on both sides (as ``benchmarks/overdispersion.py``, and ``conjoined.anndata.cdp``'s
  defaults).

It prints the fit's time and the process's peak memory, the numbers of clusters (the mixtures' and the refined
partitions'), their NMI against the modules and cell types, the number of biclusters and their Jaccard,
relevance and recovery against the 13 true ones.

    python benchmarks/singlecell_scale.py [--shape 23226 5053] [--config singlecell multinomial] [--n-jobs N]
"""

from __future__ import annotations

import argparse
import resource
import time

import numpy as np
from gene_depths import N_CELL_TYPES, N_MODULES
from sklearn.metrics import normalized_mutual_info_score

from conjoined import CDP
from conjoined.datasets import make_marques_like
from conjoined.metrics import jaccard_score, recovery_score, relevance_score

PAPER_HYPERPARAMETERS = {"row_alpha": 10.0, "row_beta": 0.1, "column_alpha": 10.0, "column_beta": 1.0}
CONFIGURATIONS = {
    "singlecell": {"column_likelihood": "multinomial"},
    "multinomial": {"row_likelihood": "multinomial", "column_likelihood": "multinomial"},
}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", type=int, nargs=2, default=(23226, 5053), metavar=("GENES", "CELLS"))
    parser.add_argument("--config", nargs="+", choices=list(CONFIGURATIONS), default=list(CONFIGURATIONS))
    parser.add_argument("--n-jobs", type=int, default=None)
    args = parser.parse_args(argv)
    X, genes, cells = make_marques_like(*args.shape, n_row_clusters=N_MODULES, n_col_clusters=N_CELL_TYPES,
                                        random_state=0)
    truth = (np.array([genes % N_CELL_TYPES == k for k in range(N_CELL_TYPES)]),
             np.array([cells == k for k in range(N_CELL_TYPES)]))
    print(f"{X.shape[0]} genes x {X.shape[1]} cells, {X.nnz:,} non-zeros; {N_MODULES} modules, {N_CELL_TYPES} "
          f"cell types, {len(truth[0])} true biclusters")
    for name in args.config:
        params = {**PAPER_HYPERPARAMETERS, **CONFIGURATIONS[name]}
        start = time.perf_counter()
        model = CDP(random_state=0, n_jobs=args.n_jobs, **params).fit(X)
        seconds = time.perf_counter() - start
        peak_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # kilobytes on Linux
        found = (model.rows_, model.columns_)
        print(f"{name}: {params}\n"
              f"  fit {seconds:.1f} s, peak memory so far {peak_gb:.2f} GB\n"
              f"  genes: {np.unique(model.mixture_row_labels_).size} mixture clusters, "
              f"{model.n_row_clusters_} refined, "
              f"NMI {normalized_mutual_info_score(genes, model.row_labels_):.3f} against the modules\n"
              f"  cells: {np.unique(model.mixture_column_labels_).size} mixture clusters, "
              f"{model.n_column_clusters_} refined, "
              f"NMI {normalized_mutual_info_score(cells, model.column_labels_):.3f} against the types\n"
              f"  {model.n_biclusters_} biclusters: Jaccard {jaccard_score(found, truth):.3f}, relevance "
              f"{relevance_score(found, truth):.3f}, recovery {recovery_score(found, truth):.3f}", flush=True)


if __name__ == "__main__":
    main()
