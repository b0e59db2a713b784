"""New rows and columns of a fitted CDP: each classified among its side's clusters by the block model that decided
the fitted items' clusters.

An item of one side is read by its counts summed over the other side's clusters, ``x`` (L,), as the refinement
reads it (:func:`conjoined.refine.refine_partition`, step 1), and cluster k's posterior probability is

    p(k | x) ∝ (w_k p(x | k)) ^ (1 / dispersion)

with ``w_k`` the cluster's share of the fitted items and ``log p(x | k)`` under the side's likelihood, both
those of the model that decided the fitted items' clusters (:func:`conjoined.refine.side_model`), at the heavy
blocks the refinement's EM models (the extraction's). Where the fitted partition is the EM's fixed point (the
refinement leaves one, but where its rounds, capped, end short of it, or it undid rounds that drained a cluster
of its blocks), the shares and rates of
the EM's last step, estimated from the fitted items' responsibilities (a borderline item counts by its
probability): the fitted items then come back in their own clusters. Elsewhere (``refine=False``, or such an
undone or last round: on pbmc68k_reduced's genes and cells, read by profile, seed 0, the EM would move 90 of
765 genes and 12 of
700 cells) those of the partition's hard labels, which decided them, and an item the block model puts
elsewhere comes back elsewhere. The likelihoods:

- ``"poisson"`` (items of one depth): counts over cluster l are Poisson with rate ``rate[k, l] n_l`` (``n_l``
  the other side's cluster sizes), ``rate`` the heavy block's density where block (k, l) is heavy (pooled by
  empirical Bayes across the heavy blocks) and the shared background density elsewhere;
- ``"multinomial"`` (items of any depth): the counts are multinomial over the L clusters with cluster k's
  profile under the significance rule's model with its background levels (a deep document and a shallow one
  of one topic read alike), from the partition's hard labels (the EM holds the profiles and re-estimates the
  shares).

``dispersion`` is the fitted items' over-dispersion within their clusters (Pearson's statistic over its degrees of
freedom, pooled over both sides, 1 unless it exceeds them by five of its standard deviations): around their
clusters' profiles when either side is read by profile (the merges' dispersion), around the Poisson block model's
expected counts when both sides are Poisson (:func:`_poisson_dispersion`; 1 on Poisson simulations). Real counts
vary far beyond multinomial noise, and their full log-likelihood would make every probability 0 or 1: the log
posterior is tempered by the dispersion, which keeps each item's most probable cluster (the EM's decision, made at
the full likelihood) and weighs the confidence in it at what the fitted items show a count's evidence is worth.
(Tempering the likelihood alone, a quasi-likelihood posterior, also flattens it against the weights, and moved
fitted items to larger clusters than the fit chose: 74 of 765 genes of pbmc68k_reduced's half fit in
``benchmarks/predict_new_items.py --pbmc``; a classifier saved before, pickled with a model or stored in an
AnnData, is read as it was made: ``SideClassifier.weights_tempered`` False.) Clusters whose blocks are alike (none
heavy) cannot be told apart, and get probabilities in proportion to their sizes (to the power 1 / dispersion).

Everything the classifier needs is a few (K, L) arrays fitted once, with the model (:func:`side_classifiers`).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy.special import logsumexp

from .background import _counts_over_clusters, check_thresholds
from .refine import _evidenced_dispersion, _merge_dispersion, side_model

__all__ = ["SideClassifier", "cluster_probabilities", "label_probabilities", "most_probable", "side_classifiers"]


class SideClassifier(NamedTuple):
    """How an item of one side is classified, from its counts ``x`` (L,) over the other side's clusters:
    ``log p(k | x) = (x @ log_rates[k] - exposure[k] + log_weights[k]) / dispersion + const`` (``log_weights[k]``
    outside the brackets where ``weights_tempered`` is False: a classifier saved by a version of conjoined
    that did not temper the weights, read as it was made).

    log_rates : ndarray, shape (K, L)
        Poisson: the log density of block (k, l) per cell; multinomial: the log share of cluster k's counts in l.
    exposure : ndarray, shape (K,)
        Poisson: the expected total ``sum_l rate[k, l] n_l`` of an item of cluster k; multinomial: zeros.
    log_weights : ndarray, shape (K,)
        Log share of the fitted items in each cluster (-inf for a cluster without items).
    dispersion : float >= 1
    other_labels : ndarray of int64, shape (n_other,)
        The other side's clusters (-1: set aside), over which a new item's counts are summed.
    weights_tempered : bool, default=False
        True for every classifier made now; False (the default) reads one saved before, without the field.
    """

    log_rates: np.ndarray
    exposure: np.ndarray
    log_weights: np.ndarray
    dispersion: float
    other_labels: np.ndarray
    weights_tempered: bool = False


def side_classifiers(X, row_labels, column_labels, *, z_min, min_size, likelihoods, n_clusters):
    """The classifiers of new rows and of new columns under the block model of a fitted partition.

    Parameters
    ----------
    X : scipy.sparse matrix of counts, shape (n_rows, n_cols)
        The counts the partition was fitted to.
    row_labels, column_labels : int64 arrays (n_rows,), (n_cols,)
        The partition, -1 for items set aside; each side has at least one labelled item.
    z_min, min_size : as for the significance rule (None: its defaults)
    likelihoods : (row likelihood, column likelihood), each "poisson" or "multinomial"
    n_clusters : (K_r, K_c), at least each side's largest label + 1 (clusters beyond it have no items)

    Returns
    -------
    (SideClassifier of rows, SideClassifier of columns)
    """
    z_min, min_size = check_thresholds(z_min, min_size)
    models = [side_model(X, row_labels, column_labels, z_min=z_min, min_size=min_size, likelihood=likelihood,
                         axis=axis) for axis, likelihood in enumerate(likelihoods)]
    if "multinomial" in likelihoods:
        dispersion = _merge_dispersion(X, row_labels, column_labels, likelihoods)
    else:
        dispersion = _poisson_dispersion(X, (row_labels, column_labels), models)
    classifiers = []
    for axis, (other_labels, model) in enumerate(((column_labels, models[0]), (row_labels, models[1]))):
        # clusters past the largest label have no items and no block row: never chosen
        K, fitted = n_clusters[axis], model.log_rates.shape[0]
        log_rates = np.zeros((K, model.log_rates.shape[1]))
        log_rates[:fitted] = model.log_rates
        exposure = np.zeros(K)
        exposure[:fitted] = model.exposure
        log_weights = np.full(K, -np.inf)
        log_weights[:fitted] = model.log_weights
        classifiers.append(SideClassifier(log_rates, exposure, log_weights, float(dispersion),
                                          np.asarray(other_labels, np.int64).copy(), weights_tempered=True))
    return tuple(classifiers)


def _poisson_dispersion(X, labels, models):
    """The fitted items' variance over their Poisson variance under both sides' Poisson block models: Pearson's
    statistic of each labelled item's counts over the other side's clusters around its cluster's expected counts,
    ``sum (x_il - mu_kl)^2 / mu_kl`` with ``mu_kl = rate[k, l] n_l`` over the blocks of a positive density, over
    its degrees of freedom ``sum_k (n_k - 1) L_k`` (``L_k`` those blocks of cluster k), pooled over both sides; 1 unless the statistic exceeds them by ``DISPERSION_EVIDENCE`` of its
    standard deviations under Poisson counts (``sqrt(sum (2 + 1 / mu))``: sparse counts vary more). Poisson
    simulations give 1; over-dispersed counts more, and without it nearly every new item's probability was 0 or
    1 (on negative-binomial draws of case 2, those at 0.99 or more in their true block 91% of the time, those at
    0.95-0.99 59%: docs/results.md, "New items' probabilities tempered with both sides Poisson").

    ``labels``: (row labels (n_rows,), column labels (n_cols,)), -1 for items set aside; ``models``: the rows'
    and the columns' :class:`conjoined.refine.SideModel` (Poisson)."""
    statistic = degrees = variance = 0.0
    for side, own, other, model in ((X, labels[0], labels[1], models[0]), (X.T, labels[1], labels[0], models[1])):
        labelled = own >= 0
        n_clusters_other = model.log_rates.shape[1]
        n_other = np.bincount(other[other >= 0], minlength=n_clusters_other).astype(np.float64)
        # Blocks at a zero density (the rates' floor: no fitted item has a count there) are left out: they add
        # nothing to the statistic, and their variance 2 + 1 / mu, unbounded, made it show nothing anywhere.
        possible = (n_other > 0) & (model.log_rates > np.log(np.finfo(np.float64).tiny) + 1.0)
        clusters = own[labelled]
        item_cells = possible[clusters]
        counts = _counts_over_clusters(side, other, n_clusters_other)[labelled][item_cells]
        expected = (np.exp(model.log_rates) * n_other)[clusters][item_cells]
        statistic += float(((counts - expected) ** 2 / expected).sum())
        variance += float((2 + 1 / expected).sum())
        sizes = np.bincount(clusters, minlength=possible.shape[0])
        degrees += int((np.maximum(sizes - 1, 0) * possible.sum(axis=1)).sum())
    return _evidenced_dispersion(statistic, degrees, np.sqrt(variance))


