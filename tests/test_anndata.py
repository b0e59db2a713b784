"""conjoined.anndata.cdp: results in obs/var/obsm/varm/uns, .h5ad round trip, copy semantics, bad input."""

import json
import sys
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

from conjoined.cdp import ConjoinedDirichletProcess
from conjoined.datasets import make_biclusters_counts

anndata = pytest.importorskip("anndata")
pd = pytest.importorskip("pandas")

from conjoined.anndata import SINGLE_CELL_DEFAULTS, cdp, fitted_view, predict_cells, predict_genes
from conjoined.cdp import AllZeroWarning

PARAMS = {"n_iter": 30, "random_state": 0}


@pytest.fixture
def planted():
    """AnnData of 12 cells x 16 genes (sparse counts) with one bicluster: genes 0-5 x cells 0-4."""
    X, rows, columns = make_biclusters_counts(
        (16, 12), [(slice(0, 6), slice(0, 5))], 3000, 0.8, random_state=0
    )
    adata = anndata.AnnData(
        X=sp.csr_matrix(X.T.astype(np.float32)),
        obs=pd.DataFrame(index=[f"cell{j}" for j in range(12)]),
        var=pd.DataFrame(index=[f"gene{i}" for i in range(16)]),
    )
    return adata, X, rows[0], columns[0]


def _reference_model(X):
    return ConjoinedDirichletProcess(**SINGLE_CELL_DEFAULTS, **PARAMS).fit(X)


def test_results_match_the_estimator(planted):
    adata, X, planted_genes, planted_cells = planted
    assert cdp(adata, **PARAMS) is None
    model = _reference_model(X)

    cells, genes = adata.obs["cdp_cluster"], adata.var["cdp_cluster"]
    assert isinstance(cells.dtype, pd.CategoricalDtype)
    assert list(cells.cat.categories) == [str(l) for l in range(model.n_column_clusters_)]
    assert list(genes.cat.categories) == [str(k) for k in range(model.n_row_clusters_)]
    # the clusters whose topics the memberships are: the partitions the biclusters are read from
    np.testing.assert_array_equal(cells.cat.codes, model.column_labels_)
    np.testing.assert_array_equal(genes.cat.codes, model.row_labels_)
    np.testing.assert_array_equal(adata.obsm["cdp_membership"], model.column_membership_)
    np.testing.assert_array_equal(adata.varm["cdp_membership"], model.row_membership_)
    np.testing.assert_array_equal(adata.obsm["cdp_biclusters"], model.columns_.T)
    np.testing.assert_array_equal(adata.varm["cdp_biclusters"], model.rows_.T)
    for probability, proba, labels in ((adata.obs["cdp_probability"], model.predict_column_proba(X),
                                        model.column_labels_),
                                       (adata.var["cdp_probability"], model.predict_row_proba(X),
                                        model.row_labels_)):
        np.testing.assert_allclose(probability, proba[np.arange(len(labels)), labels])

    stored = adata.uns["cdp"]
    table = stored["biclusters"]
    assert list(table.columns) == ["k", "l", "gene_clusters", "cell_clusters", "strength", "n_genes", "n_cells"]
    np.testing.assert_array_equal(table[["k", "l"]].to_numpy(), model.bicluster_pairs_)
    for side, masks in (("gene", model.bicluster_row_clusters_), ("cell", model.bicluster_column_clusters_)):
        assert list(table[f"{side}_clusters"]) == [" ".join(map(str, np.flatnonzero(m))) for m in masks]
    np.testing.assert_allclose(table["strength"], model.bicluster_strength_)
    strongest = table.index[0]
    assert set(stored["bicluster_genes"][strongest]) == {f"gene{i}" for i in np.flatnonzero(planted_genes)}
    assert set(stored["bicluster_cells"][strongest]) == {f"cell{j}" for j in np.flatnonzero(planted_cells)}
    k = table.loc[strongest, "k"]
    gene_membership = adata.varm["cdp_membership"][:, k]
    listed = adata.var_names.get_indexer(stored["bicluster_genes"][strongest])
    assert np.all(np.diff(gene_membership[listed]) <= 0)  # highest membership first
    np.testing.assert_array_equal(stored["theta"], model.theta_)
    assert (
        dict(zip(stored["gene_k_posterior"]["K"], stored["gene_k_posterior"]["probability"]))
        == model.row_k_posterior_
    )
    np.testing.assert_array_equal(stored["cell_k_trace"], model.column_dpmm_.n_clusters_trace_)
    assert stored["params"]["n_iter"] == 30 and stored["params"]["random_state"] == 0
    assert stored["params"]["use_raw"] is False
    assert "z_min" not in stored["params"]  # None is left out: .h5ad cannot hold it


