"""Plaid model biclustering (Lazzeroni & Owen 2002) fitted as in Turner, Bailey & Krzanowski (2005)."""

from __future__ import annotations

import numbers
from typing import NamedTuple

import numpy as np

from .._validation import check_bool, check_int, keeping_state_on_failure
from ._preprocess import Baseline, as_generator, empty_biclusters, preprocess, validate_input


class _Layer(NamedTuple):
    rows: np.ndarray  # bool (n_rows,)
    columns: np.ndarray  # bool (n_cols,)
    mean: float  # mu
    row_effects: np.ndarray  # alpha (n_rows,), 0 outside the layer
    column_effects: np.ndarray  # beta (n_cols,), 0 outside the layer

    def fitted(self):
        """The layer's fitted values on its own cells, shape (|rows|, |columns|)."""
        return self.mean + self.row_effects[self.rows, None] + self.column_effects[self.columns]

    def sum_of_squares(self):
        return float(np.sum(self.fitted() ** 2))


def _parse_fit_model(fit_model):
    """(row_effects, column_effects) from biclust's formula terms: "m", "m + a", "m + b" or "m + a + b"."""
    terms = set(str(fit_model).replace(" ", "").replace("y~", "").split("+"))
    if "m" not in terms or not terms <= {"m", "a", "b"}:
        raise ValueError(f"fit_model must be 'm', 'm + a', 'm + b' or 'm + a + b', got {fit_model!r}")
    return "a" in terms, "b" in terms


def _fit_layer(Z, rows, columns, row_effects, column_effects):
    """Least-squares effects of one layer on ``Z[rows][:, columns]`` (balanced two-way layout)."""
    sub = Z[np.ix_(rows, columns)]
    mean = sub.mean()
    alpha = np.zeros(Z.shape[0])
    beta = np.zeros(Z.shape[1])
    if row_effects:
        alpha[rows] = sub.mean(axis=1) - mean
    if column_effects:
        beta[columns] = sub.mean(axis=0) - mean
    return _Layer(rows, columns, float(mean), alpha, beta)


def _two_means(points, n_iter, rng):
    """One 2-means run on the rows of ``points``: k-means++ seeding, then up to ``n_iter`` Lloyd iterations.
    Returns ``(labels, within-cluster sum of squares)``, or None when all points coincide."""
    first = points[rng.integers(points.shape[0])]
    weight = ((points - first) ** 2).sum(axis=1)
    if weight.sum() == 0:
        return None
    centres = np.array([first, points[rng.choice(points.shape[0], p=weight / weight.sum())]])
    labels = None
    for _ in range(n_iter):
        distance = ((points[:, None, :] - centres[None, :, :]) ** 2).sum(axis=2)
        new_labels = np.argmin(distance, axis=1)
        if labels is not None and np.array_equal(new_labels, labels):
            break
        labels = new_labels
        centres = np.array([points[labels == c].mean(axis=0) for c in (0, 1)])
    inertia = sum(((points[labels == c] - centres[c]) ** 2).sum() for c in (0, 1))
    return labels, inertia


def _smaller_kmeans_cluster(points, n_iter, n_init, rng):
    """The smaller cluster (bool mask over the rows of ``points``) of the best of ``n_init`` 2-means runs."""
    runs = [run for run in (_two_means(points, n_iter, rng) for _ in range(n_init)) if run is not None]
    if not runs:
        return np.zeros(points.shape[0], dtype=bool)
    labels = min(runs, key=lambda run: run[1])[0]
    sizes = np.bincount(labels, minlength=2)
    return labels == (0 if sizes[0] < sizes[1] else 1)


