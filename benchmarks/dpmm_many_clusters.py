"""Does the DPMM's warm-up find every cluster? Many clusters, or clusters made late in the warm-up.

Gaussian mixtures with known labels, fitted with the defaults (100 iterations, a 50-iteration warm-up) from
several seeds. For each design: the clusters found, the NMI, how far the last sample's log posterior falls
short of the true partition's under the same prior (positive: the chain missed a more probable partition, a
cluster merged or left unfound), and how many fits warn that their chain has not settled. Designs:

- ``many``: 100 clusters of 16 dimensions, means N(0, 8^2 I), standard deviation 2, 20,000 points;
- ``thirty``: the same with 30 clusters;
- ``uneven``: 15 anisotropic clusters of unequal sizes (three of 0.5% of the points; clusters 1 and 2 at 3
  and 6 units from cluster 0, about 3 and 7-10 of its standard deviations), 20,000 x 16; with ``--large``,
  also 200,000 x 32 (the forty-ninth session's audit: about 15 s a fit).

    python benchmarks/dpmm_many_clusters.py [--seeds 6] [--large]      # about 1 minute; 2 more with --large
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
from sklearn.metrics import normalized_mutual_info_score

import conjoined
from conjoined.dpmm import sampler
from conjoined.dpmm.priors import SufficientStats


def separated_mixture(n, dim, n_clusters, seed=0):
    """Means N(0, 8^2 I), clusters of standard deviation 2 and random (multinomial) sizes."""
    rng = np.random.default_rng(seed)
    means = rng.normal(scale=4.0, size=(n_clusters, dim))
    labels = rng.integers(n_clusters, size=n)
    return 2.0 * (means[labels] + rng.standard_normal((n, dim))), labels


def uneven_mixture(n, dim, n_clusters=15, seed=0, n_small=3):
    """Anisotropic clusters with Dirichlet(5) sizes, ``n_small`` of them 0.5% of the points; clusters 1 and 2
    at 3 and 6 units from cluster 0 (the audit of the forty-ninth session)."""
    rng = np.random.default_rng(seed)
    means = rng.normal(scale=5.0, size=(n_clusters, dim))
    for j in (1, 2):
        direction = rng.normal(size=dim)
        means[j] = means[0] + 3.0 * j * direction / np.linalg.norm(direction)
    weights = rng.dirichlet(np.full(n_clusters, 5.0))
    weights[-n_small:] = 0.005
    weights[:-n_small] *= (1 - weights[-n_small:].sum()) / weights[:-n_small].sum()
    labels = rng.choice(n_clusters, size=n, p=weights)
    X = np.empty((n, dim))
    for j in range(n_clusters):
        members = np.flatnonzero(labels == j)
        scale = rng.normal(size=(dim, dim)) / np.sqrt(dim) * rng.uniform(0.5, 1.5)
        X[members] = means[j] + rng.standard_normal((members.size, dim)) @ scale.T
    return X, labels


def log_posterior_of(model, X, labels):
    """The log posterior of the partition ``labels`` under the fitted model's prior: full covariances on every
    feature (``prior_`` is moved back to the data's place after the fit, and the posterior with it)."""
    prior = model.prior_
    if not isinstance(prior, conjoined.NormalInverseWishart) or prior.mean.shape[-1] != X.shape[1]:
        raise ValueError("the true partition is scored under full covariances on every feature only")
    clusters = [X[labels == k] for k in np.unique(labels)]
    sizes = np.array([len(c) for c in clusters], float)
    sums = np.stack([c.sum(axis=0) for c in clusters])
    stats = SufficientStats(sizes, sums, np.stack([c.T @ c for c in clusters]))
    return sampler.log_posterior(prior, model.alpha, stats)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=6)
    parser.add_argument("--large", action="store_true", help="also the uneven design at 200,000 x 32")
    args = parser.parse_args()

    designs = {
        "many (100 clusters, 20,000 x 16)": separated_mixture(20_000, 16, 100),
        "thirty (30 clusters, 20,000 x 16)": separated_mixture(20_000, 16, 30),
        "uneven (15 clusters, 20,000 x 16)": uneven_mixture(20_000, 16),
    }
    if args.large:
        designs["uneven (15 clusters, 200,000 x 32)"] = uneven_mixture(200_000, 32)
    compile_data = designs["thirty (30 clusters, 20,000 x 16)"][0][:500]
    conjoined.DPMM(n_iter=3, random_state=0).fit(compile_data)  # numba's compilation, not timed

    for name, (X, truth) in designs.items():
        found, nmi, shortfall, seconds, warned = [], [], [], [], 0
        for seed in range(args.seeds):
            start = time.perf_counter()
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", conjoined.ChainNotSettledWarning)
                model = conjoined.DPMM(random_state=seed, store_labels=False).fit(X)
            seconds.append(time.perf_counter() - start)
            warned += any(issubclass(w.category, conjoined.ChainNotSettledWarning) for w in caught)
            found.append(model.n_clusters_)
            nmi.append(normalized_mutual_info_score(truth, model.labels_))
            shortfall.append(log_posterior_of(model, X, truth) - model.log_posterior_trace_[-1])
        print(f"{name}: K {found}, mean NMI {np.mean(nmi):.4f}, log posterior short of the truth's by "
              f"{np.median(shortfall):,.0f} nats (median), {np.max(shortfall):,.0f} (most); "
              f"not settled in {warned} of {args.seeds}; {np.mean(seconds):.1f} s a fit", flush=True)


if __name__ == "__main__":
    main()