def _assert_same_results(a, b, key="cdp"):
    for frame in ("obs", "var"):
        pd.testing.assert_series_equal(
            getattr(a, frame)[f"{key}_cluster"], getattr(b, frame)[f"{key}_cluster"]
        )
    for store in ("obsm", "varm"):
        for name in (f"{key}_membership", f"{key}_biclusters"):
            np.testing.assert_array_equal(getattr(a, store)[name], getattr(b, store)[name])
    ua, ub = a.uns[key], b.uns[key]
    assert sorted(ua) == sorted(ub)
    pd.testing.assert_frame_equal(ua["biclusters"], ub["biclusters"], check_dtype=False)
    for name in ("bicluster_genes", "bicluster_cells"):
        assert sorted(ua[name]) == sorted(ub[name])
        for b_index in ua[name]:
            assert list(ua[name][b_index]) == list(ub[name][b_index])
    for name in ("gene_k_posterior", "cell_k_posterior"):
        for field in ("K", "probability"):
            np.testing.assert_array_equal(ua[name][field], ub[name][field])
    for name in ("theta", "gene_k_trace", "cell_k_trace"):
        np.testing.assert_array_equal(ua[name], ub[name])
    for side in ("cell_classifier", "gene_classifier"):
        assert sorted(ua[side]) == sorted(ub[side])
        for name in ua[side]:
            np.testing.assert_array_equal(ua[side][name], ub[side][name])
    assert ua["params"] == ub["params"]


def test_h5ad_round_trip(planted, tmp_path):
    adata, X, _, _ = planted
    cdp(adata, **PARAMS)
    adata.write_h5ad(tmp_path / "a.h5ad")
    back = anndata.read_h5ad(tmp_path / "a.h5ad")
    _assert_same_results(adata, back)

    view, model = fitted_view(back), _reference_model(X)
    for side in ("row", "column"):
        np.testing.assert_array_equal(getattr(view, f"{side}_labels_"), getattr(model, f"{side}_labels_"))
    for name in (
        "rows_",
        "columns_",
        "bicluster_pairs_",
        "theta_",
        "row_membership_",
        "column_membership_",
    ):
        np.testing.assert_array_equal(getattr(view, name), getattr(model, name), err_msg=name)
    for side in ("row", "column"):
        joined = [np.flatnonzero(m).tolist() for m in getattr(model, f"bicluster_{side}_clusters_")]
        assert [np.flatnonzero(m).tolist() for m in getattr(view, f"bicluster_{side}_clusters_")] == joined
    assert view.n_row_clusters_ == model.n_row_clusters_
    assert view.column_k_posterior_ == model.column_k_posterior_
    np.testing.assert_array_equal(view.row_dpmm_.n_clusters_trace_, model.row_dpmm_.n_clusters_trace_)
    # a table stored before biclusters joined blocks: each bicluster its pair's clusters alone
    back.uns["cdp"]["biclusters"] = back.uns["cdp"]["biclusters"].drop(columns=["gene_clusters", "cell_clusters"])
    old = fitted_view(back)
    for side, column in (("row", 0), ("column", 1)):
        masks = getattr(old, f"bicluster_{side}_clusters_")
        np.testing.assert_array_equal([np.flatnonzero(m) for m in masks], model.bicluster_pairs_[:, [column]])


@pytest.mark.parametrize("seed", [0, 1])
def test_cells_are_read_by_profile_whatever_their_depth(seed):
    """Two cell types whose library sizes spread 15-fold: the wrapper's multinomial defaults find the two types;
    CDP's Poisson defaults, asked for by name, cut them by depth."""
    rng = np.random.default_rng(seed)
    types = np.repeat([0, 1], 40)
    profiles = rng.dirichlet(np.ones(60), size=2)
    depths = np.exp(rng.uniform(np.log(200), np.log(3000), types.size)).astype(np.int64)
    counts = np.stack([rng.multinomial(depth, profiles[t]) for depth, t in zip(depths, types)])
    adata = anndata.AnnData(X=sp.csr_matrix(counts.astype(np.float32)))

    cdp(adata, n_iter=60, random_state=0)
    assert {k: adata.uns["cdp"]["params"][k] for k in SINGLE_CELL_DEFAULTS} == dict(SINGLE_CELL_DEFAULTS)
    found = adata.obs["cdp_cluster"].cat.codes.to_numpy()
    assert len(set(found)) == 2 and np.array_equal(found == found[0], types == 0)

    cdp(adata, n_iter=60, random_state=0, key_added="poisson", row_likelihood="poisson",
        column_likelihood="poisson")
    assert adata.uns["poisson"]["params"]["column_likelihood"] == "poisson"
    assert adata.obs["poisson_cluster"].cat.categories.size > 4


def test_copy_semantics_and_key_added(planted):
    adata, _, _, _ = planted
    before = (adata.obs.columns.tolist(), adata.var.columns.tolist(), list(adata.obsm), list(adata.uns))
    result = cdp(adata, key_added="run1", copy=True, **PARAMS)
    assert isinstance(result, anndata.AnnData) and result is not adata
    assert (
        adata.obs.columns.tolist(),
        adata.var.columns.tolist(),
        list(adata.obsm),
        list(adata.uns),
    ) == before
    assert "run1_cluster" in result.obs and "run1" in result.uns and "cdp" not in result.uns

    assert cdp(adata, key_added="run1", **PARAMS) is None
    _assert_same_results(result, adata, key="run1")


