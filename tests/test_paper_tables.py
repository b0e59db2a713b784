"""The benchmark script's core: fixed shuffled replicates, tables of the paper's shape, scores in [0, 1]."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "paper_tables.py"


@pytest.fixture(scope="module")
def paper_tables():
    spec = importlib.util.spec_from_file_location("paper_tables", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_replicates_are_fixed_and_shuffled(paper_tables):
    X1, rows1, cols1 = paper_tables.replicate_data(2, 0)
    X2, rows2, cols2 = paper_tables.replicate_data(2, 0)
    np.testing.assert_array_equal(X1, X2)
    np.testing.assert_array_equal(rows1, rows2)
    np.testing.assert_array_equal(cols1, cols2)
    X3, _, _ = paper_tables.replicate_data(2, 1)
    assert not np.array_equal(X1, X3)
    # case 2's first true block is rows 1-4 before shuffling: shuffled, it is not the first four rows
    assert rows1.shape == (2, 20) and rows1[0].sum() == 4 and not rows1[0, :4].all()


def test_jaccard_table_shape_and_values(paper_tables, tmp_path):
    methods = ["bimax", "cheng-church"]
    records = paper_tables.run_jaccard_study([2], 1, methods, progress=False)
    assert len(records) == 2 and set(records["method"]) == set(methods)
    assert records["jaccard"].between(0, 1).all()
    summary = paper_tables.summarize_jaccard(records)
    assert summary.shape[0] == 2
    assert summary["mean"].between(0, 1).all() and (summary["n"] == 1).all()
    # the paper's Table 2 numbers sit beside ours
    bimax = summary.set_index("method").loc["bimax"]
    assert (bimax["paper_mean"], bimax["paper_sd"]) == (0.098, 0.021)
    table = paper_tables.jaccard_markdown(summary).splitlines()
    assert table[0] == "| Case | Bimax | C & C |"
    assert len(table) == 2 + 2  # header, rule, this run, the paper
    assert table[3].startswith("| 2, paper | 0.098 (0.021) | 0.016 (0.000)")
    paper_tables.plot_results(summary, None, tmp_path / "figure.png")
    assert (tmp_path / "figure.png").stat().st_size > 0


def test_later_replicates_are_the_same_draws(paper_tables):
    # --first-replicate 3 fits replicates 3 and 4, the very draws a run over 0..4 would give them
    records = paper_tables.run_jaccard_study([2], 2, ["bimax"], progress=False, first_replicate=3)
    assert records["replicate"].tolist() == [3, 4]
    single = paper_tables.fit_one(2, 4, "bimax")
    assert records["jaccard"].iloc[1] == single["jaccard"]
    assert records["n_biclusters"].iloc[1] == single["n_biclusters"]


def test_runtime_table_ratios(paper_tables):
    records = paper_tables.run_runtime_study(1, methods=("dt2b-5",), progress=False)
    summary = paper_tables.summarize_runtime(records)
    row = summary.iloc[0]
    assert 0 <= row["jaccard_mean"] <= 1 and row["seconds_mean"] > 0
    assert row["paper_seconds"] == 4.23
    assert np.isclose(row["ratio_to_paper"], row["seconds_mean"] / 4.23)
    assert np.isclose(row["paper_ratio_to_cdp"], 4.23 / 13.22)
    assert np.isnan(row["ratio_to_cdp"])  # CDP was not timed in this run
