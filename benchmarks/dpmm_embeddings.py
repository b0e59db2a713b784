"""The DPMM on embeddings: the Normal-inverse-Wishart prior at its default scale (the default below 50
dimensions), a broader and a sampled scale, and the diagonal ``NormalGamma`` (the default from 50 on), against
scikit-learn's Dirichlet-process BayesianGaussianMixture, on the same data in the same run.

Data: scikit-learn's digits embedded by PCA (20 dimensions, 1,797 images, 10 digits); pbmc68k_reduced's 50
principal components (700 cells, 10 cell types; needs scanpy, skipped without it); a 32-d mixture of 6
unit-variance Gaussians (600 points, the tests' ``gaussian_mixture(seed=0, n=600, K=6, d=32)``); a 2-d mixture
of six clusters of 150 points and a small one of 10 (centres N(0, 36 I), overlapping); the tests' 2-d mixture of
nine clusters of 100 points on a grid (``gaussian_mixture(seed=0)``, well separated); a 50-d mixture of 15
unit-variance clusters, 20,000 points, centres N(0, 1.5^2 I) (about 15 sd apart); scikit-learn's
``make_blobs(600, centers=3, random_state=1)`` (three well-separated blobs of 200 points); scikit-learn's iris
(150 flowers, 4 measurements, 3 species). Priors: the
Normal-inverse-Wishart with its default scale (a cluster's covariance expected at a tenth of the data's mean
per-feature variance ``v``, capped at each feature's own; the DPMM's default below 50 dimensions),
``psi="sample"`` (the clusters' common scale sampled with the partition) and ``psi = 2 v I`` (expected at ``v``;
``nu = d + 3``), and the diagonal covariances of ``NormalGamma()``. Prints, per data set and prior, for each
seed the posterior mode of K after the warm-up, the share of those iterations with more clusters than the truth,
the NMI of the last sample and ("map") of the most probable sample after the warm-up (``DPMM(estimate="map")``,
the same chain); and the mean fit time.

    python benchmarks/dpmm_embeddings.py [--iterations 300] [--seeds 3]     # about 8 minutes on 2 cores
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
from sklearn.datasets import load_digits, load_iris, make_blobs
from sklearn.decomposition import PCA
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import normalized_mutual_info_score
from sklearn.mixture import BayesianGaussianMixture
from threadpoolctl import threadpool_limits

from conjoined import DPMM, NormalGamma, NormalInverseWishart

MIXTURE_COMPONENTS = 30


def digits_pca():
    images, digits = load_digits(return_X_y=True)
    return PCA(20, random_state=0).fit_transform(images), digits


def pbmc_pca():
    try:
        import scanpy
    except ImportError:
        return None
    adata = scanpy.datasets.pbmc68k_reduced()
    return np.asarray(adata.obsm["X_pca"], dtype=np.float64), np.asarray(adata.obs["bulk_labels"])


def gaussian_32d(seed=0, n=600, n_clusters=6, dim=32, spread=12.0):
    """As ``tests/test_dpmm.py``'s ``gaussian_mixture``: centres N(0, (spread/2)^2 I), unit-variance clusters."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=spread / 2, size=(n_clusters, dim))
    labels = np.arange(n) % n_clusters
    return centres[labels] + rng.standard_normal((n, dim)), labels


def grid_2d(spread=12.0):
    """As ``tests/test_dpmm.py``'s ``gaussian_mixture(seed=0)``: nine unit-variance clusters of 100 points on a
    3 x 3 grid of step ``spread``."""
    rng = np.random.default_rng(0)
    grid = np.array([(a, b) for a in range(3) for b in range(3)], dtype=float) * spread
    labels = np.arange(900) % 9
    return grid[labels] + rng.standard_normal((900, 2)), labels


def mixture_50d(n=20_000, dim=50, n_clusters=15):
    """15 unit-variance clusters in 50 dimensions, centres N(0, 1.5^2 I), labels drawn uniformly."""
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(n_clusters, dim)) * 1.5
    labels = rng.integers(n_clusters, size=n)
    return centres[labels] + rng.standard_normal((n, dim)), labels