def test_a_run_that_fails_after_the_fit_leaves_the_anndata_as_it_was(planted, monkeypatch):
    adata, _, _, _ = planted
    adata = cdp(adata, key_added="run", copy=True, **PARAMS)
    before = adata.copy()

    def interrupted(self, X):
        raise KeyboardInterrupt

    monkeypatch.setattr(ConjoinedDirichletProcess, "predict_row_proba", interrupted)
    with pytest.raises(KeyboardInterrupt):
        cdp(adata, key_added="second", **{**PARAMS, "random_state": 1})
    assert list(adata.obs) == list(before.obs) and list(adata.var) == list(before.var)
    assert list(adata.obsm) == list(before.obsm) and list(adata.uns) == list(before.uns)
    _assert_same_results(before, adata, key="run")


def test_dense_and_layer_give_the_same_result_and_sparse_stays_sparse(planted, monkeypatch):
    adata, _, _, _ = planted
    seen = []
    original_fit = ConjoinedDirichletProcess._fit

    def recording_fit(self, X, **kwargs):
        seen.append((sp.issparse(X), X.shape))
        return original_fit(self, X, **kwargs)

    monkeypatch.setattr(ConjoinedDirichletProcess, "_fit", recording_fit)
    cdp(adata, **PARAMS)
    dense = anndata.AnnData(
        X=np.zeros(adata.shape),
        obs=adata.obs[[]].copy(),
        var=adata.var[[]].copy(),
        layers={"counts": adata.X.toarray()},
    )
    cdp(dense, layer="counts", **PARAMS)
    assert seen == [(True, (16, 12)), (False, (16, 12))]
    pd.testing.assert_series_equal(dense.obs["cdp_cluster"], adata.obs["cdp_cluster"])
    np.testing.assert_array_equal(dense.obsm["cdp_membership"], adata.obsm["cdp_membership"])
    assert dense.uns["cdp"]["params"]["layer"] == "counts"


def test_use_raw_restricted_to_var_names(planted):
    adata, _, _, _ = planted
    extra = anndata.AnnData(
        X=sp.hstack([adata.X, sp.csr_matrix(np.ones((12, 2), dtype=np.float32))]).tocsr(),
        obs=adata.obs[[]].copy(),
        var=pd.DataFrame(index=[*adata.var_names, "extra0", "extra1"]),
    )
    log_normalised = adata.copy()
    log_normalised.X = log_normalised.X.log1p()
    log_normalised.raw = extra
    cdp(log_normalised, use_raw=True, **PARAMS)
    cdp(adata, **PARAMS)
    np.testing.assert_array_equal(log_normalised.varm["cdp_membership"], adata.varm["cdp_membership"])
    assert log_normalised.uns["cdp"]["params"]["use_raw"] is True


def test_set_aside_cells_are_missing_and_survive_h5ad(planted, tmp_path):
    adata, _, _, _ = planted
    X = adata.X.toarray()
    X[3] = 0
    adata.X = sp.csr_matrix(X)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cdp(adata, **PARAMS)
    said = [w for w in caught if "all-zero" in str(w.message) or "set aside" in str(w.message)]
    assert [str(w.message) for w in said] == [
        "0 all-zero gene(s) and 1 all-zero cell(s) in adata.X are set aside: their cdp_cluster is missing"]
    assert said[0].filename == __file__  # pointed at the caller's line
    assert adata.obs["cdp_cluster"].isna().tolist() == [j == 3 for j in range(12)]
    assert adata.obs["cdp_probability"].isna().tolist() == [j == 3 for j in range(12)]
    adata.write_h5ad(tmp_path / "a.h5ad")
    back = anndata.read_h5ad(tmp_path / "a.h5ad")
    assert back.obs["cdp_cluster"].isna().tolist() == [j == 3 for j in range(12)]
    assert fitted_view(back).column_labels_[3] == -1


def test_non_count_layer_is_a_clear_error(planted):
    adata, _, _, _ = planted
    adata.layers["counts"] = adata.X.copy()
    adata.layers["lognorm"] = adata.X.log1p()
    with pytest.raises(
        ValueError,
        match=r"adata\.layers\['lognorm'\] contains non-integer values.*first at "
        r"\(row, col\) = \(\d+, \d+\).*raw counts.*'counts'",
    ):
        cdp(adata, layer="lognorm", **PARAMS)
    adata.X = adata.X.log1p()
    with pytest.raises(ValueError, match=r"adata\.X contains non-integer.*pass layer="):
        cdp(adata, **PARAMS)
    # only what holds counts is offered: not 'lognorm', not a log-normalised .raw
    adata.raw = adata.copy()
    with pytest.raises(ValueError, match=r"layers of counts: 'counts'\)$"):
        cdp(adata, **PARAMS)
    adata.raw = anndata.AnnData(adata.layers["counts"].copy(), obs=adata.obs[[]], var=adata.var[[]])
    del adata.layers["counts"]
    with pytest.raises(ValueError, match=r"no other layer holds counts\); adata\.raw holds counts \(use_raw=True\)"):
        cdp(adata, **PARAMS)
    adata.layers["counts"] = adata.raw.X.copy()
    adata.raw = None
    negative = adata.layers["counts"].copy()
    negative.data[0] = -1
    adata.layers["negative"] = negative
    with pytest.raises(ValueError, match="negative"):
        cdp(adata, layer="negative", **PARAMS)
    with pytest.raises(ValueError, match="no layer 'spliced'; layers: .*'counts'"):
        cdp(adata, layer="spliced", **PARAMS)
    with pytest.raises(ValueError, match="not both"):
        cdp(adata, layer="counts", use_raw=True, **PARAMS)
    with pytest.raises(ValueError, match="adata.raw is None"):
        cdp(adata, use_raw=True, **PARAMS)
    assert "cdp" not in adata.uns and "cdp_cluster" not in adata.obs


