"""The ``conjoined`` command as a user runs it: every input format, bad input, OUTDIR handling, the
simulate -> fit -> score round trip and redrawn pictures. Most runs call ``main`` in-process (fast); a few run
``python -m conjoined`` in a subprocess."""

import errno
import gzip
import inspect
import io
import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp

from conjoined import CDP, cli, fit_folder
from conjoined.cli import main
from conjoined.datasets import make_biclusters_counts, make_cdp_case
from conjoined.fit_folder import PICTURE_DPI, PICTURES

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


def _run_subprocess(argv, cwd, stdout=subprocess.PIPE):
    """``(exit status, stdout, stderr)`` of ``python -m conjoined argv`` run in ``cwd``; stdout is None unless
    piped here."""
    result = subprocess.run(
        [sys.executable, "-m", "conjoined", *map(str, argv)],
        cwd=cwd,
        check=False,
        stdout=stdout,
        stderr=subprocess.PIPE,
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


def _contents(directory):
    """``{relative path: bytes}`` of every file under ``directory``."""
    return {p.relative_to(directory): p.read_bytes() for p in directory.rglob("*") if p.is_file()}


def _must_not_fit(self, X, **kwargs):
    """Stands in for ConjoinedDirichletProcess._fit (what the command calls) where it must stop before fitting."""
    raise AssertionError("the fit must not start")


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
    assert (strongest["row_clusters"], strongest["column_clusters"]) == ([k], [l])  # one planted block
    assert len(strongest["row_membership"]) == strongest["n_rows"] == 6
    assert strongest["mean_row_membership"] == pytest.approx(np.mean(strongest["row_membership"]))
    assert strongest["row_membership"] == sorted(strongest["row_membership"], reverse=True)

    memberships = pd.read_csv(reference / "row_membership.csv", index_col=0)
    assert memberships.index.tolist() == genes.tolist()
    assert memberships.columns[-2:].tolist() == ["label", "label_probability"]
    assert memberships.shape[1] == found["n_row_clusters"] + 2
    np.testing.assert_allclose(memberships.iloc[:, :-2].sum(axis=1), 1.0)
    listed = memberships.loc[genes[strongest["row_indices"]], f"k{k}"]
    assert listed.tolist() == pytest.approx(strongest["row_membership"])
    column_memberships = pd.read_csv(reference / "column_membership.csv", index_col=0)
    assert column_memberships.index.tolist() == cells.tolist()
    assert column_memberships.shape[1] == found["n_column_clusters"] + 2
    # each label's probability under the block model, as predict_*_proba gives it for the fitted matrix
    model = CDP(n_iter=30, random_state=0).fit(X)
    for table, probabilities, labels in ((memberships, model.predict_row_proba(X), model.row_labels_),
                                         (column_memberships, model.predict_column_proba(X),
                                          model.column_labels_)):
        np.testing.assert_array_equal(table["label"], labels)
        np.testing.assert_allclose(table["label_probability"], probabilities[np.arange(len(labels)), labels])
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
    if fmt in ("h5ad", "10x"):  # single-cell input: the reference's likelihoods given, not defaulted
        options += ["--row-likelihood", "poisson", "--column-likelihood", "poisson"]
    status, out, err = _run(["fit", path, "-o", tmp_path / "out", *options, *FAST, "--no-plots"], capsys)
    assert status == 0, err
    assert "K_r =" in out and "K_c =" in out and "Single-cell input" not in out
    found, expected = _biclusters(tmp_path / "out"), _biclusters(reference)
    for key in ("row_indices", "column_indices", "pair", "row_membership"):
        assert [b[key] for b in found["biclusters"]] == [b[key] for b in expected["biclusters"]], key
    if has_names:
        assert [b["rows"] for b in found["biclusters"]] == [b["rows"] for b in expected["biclusters"]]
    else:
        assert found["biclusters"][0]["rows"] == [str(i) for i in found["biclusters"][0]["row_indices"]]
    assert not list((tmp_path / "out").glob("*.png"))


@pytest.mark.parametrize("fmt", ["h5ad", "10x"])
def test_single_cell_input_reads_genes_and_cells_by_profile(fmt, planted, tmp_path, capsys):
    """As conjoined.anndata.cdp: multinomial likelihoods unless given, said after the summary and recorded."""
    X, genes, cells, _, _ = planted
    (path, *options), _ = WRITERS[fmt](tmp_path, X, genes, cells)
    status, out, err = _run(["fit", path, "-o", tmp_path / "out", *options, *FAST, "--no-plots"], capsys)
    assert status == 0, err
    assert "Single-cell input: genes and cells read by profile (row likelihood multinomial, column likelihood " \
           "multinomial)" in out
    estimator = json.loads((tmp_path / "out" / "params.json").read_text())["estimator"]
    assert (estimator["row_likelihood"], estimator["column_likelihood"]) == ("multinomial", "multinomial")
    model = CDP(n_iter=30, random_state=0, row_likelihood="multinomial", column_likelihood="multinomial").fit(X)
    found = _biclusters(tmp_path / "out")
    expected = [np.flatnonzero(rows).tolist() for rows in model.rows_]
    assert [sorted(b["row_indices"]) for b in found["biclusters"]] == expected
    status, out, _ = _run(["fit", path, "-o", tmp_path / "poisson", *options, *FAST, "--no-plots",
                           "--row-likelihood", "poisson"], capsys)
    estimator = json.loads((tmp_path / "poisson" / "params.json").read_text())["estimator"]
    assert (estimator["row_likelihood"], estimator["column_likelihood"]) == ("poisson", "multinomial")
    assert "(row likelihood poisson, column likelihood multinomial)" in out


def test_params_name_the_input_files_by_absolute_paths(planted, tmp_path, monkeypatch, capsys):
    X, genes, cells, _, _ = planted
    _write_mtx_with_names(tmp_path, X, genes, cells)
    monkeypatch.chdir(tmp_path)
    argv = ["fit", "m.mtx", "--row-names", "genes.txt", "--column-names", "cells.txt", "-o", "out/"]
    status, out, err = _run([*argv, *FAST, "--no-plots"], capsys)
    assert status == 0, err
    assert out.endswith("Results in out/\n")
    given = json.loads((tmp_path / "out" / "params.json").read_text())["input"]
    assert [given[name] for name in ("path", "row_names", "column_names")] == [
        str(tmp_path / name) for name in ("m.mtx", "genes.txt", "cells.txt")]


def test_params_name_the_mat_variable_read_even_when_chosen_alone(tmp_path, capsys):
    X, _, _ = make_cdp_case(2, random_state=0)
    scipy.io.savemat(tmp_path / "m.mat", {"documents": sp.csc_matrix(X.astype(float))})
    status, _, err = _run(["fit", tmp_path / "m.mat", "-o", tmp_path / "out", *FAST, "--no-plots"], capsys)
    assert status == 0, err
    assert json.loads((tmp_path / "out" / "params.json").read_text())["input"]["variable"] == "documents"


def test_a_first_column_of_identifiers_is_refused_until_first_column_says_which(tmp_path, capsys):
    X, _, _ = make_cdp_case(2, random_state=0)
    frame = pd.DataFrame(X, columns=[f"doc{j}" for j in range(X.shape[1])])
    frame.insert(0, "word_id", 1 + np.arange(X.shape[0]))
    frame.to_csv(tmp_path / "t.csv", index=False)
    status, _, err = _run(["fit", tmp_path / "t.csv", "-o", tmp_path / "out", *FAST, "--no-plots"], capsys)
    assert status == 2 and "the first column, 'word_id', is numeric and has a header that names identifiers" in err
    assert "--first-column names, or counts" in err and not (tmp_path / "out").exists()
    status, _, err = _run(["fit", tmp_path / "t.csv", "-o", tmp_path / "out", "--first-column", "names", *FAST,
                           "--no-plots"], capsys)
    assert status == 0, err
    given = json.loads((tmp_path / "out" / "params.json").read_text())["input"]
    assert given["first_column"] == "names" and given["shape"] == list(X.shape)
    rows = pd.read_csv(tmp_path / "out" / "row_membership.csv", dtype=str)
    assert rows.iloc[:, 0].tolist() == [str(i) for i in 1 + np.arange(X.shape[0])]


def test_save_fit_writes_the_folder_the_command_writes(reference, planted, tmp_path, capsys):
    X, genes, cells, _, _ = planted
    model = CDP(n_iter=30, random_state=0).fit(pd.DataFrame(X, index=genes, columns=cells))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning about the array's missing names
        path = fit_folder.save_fit(model, X, tmp_path / "python")  # named by the DataFrame the model was fitted on
    saved, written = _contents(path), _contents(reference)
    assert sorted(saved) == sorted(written)
    assert {name for name in saved if saved[name] != written[name]} == {Path("params.json")}
    params, fitted = (json.loads(folder.joinpath("params.json").read_text()) for folder in (path, reference))
    assert (params["command"], params["input"], params["estimator"]) == (None, None, fitted["estimator"])
    assert _run(["plot", path], capsys)[0] == 0
    assert _run(["predict", path, reference / "matrix.npz", "-o", tmp_path / "p.csv", "--side", "columns"],
                capsys)[0] == 0
    with pytest.raises(FileExistsError, match="python already exists"):
        fit_folder.save_fit(model, X, path)
    with pytest.raises(ValueError, match=r"X has shape \(16, 5\), but the model was fitted on 16 rows and 12"):
        fit_folder.save_fit(model, X[:, :5], tmp_path / "other")
    with pytest.raises(ValueError, match="model must be a fitted ConjoinedDirichletProcess"):
        fit_folder.save_fit(CDP(), X, tmp_path / "other")
    with pytest.raises(ValueError, match="row_names must hold 16 names"):
        fit_folder.save_fit(model, X, tmp_path / "other", row_names=genes[:3])
    with pytest.raises(ValueError, match="The feature names should match those that were passed during fit"):
        fit_folder.save_fit(model, pd.DataFrame(X, index=genes, columns=cells).iloc[:, ::-1], tmp_path / "other")
    changed = X.copy()
    changed[0, 0] += 1
    with pytest.raises(ValueError, match="X is not the matrix the model was fitted on"):
        fit_folder.save_fit(model, changed, tmp_path / "other")
    assert not (tmp_path / "other").exists()
    twice = genes.copy()
    twice[1] = twice[0]
    with pytest.warns(UserWarning, match="row_names"):
        fit_folder.save_fit(model, X, tmp_path / "renamed", row_names=twice, pictures=False)
    rows = pd.read_csv(tmp_path / "renamed" / "row_membership.csv", index_col=0).index
    assert rows[:3].tolist() == ["gene0", "gene0-1", "gene2"]
    # fitted on an array, saved without names: a named file's rows are not the fit's numbers, and the error says so
    unnamed = fit_folder.save_fit(CDP(n_iter=30, random_state=0).fit(X), X, tmp_path / "unnamed", pictures=False)
    pd.DataFrame(X[:, :2], index=genes, columns=["a", "b"]).to_csv(tmp_path / "named.csv")
    status, _, err = _run(["predict", unnamed, tmp_path / "named.csv", "-o", tmp_path / "n.csv"], capsys)
    assert status == 2 and "(its rows lack 16 of the 16 fitted rows, '0' among them; its columns lack" in err
    assert "; the fit's rows have no names but their numbers 0, 1, ..." in err  # the side that fits by position
    pd.DataFrame(X[:5, :2], index=genes[:5]).to_csv(tmp_path / "short_named.csv")
    status, _, err = _run(["predict", unnamed, tmp_path / "short_named.csv", "-o", tmp_path / "n.csv"], capsys)
    assert status == 2 and "its rows lack 16 of the 16 fitted rows" in err
    assert "have no names" not in err  # no side fits by position either
    pd.DataFrame(X[:, :2], columns=["a", "b"]).to_csv(tmp_path / "numbered.csv", index=False)
    assert _run(["predict", unnamed, tmp_path / "numbered.csv", "-o", tmp_path / "m.csv"], capsys)[0] == 0


def test_save_fit_leaves_matplotlibs_backend_alone(tmp_path):
    # a notebook's inline backend, here "svg", must survive a save_fit (the command alone draws with Agg)
    code = ("import conjoined, matplotlib; from conjoined.datasets import make_cdp_case; "
            "X, _, _ = make_cdp_case(1, random_state=0); model = conjoined.CDP(n_iter=20, random_state=0).fit(X); "
            "conjoined.save_fit(model, X, 'fit'); print(matplotlib.get_backend())")
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True,
                            env={**os.environ, "MPLBACKEND": "svg"})
    assert result.stdout.strip() == "svg" and (tmp_path / "fit" / "heatmap.png").is_file()


