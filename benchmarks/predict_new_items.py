"""New rows and columns classified by a fitted CDP (``predict_row_proba``, ``predict_column_proba``): are their
probabilities right, and do held-out documents cluster as well as fitted ones?

1. Calibration. For each of ``--replicates`` draws of cases 2, 3 and 4 (unshuffled, seeds 0, 1, ...), CDP is
   fitted to the draw and classifies the rows and columns of another draw (seed + 1000): the same rows and columns
   in the same blocks, fresh counts. Each fitted cluster stands for the true block most of its items belong to (or
   the background); a new item's probability of a block is that of its clusters. Printed: the new items binned by
   their largest probability, each bin's mean probability and the share of its items whose most probable block is
   the true one (a calibrated classifier has the two equal).
   With over-dispersed counts (case 2's cell densities, each cell's count negative binomial of size
   ``NB_SIZE``, both draws): the same, for the classifier's probabilities (tempered by the fitted items'
   over-dispersion) and for the untempered ones (dispersion 1, as before the fifty-third session).
2. 20 Newsgroups (``--news PATH``, the 100 words x 16,242 documents of ``20news_w100.mat``): CDP is fitted to a
   random half of the documents and classifies the other half; printed, the NMI of the document clusters against
   the four newsgroup families for the fitted half and for the held-out one, and the time of each step, for the
   defaults and for the multinomial likelihood on the documents.
3. Single cells (``--pbmc``, needs scanpy: the 700 cells x 765 genes of ``examples/pbmc.py``, its counts and its
   hyperparameters, ``--pbmc-iter`` iterations): ``conjoined.anndata.cdp`` on a random half of the cells,
   ``conjoined.anndata.predict_cells`` on the other half; printed, the NMI of the cell clusters against the ten
   cell types for each half, and how many fitted cells and genes given back keep their own cluster.

    python benchmarks/predict_new_items.py [--replicates 20] [--news ../shared/data/20news_w100.mat] [--pbmc]
    # ~1.5 min; --pbmc about 1 more
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.metrics import normalized_mutual_info_score

from conjoined import CDP
from conjoined.datasets import CDP_CASES, load_20news_w100, make_cdp_case
from conjoined.predict import cluster_probabilities

BINS = (0.0, 0.6, 0.8, 0.95, 0.99, 1.0 + 1e-9)
NB_SIZE = 5.0
DEFAULT_NEWS = Path(__file__).resolve().parents[2] / "shared" / "data" / "20news_w100.mat"


def block_of_each_item(sets):
    """(n,) index of the block each item is in, ``len(sets)`` for the background; ``sets`` (n_blocks, n) bool."""
    blocks = np.full(sets.shape[1], sets.shape[0])
    for b, members in enumerate(sets):
        blocks[members] = b
    return blocks


def block_probabilities(probabilities, fitted_labels, fitted_blocks, n_blocks):
    """(n_new, n_blocks) probability of each true block: the sum over the clusters standing for it."""
    stands_for = np.array([np.bincount(fitted_blocks[fitted_labels == k], minlength=n_blocks).argmax()
                           for k in range(probabilities.shape[1])])
    return np.stack([probabilities[:, stands_for == b].sum(axis=1) for b in range(n_blocks)], axis=1)


def overdispersed_case(case, seed, size):
    """``(X, rows, columns)``: the case's blocks with each cell's count negative binomial (size ``size``) around
    the design's density of its cell (``p N / #block cells`` in a block, ``(1 - p) N / #other cells`` elsewhere)."""
    _, rows, columns = make_cdp_case(case, random_state=seed)
    marked = (rows.T.astype(int) @ columns.astype(int)) > 0
    spec = CDP_CASES[case]
    means = np.where(marked, spec["p"] * spec["n_tokens"] / marked.sum(),
                     (1 - spec["p"]) * spec["n_tokens"] / (~marked).sum())
    rng = np.random.default_rng(seed)
    return rng.poisson(rng.gamma(size, means / size)).astype(np.float64), rows, columns


def _print_bins(largest, right):
    for low, high in itertools.pairwise(BINS):
        inside = (largest >= low) & (largest < high)
        if inside.any():
            print(f"  largest probability in [{low:.2f}, {min(high, 1.0):.2f}]: {inside.sum():5d} items, "
                  f"mean probability {largest[inside].mean():.3f}, in their true block {right[inside].mean():.3f}")


def calibration(case, replicates, size=None):
    """Section 1 on ``replicates`` draws of ``case``; ``size``: the negative-binomial size of over-dispersed
    counts (:func:`overdispersed_case`), None for the case's multinomial draws."""
    found = {"tempered": ([], []), "untempered": ([], [])}  # (largest probability, in the true block)
    for seed in range(replicates):
        if size is None:
            (X, rows, columns), (new, _, _) = (make_cdp_case(case, random_state=s) for s in (seed, seed + 1000))
        else:  # same blocks, fresh counts
            (X, rows, columns), (new, _, _) = (overdispersed_case(case, s, size) for s in (seed, seed + 1000))
        model = CDP(random_state=seed).fit(X)
        for truth, fitted, classifier, items in (
                (rows, model.row_labels_, model.row_classifier_, new),
                (columns, model.column_labels_, model.column_classifier_, new.T)):
            blocks = block_of_each_item(truth)
            for kind, used in (("tempered", classifier), ("untempered", classifier._replace(dispersion=1.0))):
                by_block = block_probabilities(cluster_probabilities(used, items), fitted, blocks,
                                               truth.shape[0] + 1)
                found[kind][0].append(by_block.max(axis=1))
                found[kind][1].append(by_block.argmax(axis=1) == blocks)
    largest, right = (np.concatenate(parts) for parts in found["tempered"])
    drawn = "" if size is None else f", counts negative binomial of size {size:g} around its densities"
    print(f"case {case}{drawn}: {right.mean():.4f} of {right.size} new items in their true block")
    _print_bins(largest, right)
    if size is not None:
        print("  untempered (dispersion 1):")
        _print_bins(*(np.concatenate(parts) for parts in found["untempered"]))