@pytest.mark.parametrize("options, message", [
    ({"key_added": None}, "key_added must be a non-empty str"),
    ({"key_added": 3}, "key_added must be a non-empty str"),
    ({"key_added": ""}, "key_added must be a non-empty str"),
    ({"key_added": "a/b"}, "key_added must be a non-empty str without '/'"),
    ({"use_raw": "no"}, "use_raw must be True or False"),
    ({"copy": "no"}, "copy must be True or False"),
])
def test_bad_options_are_refused_before_writing(planted, tmp_path, options, message):
    adata, _, _, _ = planted
    with pytest.raises(ValueError, match=message):
        cdp(adata, **options, **PARAMS)
    assert list(adata.obs.columns) == [] and list(adata.uns) == []
    adata.write_h5ad(tmp_path / "a.h5ad")


@pytest.mark.parametrize("sparse", [True, False])
def test_a_backed_anndata_is_read_into_memory(planted, tmp_path, sparse):
    adata, _, _, _ = planted
    if not sparse:
        adata.X = adata.X.toarray()
    adata.write_h5ad(tmp_path / "a.h5ad")
    reference = cdp(adata, copy=True, **PARAMS)
    backed = anndata.read_h5ad(tmp_path / "a.h5ad", backed="r")
    copied = cdp(backed, copy=True, **PARAMS)
    assert not copied.isbacked and "cdp_cluster" not in backed.obs
    _assert_same_results(reference, copied)
    assert cdp(backed, **PARAMS) is None
    _assert_same_results(reference, backed)


def test_a_view_of_a_backed_anndata_is_refused_before_the_fit(planted, tmp_path, monkeypatch):
    adata, _, _, _ = planted
    adata.write_h5ad(tmp_path / "a.h5ad")
    backed = anndata.read_h5ad(tmp_path / "a.h5ad", backed="r")
    monkeypatch.setattr(ConjoinedDirichletProcess, "_fit", lambda *args, **kwargs: pytest.fail("no fit"))
    with pytest.raises(ValueError, match="a view of a backed AnnData, which cannot be written into: pass copy=True"):
        cdp(backed[:8], **PARAMS)


def test_items_the_holdout_sets_aside_are_named_as_genes_and_cells(planted):
    adata, _, _, _ = planted
    X = adata.X.toarray()
    X[:, 3] = 0
    X[0, 3] = 1  # gene 3: one count, which the holdout may leave on either side
    adata.X = sp.csr_matrix(X)
    for seed in range(20):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = cdp(adata, copy=True, holdout=0.5, n_iter=30, random_state=seed)
        said = [str(w.message) for w in caught if "holdout=0.5 left" in str(w.message)]
        if said:
            assert said[0].startswith("holdout=0.5 left ") and " gene(s) and " in said[0]
            assert said[0].endswith("cell(s) without counts to fit the partitions on: they are set aside and their "
                                    "cdp_cluster is missing")
            assert result.var["cdp_cluster"].isna().any() or result.obs["cdp_cluster"].isna().any()
            return
    pytest.fail("no seed left gene 3 without counts to fit on")


def test_repeated_names_are_said_at_the_fit(planted):
    adata, _, _, _ = planted
    adata.obs_names = ["cell0"] * 2 + list(adata.obs_names[2:])
    with pytest.warns(UserWarning, match=r"adata.obs_names are not unique \(e.g. 'cell0'\).*obs_names_make_unique"):
        cdp(adata, **PARAMS)


def test_a_run_without_a_seed_records_the_one_it_drew(planted):
    adata, _, _, _ = planted
    cdp(adata, n_iter=30)
    seed = adata.uns["cdp"]["params"]["random_state"]
    assert isinstance(seed, int)
    again = cdp(adata, copy=True, n_iter=30, random_state=seed)
    _assert_same_results(adata, again)


def test_a_run_with_a_checkpoint_and_no_seed_records_the_folders(planted, tmp_path):
    adata, _, _, _ = planted
    resumable = cdp(adata, copy=True, n_iter=30, checkpoint=tmp_path / "ckpt")
    seed = resumable.uns["cdp"]["params"]["random_state"]
    assert seed == json.loads((tmp_path / "ckpt" / "seed.json").read_text())["entropy"]
    assert resumable.uns["cdp"]["params"].pop("checkpoint") == str(tmp_path / "ckpt")
    _assert_same_results(resumable, cdp(adata, copy=True, n_iter=30, random_state=seed))


