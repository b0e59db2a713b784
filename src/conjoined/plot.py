"""Figures for a fitted CDP model: the reordered matrix with its biclusters, the K traces, theta and memberships.

matplotlib is imported only when a function is called (``pip install matplotlib``, or the ``plot`` extra).
``model`` is anything with the attributes of a fitted :class:`conjoined.CDP` that the function uses
(``row_labels_``, ``column_labels_``, ``rows_``, ``columns_``, ``theta_``, ``row_membership_``,
``column_membership_``, ``row_dpmm_``, ...), as :func:`conjoined.anndata.fitted_view` returns: an estimator not
fitted yet is a NotFittedError, an object without them a TypeError. ``side_names`` says what the rows and the
columns are (``("gene", "cell")`` for a fit of genes x cells), for the axes, titles and legends. Every function
returns the matplotlib Figure (the root figure of given axes in a SubFigure); pass ``ax`` (or ``axes``) to draw
into existing axes (a figure made for the plot alone, as ``plt.subplots()`` makes it, gets matplotlib's
constrained layout, so that what is drawn outside the axes fits in it; one the user laid out keeps its layout).
Tick labels that would overlap are thinned when the figure is drawn, to those that fit the axis's length then (all
of them when they fit).
"""

from __future__ import annotations

import functools
import itertools

import numpy as np
import scipy.sparse as sp
from sklearn.utils.validation import check_is_fitted

from ._validation import check_int, check_matrix, check_positive, string_names

__all__ = ["block_label", "plot_biclusters", "plot_k_trace", "plot_membership", "plot_theta"]

_MAX_NAMED_TICKS = 100
# Height of one row of the heatmap legend (font size 8, with its spacing), by which a new figure grows past
# five rows.
_LEGEND_ROW_INCHES = 0.175
# The heatmap legend's entries (font size 8) take about 2.7 inches each: two columns from this width, else
# one.
_TWO_LEGEND_COLUMNS_INCHES = 6.0
# The thickness (points) of a bicluster's line in the heatmap's strips, which holds its number (font size 6;
# two digits take 1.4 times it across the row strip).
_STRIP_POINTS = 9.0
# Most cells along each axis of a heatmap drawn sharp (one colour per cell); more are antialiased.
_SHARP_CELLS = 500
# Lines between clusters on the heatmap.
_SEPARATOR_COLOR = "0.6"


def _pyplot():
    try:
        import matplotlib.pyplot as plt
    except ImportError:
        raise ImportError("conjoined's plots need matplotlib: pip install matplotlib") from None
    return plt


def _closing_its_figure_on_error(plot):
    """Decorator of a plot function: when it raises, the figures it opened are closed (pyplot would keep them,
    and show them with the next figure)."""

    @functools.wraps(plot)
    def wrapper(*args, **kwargs):
        plt = _pyplot()
        before = set(plt.get_fignums())
        try:
            return plot(*args, **kwargs)
        except BaseException:
            for number in set(plt.get_fignums()) - before:
                plt.close(number)
            raise

    return wrapper


def _new_axes(ax, figsize, ncols=1):
    """``(figure, axes)``: the given axes, or new ones on a new figure. ``figure`` is the one the axes are drawn
    in (a SubFigure for axes of one); the functions return its root (``figure.figure``), the one saved.

    A figure the plot has to itself, as ``plt.subplots()`` makes it (only the given axes, no layout engine, its
    subplot parameters matplotlib's defaults), is given matplotlib's constrained layout, which makes room for
    what the plots draw outside their axes (the heatmap's strips, title and legend): without it they were cut
    off at the figure's edge. A figure with other axes, a layout engine or adjusted subplots is left as the
    user laid it out (constrained layout or ``savefig(..., bbox_inches="tight")`` make the room there)."""
    if ax is not None:
        axes = np.atleast_1d(ax)
        if axes.size != ncols:
            raise ValueError(f"expected {ncols} axes, got {axes.size}")
        figure = axes.flat[0].figure
        if _laid_out_by_default(figure.figure, list(axes.flat)):
            figure.figure.set_layout_engine("constrained")
        return figure, list(axes.flat) if ncols > 1 else axes.flat[0]
    figure, axes = _pyplot().subplots(1, ncols, figsize=figsize, layout="constrained")
    return figure, (list(axes) if ncols > 1 else axes)


def _laid_out_by_default(figure, axes):
    """Whether the root ``figure`` holds only ``axes`` (a list), has no layout engine and keeps matplotlib's
    default subplot parameters: a figure made for the plot alone."""
    rc = _pyplot().rcParams
    defaults = all(getattr(figure.subplotpars, name) == rc[f"figure.subplot.{name}"]
                   for name in ("left", "right", "bottom", "top", "wspace", "hspace"))
    alone = {id(a) for a in figure.axes} == {id(a) for a in axes}
    return figure.get_layout_engine() is None and defaults and alone


def _counted(n, name):
    """``n`` items called ``name``: "1 row", "2 rows"."""
    return f"{n} {name}{'' if n == 1 else 's'}"