def newsgroups(path):
    data = load_20news_w100(path)
    X, groups = data.data, data.column_groups
    order = np.random.default_rng(0).permutation(X.shape[1])
    fitted, held_out = order[: X.shape[1] // 2], order[X.shape[1] // 2:]
    for params in ({}, {"column_likelihood": "multinomial"}):
        start = time.perf_counter()
        model = CDP(random_state=0, **params).fit(X[:, fitted])
        fit_time = time.perf_counter() - start
        start = time.perf_counter()
        labels = model.predict_columns(X[:, held_out])
        predict_time = time.perf_counter() - start
        own = model.column_labels_
        print(f"20 Newsgroups, CDP({', '.join(f'{k}={v!r}' for k, v in params.items())}): "
              f"{model.n_column_clusters_} document clusters; NMI against the families, fitted half "
              f"{normalized_mutual_info_score(groups[fitted][own >= 0], own[own >= 0]):.3f}, held-out half "
              f"{normalized_mutual_info_score(groups[held_out][labels >= 0], labels[labels >= 0]):.3f}; "
              f"fit {fit_time:.1f} s, classifying {held_out.size} documents {predict_time:.3f} s")


def pbmc(n_iter):
    from conjoined.anndata import cdp, predict_cells, predict_genes

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
    from pbmc import PAPER_HYPERPARAMETERS, pbmc_counts

    adata = pbmc_counts()
    order = np.random.default_rng(0).permutation(adata.n_obs)
    half = adata.n_obs // 2
    reference, new = adata[np.sort(order[:half])].copy(), adata[np.sort(order[half:])].copy()
    start = time.perf_counter()
    cdp(reference, layer="counts", n_iter=n_iter, random_state=0, **PAPER_HYPERPARAMETERS)
    fit_time = time.perf_counter() - start
    start = time.perf_counter()
    predict_cells(new, reference, layer="counts")
    predict_time = time.perf_counter() - start
    given_back = predict_cells(reference, reference, layer="counts", key_added="again", copy=True)
    genes_back = predict_genes(reference, reference, layer="counts", key_added="again", copy=True)

    def nmi(cells, key):
        clusters = cells.obs[f"{key}_cluster"]
        kept = clusters.notna().to_numpy()
        return normalized_mutual_info_score(cells.obs["bulk_labels"].to_numpy()[kept], clusters.cat.codes[kept])

    same = (given_back.obs["again_cluster"] == reference.obs["cdp_cluster"]).to_numpy()
    genes = genes_back.var
    same_genes = (genes["again_cluster"].astype(str) == genes["cdp_cluster"].astype(str)).to_numpy()
    doubtful = (genes["cdp_probability"] < 0.5).to_numpy()
    print(f"pbmc68k_reduced, conjoined.anndata.cdp(n_iter={n_iter}) on {reference.n_obs} cells: "
          f"{reference.uns['cdp']['theta'].shape[1]} cell clusters; NMI against the cell types, fitted half "
          f"{nmi(reference, 'cdp'):.3f}, held-out half {nmi(new, 'cdp'):.3f}; fitted cells given back in their own "
          f"cluster {same.sum()}/{same.size}, fitted genes {same_genes.sum()}/{same_genes.size} (of the others, "
          f"{(~same_genes & doubtful).sum()} with their own cluster's probability below 0.5); fit {fit_time:.1f} s, "
          f"classifying {new.n_obs} cells {predict_time:.3f} s")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--replicates", type=int, default=20)
    parser.add_argument("--news", type=Path, default=DEFAULT_NEWS, help="20news_w100.mat ('' to skip)")
    parser.add_argument("--pbmc", action="store_true", help="also the single cells of examples/pbmc.py (scanpy)")
    parser.add_argument("--pbmc-iter", type=int, default=150)
    args = parser.parse_args(argv)
    if str(args.news) not in ("", ".") and not args.news.is_file():
        parser.error(f"--news {args.news}: no such file (give the path of 20news_w100.mat, or '' to skip)")
    if args.replicates < 1:
        parser.error(f"--replicates must be at least 1, got {args.replicates}")
    warnings.simplefilter("ignore")  # the mixtures' warnings are not what is measured here
    for case in (2, 3, 4):
        calibration(case, args.replicates)
    calibration(2, args.replicates, size=NB_SIZE)
    if str(args.news) not in ("", "."):
        newsgroups(args.news)
    if args.pbmc:
        pbmc(args.pbmc_iter)


if __name__ == "__main__":
    main()
