"""The Dirichlet-process mixture alone, on an embedding: how many groups, without choosing K.

    python examples/embeddings.py [--out DIR] [--quick] [--dims D] [--seeds N]

scikit-learn's bundled handwritten digits (1,797 images of 8 x 8 pixels, 10 digits) are embedded by PCA into ``D``
dimensions (default 20) and clustered by :class:`conjoined.DPMM` with its default prior (``prior=None`` picks the
Gaussian likelihood with a Normal-inverse-Wishart prior for real-valued data below 50 dimensions, diagonal
covariances from 50 on), and, for comparison, by
scikit-learn's ``BayesianGaussianMixture`` with a Dirichlet-process prior (30 components, at most).

For each seed it prints K (DPMM: the posterior mode over the sampled iterations, with its probability; the
mixture: the components it uses), the NMI and ARI against the digits of the final labels (the DPMM's last
iteration), and the fit time. For the first seed: the
digit make-up of each DPMM cluster, the least certain images (``predict_proba``), and a picture of each cluster's
mean image saved to ``OUT/digit_clusters.png``. With two seeds or more, the DPMM's chains together
(``conjoined.compare_chains``): the R-hats of their log posterior and K, K's posterior pooled over them, and how far
their partitions agree. 300 iterations (the DPMM's default is 100); ``--quick`` runs 40
iterations and one seed (for CI).
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.datasets import load_digits
from sklearn.decomposition import PCA
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score
from sklearn.mixture import BayesianGaussianMixture
from threadpoolctl import threadpool_limits

from conjoined import DPMM, compare_chains
from conjoined.dpmm.diagnostics import R_HAT_MAX

FULL_ITERATIONS = 300
QUICK_ITERATIONS = 40
MIXTURE_COMPONENTS = 30
SHOWN_UNCERTAIN = 6


def k_posterior_mode(model):
    """``(K, probability)``: the most frequent K over the iterations after the warm-up."""
    counts = np.bincount(model.n_clusters_trace_[model.warmup_:])
    return int(counts.argmax()), counts.max() / counts.sum()


def fit_dpmm(embedding, n_iter, seed):
    began = time.perf_counter()
    model = DPMM(n_iter=n_iter, random_state=seed).fit(embedding)
    return model, time.perf_counter() - began


def fit_mixture(embedding, seed):
    began = time.perf_counter()
    # BLAS on one thread, as the DPMM keeps it: on matrices this small more threads only wait on each other
    # (5x slower on 2 busy cores)
    with warnings.catch_warnings(), threadpool_limits(limits=1, user_api="blas"):
        warnings.simplefilter("ignore", ConvergenceWarning)
        mixture = BayesianGaussianMixture(
            n_components=MIXTURE_COMPONENTS, weight_concentration_prior_type="dirichlet_process",
            max_iter=500, random_state=seed,
        ).fit(embedding)
    return mixture.predict(embedding), time.perf_counter() - began


def scores(digits, labels):
    return normalized_mutual_info_score(digits, labels), adjusted_rand_score(digits, labels)


def make_up_table(digits, labels):
    """Each cluster, largest first: its size and its three most frequent digits (those of at least 0.5%) with
    their shares."""
    lines = ["cluster  images  digits"]
    sizes = np.bincount(labels)
    for k in np.argsort(-sizes, kind="stable"):
        members = digits[labels == k]
        counts = np.bincount(members, minlength=10)
        top = [d for d in np.argsort(-counts, kind="stable")[:3] if counts[d] >= 0.005 * members.size]
        shares = ", ".join(f"{d}: {counts[d] / members.size:.0%}" for d in top)
        lines.append(f"{k:7d}  {members.size:6d}  {shares}")
    return "\n".join(lines)


def uncertain_table(model, embedding, digits):
    """The images whose most probable cluster is least certain, with their two most probable clusters."""
    proba = model.predict_proba(embedding)
    order = np.argsort(proba.max(axis=1), kind="stable")[:SHOWN_UNCERTAIN]
    lines = ["image  digit  most probable clusters"]
    for i in order:
        first, second = np.argsort(-proba[i], kind="stable")[:2]
        lines.append(f"{i:5d}  {digits[i]:5d}  {first} ({proba[i, first]:.2f}), {second} ({proba[i, second]:.2f})")
    return "\n".join(lines)


def cluster_picture(images, digits, labels, path):
    """Each cluster's mean image, largest cluster first, titled with its size and most frequent digit."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = np.bincount(labels)
    order = np.argsort(-sizes, kind="stable")
    columns = 8
    rows = -(-order.size // columns)
    figure, axes = plt.subplots(rows, columns, figsize=(1.4 * columns, 1.6 * rows), squeeze=False)
    for ax in axes.ravel():
        ax.axis("off")
    for ax, k in zip(axes.ravel(), order):
        ax.imshow(images[labels == k].mean(axis=0).reshape(8, 8), cmap="gray_r")
        ax.set_title(f"{k}: {sizes[k]}, '{np.bincount(digits[labels == k]).argmax()}'", fontsize=8)
    figure.suptitle("DPMM clusters of the digits: mean image (cluster: images, most frequent digit)", fontsize=9)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def chains_summary(comparison, shown=6):
    """The DPMM chains compared: R-hats, the most probable values of K pooled over the chains, ARI range."""
    verdict = ("they agree" if comparison.agree
               else f"above {R_HAT_MAX}: the chains sit in different places, or are too short to tell")
    pooled = sorted(comparison.k_posterior.items(), key=lambda item: -item[1])[:shown]
    between = comparison.label_agreement[np.triu_indices(comparison.n_chains, 1)]
    return (f"\n--- the {comparison.n_chains} DPMM chains together (compare_chains, {comparison.n_samples} samples "
            f"each)\nR-hat: log posterior {comparison.r_hat_log_posterior:.2f}, K {comparison.r_hat_n_clusters:.2f} "
            f"({verdict})\nK over all chains: " + ", ".join(f"{k} ({p:.2f})" for k, p in pooled)
            + f"\nARI between the chains' partitions: {between.min():.2f} to {between.max():.2f}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("embeddings_output"), help="folder for the picture")
    parser.add_argument("--dims", type=int, default=20, help="PCA dimensions of the embedding (default 20)")
    parser.add_argument("--seeds", type=int, default=None, help="seeds 0..N-1 (default 3; 1 with --quick)")
    parser.add_argument("--quick", action="store_true", help="40 iterations and one seed unless --seeds (for CI)")
    args = parser.parse_args(argv)
    if not 1 <= args.dims <= 64:
        parser.error(f"--dims must be between 1 and 64 (the digits have 64 pixels), got {args.dims}")
    if args.seeds is not None and args.seeds < 1:
        parser.error(f"--seeds must be at least 1, got {args.seeds}")
    if args.out.exists() and not args.out.is_dir():
        parser.error(f"--out {args.out} exists and is not a folder")
    n_iter, seeds = (QUICK_ITERATIONS, 1) if args.quick else (FULL_ITERATIONS, 3)
    seeds = seeds if args.seeds is None else args.seeds

    images, digits = load_digits(return_X_y=True)
    embedding = PCA(args.dims, random_state=0).fit_transform(images)
    print(f"digits: {images.shape[0]} images of 8 x 8 pixels, 10 digits; PCA to {args.dims} dimensions")
    print(f"DPMM: default prior, {n_iter} iterations; BayesianGaussianMixture: Dirichlet process, "
          f"{MIXTURE_COMPONENTS} components at most\n")
    print("seed  method  K                NMI    ARI    time")
    chains = []
    for seed in range(seeds):
        model, seconds = fit_dpmm(embedding, n_iter, seed)
        chains.append(model)
        k, probability = k_posterior_mode(model)
        nmi, ari = scores(digits, model.labels_)
        print(f"{seed:4d}  DPMM    {k:3d} (p = {probability:.2f})  {nmi:.3f}  {ari:.3f}  {seconds:5.1f} s")
        labels, seconds = fit_mixture(embedding, seed)
        nmi, ari = scores(digits, labels)
        print(f"{seed:4d}  BGM     {np.unique(labels).size:3d} used         {nmi:.3f}  {ari:.3f}  {seconds:5.1f} s")

    if len(chains) > 1:
        print(chains_summary(compare_chains(chains)))
    seed_zero = chains[0]
    print(f"\n--- DPMM clusters of seed 0 ({seed_zero.n_clusters_} in its last iteration): digit make-up")
    print(make_up_table(digits, seed_zero.labels_))
    print("\n--- the least certain images (DPMM.predict_proba)")
    print(uncertain_table(seed_zero, embedding, digits))
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "digit_clusters.png"
    cluster_picture(images, digits, seed_zero.labels_, path)
    print(f"\nsaved {path}")


if __name__ == "__main__":
    main()
