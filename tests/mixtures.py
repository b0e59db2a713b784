"""Small synthetic mixtures shared by the backend tests (checkpoints, Dask)."""

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