def test_an_unknown_parameter_is_named_with_the_call(planted):
    adata, _, _, _ = planted
    with pytest.raises(TypeError, match=r"conjoined\.anndata\.cdp\(\) got 'n_iters', not a parameter of "
                                        r"conjoined\.CDP \(its parameters: a_c, a_r, "):
        cdp(adata, n_iters=30)


def test_too_few_cells_are_named_as_cells(planted):
    adata, _, _, _ = planted
    with pytest.raises(ValueError, match=r"1 of 1 cell\(s\) \(obs\) and \d+ of 16 gene\(s\) \(var\).*at least 2"):
        cdp(adata[:1].copy(), **PARAMS)


def test_fitted_view_of_a_subset_keeps_the_stored_clusters(planted):
    adata, _, _, _ = planted
    cdp(adata, **PARAMS)
    cells = adata.obs["cdp_cluster"]
    # drop every cell of the lowest cluster: the copy drops its category, which shifts the others' codes
    subset = adata[cells != cells.cat.categories[0]].copy()
    subset.obs.loc[subset.obs_names[0], "cdp_cluster"] = None
    assert len(subset.obs["cdp_cluster"].cat.categories) < len(cells.cat.categories)
    expected = np.array([-1] + [int(v) for v in subset.obs["cdp_cluster"].iloc[1:]])
    np.testing.assert_array_equal(fitted_view(subset).column_labels_, expected)
    assert expected[1:].min() >= 1


def test_fitted_view_without_results(planted):
    adata, _, _, _ = planted
    with pytest.raises(KeyError, match="run conjoined.anndata.cdp"):
        fitted_view(adata)


def test_clear_message_without_anndata(planted, monkeypatch):
    adata, _, _, _ = planted
    monkeypatch.setitem(sys.modules, "anndata", None)
    with pytest.raises(ImportError, match=r"needs anndata and pandas: pip install anndata pandas"):
        cdp(adata, **PARAMS)


def test_mixtures_that_have_not_settled_are_named_in_genes_and_cells():
    from sklearn.datasets import load_digits

    from conjoined.dpmm.diagnostics import ChainNotSettledWarning

    adata = anndata.AnnData(sp.csr_matrix(load_digits().data.astype(np.float32)))  # 1,797 "cells" x 64 "genes"
    with pytest.warns(ChainNotSettledWarning) as caught:
        cdp(adata, n_rounds=0, n_iter=100, random_state=0)
    chain = [w for w in caught if issubclass(w.category, ChainNotSettledWarning)]
    assert len(chain) == 1 and chain[0].filename == __file__
    assert str(chain[0].message).startswith("1 of the 2 mixture fits has not settled. Cell mixture 1 of 1: ")


def _cells(X, cells, genes=None):
    """AnnData of the columns ``cells`` of genes x cells counts ``X`` (cells x genes, sparse float32)."""
    genes = np.arange(X.shape[0]) if genes is None else genes
    return anndata.AnnData(X=sp.csr_matrix(X[np.ix_(genes, cells)].T.astype(np.float32)),
                           obs=pd.DataFrame(index=[f"cell{j}" for j in cells]),
                           var=pd.DataFrame(index=[f"gene{i}" for i in genes]))


@pytest.fixture
def halves():
    """Genes x cells counts (16 x 24) with one bicluster, genes 0-5 x cells 0-9; the reference AnnData (even
    cells, fitted) and the new cells (odd ones), with the CDP fitted to the even cells."""
    X, _, _ = make_biclusters_counts((16, 24), [(slice(0, 6), slice(0, 10))], 6000, 0.8, random_state=0)
    reference = _cells(X, np.arange(0, 24, 2))
    cdp(reference, **PARAMS)
    return X, reference, _reference_model(X[:, ::2])


def test_new_cells_get_the_estimators_probabilities_with_genes_matched_by_name(halves, tmp_path):
    X, reference, model = halves
    kept = reference.copy()
    genes = np.r_[np.arange(15, -1, -1), 16]  # reversed, and one gene the reference lacks
    X_more = np.vstack([X, np.full((1, 24), 7)])
    new = _cells(X_more, np.arange(1, 24, 2), genes)
    assert predict_cells(new, reference) is None

    expected = model.predict_column_proba(X[:, 1::2])
    np.testing.assert_allclose(new.obsm["cdp_cluster_probability"], expected, rtol=1e-12)
    labels = model.predict_columns(X[:, 1::2])
    np.testing.assert_array_equal(new.obs["cdp_cluster"].cat.codes, labels)
    assert list(new.obs["cdp_cluster"].cat.categories) == [str(l) for l in range(model.n_column_clusters_)]
    np.testing.assert_allclose(new.obs["cdp_probability"], expected[np.arange(12), labels])
    np.testing.assert_array_equal(new.obsm["cdp_biclusters"], model.bicluster_column_clusters_[:, labels].T)
    # the planted cells 1, 3, .., 9 in the planted bicluster, the others in none
    assert new.obsm["cdp_biclusters"].any(axis=1).tolist() == [j < 10 for j in range(1, 24, 2)]
    _assert_same_results(reference, kept)  # the reference is not changed

    reference.write_h5ad(tmp_path / "reference.h5ad")
    again = predict_cells(new, anndata.read_h5ad(tmp_path / "reference.h5ad"), key_added="mapped", copy=True)
    np.testing.assert_array_equal(again.obsm["mapped_cluster_probability"], new.obsm["cdp_cluster_probability"])
    assert "mapped_cluster" not in new.obs


