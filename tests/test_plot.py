import itertools
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")
import matplotlib.backends.backend_agg
import matplotlib.image
import matplotlib.pyplot as plt
from matplotlib.patches import Rectangle
from sklearn.exceptions import NotFittedError

from conjoined import CDP
from conjoined.datasets import load_20news_w100, make_cdp_case
from conjoined.plot import block_label, plot_biclusters, plot_k_trace, plot_membership, plot_theta

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def _model(row_labels, column_labels, rows, columns, seed=0):
    """A stand-in for a fitted CDP with the attributes the plots read."""
    rng = np.random.default_rng(seed)
    n_row_clusters, n_column_clusters = row_labels.max() + 1, column_labels.max() + 1

    def membership(labels, k):
        share = rng.dirichlet(np.full(k, 0.5), size=labels.size)
        share[labels >= 0, labels[labels >= 0]] += 2.0
        return share / share.sum(axis=1, keepdims=True)

    return types.SimpleNamespace(
        row_labels_=row_labels,
        column_labels_=column_labels,
        rows_=rows,
        columns_=columns,
        bicluster_pairs_=np.array([[b, b] for b in range(len(rows))]),
        theta_=rng.dirichlet(np.ones(n_row_clusters * n_column_clusters)).reshape(
            n_row_clusters, n_column_clusters
        ),
        row_membership_=membership(row_labels, n_row_clusters),
        column_membership_=membership(column_labels, n_column_clusters),
        n_row_clusters_=int(n_row_clusters),
        n_column_clusters_=int(n_column_clusters),
        row_dpmm_=types.SimpleNamespace(n_clusters_trace_=np.r_[np.full(20, 5), np.full(80, n_row_clusters)]),
        column_dpmm_=types.SimpleNamespace(
            n_clusters_trace_=np.r_[np.full(30, 1), np.full(70, n_column_clusters)]
        ),
        row_k_posterior_={int(n_row_clusters): 0.8},
        column_k_posterior_={int(n_column_clusters): 0.7},
    )


def _labels_from_truth(masks):
    labels = np.full(masks.shape[1], masks.shape[0])
    for b, mask in enumerate(masks):
        labels[mask] = b
    return labels


@pytest.fixture
def case2():
    X, rows, columns = make_cdp_case(2, random_state=0, shuffle=True)
    row_labels = _labels_from_truth(rows)
    row_labels[np.flatnonzero(row_labels == 2)[:2]] = -1  # rows set aside go last
    return X, _model(row_labels, _labels_from_truth(columns), rows, columns)


@pytest.fixture
def many_clusters():
    """A fit of 36 row clusters (the first 20 of 1-3 rows, the rest of 20-59) and 36 column clusters of 5-39
    columns, 30 biclusters: the tick labels of every picture would overlap."""
    rng = np.random.default_rng(0)
    row_labels = np.repeat(np.arange(36), np.r_[rng.integers(1, 4, 20), rng.integers(20, 60, 16)])
    column_labels = np.repeat(np.arange(36), rng.integers(5, 40, 36))
    rows = np.stack([row_labels == k for k in range(30)])
    columns = np.stack([column_labels == k for k in range(30)])
    X = rng.poisson(1.0, (row_labels.size, column_labels.size))
    return X, _model(row_labels, column_labels, rows, columns)


def _drawn_tick_labels(figure):
    """``{(axes index, "x" or "y"): texts}`` of the tick labels drawn (Agg), once checked that no two labels of an
    axis overlap."""
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()
    drawn = {}
    for a, ax in enumerate(figure.axes):
        for axis in (ax.xaxis, ax.yaxis):
            labels = [label for label in axis.get_ticklabels() if label.get_visible() and label.get_text()]
            for first, second in itertools.combinations(labels, 2):
                assert not first.get_window_extent(renderer).overlaps(second.get_window_extent(renderer)), (
                    f"axes {a}, {axis.axis_name} axis: {first.get_text()!r} overlaps {second.get_text()!r}")
            drawn[a, axis.axis_name] = [label.get_text() for label in labels]
    return drawn


def _heatmap(figure):
    return next(ax for ax in figure.axes if ax.images)


def _title(figure):
    """The figure's title (a new figure's), else the first of its axes' titles (given axes)."""
    return figure.get_suptitle() or next(ax.get_title() for ax in figure.axes if ax.get_title())


def _saved_png_shape(figure, path, dpi):
    figure.savefig(path, dpi=dpi)
    assert path.stat().st_size > 5000
    return matplotlib.image.imread(path).shape[:2]


