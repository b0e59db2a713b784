import numpy as np
import pytest

from conjoined.extract import Biclusters, extract_biclusters, topic_parameters
from conjoined.reassign import TokenCounts, reassign_tokens

# Two row and two column topics; rows/columns 0-1 form a heavy block. N = 28, density 28 / 16 = 1.75.
X_BLOCK = np.array(
    [
        [5, 5, 1, 0],
        [5, 5, 0, 1],
        [1, 0, 1, 1],
        [0, 1, 1, 1],
    ]
)
LABELS = np.array([0, 0, 1, 1])


def _counts_at_labels(X, rows, cols, n_row_topics, n_col_topics):
    return reassign_tokens(X, rows, cols, n_row_topics, n_col_topics, a_r=0.5, a_c=0.5, lam=0.5, n_sweeps=0)


def _tally(X, pair_of_cell, n_row_topics, n_col_topics):
    """Counts of an allocation that puts every token of cell (i, j) on pair_of_cell(i, j)."""
    n_kl = np.zeros((n_row_topics, n_col_topics), dtype=np.int64)
    n_ik = np.zeros((X.shape[0], n_row_topics), dtype=np.int64)
    n_jl = np.zeros((X.shape[1], n_col_topics), dtype=np.int64)
    for i, j in zip(*np.nonzero(X)):
        k, l = pair_of_cell(i, j)
        n_kl[k, l] += X[i, j]
        n_ik[i, k] += X[i, j]
        n_jl[j, l] += X[i, j]
    return TokenCounts(n_kl, n_ik, n_jl)


def test_topic_parameters_by_hand():
    counts = TokenCounts(
        np.array([[3, 1], [0, 2]]), np.array([[3, 1], [1, 1], [0, 0]]), np.array([[2, 1], [1, 2]])
    )
    p = topic_parameters(counts, a_r=0.5, a_c=1.0, lam=2.0)
    # row topic 0 holds 4 tokens: phi = (n_ik + 0.5) / (4 + 3 * 0.5)
    np.testing.assert_allclose(p.phi_rows[:, 0], [3.5 / 5.5, 1.5 / 5.5, 0.5 / 5.5])
    np.testing.assert_allclose(p.phi_rows.sum(axis=0), 1.0)
    np.testing.assert_allclose(p.phi_columns[:, 1], [2 / 5, 3 / 5])
    np.testing.assert_allclose(p.theta, np.array([[5, 3], [2, 4]]) / 14)
    np.testing.assert_allclose(
        p.row_membership, [[0.75, 0.25], [0.5, 0.5], [0, 0]]
    )  # row without tokens: zeros
    np.testing.assert_allclose(p.column_membership, [[2 / 3, 1 / 3], [1 / 3, 2 / 3]])


def test_significance_rule_by_hand():
    counts = _counts_at_labels(X_BLOCK, LABELS, LABELS, 2, 2)
    found = extract_biclusters(X_BLOCK, counts)
    assert isinstance(found, Biclusters)
    # Pair (0, 0): observed 20, expected 4 * 1.75 = 7, z = 13 / sqrt(7) = 4.91; the other pairs are below 7.
    np.testing.assert_array_equal(found.rows, [[True, True, False, False]])
    np.testing.assert_array_equal(found.columns, [[True, True, False, False]])
    np.testing.assert_array_equal(found.pairs, [[0, 0]])
    np.testing.assert_allclose(found.strength, [13 / np.sqrt(7)])
    nothing = extract_biclusters(X_BLOCK, counts, z_min=5.0)
    assert nothing.rows.shape == (0, 4) and nothing.columns.shape == (0, 4) and nothing.pairs.shape == (0, 2)


def test_significance_rule_finds_overlapping_biclusters():
    # Blocks A = rows 0-2 x cols 0-2 and B = rows 2-4 x cols 3-5 share row 2; row 5 is background.
    X = np.zeros((6, 6), dtype=int)
    X[0:3, 0:3] = 4
    X[2:5, 3:6] = 4
    X[5, :] = 1

    def pair_of_cell(i, j):
        col_topic = 0 if j < 3 else 1
        if i == 5:
            return 2, col_topic
        return col_topic, col_topic  # row 2's tokens go to A in A's columns and to B in B's columns

    counts = _tally(X, pair_of_cell, 3, 2)
    found = extract_biclusters(X, counts)
    # Row 2 has membership 1/2 in A and B and holds 12 of each topic's 36 tokens (twice an average row's share).
    # Pairs (0, 0) and (1, 1): observed 36, expected 9 * 78 / 36 = 19.5, z = 3.74 each; others are below expected.
    np.testing.assert_array_equal(found.pairs, [[0, 0], [1, 1]])
    np.testing.assert_array_equal(found.rows, [[1, 1, 1, 0, 0, 0], [0, 0, 1, 1, 1, 0]])
    np.testing.assert_array_equal(found.columns, [[1, 1, 1, 0, 0, 0], [0, 0, 0, 1, 1, 1]])
    np.testing.assert_allclose(found.strength, [16.5 / np.sqrt(19.5)] * 2)