def _check_model(model, attributes, side_names):
    """The checks of every plot function: ``model`` has the fitted ``attributes`` (names) the plot reads, and
    ``side_names`` is a pair of str, returned as a tuple ``(row, column)``.

    Raises NotFittedError for an estimator not fitted yet (sklearn's ``check_is_fitted``), TypeError for anything
    else without the attributes (None, an AnnData, another estimator), naming what it is and what it lacks, and
    ValueError for bad ``side_names``.
    """
    if hasattr(model, "fit"):
        check_is_fitted(model)
    missing = [name for name in attributes if not hasattr(model, name)]
    if missing:
        hint = ("; for the results conjoined.anndata.cdp stored in an AnnData, pass "
                "conjoined.anndata.fitted_view(adata)" if type(model).__name__ == "AnnData" else "")
        raise TypeError(
            f"model must be a fitted CDP or an object with its fitted attributes ({', '.join(attributes)}), got "
            f"{type(model).__name__} without {', '.join(missing)}{hint}"
        )
    if not (isinstance(side_names, (tuple, list)) and len(side_names) == 2
            and all(isinstance(name, str) for name in side_names)):
        raise ValueError(f"side_names must be a pair of str, such as ('gene', 'cell'), got {side_names!r}")
    return tuple(side_names)


def _joined_clusters(model, b):
    """The row clusters and the column clusters whose blocks bicluster ``b`` of a fitted model joins, as
    lists; its pair's k and l when the model does not record what it joins."""
    joined = [getattr(model, f"bicluster_{side}_clusters_", None) for side in ("row", "column")]
    if any(masks is None or b >= len(masks) for masks in joined):
        return [[int(v)] for v in model.bicluster_pairs_[b]]
    return [np.flatnonzero(masks[b]).tolist() for masks in joined]


def block_label(model, b):
    """The blocks of bicluster ``b`` of a fitted model as ``"(k, l)"``, the clusters it joins listed with
    ``+`` (``"(8+22, 2)"``: row clusters 8 and 22 on column cluster 2); its pair alone when the model does not
    record what it joins, None when it has no pairs."""
    pairs = getattr(model, "bicluster_pairs_", None)
    if pairs is None or b >= len(pairs):
        return None
    return "(" + ", ".join("+".join(str(v) for v in part) for part in _joined_clusters(model, b)) + ")"


def _display_order(labels, key=None):
    """Positions sorted by label, label -1 (set aside) last; ties broken by ``key`` (ascending), then stably."""
    labels = np.asarray(labels)
    group = np.where(labels < 0, labels.max(initial=0) + 1, labels)
    if key is None:
        return np.argsort(group, kind="stable")
    return np.lexsort((key, group))


def _runs(mask):
    """``(start, stop)`` of each run of True in a 1-d bool array."""
    padded = np.concatenate([[False], mask, [False]]).astype(np.int8)
    edges = np.flatnonzero(np.diff(padded))
    return list(zip(edges[::2], edges[1::2]))


def _merge_close_runs(runs, min_gap):
    """Join runs separated by fewer than ``min_gap`` positions (below the resolution of a binned image)."""
    merged = []
    for start, stop in runs:
        if merged and start - merged[-1][1] < min_gap:
            merged[-1] = (merged[-1][0], stop)
        else:
            merged.append((start, stop))
    return merged


def _bin_matrix(n_items, order, max_bins):
    """Sparse (n_bins, n_items) averaging matrix over consecutive displayed positions; n_bins = min(n, max_bins)."""
    n_bins = min(n_items, max_bins)
    bin_of_position = np.arange(n_items) * n_bins // n_items
    bin_of_item = np.empty(n_items, dtype=np.int64)
    bin_of_item[order] = bin_of_position
    bin_sizes = np.bincount(bin_of_position, minlength=n_bins)
    weights = 1.0 / bin_sizes[bin_of_item]
    return sp.csr_matrix((weights, (bin_of_item, np.arange(n_items))), shape=(n_bins, n_items))


def _cluster_boundaries(sorted_labels):
    """Positions between two consecutive clusters in display order."""
    return np.flatnonzero(sorted_labels[1:] != sorted_labels[:-1]) + 1


def name_fontsize(n):
    """Font size (points) of the tick labels that name ``n`` <= 100 rows (columns) one by one."""
    return max(4.0, min(8.0, 500.0 / n))


def _label_ticks(axis, sorted_labels, names):
    """Name every position when there are few (names along the x axis turned upright), else put the cluster id
    at the centre of each cluster's span, the widest clusters first where not all fit (see
    :func:`_set_fitting_ticks`)."""
    n = len(sorted_labels)
    if names is not None and n <= _MAX_NAMED_TICKS:
        _set_fitting_ticks(axis, np.arange(n) + 0.5, names, fontsize=name_fontsize(n),
                           rotation=90.0 if axis.axis_name == "x" else 0.0)
        return
    starts = np.concatenate([[0], _cluster_boundaries(sorted_labels)])
    stops = np.concatenate([starts[1:], [n]])
    _set_fitting_ticks(axis, (starts + stops) / 2,
                       ["–" if sorted_labels[s] < 0 else sorted_labels[s] for s in starts], priority=stops - starts)


def _spaced(centres, spacing, priority):
    """Indices (increasing) of the labels kept at ``centres`` (n,) so that any two are at least ``spacing`` apart:
    by decreasing ``priority`` (n,) (ties: in order, which for evenly spaced labels keeps every m-th), each label
    as far from those kept."""
    kept = np.zeros(len(centres), dtype=bool)
    for i in np.lexsort((np.arange(len(centres)), -priority)):
        if np.all(np.abs(centres[kept] - centres[i]) >= spacing):
            kept[i] = True
    return np.flatnonzero(kept)


