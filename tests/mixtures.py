"""Small synthetic data shared by several test modules (checkpoints, Dask, extraction, the estimator)."""

import numpy as np
import scipy.sparse as sp


def count_mixture(seed=0, n=240, K=4, d=60, total=60):
    """CSR multinomial counts of K clusters, n points, ``total`` counts per point."""
    rng = np.random.default_rng(seed)
    theta = rng.dirichlet(np.full(d, 0.3), size=K)
    return sp.csr_matrix(np.stack([rng.multinomial(total, theta[k]) for k in np.arange(n) % K]))


def gaussian_mixture(seed=0, n=300, K=5, d=3):
    """Dense (n, d) points around K well-separated centres."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=8.0, size=(K, d))
    return centres[np.arange(n) % K] + rng.standard_normal((n, d))


DATA = {"counts": count_mixture, "gaussian": gaussian_mixture}


def gene_levels_matrix():
    """60 genes x 40 cells, Poisson counts (seed 0) in six gene clusters and four cell clusters of 10 cells:
    genes 0-19 are expressed at 20 everywhere, genes 20-59 at 1; raised blocks: genes 0-4 at 60 in cells
    30-39 (a module of highly expressed genes), genes 20-29 at 6 and genes 30-39 at 12 in cells 0-9 (two
    modules of one cell type), genes 40-49 at 6 in cells 20-29. Returns (X, gene labels, cell labels)."""
    rate = np.ones((60, 40))
    rate[:20] = 20.0
    rate[:5, 30:] = 60.0
    rate[20:30, :10] = 6.0
    rate[30:40, :10] = 12.0
    rate[40:50, 20:30] = 6.0
    X = np.random.default_rng(0).poisson(rate)
    rows = np.repeat([0, 1, 2, 3, 4, 5], [5, 15, 10, 10, 10, 10])
    cols = np.repeat([0, 1, 2, 3], 10)
    return X, rows, cols