def small_cluster_2d(seed=0, dim=2):
    """Six unit-variance clusters of 150 points and one of 10, centres N(0, 6^2 I)."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=6.0, size=(7, dim))
    labels = np.repeat(np.arange(7), [150] * 6 + [10])
    return centres[labels] + rng.standard_normal((labels.size, dim)), labels


def dpmm_runs(X, truth, prior, n_iter, seeds):
    """Per seed: K's posterior mode after the warm-up, the share of those iterations with K above the truth's, the
    NMI of the last sample and of the most probable one (``estimate="map"``: the same chain); mean seconds."""
    modes, excess, nmis, map_nmis, seconds = [], [], [], [], []
    for seed in range(seeds):
        began = time.perf_counter()
        model = DPMM(n_iter=n_iter, prior=prior, random_state=seed, estimate="map").fit(X)
        seconds.append(time.perf_counter() - began)
        sampled = model.n_clusters_trace_[model.warmup_:]
        modes.append(int(np.bincount(sampled).argmax()))
        excess.append(float(np.mean(sampled > np.unique(truth).size)))
        nmis.append(normalized_mutual_info_score(truth, model.labels_trace_[-1]))
        map_nmis.append(normalized_mutual_info_score(truth, model.labels_))
    return modes, excess, nmis, map_nmis, float(np.mean(seconds))


def mixture_runs(X, truth, seeds):
    nmis, seconds = [], []
    for seed in range(seeds):
        began = time.perf_counter()
        # BLAS on one thread, as the DPMM keeps it: faster on these sizes (digits 0.4 s against 2.0 s, 20,000 x
        # 50 about 15%), where more threads only wait on each other
        with warnings.catch_warnings(), threadpool_limits(limits=1, user_api="blas"):
            warnings.simplefilter("ignore", ConvergenceWarning)
            labels = BayesianGaussianMixture(n_components=MIXTURE_COMPONENTS,
                                             weight_concentration_prior_type="dirichlet_process",
                                             max_iter=500, random_state=seed).fit_predict(X)
        seconds.append(time.perf_counter() - began)
        nmis.append(normalized_mutual_info_score(truth, labels))
    return nmis, float(np.mean(seconds))


def blobs_2d():
    """scikit-learn's ``make_blobs(600, centers=3, random_state=1)``: three unit-variance blobs of 200 points."""
    return make_blobs(600, centers=3, random_state=1)


def iris():
    return load_iris(return_X_y=True)


def run_arguments(doc, iterations, seeds):
    """``--iterations`` and ``--seeds`` from the command line (defaults as given), checked."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--iterations", type=int, default=iterations)
    parser.add_argument("--seeds", type=int, default=seeds)
    args = parser.parse_args()
    if args.iterations < 2 or args.seeds < 1:
        parser.error(f"--iterations must be at least 2 and --seeds at least 1, got {args.iterations}, {args.seeds}")
    return args


def main():
    args = run_arguments(__doc__, 300, 3)
    data = {"digits, PCA 20": digits_pca(), "pbmc68k, 50 PCs": pbmc_pca(), "32-d mixture, K = 6": gaussian_32d(),
            "50-d mixture, K = 15": mixture_50d(), "2-d mixture, K = 7 (one of 10 points)": small_cluster_2d(),
            "2-d grid, K = 9": grid_2d(), "2-d blobs, K = 3": blobs_2d(), "iris": iris()}
    print(f"DPMM: {args.iterations} iterations, seeds 0..{args.seeds - 1}; K = posterior mode after the warm-up\n")
    for name, loaded in data.items():
        if loaded is None:
            print(f"{name}: skipped (needs scanpy)\n")
            continue
        X, truth = loaded
        v = float(X.var(axis=0).mean())
        print(f"{name}: {X.shape[0]} points x {X.shape[1]} dimensions, {np.unique(truth).size} true groups")
        for label, prior in (("NIW, default scale", NormalInverseWishart()),
                             ("psi = 'sample'", NormalInverseWishart(psi="sample")),
                             ("psi = 2 v I", NormalInverseWishart(psi=2.0 * v * np.eye(X.shape[1]))),
                             ("NormalGamma (diagonal)", NormalGamma())):
            modes, excess, nmis, map_nmis, seconds = dpmm_runs(X, truth, prior, args.iterations, args.seeds)
            print(f"  {'DPMM, ' + label:30s}K {' '.join(f'{k:3d}' for k in modes)}   "
                  f"P(K > true) {' '.join(f'{p:.2f}' for p in excess)}   "
                  f"NMI {' '.join(f'{x:.3f}' for x in nmis)}   "
                  f"map {' '.join(f'{x:.3f}' for x in map_nmis)}   {seconds:5.1f} s per fit")
        nmis, seconds = mixture_runs(X, truth, args.seeds)
        print(f"  {f'BayesianGaussianMixture({MIXTURE_COMPONENTS})':30s}{'':{1 + 4 * args.seeds}s}   "
              f"{'':{12 + 5 * args.seeds}s}   "
              f"NMI {' '.join(f'{x:.3f}' for x in nmis)}   {seconds:5.1f} s per fit\n")


if __name__ == "__main__":
    main()