def test_new_cells_without_counts_in_the_fitted_genes_are_missing(halves):
    X, reference, _ = halves
    X = X.copy()
    X[:, 3] = 0
    new = _cells(X, np.arange(1, 24, 2))
    with pytest.warns(AllZeroWarning, match="1 new cell.*no counts in the reference's genes"):
        predict_cells(new, reference)
    assert new.obs["cdp_cluster"].isna().tolist() == [j == 3 for j in range(1, 24, 2)]
    assert new.obs["cdp_probability"].isna().tolist() == [j == 3 for j in range(1, 24, 2)]
    assert not new.obsm["cdp_biclusters"][1].any() and not new.obsm["cdp_cluster_probability"][1].any()


def test_new_cells_bad_input_is_a_clear_error(halves):
    X, reference, _ = halves
    new = _cells(X, np.arange(1, 24, 2))
    with pytest.raises(ValueError, match=r"1 of the reference's 16 genes are not in adata.X's genes \(e.g. 'gene4'"
                                         r".*put back as zeros"):
        predict_cells(new[:, [i for i in range(16) if i != 4]].copy(), reference)
    with pytest.raises(ValueError, match=r"16 of the reference's 16 genes are not in adata.X's genes.*The fitted "
                                         r"genes name adata.X's cells: an AnnData holds cells x genes, and this one "
                                         r"genes x cells \(pass adata.T\)"):
        predict_cells(new.T.copy(), reference)
    duplicated = new.copy()
    duplicated.var_names = ["gene0"] + list(new.var_names[1:-1]) + ["gene0"]
    with pytest.raises(ValueError, match="'gene0' names more than one of adata.X's genes"):
        predict_cells(duplicated, reference)
    with pytest.raises(ValueError, match=r"reference.var\['cdp_cluster'\] is not what conjoined.anndata.cdp wrote: "
                                         r"16 genes in its \d+ clusters then, 15 now"):
        predict_cells(new, reference[:, 1:].copy())
    with pytest.raises(KeyError, match="reference.uns has no 'other'"):
        predict_cells(new, reference, key="other")
    older = reference.copy()
    del older.uns["cdp"]["cell_classifier"]
    with pytest.raises(KeyError, match="older version of conjoined"):
        predict_cells(new, older)
    without = reference.copy()
    del without.var["cdp_cluster"]
    with pytest.raises(KeyError, match="reference.var has no 'cdp_cluster'"):
        predict_cells(new, without)
    lognorm = new.copy()
    lognorm.X = lognorm.X.log1p()
    with pytest.raises(ValueError, match="adata.X contains non-integer.*raw counts"):
        predict_cells(lognorm, reference)
    with pytest.raises(TypeError, match="reference must be an anndata.AnnData"):
        predict_cells(new, X)
    with pytest.raises(ValueError, match="key_added must be a non-empty str"):
        predict_cells(new, reference, key_added="a/b")
    with pytest.raises(ValueError, match="^key must be a non-empty str"):
        predict_cells(new, reference, key="a/b")
    assert list(new.obs.columns) == [] and list(new.obsm) == []


def test_new_cells_never_overwrite_results_of_cdp(halves):
    X, reference, _ = halves
    kept = reference.copy()
    with pytest.raises(ValueError, match="adata.uns holds 'cdp', results of conjoined.anndata.cdp"):
        predict_cells(reference, reference)
    _assert_same_results(reference, kept)
    predict_cells(reference, reference, key_added="again")  # the user's choice: new keys beside the fit's
    _assert_same_results(reference, kept)
    np.testing.assert_array_equal(reference.obs["again_cluster"], reference.obs["cdp_cluster"])


def test_new_genes_beside_a_copy_of_the_fit(halves):
    """The tutorial's recipe: predict_genes(adata.raw.to_adata(), adata), the copy holding the fit's results for
    its cells and none for its genes; another fit's results, or the fitted genes' own, are still refused."""
    reference = halves[1].copy()
    reference.raw = reference.copy()
    all_genes = reference.raw.to_adata()
    del all_genes.var["cdp_cluster"]  # .raw set before the fit, as scanpy's workflows set it, has no gene results
    predict_genes(all_genes, reference)
    np.testing.assert_array_equal(all_genes.obs["cdp_cluster"], reference.obs["cdp_cluster"])  # left as it was
    assert all_genes.var["cdp_cluster"].notna().all()
    with pytest.raises(ValueError, match="adata.uns holds 'cdp', results of conjoined.anndata.cdp"):
        predict_genes(all_genes, reference)  # now its genes have clusters that would be replaced
    other = reference.raw.to_adata()
    del other.var["cdp_cluster"]
    other.uns["cdp"] = {**other.uns["cdp"], "theta": other.uns["cdp"]["theta"] + 1}
    with pytest.raises(ValueError, match="adata.uns holds 'cdp', results of conjoined.anndata.cdp"):
        predict_genes(other, reference)