def test_predict_classifies_new_columns_and_rows_as_the_estimator_does(reference, planted, tmp_path, capsys):
    """New cells over the fitted genes, in another gene order and under new names; new genes over the fitted
    cells: the same probabilities as CDP.predict_*_proba of the same fit, with labels and biclusters."""
    X, genes, cells, rows, _ = planted
    model = CDP(n_iter=30, random_state=0).fit(X)
    order = np.random.default_rng(0).permutation(len(genes))
    new_cells = X[:, [0, 6, 11]]
    pd.DataFrame(new_cells[order], index=genes[order], columns=["a", "b", "c"]).to_csv(tmp_path / "cells.csv")
    status, out, err = _run(["predict", reference, tmp_path / "cells.csv", "-o", tmp_path / "p.csv"], capsys)
    assert status == 0, err
    assert out.startswith("3 new columns of ") and out.rstrip().endswith(f"written to {tmp_path / 'p.csv'}")
    table = pd.read_csv(tmp_path / "p.csv", index_col=0, dtype={"biclusters": str})
    K_c = model.n_column_clusters_
    assert table.index.tolist() == ["a", "b", "c"]
    assert table.columns.tolist() == [f"l{l}" for l in range(K_c)] + ["label", "label_probability", "biclusters"]
    expected = model.predict_column_proba(new_cells)
    np.testing.assert_allclose(table.iloc[:, :K_c], expected, rtol=1e-12)
    np.testing.assert_array_equal(table["label"], expected.argmax(axis=1))
    np.testing.assert_allclose(table["label_probability"], expected.max(axis=1))
    label = int(table.loc["a", "label"])
    assert str(table.loc["a", "biclusters"]) == " ".join(map(str, np.flatnonzero(
        model.bicluster_column_clusters_[:, label])))

    # a new sample holding genes the fit left out (all its genes, where the fit had the highly variable ones): they
    # are left out, with a warning, and the cells classified as above
    extra = pd.DataFrame([[5, 1, 0], [2, 2, 2]], index=["new_gene", "other"], columns=["a", "b", "c"])
    with_extra = pd.concat([pd.DataFrame(new_cells[order], index=genes[order], columns=["a", "b", "c"]), extra])
    with_extra.iloc[::-1].to_csv(tmp_path / "all_genes.csv")
    status, out, err = _run(["predict", reference, tmp_path / "all_genes.csv", "-o", tmp_path / "e.csv"], capsys)
    assert status == 0, err
    assert "all_genes.csv, its rows: 2 name(s) the fit does not have (e.g. 'other') are left out" in err
    np.testing.assert_allclose(pd.read_csv(tmp_path / "e.csv", index_col=0).iloc[:, :K_c], expected, rtol=1e-12)

    pd.DataFrame(X[[0, 9]], index=["x", "y"], columns=cells).to_csv(tmp_path / "genes.csv")
    status, out, err = _run(["predict", reference, tmp_path / "genes.csv", "-o", tmp_path / "q.csv"], capsys)
    assert status == 0, err
    table = pd.read_csv(tmp_path / "q.csv", index_col=0)
    np.testing.assert_allclose(table.iloc[:, :model.n_row_clusters_], model.predict_row_proba(X[[0, 9]]),
                               rtol=1e-12)
    assert (table.loc["x", "label"], table.loc["y", "label"]) == tuple(model.row_labels_[[0, 9]])


