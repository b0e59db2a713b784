"""Spectral biclustering (Kluger et al. 2003): a thin wrapper over scikit-learn's ``SpectralBiclustering``."""

from __future__ import annotations

import numbers
import warnings

import numpy as np
from sklearn.cluster import SpectralBiclustering

from .._validation import keeping_state_on_failure
from ._preprocess import Baseline, preprocess, validate_input


class Spectral(Baseline):
    """Kluger et al.'s spectral (checkerboard) biclustering: scikit-learn's ``SpectralBiclustering``.

    Rows and columns are each partitioned by k-means on the leading singular vectors of the normalised matrix;
    every (row cluster, column cluster) pair is a bicluster, so the biclusters tile the matrix. With the
    defaults the normalisation is Kluger's ``"log"``: scikit-learn shifts the matrix so that its minimum is 1,
    takes the log and removes row and column means. For a count matrix containing a zero this is
    ``log(X + 1)`` double-centred, the normalisation of biclust's ``BCSpectral`` on raw counts (its default
    ``normalization="log"``), which the paper ran. So no further preprocessing is needed
    (``preprocess="log1p"`` together with ``method="log"`` would take the log twice).

    The rest of ``BCSpectral`` differs and is not reproduced: it clusters each of its
    ``numberOfEigenvalues=3`` leading singular vectors on its own, with a number of clusters chosen for each
    vector, forms the biclusters of every pair of vectors, and keeps those whose within variation is below
    ``withinVar`` and that have more than two rows and two columns. The paper reports no score for it.

    Parameters
    ----------
    n_clusters : int or (int, int), default=3
        Number of row and column clusters (one int for both); the result has their product of biclusters.
    method : {"log", "bistochastic", "scale"}, default="log"
        scikit-learn's normalisation; ``"log"`` is Kluger's (and, for counts, biclust's default).
    n_components, n_best : int, default=6, 3
        Singular vectors computed / kept (as in scikit-learn).
    preprocess : {None, "log1p", "standardize", "binarize"}, default=None
        Transformation applied before scikit-learn (see ``conjoined.baselines._preprocess.preprocess``).
    random_state : None, int, RandomState or Generator
        Passed to scikit-learn (a Generator is turned into an int seed drawn from it).

    Attributes
    ----------
    rows_ : ndarray of bool, shape (n_biclusters_, n_rows)
    columns_ : ndarray of bool, shape (n_biclusters_, n_cols)
    n_biclusters_ : int
        ``n_row_clusters * n_column_clusters``.
    row_labels_ : ndarray of int, shape (n_rows,)
    column_labels_ : ndarray of int, shape (n_cols,)

    Notes
    -----
    Input is densified (see ``conjoined.baselines._preprocess``); the ``"log"`` method needs dense data
    anyway.

    References
    ----------
    Kluger, Y., Basri, R., Chang, J. T. and Gerstein, M. (2003). Spectral biclustering of microarray data:
    coclustering genes and conditions. Genome Research 13(4), 703-716.
    """

    def __init__(self, n_clusters=3, method="log", n_components=6, n_best=3, preprocess=None,
                 random_state=None):
        self.n_clusters = n_clusters
        self.method = method
        self.n_components = n_components
        self.n_best = n_best
        self.preprocess = preprocess
        self.random_state = random_state

    @keeping_state_on_failure
    def fit(self, X, y=None):
        """Partition the rows and columns of ``X`` into a checkerboard of biclusters.

        Parameters
        ----------
        X : array-like or sparse matrix, shape (n_rows, n_cols)
            Real values, finite, at least 2 x 2.
        y : ignored

        Returns
        -------
        self
        """
        data = preprocess(validate_input(self, X), self.preprocess)
        clusters = self.n_clusters if isinstance(self.n_clusters, (tuple, list)) else (self.n_clusters,) * 2
        for what, wanted, size in zip(("row", "column"), clusters, data.shape):
            if isinstance(wanted, numbers.Integral) and wanted > size:
                raise ValueError(f"n_clusters asks for {wanted} {what} clusters, more than X's {size} {what}s")
        if np.ptp(data) == 0:
            warnings.warn("X is constant: every partition of it fits alike, and the checkerboard returned is "
                          "arbitrary", UserWarning, stacklevel=3)
        seed = self.random_state
        if isinstance(seed, np.random.Generator):
            seed = int(seed.integers(np.iinfo(np.int32).max))
        model = SpectralBiclustering(n_clusters=self.n_clusters, method=self.method,
                                     n_components=self.n_components, n_best=self.n_best, random_state=seed)
        model.fit(data)
        self.rows_ = np.asarray(model.rows_, dtype=bool)
        self.columns_ = np.asarray(model.columns_, dtype=bool)
        self.row_labels_ = model.row_labels_
        self.column_labels_ = model.column_labels_
        self.n_biclusters_ = self.rows_.shape[0]
        return self
