"""A starting partition of a count matrix's rows and columns from its spectrum (:func:`spectral_partition`).

CDP's first mixtures cluster the rows in column space and the columns in row space. Where the blocks are many and
each row carries only a little of its block (a sparse matrix: a row's few counts spread over its block's many
columns), a DP mixture started from one cluster stays there: cutting the rows in two halves of the blocks is less
probable than one cluster, and only the whole partition, far away, is more probable (30 blocks on 3,000 x 2,000 at
300,000 counts: the truth beats one cluster by 21,000 nats, halves lose 660). A block's rows and columns together
hold far more evidence than any row: the matrix's spectrum sees the blocks at once.

The matrix is normalised by its row and column totals, regularised (``(D_r + tau_r)^-1/2 X (D_c + tau_c)^-1/2``,
tau the mean total: rows and columns of few counts would otherwise carry singular vectors of their own, Amini et
al. 2013, Qin and Rohe 2013). Its first singular value is the totals'; each block standing out of the noise of
Poisson counts adds one above the noise's largest, the edge. The edge is read from the same normalisation of
matrices with the same row totals and no other structure (each row's counts in columns drawn independently by
the column totals; the largest of up to five draws): the counts' depths, however uneven, shape its edge as they
shape the data's.
Rows (columns) are cut by k-means in the space of the singular vectors above the edge (scaled by the totals, as
Dhillon 2001's bipartite spectral co-clustering reads them), into one more cluster than there are such vectors;
the mixtures start from that partition and their moves, exact after warm-up, merge what their posterior does not
support.
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
# Draws of the noise whose largest edge is the noise edge, and the share by which a singular value must exceed it
# to count as a block's. Poisson counts without blocks (400 x 300, 20 draws): the data's first noise value
# 0.99-1.002 times that edge; 12 planted blocks on 600 x 480 (seeds 0-2): the 11 block values 1.013-1.17 times it,
# the first of the noise 0.96-0.98.
NOISE_DRAWS = 5
EDGE_MARGIN = 0.01
# Counts drawn for the noise at most (over its draws, down to one draw).
NOISE_DRAW_COUNTS = 5_000_000


def _normalised(X, row_totals, col_totals):
    """``(D_r + tau_r)^-1/2 X (D_c + tau_c)^-1/2`` with the given totals, tau their means."""
    return (sp.diags(1.0 / np.sqrt(row_totals + row_totals.mean())) @ X
            @ sp.diags(1.0 / np.sqrt(col_totals + col_totals.mean())))


def _largest_singular_values(matrix, k, rng):
    """The ``k`` largest singular values of ``matrix`` (descending) and their vectors ``(u, s, vt)``."""
    u, s, vt = svds(matrix, k=k, v0=rng.standard_normal(min(matrix.shape)), random_state=rng.integers(2**31))
    order = np.argsort(-s)
    return u[:, order], s[order], vt[order]


def noise_edge(row_totals, col_totals, rng, n_draws=NOISE_DRAWS):
    """The largest singular value, the first excepted, of the normalised matrix of counts with these row and
    column totals and no other structure, the largest over ``n_draws`` draws: each row's counts (its total) in
    columns drawn independently by the column totals (``rng``: a numpy Generator)."""
    n_rows, n_cols = row_totals.size, col_totals.size
    counts = np.rint(row_totals).astype(np.int64)
    indptr = np.concatenate([[0], np.cumsum(counts)])
    col_shares = col_totals / col_totals.sum()
    largest = 0.0
    for _ in range(n_draws):
        columns = rng.choice(n_cols, size=int(indptr[-1]), p=col_shares)
        null = sp.csr_matrix((np.ones(columns.size), columns, indptr), shape=(n_rows, n_cols))
        null.sum_duplicates()
        largest = max(largest, float(_largest_singular_values(_normalised(null, row_totals, col_totals), 2, rng)[1][1]))
    return largest


def spectral_partition(X, seed, sides=(True, True)):
    """``(row_labels (n_rows,), column_labels (n_cols,))`` of a count matrix X (n_rows, n_cols), scipy.sparse or
    dense, or None where no singular value of its normalised matrix stands above the noise edge
    (:func:`noise_edge`; the module docstring). ``sides``: (rows, columns), whether to cluster each; a side not
    asked for gets None (the other side's labels are the same either way).

    ``seed``: an integer, the seed of the noise's draw, of the singular vectors' start and of k-means. Rows and
    columns without counts are clustered with those nearest the origin. The same X and seed give the same labels,
    whatever the threads: the linear algebra runs on one thread.
    """
    X = sp.csr_matrix(X, dtype=np.float64)
    n_rows, n_cols = X.shape
    n_tokens = X.sum()
    n_components = min(MAX_COMPONENTS + 1, min(n_rows, n_cols) - 1)
    if n_components < 2 or n_tokens <= 0:
        return None
    row_totals, col_totals = np.asarray(X.sum(axis=1)).ravel(), np.asarray(X.sum(axis=0)).ravel()
    rng = np.random.default_rng(seed)
    with threadpool_limits(1):
        u, s, vt = _largest_singular_values(_normalised(X, row_totals, col_totals), n_components, rng)
        # a draw costs a pass over the counts: one for large matrices, whose edge varies least
        n_draws = int(np.clip(NOISE_DRAW_COUNTS // max(n_tokens, 1), 1, NOISE_DRAWS))
        edge = noise_edge(row_totals, col_totals, rng, n_draws) * (1 + EDGE_MARGIN)
        n_spikes = int(np.sum(s[1:] > edge))
        if n_spikes == 0:
            return None
        labels = []
        # the singular vectors over the square roots of the (regularised) totals: each item's profile in the
        # blocks' space
        for vectors, totals, wanted in ((u[:, 1:n_spikes + 1], row_totals, sides[0]),
                                        (vt[1:n_spikes + 1].T, col_totals, sides[1])):
            kmeans_seed = int(rng.integers(2**31))  # drawn either way: each side's seed is the same whatever is asked
            if not wanted:
                labels.append(None)
                continue
            embedding = vectors / np.sqrt(totals + totals.mean())[:, None] * np.sqrt(n_tokens)
            labels.append(KMeans(n_spikes + 1, n_init=KMEANS_INIT, random_state=kmeans_seed).fit_predict(embedding))
    return labels[0], labels[1]