def test_a_copy_of_the_fit_keeps_its_fitted_genes_results_and_survives_h5ad(halves, tmp_path):
    """In a copy of the fitted AnnData the fitted genes keep the fit's clusters, probabilities and biclusters,
    whatever the classifier makes of them (here a bicluster gene whose counts the copy lost), and only the
    genes beyond the fit are classified; a copy read back from .h5ad (strings and scalars of other types) is
    still the reference's copy. Before: every gene was classified again, and a fitted gene could be written
    into another cluster than the one uns's biclusters list it in."""
    X, reference, _ = halves
    extra = anndata.AnnData(X=sp.csr_matrix(X[:2, ::2].T.astype(np.float32)), obs=reference.obs[[]].copy(),
                            var=pd.DataFrame(index=["new0", "new1"]))  # two more genes over the same cells
    raw = anndata.concat([anndata.AnnData(reference.X, obs=reference.obs[[]], var=reference.var[[]]), extra],
                         axis=1)
    reference.raw = raw
    reference.write_h5ad(tmp_path / "reference.h5ad")
    bicluster_gene = reference.var_names[np.asarray(reference.varm["cdp_biclusters"])[:, 0]][0]
    for holder in (reference, anndata.read_h5ad(tmp_path / "reference.h5ad")):
        all_genes = holder.raw.to_adata()
        counts = all_genes.X.tolil()
        counts[:, all_genes.var_names.get_loc(bicluster_gene)] = 0  # nothing to classify it by
        all_genes.X = counts.tocsr()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", AllZeroWarning)  # the emptied gene: no counts to classify it by
            predict_genes(all_genes, reference)
        fitted = all_genes[:, reference.var_names]
        np.testing.assert_array_equal(fitted.var["cdp_cluster"], reference.var["cdp_cluster"])
        np.testing.assert_array_equal(fitted.var["cdp_probability"], reference.var["cdp_probability"])
        np.testing.assert_array_equal(fitted.varm["cdp_biclusters"], reference.varm["cdp_biclusters"])
        assert all_genes.var.loc[["new0", "new1"], "cdp_cluster"].tolist() == [reference.var["cdp_cluster"].iloc[0],
                                                                                reference.var["cdp_cluster"].iloc[1]]
        with pytest.raises(ValueError, match="items classified after the fit"):
            fitted_view(all_genes)


def test_renamed_clusters_are_read_by_their_codes_and_named_in_the_new_items(halves):
    X, reference, model = halves
    new = _cells(X, np.arange(1, 24, 2))
    expected = predict_cells(new, reference, copy=True)
    names = [f"type{l}" for l in range(model.n_column_clusters_)]
    reference.obs["cdp_cluster"] = reference.obs["cdp_cluster"].cat.rename_categories(names)
    reference.var["cdp_cluster"] = reference.var["cdp_cluster"].cat.rename_categories(
        [f"programme{k}" for k in range(model.n_row_clusters_)])
    predict_cells(new, reference)
    assert list(new.obs["cdp_cluster"].cat.categories) == names
    np.testing.assert_array_equal(new.obs["cdp_cluster"].cat.codes, expected.obs["cdp_cluster"].cat.codes)
    np.testing.assert_array_equal(new.obsm["cdp_cluster_probability"], expected.obsm["cdp_cluster_probability"])
    np.testing.assert_array_equal(fitted_view(reference).row_labels_, model.row_labels_)
    # numbered from 1: renamed, read by the codes as well
    reference.var["cdp_cluster"] = reference.var["cdp_cluster"].cat.rename_categories(
        [str(k + 1) for k in range(model.n_row_clusters_)])
    np.testing.assert_array_equal(fitted_view(reference).row_labels_, model.row_labels_)
    np.testing.assert_array_equal(predict_cells(new, reference, copy=True).obsm["cdp_cluster_probability"],
                                  expected.obsm["cdp_cluster_probability"])
    # renamed, then reordered: the codes no longer follow the clusters, which their sizes tell
    reference.var["cdp_cluster"] = reference.var["cdp_cluster"].cat.reorder_categories(
        [str(k + 1) for k in range(model.n_row_clusters_)][::-1])
    with pytest.raises(ValueError, match="'cdp_cluster': its clusters do not count up to the fit's cluster sizes"):
        predict_cells(new, reference)
    with pytest.raises(ValueError, match="do not count up to the fit's cluster sizes"):
        fitted_view(reference)


def test_clusters_renumbered_after_the_fit_are_refused(halves):
    """Numbers swapped (by size, say): read by value, they would name the wrong clusters; their sizes tell."""
    _, reference, model = halves
    sizes = np.bincount(model.column_labels_)
    assert sizes[0] != sizes[1]
    reference.obs["cdp_cluster"] = reference.obs["cdp_cluster"].cat.rename_categories({"0": "1", "1": "0"})
    with pytest.raises(ValueError, match=r"\[7, 5\] items now, \[5, 7\] at the fit\): renumbered"):
        fitted_view(reference)
    with pytest.warns(UserWarning, match="do not count up.*the new cells' clusters are named by their numbers"):
        predict_cells(_cells(*halves[:1], np.arange(1, 24, 2)), reference, copy=True)


