import itertools

import numpy as np
import pytest
from sklearn.metrics import consensus_score as sklearn_consensus_score

from conjoined.metrics import consensus_score, jaccard_score, recovery_score, relevance_score


def _biclusters(n_rows, n_cols, specs):
    """(rows, columns) bool arrays from a list of (row indices, column indices)."""
    rows = np.zeros((len(specs), n_rows), dtype=bool)
    columns = np.zeros((len(specs), n_cols), dtype=bool)
    for b, (r, c) in enumerate(specs):
        rows[b, list(r)] = True
        columns[b, list(c)] = True
    return rows, columns


def _cells(rows, columns):
    return [
        {(i, j) for i in np.flatnonzero(r) for j in np.flatnonzero(c)}
        for r, c in zip(rows, columns, strict=True)
    ]


def _set_score(a_sets, b_sets):
    if not a_sets or not b_sets:
        return 0.0
    return float(np.mean([max(len(a & b) / len(a | b) if a | b else 1.0 for b in b_sets) for a in a_sets]))


def _brute_jaccard(found, truth):
    found_cells, true_cells = _cells(*found), _cells(*truth)
    return min(_set_score(found_cells, true_cells), _set_score(true_cells, found_cells))


def _row_sets(biclusters):
    return [set(np.flatnonzero(r)) for r in biclusters[0]]


def test_hand_computed_jaccard():
    # truth: rows 0-1 x cols 0-1 (4 cells); found: rows 0-2 x cols 0-1 (6 cells), intersection 4 -> 4/6
    truth = _biclusters(4, 4, [([0, 1], [0, 1])])
    found = _biclusters(4, 4, [([0, 1, 2], [0, 1])])
    assert jaccard_score(found, truth) == pytest.approx(4 / 6)
    # an extra found bicluster far away: S(found, truth) = (4/6 + 0) / 2, S(truth, found) = 4/6
    found2 = _biclusters(4, 4, [([0, 1, 2], [0, 1]), ([3], [3])])
    assert jaccard_score(found2, truth) == pytest.approx(2 / 6)
    assert jaccard_score(truth, found2) == pytest.approx(2 / 6)


def test_hand_computed_overlapping_rows_disjoint_cells():
    # same rows, different columns: no shared cell
    a = _biclusters(3, 4, [([0, 1], [0, 1])])
    b = _biclusters(3, 4, [([0, 1], [2, 3])])
    assert jaccard_score(a, b) == 0.0
    # Prelic scores look at rows only: these match perfectly there
    assert relevance_score(a, b) == 1.0
    assert recovery_score(a, b) == 1.0


def test_hand_computed_prelic():
    truth = _biclusters(6, 3, [([0, 1, 2], [0]), ([3, 4, 5], [1])])
    found = _biclusters(6, 3, [([0, 1], [0])])
    # relevance: the one found bicluster's rows {0,1} vs {0,1,2}: 2/3
    assert relevance_score(found, truth) == pytest.approx(2 / 3)
    # recovery: truth 1 -> 2/3, truth 2 -> 0; mean 1/3
    assert recovery_score(found, truth) == pytest.approx(1 / 3)


def test_identical_disjoint_empty():
    truth = _biclusters(10, 8, [([0, 1, 2], [0, 1]), ([5, 6], [4, 5, 6])])
    assert jaccard_score(truth, truth) == 1.0
    assert relevance_score(truth, truth) == 1.0
    assert recovery_score(truth, truth) == 1.0
    disjoint = _biclusters(10, 8, [([7, 8], [7])])
    assert jaccard_score(disjoint, truth) == 0.0
    assert relevance_score(disjoint, truth) == 0.0
    empty = (np.zeros((0, 10), dtype=bool), np.zeros((0, 8), dtype=bool))
    for score in (jaccard_score, relevance_score, recovery_score):
        assert score(empty, truth) == 0.0
        assert score(truth, empty) == 0.0
        assert score(([], []), truth) == 0.0


def test_agrees_with_brute_force_sets():
    rng = np.random.default_rng(0)
    for trial in range(40):
        n_rows, n_cols = rng.integers(3, 12, size=2)
        n_found, n_true = rng.integers(1, 5, size=2)
        density = rng.uniform(0.1, 0.7)
        found = (rng.random((n_found, n_rows)) < density, rng.random((n_found, n_cols)) < density)
        truth = (rng.random((n_true, n_rows)) < density, rng.random((n_true, n_cols)) < density)
        assert jaccard_score(found, truth) == pytest.approx(_brute_jaccard(found, truth), abs=1e-12), trial
        assert relevance_score(found, truth) == pytest.approx(
            _set_score(_row_sets(found), _row_sets(truth)), abs=1e-12
        )
        assert recovery_score(found, truth) == pytest.approx(
            _set_score(_row_sets(truth), _row_sets(found)), abs=1e-12
        )


def test_symmetric_and_order_free():
    rng = np.random.default_rng(1)
    found = (rng.random((3, 9)) < 0.5, rng.random((3, 7)) < 0.5)
    truth = (rng.random((2, 9)) < 0.5, rng.random((2, 7)) < 0.5)
    assert jaccard_score(found, truth) == pytest.approx(jaccard_score(truth, found))
    for order in itertools.permutations(range(3)):
        permuted = (found[0][list(order)], found[1][list(order)])
        assert jaccard_score(permuted, truth) == pytest.approx(jaccard_score(found, truth))