@functools.cache
def _fitting_locator():
    """The class of :func:`_set_fitting_ticks`' locators, built on first use (importing this module does not
    import matplotlib)."""
    from matplotlib.text import Text
    from matplotlib.ticker import Locator

    class FittingLocator(Locator):
        """Of the ticks at ``positions`` (n,) labelled ``labels`` (n,), those whose labels, drawn at ``fontsize``
        turned by ``rotation`` degrees, keep apart along the axis at its length when drawn: their centres at least
        the longest label apart (see :func:`_spaced`), plus half the font size for labels read along the axis."""

        def __init__(self, positions, labels, priority, fontsize, rotation):
            self.positions, self.labels, self.priority = positions, labels, priority
            self.fontsize, self.rotation = fontsize, rotation
            self._extents = {}  # (dpi, along x) -> each label's extent along the axis, in pixels

        def _label_extents(self, figure, along_x):
            """(n,) each label's extent along the axis in pixels at the figure's dpi: measured once per dpi (a
            figure is drawn again at the dpi it is saved at), not at every draw."""
            key = (figure.dpi, along_x)
            if key not in self._extents:
                extents = np.empty(len(self.labels))
                for i, label in enumerate(self.labels):
                    text = Text(text=label, fontsize=self.fontsize, rotation=self.rotation)
                    text.set_figure(figure)
                    box = text.get_window_extent()
                    extents[i] = box.width if along_x else box.height
                self._extents[key] = extents
            return self._extents[key]

        def __call__(self):
            return self.tick_values(*self.axis.get_view_interval())

        def tick_values(self, vmin, vmax):
            low, high = sorted((vmin, vmax))
            shown = np.flatnonzero((self.positions >= low) & (self.positions <= high))
            if shown.size < 2 or high == low:
                return self.positions[shown]
            figure = self.axis.axes.figure
            along_x = self.axis.axis_name == "x"
            length = self.axis.axes.bbox.width if along_x else self.axis.axes.bbox.height  # in pixels, as below
            reads_along = along_x == (self.rotation % 180 == 0)
            gap = (0.5 if reads_along else 0.1) * self.fontsize * figure.dpi / 72
            longest = self._label_extents(figure, along_x)[shown].max()
            kept = _spaced(self.positions[shown] * length / (high - low), longest + gap, self.priority[shown])
            return self.positions[shown[kept]]

    return FittingLocator


def _set_fitting_ticks(axis, positions, labels, *, priority=None, fontsize=8.0, rotation=0.0):
    """Tick the matplotlib ``axis`` at ``positions`` (n,), increasing data coordinates, labelled ``labels`` (n,)
    (shown as str), keeping, each time the figure is drawn, the ticks whose labels do not overlap at the axis's
    length then: all when they fit, else by decreasing ``priority`` (n,) (default: every tick alike, in order,
    which keeps every m-th)."""
    from matplotlib.ticker import FuncFormatter

    positions = np.asarray(positions, dtype=np.float64)
    labels = [str(label) for label in labels]
    priority = np.zeros(len(positions)) if priority is None else np.asarray(priority, dtype=np.float64)
    label_of = dict(zip(positions.tolist(), labels))
    axis.set_major_locator(_fitting_locator()(positions, labels, priority, fontsize, rotation))
    axis.set_major_formatter(FuncFormatter(lambda value, _: label_of.get(value, "")))
    axis.set_tick_params(labelsize=fontsize, labelrotation=rotation)