def test_predict_refuses_what_it_cannot_match_and_keeps_files(reference, planted, tmp_path, capsys):
    X, genes, cells, _, _ = planted
    argv = ["predict", reference, tmp_path / "in.csv", "-o", tmp_path / "p.csv"]
    pd.DataFrame(X, index=genes, columns=cells).to_csv(tmp_path / "in.csv")  # both sides are the fit's
    status, _, err = _run(argv, capsys)
    assert status == 2 and "say which are new with --side rows or --side columns" in err
    assert not (tmp_path / "p.csv").exists()
    assert _run([*argv, "--side", "columns"], capsys)[0] == 0
    status, _, err = _run(argv, capsys)
    assert status == 2 and "p.csv already exists; choose another name or use --force" in err
    status, _, err = _run(["predict", reference, tmp_path / "in.csv", "-o", tmp_path, "--force"], capsys)
    assert status == 2 and f"{tmp_path} is a directory: give the file to write" in err  # not "use --force"
    pd.DataFrame(X[:, :2].T, index=["a", "b"], columns=genes).to_csv(tmp_path / "across.csv")
    status, _, err = _run(["predict", reference, tmp_path / "across.csv", "-o", tmp_path / "a.csv"], capsys)
    assert status == 2 and "its columns hold the fitted rows: the file is laid out the other way, add --transpose" \
        in err
    assert _run(["predict", reference, tmp_path / "across.csv", "-o", tmp_path / "a.csv", "--transpose"],
                capsys)[0] == 0
    pd.DataFrame(X[1:, :2], index=genes[1:], columns=["a", "b"]).to_csv(tmp_path / "short.csv")
    status, _, err = _run(["predict", reference, tmp_path / "short.csv", "-o", tmp_path / "s.csv", "--side",
                           "columns"], capsys)
    assert status == 2 and "its rows: 1 of the fit's names missing (e.g. 'gene0')" in err
    status, _, err = _run(["predict", reference, tmp_path / "short.csv", "-o", tmp_path / "s.csv"], capsys)
    assert status == 2 and "neither do its rows (15) hold the fitted rows (16) nor its columns (2) the fitted" in err
    new = X[:, :2].copy()
    new[:, 1] = 0
    pd.DataFrame(new, index=genes, columns=["a", "b"]).to_csv(tmp_path / "zero.csv")
    status, _, err = _run(["predict", reference, tmp_path / "zero.csv", "-o", tmp_path / "z.csv"], capsys)
    assert status == 0 and "1 new column(s) of" in err and "label -1, probabilities 0" in err
    table = pd.read_csv(tmp_path / "z.csv", index_col=0)
    assert table.loc["b", "label"] == -1 and table.loc["b", "label_probability"] == 0
    status, _, err = _run(["predict", tmp_path, tmp_path / "zero.csv", "-o", tmp_path / "w.csv"], capsys)
    assert status == 2 and "matrix.npz: no such file; is" in err
    status, _, err = _run(["predict", reference, tmp_path / "zero.csv", "-o", reference / "model.npz", "--force"],
                          capsys)
    assert status == 2 and "write it outside the fit's folder" in err
    (folder,), _ = _write_10x(tmp_path, X, genes, cells)  # an input folder: no output may go inside it
    kept = (folder / "matrix.mtx.gz").read_bytes()
    status, _, err = _run(["predict", reference, folder, "-o", folder / "matrix.mtx.gz", "--side", "columns",
                           "--force"], capsys)
    assert status == 2 and f"matrix.mtx.gz is inside the input {folder}: choose another output file" in err
    assert (folder / "matrix.mtx.gz").read_bytes() == kept
    pd.DataFrame(X[:, :2], index=[f"g{i}" for i in range(16)], columns=["a", "b"]).to_csv(tmp_path / "other.csv")
    status, _, err = _run(["predict", reference, tmp_path / "other.csv", "-o", tmp_path / "o.csv"], capsys)
    assert status == 2 and ("(its rows lack 16 of the 16 fitted rows, 'gene0' among them; its columns lack 12 of "
                            "the 12 fitted columns, 'cell0' among them)") in err
    assert "have no names" not in err  # the fit's are real names
    fit = tmp_path / "fit"
    shutil.copytree(reference, fit)
    (tmp_path / "into_fit.csv").symlink_to(fit / "theta.csv")  # written through, it would replace the fit's file
    theta = (fit / "theta.csv").read_bytes()
    status, _, err = _run(["predict", fit, tmp_path / "zero.csv", "-o", tmp_path / "into_fit.csv", "--force"], capsys)
    assert status == 2 and "write it outside the fit's folder" in err and (fit / "theta.csv").read_bytes() == theta
    (fit / "params.json").write_text('{"estimator": {"row_likelihood": "nonsense"}}')
    status, _, err = _run(["predict", fit, tmp_path / "zero.csv", "-o", tmp_path / "y.csv"], capsys)
    assert status == 2 and "params.json: cannot read the fit's parameters (row_likelihood must be one of" in err
    (fit / "params.json").write_text('{"estimator": null}')
    status, _, err = _run(["predict", fit, tmp_path / "zero.csv", "-o", tmp_path / "y.csv"], capsys)
    assert status == 2 and "params.json: cannot read the fit's parameters" in err


def test_output_under_a_file_is_named_as_such(reference, tmp_path, capsys):
    (tmp_path / "afile").write_text("keep me")
    status, _, err = _run(["fit", reference / "matrix.npz", "-o", tmp_path / "afile" / "sub", *FAST, "--no-plots"],
                          capsys)
    assert status == 2 and err.endswith(f"afile/sub: {tmp_path / 'afile'} is a file, not a folder\n")
    assert (tmp_path / "afile").read_text() == "keep me"


def test_a_full_disk_while_writing_is_said_of_the_output(reference, tmp_path, capsys, monkeypatch):
    def full_disk(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")  # as a write to a full disk: no file named

    monkeypatch.setattr(fit_folder, "write_table_csv", full_disk)
    out = tmp_path / "out"
    status, _, err = _run(["fit", reference / "matrix.npz", "-o", out, *FAST, "--no-plots"], capsys)
    assert (status, err) == (2, f"conjoined: error: cannot write the results to {out}: No space left on device\n")
    assert list(tmp_path.iterdir()) == []


def test_mixtures_that_have_not_settled_are_named_with_the_option_to_raise(tmp_path, capsys):
    from sklearn.datasets import load_digits

    sp.save_npz(tmp_path / "digits.npz", sp.csr_matrix(load_digits().data.astype(np.int64)))
    with warnings.catch_warnings():
        warnings.simplefilter("always")  # as a user's shell shows them, whatever pytest's -W
        status, _, err = _run(["fit", tmp_path / "digits.npz", "-o", tmp_path / "out", "--n-iter", "100",
                               "--n-rounds", "0", "--seed", "0", "--quiet", "--no-plots"], capsys)
    assert status == 0
    assert re.search(r"^conjoined: warning: 1 of the 2 mixture fits has not settled\. Row mixture 1 of 1: .* raise "
                     r"--n-iter \(now 100\)\.$", err, re.MULTILINE), err
    mixtures = json.loads((tmp_path / "out" / "biclusters.json").read_text())["mixtures"]
    assert [(record["side"], record["settled"], record["n_samples"]) for record in mixtures] == [
        ("row", False, 50), ("column", True, 50)]
    assert mixtures[0]["change"] > 0  # still climbing (182 nats; K 106 -> 106)


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
    (tmp_path / "one_column.csv").write_text("gene,a\nx,1\ny,3\nz,2\n")
    (tmp_path / "one_row.csv").write_text("gene,a,b,c\nx,0,0,0\ny,1,2,3\nz,0,0,0\n")
    (tmp_path / "huge.csv").write_text("gene,a,b\nx,1,1e20\ny,3,4\n")
    counts = np.array([[1.0, 2.0, np.nan], [0.0, 4.0, 1.0]])  # AnnData: cells x genes
    anndata.AnnData(X=counts).write_h5ad(tmp_path / "nan.h5ad")
    truncated_10x = tmp_path / "truncated_10x"
    truncated_10x.mkdir()
    scipy.io.mmwrite(str(truncated_10x / "matrix.mtx"), sp.coo_matrix(np.ones((3, 2))))
    features = gzip.compress(b"".join(b"ENSG%05d\tgene%d\tGene Expression\n" % (i, i) for i in range(3)))
    (truncated_10x / "features.tsv.gz").write_bytes(features[:-12])


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
    ("one_column.csv", r"one_column\.csv: the matrix is 3 x 1: too narrow to bicluster"),
    ("one_row.csv", r"one_row\.csv: 1 row\(s\) and 3 column\(s\) hold counts: too few to bicluster"),
    ("huge.csv", r"huge\.csv: X holds 100,000,000,000,000,000,000 counts in total; at most 2\*\*53"),
    ("nan.h5ad", r"nan\.h5ad \(read as genes x cells\) contains non-finite .* = \(2, 0\)"),
    ("truncated_10x", r"features\.tsv\.gz: cannot read names: the \.gz file is truncated or corrupt"),
]


