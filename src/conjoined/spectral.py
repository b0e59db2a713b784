"""A starting partition of a count matrix's rows and columns from its spectrum (:func:`spectral_partition`).

CDP's first mixtures cluster the rows in column space and the columns in row space. Where the blocks are many and
each row carries only a little of its block (a sparse matrix: a row's few counts spread over its block's many
columns), a DP mixture started from one cluster stays there: cutting the rows in two halves of the blocks is less
probable than one cluster, and only the whole partition, far away, is more probable (30 blocks on 3,000 x 2,000 at
300,000 counts: the truth beats one cluster by 21,000 nats, halves lose 660). A block's rows and columns together
hold far more evidence than any row: the matrix's spectrum sees the blocks at once. The normalised matrix
``D_r^-1/2 X D_c^-1/2`` of counts with no structure beyond row and column totals has its first singular value 1
and the others below ``(sqrt(n_rows) + sqrt(n_cols)) / sqrt(N)`` (entries of variance ``1 / N``, the edge of
their Marchenko-Pastur law); each block standing out of that noise adds a singular value above it (Dhillon 2001's
bipartite spectral co-clustering reads the same vectors). Rows (columns) are cut by k-means in the space of the
singular vectors above the edge, into one more cluster than there are such vectors; the mixtures start from
that partition and their moves, exact after warm-up, merge what their posterior does not support.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import svds
from sklearn.cluster import KMeans
from threadpoolctl import threadpool_limits

__all__ = ["MAX_COMPONENTS", "noise_edge", "spectral_partition"]

# Singular vectors read beyond the first: blocks beyond this many share the k-means clusters, which the mixtures'
# splits then take apart.
MAX_COMPONENTS = 50
# k-means restarts on the singular vectors.
KMEANS_INIT = 4


def noise_edge(n_rows, n_cols, n_tokens):
    """The largest singular value of the normalised matrix of an ``n_rows x n_cols`` matrix of ``n_tokens``
    Poisson counts with no structure beyond its row and column totals, the first (1) excepted."""
    return (np.sqrt(n_rows) + np.sqrt(n_cols)) / np.sqrt(n_tokens)


def spectral_partition(X, seed):
    """``(row_labels (n_rows,), column_labels (n_cols,))`` of a count matrix X (n_rows, n_cols), scipy.sparse or
    dense, or None where no singular value of its normalised matrix stands above the noise edge
    (:func:`noise_edge`; the module docstring).

    ``seed``: an integer, the seed of the singular vectors' start and of k-means. Rows and columns without counts
    are clustered with the rows (columns) nearest the origin. The same X and seed give the same labels, whatever
    the threads: the linear algebra runs on one thread.
    """
    X = sp.csr_matrix(X, dtype=np.float64)
    n_rows, n_cols = X.shape
    n_tokens = X.sum()
    n_components = min(MAX_COMPONENTS + 1, min(n_rows, n_cols) - 1)
    if n_components < 2 or n_tokens <= 0:
        return None
    row_scale = 1.0 / np.sqrt(np.maximum(np.asarray(X.sum(axis=1)).ravel(), 1.0))
    col_scale = 1.0 / np.sqrt(np.maximum(np.asarray(X.sum(axis=0)).ravel(), 1.0))
    normalised = sp.diags(row_scale) @ X @ sp.diags(col_scale)
    rng = np.random.default_rng(seed)
    with threadpool_limits(1):
        u, s, vt = svds(normalised, k=n_components, v0=rng.standard_normal(min(n_rows, n_cols)),
                        random_state=rng.integers(2**31))
        order = np.argsort(-s)
        n_spikes = int(np.sum(s[order[1:]] > noise_edge(n_rows, n_cols, n_tokens)))
        if n_spikes == 0:
            return None
        vectors = order[1:n_spikes + 1]
        # the singular vectors over the square roots of the totals: each item's profile in the blocks' space
        labels = []
        for embedding in (u[:, vectors] * row_scale[:, None], vt[vectors].T * col_scale[:, None]):
            kmeans = KMeans(n_spikes + 1, n_init=KMEANS_INIT, random_state=int(rng.integers(2**31)))
            labels.append(kmeans.fit_predict(embedding * np.sqrt(n_tokens)))
    return labels[0], labels[1]
