"""The ``conjoined`` command as a user runs it: every input format, bad input, OUTDIR handling, the
simulate -> fit -> score round trip and redrawn pictures. Most runs call ``main`` in-process (fast); a few run
``python -m conjoined`` in a subprocess."""

import gzip
import inspect
import json
import re
import shutil
import socket
import struct
import subprocess
import sys

import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp

from conjoined import cli
from conjoined.cli import PICTURE_DPI, PICTURES, main
from conjoined.datasets import make_biclusters_counts

pd = pytest.importorskip("pandas")
anndata = pytest.importorskip("anndata")

FAST = ["--n-iter", "30", "--seed", "0", "--quiet"]
FIT_FILES = (
    "biclusters.json",
    "row_membership.csv",
    "column_membership.csv",
    "theta.csv",
    "params.json",
    "matrix.npz",
    "model.npz",
)


@pytest.fixture(scope="module")
def planted():
    """16 genes x 12 cells with one strong bicluster (genes 0-5 x cells 0-4), and names."""
    X, rows, columns = make_biclusters_counts(
        (16, 12), [(slice(0, 6), slice(0, 5))], 3000, 0.8, random_state=0
    )
    genes = np.array([f"gene{i}" for i in range(16)])
    cells = np.array([f"cell{j}" for j in range(12)])
    return X, genes, cells, rows, columns


def _run(argv, capsys):
    """``(exit status, stdout, stderr)`` of ``main(argv)`` in-process."""
    status = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return status, out, err


