"""The DPMM's diagonal-covariance prior (``NormalGamma``) against its full-covariance default
(``NormalInverseWishart``) and scikit-learn's Dirichlet-process ``BayesianGaussianMixture`` with diagonal
covariances, in many dimensions, on the same data in the same run.

Data: three unit-variance clusters of 2,000 points, centres N(0, I), in 20, 50, 100 and 384 dimensions (about
sqrt(2 d) standard deviations apart: k-means separates them); three in 100 dimensions with centres N(0, I / 4)
(7 standard deviations apart) in unlike units (each feature multiplied by e^N(0, 4)); scikit-learn's digits as
they are (1,797 images of 64 pixels, 10 digits, many pixels constant or nearly so; integers, which ``DPMM()``
reads as counts, so its default prior there, ``Multinomial``, is run too) and embedded by PCA in 60 dimensions
(the last component's variance 1/270,000 of the first's). ``NormalGamma()``'s default rate caps each feature's
prior variance at the feature's own; the row "uncapped" gives every feature the tenth of the mean variance (the
default before the cap). The full-covariance prior is not run beyond 100 dimensions (d^2 work a point and
cluster: seconds an iteration). Prints, for each method and seed, the number of clusters of the last labels and
their NMI against the truth, and the mean fit time.

    python benchmarks/dpmm_diagonal.py [--iterations 100] [--seeds 2]        # about 1.5 minutes on 2 cores
"""

from __future__ import annotations

import time
import warnings

import numpy as np
from dpmm_embeddings import run_arguments
from sklearn.datasets import load_digits
from sklearn.decomposition import PCA
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import normalized_mutual_info_score
from sklearn.mixture import BayesianGaussianMixture
from threadpoolctl import threadpool_limits

from conjoined import DPMM, NormalGamma, NormalInverseWishart

MIXTURE_COMPONENTS = 30
# Beyond this many dimensions the full-covariance prior is not run.
FULL_COVARIANCE_MAX_DIM = 100


def three_clusters(dim, n=2000, spread=1.0):
    rng = np.random.default_rng(dim)
    centres = rng.normal(scale=spread, size=(3, dim))
    labels = np.repeat([0, 1, 2], n)
    return centres[labels] + rng.standard_normal((3 * n, dim)), labels


def unlike_units(X):
    return X * np.exp(np.random.default_rng(1).normal(scale=2.0, size=X.shape[1]))


def dpmm_fit(X, prior, n_iter, seed):
    return DPMM(prior=prior, n_iter=n_iter, random_state=seed).fit(X).labels_


def mixture_fit(X, n_iter, seed):
    # BLAS on one thread, as the DPMM keeps it: faster on matrices of this size (and 5x on 2 busy cores)
    with warnings.catch_warnings(), threadpool_limits(limits=1, user_api="blas"):
        warnings.simplefilter("ignore", ConvergenceWarning)
        return BayesianGaussianMixture(n_components=MIXTURE_COMPONENTS, covariance_type="diag",
                                       weight_concentration_prior_type="dirichlet_process", max_iter=500,
                                       random_state=seed).fit_predict(X)


def main():
    args = run_arguments(__doc__, 100, 2)
    data = {f"3 clusters, {dim} dimensions": three_clusters(dim) for dim in (20, 50, 100, 384)}
    X, truth = three_clusters(100, spread=0.5)
    data["3 clusters, 100 dimensions, unlike units"] = unlike_units(X), truth
    images, digits = load_digits(return_X_y=True)
    data["digits, 64 pixels"] = images, digits
    data["digits, 60 principal components"] = PCA(60, random_state=0).fit_transform(images), digits
    print(f"DPMM: {args.iterations} iterations; seeds 0..{args.seeds - 1}; K and NMI of the last labels\n")
    for name, (X, truth) in data.items():
        X = np.asarray(X, dtype=np.float64)
        print(f"{name}: {X.shape[0]} points, {np.unique(truth).size} true groups")
        uncapped = NormalGamma(rate=0.1 * X.var(axis=0).mean())
        methods = {"DPMM, NormalGamma (diagonal)": lambda seed: dpmm_fit(X, NormalGamma(), args.iterations, seed),
                   "DPMM, NormalGamma, uncapped": lambda seed: dpmm_fit(X, uncapped, args.iterations, seed)}
        if X.shape[1] <= FULL_COVARIANCE_MAX_DIM:
            methods["DPMM, NormalInverseWishart (full)"] = lambda seed: dpmm_fit(
                X, NormalInverseWishart(), args.iterations, seed)
        if np.all(X == np.round(X)) and X.min() >= 0:  # integers, which DPMM() reads as counts
            methods["DPMM, default prior (Multinomial)"] = lambda seed: dpmm_fit(X, None, args.iterations, seed)
        methods[f"BayesianGaussianMixture({MIXTURE_COMPONENTS}, diag)"] = lambda seed: mixture_fit(
            X, args.iterations, seed)
        for label, fit in methods.items():
            ks, nmis, seconds = [], [], []
            for seed in range(args.seeds):
                began = time.perf_counter()
                labels = fit(seed)
                seconds.append(time.perf_counter() - began)
                ks.append(np.unique(labels).size)
                nmis.append(normalized_mutual_info_score(truth, labels))
            print(f"  {label:36s}K {' '.join(f'{k:3d}' for k in ks)}   NMI {' '.join(f'{x:.3f}' for x in nmis)}"
                  f"   {np.mean(seconds):6.1f} s per fit", flush=True)
        print()


if __name__ == "__main__":
    main()