def test_a_bad_value_is_placed_as_the_file_holds_it_when_transposed(tmp_path, capsys):
    (tmp_path / "negative.csv").write_text("gene,a,b,c\nx,1,2,0\ny,3,0,-1\n")
    status, _, err = _run(["fit", tmp_path / "negative.csv", "--transpose", "-o", tmp_path / "out", *FAST], capsys)
    assert status == 2 and re.search(r"negative values.*first at \(row, col\) = \(1, 2\)", err), err
    assert not (tmp_path / "out").exists()


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


@pytest.mark.parametrize("options, message", [
    (["--row-alpha", "-1"], "conjoined: error: --row-alpha must be > 0, got -1.0\n"),
    (["--n-iter", "0"], "conjoined: error: --n-iter must be an integer >= 1, got 0\n"),
    (["--min-size", "0"], "conjoined: error: --min-size must be an integer >= 1, got 0\n"),
    (["--seed", "-3"], "conjoined: error: --seed must be >= 0, got -3\n"),
    (["--n-jobs", "0"], ("conjoined: error: --n-jobs must be a non-zero integer (-1: every core, -2: all but one, "
     "...), got 0\n")),
    (["--mode", "paper", "--n-rounds", "3"], ("conjoined: error: --mode paper runs the published pipeline "
     "(no conjoined rounds, mixtures started from one cluster): --n-rounds would have no effect; leave it out\n")),
    (["--mode", "paper", "--init", "one"], "): --init would have no effect; leave it out\n"),
    (["--mode", "paper", "--n-rounds", "1", "--dispersion", "none"], ("--n-rounds, --dispersion would have no "
     "effect; leave them out\n")),
])
def test_bad_parameter_is_named_by_its_option_and_leaves_no_outdir(options, message, reference, tmp_path, capsys):
    status, _, err = _run(["fit", reference / "matrix.npz", "-o", tmp_path / "new" / "out", *FAST, *options], capsys)
    assert status == 2 and err.endswith(message) and err.count("\n") == 1
    assert not (tmp_path / "new").exists()


def test_ctrl_c_while_the_results_are_kept_elsewhere_still_says_where(reference, tmp_path, capsys, monkeypatch):
    outdir = tmp_path / "out"
    outdir.mkdir()
    checks = []
    check = fit_folder.check_replaceable_fit

    def user_file_then_ctrl_c(path):
        checks.append(path)
        if len(checks) == 2:  # the check before the swap, where signals wait
            (outdir / "mine.txt").write_text("keep me")
            os.kill(os.getpid(), signal.SIGINT)
        check(path)

    monkeypatch.setattr(cli, "check_replaceable_fit", user_file_then_ctrl_c)
    status, _, err = _run(["fit", reference / "matrix.npz", "-o", outdir, *FAST, "--no-plots", "--force"], capsys)
    assert status == 130 and err.count("\n") == 1
    assert err.startswith("conjoined: interrupted after the fit: ")
    assert err.endswith(f"the results are in {outdir}.new\n")
    assert [p.name for p in outdir.iterdir()] == ["mine.txt"]
    assert sorted(p.name for p in (tmp_path / "out.new").iterdir()) == sorted(FIT_FILES)


def test_force_ignores_a_file_browsers_file_but_not_a_folder_of_that_name(reference, tmp_path, capsys):
    outdir = tmp_path / "out"
    (outdir / ".DS_Store").mkdir(parents=True)
    (outdir / ".DS_Store" / "mine.txt").write_text("keep me")
    status, _, err = _run(["fit", reference / "matrix.npz", "-o", outdir, *FAST, "--no-plots", "--force"], capsys)
    assert status == 2 and "is not the folder of an earlier fit (it holds .DS_Store)" in err
    assert (outdir / ".DS_Store" / "mine.txt").read_text() == "keep me"
    # nor a folder named as one of fit's outputs, beside an earlier fit's file
    (outdir / ".DS_Store" / "mine.txt").rename(tmp_path / "mine.txt")
    (outdir / ".DS_Store").rmdir()
    (outdir / "heatmap.png").mkdir()
    (tmp_path / "mine.txt").rename(outdir / "heatmap.png" / "mine.txt")
    (outdir / "biclusters.json").write_text("{}")
    status, _, err = _run(["fit", reference / "matrix.npz", "-o", outdir, *FAST, "--no-plots", "--force"], capsys)
    assert status == 2 and "is not the folder of an earlier fit (it holds heatmap.png)" in err
    assert (outdir / "heatmap.png" / "mine.txt").read_text() == "keep me"


def test_mode_paper_takes_the_likelihoods_of_the_refinement(reference, tmp_path, capsys):
    argv = ["fit", reference / "matrix.npz", *FAST, "--no-plots", "--mode", "paper"]
    for likelihood in ("poisson", "multinomial"):
        status, _, err = _run([*argv, "-o", tmp_path / likelihood, "--row-likelihood", likelihood,
                               "--column-likelihood", likelihood], capsys)
        assert status == 0, err
        params = json.loads((tmp_path / likelihood / "params.json").read_text())["estimator"]
        assert params["mode"] == "paper" and params["row_likelihood"] == likelihood


def test_usage_error_exits_2(capsys):
    status, _, err = _run(["fit"], capsys)
    assert status == 2 and "usage:" in err


# ------------------------------------------------------------------------------------------- OUTDIR