def test_numbered_clusters_are_read_by_value_whatever_the_order_of_the_categories(halves):
    """The numbers cdp wrote, sorted as strings (pandas' astype) or reordered: read by value, and the new items
    named by number; renamed and then subset: refused for the side that classifies, numbers for the other."""
    X, reference, model = halves
    new = _cells(X, np.arange(1, 24, 2))
    expected = predict_cells(new, reference, copy=True)
    for side, frame in (("row", "var"), ("column", "obs")):
        column = getattr(reference, frame)["cdp_cluster"]
        getattr(reference, frame)["cdp_cluster"] = column.cat.reorder_categories(list(column.cat.categories)[::-1])
        np.testing.assert_array_equal(getattr(fitted_view(reference), f"{side}_labels_"),
                                      getattr(model, f"{side}_labels_"))
    predict_cells(new, reference)
    np.testing.assert_array_equal(new.obs["cdp_cluster"].astype(str), expected.obs["cdp_cluster"].astype(str))
    reference.obs["cdp_cluster"] = reference.obs["cdp_cluster"].astype(str).astype("category")
    np.testing.assert_array_equal(fitted_view(reference).column_labels_, model.column_labels_)

    renamed = reference.copy()
    renamed.obs["cdp_cluster"] = reference.obs["cdp_cluster"].cat.rename_categories(
        lambda name: f"type{name}")
    subset = renamed[renamed.obs["cdp_cluster"] != "type0"].copy()  # the category "type0" dropped
    with pytest.warns(UserWarning, match="cannot be matched to the fit's clusters; the new cells' clusters are "
                                         "named by their numbers"):
        named = predict_cells(new, subset, copy=True)
    np.testing.assert_array_equal(named.obs["cdp_cluster"].astype(str), expected.obs["cdp_cluster"].astype(str))
    gene_subset = renamed.copy()
    gene_subset.var["cdp_cluster"] = gene_subset.var["cdp_cluster"].cat.rename_categories(lambda name: f"p{name}")
    gene_subset = gene_subset[:, gene_subset.var["cdp_cluster"] != "p0"].copy()
    with pytest.raises(ValueError, match="neither the cluster numbers conjoined.anndata.cdp wrote nor"):
        predict_cells(new, gene_subset)


@pytest.mark.filterwarnings("ignore:Variable names are not unique")
def test_reference_genes_named_twice_are_refused_and_other_repeats_ignored(halves):
    X, reference, _ = halves
    new = _cells(X, np.arange(1, 24, 2))
    expected = predict_cells(new, reference, copy=True)
    more = anndata.concat([new, new[:, :2]], axis=1)  # genes the reference lacks, twice
    more.var_names = list(new.var_names) + ["other", "other"]
    predict_cells(more, reference)
    np.testing.assert_array_equal(more.obsm["cdp_cluster_probability"], expected.obsm["cdp_cluster_probability"])
    twice = reference.copy()
    twice.var_names = ["gene1"] + list(reference.var_names[1:])
    with pytest.raises(ValueError, match="reference's gene names are not unique \\(e.g. 'gene1'\\)"):
        predict_cells(new, twice)


def test_new_cells_over_every_gene_of_raw(halves):
    X, reference, _ = halves
    new = _cells(X, np.arange(1, 24, 2))
    expected = predict_cells(new, reference, copy=True)
    new.raw = new
    variable = new[:, 10:].copy()  # .raw keeps all 16 genes
    predict_cells(variable, reference, use_raw=True)
    np.testing.assert_array_equal(variable.obsm["cdp_cluster_probability"], expected.obsm["cdp_cluster_probability"])


def test_new_genes_get_the_estimators_probabilities_with_cells_matched_by_name():
    """Genes left out of the fit (the odd ones) classified over the fitted cells, given in another order and with
    a cell the reference lacks."""
    X, _, _ = make_biclusters_counts((24, 16), [(slice(0, 10), slice(0, 6))], 6000, 0.8, random_state=0)
    reference = _cells(X, np.arange(16), np.arange(0, 24, 2))
    cdp(reference, **PARAMS)
    model = _reference_model(X[::2])
    X_more = np.hstack([X, np.full((24, 1), 5)])
    new = _cells(X_more, np.r_[np.arange(15, -1, -1), 16], np.arange(1, 24, 2))
    with pytest.raises(ValueError, match="1 of the reference's 16 cells are not in adata.X's cells"):
        predict_genes(new[1:].copy(), reference)
    predict_genes(new, reference)

    expected = model.predict_row_proba(X[1::2])
    np.testing.assert_allclose(new.varm["cdp_cluster_probability"], expected, rtol=1e-12)
    labels = model.predict_rows(X[1::2])
    np.testing.assert_array_equal(new.var["cdp_cluster"].cat.codes, labels)
    np.testing.assert_allclose(new.var["cdp_probability"], expected[np.arange(12), labels])
    np.testing.assert_array_equal(new.varm["cdp_biclusters"], model.bicluster_row_clusters_[:, labels].T)
    assert new.varm["cdp_biclusters"].any(axis=1).tolist() == [i < 10 for i in range(1, 24, 2)]
    assert "cdp_cluster" not in new.obs