def test_biclusters_small(tmp_path, case2):
    X, model = case2
    figure = plot_biclusters(X, model, row_names=[f"r{i}" for i in range(20)], figsize=(9, 6.5))
    assert _saved_png_shape(figure, tmp_path / "b.png", dpi=100) == (650, 900)
    heatmap = _heatmap(figure)
    image = heatmap.images[0].get_array()
    row_order = np.argsort(np.where(model.row_labels_ < 0, 99, model.row_labels_), kind="stable")
    column_order = np.argsort(model.column_labels_, kind="stable")
    np.testing.assert_allclose(image, np.log1p(X[row_order][:, column_order]))
    assert model.row_labels_[row_order][-2:].tolist() == [-1, -1]
    assert [t.get_text() for t in heatmap.get_yticklabels()] == [f"r{i}" for i in row_order]
    # one outline per contiguous (row run, column run) of each bicluster in the sorted order
    outlines = [p for p in heatmap.patches if isinstance(p, Rectangle)]
    expected = 0
    for in_rows, in_columns in zip(model.rows_, model.columns_):
        row_runs = np.sum(np.diff(np.r_[0, in_rows[row_order].astype(int), 0]) == 1)
        column_runs = np.sum(np.diff(np.r_[0, in_columns[column_order].astype(int), 0]) == 1)
        expected += row_runs * column_runs
    assert len(outlines) == expected >= 2
    assert "2 bicluster(s)" in _title(figure)
    assert "log(1 + count)" in [ax.get_ylabel() for ax in figure.axes]


def test_pictures_sort_by_the_labels(case2):
    # partitions other than the clusters' order of the truth: the heatmap and the membership picture sort by
    # row_labels_ and column_labels_, as theta's topics and the biclusters' (k, l) do
    X, model = case2
    refined = types.SimpleNamespace(**vars(model))
    refined.row_labels_ = np.where(model.row_labels_ < 0, -1, model.row_labels_.max() - model.row_labels_)
    refined.column_labels_ = model.column_labels_.max() - model.column_labels_
    image = _heatmap(plot_biclusters(X, refined)).images[0].get_array()
    row_order = np.argsort(np.where(refined.row_labels_ < 0, 99, refined.row_labels_), kind="stable")
    column_order = np.argsort(refined.column_labels_, kind="stable")
    np.testing.assert_allclose(image, np.log1p(X[row_order][:, column_order]))
    labels = refined.row_labels_
    order = np.lexsort(
        (-model.row_membership_[np.arange(20), np.clip(labels, 0, None)], np.where(labels < 0, 9, labels)))
    np.testing.assert_allclose(plot_membership(refined).axes[0].images[0].get_array(), model.row_membership_[order])


def test_biclusters_large_sparse_is_binned(tmp_path):
    rng = np.random.default_rng(1)
    X = sp.random(100, 16242, density=0.04, format="csr", random_state=2, data_rvs=lambda n: np.ones(n))
    row_labels = rng.integers(0, 4, 100)
    column_labels = rng.integers(0, 4, 16242)
    rows = np.stack([row_labels == k for k in range(4)])
    columns = np.stack([column_labels == k for k in range(4)])
    figure = plot_biclusters(X, _model(row_labels, column_labels, rows, columns), figsize=(12, 6))
    assert _saved_png_shape(figure, tmp_path / "big.png", dpi=80) == (480, 960)
    image = _heatmap(figure).images[0].get_array()
    assert image.shape == (100, 2000)
    # each bin is the mean of its cells: total mass is preserved up to the bin sizes
    column_order = np.argsort(column_labels, kind="stable")
    row_order = np.argsort(row_labels, kind="stable")
    bins = np.arange(16242) * 2000 // 16242
    first_bin = X[row_order][:, column_order[bins == 0]].toarray().mean(axis=1)
    np.testing.assert_allclose(image[:, 0], np.log1p(first_bin))
    assert "bins" in _title(figure)


def test_biclusters_into_given_axes_and_without_biclusters(tmp_path, case2):
    X, model = case2
    figure, axes = plt.subplots(1, 2, figsize=(12, 5))
    assert plot_biclusters(X, model, ax=axes[0]) is figure
    empty = types.SimpleNamespace(
        row_labels_=model.row_labels_,
        column_labels_=model.column_labels_,
        rows_=np.zeros((0, 20), bool),
        columns_=np.zeros((0, 20), bool),
    )
    assert plot_biclusters(X, empty, ax=axes[1]) is figure
    assert not [p for p in axes[1].patches if isinstance(p, Rectangle)]
    assert _saved_png_shape(figure, tmp_path / "two.png", dpi=50) == (250, 600)