def test_an_outdir_through_itself_is_the_folder_itself(reference, tmp_path, capsys, monkeypatch):
    """``fit/../fit`` is ``fit``: with --force the earlier fit was moved aside, and the path through it was lost
    (the results stayed in hidden folders); without, the folder made as a parent passed for one that appeared."""
    monkeypatch.chdir(tmp_path)
    argv = ["fit", reference / "matrix.npz", *FAST, "--no-plots"]
    for outdir, more in (("fit", []), ("fit/../fit", ["--force"]), ("new/../new", [])):
        status, out, err = _run([*argv, "-o", outdir, *more], capsys)
        assert status == 0, err
        assert f"Results in {outdir}/" in out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fit", "new"]
    for name in ("fit", "new"):
        assert sorted(p.name for p in (tmp_path / name).iterdir()) == sorted(FIT_FILES)
    # through a symlink, ".." leads beside the link's target, as the shell reads the path
    (tmp_path / "deep" / "dir").mkdir(parents=True)
    (tmp_path / "link").symlink_to(tmp_path / "deep" / "dir")
    status, out, err = _run([*argv, "-o", "link/../out"], capsys)
    assert status == 0, err
    assert sorted(p.name for p in (tmp_path / "deep" / "out").iterdir()) == sorted(FIT_FILES)
    assert not (tmp_path / "out").exists()


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

    # --force replaces an earlier fit's folder, not one holding files of the user's
    status, _, err = _run([*argv, "--force"], capsys)
    assert status == 2 and err == (f"conjoined: error: {outdir} is not the folder of an earlier fit (it holds "
                                   "mine.txt): --force replaces only such a folder; choose another OUTDIR or "
                                   "remove it yourself\n")
    assert [p.name for p in outdir.iterdir()] == ["mine.txt"]
    _assert_no_leftovers(tmp_path, "out")
    (tmp_path / "notes.txt").write_text("keep me too")
    status, _, err = _run([*argv[:3], tmp_path / "notes.txt", *argv[4:], "--force"], capsys)
    assert status == 2 and "notes.txt is a file, not the folder of an earlier fit" in err
    assert (tmp_path / "notes.txt").read_text() == "keep me too"

    (outdir / "mine.txt").unlink()
    (outdir / ".DS_Store").write_bytes(b"\0")  # a file browser's, not the user's
    for outputs in ((".DS_Store",), FIT_FILES):  # an empty folder, then the folder of the fit just written
        assert sorted(p.name for p in outdir.iterdir()) == sorted(outputs)
        status, _, err = _run([*argv, "--force"], capsys)
        assert status == 0, err
        assert all((outdir / name).is_file() for name in FIT_FILES)
        _assert_no_leftovers(tmp_path, "out")


def test_a_file_of_the_users_written_into_outdir_during_the_fit_is_kept(reference, tmp_path, capsys,
                                                                         monkeypatch):
    outdir = tmp_path / "out"
    outdir.mkdir()
    fit = cli.ConjoinedDirichletProcess._fit

    def fit_while_the_user_writes(model, X, **kwargs):
        (outdir / "mine.txt").write_text("keep me")
        return fit(model, X, **kwargs)

    monkeypatch.setattr(cli.ConjoinedDirichletProcess, "_fit", fit_while_the_user_writes)
    status, _, err = _run(["fit", reference / "matrix.npz", "-o", outdir, *FAST, "--no-plots", "--force"], capsys)
    assert status == 2 and err.count("\n") == 1
    assert err.endswith(f"{outdir} is left as it is, and the results are in {outdir}.new\n")
    assert [p.name for p in outdir.iterdir()] == ["mine.txt"]
    assert sorted(p.name for p in (tmp_path / "out.new").iterdir()) == sorted(FIT_FILES)