def _run_subprocess(argv, cwd):
    result = subprocess.run(
        [sys.executable, "-m", "conjoined", *map(str, argv)],
        cwd=cwd,
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return result.returncode, result.stdout, result.stderr


def _biclusters(outdir):
    return json.loads((outdir / "biclusters.json").read_text())


def _png_size(path):
    header = path.read_bytes()[:24]
    assert header[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return struct.unpack(">II", header[16:24])


def _expected_png_size(name):
    from conjoined import plot

    function = {
        "heatmap": plot.plot_biclusters,
        "k_trace": plot.plot_k_trace,
        "theta": plot.plot_theta,
        "membership": plot.plot_membership,
    }[name]
    width, height = inspect.signature(function).parameters["figsize"].default
    return round(width * PICTURE_DPI), round(height * PICTURE_DPI)


def _assert_no_leftovers(directory, outdir_name):
    leftovers = [p.name for p in directory.iterdir() if p.name.startswith(f".{outdir_name}.")]
    assert leftovers == []


# ------------------------------------------------------------------------------------------- input formats


def _write_csv(tmp_path, X, genes, cells):
    pd.DataFrame(X, index=genes, columns=cells).to_csv(tmp_path / "m.csv")
    return [tmp_path / "m.csv"], True


def _write_tsv(tmp_path, X, genes, cells):
    pd.DataFrame(X, index=genes, columns=cells).to_csv(tmp_path / "m.tsv", sep="\t")
    return [tmp_path / "m.tsv"], True


def _write_transposed_csv(tmp_path, X, genes, cells):
    pd.DataFrame(X.T, index=cells, columns=genes).to_csv(tmp_path / "t.csv")
    return [tmp_path / "t.csv", "--transpose"], True


def _write_mtx_with_names(tmp_path, X, genes, cells):
    scipy.io.mmwrite(str(tmp_path / "m.mtx"), sp.coo_matrix(X))
    (tmp_path / "genes.txt").write_text("\n".join(genes) + "\n")
    (tmp_path / "cells.txt").write_text("\n".join(cells) + "\n")
    return [
        tmp_path / "m.mtx",
        "--row-names",
        tmp_path / "genes.txt",
        "--column-names",
        tmp_path / "cells.txt",
    ], True


def _write_10x(tmp_path, X, genes, cells):
    folder = tmp_path / "filtered_feature_bc_matrix"
    folder.mkdir()
    with gzip.open(folder / "matrix.mtx.gz", "wb") as handle:
        scipy.io.mmwrite(handle, sp.coo_matrix(X))
    with gzip.open(folder / "features.tsv.gz", "wt") as handle:
        handle.writelines(f"ENSG{i:05d}\t{gene}\tGene Expression\n" for i, gene in enumerate(genes))
    with gzip.open(folder / "barcodes.tsv.gz", "wt") as handle:
        handle.writelines(f"{cell}\n" for cell in cells)
    return [folder], True


def _write_npz(tmp_path, X, genes, cells):
    sp.save_npz(tmp_path / "m.npz", sp.csr_matrix(X))
    return [tmp_path / "m.npz"], False


def _write_h5ad_layer(tmp_path, X, genes, cells):
    counts = sp.csr_matrix(X.T.astype(np.float32))  # AnnData: cells x genes
    normalised = counts.copy()
    normalised.data = np.log1p(normalised.data / 3.0)
    adata = anndata.AnnData(X=normalised, obs=pd.DataFrame(index=cells), var=pd.DataFrame(index=genes))
    adata.layers["counts"] = counts
    adata.write_h5ad(tmp_path / "m.h5ad")
    return [tmp_path / "m.h5ad", "--layer", "counts"], True


def _write_mat(tmp_path, X, genes, cells):
    scipy.io.savemat(tmp_path / "m.mat", {"counts": sp.csc_matrix(X.astype(float)), "other": np.ones((3, 3))})
    return [tmp_path / "m.mat", "--variable", "counts"], False


WRITERS = {
    "csv": _write_csv,
    "tsv": _write_tsv,
    "csv-transposed": _write_transposed_csv,
    "mtx": _write_mtx_with_names,
    "10x": _write_10x,
    "npz": _write_npz,
    "h5ad": _write_h5ad_layer,
    "mat": _write_mat,
}


@pytest.fixture(scope="module")
def reference(planted, tmp_path_factory):
    """The fit of the planted matrix from a CSV file, the result every other format must reproduce."""
    X, genes, cells, _, _ = planted
    tmp_path = tmp_path_factory.mktemp("reference")
    (path, *_), _ = _write_csv(tmp_path, X, genes, cells)
    assert main(["fit", str(path), "-o", str(tmp_path / "out"), *FAST]) == 0
    return tmp_path / "out"


def test_reference_fit_outputs(reference, planted):
    X, genes, cells, rows, columns = planted
    for name in FIT_FILES + tuple(f"{picture}.png" for picture in PICTURES):
        assert (reference / name).stat().st_size > 0, name
    found = _biclusters(reference)
    assert found["shape"] == [16, 12]
    strongest = found["biclusters"][0]
    assert set(strongest["row_indices"]) == set(np.flatnonzero(rows[0]))
    assert set(strongest["column_indices"]) == set(np.flatnonzero(columns[0]))
    assert strongest["rows"] == genes[strongest["row_indices"]].tolist()
    assert strongest["columns"] == cells[strongest["column_indices"]].tolist()
    k, l = strongest["pair"]
    assert len(strongest["row_membership"]) == strongest["n_rows"] == 6
    assert strongest["mean_row_membership"] == pytest.approx(np.mean(strongest["row_membership"]))
    assert strongest["row_membership"] == sorted(strongest["row_membership"], reverse=True)

    memberships = pd.read_csv(reference / "row_membership.csv", index_col=0)
    assert memberships.index.tolist() == genes.tolist()
    assert memberships.columns[-1] == "label"
    assert memberships.shape[1] == found["n_row_clusters"] + 1
    np.testing.assert_allclose(memberships.iloc[:, :-1].sum(axis=1), 1.0)
    listed = memberships.loc[genes[strongest["row_indices"]], f"k{k}"]
    assert listed.tolist() == pytest.approx(strongest["row_membership"])
    column_memberships = pd.read_csv(reference / "column_membership.csv", index_col=0)
    assert column_memberships.index.tolist() == cells.tolist()
    assert column_memberships.shape[1] == found["n_column_clusters"] + 1
    theta = pd.read_csv(reference / "theta.csv", index_col=0)
    assert theta.shape == (found["n_row_clusters"], found["n_column_clusters"])
    assert theta.to_numpy().sum() == pytest.approx(1.0)
    assert theta.columns[l] == f"l{l}"

    params = json.loads((reference / "params.json").read_text())
    assert params["estimator"]["n_iter"] == 30 and params["estimator"]["random_state"] == 0
    assert params["input"]["format"] == "csv" and params["input"]["shape"] == [16, 12]
    np.testing.assert_array_equal(sp.load_npz(reference / "matrix.npz").toarray(), X)
    for picture in PICTURES:
        assert _png_size(reference / f"{picture}.png") == _expected_png_size(picture)


@pytest.mark.parametrize("fmt", [name for name in WRITERS if name != "csv"])
def test_every_input_format_gives_the_reference_result(fmt, planted, reference, tmp_path, capsys):
    X, genes, cells, _, _ = planted
    (path, *options), has_names = WRITERS[fmt](tmp_path, X, genes, cells)
    status, out, err = _run(["fit", path, "-o", tmp_path / "out", *options, *FAST, "--no-plots"], capsys)
    assert status == 0, err
    assert "K_r =" in out and "K_c =" in out
    found, expected = _biclusters(tmp_path / "out"), _biclusters(reference)
    for key in ("row_indices", "column_indices", "pair", "row_membership"):
        assert [b[key] for b in found["biclusters"]] == [b[key] for b in expected["biclusters"]], key
    if has_names:
        assert [b["rows"] for b in found["biclusters"]] == [b["rows"] for b in expected["biclusters"]]
    else:
        assert found["biclusters"][0]["rows"] == [str(i) for i in found["biclusters"][0]["row_indices"]]
    assert not list((tmp_path / "out").glob("*.png"))


def test_summary_table_lists_the_top_rows(reference, tmp_path, capsys):
    status, out, _ = _run(
        ["fit", reference / "matrix.npz", "-o", tmp_path / "again", *FAST, "--no-plots"], capsys
    )
    assert status == 0
    header = next(line for line in out.splitlines() if "top rows by membership" in line)
    first = out.splitlines()[out.splitlines().index(header) + 1].split()
    strongest = _biclusters(reference)["biclusters"][0]
    assert (
        first[0] == "0" and int(first[3]) == strongest["n_rows"] and int(first[4]) == strongest["n_columns"]
    )
    assert ", ".join(str(i) for i in strongest["row_indices"][:5]) in out


# ------------------------------------------------------------------------------------------- bad input


def _bad_files(tmp_path):
    (tmp_path / "garbled.csv").write_text("gene,a,b\nx,1,2\ny,3,oops\n")
    (tmp_path / "negative.csv").write_text("gene,a,b,c,d\nx,1,2,0,4\ny,3,0,1,2\nz,1,0,-2,5\n")
    (tmp_path / "fraction.csv").write_text("gene,a,b\nx,1,2.5\ny,3,0\n")
    (tmp_path / "header_only.csv").write_text("gene,a,b\n")
    scipy.io.mmwrite(str(tmp_path / "zeros.mtx"), sp.coo_matrix((4, 3)))
    (tmp_path / "garbled.npz").write_bytes(b"not a zip file at all")
    (tmp_path / "garbled.h5ad").write_bytes(b"\x00\x01 not hdf5")
    (tmp_path / "m.xlsx").write_bytes(b"")


BAD_INPUTS = [
    ("missing.csv", "no such file"),
    ("garbled.csv", "not numeric"),
    ("negative.csv", r"negative values.*first at \(row, col\) = \(2, 2\)"),
    ("fraction.csv", "non-integer"),
    ("header_only.csv", "no values"),
    ("zeros.mtx", "only zeros"),
    ("garbled.npz", "npz"),
    ("garbled.h5ad", "cannot read as AnnData"),
    ("m.xlsx", "unknown file type"),
]


@pytest.mark.parametrize("name, message", BAD_INPUTS)
def test_bad_input_is_one_line_exit_2_and_no_outdir(name, message, tmp_path, capsys):
    _bad_files(tmp_path)
    status, _, err = _run(["fit", tmp_path / name, "-o", tmp_path / "out", *FAST], capsys)
    assert status == 2
    assert err.count("\n") == 1 and err.startswith("conjoined: error: ")
    assert re.search(message, err), err
    assert not (tmp_path / "out").exists()
    _assert_no_leftovers(tmp_path, "out")


def test_normalised_h5ad_without_layer_says_so(planted, tmp_path, capsys):
    X, genes, cells, _, _ = planted
    (path, *_), _ = _write_h5ad_layer(tmp_path, X, genes, cells)
    status, _, err = _run(["fit", path, "-o", tmp_path / "out", *FAST], capsys)
    assert status == 2 and err.count("\n") == 1
    assert "non-integer" in err and "counts" in err
    assert not (tmp_path / "out").exists()


def test_bad_parameter_leaves_no_outdir(reference, tmp_path, capsys):
    status, _, err = _run(
        ["fit", reference / "matrix.npz", "-o", tmp_path / "new" / "out", *FAST, "--row-alpha", "-1"], capsys
    )
    assert status == 2 and "row_alpha" in err and err.count("\n") == 1
    assert not (tmp_path / "new").exists()


def test_usage_error_exits_2(capsys):
    status, _, err = _run(["fit"], capsys)
    assert status == 2 and "usage:" in err


# ------------------------------------------------------------------------------------------- OUTDIR


def test_existing_outdir_is_refused_and_untouched_then_replaced_with_force(reference, tmp_path, capsys):
    outdir = tmp_path / "out"
    outdir.mkdir()
    (outdir / "mine.txt").write_text("keep me")
    argv = ["fit", reference / "matrix.npz", "-o", outdir, *FAST, "--no-plots"]
    status, _, err = _run(argv, capsys)
    assert status == 2 and "already exists" in err and "--force" in err and err.count("\n") == 1
    assert [p.name for p in outdir.iterdir()] == ["mine.txt"]
    assert (outdir / "mine.txt").read_text() == "keep me"
    _assert_no_leftovers(tmp_path, "out")

    status, _, err = _run([*argv, "--force"], capsys)
    assert status == 0, err
    assert not (outdir / "mine.txt").exists()
    assert all((outdir / name).is_file() for name in FIT_FILES)
    _assert_no_leftovers(tmp_path, "out")


# ------------------------------------------------------------------------------------------- simulate, score


def test_simulate_fit_score_round_trip(tmp_path, capsys):
    status, out, _ = _run(["simulate", "1", "-o", tmp_path / "case1.csv", "--seed", "3"], capsys)
    assert status == 0 and "case1.truth.json" in out
    truth = json.loads((tmp_path / "case1.truth.json").read_text())
    assert truth["shape"] == [50, 50] and truth["case"] == 1 and truth["seed"] == 3
    assert truth["biclusters"][0]["row_indices"] == list(range(20))
    assert truth["biclusters"][0]["columns"][:2] == ["col0", "col1"]
    assert pd.read_csv(tmp_path / "case1.csv", index_col=0).to_numpy().sum() == 4000

    status, _, err = _run(
        ["fit", tmp_path / "case1.csv", "-o", tmp_path / "out", *FAST, "--no-plots"], capsys
    )
    assert status == 0, err
    status, out, _ = _run(["score", tmp_path / "out", tmp_path / "case1.truth.json"], capsys)
    assert status == 0
    score = float(out.split("Jaccard score:")[1].split()[0])
    assert score >= 0.9, out
    status, same, _ = _run(
        ["score", tmp_path / "out" / "biclusters.json", tmp_path / "case1.truth.json"], capsys
    )
    assert same == out
    status, out, _ = _run(["score", tmp_path / "case1.truth.json", tmp_path / "case1.truth.json"], capsys)
    assert "Jaccard score: 1.0000" in out


@pytest.mark.parametrize("suffix", [".npz", ".mtx"])
def test_simulate_sparse_formats_and_shuffle(suffix, tmp_path, capsys):
    path = tmp_path / f"case2{suffix}"
    status, _, _ = _run(["simulate", "2", "-o", path, "--seed", "1", "--shuffle"], capsys)
    assert status == 0
    X = sp.load_npz(path) if suffix == ".npz" else scipy.io.mmread(str(path))
    truth = json.loads((tmp_path / "case2.truth.json").read_text())
    assert X.shape == (20, 20) and X.sum() == 4000 and truth["shuffle"] is True
    assert sorted(len(b["row_indices"]) for b in truth["biclusters"]) == [4, 8]
    assert truth["biclusters"][0]["row_indices"] != list(range(4))  # shuffled

    status, _, err = _run(["simulate", "2", "-o", path], capsys)
    assert status == 2 and "already exists" in err
    assert _run(["simulate", "2", "-o", path, "--force"], capsys)[0] == 0
    status, _, err = _run(["simulate", "2", "-o", tmp_path / "case2.txt"], capsys)
    assert status == 2 and ".csv" in err and not (tmp_path / "case2.txt").exists()


def test_score_errors(tmp_path, capsys):
    _run(["simulate", "1", "-o", tmp_path / "a.npz", "--seed", "0"], capsys)
    _run(["simulate", "2", "-o", tmp_path / "b.npz", "--seed", "0"], capsys)
    status, _, err = _run(["score", tmp_path / "a.truth.json", tmp_path / "b.truth.json"], capsys)
    assert status == 2 and "(50, 50)" in err and "(20, 20)" in err
    status, _, err = _run(["score", tmp_path / "nothing", tmp_path / "b.truth.json"], capsys)
    assert status == 2 and "no such file" in err
    (tmp_path / "bad.json").write_text('{"shape": [2, 2]}')
    status, _, err = _run(["score", tmp_path / "bad.json", tmp_path / "b.truth.json"], capsys)
    assert status == 2 and "biclusters" in err and err.count("\n") == 1


# ------------------------------------------------------------------------------------------- plot


def test_plot_redraws_the_pictures(reference, tmp_path, capsys):
    outdir = tmp_path / "copy"
    shutil.copytree(reference, outdir)
    for picture in PICTURES:
        (outdir / f"{picture}.png").unlink()
    status, out, err = _run(["plot", outdir], capsys)
    assert status == 0, err
    for picture in PICTURES:
        path = outdir / f"{picture}.png"
        assert str(path) in out
        assert path.stat().st_size > 10_000
        assert _png_size(path) == _expected_png_size(picture)
    status, _, _ = _run(["plot", outdir, "--format", "svg"], capsys)
    assert status == 0
    assert (outdir / "heatmap.svg").read_text().lstrip().startswith("<?xml")


def test_plot_of_a_folder_that_is_not_a_fit(tmp_path, capsys):
    status, _, err = _run(["plot", tmp_path], capsys)
    assert status == 2 and "matrix.npz" in err and err.count("\n") == 1


# --------------------------------------------------------------------------------------------- Dask


@pytest.mark.parametrize(
    "options, backend, address",
    [
        ([], "local", None),
        (["--backend", "dask"], "dask", None),
        (["--address", "10.1.2.3:8786"], "dask", "10.1.2.3:8786"),
        (["--backend", "dask", "--address", "tcp://scheduler:8786"], "dask", "tcp://scheduler:8786"),
    ],
)
def test_backend_and_address_reach_the_estimator(options, backend, address, reference, tmp_path, capsys,
                                                 monkeypatch):
    fitted = []

    class Recording(cli.ConjoinedDirichletProcess):
        def fit(self, X, y=None):
            fitted.append(self.get_params())
            raise ValueError("stopped before fitting")

    monkeypatch.setattr(cli, "ConjoinedDirichletProcess", Recording)
    status, _, err = _run(["fit", reference / "matrix.npz", "-o", tmp_path / "out", *FAST, *options], capsys)
    assert status == 2 and "stopped before fitting" in err
    assert len(fitted) == 1
    assert (fitted[0]["backend"], fitted[0]["address"], fitted[0]["client"]) == (backend, address, None)
    assert not (tmp_path / "out").exists()


def test_address_with_the_local_backend_is_a_usage_error(reference, tmp_path, capsys):
    argv = ["fit", reference / "matrix.npz", "-o", tmp_path / "out", *FAST, "--backend", "local", "--address",
            "10.1.2.3:8786"]
    status, _, err = _run(argv, capsys)
    assert status == 2 and err.count("\n") == 1
    assert "10.1.2.3:8786" in err and "--backend dask" in err
    assert not (tmp_path / "out").exists()


def test_unreachable_scheduler_is_one_line_naming_the_address(reference, tmp_path, capsys):
    dask = pytest.importorskip("dask")
    pytest.importorskip("distributed")
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{probe.getsockname()[1]}"
    with dask.config.set({"distributed.comm.timeouts.connect": "2s"}):
        status, _, err = _run(["fit", reference / "matrix.npz", "-o", tmp_path / "out", *FAST, "--address",
                               address], capsys)
    assert status == 2 and err.count("\n") == 1
    assert address in err
    assert not (tmp_path / "out").exists()


def test_fit_on_a_dask_scheduler_gives_the_local_result(planted, reference, tmp_path, capsys):
    distributed = pytest.importorskip("distributed")
    X, genes, cells, _, _ = planted
    (path, *_), _ = _write_csv(tmp_path, X, genes, cells)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address=":0", scheduler_kwargs={"dashboard": False}) as cluster:
        status, _, err = _run(["fit", path, "-o", tmp_path / "out", *FAST, "--no-plots", "--address",
                               cluster.scheduler_address], capsys)
    assert status == 0, err
    found, expected = _biclusters(tmp_path / "out"), _biclusters(reference)
    assert found == expected
    params = json.loads((tmp_path / "out" / "params.json").read_text())
    assert params["estimator"]["backend"] == "dask"
    assert params["estimator"]["address"] == cluster.scheduler_address


# --------------------------------------------------------------------------------------- as a user runs it


def test_python_dash_m_fit_with_progress_bars(tmp_path):
    assert _run_subprocess(["simulate", "2", "-o", "case2.csv", "--seed", "0"], tmp_path)[0] == 0
    status, out, err = _run_subprocess(
        ["fit", "case2.csv", "-o", "out", "--n-iter", "20", "--seed", "0", "--no-plots"], tmp_path
    )
    assert status == 0, err
    assert "K_r =" in out and "top rows by membership" in out
    assert "DPMM" in err  # progress bars on stderr
    status, out, _ = _run_subprocess(["score", "out", "case2.truth.json"], tmp_path)
    assert status == 0 and "Jaccard score:" in out


def test_python_dash_m_bad_input(tmp_path):
    (tmp_path / "negative.csv").write_text("gene,a,b\nx,1,2\ny,-3,0\n")
    status, out, err = _run_subprocess(["fit", "negative.csv", "-o", "out", "--quiet"], tmp_path)
    assert status == 2 and out == ""
    assert err.count("\n") == 1 and "negative" in err and "(1, 0)" in err
    assert not (tmp_path / "out").exists()
    status, out, _ = _run_subprocess(["--help"], tmp_path)
    assert status == 0 and all(command in out for command in ("fit", "simulate", "score", "plot"))


def test_demo_runs_cdp_on_a_builtin_case_and_prints_the_score(capsys):
    assert main(["demo", "--case", "1", "--seed", "0", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "simulation case 1: 50 x 50 counts" in out
    assert "found 0:" in out and "true  0: 20 rows x 20 columns" in out
    score = float(re.search(r"Jaccard score \(the paper's\): ([0-9.]+)", out).group(1))
    assert score == pytest.approx(1.0)