def test_consensus_score_is_sklearns_and_zero_for_an_empty_set():
    rng = np.random.default_rng(2)
    for n_found, n_true in [(1, 5), (4, 4), (2, 3), (3, 2)]:
        found = (rng.random((n_found, 9)) < 0.5, rng.random((n_found, 7)) < 0.5)
        truth = (rng.random((n_true, 9)) < 0.5, rng.random((n_true, 7)) < 0.5)
        assert consensus_score(found, truth) == pytest.approx(sklearn_consensus_score(found, truth), abs=1e-12)
    assert consensus_score(found, found) == 1.0

    def overlap(a_rows, a_columns, b_rows, b_columns):
        return float((a_rows & b_rows).any())

    assert consensus_score(found, truth, similarity=overlap) == sklearn_consensus_score(found, truth,
                                                                                        similarity=overlap)
    empty = (np.zeros((0, 9), bool), np.zeros((0, 7), bool))
    assert consensus_score(empty, truth) == 0.0 and consensus_score(truth, empty) == 0.0
    with pytest.raises(ValueError, match="different numbers of columns"):
        consensus_score(found, (truth[0], np.ones((2, 8), bool)))


def test_a_set_with_an_empty_bicluster_scores_1_against_itself():
    """An empty bicluster (no rows, or no columns) equals another empty one: Jaccard 1 (sklearn's is 0 / 0, which
    its matching refuses), and 0 against any bicluster with cells."""
    sets = (np.array([[1, 1, 0], [0, 0, 0]], bool), np.array([[1, 0], [0, 0]], bool))
    for score in (jaccard_score, consensus_score):
        assert score(sets, sets) == 1.0
        assert score(sets, (sets[0][:1], sets[1][:1])) == 0.5


def test_bad_input():
    truth = _biclusters(4, 4, [([0], [0])])
    with pytest.raises(ValueError, match="different numbers of rows"):
        jaccard_score(_biclusters(5, 4, [([0], [0])]), truth)
    with pytest.raises(ValueError, match="one line per bicluster"):
        jaccard_score((np.ones((2, 4), bool), np.ones((3, 4), bool)), truth)
    with pytest.raises(ValueError, match="pair"):
        jaccard_score(np.ones((3, 4), bool), truth)


@pytest.mark.parametrize("rows", [np.full((1, 4), np.nan), np.full((1, 4), -1), np.full((1, 4), 2),
                                  np.full((1, 4), "yes"), np.ones((1, 4))])
def test_biclusters_must_be_bool_or_0_1(rows):
    truth = _biclusters(4, 3, [([0], [0])])
    with pytest.raises(ValueError, match=r"found rows must be a bool \(or 0/1\) array"):
        jaccard_score((rows, truth[1]), truth)
    with pytest.raises(ValueError, match=r"truth rows must be a bool \(or 0/1\) array"):
        recovery_score(truth, (rows, truth[1]))


def test_0_1_integer_masks_score_as_bool():
    truth = _biclusters(4, 3, [([0, 1], [0])])
    as_int = (truth[0].astype(np.int64), truth[1].astype(np.uint8))
    assert jaccard_score(as_int, truth) == 1.0


def test_empty_result_is_still_checked_against_the_truth_shape():
    truth = _biclusters(4, 3, [([0, 1], [0])])
    # no bicluster found, as a model reports it: (0, n_rows) and (0, n_cols), any dtype; scores 0 both ways
    empties = [(np.zeros((0, 4), bool), np.zeros((0, 3), bool)), (np.zeros((0, 4)), np.zeros((0, 3))), ([], [])]
    for empty in empties:
        for score in (jaccard_score, relevance_score, recovery_score):
            assert score(empty, truth) == 0.0 and score(truth, empty) == 0.0
    # an empty result of a model fitted on another matrix (here transposed) is a mistake, not a score of 0
    transposed = (np.zeros((0, 3), bool), np.zeros((0, 4), bool))
    for score in (jaccard_score, relevance_score, recovery_score):
        with pytest.raises(ValueError, match="different numbers of rows: 3 vs 4"):
            score(transposed, truth)
        with pytest.raises(ValueError, match="different numbers of rows: 4 vs 3"):
            score(truth, transposed)
    with pytest.raises(ValueError, match="different numbers of rows: 0 vs 4"):
        jaccard_score((np.zeros((2, 0), bool), np.zeros((2, 0), bool)), truth)


def test_index_lists_are_refused_with_a_clear_message():
    truth = _biclusters(4, 4, [([0, 1], [0, 1])])
    with pytest.raises(ValueError, match="not lists of indices"):
        jaccard_score(([[0, 1], [2]], [[0, 1], [3]]), truth)
    with pytest.raises(ValueError, match="index lists are not accepted"):
        jaccard_score(([[2, 3]], [[2, 3]]), truth)


def test_a_list_of_per_bicluster_pairs_is_named():
    truth = _biclusters(4, 5, [([0, 1], [0, 1]), ([2], [3, 4])])
    pairs = list(zip(*truth))  # [(rows of bicluster 0, its columns), (rows of bicluster 1, its columns)]
    with pytest.raises(ValueError, match=r"a list of one \(rows, columns\) pair per bicluster is not read"):
        jaccard_score(pairs, truth)
    with pytest.raises(ValueError, match="a list of one"):
        jaccard_score(pairs + pairs[:1], truth)
    assert jaccard_score(tuple(np.array(side) for side in zip(*pairs)), truth) == 1.0