@pytest.mark.parametrize(
    "outdir, options, message",
    [
        ("data/m.csv", [], "must not be, or hold, the input data/m.csv"),
        ("data", [], "must not be, or hold, the input data/m.csv"),
        ("names", ["--row-names", "names/genes.txt"], "must not be, or hold, the input names/genes.txt"),
        (".", [], "must not be the current directory or a folder holding it"),
        ("..", [], "must not be the current directory or a folder holding it"),
        ("", [], "the output directory name is empty"),
    ],
)
def test_outdir_replacing_an_input_or_the_current_directory_is_refused_before_the_fit(
    outdir, options, message, planted, tmp_path, capsys, monkeypatch
):
    X, genes, cells, _, _ = planted
    (tmp_path / "data").mkdir()
    _write_csv(tmp_path / "data", X, genes, cells)
    (tmp_path / "names").mkdir()
    (tmp_path / "names" / "genes.txt").write_text("\n".join(genes) + "\n")
    before = _contents(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(cli.ConjoinedDirichletProcess, "_fit", _must_not_fit)
    argv = ["fit", "data/m.csv", "-o", outdir, "--force", *options, *FAST, "--no-plots"]
    status, _, err = _run(argv, capsys)
    assert status == 2 and err.count("\n") == 1 and err.startswith("conjoined: error: ")
    assert message in err, err
    assert _contents(tmp_path) == before


def test_outdir_inside_an_input_folder_is_refused_before_the_fit(planted, tmp_path, capsys, monkeypatch):
    X, genes, cells, _, _ = planted
    (folder,), _ = _write_10x(tmp_path, X, genes, cells)
    before = _contents(tmp_path)
    monkeypatch.setattr(cli.ConjoinedDirichletProcess, "_fit", _must_not_fit)
    for given in (folder, folder / "matrix.mtx.gz"):  # the folder, or its matrix file, which reads the folder
        status, _, err = _run(["fit", given, "-o", folder / "results", *FAST, "--no-plots"], capsys)
        assert status == 2 and err.count("\n") == 1
        assert f"must not be inside the input folder {folder}" in err, err
        assert _contents(tmp_path) == before


def test_checkpoint_resumes_and_its_seed_is_recorded(planted, reference, tmp_path, capsys):
    """--checkpoint without --seed: the folder keeps the seed the first run drew, params.json records it, the
    same command resumes from the folder (finished: the same fit), and --seed with that seed repeats it without
    the folder."""
    quick = ["--n-iter", "30", "--quiet", "--no-plots"]
    matrix, folder = reference / "matrix.npz", tmp_path / "ckpt"
    assert _run(["fit", matrix, "-o", tmp_path / "a", "--checkpoint", folder, *quick], capsys)[0] == 0
    seed = json.loads((folder / "seed.json").read_text())["entropy"]
    params = json.loads((tmp_path / "a" / "params.json").read_text())["estimator"]
    assert params["random_state"] == seed and params["checkpoint"] == str(folder)
    assert _run(["fit", matrix, "-o", tmp_path / "b", "--checkpoint", folder, *quick], capsys)[0] == 0
    assert _run(["fit", matrix, "-o", tmp_path / "c", "--seed", str(seed), *quick], capsys)[0] == 0
    first = (tmp_path / "a" / "biclusters.json").read_bytes()
    assert (tmp_path / "b" / "biclusters.json").read_bytes() == first
    assert (tmp_path / "c" / "biclusters.json").read_bytes() == first
    (tenx,), _ = _write_10x(tmp_path, *planted[:3])
    for given, inside, what in ((matrix, tmp_path / "d" / "ckpt", "the output directory"),
                                (tenx, tenx / "ckpt", f"the input {tenx}")):
        status, _, err = _run(["fit", given, "-o", tmp_path / "d", "--checkpoint", inside, *quick], capsys)
        assert status == 2 and f"must not be, or be inside, {what}" in err, err
        assert not (tmp_path / "d").exists() and not inside.exists()


def test_out_of_memory_is_one_line_and_no_outdir(reference, tmp_path, capsys, monkeypatch):
    def fit(self, X, **kwargs):
        raise MemoryError("Unable to allocate 7.28 TiB for an array with shape (1000000000000,)")

    monkeypatch.setattr(cli.ConjoinedDirichletProcess, "_fit", fit)
    status, _, err = _run(["fit", reference / "matrix.npz", "-o", tmp_path / "out", *FAST], capsys)
    assert status == 2 and err.count("\n") == 1
    assert err.startswith("conjoined: error: out of memory") and "7.28 TiB" in err
    assert not (tmp_path / "out").exists()
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


def test_score_matches_named_items_by_name_and_unnamed_ones_by_position(tmp_path, capsys):
    """A fit of the simulated matrix with its rows in another order finds the true biclusters, named as the truth
    names them: scored by name, 1.0 (it was 0.1 by position). A fit of the matrix without names lists its items by
    position, and is scored so."""
    assert _run(["simulate", "3", "-o", tmp_path / "case3.csv", "--seed", "7"], capsys)[0] == 0
    frame = pd.read_csv(tmp_path / "case3.csv", index_col=0)
    frame.sample(frac=1, random_state=1).to_csv(tmp_path / "reordered.csv")
    sp.save_npz(tmp_path / "unnamed.npz", sp.csr_matrix(frame.to_numpy()))
    truth = tmp_path / "case3.truth.json"
    for name, expected in (("reordered.csv", "rows by name and columns by name"),
                           ("unnamed.npz", "rows by position and columns by position")):
        status, _, err = _run(["fit", tmp_path / name, "-o", tmp_path / name.split(".")[0], "--seed", "0",
                               "--no-plots"], capsys)
        assert status == 0, err
        status, out, _ = _run(["score", tmp_path / name.split(".")[0], truth], capsys)
        assert status == 0 and out.strip() == f"Jaccard score: 1.0000 (4 found, 4 true bicluster(s); {expected})"


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


def test_simulate_on_a_full_disk_names_both_files_and_keeps_the_old_ones(tmp_path, capsys, monkeypatch):
    (tmp_path / "t.csv").write_text("old matrix\n")

    def full_disk(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")  # as a write to a full disk: no file named

    monkeypatch.setattr(cli, "write_json", full_disk)
    status, _, err = _run(["simulate", "2", "-o", tmp_path / "t.csv", "--force"], capsys)
    assert (status, err) == (2, f"conjoined: error: cannot write {tmp_path / 't.csv'} and "
                                f"{tmp_path / 't.truth.json'}: No space left on device\n")
    assert [p.name for p in tmp_path.iterdir()] == ["t.csv"] and (tmp_path / "t.csv").read_text() == "old matrix\n"


def test_simulate_checks_both_names_before_replacing_either(tmp_path, capsys):
    (tmp_path / "t.csv").write_text("old matrix\n")
    (tmp_path / "t.truth.json").mkdir()
    status, _, err = _run(["simulate", "2", "-o", tmp_path / "t.csv", "--force"], capsys)
    assert status == 2 and err.count("\n") == 1 and "t.truth.json is a directory" in err
    assert (tmp_path / "t.csv").read_text() == "old matrix\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.csv", "t.truth.json"]


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


def _biclusters_file(path, shape, row_indices, column_indices=(0, 1)):
    """Write a biclusters/truth file with one bicluster."""
    bicluster = {"row_indices": row_indices, "column_indices": list(column_indices)}
    path.write_text(json.dumps({"shape": shape, "biclusters": [bicluster]}))
    return path


@pytest.mark.parametrize(
    "shape, row_indices, message",
    [
        ([20, 20], [-1], r"'row_indices': index -1 is outside 0\.\.19"),
        ([20, 20], [3, 20], r"'row_indices': index 20 is outside 0\.\.19"),
        ([20, 20], [1.0], r"'row_indices' must be a list of integers"),
        ([20, 20], [True], r"'row_indices' must be a list of integers"),
        ([20.7, 20], [1], r"'shape' must be a list of 2 integers >= 1, got \[20\.7, 20\]"),
        ([1e12, 20], [1], r"'shape' must be a list of 2 integers >= 1"),
        ([20], [1], r"'shape' must be a list of 2 integers >= 1"),
    ],
)
def test_score_refuses_bad_shapes_and_indices(shape, row_indices, message, tmp_path, capsys):
    truth = _biclusters_file(tmp_path / "truth.json", [20, 20], [1, 2])
    found = _biclusters_file(tmp_path / "found.json", shape, row_indices)
    status, out, err = _run(["score", found, truth], capsys)
    assert status == 2 and out == "" and err.count("\n") == 1
    assert str(found) in err and re.search(message, err), err


def test_score_of_a_huge_shape_allocates_only_the_listed_indices(tmp_path, capsys):
    shape = [10**12, 20]
    found = _biclusters_file(tmp_path / "found.json", shape, [5, 10**12 - 1])
    truth = _biclusters_file(tmp_path / "truth.json", shape, [5, 10**12 - 1])
    status, out, err = _run(["score", found, truth], capsys)
    assert status == 0, err
    assert "Jaccard score: 1.0000" in out


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
    # no date and no random ids: drawn again a second later, every picture is the same file
    drawn = []
    for attempt in range(2):
        time.sleep(1.1 * attempt)  # a date would change
        for fmt in ("svg", "pdf"):
            assert _run(["plot", outdir, "--format", fmt], capsys)[0] == 0
        drawn.append([(outdir / f"{picture}.{fmt}").read_bytes() for picture in PICTURES for fmt in ("svg", "pdf")])
    assert drawn[0] == drawn[1]
    # a fit's folder with redrawn pictures is still one that --force replaces
    assert fit_folder.check_replaceable_fit(outdir) is None


def test_plot_replaces_the_pictures_all_together_or_not_at_all(reference, tmp_path, capsys, monkeypatch):
    """Each picture was replaced as soon as it was drawn: a failure in the last one (or an interruption) left a
    folder of pictures redrawn at the new --dpi beside old ones."""
    outdir = tmp_path / "copy"
    shutil.copytree(reference, outdir)
    before = _contents(outdir)

    def failing(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(fit_folder, "plot_membership", failing)  # the last picture drawn
    status, _, err = _run(["plot", outdir, "--dpi", "60"], capsys)
    assert status == 130 and "interrupted" in err
    assert _contents(outdir) == before
    monkeypatch.undo()
    assert _run(["plot", outdir, "--dpi", "60"], capsys)[0] == 0
    assert all(_contents(outdir)[Path(f"{picture}.png")] != before[Path(f"{picture}.png")] for picture in PICTURES)


def test_plot_reads_a_model_saved_before_biclusters_joined_blocks(reference, tmp_path, capsys):
    outdir = tmp_path / "copy"
    shutil.copytree(reference, outdir)
    with np.load(outdir / "model.npz") as saved:
        joined = ("bicluster_row_clusters_", "bicluster_column_clusters_")
        arrays = {name: saved[name] for name in saved.files if name not in joined}
    np.savez(outdir / "model.npz", **arrays)
    status, _, err = _run(["plot", outdir], capsys)
    assert status == 0, err
    model = fit_folder._load_model(outdir / "model.npz")
    for side, column in (("row", 0), ("column", 1)):
        masks = getattr(model, f"bicluster_{side}_clusters_")
        np.testing.assert_array_equal([np.flatnonzero(m) for m in masks], model.bicluster_pairs_[:, [column]])


@pytest.mark.parametrize("layout", ["block labels", "one partition"])
def test_plot_reads_a_model_saved_when_row_labels_were_the_mixtures(layout, reference, tmp_path, capsys):
    """model.npz once held the mixtures' partitions as row_labels_ and the refined ones as block_row_labels_
    (before that, one partition for both): row_labels_ is read as the refined partition, and the mixtures' as
    mixture_row_labels_."""
    outdir = tmp_path / "copy"
    shutil.copytree(reference, outdir)
    with np.load(outdir / "model.npz") as saved:
        arrays = dict(saved)
    refined = {side: arrays.pop(f"{side}_labels_") for side in ("row", "column")}
    for side in ("row", "column"):  # the fit's are the refined ones: others, to tell a swap
        del arrays[f"mixture_{side}_labels_"]
    mixtures = {side: np.where(labels >= 0, labels.max() - labels, -1) for side, labels in refined.items()}
    assert all((mixtures[side] != refined[side]).any() for side in mixtures)
    for side in ("row", "column"):
        if layout == "block labels":
            arrays[f"{side}_labels_"], arrays[f"block_{side}_labels_"] = mixtures[side], refined[side]
        else:
            arrays[f"{side}_labels_"] = refined[side]
    np.savez(outdir / "model.npz", **arrays)
    assert _run(["plot", outdir], capsys)[0] == 0
    model = fit_folder._load_model(outdir / "model.npz")
    for side in ("row", "column"):
        np.testing.assert_array_equal(getattr(model, f"{side}_labels_"), refined[side])
        np.testing.assert_array_equal(getattr(model, f"mixture_{side}_labels_"),
                                      mixtures[side] if layout == "block labels" else refined[side])


@pytest.mark.parametrize("missing, suffix, message", [
    ({"matplotlib", "pandas"}, ".csv", "reading .csv/.tsv files needs pandas and the pictures matplotlib: pip install "
     'pandas matplotlib (or pip install "conjoined[all]"), or pass --no-plots for the first alone'),
    ({"matplotlib", "pandas"}, ".npz", "the pictures need matplotlib: pip install matplotlib, or pass --no-plots"),
    ({"matplotlib"}, ".csv", "the pictures need matplotlib: pip install matplotlib, or pass --no-plots"),
])
def test_fit_with_the_library_alone_names_every_package_it_lacks(missing, suffix, message, tmp_path, capsys,
                                                                  monkeypatch):
    """A .csv fit on the bare library asked for matplotlib, then, once installed, for pandas: one line names
    both (a .npz file needs no pandas)."""
    import importlib.util

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *args: None if name in missing
                        else find_spec(name, *args))
    path = tmp_path / f"counts{suffix}"
    path.write_text("a,b\n1,2\n") if suffix == ".csv" else sp.save_npz(path, sp.csr_matrix(np.eye(3)))
    status, _, err = _run(["fit", path, "-o", tmp_path / "out"], capsys)
    assert status == 2 and err == f"conjoined: error: {message}\n"
    assert not (tmp_path / "out").exists()


def test_plot_without_matplotlib_says_how_to_install_it(reference, tmp_path, capsys, monkeypatch):
    outdir = tmp_path / "copy"
    shutil.copytree(reference, outdir)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib raises ImportError
    before = _contents(outdir)
    status, _, err = _run(["plot", outdir], capsys)
    assert status == 2 and err == "conjoined: error: the pictures need matplotlib: pip install matplotlib\n"
    assert _contents(outdir) == before


def test_plot_of_a_folder_that_is_not_a_fit(tmp_path, capsys):
    status, _, err = _run(["plot", tmp_path], capsys)
    assert status == 2 and "matrix.npz" in err and err.count("\n") == 1


def test_plot_of_a_model_that_is_no_archive_says_so(reference, tmp_path, capsys):
    outdir = tmp_path / "copy"
    shutil.copytree(reference, outdir)
    (outdir / "model.npz").write_bytes(b"overwritten by something else")
    status, _, err = _run(["plot", outdir], capsys)
    assert status == 2 and err.count("\n") == 1
    assert "cannot read the saved fit (not a zip archive" in err and "pickle" not in err, err


@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda arrays: arrays.pop("row_k_trace"), "missing row_k_trace"),
        (lambda arrays: arrays.update(row_names=arrays["row_names"][:-1]), r"row_names has shape \(15,\)"),
        (lambda arrays: arrays.update(rows_=arrays["rows_"][:, :-1]), r"rows_ has shape \(\d+, 15\)"),
        (lambda arrays: arrays.update(theta_=arrays["theta_"].astype(str)), "theta_ is a 2-d array of <U"),
    ],
)
def test_plot_of_a_damaged_model_names_the_file_and_the_array(damage, message, reference, tmp_path, capsys):
    outdir = tmp_path / "copy"
    shutil.copytree(reference, outdir)
    with np.load(outdir / "model.npz") as saved:
        arrays = dict(saved)
    damage(arrays)
    np.savez(outdir / "model.npz", **arrays)
    before = _contents(outdir)
    status, _, err = _run(["plot", outdir], capsys)
    assert status == 2 and err.count("\n") == 1
    assert str(outdir / "model.npz") in err and re.search(message, err), err
    assert _contents(outdir) == before


