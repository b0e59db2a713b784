"""New rows and columns classified by a fitted CDP (conjoined.predict)."""

import pickle
import warnings

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from scipy.special import softmax
from sklearn.exceptions import NotFittedError

from conjoined import CDP
from conjoined.background import _counts_over_clusters
from conjoined.cdp import AllZeroWarning
from conjoined.datasets import make_cdp_case, make_marques_like
from conjoined.predict import SideClassifier, cluster_probabilities, side_classifiers
from conjoined.refine import side_model


def _two_by_two():
    """6 x 6 counts: rows 0-1 x columns 0-1 at 20 a cell, every other cell 2."""
    X = np.full((6, 6), 2.0)
    X[:2, :2] = 20.0
    labels = np.array([0, 0, 1, 1, 1, 1])
    return sp.csr_matrix(X), labels


def test_a_new_rows_probability_is_the_block_models_posterior_by_hand():
    X, labels = _two_by_two()
    rows, columns = side_classifiers(X, labels, labels, z_min=None, min_size=None,
                                     likelihoods=("poisson", "poisson"), n_clusters=(2, 2))
    # one heavy block (its own density 20, nothing to pool with), the background 64 counts over 32 cells = 2:
    # cluster 0 expects 20 a cell in column cluster 0 (2 columns) and 2 in column cluster 1 (4 columns), so 48 in
    # all; cluster 1 expects 12. A row with 16 counts in column cluster 0 and 7 in the other:
    new = np.array([[9.0, 7.0, 3.0, 0.0, 4.0, 0.0]])
    log_odds = (16 * np.log(20) - 48 + np.log(2 / 6)) - (16 * np.log(2) - 12 + np.log(4 / 6))
    expected = 1 / (1 + np.exp(-log_odds))
    np.testing.assert_allclose(cluster_probabilities(rows, new), [[expected, 1 - expected]], rtol=1e-12)
    assert 0.5 < expected < 0.6  # a borderline row: the test reads a probability, not a certainty
    # the columns' classifier is the same model transposed
    np.testing.assert_allclose(cluster_probabilities(columns, new), [[expected, 1 - expected]], rtol=1e-12)


def test_fitted_items_are_classified_as_the_fit_classified_them():
    X, _, _ = make_cdp_case(2, random_state=3, shuffle=True)
    model = CDP(random_state=0).fit(X)
    np.testing.assert_array_equal(model.predict_rows(X), model.row_labels_)
    np.testing.assert_array_equal(model.predict_columns(X), model.column_labels_)
    probabilities = model.predict_row_proba(X)
    assert probabilities.shape == (X.shape[0], model.n_row_clusters_)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0)


