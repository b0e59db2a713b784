"""DT2B, Dual Topics to Biclusters (Rugeles, Dai, Wang, Gao, Zhang 2017), the baseline of the paper's Tables 2-3.

Every token of the count matrix gets a row topic and a column topic; the allocation starts uniformly at random and
is resampled with the dual-topic collapsed Gibbs sampler of :mod:`conjoined.reassign` (K_r and K_c given). The
biclusters are read off the count matrices by thresholding them at their mean plus standard deviation
(:func:`conjoined.extract.extract_biclusters` with ``rule="dt2b"``).
"""

from __future__ import annotations

import numpy as np

from .._validation import check_int, check_positive, keeping_state_on_failure
from ..extract import extract_biclusters, topic_parameters
from ..reassign import reassign_tokens
from ._preprocess import Baseline, validate_input

__all__ = ["DT2B"]


class DT2B(Baseline):
    """Dual-topic biclustering of a count matrix with fixed numbers of row and column topics.

    Parameters
    ----------
    n_row_clusters, n_column_clusters : int, default=5
        K_r and K_c, the numbers of row and column topics.
    a_r, a_c : float, default=0.5
        Dirichlet hyperparameters of the topics' distributions over rows and over columns.
    lam : float, default=0.5
        Dirichlet hyperparameter of the joint distribution theta of (row topic, column topic).
    n_sweeps : int, default=500
        Gibbs sweeps over all tokens.
    random_state : None, int, RandomState or Generator
        Seeds the random start and the sampler; same seed, same result.

    Attributes
    ----------
    rows_ : ndarray of bool, shape (n_biclusters_, n_rows)
    columns_ : ndarray of bool, shape (n_biclusters_, n_cols)
    n_biclusters_ : int
        Number of biclusters found.
    bicluster_pairs_ : ndarray of int, shape (n_biclusters_, 2)
        (row topic, column topic) of each bicluster.
    bicluster_strength_ : ndarray, shape (n_biclusters_,)
        Token count ``n_kl`` of each bicluster's pair (biclusters are sorted by it, largest first).
    theta_ : ndarray, shape (K_r, K_c)
        Joint distribution of a token's (row topic, column topic).
    phi_rows_ : ndarray, shape (n_rows, K_r)
        Column k is row topic k's distribution over the rows.
    phi_columns_ : ndarray, shape (n_cols, K_c)
    row_membership_ : ndarray, shape (n_rows, K_r)
        Share of each row's tokens in each row topic (zeros for a row without tokens).
    column_membership_ : ndarray, shape (n_cols, K_c)
    counts_ : TokenCounts
        Final token counts n_kl, n_ik, n_jl.
    n_row_clusters_, n_column_clusters_ : int

    Examples
    --------
    >>> from conjoined.datasets import make_cdp_case
    >>> from conjoined.baselines.dt2b import DT2B
    >>> X, rows, columns = make_cdp_case(2, random_state=0)
    >>> model = DT2B(n_row_clusters=3, n_column_clusters=3, n_sweeps=100, random_state=0).fit(X)
    >>> model.rows_.shape[1], model.columns_.shape[1]
    (20, 20)
    """

    def __init__(
        self,
        n_row_clusters=5,
        n_column_clusters=5,
        a_r=0.5,
        a_c=0.5,
        lam=0.5,
        n_sweeps=500,
        random_state=None,
    ):
        self.n_row_clusters = n_row_clusters
        self.n_column_clusters = n_column_clusters
        self.a_r = a_r
        self.a_c = a_c
        self.lam = lam
        self.n_sweeps = n_sweeps
        self.random_state = random_state

    @keeping_state_on_failure
    def fit(self, X, y=None):
        """Sample the token topics of ``X`` (count matrix, shape (n_rows, n_cols)) and extract the biclusters.

        Parameters
        ----------
        X : array-like or sparse matrix of non-negative integer counts, shape (n_rows, n_cols)
            Not all zeros. The numbers of topics may exceed the numbers of rows and columns (the paper's Table 3
            runs K = 25 on the 20 x 20 case 2).
        y : ignored

        Returns
        -------
        self
        """
        X = validate_input(self, X, min_rows=1, min_cols=1, counts=True)
        n_row_clusters = check_int(self.n_row_clusters, "n_row_clusters", minimum=1)
        n_column_clusters = check_int(self.n_column_clusters, "n_column_clusters", minimum=1)
        if X.sum() == 0:
            raise ValueError("X is all zeros: there are no tokens to bicluster")
        a_r = check_positive(self.a_r, "a_r")
        a_c = check_positive(self.a_c, "a_c")
        lam = check_positive(self.lam, "lam")
        n_rows, n_cols = X.shape
        counts = reassign_tokens(
            X,
            np.zeros(n_rows, dtype=np.int64),
            np.zeros(n_cols, dtype=np.int64),
            n_row_clusters,
            n_column_clusters,
            a_r=a_r,
            a_c=a_c,
            lam=lam,
            n_sweeps=self.n_sweeps,
            method="gibbs",
            init="random",
            random_state=self.random_state,
        )
        parameters = topic_parameters(counts, a_r=a_r, a_c=a_c, lam=lam)
        biclusters = extract_biclusters(X, counts, rule="dt2b")
        self.counts_ = counts
        self.theta_ = parameters.theta
        self.phi_rows_ = parameters.phi_rows
        self.phi_columns_ = parameters.phi_columns
        self.row_membership_ = parameters.row_membership
        self.column_membership_ = parameters.column_membership
        self.rows_ = biclusters.rows
        self.columns_ = biclusters.columns
        self.bicluster_pairs_ = biclusters.pairs
        self.bicluster_strength_ = biclusters.strength
        self.n_biclusters_ = len(biclusters.pairs)
        self.n_row_clusters_ = n_row_clusters
        self.n_column_clusters_ = n_column_clusters
        return self

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.positive_only = True
        # sklearn's tag for non-negative integer input: its checks then feed counts, which is what DT2B models
        tags.input_tags.categorical = True
        return tags
