"""Pearson's statistic of counts around their clusters' shares: the pieces shared by the over-dispersion
estimates of the conjoined rounds (``conjoined.cdp``) and of the refinement's merges (``conjoined.extract``)."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp


def cluster_shares(aggregated, labels, totals):
    """``(z, K, member, sums, share)``: the points' cluster indices (n,) and K, the (n, K) membership matrix, the
    clusters' feature sums (K, d) and each cluster's share of each feature (K, d), ``totals`` weighing the
    points (their totals for a multinomial profile, ones for a Poisson mean)."""
    n, d = aggregated.shape
    _, z = np.unique(labels, return_inverse=True)
    K = int(z.max()) + 1
    member = sp.csr_matrix((np.ones(n), (np.arange(n), z)), shape=(n, K))
    sums = np.asarray((member.T @ aggregated).todense())  # (K, d)
    cluster_totals = (member.T @ totals)[:, None]
    share = np.divide(sums, cluster_totals, out=np.zeros((K, d)), where=cluster_totals > 0)
    return z, K, member, sums, share


def squared_residual_terms(aggregated, z, totals, share):
    """``(counts, terms)``: the non-zero counts of ``aggregated`` (COO) and each one's ``x^2 / m``, m = t_i p_kf
    its expected count (``z``, ``totals``, ``share`` as :func:`cluster_shares` and its caller); summed by
    feature or by point, less the expected counts' sum, they give Pearson's statistic."""
    counts = aggregated.tocoo()
    return counts, counts.data**2 / (totals[counts.row] * share[z[counts.row], counts.col])
