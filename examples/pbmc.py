"""CDP on single-cell counts: scanpy's bundled ``pbmc68k_reduced`` (700 cells x 765 genes, 10 cell types).

    python examples/pbmc.py [--out DIR] [--quick] [--config NAME ...]

The data set stores log-normalised values; the counts are recovered as ``rint(expm1(raw.X) * n_counts / 1e4)``.
CDP runs through :func:`conjoined.anndata.cdp` (genes are CDP's rows, cells its columns) with the paper's
single-cell settings (genes alpha=10, beta=0.1; cells alpha=10, beta=1; 500 iterations) in two configurations:

- ``singlecell``: the library's pipeline (conjoined rounds) with the wrapper's defaults, a multinomial
  likelihood on genes and on cells: a cell's total is its library size and a gene's total its expression level,
  nuisances the multinomial ignores, reading each by its profile.
- ``paper``: the published pipeline (``mode="paper"``: independent multinomial mixtures on the raw matrix); the
  wrapper's multinomial likelihoods choose its refinement's.

For each it prints the cell-type make-up (``obs.bulk_labels``) and the top genes of the strongest biclusters,
the make-up of each cell cluster with its NMI against the cell types, and saves the pictures of ``conjoined
fit`` plus a UMAP coloured by cell type and by CDP cluster into ``OUT/<configuration>/``; the annotated
AnnData goes to ``OUT/pbmc68k_cdp.h5ad``. ``--quick`` runs 15 iterations (for CI).
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from sklearn.metrics import adjusted_mutual_info_score, normalized_mutual_info_score

from conjoined.anndata import cdp, fitted_view
from conjoined.fit_folder import draw_pictures

PAPER_HYPERPARAMETERS = {"row_alpha": 10.0, "row_beta": 0.1, "column_alpha": 10.0, "column_beta": 1.0}
CONFIGURATIONS = {
    "singlecell": {},
    "paper": {"mode": "paper"},
}
FULL_ITERATIONS = 500
QUICK_ITERATIONS = 15
SHOWN_BICLUSTERS = 12
TOP_GENES = 8
TOP_CELL_TYPES = 3


def pbmc_counts():
    """pbmc68k_reduced with its counts recovered: AnnData (cells x genes) with ``layers["counts"]``."""
    import anndata
    import scanpy as sc

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        reduced = sc.datasets.pbmc68k_reduced()
    log_normalised = sp.csr_matrix(reduced.raw.X)
    counts = sp.csr_matrix(sp.diags(reduced.obs["n_counts"].to_numpy() / 1e4) @ log_normalised.expm1())
    counts.data = np.rint(counts.data)
    counts.eliminate_zeros()
    adata = anndata.AnnData(
        X=log_normalised,
        obs=reduced.obs[["bulk_labels", "n_counts"]].copy(),
        var=reduced.raw.var[[]].copy(),
        obsm={"X_umap": reduced.obsm["X_umap"]},
        uns={"bulk_labels_colors": reduced.uns["bulk_labels_colors"]},
    )
    adata.layers["counts"] = counts.astype(np.int64)
    return adata


def make_up(cell_types):
    """The most common cell types among ``cell_types`` with their share, e.g. ``'CD14+ Monocyte 80%,
    ...'``."""
    counts = cell_types.value_counts()
    shares = counts / max(counts.sum(), 1)
    return ", ".join(
        f"{name} {share:.0%}" for name, share in shares.iloc[:TOP_CELL_TYPES].items() if share > 0
    )


def bicluster_table(adata, key):
    stored = adata.uns[key]
    table = stored["biclusters"]
    cell_types = adata.obs["bulk_labels"]
    lines = []
    for b in table.index[:SHOWN_BICLUSTERS]:
        row = table.loc[b]
        cells = stored["bicluster_cells"][b]
        lines.append(
            f"bicluster {b}: (k, l) = ({row['gene_clusters'].replace(' ', '+')}, "
            f"{row['cell_clusters'].replace(' ', '+')}), strength {row['strength']:.1f}, "
            f"{int(row['n_genes'])} genes x {int(row['n_cells'])} cells"
        )
        lines.append(f"    cells: {make_up(cell_types[cells])}")
        lines.append(f"    top genes: {', '.join(stored['bicluster_genes'][b][:TOP_GENES])}")
    if len(table) > SHOWN_BICLUSTERS:
        sizes = table["n_genes"].iloc[SHOWN_BICLUSTERS:]
        lines.append(f"... and {len(sizes)} weaker biclusters ({sizes.median():.0f} genes each, median)")
    if len(table):
        lines.append(
            f"all {len(table)}: median {table['n_genes'].median():.0f} genes x {table['n_cells'].median():.0f} "
            f"cells; together they cover {bicluster_coverage(adata, key):.0%} of the gene x cell matrix"
        )
    return "\n".join(lines)