class Plaid(Baseline):
    """Plaid model biclustering with Turner et al.'s binary least-squares fitting (biclust's ``BCPlaid``).

    The matrix is modelled as a sum of layers,
    ``Z_ij = sum_k (mu_k + alpha_ik + beta_jk) rho_ik kappa_jk + e_ij``, with binary row and column
    memberships ``rho``, ``kappa``; layer 0 is an optional background covering the whole matrix. Layers are
    added one at a time to the residual matrix:

    1. Start: 2-means on the rows of the residual (best of ``n_init`` runs of k-means++ seeding and
       ``iter_startup`` Lloyd iterations), keep the smaller cluster; likewise on the columns.
    2. Up to ``iter_layer`` alternating updates: refit ``mu, alpha, beta`` by least squares on the current
       cells, then row i joins iff
       ``sum_{j in layer} (Z_ij - mu - alpha_i - beta_j)^2 < sum_{j in layer} Z_ij^2`` (``alpha_i = 0`` for a
       row outside the layer), then the same for the columns; stop early once the memberships repeat.
    3. Pruning, ``round(iter_layer / 2)`` rounds of a row then a column release: with
       ``totdf = |rows| |cols|`` and ``resdf = totdf - (number of layer parameters)``, a row stays iff
       ``RSS_i / resdf < (1 - row_release) * TSS_i / totdf`` (its residual and raw sums of squares over the
       layer's columns); columns likewise with ``col_release``.
    4. Significance: the layer's importance ``sum (mu + alpha_i + beta_j)^2`` over its cells must exceed that
       of every one of ``shuffle`` layers found the same way in a random permutation of the residual matrix's
       cells. Otherwise (or if the layer is empty) the search stops.
    5. The layer's fit is subtracted from the residual; with ``back_fit > 0`` every earlier layer (background
       included) is then refitted that many times given the others.

    Parameters
    ----------
    cluster : {"b", "r", "c"}, default="b"
        Cluster both rows and columns, only rows (every layer spans all columns) or only columns.
    fit_model : str, default="m + a + b"
        Terms of each layer (biclust's formula ``y ~ m + a + b``): ``m`` the layer mean, ``a`` row effects,
        ``b`` column effects. One of "m", "m + a", "m + b", "m + a + b".
    background : bool, default=True
        Fit a background layer over the whole matrix first.
    row_release, col_release : float in [0, 1] or None, default=0.7
        Pruning thresholds (biclust recommends 0.5-0.7); None skips that pruning.
    shuffle : int, default=3
        Number of permuted matrices in each layer's significance test (0: accept every non-empty layer).
    back_fit : int, default=0
        Refitting passes over all layers after each new layer.
    max_layers : int, default=20
        Most bicluster layers (the background not counted).
    iter_startup : int, default=5
        Lloyd iterations of each 2-means start.
    iter_layer : int, default=10
        Membership updates per layer (and twice ``round(iter_layer / 2)`` release steps).
    n_init : int, default=5
        2-means runs per start; the one with the smallest within-cluster sum of squares is used. biclust makes
        a single Hartigan-Wong run from random centres; a single Lloyd run misses a planted layer far more
        often (measured: no layer in 9 of 30 replicates of biclust's example, against 0 of 30 with 5 runs).
    preprocess : {"log1p", None, "standardize", "binarize"}, default="log1p"
        Transformation applied first (see ``conjoined.baselines._preprocess.preprocess``); the paper ran Plaid
        on ``log(X + 1)``.
    random_state : None, int, RandomState or Generator
        Starts and permutations.

    Attributes
    ----------
    rows_ : ndarray of bool, shape (n_biclusters_, n_rows)
    columns_ : ndarray of bool, shape (n_biclusters_, n_cols)
    n_biclusters_ : int
        Number of significant layers (background excluded).
    layer_means_ : ndarray, shape (n_biclusters_,)
        mu of each layer.
    layer_row_effects_ : ndarray, shape (n_biclusters_, n_rows)
        alpha of each layer (0 for rows outside it).
    layer_column_effects_ : ndarray, shape (n_biclusters_, n_cols)
        beta of each layer (0 for columns outside it).
    layer_sum_of_squares_ : ndarray, shape (n_biclusters_,)
        Importance of each layer, ``sum (mu + alpha_i + beta_j)^2`` over its cells.

    Notes
    -----
    Input is densified (see ``conjoined.baselines._preprocess``). Differences from biclust: the 2-means start
    is the best of ``n_init`` k-means++/Lloyd runs (R's ``kmeans`` makes one Hartigan-Wong run), each
    permutation is drawn afresh from the residual (biclust permutes the previous permutation), and releases
    apply only to the dimensions being clustered (biclust also releases columns when ``cluster="r"``).

    References
    ----------
    Lazzeroni, L. and Owen, A. (2002). Plaid models for gene expression data. Statistica Sinica 12, 61-86.
    Turner, H., Bailey, T. and Krzanowski, W. (2005). Improved biclustering of microarray data demonstrated
    through systematic performance tests. Computational Statistics & Data Analysis 48, 235-254.
    """

    def __init__(self, cluster="b", fit_model="m + a + b", background=True, row_release=0.7, col_release=0.7,
                 shuffle=3, back_fit=0, max_layers=20, iter_startup=5, iter_layer=10, n_init=5,
                 preprocess="log1p", random_state=None):
        self.cluster = cluster
        self.fit_model = fit_model
        self.background = background
        self.row_release = row_release
        self.col_release = col_release
        self.shuffle = shuffle
        self.back_fit = back_fit
        self.max_layers = max_layers
        self.iter_startup = iter_startup
        self.iter_layer = iter_layer
        self.n_init = n_init
        self.preprocess = preprocess
        self.random_state = random_state

    def _check_params(self):
        if self.cluster not in ("b", "r", "c"):
            raise ValueError(f"cluster must be 'b', 'r' or 'c', got {self.cluster!r}")
        check_bool(self.background, "background")
        for name in ("row_release", "col_release"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, numbers.Real)
                                      or not 0 <= value <= 1):
                raise ValueError(f"{name} must be None or a number in [0, 1], got {value!r}")
        for name, minimum in (("shuffle", 0), ("back_fit", 0), ("max_layers", 0), ("iter_startup", 1),
                              ("iter_layer", 1), ("n_init", 1)):
            check_int(getattr(self, name), name, minimum=minimum)
        return _parse_fit_model(self.fit_model)

    def _search_layer(self, Z, rng, effects):
        """One candidate layer in the residual ``Z`` (steps 1-3), or None if its rows or columns run out.

        ``effects`` is ``(row_effects, column_effects)``: which effects each layer has."""
        n_rows, n_cols = Z.shape
        row_effects, column_effects = effects
        cluster_rows, cluster_columns = self.cluster in ("b", "r"), self.cluster in ("b", "c")
        rows = np.ones(n_rows, dtype=bool)
        columns = np.ones(n_cols, dtype=bool)
        if cluster_rows:
            rows = _smaller_kmeans_cluster(Z, self.iter_startup, self.n_init, rng)
        if cluster_columns:
            columns = _smaller_kmeans_cluster(Z.T, self.iter_startup, self.n_init, rng)
        if not rows.any() or not columns.any():
            return None
        layer = _fit_layer(Z, rows, columns, row_effects, column_effects)

        for _ in range(self.iter_layer):
            previous = (rows, columns)
            if cluster_rows:
                Zc = Z[:, columns]
                residual = Zc - layer.mean - layer.row_effects[:, None] - layer.column_effects[columns]
                rows = (residual**2).sum(axis=1) < (Zc**2).sum(axis=1)
                if not rows.any():
                    return None
            if cluster_columns:
                Zr = Z[rows]
                residual = Zr - layer.mean - layer.row_effects[rows, None] - layer.column_effects
                columns = (residual**2).sum(axis=0) < (Zr**2).sum(axis=0)
                if not columns.any():
                    return None
            layer = _fit_layer(Z, rows, columns, row_effects, column_effects)
            if np.array_equal(rows, previous[0]) and np.array_equal(columns, previous[1]):
                break

        releases = [(axis, threshold) for axis, threshold, active in
                    ((0, self.row_release, cluster_rows), (1, self.col_release, cluster_columns))
                    if active and threshold is not None]
        if releases:
            for _ in range(round(self.iter_layer / 2)):
                previous = (rows, columns)
                for axis, threshold in releases:
                    n_layer_rows, n_layer_columns = rows.sum(), columns.sum()
                    total_df = n_layer_rows * n_layer_columns
                    residual_df = total_df - (1 + row_effects * (n_layer_rows - 1)
                                              + column_effects * (n_layer_columns - 1))
                    if residual_df <= 0:
                        return None
                    sub = Z[np.ix_(rows, columns)]
                    residual_ss = ((sub - layer.fitted()) ** 2).sum(axis=1 - axis)
                    total_ss = (sub**2).sum(axis=1 - axis)
                    keep = residual_ss / residual_df < (1 - threshold) * total_ss / total_df
                    if not keep.any():
                        return None
                    if axis == 0:
                        rows = rows.copy()
                        rows[rows] = keep
                    else:
                        columns = columns.copy()
                        columns[columns] = keep
                    layer = _fit_layer(Z, rows, columns, row_effects, column_effects)
                if np.array_equal(rows, previous[0]) and np.array_equal(columns, previous[1]):
                    break
        return layer

    @keeping_state_on_failure
    def fit(self, X, y=None):
        """Fit plaid layers to ``X`` until a layer is not significant or ``max_layers`` are found.

        Parameters
        ----------
        X : array-like or sparse matrix, shape (n_rows, n_cols)
            Real values, finite, at least 2 x 2 (non-negative for the log-based preprocessing).
        y : ignored

        Returns
        -------
        self
        """
        effects = self._check_params()
        Z = preprocess(validate_input(self, X), self.preprocess)
        rng = as_generator(self.random_state)
        n_rows, n_cols = Z.shape
        row_effects, column_effects = effects

        fitted_layers = []
        if self.background:
            everything = (np.ones(n_rows, dtype=bool), np.ones(n_cols, dtype=bool))
            background = _fit_layer(Z, *everything, row_effects, column_effects)
            Z -= background.fitted()
            fitted_layers.append(background)
        n_found = 0
        while n_found < self.max_layers:
            layer = self._search_layer(Z, rng, effects)
            if layer is None:
                break
            importance = layer.sum_of_squares()
            permuted_importance = 0.0
            for _ in range(self.shuffle):
                permuted = rng.permutation(Z.ravel()).reshape(Z.shape)
                candidate = self._search_layer(permuted, rng, effects)
                if candidate is not None:
                    permuted_importance = max(permuted_importance, candidate.sum_of_squares())
            if self.shuffle > 0 and importance <= permuted_importance:
                break
            Z[np.ix_(layer.rows, layer.columns)] -= layer.fitted()
            fitted_layers.append(layer)
            n_found += 1
            for _ in range(self.back_fit):
                for index, old in enumerate(fitted_layers):
                    cells = np.ix_(old.rows, old.columns)
                    Z[cells] += old.fitted()
                    fitted_layers[index] = _fit_layer(Z, old.rows, old.columns, row_effects, column_effects)
                    Z[cells] -= fitted_layers[index].fitted()

        layers = fitted_layers[1:] if self.background else fitted_layers
        if layers:
            self.rows_ = np.array([layer.rows for layer in layers])
            self.columns_ = np.array([layer.columns for layer in layers])
        else:
            self.rows_, self.columns_ = empty_biclusters(n_rows, n_cols)
        self.layer_means_ = np.array([layer.mean for layer in layers], dtype=np.float64)
        self.layer_row_effects_ = np.array([layer.row_effects for layer in layers]).reshape(-1, n_rows)
        self.layer_column_effects_ = np.array([layer.column_effects for layer in layers]).reshape(-1, n_cols)
        self.layer_sum_of_squares_ = np.array([layer.sum_of_squares() for layer in layers], dtype=np.float64)
        self.n_biclusters_ = len(layers)
        return self