@_closing_its_figure_on_error
def plot_biclusters(
    X,
    model,
    ax=None,
    *,
    row_names=None,
    column_names=None,
    max_bins=2000,
    max_biclusters=10,
    cmap="Greys",
    vmax=None,
    figsize=(9.0, 6.5),
    title=None,
    side_names=("row", "column"),
    legend=True,
):
    """Heatmap of X with rows and columns sorted by cluster, and the biclusters marked.

    Rows are sorted by ``model.row_labels_`` and columns by ``model.column_labels_``, the partitions the
    biclusters are read from (label -1, set aside, last); grey lines separate clusters. Colour is
    ``log(1 + count)``. An axis longer than ``max_bins`` is shown as ``max_bins`` bins of consecutive sorted
    positions, each the mean count of its cells, computed on the sparse matrix (never densified).

    Bicluster b (``model.rows_[b]`` x ``model.columns_[b]``) gets its own colour, the same however many are
    marked. Its members may be scattered after sorting (a row can belong to several biclusters), so it is drawn
    twice: strips above and to the right of the heatmap mark every member column and row, and the heatmap
    outlines each block formed by a contiguous run of its sorted rows and one of its sorted columns, for runs of
    at least 1% of the axis, or its longest run on a side where none is that long (runs closer than one bin are
    joined). A block outlined by several biclusters is drawn in dashes of their colours in turn (outlines that
    overlap in part are drawn whole, the later over the earlier). Past 500 cells along an axis, cells that
    share a pixel are averaged when drawn (matplotlib's antialiasing).

    Ticks name the clusters at their centres (the widest first where not all fit), or the rows (columns) when
    there are at most 100 and ``row_names`` (``column_names``) are given.

    Parameters
    ----------
    X : array-like or scipy.sparse matrix, shape (n_rows, n_cols)
        The matrix the model was fitted on (for :func:`conjoined.anndata.fitted_view`, genes x cells: the
        AnnData's ``X.T`` or ``layers[...].T``).
    model : fitted CDP (or any object with row_labels_, column_labels_, rows_, columns_)
    ax : matplotlib Axes, optional
    row_names, column_names : sequence of str, optional
        Tick labels when at most 100 are shown, in place of the cluster numbers (the separators still part the
        clusters); otherwise the ticks name the clusters. Default: a DataFrame's index and columns when they
        are str.
    max_bins : int
        Most image rows/columns drawn per axis.
    max_biclusters : int or None, default=10
        Most biclusters marked: the first ones, which for CDP are the strongest (past about ten, outlines crowd
        each other). None: all.
    cmap : str or matplotlib Colormap
    vmax : float, optional
        The count (mean count per bin) at which the colour saturates, for a scale not set by a few extreme
        counts (``vmax=np.quantile(X.data, 0.999)`` on sparse counts, say); the default is the largest shown.
    figsize : (float, float) or None
        Size of a new figure (inches; None: matplotlib's default); it grows taller by the legend's rows past
        five.
    title : str, optional
        Above the figure (a new one; wrapped to its width) or above the heatmap's strip (given axes; not
        wrapped: pass a short one, or ``""``, for a narrow panel). The default names the matrix's size and how
        many biclusters are marked.
    side_names : (str, str), default=("row", "column")
        What the rows and the columns are, singular (their plurals add an "s"), for the axes, title and legend.
    legend : bool, default=True
        List the marked biclusters (size and blocks) below the heatmap: in two columns on a figure (or given
        axes) at least 6 inches wide, else in one. False leaves it out (the strips still number them), for a
        small panel.

    Returns
    -------
    matplotlib.figure.Figure
    """
    if hasattr(X, "index") and hasattr(X, "columns"):  # a DataFrame's names, unless given
        row_names = string_names(X.index) if row_names is None else row_names
        column_names = string_names(X.columns) if column_names is None else column_names
    X = check_matrix(X)
    if (X.data if sp.issparse(X) else X).min(initial=0.0) < 0:
        raise ValueError("X has negative values: the heatmap draws log(1 + value), for counts or other "
                         "values >= 0")
    row, column = _check_model(model, ("row_labels_", "column_labels_", "rows_", "columns_"), side_names)
    if not isinstance(legend, (bool, np.bool_)):
        raise ValueError(f"legend must be True or False, got {legend!r}")
    from matplotlib.colors import Colormap

    if not isinstance(cmap, Colormap):
        try:
            _pyplot().colormaps[cmap]
        except (KeyError, ValueError, TypeError):
            raise ValueError(f"cmap must be a matplotlib colormap or its name, got {cmap!r}") from None
    n_rows, n_cols = X.shape
    row_labels = np.asarray(model.row_labels_)
    column_labels = np.asarray(model.column_labels_)
    if row_labels.shape != (n_rows,) or column_labels.shape != (n_cols,):
        transposed = (row_labels.shape, column_labels.shape) == ((n_cols,), (n_rows,))
        raise ValueError(
            f"X has shape {X.shape} but the model has {row_labels.size} row labels and {column_labels.size} "
            "column labels" + ("; X.T has the fitted shape: pass X.T" if transposed else "")
        )
    if max_biclusters is not None:
        max_biclusters = check_int(max_biclusters, "max_biclusters", minimum=1)
    max_bins = check_int(max_bins, "max_bins", minimum=1)
    vmax = None if vmax is None else check_positive(vmax, "vmax")
    for names, size, what in ((row_names, n_rows, "row"), (column_names, n_cols, "column")):
        if names is not None and len(names) != size:
            raise ValueError(f"{len(names)} {what} names for the {size} {what}s of X")
    bicluster_rows = np.asarray(model.rows_, dtype=bool)
    bicluster_columns = np.asarray(model.columns_, dtype=bool)
    if bicluster_rows.ndim == bicluster_columns.ndim == 1:  # one bicluster
        bicluster_rows, bicluster_columns = bicluster_rows[None, :], bicluster_columns[None, :]
    for masks, size, what in ((bicluster_rows, n_rows, "rows_"), (bicluster_columns, n_cols, "columns_")):
        if masks.ndim != 2 or masks.shape[1] != size:
            raise ValueError(f"model.{what} must have shape (n_biclusters, {size}) for X of shape {X.shape}, "
                             f"got {masks.shape}")
    n_found = len(bicluster_rows)
    n_biclusters = n_found if max_biclusters is None else min(n_found, max_biclusters)
    bicluster_rows, bicluster_columns = bicluster_rows[:n_biclusters], bicluster_columns[:n_biclusters]
    new_figure = ax is None
    if new_figure:
        figsize = _pyplot().rcParams["figure.figsize"] if figsize is None else figsize
        legend_columns = 2 if figsize[0] >= _TWO_LEGEND_COLUMNS_INCHES else 1
        extra_legend_rows = max(-(-n_biclusters // legend_columns) - 5, 0) if legend else 0
        grown = (figsize[0], figsize[1] + _LEGEND_ROW_INCHES * extra_legend_rows)
    else:
        ax = _new_axes(ax, figsize)[1]  # an Axes, or a sequence of one
        width = ax.bbox.width / ax.figure.dpi  # inches, in a figure or a subfigure
        legend_columns = 2 if width >= _TWO_LEGEND_COLUMNS_INCHES else 1
        grown = figsize
    figure, ax, column_strip, row_strip, colorbar_place = _heatmap_axes(ax, grown, figsize, n_biclusters)

    row_order = _display_order(row_labels)
    column_order = _display_order(column_labels)
    binned = _bin_matrix(n_rows, row_order, max_bins) @ X @ _bin_matrix(n_cols, column_order, max_bins).T
    image = np.log1p(binned.toarray() if sp.issparse(binned) else np.asarray(binned))
    is_binned = n_rows > max_bins or n_cols > max_bins
    # Past a few hundred cells an axis can have fewer pixels than cells: matplotlib's antialiasing averages those
    # that share a pixel ("nearest" kept one of them: moiré); fewer cells are drawn sharp, each over its pixels.
    interpolation = "antialiased" if max(image.shape) > _SHARP_CELLS else "nearest"
    shown = ax.imshow(image, cmap=cmap, aspect="auto", interpolation=interpolation, interpolation_stage="data",
                      extent=(0, n_cols, n_rows, 0), vmin=0.0, vmax=None if vmax is None else np.log1p(vmax))
    sorted_row_labels = row_labels[row_order]
    sorted_column_labels = column_labels[column_order]
    # grey: seen on the colormap's light zero (most cells of sparse counts) and on its dark blocks
    for position in _cluster_boundaries(sorted_row_labels):
        ax.axhline(position, color=_SEPARATOR_COLOR, linewidth=0.8)
    for position in _cluster_boundaries(sorted_column_labels):
        ax.axvline(position, color=_SEPARATOR_COLOR, linewidth=0.8)

    saturated = vmax is not None and image.max(initial=0.0) > np.log1p(vmax)
    colorbar = figure.colorbar(shown, fraction=0.04, extend="max" if saturated else "neither", **colorbar_place)
    colorbar.set_label("log(1 + mean count per bin)" if is_binned else "log(1 + count)")
    if n_biclusters:
        _draw_biclusters(
            ax,
            column_strip,
            row_strip,
            bicluster_rows[:, row_order],
            bicluster_columns[:, column_order],
            [block_label(model, b) for b in range(n_biclusters)],
            max_bins,
            (row, column),
        )

    for axis, sorted_labels, names, order in (
        (ax.yaxis, sorted_row_labels, row_names, row_order),
        (ax.xaxis, sorted_column_labels, column_names, column_order),
    ):
        _label_ticks(axis, sorted_labels, None if names is None else np.asarray(names)[order])
    ax.set_ylabel(f"{row}s, sorted by {row} cluster")
    ax.set_xlabel(f"{column}s, sorted by {column} cluster")
    if legend and n_biclusters:
        legend_style = {"fontsize": 8, "frameon": False, "ncols": legend_columns}
        if new_figure:
            figure.legend(loc="outside lower center", **legend_style)
        else:
            ax.legend(loc="upper left", bbox_to_anchor=(0.0, 0.0), bbox_transform=_below_x_axis(ax),
                      **legend_style)
    if title is None:
        title = f"{_counted(n_rows, row)} x {_counted(n_cols, column)}, " + (
            f"{n_found} bicluster(s)" if n_biclusters == n_found
            else f"{n_found} biclusters, the {n_biclusters} strongest marked")
        if is_binned:
            title += f" (shown as {image.shape[0]} x {image.shape[1]} bins)"
    if new_figure:
        figure.suptitle(title, wrap=True)
    else:
        (ax if column_strip is None else column_strip).set_title(title)
    return figure.figure


def _below_x_axis(ax):
    """A transform of ``ax``'s axes coordinates shifted down past its x tick labels and x label (measured now,
    in points, which the figure's layout does not change), to anchor a legend under them in given axes."""
    from matplotlib.backends.backend_agg import RendererAgg
    from matplotlib.transforms import offset_copy

    figure = ax.figure
    canvas = figure.canvas
    if hasattr(canvas, "get_renderer"):
        renderer = canvas.get_renderer()
    else:  # a vector or bare canvas: Agg measures its text alike
        renderer = RendererAgg(int(canvas.figure.bbox.width), int(canvas.figure.bbox.height), canvas.figure.dpi)
    below = (ax.get_window_extent(renderer).y0 - ax.xaxis.get_tightbbox(renderer).y0) * 72.0 / figure.dpi
    return offset_copy(ax.transAxes, figure, y=-below - 2.0, units="points")


def _heatmap_axes(ax, figsize, heatmap_figsize, n_biclusters):
    """``(figure, heatmap axes, column strip, row strip, colourbar placement)``; no strips without biclusters.

    On a new figure (of ``figsize``) the strips are grid cells above and right of the heatmap (so the layout
    makes room for them); in given axes they are insets outside its right and top edges. Each bicluster's line
    in a strip is ``_STRIP_POINTS`` thick, for its number, the strip up to a quarter of the heatmap's size: that
    of the axes, or on a new figure the figure's before it grew for the legend (``heatmap_figsize``), less its
    title, labels and colour bar.
    """
    if ax is None:
        width, height = max(heatmap_figsize[0] - 2.2, 1.0), max(heatmap_figsize[1] - 2.5, 1.0)
    else:
        width, height = ax.bbox.width / ax.figure.dpi, ax.bbox.height / ax.figure.dpi
    # relative to the heatmap's height and width
    strip_height = min(n_biclusters * _STRIP_POINTS / 72 / height, 0.25)
    strip_width = min(n_biclusters * _STRIP_POINTS * (1 if n_biclusters <= 10 else 1.4) / 72 / width, 0.25)
    if ax is None:
        figure = _pyplot().figure(figsize=figsize, layout="constrained")
        if not n_biclusters:
            ax = figure.add_subplot()
            return figure, ax, None, None, {"ax": ax, "pad": 0.02}
        grid = figure.add_gridspec(2, 2, height_ratios=(strip_height, 1), width_ratios=(1, strip_width))
        ax = figure.add_subplot(grid[1, 0])
        column_strip = figure.add_subplot(grid[0, 0], sharex=ax)
        row_strip = figure.add_subplot(grid[1, 1], sharey=ax)
        return figure, ax, column_strip, row_strip, {"ax": [ax, row_strip], "pad": 0.02}
    if not n_biclusters:
        return ax.figure, ax, None, None, {"ax": ax, "pad": 0.02}
    column_strip = ax.inset_axes((0.0, 1.005, 1.0, strip_height), sharex=ax)
    row_strip = ax.inset_axes((1.005, 0.0, strip_width, 1.0), sharey=ax)
    return ax.figure, ax, column_strip, row_strip, {"ax": ax, "pad": 0.02 + strip_width}


def _bicluster_colors():
    """Bicluster b's colour is entry b (cycled past 54): the nine strong colours of tab10 first (its grey, which
    the cluster separators use, left out) and tab20b's dark blue, then tab20's light shades and the other
    colours of tab20b and tab20c but their greys; one bicluster keeps its colour however many are marked."""
    colormaps = _pyplot().colormaps
    strong = [color for i, color in enumerate(colormaps["tab10"].colors) if i != 7]
    strong.append(colormaps["tab20b"].colors[0])
    light = [color for i, color in enumerate(colormaps["tab20"].colors) if i % 2 and i != 15]
    return strong + light + list(colormaps["tab20b"].colors[1:]) + list(colormaps["tab20c"].colors[:16])


def _outlines(row_runs, column_runs, n_rows, n_cols):
    """The blocks ``(r0, r1, c0, c1)`` outlined for one bicluster: each run of at least 1% of its axis in its
    sorted rows by each in its sorted columns, or, where it has none on a side, its longest run there (every
    bicluster marked is outlined somewhere, a few genes of a single-cell fit too)."""
    def outlined(runs, n):
        large = [run for run in runs if run[1] - run[0] >= 0.01 * n]
        return large or sorted(runs, key=lambda run: run[0] - run[1])[:1]

    return [(r0, r1, c0, c1) for r0, r1 in outlined(row_runs, n_rows) for c0, c1 in outlined(column_runs, n_cols)]


def _draw_biclusters(ax, column_strip, row_strip, sorted_rows, sorted_columns, blocks, max_bins, side_names):
    """Member strips above (columns) and right of (rows) the heatmap, and the blocks' outlines (:func:`_outlines`).

    ``sorted_rows`` (B, n_rows) and ``sorted_columns`` (B, n_cols) are the membership masks in display order;
    ``blocks`` (B,) each bicluster's :func:`block_label` or None; ``side_names`` ``(row, column)`` for the legend.
    """
    from matplotlib.patches import Rectangle

    n_biclusters, n_rows = sorted_rows.shape
    n_cols = sorted_columns.shape[1]
    row, column = side_names
    colors = _bicluster_colors()
    row_gap, column_gap = -(-n_rows // max_bins), -(-n_cols // max_bins)
    outlines = {}  # block -> the biclusters outlining it
    for b in range(n_biclusters):
        color = colors[b % len(colors)]
        row_runs = _merge_close_runs(_runs(sorted_rows[b]), row_gap)
        column_runs = _merge_close_runs(_runs(sorted_columns[b]), column_gap)
        column_starts, column_stops = np.transpose(column_runs) if column_runs else ([], [])
        row_starts, row_stops = np.transpose(row_runs) if row_runs else ([], [])
        # the edge keeps a single member visible when it is narrower than a pixel
        column_strip.barh(
            b + 0.5,
            np.subtract(column_stops, column_starts),
            left=column_starts,
            height=0.8,
            color=color,
            edgecolor=color,
            linewidth=0.4,
            align="center",
        )
        row_strip.bar(
            b + 0.5,
            np.subtract(row_stops, row_starts),
            bottom=row_starts,
            width=0.8,
            color=color,
            edgecolor=color,
            linewidth=0.4,
            align="center",
        )
        label = f"bicluster {b}: {_counted(sorted_rows[b].sum(), row)} x {_counted(sorted_columns[b].sum(), column)}"
        if blocks[b] is not None:
            label += f" {blocks[b]}"
        for block in _outlines(row_runs, column_runs, n_rows, n_cols):
            outlines.setdefault(block, []).append(b)
        ax.plot([], [], color=color, linewidth=6, label=label)
    # A block that several biclusters outline (an item's run shared by biclusters of one cluster) is drawn in
    # dashes of their colours in turn, where one solid outline would hide the others.
    dash = 4.0
    for (r0, r1, c0, c1), outlining in outlines.items():
        for turn, b in enumerate(outlining):
            style = "-" if len(outlining) == 1 else (turn * dash, (dash, dash * (len(outlining) - 1)))
            ax.add_patch(Rectangle((c0, r0), c1 - c0, r1 - r0, fill=False, edgecolor=colors[b % len(colors)],
                                   linewidth=2.0, linestyle=style, zorder=3))
    column_strip.set_ylim(n_biclusters, 0)
    column_strip.tick_params(axis="x", bottom=False, labelbottom=False)
    # upright: clear of the heatmap's own label below it
    column_strip.set_ylabel("bicluster", fontsize=7, rotation=0, ha="right", va="center")
    row_strip.set_xlim(0, n_biclusters)
    row_strip.tick_params(axis="y", left=False, labelleft=False)
    for axis in (column_strip.yaxis, row_strip.xaxis):  # the numbers the strips' width holds
        _set_fitting_ticks(axis, np.arange(n_biclusters) + 0.5, range(n_biclusters), fontsize=6.0)
    for strip in (column_strip, row_strip):
        for spine in strip.spines.values():
            spine.set_linewidth(0.5)


def _plot_one_trace(ax, trace, n_clusters, posterior, what):
    """One side's K trace (n_iterations,) into ``ax``; ``what``: the side's name, singular."""
    iterations = np.arange(1, len(trace) + 1)
    ax.step(iterations, trace, where="mid", color="tab:blue", linewidth=1.0, label=f"{what} clusters")
    chosen = max(posterior, key=lambda k: (posterior[k], -k)) if posterior else n_clusters
    if chosen is not None:
        label = f"chosen K = {chosen}"
        if posterior:
            label += f" (posterior {posterior[chosen]:.2f})"
        ax.axhline(chosen, color="tab:red", linestyle="--", linewidth=1.2, label=label)
    if n_clusters is not None and n_clusters != chosen:
        ax.axhline(n_clusters, color="tab:orange", linestyle=":", linewidth=1.2,
                   label=f"after the refinement: {n_clusters}")
    ax.set_xlabel("iteration")
    ax.set_ylabel("number of clusters K")
    ax.set_title(f"{what.capitalize()} DPMM")
    ax.yaxis.get_major_locator().set_params(integer=True)
    ax.set_xlim(1, max(len(trace), 2))
    ax.legend(loc="best", fontsize=8)


@_closing_its_figure_on_error
def plot_k_trace(model, axes=None, *, figsize=(10.0, 4.0), side_names=("row", "column")):
    """Number of clusters at each iteration of the row and the column DP mixtures (two panels).

    Uses ``model.row_dpmm_.n_clusters_trace_`` and ``model.column_dpmm_.n_clusters_trace_``; a dashed line marks
    the chosen K, the posterior mode of ``row_k_posterior_`` / ``column_k_posterior_`` with its probability
    (``n_row_clusters_`` / ``n_column_clusters_`` for a model without them), and a dotted one
    ``n_row_clusters_`` / ``n_column_clusters_`` where the merges of the mixtures' clusters and the refinement left
    another number of clusters.

    Parameters
    ----------
    model : fitted CDP (or any object with row_dpmm_, column_dpmm_)
    axes : pair of matplotlib Axes, optional
    figsize : (float, float)
    side_names : (str, str), default=("row", "column")
        What the rows and the columns are, singular (their plurals add an "s"), for the titles and axes.

    Returns
    -------
    matplotlib.figure.Figure
    """
    side_names = _check_model(model, ("row_dpmm_", "column_dpmm_"), side_names)
    figure, (row_ax, column_ax) = _new_axes(axes, figsize, ncols=2)
    for ax, side, name in zip((row_ax, column_ax), ("row", "column"), side_names):
        _plot_one_trace(
            ax,
            np.asarray(getattr(model, f"{side}_dpmm_").n_clusters_trace_),
            getattr(model, f"n_{side}_clusters_", None),
            getattr(model, f"{side}_k_posterior_", None),
            name,
        )
    return figure.figure


@_closing_its_figure_on_error
def plot_theta(
    model, ax=None, *, annotate=None, figsize=(6.5, 5.0), cmap="viridis", side_names=("row", "column")
):
    """Heatmap of ``model.theta_`` (K_r x K_c), the joint probability of a token's row and column clusters.

    Values are written in the cells when ``annotate`` (default: at most 100 cells); the blocks of the
    biclusters (``model.bicluster_pairs_`` and the clusters each joins, if present) are outlined in red.

    Parameters
    ----------
    model : fitted CDP (or any object with theta_)
    ax : matplotlib Axes, optional
    annotate : bool, optional
    figsize : (float, float)
    cmap : str
    side_names : (str, str), default=("row", "column")
        What the rows and the columns are, singular (their plurals add an "s"), for the titles and axes.

    Returns
    -------
    matplotlib.figure.Figure
    """
    row, column = _check_model(model, ("theta_",), side_names)
    theta = np.asarray(model.theta_, dtype=np.float64)
    if theta.ndim != 2:
        raise ValueError(f"theta_ must be 2-dimensional, got shape {theta.shape}")
    n_row_clusters, n_column_clusters = theta.shape
    figure, ax = _new_axes(ax, figsize)
    shown = ax.imshow(theta, cmap=cmap, aspect="auto", interpolation="nearest", vmin=0.0)
    figure.colorbar(shown, ax=ax, fraction=0.05, pad=0.02).set_label("θ[k, l]")
    if annotate is None:
        annotate = theta.size <= 100
    if annotate:
        threshold = 0.5 * (theta.max() + theta.min())
        fontsize = max(6.0, min(10.0, 80.0 / max(n_row_clusters, n_column_clusters)))
        for (k, l), value in np.ndenumerate(theta):
            ax.text(
                l,
                k,
                f"{value:.3f}",
                ha="center",
                va="center",
                fontsize=fontsize,
                color="black" if value > threshold else "white",
            )
    blocks = sorted({(k, l) for b in range(len(getattr(model, "bicluster_pairs_", ())))
                     for k, l in itertools.product(*_joined_clusters(model, b))})
    if blocks:
        from matplotlib.patches import Rectangle

        for b, (k, l) in enumerate(blocks):
            ax.add_patch(
                Rectangle(
                    (l - 0.5, k - 0.5),
                    1,
                    1,
                    fill=False,
                    edgecolor="tab:red",
                    linewidth=2.0,
                    label="bicluster block" if b == 0 else None,
                )
            )
        ax.legend(loc="upper left", bbox_to_anchor=(0.0, -0.12), fontsize=8, frameon=False)
    for axis, n in ((ax.yaxis, n_row_clusters), (ax.xaxis, n_column_clusters)):
        _set_fitting_ticks(axis, np.arange(n), range(n))
    ax.set_xlabel(f"{column} cluster l")
    ax.set_ylabel(f"{row} cluster k")
    ax.set_title(f"θ: joint probability of {row} and {column} clusters ({n_row_clusters} x {n_column_clusters})")
    return figure.figure


def _plot_one_membership(ax, membership, labels, side, what, max_bins):
    """One side's ``membership`` (n_items, K) into ``ax``, items sorted by ``labels`` (n_items,); ``side``: "row"
    or "column", ``what``: its name, singular."""
    membership = np.asarray(membership, dtype=np.float64)
    labels = np.asarray(labels)
    n_items, n_clusters = membership.shape
    if labels.shape != (n_items,):
        raise ValueError(
            f"{side}_membership_ has {n_items} {side}s but there are {labels.size} {side} labels"
        )
    own = membership[np.arange(n_items), np.clip(labels, 0, n_clusters - 1)]
    order = _display_order(labels, key=-own)
    # averaging bins of consecutive sorted items: imshow's own down-sampling would blur across clusters
    image = np.asarray(_bin_matrix(n_items, order, max_bins) @ membership)
    shown = ax.imshow(
        image,
        cmap="viridis",
        aspect="auto",
        interpolation="nearest",
        vmin=0.0,
        vmax=1.0,
        extent=(-0.5, n_clusters - 0.5, n_items, 0),
    )
    sorted_labels = labels[order]
    for position in _cluster_boundaries(sorted_labels):
        ax.axhline(position, color="white", linewidth=0.6)
    _label_ticks(ax.yaxis, sorted_labels, None)
    _set_fitting_ticks(ax.xaxis, np.arange(n_clusters), range(n_clusters))
    ax.set_xlabel(f"{what} cluster")
    ax.set_ylabel(f"{what}s, sorted by cluster (label on the axis)")
    ax.set_title(f"{what.capitalize()} membership ({n_items} {what}s x {n_clusters} clusters)")
    return shown


@_closing_its_figure_on_error
def plot_membership(model, axes=None, *, max_bins=500, figsize=(10.0, 5.0), side_names=("row", "column")):
    """``row_membership_`` and ``column_membership_`` as heatmaps (share of each row's/column's tokens per
    cluster), items sorted by label (-1 last; ``row_labels_``, whose clusters are the topics) and, within a
    cluster, by their membership in it.

    More than ``max_bins`` items are drawn as ``max_bins`` bins of consecutive sorted items (their mean).

    Parameters
    ----------
    model : fitted CDP (or any object with row_labels_, column_labels_, row_membership_, column_membership_)
    axes : pair of matplotlib Axes, optional
    max_bins : int
        Most image rows drawn per panel.
    figsize : (float, float)
    side_names : (str, str), default=("row", "column")
        What the rows and the columns are, singular (their plurals add an "s"), for the titles and axes.

    Returns
    -------
    matplotlib.figure.Figure
    """
    side_names = _check_model(
        model, ("row_labels_", "column_labels_", "row_membership_", "column_membership_"), side_names
    )
    max_bins = check_int(max_bins, "max_bins", minimum=1)
    figure, (row_ax, column_ax) = _new_axes(axes, figsize, ncols=2)
    for ax, side, name in zip((row_ax, column_ax), ("row", "column"), side_names):
        shown = _plot_one_membership(
            ax, getattr(model, f"{side}_membership_"), getattr(model, f"{side}_labels_"), side, name, max_bins
        )
    figure.colorbar(shown, ax=[row_ax, column_ax], fraction=0.04, pad=0.02).set_label(
        "membership (share of tokens)"
    )
    return figure.figure