def bicluster_coverage(adata, key):
    """Share of the (cell, gene) pairs that lie in at least one bicluster."""
    cells = np.asarray(adata.obsm[f"{key}_biclusters"], dtype=np.float64)
    genes = np.asarray(adata.varm[f"{key}_biclusters"], dtype=np.float64)
    return float(((cells @ genes.T) > 0).mean())


def cell_cluster_table(adata, key):
    clusters = adata.obs[f"{key}_cluster"]
    lines = [f"{'cluster':>7}  {'cells':>5}  cell types"]
    for cluster, size in clusters.value_counts().items():
        if size == 0:  # a cluster the refinement emptied (its index is kept, as theta's rows are)
            continue
        lines.append(f"{cluster:>7}  {size:>5}  {make_up(adata.obs['bulk_labels'][clusters == cluster])}")
    return "\n".join(lines)


def umap_picture(adata, key, path):
    import matplotlib.pyplot as plt
    import scanpy as sc

    figure = sc.pl.umap(
        adata,
        color=["bulk_labels", f"{key}_cluster"],
        show=False,
        return_fig=True,
        title=["cell type (bulk_labels)", f"CDP cell cluster ({key})"],
        wspace=0.5,
    )
    figure.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(figure)


def run_configuration(name, adata, n_iter, seed, outdir):
    key = f"cdp_{name}"
    params = {**PAPER_HYPERPARAMETERS, **CONFIGURATIONS[name], "n_iter": n_iter, "random_state": seed}
    print(
        f"\n=== configuration {name!r}: conjoined.anndata.cdp(adata, layer='counts', key_added={key!r}, "
        f"{', '.join(f'{k}={v!r}' for k, v in params.items())})"
    )
    start = time.perf_counter()
    cdp(adata, layer="counts", key_added=key, **params)
    stored = adata.uns[key]
    n_genes_clusters, n_cell_clusters = stored["theta"].shape
    print(
        f"fitted in {time.perf_counter() - start:.1f} s: K_r = {n_genes_clusters} gene clusters, K_c = "
        f"{n_cell_clusters} cell clusters, {len(stored['biclusters'])} biclusters"
    )

    print(f"\n--- strongest {SHOWN_BICLUSTERS} biclusters: cell-type make-up and top genes (by membership)")
    print(bicluster_table(adata, key))
    print("\n--- cell clusters: cell-type make-up")
    print(cell_cluster_table(adata, key))
    assigned = adata.obs[f"{key}_cluster"].notna().to_numpy()
    truth = adata.obs["bulk_labels"].to_numpy()[assigned]
    found = adata.obs[f"{key}_cluster"].cat.codes.to_numpy()[assigned]
    print(
        f"NMI against the 10 cell types: {normalized_mutual_info_score(truth, found):.3f} "
        f"(adjusted for chance, AMI: {adjusted_mutual_info_score(truth, found):.3f})"
    )

    pictures = outdir / name
    pictures.mkdir(parents=True, exist_ok=True)
    genes_by_cells = sp.csr_matrix(adata.layers["counts"].T)
    paths = draw_pictures(
        pictures,
        genes_by_cells,
        fitted_view(adata, key),
        np.asarray(adata.var_names),
        np.asarray(adata.obs_names),
        side_names=("gene", "cell"),
    )
    paths.append(pictures / "umap.png")
    umap_picture(adata, key, paths[-1])
    for path in paths:
        print(f"saved {path}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("pbmc_output"), help="directory for the pictures")
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"{QUICK_ITERATIONS} iterations instead of {FULL_ITERATIONS} (for CI)",
    )
    parser.add_argument("--config", nargs="+", choices=list(CONFIGURATIONS), default=list(CONFIGURATIONS))
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    adata = pbmc_counts()
    counts = adata.layers["counts"]
    n_iter = QUICK_ITERATIONS if args.quick else FULL_ITERATIONS
    print(
        f"pbmc68k_reduced: {adata.n_obs} cells x {adata.n_vars} genes, {int(counts.sum())} counts recovered "
        f"({counts.nnz / np.prod(counts.shape):.0%} non-zero); cell types:"
    )
    print("    " + ", ".join(f"{name} {n}" for name, n in adata.obs["bulk_labels"].value_counts().items()))
    print(f"{n_iter} iterations{' (--quick)' if args.quick else ''}, seed {args.seed}")
    args.out.mkdir(parents=True, exist_ok=True)
    for name in args.config:
        run_configuration(name, adata, n_iter, args.seed, args.out)
    adata.write_h5ad(args.out / "pbmc68k_cdp.h5ad")
    print(f"\nsaved {args.out / 'pbmc68k_cdp.h5ad'} (results under the keys cdp_<configuration>)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
