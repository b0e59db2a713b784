"""The case-2 oracles of benchmarks/case2_ceiling.py: the design's class shares against shares learned by EM."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from conjoined.metrics import jaccard_score

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture(scope="module")
def ceiling():
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(BENCHMARKS))  # the script imports paper_tables beside it
        spec = importlib.util.spec_from_file_location("case2_ceiling", BENCHMARKS / "case2_ceiling.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        yield module


def test_learned_weights_are_the_class_shares_of_separated_rows(ceiling):
    # 2 rows far above the background on columns 0-1, 6 rows at it: each row in its class, from equal weights
    X = np.array([[40, 40, 5, 5]] * 2 + [[5, 5, 5, 5]] * 6, dtype=float)
    members = [np.array([True, True, False, False]), None]
    classes = ceiling.learned_weight_classes(X, members, block=40.0, other=5.0)
    np.testing.assert_array_equal(classes, [0, 0] + [1] * 6)
    log_likelihood = ceiling.class_log_likelihoods(X, members, 40.0, 5.0)
    # Poisson log-likelihoods up to the factorials: sum x log(rate) - sum rate
    assert log_likelihood[0, 0] == pytest.approx(80 * np.log(40) + 10 * np.log(5) - 90)
    assert log_likelihood[0, 1] == pytest.approx(90 * np.log(5) - 20)


def test_replicate_7_turns_on_the_design_shares(ceiling):
    # Table 2's replicate 7: two small-block rows have 44 counts in its columns, one above the oracle's threshold
    # (43.45). With the design's 4/20 they are in; with weights learned from the rows, the two pull the small
    # class's weight down together and both fall out.
    X, rows, columns = ceiling.replicate_data(2, 7)
    X = np.asarray(X)
    design = ceiling.oracle_biclusters(X, rows, columns)
    learned = ceiling.oracle_biclusters(X, rows, columns, learns="shares")
    assert jaccard_score(design, (rows, columns)) == 1.0
    assert jaccard_score(learned, (rows, columns)) == 0.75
    counts = X[:, columns[0]].sum(axis=1)
    np.testing.assert_array_equal(counts[design[0][0] != learned[0][0]], [44, 44])
    np.testing.assert_array_equal(learned[1], design[1])


def test_draws_of_another_token_count_and_their_oracle(ceiling):
    from conjoined.datasets import make_cdp_case

    X, rows, columns = ceiling.draw_case(3)
    X_table, rows_table, columns_table = make_cdp_case(2, random_state=3)
    np.testing.assert_array_equal(X, X_table)
    np.testing.assert_array_equal(rows, rows_table)
    np.testing.assert_array_equal(columns, columns_table)
    X, rows, columns = ceiling.draw_case(3, n_tokens=5000, shuffle=True)
    assert X.sum() == 5000
    # 144 block cells share half the tokens, the 256 others the rest
    assert ceiling.cell_densities(rows, columns, X.sum()) == pytest.approx((2500 / 144, 2500 / 256))
    found = ceiling.oracle_biclusters(X, rows, columns)
    assert jaccard_score(found, (rows, columns)) >= 0.75


def test_oracles_that_learn_the_densities_classify_separated_rows(ceiling):
    # 2 rows far above the background on columns 0-1, 6 rows at it: both oracles keep every row in its class
    X = np.array([[40, 40, 5, 5]] * 2 + [[5, 5, 5, 5]] * 6, dtype=float)
    members = [np.array([True, True, False, False]), None]
    truth = np.array([0, 0] + [1] * 6)
    start = np.array([0] + [1] * 7)  # one block row in the background: the EM's densities bring it back
    np.testing.assert_array_equal(ceiling.learned_density_classes(X, members, start), truth)
    np.testing.assert_array_equal(ceiling.integrated_classes(X, members, truth, seed=0), truth)


def test_replicate_44_turns_on_the_known_densities(ceiling):
    # Table 2's replicate 44: a background row has 43 counts in the small block's columns. Knowing the densities
    # (with the design's shares or learned ones) leaves it out; learning the densities as well takes it in, by
    # EM or with densities and weights integrated out.
    X, rows, columns = ceiling.replicate_data(2, 44)
    X = np.asarray(X)
    found = {learns: ceiling.oracle_biclusters(X, rows, columns, learns) for learns in ceiling.ORACLES}
    assert [jaccard_score(found[learns], (rows, columns)) for learns in ceiling.ORACLES] == [1.0, 1.0, 0.9, 0.9]
    extra = found["densities"][0][0] & ~rows[0]
    np.testing.assert_array_equal(X[extra][:, columns[0]].sum(axis=1), [43])
    np.testing.assert_array_equal(found["integrated"][0], found["densities"][0])
    with pytest.raises(ValueError, match="learns must be one of"):
        ceiling.oracle_biclusters(X, rows, columns, "truth")