def test_significance_rule_needs_enrichment_not_only_membership():
    # Row 2 puts all its tokens in row topic 0 but holds far less than an average row's share of it.
    X = np.array([[9, 9, 0], [9, 9, 0], [1, 0, 0], [0, 0, 3]])
    rows, cols = np.array([0, 0, 0, 1]), np.array([0, 0, 1])
    counts = _counts_at_labels(X, rows, cols, 2, 2)
    found = extract_biclusters(X, counts, z_min=1.0)
    np.testing.assert_array_equal(found.rows[0], [True, True, False, False])
    with_weak_rows = extract_biclusters(X, counts, z_min=1.0, min_enrichment=0.1)
    np.testing.assert_array_equal(with_weak_rows.rows[0], [True, True, True, False])


def test_paper_code_rule_by_hand():
    counts = _counts_at_labels(X_BLOCK, LABELS, LABELS, 2, 2)
    found = extract_biclusters(X_BLOCK, counts, rule="paper-code", a_r=0.5, a_c=0.5)
    # Block means 5, 0.5, 0.5, 1: mean 1.75 + sample sd 2.18 = 3.93, only block (0, 0) passes.
    np.testing.assert_array_equal(found.pairs, [[0, 0]])
    np.testing.assert_array_equal(found.rows, [[True, True, False, False]])
    np.testing.assert_allclose(found.strength, [5.0])


def test_paper_code_rule_ties_give_several_labels_and_rows_stay_rows():
    # 4 rows x 3 columns; row 3 has no tokens, so its phi ties across the three equally sized row topics.
    X = np.array([[6, 0, 0], [0, 6, 0], [0, 0, 6], [0, 0, 0]])
    counts = _counts_at_labels(X, [0, 1, 2, -1], [0, 1, 2], 3, 3)
    found = extract_biclusters(X, counts, rule="paper-code", a_r=0.5, a_c=0.5)
    # Diagonal block means 6 / 2 = 3, the six others 0: mean 1 + sd 1.5 = 2.5, the diagonal passes.
    assert found.rows.shape == (3, 4) and found.columns.shape == (3, 3)
    np.testing.assert_array_equal(found.rows, [[1, 0, 0, 1], [0, 1, 0, 1], [0, 0, 1, 1]])
    np.testing.assert_array_equal(found.columns, np.eye(3, dtype=bool))


def test_paper_code_rule_with_one_or_two_blocks():
    one = _counts_at_labels(X_BLOCK, [0] * 4, [0] * 4, 1, 1)
    assert len(extract_biclusters(X_BLOCK, one, rule="paper-code", a_r=0.5, a_c=0.5).pairs) == 0
    two_unequal = _counts_at_labels(X_BLOCK, LABELS, [0] * 4, 2, 1)
    assert len(extract_biclusters(X_BLOCK, two_unequal, rule="paper-code", a_r=0.5, a_c=0.5).pairs) == 0
    X_even = np.ones((2, 2), dtype=int)
    two_equal = _counts_at_labels(X_even, [0, 1], [0, 0], 2, 1)
    found = extract_biclusters(X_even, two_equal, rule="paper-code", a_r=0.5, a_c=0.5)
    np.testing.assert_array_equal(found.pairs, [[0, 0], [1, 0]])


def test_dt2b_rule_by_hand():
    counts = _counts_at_labels(X_BLOCK, LABELS, LABELS, 2, 2)
    found = extract_biclusters(X_BLOCK, counts, rule="dt2b")
    # n_kl = [[20, 2], [2, 4]]: mean 7 + sample sd 8.72 = 15.72 keeps (0, 0).
    # n_ik = [[11, 0], [11, 0], [0, 3], [0, 3]]: mean 3.5 + sd 4.81 = 8.31 keeps rows 0 and 1 (columns alike).
    np.testing.assert_array_equal(found.pairs, [[0, 0]])
    np.testing.assert_array_equal(found.rows, [[True, True, False, False]])
    np.testing.assert_array_equal(found.columns, [[True, True, False, False]])
    np.testing.assert_allclose(found.strength, [20.0])


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"rule": "plaid"}, "rule must be one of"),
        ({"rule": "dt2b", "z_min": 3.0}, "rule 'dt2b' does not use z_min"),
        ({"rule": "significance", "a_r": 0.5}, "does not use a_r"),
        ({"rule": "paper-code"}, "needs a_r and a_c"),
        ({"min_membership": 1.5}, r"min_membership must be in \(0, 1\]"),
        ({"min_membership": 0.0}, "min_membership must be > 0"),
        ({"min_enrichment": -1.0}, "min_enrichment must be >= 0"),
        ({"z_min": "high"}, "z_min must be a finite number"),
    ],
)
def test_bad_arguments_raise(kwargs, message):
    counts = _counts_at_labels(X_BLOCK, LABELS, LABELS, 2, 2)
    with pytest.raises(ValueError, match=message):
        extract_biclusters(X_BLOCK, counts, **kwargs)


def test_counts_of_another_matrix_raise():
    counts = _counts_at_labels(X_BLOCK, LABELS, LABELS, 2, 2)
    with pytest.raises(
        ValueError, match=r"counts.n_ik has shape \(4, 2\); expected \(n_rows, K_r\) = \(3, 2\)"
    ):
        extract_biclusters(X_BLOCK[:3], counts)