@pytest.mark.parametrize("max_biclusters, marked", [(None, 14), (14, 14), (10, 10), (3, 3)])
def test_biclusters_the_strongest_marked(max_biclusters, marked):
    """14 one-row biclusters: the first ``max_biclusters`` (CDP's strongest) get a legend entry, the title says how
    many of all; bad values are refused."""
    X = np.arange(14 * 6, dtype=float).reshape(14, 6)
    labels = np.arange(14)
    rows, columns = np.eye(14, dtype=bool), np.ones((14, 6), bool)
    figure = plot_biclusters(X, _model(labels, np.zeros(6, int), rows, columns), max_biclusters=max_biclusters)
    entries = [t.get_text() for t in figure.legends[0].get_texts()]
    assert entries == [f"bicluster {b}: 1 row x 6 columns ({b}, {b})" for b in range(marked)]
    assert _title(figure) == ("14 rows x 6 columns, 14 bicluster(s)" if marked == 14 else
                              f"14 rows x 6 columns, 14 biclusters, the {marked} strongest marked")


def test_all_of_many_biclusters_fit_in_a_taller_figure(tmp_path, recwarn):
    """80 biclusters, all marked: the figure grows by the legend's 35 extra rows (two columns of 40), every entry
    lies inside it, the heatmap keeps its height, and the strips number every eighth bicluster. (At the fixed
    size, constrained layout collapsed the axes under the legend.)"""
    X = np.arange(80 * 20, dtype=float).reshape(80, 20)
    rows, columns = np.eye(80, dtype=bool), np.ones((80, 20), bool)
    model = _model(np.arange(80), np.arange(20) // 2, rows, columns)
    figure = plot_biclusters(X, model, max_biclusters=None)
    assert tuple(figure.get_size_inches()) == pytest.approx((9.0, 6.5 + 0.175 * 35))
    figure.savefig(tmp_path / "many.png", dpi=50)
    assert not [w for w in recwarn if "constrained_layout" in str(w.message)]
    frame = figure.bbox
    texts = figure.legends[0].get_texts()
    assert len(texts) == 80
    for text in texts:
        box = text.get_window_extent()
        assert frame.x0 <= box.x0 and box.x1 <= frame.x1 and frame.y0 <= box.y0 and box.y1 <= frame.y1
    assert _heatmap(figure).get_window_extent().height > 0.8 * 3.88 * figure.dpi  # 3.88 in with ten biclusters
    # the strips number every m-th bicluster, as many as their length holds
    strip_labels = _drawn_tick_labels(figure)[figure.axes.index(next(
        ax for ax in figure.axes if ax.get_ylabel() == "bicluster")), "y"]
    step = int(strip_labels[1])
    assert strip_labels == [str(b) for b in range(0, 80, step)] and step > 1
    colors = [tuple(handle.get_color()) for handle in figure.legends[0].legend_handles]
    assert len(set(colors[:54])) == 54 and colors[54:] == colors[:26]  # 54 distinct, none grey, then again
    assert not any(len(set(np.round(color, 3))) == 1 for color in colors)
    # a bicluster's colour does not depend on how many are marked
    assert colors[:10] == [tuple(h.get_color()) for h in plot_biclusters(X, model).legends[0].legend_handles]


@pytest.mark.parametrize("bad", [0, -1, 2.5, True, "10"])
def test_biclusters_bad_max_biclusters(bad, case2):
    X, model = case2
    with pytest.raises(ValueError, match="max_biclusters must be an integer >= 1"):
        plot_biclusters(X, model, max_biclusters=bad)


@pytest.mark.parametrize("plot, options, message", [
    ("biclusters", {"max_bins": 0}, "max_bins must be an integer >= 1"),
    ("biclusters", {"max_bins": 2.5}, "max_bins must be an integer >= 1"),
    ("biclusters", {"row_names": ["a", "b", "c"]}, "3 row names for the 20 rows of X"),
    ("biclusters", {"column_names": ["a"] * 21}, "21 column names for the 20 columns of X"),
    ("biclusters", {"cmap": "no such map"}, "cmap must be a matplotlib colormap or its name, got 'no such map'"),
    ("biclusters", {"legend": "yes"}, "legend must be True or False"),
    ("membership", {"max_bins": -1}, "max_bins must be an integer >= 1"),
])
def test_bad_arguments_are_named_and_leave_no_figure_open(plot, options, message, case2):
    X, model = case2
    plt.close("all")
    with pytest.raises(ValueError, match=message):
        plot_biclusters(X, model, **options) if plot == "biclusters" else plot_membership(model, **options)
    assert plt.get_fignums() == []
    with pytest.raises(TypeError, match="got object without row_dpmm_, column_dpmm_"):
        plot_k_trace(object())
    assert plt.get_fignums() == []


@pytest.mark.parametrize("plot", ["biclusters", "k_trace", "theta", "membership"])
def test_tick_labels_never_overlap(plot, many_clusters):
    """36 clusters a side, 20 of them a few rows each, and all 30 biclusters: every picture's tick labels are
    thinned to those that fit (cluster ids "1011121314..." ran together), none overlapping when drawn."""
    X, model = many_clusters
    figure = {
        "biclusters": lambda: plot_biclusters(X, model, max_biclusters=None),
        "k_trace": lambda: plot_k_trace(model),
        "theta": lambda: plot_theta(model),
        "membership": lambda: plot_membership(model),
    }[plot]()
    drawn = _drawn_tick_labels(figure)
    if plot == "k_trace":
        return
    # the cluster ids: every m-th of evenly spaced ones, never all 36
    columns = drawn[0, "x"]
    assert columns[0] == "0" and 1 < len(columns) < 36
    if plot != "biclusters":
        step = int(columns[1])
        assert columns == [str(l) for l in range(0, 36, step)]
    else:
        # uneven clusters: the wide ones first (each of rows 20-35 is labelled), few of the 20 small ones
        rows = [int(label) for label in drawn[0, "y"]]
        assert set(range(20, 36)) <= set(rows) and len(set(rows) & set(range(20))) < 5
        strips = [drawn[a, side] for a, side in ((1, "y"), (2, "x"))]
        assert all(labels[0] == "0" and 1 < len(labels) < 30 for labels in strips)


def test_tick_labels_all_kept_when_they_fit(case2, many_clusters):
    _, model = many_clusters
    drawn = _drawn_tick_labels(plot_theta(model, figsize=(16, 16)))
    assert drawn[0, "x"] == drawn[0, "y"] == [str(k) for k in range(36)]
    X, model = case2
    drawn = _drawn_tick_labels(plot_membership(model))
    assert (drawn[0, "x"], drawn[1, "x"]) == (["0", "1", "2"], ["0", "1"])
    assert drawn[0, "y"] == ["0", "1", "2", "–"]  # the rows set aside last
    drawn = _drawn_tick_labels(plot_biclusters(X, model))
    assert drawn[0, "y"] == ["0", "1", "2", "–"] and drawn[0, "x"] == drawn[1, "y"] == drawn[2, "x"] == ["0", "1"]
    # named columns stand upright, all 20
    figure = plot_biclusters(X, model, column_names=[f"column {j}" for j in range(20)])
    assert len(_drawn_tick_labels(figure)[0, "x"]) == 20
    assert {label.get_rotation() for label in _heatmap(figure).get_xticklabels()} == {90.0}


def test_side_names_name_the_sides(case2):
    X, model = case2
    sides = {"side_names": ("gene", "cell")}
    heatmap = _heatmap(figure := plot_biclusters(X, model, **sides))
    assert heatmap.get_ylabel() == "genes, sorted by gene cluster"
    assert heatmap.get_xlabel() == "cells, sorted by cell cluster"
    assert _title(figure) == "20 genes x 20 cells, 2 bicluster(s)"
    assert figure.legends[0].get_texts()[0].get_text() == "bicluster 0: 4 genes x 4 cells (0, 0)"
    assert [ax.get_title() for ax in plot_k_trace(model, **sides).axes[:2]] == ["Gene DPMM", "Cell DPMM"]
    theta = plot_theta(model, **sides).axes[0]
    assert (theta.get_ylabel(), theta.get_xlabel()) == ("gene cluster k", "cell cluster l")
    assert theta.get_title().startswith("θ: joint probability of gene and cell clusters")
    titles = [ax.get_title() for ax in plot_membership(model, **sides).axes[:2]]
    assert titles == ["Gene membership (20 genes x 3 clusters)", "Cell membership (20 cells x 2 clusters)"]


PLOTS = {
    "biclusters": lambda model, X, **options: plot_biclusters(X, model, **options),
    "k_trace": lambda model, X, **options: plot_k_trace(model, **options),
    "theta": lambda model, X, **options: plot_theta(model, **options),
    "membership": lambda model, X, **options: plot_membership(model, **options),
}


@pytest.mark.parametrize("plot", PLOTS)
def test_every_plot_checks_its_model(plot, case2):
    X, model = case2
    plt.close("all")
    with pytest.raises(NotFittedError, match="ConjoinedDirichletProcess instance is not fitted yet"):
        PLOTS[plot](CDP(), X)
    with pytest.raises(TypeError, match=r"model must be a fitted CDP or an object with its fitted attributes \(.*"
                                        r"\), got NoneType without "):
        PLOTS[plot](None, X)
    anndata = pytest.importorskip("anndata")
    with pytest.raises(TypeError, match=r"got AnnData without .*pass conjoined.anndata.fitted_view\(adata\)"):
        PLOTS[plot](anndata.AnnData(np.asarray(X).T), X)
    for bad in ["gene", ("gene",), ("gene", 2)]:
        with pytest.raises(ValueError, match="side_names must be a pair of str"):
            PLOTS[plot](model, X, side_names=bad)
    assert plt.get_fignums() == []


def test_biclusters_names_a_matrix_that_is_not_one(case2):
    X, model = case2
    anndata = pytest.importorskip("anndata")
    with pytest.raises(TypeError, match=r"X is an AnnData object.*adata\.X\.T"):
        plot_biclusters(anndata.AnnData(X.T), model)
    with pytest.raises(ValueError, match="X.T has the fitted shape: pass X.T"):
        plot_biclusters(X[:15].T, types.SimpleNamespace(**{**vars(model), "row_labels_": model.row_labels_[:15],
                                                             "rows_": model.rows_[:, :15]}))
    with pytest.raises(ValueError, match="must be 2-dimensional"):
        plot_biclusters(X[0], model)


def test_biclusters_refuses_negative_values_and_masks_of_another_shape(case2):
    X, model = case2
    negative = X.astype(float)
    negative[3, 4] = -1.0
    with pytest.raises(ValueError, match="X has negative values"):
        plot_biclusters(negative, model)
    # (n_rows, n_biclusters) read as (n_biclusters, n_rows) gave masks of other rows, silently
    transposed = types.SimpleNamespace(**{**vars(model), "rows_": model.rows_.T})
    with pytest.raises(ValueError, match=r"model.rows_ must have shape \(n_biclusters, 20\) .* got \(20, 2\)"):
        plot_biclusters(X, transposed)
    assert plt.get_fignums() == []


def test_a_failure_in_given_axes_leaves_them_as_they_were(case2):
    X, model = case2
    figure, ax = plt.subplots()
    with pytest.raises(ValueError, match="cmap must be a matplotlib colormap or its name"):
        plot_biclusters(X, model, ax=ax, cmap="Grays_typo")
    assert figure.axes == [ax] and ax.child_axes == [] and not ax.images
    # a sequence of one axes is accepted, as by the other plots
    assert plot_biclusters(X, model, ax=[ax]) is figure and ax.images


def _inside(box, frame):
    return frame.x0 <= box.x0 and box.x1 <= frame.x1 and frame.y0 <= box.y0 and box.y1 <= frame.y1


@pytest.mark.parametrize("width", [3.5, 5.0, 9.0])
def test_title_and_legend_fit_the_figure(width):
    """A long default title (a binned matrix) wraps to the figure; the legend takes two columns from 6 inches,
    one below (two, 5.4 inches wide, spilled out of a single-column panel on both sides)."""
    X = sp.random(100, 16242, density=0.01, format="csr", random_state=0, data_rvs=lambda n: np.ones(n))
    labels = np.arange(100) % 5, np.arange(16242) % 5
    rows, columns = np.stack([labels[0] == k for k in range(5)]), np.stack([labels[1] == k for k in range(5)])
    figure = plot_biclusters(X, _model(*labels, rows, columns), figsize=(width, 6.5))
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()
    assert "(shown as 100 x 2000 bins)" in figure.get_suptitle()
    assert _inside(figure._suptitle.get_window_extent(renderer), figure.bbox)
    legend = figure.legends[0]
    assert legend._ncols == (2 if width >= 6 else 1)
    assert _inside(legend.get_window_extent(renderer), figure.bbox)
    assert not plot_biclusters(X, _model(*labels, rows, columns), figsize=(width, 6.5), legend=False).legends


@pytest.mark.parametrize("where", ["figure", "subfigure", "vector canvas"])
def test_legend_in_given_axes_sits_below_the_x_label(case2, where):
    """Also in a subfigure (whose width the legend's columns read) and on a canvas without a renderer of its
    own (PDF), whose text Agg measures; column names make the x tick labels tall."""
    from matplotlib.backends.backend_pdf import FigureCanvasPdf
    from matplotlib.figure import Figure

    X, model = case2
    if where == "vector canvas":
        figure = Figure(figsize=(5, 4), layout="constrained")
        FigureCanvasPdf(figure)
        ax = figure.add_subplot()
    else:
        figure = plt.figure(figsize=(5, 4), layout="constrained")
        ax = (figure.subfigures(1, 1) if where == "subfigure" else figure).add_subplot()
    plot_biclusters(X, model, ax=ax, column_names=[f"column {j}" for j in range(20)], cmap=plt.cm.viridis)
    renderer = matplotlib.backends.backend_agg.RendererAgg(500, 400, figure.dpi)
    figure.draw(renderer)
    legend_box = ax.get_legend().get_window_extent(renderer)
    assert legend_box.y1 <= ax.xaxis.label.get_window_extent(renderer).y0
    assert legend_box.y1 <= min(label.get_window_extent(renderer).y0 for label in ax.get_xticklabels()
                                if label.get_text())
    assert ax.images[0].get_cmap().name == "viridis"  # a Colormap object, as well as a name


@pytest.mark.parametrize("n_rows", [40, 50, 80])
def test_the_commands_heatmap_is_tall_enough_for_every_row_name(n_rows):
    """``conjoined fit``'s heatmap grows for named rows; it grew too little, and 40-90 rows lost every other
    name (20 of 40 drawn)."""
    from conjoined.fit_folder import PICTURE_DPI, _heatmap_figsize

    rng = np.random.default_rng(0)
    row_labels, column_labels = np.arange(n_rows) * 10 // n_rows, np.arange(50) // 5
    rows = np.stack([row_labels == b for b in range(4)])
    columns = np.stack([column_labels == b for b in range(4)])
    figure = plot_biclusters(rng.poisson(1, (n_rows, 50)), _model(row_labels, column_labels, rows, columns),
                             row_names=[f"row{i}" for i in range(n_rows)],
                             column_names=[f"col{j}" for j in range(50)], figsize=_heatmap_figsize(n_rows))
    figure.set_dpi(PICTURE_DPI)
    assert len(_drawn_tick_labels(figure)[figure.axes.index(_heatmap(figure)), "y"]) == n_rows


def test_biclusters_shape_mismatch(case2):
    X, model = case2
    with pytest.raises(ValueError, match="row labels"):
        plot_biclusters(X[:10], model)


def test_k_trace(tmp_path, case2):
    _, model = case2
    figure = plot_k_trace(model)
    assert _saved_png_shape(figure, tmp_path / "k.png", dpi=100) == (400, 1000)
    row_ax, column_ax = figure.axes[:2]
    np.testing.assert_array_equal(row_ax.lines[0].get_ydata(), model.row_dpmm_.n_clusters_trace_)
    assert "chosen K = 3 (posterior 0.80)" in [t.get_text() for t in row_ax.get_legend().get_texts()]
    assert column_ax.get_title() == "Column DPMM" and row_ax.get_xlabel() == "iteration"


def test_block_label_lists_the_clusters_a_bicluster_joins():
    model = types.SimpleNamespace(bicluster_pairs_=np.array([[8, 2], [3, 1]]))
    assert [block_label(model, b) for b in range(3)] == ["(8, 2)", "(3, 1)", None]
    model.bicluster_row_clusters_ = np.zeros((2, 23), bool)
    model.bicluster_row_clusters_[0, [8, 22]] = model.bicluster_row_clusters_[1, 3] = True
    model.bicluster_column_clusters_ = np.eye(3, dtype=bool)[[2, 1]]
    assert [block_label(model, b) for b in range(2)] == ["(8+22, 2)", "(3, 1)"]
    assert block_label(types.SimpleNamespace(), 0) is None
    # theta's picture outlines every block of every bicluster: (8, 2), (22, 2) and (3, 1)
    model.theta_ = np.full((23, 3), 1 / 69)
    outlined = [p.get_xy() for p in plot_theta(model).axes[0].patches if isinstance(p, Rectangle)]
    assert sorted(outlined) == [(0.5, 2.5), (1.5, 7.5), (1.5, 21.5)]


def test_theta(tmp_path, case2):
    _, model = case2
    figure = plot_theta(model)
    assert _saved_png_shape(figure, tmp_path / "theta.png", dpi=100) == (500, 650)
    ax = figure.axes[0]
    np.testing.assert_allclose(ax.images[0].get_array(), model.theta_)
    assert len(ax.texts) == model.theta_.size
    assert ax.texts[0].get_text() == f"{model.theta_[0, 0]:.3f}"
    assert len([p for p in ax.patches if isinstance(p, Rectangle)]) == len(model.bicluster_pairs_)
    big = types.SimpleNamespace(theta_=np.full((12, 12), 1 / 144))
    assert not plot_theta(big).axes[0].texts


def test_membership(tmp_path, case2):
    _, model = case2
    figure = plot_membership(model)
    assert _saved_png_shape(figure, tmp_path / "m.png", dpi=100) == (500, 1000)
    row_image = figure.axes[0].images[0].get_array()
    assert row_image.shape == model.row_membership_.shape
    # sorted by label (-1 last), then by membership in the own cluster, decreasing
    labels = model.row_labels_
    order = np.lexsort(
        (-model.row_membership_[np.arange(20), np.clip(labels, 0, None)], np.where(labels < 0, 9, labels))
    )
    np.testing.assert_allclose(row_image, model.row_membership_[order])
    assert "Column membership" in figure.axes[1].get_title()


def test_membership_many_columns_is_binned():
    labels = np.repeat(np.arange(3), 4000)
    model = _model(np.array([0, 1, 2]), labels, np.zeros((0, 3), bool), np.zeros((0, 12000), bool))
    image = plot_membership(model, max_bins=500).axes[1].images[0].get_array()
    assert image.shape == (500, 3)


def test_20news_figure(tmp_path):
    path = DATA / "20news_w100.mat"
    if not path.is_file():
        pytest.skip("20news_w100.mat not found in ../shared/data")
    news = load_20news_w100(path)
    counts = np.stack(
        [np.asarray(news.data[:, news.column_groups == g].sum(axis=1)).ravel() for g in range(4)], 1
    )
    row_labels = counts.argmax(axis=1)
    rows = np.stack([row_labels == g for g in range(4)])
    columns = np.stack([news.column_groups == g for g in range(4)])
    model = _model(row_labels, news.column_groups, rows, columns)
    figure = plot_biclusters(news.data, model, row_names=news.row_names)
    assert _heatmap(figure).images[0].get_array().shape == (100, 2000)
    assert _saved_png_shape(figure, tmp_path / "news.png", dpi=100) == (650, 900)
    # the 100 names do not fit 6.5 inches: every other one is shown; in a figure tall enough, all are
    heatmap = figure.axes.index(_heatmap(figure))
    names = news.row_names[np.argsort(row_labels, kind="stable")].tolist()
    assert _drawn_tick_labels(figure)[heatmap, "y"] == names[::2]
    tall = plot_biclusters(news.data, model, row_names=news.row_names, figsize=(9, 12))
    assert _drawn_tick_labels(tall)[heatmap, "y"] == names


def test_importing_does_not_need_matplotlib():
    code = "import sys, conjoined.plot, conjoined.io, conjoined.datasets; print('matplotlib' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"


def test_clear_error_without_matplotlib(monkeypatch, case2):
    _X, model = case2
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    with pytest.raises(ImportError, match=r"need matplotlib: pip install matplotlib"):
        plot_theta(model)


def test_given_axes_of_a_figure_without_layout_hold_the_whole_heatmap(case2, tmp_path):
    """``plt.subplots()``'s figure has no layout engine: the strips, the title and the legend were cut off at its
    edge; it gets matplotlib's constrained layout, and everything drawn lies inside the saved figure."""
    X, model = case2
    figure, ax = plt.subplots()
    assert plot_biclusters(X, model, ax=ax) is figure
    assert type(figure.get_layout_engine()).__name__ == "ConstrainedLayoutEngine"
    figure.savefig(tmp_path / "heatmap.png")
    renderer = figure.canvas.get_renderer()
    strips = ax.child_axes  # the strips: insets, the column strip with the title
    assert len(strips) == 2 and strips[0].get_title().startswith("20 rows x 20 columns")
    for artist in (strips[0].title, ax.get_legend(), ax, *strips, *figure.axes):
        assert _inside(artist.get_window_extent(renderer), figure.bbox)
    tight, _ = plt.subplots(layout="tight")
    plot_biclusters(X, model, ax=tight.axes[0])
    assert type(tight.get_layout_engine()).__name__ == "TightLayoutEngine"  # a user's engine is kept


@pytest.mark.parametrize("plot", PLOTS)
@pytest.mark.parametrize("layout", ["a colour bar on other axes", "adjusted subplots", "axes added by hand"])
def test_a_figure_the_user_laid_out_keeps_its_layout(plot, layout, case2, tmp_path):
    """Constrained layout is given only to a figure made for the plot: on one with a colour bar of its own it
    failed when saved (ZeroDivisionError) and under tight_layout; adjusted subplots were overridden."""
    X, model = case2
    pairs = plot not in ("biclusters", "theta")
    figure, axes = plt.subplots(1, 3 if pairs else 2)
    if layout == "a colour bar on other axes":
        figure.colorbar(axes[-1].imshow(np.eye(3)), ax=axes[-1])
    elif layout == "adjusted subplots":
        figure.subplots_adjust(left=0.2, wspace=0.5)
    else:
        figure = plt.figure()
        axes = [figure.add_axes((0.1 + 0.3 * i, 0.2, 0.25, 0.6)) for i in range(3)]
    given = {"axes": list(axes[:2])} if pairs else {"ax": axes[0]}
    assert PLOTS[plot](model, X, **given) is figure
    assert figure.get_layout_engine() is None
    figure.savefig(tmp_path / "figure.png")
    if layout == "a colour bar on other axes":
        figure.tight_layout()


@pytest.mark.parametrize("plot", PLOTS)
def test_axes_in_a_subfigure_return_the_figure_to_save(plot, case2):
    X, model = case2
    figure = plt.figure(figsize=(12, 5))
    left, _ = figure.subfigures(1, 2)
    axes = left.subplots() if plot in ("biclusters", "theta") else left.subplots(1, 2)
    assert PLOTS[plot](model, X, **({"ax": axes} if plot in ("biclusters", "theta") else {"axes": axes})) is figure


def test_every_marked_bicluster_is_outlined_and_shared_blocks_in_dashes():
    """Two biclusters of 1 row of 200 (under 1% of the axis) share their one block: each is outlined there, in
    dashes of the two colours in turn; a bicluster of its own block keeps a solid outline."""
    rows = np.zeros((3, 200), bool)
    rows[0, 5] = rows[1, 5] = True
    rows[2, 100:150] = True
    columns = np.zeros((3, 20), bool)
    columns[:2, :10] = True
    columns[2, 10:] = True
    row_labels = np.where(np.arange(200) == 5, 0, np.where((np.arange(200) >= 100) & (np.arange(200) < 150), 1, 2))
    model = _model(row_labels, (np.arange(20) >= 10).astype(int), rows, columns)
    X = np.random.default_rng(0).poisson(1.0, (200, 20))
    ax = _heatmap(plot_biclusters(X, model))
    outlines = [patch for patch in ax.patches if isinstance(patch, Rectangle)]
    shared = [p for p in outlines if p.get_height() == 1]
    assert len(outlines) == 3 and len(shared) == 2
    assert {matplotlib.colors.to_hex(p.get_edgecolor()) for p in shared} == {"#1f77b4", "#ff7f0e"}
    assert sorted(p.get_linestyle()[0] for p in shared) == [0.0, 4.0]  # each dashes where the other does not
    assert all(p.get_linestyle()[1] == (4.0, 4.0) for p in shared)
    assert [p.get_linestyle() for p in outlines if p.get_height() == 50] == ["-"]


def test_binned_heatmap_is_averaged_where_bins_share_a_pixel(tmp_path):
    """2000 columns alternately 0 and 1 in a few hundred pixels: mid-grey, not moiré (``nearest`` drew one
    bin of each pixel's, 0 or 255)."""
    X = np.tile([0, 1], (10, 1000))
    model = _model(np.zeros(10, int), np.zeros(2000, int), np.zeros((0, 10), bool), np.zeros((0, 2000), bool))
    figure = plot_biclusters(X, model, figsize=(6, 4))
    figure.savefig(tmp_path / "alias.png", dpi=100)
    pixels = matplotlib.image.imread(tmp_path / "alias.png")[..., 0]
    inside = _heatmap(figure).get_window_extent()
    height = pixels.shape[0]
    centre = pixels[int(height - inside.y1) + 10:int(height - inside.y0) - 10, int(inside.x0) + 10:int(inside.x1) - 10]
    assert centre.std() < 0.02 and 0.2 < centre.mean() < 0.8


def test_vmax_sets_where_the_colour_saturates(case2):
    X, model = case2
    image = _heatmap(plot_biclusters(X, model, vmax=5)).images[0]
    assert image.get_clim() == pytest.approx((0.0, np.log1p(5)))
    assert image.colorbar.extend == "max"  # the largest counts of case 2 are above 5
    assert _heatmap(plot_biclusters(X, model)).images[0].colorbar.extend == "neither"
    for bad in (0, -1, np.nan, np.inf, True, "5", 10 ** 400):
        with pytest.raises(ValueError, match="vmax must be"):
            plot_biclusters(X, model, vmax=bad)


def test_a_dataframes_names_name_the_ticks(case2):
    pandas = pytest.importorskip("pandas")
    X, model = case2
    frame = pandas.DataFrame(X, index=[f"gene{i}" for i in range(20)], columns=[f"cell{j}" for j in range(20)])
    drawn = _drawn_tick_labels(figure := plot_biclusters(frame, model, figsize=(12, 10)))
    heatmap = figure.axes.index(_heatmap(figure))
    assert set(drawn[heatmap, "y"]) <= {f"gene{i}" for i in range(20)} and drawn[heatmap, "y"]
    assert set(drawn[heatmap, "x"]) <= {f"cell{j}" for j in range(20)} and drawn[heatmap, "x"]
    numbered = _drawn_tick_labels(plot_biclusters(pandas.DataFrame(X), model))  # a RangeIndex: cluster numbers
    assert not any(label.startswith(("gene", "cell")) for labels in numbered.values() for label in labels)