def test_over_dispersed_items_read_by_profile_come_back_in_their_clusters():
    """Over-dispersed counts read by profile: the classifier's probabilities are the refinement EM's posterior
    tempered by the over-dispersion, which keeps the EM's decisions. Tempering the likelihood alone (and taking
    the weights and profiles from the hard labels) sent 9 of these 1,000 fitted genes to other clusters."""
    X, _, _ = make_marques_like(1000, 300, n_row_clusters=10, n_col_clusters=8, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # 60 iterations: mixtures not settled
        model = CDP(random_state=0, n_iter=60, row_likelihood="multinomial", column_likelihood="multinomial").fit(X)
    np.testing.assert_array_equal(model.predict_rows(X), model.row_labels_)
    np.testing.assert_array_equal(model.predict_columns(X), model.column_labels_)
    classifier = model.row_classifier_
    assert classifier.dispersion > 1.3
    rows, columns = model.row_labels_, model.column_labels_
    em = side_model(sp.csr_matrix(X, dtype=np.float64), rows, columns, z_min=None, min_size=None,
                    likelihood="multinomial", axis=0)
    np.testing.assert_array_equal(em.labels, rows)  # the refined partition is the EM's fixed point
    log_posterior = _counts_over_clusters(X, columns, columns.max() + 1) @ em.log_rates.T + em.log_weights
    np.testing.assert_allclose(model.predict_row_proba(X), softmax(log_posterior / classifier.dispersion, axis=1),
                               rtol=1e-9, atol=1e-300)


def test_a_block_that_rests_on_a_stray_row_is_background_to_the_classifier():
    """Table 2's case 2, replicate 44, at its mixtures' partition (tests/test_refine.py): the background rows'
    block on the small block's columns is heavy only through the small block's row 16, and the refinement's EM
    (as the extraction) models it at the background. So does the classifier. The partition is not the EM's fixed
    point (the EM moves rows 16 and 12 to the small block), so the classifier reads the parameters of its hard
    labels, which keep them where they are, but row 16 (44 counts there) at the knife edge: probability 0.44 in
    the small block, against 0.10 with that block modelled heavy."""
    X, _, _ = make_cdp_case(2, random_state=3257916533, shuffle=True)
    rows = np.array([1, 0, 2, 2, 0, 1, 0, 0, 1, 0, 1, 1, 0, 1, 0, 1, 0, 0, 2, 1])
    columns = np.array([0, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1])
    row_classifier, _ = side_classifiers(sp.csr_matrix(X, dtype=np.float64), rows, columns, z_min=None,
                                         min_size=None, likelihoods=("poisson", "poisson"), n_clusters=(3, 2))
    log_rates = row_classifier.log_rates
    assert log_rates[0, 1] == log_rates[0, 0] == log_rates[1, 1] == log_rates[2, 0]  # one background density
    assert log_rates[2, 1] > log_rates[0, 1] and log_rates[1, 0] > log_rates[0, 1]  # the two heavy blocks
    probabilities = cluster_probabilities(row_classifier, X)
    np.testing.assert_array_equal(probabilities.argmax(axis=1), rows)
    assert probabilities[16, 2] == pytest.approx(0.441, abs=0.001)
    assert probabilities[12, 2] == pytest.approx(0.309, abs=0.001)
    # the EM from this partition moves rows 12 and 16: the parameters are the hard labels', not the EM's
    em = side_model(sp.csr_matrix(X, dtype=np.float64), rows, columns, z_min=None, min_size=None,
                    likelihood="poisson", axis=0)
    np.testing.assert_array_equal(em.labels, rows)
    np.testing.assert_allclose(em.log_weights, np.log([0.45, 0.4, 0.15]))


def test_a_classifier_saved_before_is_read_as_it_was_made(tmp_path):
    """Classifiers pickled with a model, or stored in an AnnData, before the shares were tempered with the
    likelihood have no ``weights_tempered``: they temper the likelihood alone, as when they were made; save_fit
    of such a model says to fit it again (it said X was not the fitted matrix)."""
    from conjoined.fit_folder import save_fit

    log_rates, exposure = np.log([[4.0, 1.0], [1.0, 2.0]]), np.array([5.0, 3.0])
    log_weights, other = np.log([0.2, 0.8]), np.array([0, 0, 1])
    items = np.array([[3.0, 1.0, 0.0], [0.0, 1.0, 2.0]])
    log_likelihood = np.array([[4 * np.log(4) - 5, 4 * np.log(1) - 3], [np.log(4) + 2 * np.log(1) - 5,
                                                                      np.log(1) + 2 * np.log(2) - 3]])
    saved_before = SideClassifier(log_rates, exposure, log_weights, 2.0, other)  # five fields, as pickled then
    np.testing.assert_allclose(cluster_probabilities(saved_before, items),
                               softmax(log_likelihood / 2 + log_weights, axis=1))
    np.testing.assert_allclose(cluster_probabilities(saved_before._replace(weights_tempered=True), items),
                               softmax((log_likelihood + log_weights) / 2, axis=1))
    X, _, _ = make_cdp_case(3, random_state=0, shuffle=True)
    model = CDP(random_state=0).fit(X)
    model.column_classifier_ = model.column_classifier_._replace(weights_tempered=False)
    with pytest.raises(ValueError, match="fitted by an earlier version of conjoined.*fit it again"):
        save_fit(model, X, tmp_path / "fit", pictures=False)
    assert not (tmp_path / "fit").exists()


@pytest.mark.parametrize("case, seed", [(2, 1), (4, 0)])
def test_new_items_of_a_fresh_draw_go_to_their_true_blocks(case, seed):
    """A fresh draw of the same case, unshuffled, has the same rows and columns in the same blocks: each new
    row and column must land in the cluster that holds the fitted items of its true block."""
    X, rows, columns = make_cdp_case(case, random_state=seed)
    new, _, _ = make_cdp_case(case, random_state=seed + 1)
    model = CDP(random_state=0).fit(X)
    for truth, fitted, predicted in ((rows, model.row_labels_, model.predict_rows(new)),
                                     (columns, model.column_labels_, model.predict_columns(new))):
        for block in truth:  # the fitted items of a block are one cluster; the new ones join it
            assert len(set(fitted[block])) == 1
            assert set(predicted[block]) == set(fitted[block])
    # Poisson counts: nothing to temper, the probabilities are the block model's posterior
    assert model.row_classifier_.dispersion == model.column_classifier_.dispersion == 1.0


def test_over_dispersed_poisson_sides_temper_the_probabilities():
    """Both sides Poisson (the defaults) on counts over-dispersed cell by cell (negative binomial of size 5 around
    case 2's densities): the classifier tempers its log posterior by the fitted items' Pearson dispersion around
    the block model, computed here item by item; the decisions stay, the certainties soften (on 30 such draws
    the new items classified at 0.95-0.99 went to their true block 59% of the time untempered, 86% tempered:
    `python benchmarks/predict_new_items.py --replicates 30`)."""
    rng = np.random.default_rng(0)
    _, rows, columns = make_cdp_case(2, random_state=0)
    marked = (rows.T.astype(int) @ columns.astype(int)) > 0
    means = np.where(marked, 2000 / marked.sum(), 2000 / (~marked).sum())
    X = rng.poisson(rng.gamma(5.0, means / 5.0)).astype(np.float64)
    model = CDP(random_state=0).fit(X)
    row_labels, column_labels = model.row_labels_, model.column_labels_
    labels = (row_labels, column_labels)
    models = [side_model(sp.csr_matrix(X), row_labels, column_labels, z_min=None, min_size=None,
                         likelihood="poisson", axis=axis) for axis in (0, 1)]
    statistic = degrees = 0.0
    for axis, matrix in enumerate((X, X.T)):
        own, other = labels[axis], labels[1 - axis]
        for i in np.flatnonzero(own >= 0):
            for cluster in range(other.max() + 1):
                mu = np.exp(models[axis].log_rates[own[i], cluster]) * (other == cluster).sum()
                statistic += (matrix[i, other == cluster].sum() - mu) ** 2 / mu
        degrees += ((own >= 0).sum() - len(set(own[own >= 0]))) * (other.max() + 1)
    dispersion = model.row_classifier_.dispersion
    assert dispersion == model.column_classifier_.dispersion == pytest.approx(statistic / degrees, rel=1e-9)
    assert dispersion > 1.5
    aggregated = _counts_over_clusters(X, column_labels, column_labels.max() + 1)
    log_posterior = aggregated @ models[0].log_rates.T - models[0].exposure + models[0].log_weights
    np.testing.assert_allclose(model.predict_row_proba(X), softmax(log_posterior / dispersion, axis=1),
                               rtol=1e-9, atol=1e-300)
    np.testing.assert_array_equal(model.predict_rows(X), np.argmax(log_posterior, axis=1))


def test_a_column_read_by_profile_is_classified_whatever_its_depth():
    X, _, _ = make_cdp_case(3, random_state=0, shuffle=True)
    model = CDP(random_state=0, column_likelihood="multinomial").fit(X)
    labels = model.predict_columns(X)
    np.testing.assert_array_equal(labels, model.column_labels_)
    np.testing.assert_array_equal(model.predict_columns(3 * X), labels)
    # read with the Poisson likelihood, a column three times as deep is another column
    poisson = CDP(random_state=0).fit(X)
    assert not np.array_equal(poisson.predict_columns(3 * X), poisson.column_labels_)


def test_sparse_dense_pickled_and_one_item_at_a_time_agree():
    X, _, _ = make_cdp_case(3, random_state=0, shuffle=True)
    model = CDP(random_state=0).fit(X)
    dense = model.predict_column_proba(X)
    np.testing.assert_allclose(model.predict_column_proba(sp.csc_matrix(X)), dense, rtol=1e-12)
    np.testing.assert_allclose(model.predict_column_proba(X[:, [7]]), dense[[7]], rtol=1e-12)
    np.testing.assert_allclose(pickle.loads(pickle.dumps(model)).predict_column_proba(X), dense, rtol=1e-12)


def test_new_items_without_counts_come_back_unassigned():
    X, _, _ = make_cdp_case(3, random_state=0)
    model = CDP(random_state=0).fit(X)
    new = X[:3].copy()
    new[1] = 0
    with pytest.warns(AllZeroWarning, match="1 new row") as record:
        labels = model.predict_rows(new)
    assert record[0].filename == __file__
    assert labels[1] == -1 and (labels[[0, 2]] >= 0).all()
    with pytest.warns(AllZeroWarning):
        np.testing.assert_array_equal(model.predict_row_proba(new)[1], 0.0)


def test_bad_new_items_are_named():
    X, _, _ = make_cdp_case(3, random_state=0)
    unfitted = CDP()
    for method in (unfitted.predict_rows, unfitted.get_indices, lambda _: unfitted.biclusters_):
        with pytest.raises(NotFittedError):  # scikit-learn's mixin said AttributeError for the last two
            method(X)
    model = CDP(random_state=0).fit(X)
    for method in (model.predict_columns, model.predict_column_proba):
        with pytest.raises(ValueError, match=r"X has 49 rows, but the model was fitted on 50 rows: new columns "
                                             r"are read over the fitted rows, shape \(n_rows, n_new\)"):
            method(X[:49])
    with pytest.raises(ValueError, match="50 features"):  # scikit-learn's message for the fitted columns
        model.predict_rows(X[:, :49])
    negative = X[:2].copy()
    negative[0, 0] = -1
    with pytest.raises(ValueError, match="negative"):
        model.predict_rows(negative)
    with pytest.raises(ValueError, match="integer"):
        model.predict_rows(X[:2] + 0.5)
    model.row_classifier_ = None  # as a model pickled by a version that kept no classifier
    with pytest.raises(AttributeError, match="fit it again"):
        model.predict_rows(X)


def test_blocks_over_a_zero_background_fit_without_numpy_warnings():
    """The classifier's dispersion over cells expected to hold next to nothing overflowed (numpy's
    RuntimeWarning, twice, on the first matrix a user tries); blocks of a zero density are left out of it."""
    X = np.kron(np.eye(3, dtype=np.int64), np.full((10, 10), 4))
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        model = CDP(random_state=0).fit(X)
    assert model.n_biclusters_ == 3 and model.row_classifier_.dispersion == 1.0
    np.testing.assert_array_equal(model.predict_rows(X), model.row_labels_)
    # over-dispersed blocks there: their dispersion shows (the empty blocks' unbounded variance hid it: 1)
    counts = np.random.default_rng(0).negative_binomial(2, 0.25, X.shape)
    over = CDP(random_state=0).fit((X > 0) * counts)
    assert over.n_biclusters_ == 3 and over.row_classifier_.dispersion > 2


def test_new_rows_with_other_column_names_are_refused():
    X, _, _ = make_cdp_case(3, random_state=0)
    frame = pd.DataFrame(X, columns=[f"doc{j}" for j in range(50)])
    model = CDP(random_state=0).fit(frame)
    np.testing.assert_array_equal(model.predict_rows(frame), model.row_labels_)
    with pytest.raises(ValueError, match="feature names"):
        model.predict_rows(frame.rename(columns={"doc0": "other"}))


def test_new_columns_with_other_row_names_are_refused():
    X, _, _ = make_cdp_case(3, random_state=0)
    words = [f"word{i}" for i in range(X.shape[0])]
    frame = pd.DataFrame(X, index=words)
    model = CDP(random_state=0).fit(frame)
    np.testing.assert_array_equal(model.row_names_in_, words)
    np.testing.assert_array_equal(model.predict_columns(frame), model.column_labels_)
    with pytest.raises(ValueError, match="row 1 is 'word2', fitted 'word1'"):
        model.predict_columns(frame.iloc[[0, 2, 1] + list(range(3, X.shape[0]))])
    model.predict_columns(X)  # no names to check: read in the fitted rows' order
    assert not hasattr(CDP(random_state=0).fit(X), "row_names_in_")
    assert not hasattr(model.fit(pd.DataFrame(X)), "row_names_in_")  # integer row names are not recorded