def cluster_probabilities(classifier, items):
    """(n, K) posterior probability of each cluster for items ``items`` (n, n_other) of counts over the other
    side's items (dense or scipy.sparse); an item without counts over the other side's labelled items gets a
    row of zeros (nothing to classify it by: such items are set aside in a fit too)."""
    n_clusters_other = classifier.log_rates.shape[1]
    aggregated = _counts_over_clusters(items, classifier.other_labels, n_clusters_other)
    log_likelihood = aggregated @ classifier.log_rates.T - classifier.exposure[None, :]
    if classifier.weights_tempered:
        log_joint = (log_likelihood + classifier.log_weights[None, :]) / classifier.dispersion
    else:
        log_joint = log_likelihood / classifier.dispersion + classifier.log_weights[None, :]
    probabilities = np.exp(log_joint - logsumexp(log_joint, axis=1, keepdims=True))
    probabilities[aggregated.sum(axis=1) == 0] = 0.0
    return probabilities


def most_probable(probabilities):
    """(n,) int64 argmax of each row of ``probabilities`` (n, K), -1 for a row of zeros (an item not classified)."""
    labels = np.argmax(probabilities, axis=1).astype(np.int64)
    labels[probabilities.sum(axis=1) == 0] = -1
    return labels


def label_probabilities(probabilities, labels, unassigned):
    """(n,) the probability of each item's cluster ``labels`` (n,) in ``probabilities`` (n, K); ``unassigned``
    for label -1."""
    at_label = probabilities[np.arange(len(labels)), np.maximum(labels, 0)]
    return np.where(labels >= 0, at_label, unassigned)