def test_plot_interrupted_mid_save_keeps_the_previous_picture(reference, tmp_path, capsys, monkeypatch):
    import matplotlib.figure

    outdir = tmp_path / "copy"
    shutil.copytree(reference, outdir)
    before = _contents(outdir)

    def interrupted_save(figure, fname, **kwargs):
        with open(fname, "wb") as handle:
            handle.write(b"\x89PNG half a picture")
        raise KeyboardInterrupt

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", interrupted_save)
    status, _, err = _run(["plot", outdir], capsys)
    assert status == 130 and err == "conjoined: interrupted\n"
    assert _contents(outdir) == before
    assert sorted(p.name for p in outdir.iterdir()) == sorted(p.name for p in reference.iterdir())


@pytest.mark.parametrize("signum, status", [(signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_terminated_mid_write_leaves_nothing(planted, tmp_path, capsys, monkeypatch, signum, status):
    # what `timeout` or a batch scheduler sends, here while the results are being written
    X, genes, cells, _, _ = planted
    (path, *_), _ = _write_csv(tmp_path, X, genes, cells)
    written = fit_folder.write_table_csv

    def terminated_write(target, *args, **kwargs):
        written(target, *args, **kwargs)
        os.kill(os.getpid(), signum)

    monkeypatch.setattr(fit_folder, "write_table_csv", terminated_write)
    previous = signal.signal(signum, signal.SIG_DFL)  # as in a shell; under nohup SIGHUP starts ignored
    try:
        assert _run(["fit", path, "-o", tmp_path / "out" / "run", *FAST], capsys) == (
            status, "", f"conjoined: terminated by signal {int(signum)}\n")
        assert signal.getsignal(signum) == signal.SIG_DFL
    finally:
        signal.signal(signum, previous)
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]


def test_an_ignored_hangup_is_left_ignored(planted, tmp_path, capsys, monkeypatch):
    # `nohup conjoined fit ...` must survive the terminal closing
    X, genes, cells, _, _ = planted
    (path, *_), _ = _write_csv(tmp_path, X, genes, cells)
    written = fit_folder.write_table_csv

    def hung_up_write(target, *args, **kwargs):
        written(target, *args, **kwargs)
        os.kill(os.getpid(), signal.SIGHUP)

    monkeypatch.setattr(fit_folder, "write_table_csv", hung_up_write)
    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        status, _, err = _run(["fit", path, "-o", tmp_path / "run", *FAST], capsys)
        assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
    finally:
        signal.signal(signal.SIGHUP, previous)
    assert status == 0, err
    assert (tmp_path / "run" / "biclusters.json").is_file()


@pytest.mark.parametrize("interruption, status, message", [
    (KeyboardInterrupt(), 130, "conjoined: interrupted\n"),
    (cli._Terminated(signal.SIGTERM), 143, "conjoined: terminated by signal 15\n"),
])
def test_a_signal_wrapped_by_compiled_code_is_still_an_interruption(planted, tmp_path, capsys, monkeypatch,
                                                                     interruption, status, message):
    # numba calling back into Python turns the handler's exception into the context of a SystemError
    X, genes, cells, _, _ = planted
    (path, *_), _ = _write_csv(tmp_path, X, genes, cells)

    def wrapped(*args, **kwargs):
        try:
            raise interruption
        except BaseException as exc:
            raise SystemError("CPUDispatcher(<function _sweep>) returned a result with an exception set") from exc

    monkeypatch.setattr(fit_folder, "write_table_csv", wrapped)
    assert _run(["fit", path, "-o", tmp_path / "run", *FAST], capsys) == (status, "", message)
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]


def test_a_signal_during_the_swap_of_force_waits_until_the_results_are_in_place(planted, tmp_path, capsys,
                                                                                  monkeypatch):
    from conjoined import io

    X, genes, cells, _, _ = planted
    (path, *_), _ = _write_csv(tmp_path, X, genes, cells)
    outdir = tmp_path / "run"
    outdir.mkdir()
    (outdir / "biclusters.json").write_text("{}")  # an earlier fit's
    replace = os.replace

    def terminated_replace(source, target):
        replace(source, target)
        if Path(source) == outdir:  # between moving the old results aside and the new ones in
            os.kill(os.getpid(), signal.SIGTERM)

    monkeypatch.setattr(io.os, "replace", terminated_replace)
    previous = signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        status, _, err = _run(["fit", path, "-o", outdir, "--force", *FAST], capsys)
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert (status, err) == (143, "conjoined: terminated by signal 15\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([path.name, "run"])
    assert (outdir / "biclusters.json").read_text() != "{}" and (outdir / "model.npz").is_file()


@pytest.mark.parametrize(
    "dpi, message",
    [
        ("0", "0 is outside 10..1200"),
        ("5", "5 is outside 10..1200"),  # matplotlib fails to draw 6-point text below 6 dpi
        ("100000", "100000 is outside 10..1200"),
        ("high", "invalid int value: 'high'"),
    ],
)
def test_plot_dpi_outside_its_range_is_a_usage_error(dpi, message, reference, tmp_path, capsys):
    outdir = tmp_path / "copy"
    shutil.copytree(reference, outdir)
    before = _contents(outdir)
    status, _, err = _run(["plot", outdir, "--dpi", dpi], capsys)
    assert status == 2 and f"argument --dpi: {message}" in err
    assert _contents(outdir) == before
    status, out, _ = _run(["plot", "--help"], capsys)
    assert status == 0 and re.search(r"10\s+to\s+1200", out)


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
        def _fit(self, X, **kwargs):
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
    assert "row mixture 1" in err and "refinement" in err  # progress bars on stderr
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


@pytest.mark.parametrize("unbuffered", ["1", ""])
def test_stdout_closed_after_a_fit_is_not_reported_as_a_failure(unbuffered, reference, tmp_path, monkeypatch):
    """``conjoined fit ... | true``: the fit is written in full and the closed pipe ends the command quietly,
    with the status of a SIGPIPE. Unbuffered, the summary's first print fails; buffered, the final flush
    does."""
    monkeypatch.setenv("PYTHONUNBUFFERED", unbuffered)
    read_end, write_end = os.pipe()
    os.close(read_end)  # nobody reads the command's stdout
    try:
        status, _, err = _run_subprocess(
            ["fit", reference / "matrix.npz", "-o", "out", *FAST, "--no-plots"], tmp_path, stdout=write_end
        )
    finally:
        os.close(write_end)
    assert (status, err) == (141, "")
    assert all((tmp_path / "out" / name).is_file() for name in FIT_FILES)


@pytest.mark.parametrize("stderr", ["closed pipe", "full disk"])
def test_a_stderr_that_cannot_be_written_does_not_stop_the_fit(stderr, reference, tmp_path):
    """Progress lines and warnings are side output: ``2>&1 | head -1`` once the reader has gone, or
    ``2>/dev/full``, stopped the fit at its first progress line with nothing written."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    target = write_end if stderr == "closed pipe" else open("/dev/full", "w")  # noqa: SIM115
    try:
        result = subprocess.run(
            [sys.executable, "-m", "conjoined", "fit", str(reference / "matrix.npz"), "-o", "out", "--n-iter", "30",
             "--seed", "0", "--no-plots"],  # with progress lines
            cwd=tmp_path, check=False, stdout=subprocess.PIPE, stderr=target, text=True, timeout=120,
        )
    finally:
        os.close(write_end)
        if stderr != "closed pipe":
            target.close()
    assert result.returncode == 0
    assert "top rows by membership" in result.stdout
    assert all((tmp_path / "out" / name).is_file() for name in FIT_FILES)


def test_the_commands_stderr_is_judged_by_the_stream_it_wraps():
    """A Jupyter kernel's stream (``%run -m conjoined``) still gets tqdm's widget behind the command's
    stderr, and a stream that is full for now (EAGAIN) loses that text only, not the descriptor."""
    from conjoined import _progress

    OutStream = type("OutStream", (), {"__module__": "ipykernel.iostream"})
    assert _progress._interactive(cli._SideOutput(OutStream()))
    assert not _progress._interactive(cli._SideOutput(io.StringIO()))

    class Full(io.StringIO):
        def write(self, text):
            raise BlockingIOError(errno.EAGAIN, "Resource temporarily unavailable")

        def fileno(self):
            raise AssertionError("the descriptor must be left as it is")

    assert cli._SideOutput(Full()).write("a line\n") == len("a line\n")


def test_a_pipe_broken_during_the_fit_is_an_error(reference, tmp_path, capsys, monkeypatch):
    """A BrokenPipeError from elsewhere (a worker's connection) is a failure, not a closed stdout."""

    def broken(self, X, **kwargs):
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(cli.ConjoinedDirichletProcess, "_fit", broken)
    status, _, err = _run(["fit", reference / "matrix.npz", "-o", tmp_path / "out", *FAST], capsys)
    assert status == 2 and "Broken pipe" in err
    assert not (tmp_path / "out").exists()


def test_importing_the_package_loads_neither_numba_nor_scikit_learn(tmp_path):
    code = "import sys, conjoined; print(sorted(m for m in ('numba', 'sklearn', 'scipy') if m in sys.modules))"
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True)
    assert result.stdout == "[]\n"


def test_the_command_ignores_ctrl_c_once_done(tmp_path):
    """Once the command has returned, its outputs are whole: a Ctrl-C while the interpreter shuts down must not
    kill the process by SIGINT (a status that says nothing was written). ``run`` (the console script) ignores it
    then; ``main``, which Python code and interactive sessions call, leaves SIGINT alone."""
    code = ("import signal, sys; sys.argv = ['conjoined', '--version']; import conjoined.__main__ as command; "
            "command.main(); print(signal.getsignal(signal.SIGINT) is signal.SIG_IGN); "
            "command.run(); print(signal.getsignal(signal.SIGINT) is signal.SIG_IGN)")
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True)
    version = f"conjoined {cli.__version__}"
    assert result.stdout.splitlines() == [version, "False", version, "True"]


def test_ctrl_c_while_the_command_loads_is_one_line(capsys, monkeypatch):
    """The ``conjoined`` entry point loads the command's modules inside the call: a Ctrl-C then (numba and
    scikit-learn take a second or two) ends it as a Ctrl-C during the run does, without a traceback."""
    import conjoined.__main__

    class InterruptedLoad:
        def find_spec(self, name, path=None, target=None):
            if name == "conjoined.cli":
                raise KeyboardInterrupt
            return None

    monkeypatch.delitem(sys.modules, "conjoined.cli")
    monkeypatch.setattr(sys, "meta_path", [InterruptedLoad(), *sys.meta_path])
    assert conjoined.__main__.main(["demo"]) == 130
    assert capsys.readouterr() == ("", "conjoined: interrupted\n")


@pytest.mark.parametrize("argv", [["demo", "--seed", "-1"], ["simulate", "2", "-o", "never.csv", "--seed", "-1"]])
def test_a_negative_seed_is_named_by_its_option(argv, capsys):
    status, _, err = _run(argv, capsys)
    assert status == 2 and err == "conjoined: error: --seed must be >= 0, got -1\n"


def test_demo_runs_cdp_on_a_builtin_case_and_prints_the_score(capsys):
    assert main(["demo", "--case", "1", "--seed", "0", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "simulation case 1: 50 x 50 counts" in out
    assert "found 0:" in out and "true  0: 20 rows x 20 columns" in out
    score = float(re.search(r"Jaccard score \(the paper's\): ([0-9.]+)", out).group(1))
    assert score == pytest.approx(1.0)


def test_holdout_option(reference, tmp_path, capsys):
    status, _, err = _run(["fit", reference / "matrix.npz", "-o", tmp_path / "held", *FAST, "--no-plots",
                           "--holdout", "0.5"], capsys)
    assert status == 0, err
    params = json.loads((tmp_path / "held" / "params.json").read_text())["estimator"]
    assert params["holdout"] == 0.5
    status, _, err = _run(["fit", reference / "matrix.npz", "-o", tmp_path / "bad", *FAST, "--no-plots",
                           "--holdout", "1.5"], capsys)
    assert status == 2 and err.startswith("conjoined: error: --holdout must be a share") and err.count("\n") == 1
    assert not (tmp_path / "bad").exists()
