"""The example scripts run end to end on reduced settings (``--quick``) and print their sections."""

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

PROJECT_ROOT = Path(__file__).resolve().parents[1]
NEWSGROUPS = PROJECT_ROOT.parent / "shared" / "data" / "20news_w100.mat"
PICTURES = ("heatmap.png", "k_trace.png", "theta.png", "membership.png")


def _run_example(name, *args, cwd):
    result = subprocess.run(
        [sys.executable, str(PROJECT_ROOT / "examples" / name), *map(str, args), "--quick"],
        cwd=cwd,
        check=False,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


@pytest.mark.skipif(not NEWSGROUPS.is_file(), reason=f"{NEWSGROUPS} is absent")
def test_newsgroups_quick(tmp_path):
    out = _run_example("newsgroups.py", NEWSGROUPS, "--out", tmp_path / "out", cwd=tmp_path)
    assert "100 words x 16242 documents" in out
    for configuration in ("defaults", "text", "paper"):
        assert f"=== configuration {configuration!r}" in out
        for picture in PICTURES:
            assert (tmp_path / "out" / configuration / picture).stat().st_size > 10_000
    assert out.count("--- heavy biclusters") == 3
    assert out.count("--- document clusters: newsgroup make-up") == 3
    assert out.count("NMI against the four newsgroups: 0.") == 3
    assert "team, games" in out  # the sports bicluster is found even on reduced settings


def test_newsgroups_missing_file(tmp_path):
    result = subprocess.run(
        [
            sys.executable,
            str(PROJECT_ROOT / "examples" / "newsgroups.py"),
            str(tmp_path / "absent.mat"),
            "--quick",
        ],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2 and "absent.mat" in result.stderr


def test_pbmc_quick(tmp_path):
    pytest.importorskip("scanpy")
    anndata = pytest.importorskip("anndata")
    out = _run_example("pbmc.py", "--out", tmp_path / "out", cwd=tmp_path)
    assert "pbmc68k_reduced: 700 cells x 765 genes" in out
    for configuration in ("singlecell", "paper"):
        assert f"=== configuration {configuration!r}" in out
        for picture in (*PICTURES, "umap.png"):
            assert (tmp_path / "out" / configuration / picture).stat().st_size > 10_000
    assert out.count("--- strongest") == 2 and "    cells: " in out and "    top genes: " in out
    assert out.count("--- cell clusters: cell-type make-up") == 2
    assert out.count("NMI against the 10 cell types: 0.") == 2
    saved = anndata.read_h5ad(tmp_path / "out" / "pbmc68k_cdp.h5ad")
    assert {"cdp_singlecell", "cdp_paper"} <= set(saved.uns)
    printed = re.findall(r"^all (\d+): median .* cover (\d+)% of the gene x cell matrix$", out, re.MULTILINE)
    for (n_biclusters, percent), key in zip(printed, ("cdp_singlecell", "cdp_paper"), strict=True):
        cells = saved.obsm[f"{key}_biclusters"].astype(bool)
        genes = saved.varm[f"{key}_biclusters"].astype(bool)
        assert int(n_biclusters) == cells.shape[1] == len(saved.uns[key]["biclusters"])
        covered = np.zeros((saved.n_obs, saved.n_vars), bool)
        for b in range(cells.shape[1]):
            covered |= np.outer(cells[:, b], genes[:, b])
        assert f"{covered.mean():.0%}" == f"{percent}%"
    assert saved.layers["counts"].sum() == 486651  # the recovered counts


def test_embeddings_quick(tmp_path):
    pytest.importorskip("matplotlib")
    out = _run_example("embeddings.py", "--out", tmp_path / "out", "--seeds", "2", cwd=tmp_path)
    assert "digits: 1797 images of 8 x 8 pixels, 10 digits; PCA to 20 dimensions" in out
    rows = re.findall(r"^\s+[01]  (DPMM|BGM)\s+(\d+) .*?  (0\.\d{3})  (-?0\.\d{3})", out, re.MULTILINE)
    assert [method for method, *_ in rows] == ["DPMM", "BGM"] * 2
    # the two chains together: 40 iterations are far too few for them to agree
    assert re.search(r"--- the 2 DPMM chains together \(compare_chains, 20 samples each\)\nR-hat: log posterior "
                     r"[\d.]+, K [\d.]+ \(above 1.01: the chains sit in different places, or are too short to tell\)"
                     r"\nK over all chains: \d+ \(0\.\d\d\)(, \d+ \(0\.\d\d\))*\n"
                     r"ARI between the chains' partitions: 0\.\d\d to 0\.\d\d\n", out)
    assert all(float(nmi) > 0.6 for *_, nmi, _ in rows)  # both find the digits, even on 40 iterations
    assert "--- DPMM clusters of seed 0" in out and "--- the least certain images" in out
    table = out.split("digit make-up\n", 1)[1].split("\n\n", 1)[0].splitlines()[1:]
    assert sum(int(line.split()[1]) for line in table) == 1797  # every image in one cluster
    assert (tmp_path / "out" / "digit_clusters.png").stat().st_size > 10_000


@pytest.mark.parametrize("args, message", [(["--dims", "65"], "--dims must be between 1 and 64"),
                                           (["--seeds", "0"], "--seeds must be at least 1"),
                                           (["--out", "taken"], "--out taken exists and is not a folder")])
def test_embeddings_bad_arguments(tmp_path, args, message):
    (tmp_path / "taken").write_text("a file")
    result = subprocess.run([sys.executable, str(PROJECT_ROOT / "examples" / "embeddings.py"), *args, "--quick"],
                            cwd=tmp_path, check=False, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and message in result.stderr
    assert (tmp_path / "taken").read_text() == "a file"
