"""Conjugate priors of the Dirichlet-process mixture: one class per likelihood.

A prior object knows three things about a batch of clusters, given their sufficient statistics
(``SufficientStats``, with any leading batch shape):

- ``log_marginal(stats)``: the log prior-predictive (marginal) likelihood of the points of each cluster, up to
  terms that are the same for every partition of the data (so they cancel in split/merge ratios);
- ``posterior(stats)``: the conjugate posterior's hyper-parameters;
- ``sample(posterior, rng)``: a draw of cluster parameters, in the form the likelihood kernels use.

Count priors (``Multinomial``, ``PoissonGamma``) score points as ``x . log_rate + offset``; the Gaussian prior
(``NormalInverseWishart``) as ``-||U (x - mu)||^2 / 2 + log|U| - d/2 log(2 pi)`` with ``U^T U`` the precision.
"""

from __future__ import annotations

import copy
import inspect
import warnings
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp
from scipy.linalg import solve_triangular
from scipy.special import gammaincc, gammainccinv, gammaln

from .._stack import user_stacklevel
from .._validation import MAX_EXACT_TOTAL, check_non_negative, check_positive, rounding_hint
from . import kernels

# Largest |X| the Gaussian kernels take: they compute in float32, and X - mean must not overflow.
FLOAT32_LIMIT = float(np.finfo(np.float32).max) / 2
# Narrowest span of X's columns the Gaussian kernels resolve: precision factors grow as 1 / span (and faster in
# small clusters), and must stay far below float32's largest number (3.4e38). The default scale is floored there.
NARROWEST_SPAN = 1e-30
# Narrowest span of the widest column of X that the Normal-inverse-Wishart prior takes: ten orders of magnitude
# above the floor, so that its default scale (a tenth of the mean variance) never reaches the floor, and data at
# any scale it takes are clustered alike (at 1e-31 times their scale, three clusters became two).
NARROWEST_DATA_SPAN = 1e-20


class SufficientStats(NamedTuple):
    """Sufficient statistics of a batch of clusters (leading shape ``B``, e.g. (K,) or (K, 2)).

    n : (*B,) number of points; s1 : (*B, d) sum of the points; s2 : (*B, d, d) sum of outer products (Gaussian
    prior only, else None).
    """

    n: np.ndarray
    s1: np.ndarray
    s2: np.ndarray | None = None

    def sum(self, axis):
        """Statistics of the union of clusters along ``axis``."""
        return SufficientStats(
            self.n.sum(axis=axis), self.s1.sum(axis=axis), None if self.s2 is None else self.s2.sum(axis=axis)
        )

    def take(self, index, axis=0):
        return SufficientStats(
            np.take(self.n, index, axis=axis),
            np.take(self.s1, index, axis=axis),
            None if self.s2 is None else np.take(self.s2, index, axis=axis),
        )

    def kernel_arrays(self):
        """``(n, s1)`` as C-contiguous float64 arrays, the form the count kernels take."""
        return np.ascontiguousarray(self.n, dtype=np.float64), np.ascontiguousarray(self.s1, dtype=np.float64)

    def __add__(self, other):
        return SufficientStats(
            self.n + other.n, self.s1 + other.s1, None if self.s2 is None else self.s2 + other.s2
        )


def sample_log_dirichlet(rng, concentration):
    """Log of one Dirichlet draw, stable for tiny concentrations.

    ``standard_gamma(a)`` underflows to 0 for small ``a``; ``log G(a) = log G(a + 1) + log(U) / a`` does not.
    ``concentration`` (all > 0) may have a leading batch shape; the last axis is the simplex. The draws come from
    ``rng`` (a numpy Generator) inside a numba kernel: this is called several times per iteration, often on
    small arrays, where numpy's per-call costs would dominate.
    """
    a = np.asarray(concentration, dtype=np.float64)
    rows = np.ascontiguousarray(a.reshape(-1, a.shape[-1]))
    return kernels.log_dirichlet_rows(rng, rows).reshape(a.shape)


# Count data may be fractional on this grid (e.g. counts tempered by a dispersion, ``conjoined.cdp``): sums of
# multiples of 1/1024 are exact in float64, so statistics summed in any order (threads, workers) agree bit for bit.
COUNT_GRID = 1024


class PriorParameters:
    """scikit-learn's parameter protocol for a prior: ``get_params`` and ``set_params`` over its constructor's
    arguments, so that a ``DPMM``'s prior has nested parameters (``set_params(prior__kappa=0.1)``, a grid
    search), a repr of the arguments given (arrays too), and a clone that is a deep copy (a fitted prior keeps
    what it learnt from the data)."""

    @classmethod
    def _parameters(cls):
        return {name: parameter.default for name, parameter in inspect.signature(cls.__init__).parameters.items()
                if name != "self"}

    def get_params(self, deep=True):
        return {name: getattr(self, name) for name in self._parameters()}

    def set_params(self, **params):
        names = self._parameters()
        for name, value in params.items():
            if name not in names:
                raise ValueError(f"{type(self).__name__} has no parameter {name!r}; its parameters are "
                                 f"{', '.join(names)}")
            setattr(self, name, value)
        return self

    def __sklearn_clone__(self):
        return copy.deepcopy(self)

    def __repr__(self):
        given = [f"{name}={getattr(self, name)!r}" for name, default in self._parameters().items()
                 if isinstance(getattr(self, name), np.ndarray) or repr(getattr(self, name)) != repr(default)]
        return f"{type(self).__name__}({', '.join(given)})"


class SparseKernelPrior(PriorParameters):
    """Shared behaviour of the priors the sampler runs through the kernels on CSR rows (``kernels.count_*``):
    each point scores ``x . log_rate + offset`` under a cluster's parameters, the statistics are the points' count
    and sum, and sums are exact in any order (threads, workers), which the data's grid ensures."""

    sparse_kernels = True
    sampled_scale = False  # the hyper-parameters are fixed

    def log_marginal(self, stats):
        """Log marginal likelihood of each cluster of the batch (the formula in each prior's class docstring), in
        ``kernels.count_log_marginals``."""
        s1 = np.asarray(stats.s1)
        batch, d = s1.shape[:-1], s1.shape[-1]
        # C-contiguous and writable float64 arrays: one compiled signature of the kernel
        n = np.require(np.reshape(stats.n, -1), np.float64, ["C", "W"])
        flat = np.require(s1.reshape(-1, d), np.float64, ["C", "W"])
        return kernels.count_log_marginals(*self.kernel_args(d), n, flat).reshape(batch)


class CountPrior(SparseKernelPrior):
    """Shared behaviour of the priors for count data (sparse-friendly): non-negative integers, or fractional
    counts that are multiples of 1/1024 (``COUNT_GRID``), whose formulas are the same with lgamma of reals."""

    kind = "counts"

    def check_data(self, X):
        check_non_negative(X)
        values = X.data if sp.issparse(X) else X
        if np.any(values * COUNT_GRID != np.round(values * COUNT_GRID)):
            raise ValueError(
                f"{type(self).__name__} prior needs counts: integers, or fractions that are multiples of "
                f"1/{COUNT_GRID} (their sums are exact in any order); X has other non-integer values "
                f"(np.round(X * {COUNT_GRID}) / {COUNT_GRID} puts them on that grid)"
            )
        whole = np.all(values == np.round(values))
        limit = MAX_EXACT_TOTAL if whole else MAX_EXACT_TOTAL // COUNT_GRID
        total = float(values.sum())
        if total > limit:
            raise ValueError(
                f"X holds {total:,.0f} counts in total; the count priors keep their sums exact up to {limit:,}"
                f"{'' if whole else f' for counts on the 1/{COUNT_GRID} grid'}. Counts this large are usually not "
                "raw counts (scaled or normalised data?)"
            )

    def fitted(self, X):
        """A copy with data-based defaults filled in (see each prior's docstring); ValueError if X is all zeros."""
        if not np.any(X.data if sp.issparse(X) else X):
            raise ValueError(f"X is all zeros: the {type(self).__name__} prior has no counts to cluster by")
        return self

    def kernel_data(self, X):
        """X (n, d) as the kernels take it: CSR counts."""
        return X if sp.issparse(X) else sp.csr_matrix(X)

    def expanded(self, params):
        """``posterior_mean``'s parameters, which cover every feature of X."""
        return params


def _sum_of_log_factorials(X):
    """(n,) sum_f lgamma(x_f + 1) of each row of X (dense or sparse counts)."""
    if sp.issparse(X):
        csr = sp.csr_matrix(X)
        logs = sp.csr_matrix((gammaln(csr.data + 1.0), csr.indices, csr.indptr), shape=csr.shape)
        return np.asarray(logs.sum(axis=1)).ravel()
    return gammaln(np.asarray(X, dtype=np.float64) + 1.0).sum(axis=1)


class Multinomial(CountPrior):
    """Multinomial likelihood with a symmetric Dirichlet(beta) prior on each cluster's feature distribution.

    A point is a count vector over ``d`` features; only the proportions matter (the row total is ignored), which
    suits documents and cells whose totals are nuisance (length, library size).

    log m(X_k) = lgamma(d beta) - lgamma(d beta + n..) + sum_f [lgamma(beta + n_f) - lgamma(beta)]
    (the multinomial coefficients cancel in every ratio between partitions). An all-zero row is as likely in every
    cluster: its cluster follows the DP prior alone.
    """

    def __init__(self, beta=1.0):
        self.beta = beta

    def checkpoint_label(self):
        """The prior's scalar parameters, as checkpoints name it (``checkpoint.prior_description``)."""
        return f"Multinomial(beta={self.beta!r})"

    def fitted(self, X):
        """A copy holding beta as a float, after checking it (ValueError if X is all zeros)."""
        beta = check_positive(self.beta, "Multinomial beta")
        if not np.isfinite(beta * X.shape[1]):
            raise ValueError(f"Multinomial beta={beta!r} is too large: beta x {X.shape[1]} features overflows")
        super().fitted(X)
        return type(self)(beta=beta)

    def posterior(self, stats):
        return stats.s1 + float(self.beta)

    def sample(self, posterior, rng):
        """Returns ``(log_rate (*B, d), offset (*B,))`` with ``log_rate`` = log of a Dirichlet draw."""
        log_theta = sample_log_dirichlet(rng, posterior)
        return log_theta, np.zeros(log_theta.shape[:-1])

    def kernel_args(self, d):
        """``(kind, hyper)`` for the collapsed-predictive kernels."""
        return 0, np.array([float(self.beta), d], dtype=np.float64)

    def posterior_mean(self, stats):
        post = self.posterior(stats)
        return {"theta": post / post.sum(axis=-1, keepdims=True)}

    def expected_params(self, stats):
        mean = self.posterior_mean(stats)["theta"]
        return np.log(mean), np.zeros(mean.shape[:-1])

    def log_point_constant(self, X):
        """(n,) each point's log multinomial coefficient, log(N! / prod x_f!) for its total N: the term of its
        log likelihood that no cluster changes, left out of the kernels' scores."""
        return gammaln(np.asarray(X.sum(axis=1)).ravel() + 1.0) - _sum_of_log_factorials(X)


class PoissonGamma(CountPrior):
    """Independent Poisson counts per feature with a conjugate Gamma(shape, rate) prior on each cluster's rates.

    Unlike ``Multinomial`` the point totals matter: clusters differ by how much they count, not only by their
    proportions (blocks of elevated counts). ``rate=None`` sets ``rate = shape / mean(X)``, so the prior mean rate
    is the data's mean count per entry.

    log m(X_k) = sum_f [a log b - lgamma(a) + lgamma(a + S_f) - (a + S_f) log(b + n)] for n points summing to S_f
    (the 1/x! terms cancel in every ratio between partitions).
    """

    def __init__(self, shape=1.0, rate=None):
        self.shape = shape
        self.rate = rate

    def checkpoint_label(self):
        return f"PoissonGamma(shape={self.shape!r}, rate={self.rate!r})"

    def fitted(self, X):
        shape = check_positive(self.shape, "PoissonGamma shape")
        super().fitted(X)
        if self.rate is not None:
            return type(self)(shape=shape, rate=check_positive(self.rate, "PoissonGamma rate"))
        mean = float(X.sum()) / (X.shape[0] * X.shape[1])
        return type(self)(shape=shape, rate=shape / mean)

    def posterior(self, stats):
        return stats.s1 + float(self.shape), stats.n + float(self.rate)

    def sample(self, posterior, rng):
        """Returns ``(log_rate (*B, d), offset (*B,))``; ``offset = -sum_f rate_f`` (the Poisson normaliser)."""
        shape, rate = posterior
        log_g = np.log(rng.standard_gamma(shape + 1.0)) + np.log(rng.uniform(size=shape.shape)) / shape
        log_rate = log_g - np.log(rate)[..., None]
        return log_rate, -np.exp(log_rate).sum(axis=-1)

    def kernel_args(self, d):
        """``(kind, hyper)`` for the collapsed-predictive kernels."""
        return 1, np.array([float(self.shape), float(self.rate), d], dtype=np.float64)

    def posterior_mean(self, stats):
        shape, rate = self.posterior(stats)
        return {"rate": shape / rate[..., None]}

    def expected_params(self, stats):
        mean = self.posterior_mean(stats)["rate"]
        return np.log(mean), -mean.sum(axis=-1)

    def log_point_constant(self, X):
        """(n,) -sum_f log x_f! of each point: the term of its log likelihood that no cluster changes."""
        return -_sum_of_log_factorials(X)


class NormalInverseWishart(PriorParameters):
    """Gaussian likelihood with unknown mean and full covariance, Normal-Inverse-Wishart prior.

    Sigma ~ IW(nu, psi), mu | Sigma ~ N(mean, Sigma / kappa). Data-based defaults (``None``): ``mean`` = the
    data mean, ``nu`` = d + 3 and ``psi`` = (nu - d - 1) * diag(min(0.1 v, v_f)) with v the data's mean
    per-feature variance (1 if that is 0) and v_f feature f's (not taken where 0; at least ``NARROWEST_SPAN``
    squared, which the float32 kernels resolve): a prior expected cluster covariance that is isotropic, a
    tenth of the data's spread, except that no feature's is above the feature's own variance (by the law of
    total variance a cluster's variance in a feature is on average at most the feature's: the cap keeps a
    feature of small spread, such as the last of many principal components or one in other units, from being
    held far too wide), weak in its degrees of freedom (nu - d = 3): a cluster's posterior covariance weighs
    psi against its points' scatter, n times their variance, so a few dozen points override it where clusters
    are about as spread as it expects. Clusters far tighter need about 0.2 v / (their variance) points before
    their own spread counts, and until then the prior's scale hides what lies within it: two halves of a
    cluster of variance 1e-4 v, 10-20 of its standard deviations apart in one of 8 features, are one cluster
    in the posterior at a thousand points each (by 249 nats at 20), where ``psi="sample"`` (below) parts them.
    A psi proportional to the data covariance would be wrong: the covariance of a mixture is inflated exactly
    along the directions that separate its clusters. ``kappa`` = 0.01 keeps the prior on each cluster's mean
    weak, so that one point is enough to locate a cluster. Columns constant over the data, or linear functions
    of the columns before them, are left out of the likelihood (``FeatureMap``: a direction in which the data
    are flat merges clusters; three clusters in 2-d became one with a constant column or a column that is the
    others' sum); given ``mean`` and ``psi`` are checked, then taken over the other columns; a DPMM's
    ``cluster_params_`` give a left-out column its function of the others (a constant: its value, no
    covariance), and its predictions ignore it. A fitted prior given new data where such a column is no longer
    that function refuses them.

    ``DPMM`` fits on the data centred at their mean, with this prior's mean moved alike (the model is the same),
    and moves the results back: the statistics are raw sums, which hold no digit of the spread of points far from
    the origin (1e8 times their spread). Centring removes a common offset only: clusters 1e7 times their own
    spread from the data's mean still lose precision. The likelihood kernels compute in float32: data with
    values beyond about 1.7e38, or whose columns all span less than 1e-20, are refused (rescale them).

    ``psi="sample"`` makes the clusters' common scale a parameter of the model: ``psi = s I`` with the scale-free
    prior p(s) proportional to 1/s, started at the default above without its cap, and the sampler draws s with
    the partition (``resampled``: each cluster's Sigma_k from its posterior, then s | Sigma_1..K ~ Gamma(K nu d /
    2, rate sum_k tr(Sigma_k^-1) / 2), truncated to s >= 1e-3 times the starting scale (``SCALE_FLOOR``): data
    in a flat subspace, such as points repeated, would otherwise pull s to 0; the chain targets p(partition, s | X)). For
    embeddings of tens of dimensions whose clusters overlap, where a tenth of the data's spread cuts each cluster
    into many tight pieces: on pbmc68k's 50 principal components the posterior mode of K falls from 33-44 to 10-13
    (10 cell types), NMI 0.53 -> 0.63-0.66, and on a 50-d mixture of 15 well-separated clusters it finds the 15
    where the default scale's posterior merges them into 7-8 (``benchmarks/dpmm_embeddings.py``). Not the
    default: in few dimensions the learned scale is tight, and the posterior sets points in the tails of
    well-separated clusters apart in clusters of their own, or cuts a cluster in two (2-d, nine clusters of 100
    points: K of 10 or more in 5-68% of the samples, seeds 0-2).
    """

    kind = "gaussian"
    sparse_kernels = False
    # The sampled scale's floor, relative to the default scale it starts from (class docstring).
    SCALE_FLOOR = 1e-3

    def __init__(self, kappa=0.01, mean=None, nu=None, psi=None):
        self.kappa = kappa
        self.mean = mean
        self.nu = nu
        self.psi = psi

    @property
    def sampled_scale(self):
        """Whether psi = s I with s sampled: ``psi="sample"``, or a fitted copy of such a prior (which holds the
        current s in ``psi`` and the floor of s in ``scale_floor``)."""
        return (isinstance(self.psi, str) and self.psi == "sample") or "scale_floor" in vars(self)

    def log_point_constant(self, X):
        """(n,) zeros: the kernels' Gaussian scores are whole log densities."""
        return np.zeros(X.shape[0])

    def checkpoint_label(self):
        sampled = ", psi='sample'" if self.sampled_scale else ""
        return f"NormalInverseWishart(kappa={self.kappa!r}, nu={self.nu!r}{sampled})"

    def check_data(self, X):
        if sp.issparse(X):
            raise ValueError("NormalInverseWishart prior needs dense data; got a sparse matrix")
        largest = max(float(X.max()), -float(X.min()))
        if largest > FLOAT32_LIMIT:
            raise ValueError(
                f"X has values up to {largest:.3g} in absolute value, beyond what the NormalInverseWishart prior's "
                f"likelihood kernels (float32) can hold (about {FLOAT32_LIMIT:.1e}); rescale X, e.g. standardise "
                "its columns"
            )

    def fitted(self, X):
        """A copy with the data-based defaults filled in, over X's varying features (class docstring); a fitted
        prior (a model's ``prior_``) keeps its features. ValueError naming any invalid hyper-parameter."""
        kappa = check_positive(self.kappa, "NormalInverseWishart kappa")
        if "feature_map" in vars(self):
            features, given_mean, given_psi = self.feature_map, self.mean, self.psi
            kept_columns = features.select(X, "NormalInverseWishart")
            features.check_holds(X, "NormalInverseWishart")
            X = kept_columns
        else:
            d = X.shape[1]
            features = map_features(X, linear=True)
            kept = features.features
            given_mean = None if self.mean is None else _real_array(self.mean, "mean", (d,))[kept]
            given_psi = self.psi
            if self.psi is not None and not isinstance(self.psi, str):
                given_psi = _checked_psi(_real_array(self.psi, "psi", (d, d)))[np.ix_(kept, kept)]
            X = X[:, kept]
        d = X.shape[1]
        mean = X.mean(axis=0) if given_mean is None else _real_array(given_mean, "mean", (d,))
        nu = d + 3.0 if self.nu is None else check_positive(self.nu, "NormalInverseWishart nu")
        if not nu > d - 1:
            raise ValueError(f"NormalInverseWishart nu must be > d - 1 = {d - 1}, got {nu}")
        n = X.shape[0]
        if not np.isfinite((kappa + n) * (nu + n)):  # the predictive's scale divides by kappa_n (nu_n - d + 1)
            raise ValueError(f"NormalInverseWishart kappa={kappa!r} or nu={nu!r} is too large: (kappa + n) x "
                             f"(nu + n) overflows for n = {n} points")
        if isinstance(self.psi, str) and self.psi != "sample":
            raise ValueError(f"NormalInverseWishart psi must be None, 'sample' or a (d, d) array, got {self.psi!r}")
        widest = float((X.max(axis=0) - X.min(axis=0)).max()) if X.shape[0] else 0.0
        if 0.0 < widest < NARROWEST_DATA_SPAN:
            raise ValueError(
                f"X's columns span at most {widest:.3g}, too narrow for the NormalInverseWishart prior's likelihood "
                f"kernels (float32) to resolve (it takes {NARROWEST_DATA_SPAN:.0e} at least); rescale X, e.g. "
                "standardise its columns"
            )
        if given_psi is None or isinstance(given_psi, str):
            variances = X.var(axis=0) if X.shape[0] > 1 else np.ones(d)
            variance = float(variances.mean()) if d else 1.0
            expected = np.full(d, 0.1 * variance if variance > 0 else 0.1)
            if given_psi is None:  # the sampled scale is one number: it starts at the isotropic default
                # floored where float32 kernels still hold the precision factors (about 1 / std)
                capped = np.maximum(np.minimum(expected, variances), NARROWEST_SPAN ** 2)
                expected = np.where(variances > 0, capped, expected)
            psi = max(nu - d - 1.0, 1.0) * np.diag(expected)
        else:
            psi = _checked_psi(_real_array(given_psi, "psi", (d, d)))
        fitted = NormalInverseWishart(kappa=kappa, mean=mean, nu=nu, psi=psi)
        if features.drops:
            fitted.feature_map = features
        if self.sampled_scale:
            # A fitted sampled prior (a model's prior_) goes on from its current scale and keeps its floor.
            fitted.scale_floor = vars(self).get("scale_floor", self.SCALE_FLOOR * float(psi[0, 0]))
        return fitted

    def kernel_data(self, X):
        """X (n, d) as the kernels take it, for a fitted prior: dense, its kept columns (``FeatureMap``; X itself
        when all are kept)."""
        return FeatureMap.of(self, self.mean.shape[0]).select(X, "NormalInverseWishart")

    def expanded(self, params):
        """``posterior_mean``'s parameters of the kept columns as parameters of all X's columns: a dropped column
        is its linear function of the kept ones (a constant one: its value, no covariance)."""
        features = FeatureMap.of(self, self.mean.shape[0])
        return {"mean": features.means(params["mean"]), "covariance": features.covariances(params["covariance"])}

    def with_scale(self, scale):
        """A copy of a fitted prior whose scale is sampled, with ``psi = scale * I``."""
        return self._fitted_copy(self.mean, float(scale) * np.eye(self.psi.shape[0]))

    def translated(self, offset):
        """A copy of a fitted prior whose mean is moved by ``offset`` (d,): the prior of the data moved so."""
        return self._fitted_copy(self.mean + offset, self.psi)

    def _fitted_copy(self, mean, psi):
        copy = NormalInverseWishart(kappa=self.kappa, mean=mean, nu=self.nu, psi=psi)
        for fitted_attribute in ("feature_map", "scale_floor"):
            if fitted_attribute in vars(self):
                setattr(copy, fitted_attribute, getattr(self, fitted_attribute))
        return copy

    def resampled(self, cluster_stats, rng):
        """The prior for the next iteration: with a sampled scale, ``psi = s I`` with s drawn given the clusters
        (``cluster_stats`` batch (K,)) through their covariances (class docstring); a given ``psi``: itself."""
        if not self.sampled_scale:
            return self
        _, chol_precision, _ = self.sample(self.posterior(cluster_stats), rng)
        d = self.psi.shape[0]
        total_precision_trace = float(np.sum(chol_precision ** 2))  # sum_k tr(Sigma_k^-1), U^T U = Sigma^-1
        shape = cluster_stats.n.shape[0] * self.nu * d / 2.0
        rate = total_precision_trace / 2.0
        # Gamma(shape, rate) truncated to s >= floor, by inverting its survival function: a uniform share of the
        # mass above the floor. Where that mass underflows (data in a flat subspace pull s to 0), the floor.
        above = gammaincc(shape, rate * self.scale_floor)
        draw = gammainccinv(shape, above * (1.0 - rng.uniform())) / rate if above > 0 else self.scale_floor
        return self.with_scale(max(draw, self.scale_floor))

    def posterior(self, stats):
        """``(kappa_n, mean_n, nu_n, psi_n)`` with batch shape; psi_n from the centred scatter."""
        kappa, m0, nu, psi = float(self.kappa), self.mean, float(self.nu), self.psi
        n = stats.n
        safe_n = np.where(n > 0, n, 1.0)
        xbar = stats.s1 / safe_n[..., None]
        scatter = stats.s2 - n[..., None, None] * xbar[..., :, None] * xbar[..., None, :]
        kappa_n = kappa + n
        mean_n = (kappa * m0 + stats.s1) / kappa_n[..., None]
        diff = xbar - m0
        shrink = (kappa * n / kappa_n)[..., None, None]
        psi_n = psi + scatter + shrink * diff[..., :, None] * diff[..., None, :]
        psi_n = 0.5 * (psi_n + np.swapaxes(psi_n, -1, -2))
        return kappa_n, mean_n, nu + n, psi_n

    def log_marginal(self, stats):
        kappa, nu, psi = float(self.kappa), float(self.nu), self.psi
        d = psi.shape[0]
        kappa_n, _, nu_n, psi_n = self.posterior(stats)
        logdet_psi = 2.0 * np.log(np.diagonal(np.linalg.cholesky(psi))).sum()
        logdet_n = 2.0 * np.log(np.diagonal(np.linalg.cholesky(psi_n), axis1=-2, axis2=-1)).sum(axis=-1)
        return (
            -0.5 * stats.n * d * np.log(np.pi)
            + log_multigamma(nu_n / 2.0, d)
            - log_multigamma(nu / 2.0, d)
            + 0.5 * nu * logdet_psi
            - 0.5 * nu_n * logdet_n
            + 0.5 * d * (np.log(kappa) - np.log(kappa_n))
        )

    def sample(self, posterior, rng):
        """Returns ``(mu (*B, d), U (*B, d, d) upper-triangular with U^T U = precision, log|U| (*B,))``.

        The precision is Wishart(nu_n, Psi_n^-1) by the Bartlett decomposition: ``L A`` is the Cholesky factor
        of the draw ``L A A^T L^T`` (L that of Psi_n^-1, A lower-triangular with chi diagonal and normal entries
        below). The random numbers are drawn cluster by cluster, the linear algebra done for the whole batch."""
        kappa_n, mean_n, nu_n, psi_n = posterior
        batch = kappa_n.shape
        d = psi_n.shape[-1]
        bartlett = np.zeros(batch + (d, d))
        eps = np.empty(batch + (d,))
        below = np.tril_indices(d, -1)
        for idx in np.ndindex(*batch):
            bartlett[idx][np.diag_indices(d)] = np.sqrt(rng.chisquare(nu_n[idx] - np.arange(d)))
            bartlett[idx][below] = rng.standard_normal(d * (d - 1) // 2)
            eps[idx] = rng.standard_normal(d)
        lower = np.linalg.cholesky(np.linalg.inv(psi_n)) @ bartlett
        chol_prec = np.ascontiguousarray(np.swapaxes(lower, -1, -2))  # the pass's kernels take C order
        # mu ~ N(mean_n, (kappa_n precision)^-1): solve U z = eps / sqrt(kappa_n)
        mu = mean_n + np.linalg.solve(chol_prec, (eps / np.sqrt(kappa_n)[..., None])[..., None])[..., 0]
        log_det = np.log(np.diagonal(chol_prec, axis1=-2, axis2=-1)).sum(axis=-1)
        return mu, chol_prec, log_det

    def kernel_args(self, d):
        """``(kappa, mean, nu, chol_psi)`` for the collapsed-predictive kernels (``chol_psi`` lower-triangular)."""
        return float(self.kappa), self.mean, float(self.nu), np.linalg.cholesky(self.psi)

    def posterior_mean(self, stats):
        kappa_n, mean_n, nu_n, psi_n = self.posterior(stats)
        d = psi_n.shape[-1]
        denom = np.where(nu_n - d - 1 > 0, nu_n - d - 1, 1.0)
        return {"mean": mean_n, "covariance": psi_n / denom[..., None, None]}

    def expected_params(self, stats):
        params = self.posterior_mean(stats)
        lower = np.linalg.cholesky(np.linalg.inv(params["covariance"]))
        chol_prec = np.swapaxes(lower, -1, -2)
        return params["mean"], chol_prec, np.log(np.diagonal(chol_prec, axis1=-2, axis2=-1)).sum(axis=-1)


class NormalGamma(SparseKernelPrior):
    """Gaussian likelihood with a diagonal covariance, Normal-Gamma prior on each feature of each cluster.

    Features are independent given the cluster: tau_f ~ Gamma(shape, rate_f) (a precision), mu_f | tau_f ~
    N(mean_f, 1 / (kappa tau_f)). A cluster has 2d parameters where ``NormalInverseWishart`` has d(d+3)/2: the
    choice for raw embeddings of fifty dimensions and more (sentence embeddings: 384), where full covariances cost
    d^2 a point and the points cannot pay for their parameters (the mixture merges clusters). On principal
    components, correlated within clusters, full covariances fit better.

    Data-based defaults (``None``), as ``NormalInverseWishart``'s: ``mean`` = the data mean, ``shape`` = 2 and
    ``rate_f`` = min(0.1 v, v_f), v the data's mean per-feature variance (1 if that is 0) and v_f feature f's
    (0.1 v when every feature is constant): with the default shape, a prior expected variance (rate / (shape -
    1)) of a tenth of the data's mean spread, but never more than the feature's own variance (by the law of
    total variance, a cluster's variance in a feature is on average at most the feature's), weak (shape 2: a
    few points override it); ``kappa`` = 0.01. Without the cap the prior would hold the clusters' variance far
    above the data's in features of small spread (the last of 60 principal components, or a feature in other
    units), which the points cannot override. ``rate`` may also be given, one number or an array of d rates.
    Features constant over the data are left out (``FeatureMap``), unless all are. Features that are linear
    functions of others are kept: they raise no singular covariance here, but a diagonal model reads a
    correlation within a cluster as several clusters (scikit-learn's ``make_blobs(600, centers=3,
    random_state=0)`` with a third column x0 - 2 x1: 16-20 clusters, against 3-5 without it), so correlated
    features, such as a low-rank embedding's raw coordinates, are better given as principal components or to
    ``NormalInverseWishart``.

    log m(X_k) = sum_f [lgamma(a_n) - lgamma(a) + a log b_f - a_n log b_nf + log(kappa / kappa_n) / 2]
    - n d log(2 pi) / 2, with kappa_n = kappa + n, a_n = a + n / 2, mu_nf = (kappa m_f + S_f) / kappa_n and
    b_nf = b_f + (Q_f + kappa m_f^2 - kappa_n mu_nf^2) / 2 for n points summing to S_f, their squares to Q_f.

    A point's log density under a cluster's (mu, tau) is linear in (x, x^2): sum_f [x_f mu_f tau_f - x_f^2 tau_f
    / 2] + offset. So the sampler runs this prior through the count kernels, on rows (z, z^2) of CSR data
    (``kernel_data``): z_f is feature f centred at its mean and divided by its standard deviation (1 when every
    feature is constant), with the prior's mean and rates moved alike (the same model: a precision of x_f is one of
    z_f divided by the variance), then rounded to a multiple of 2^-g (``grid``): sums of such values are exact in
    any order, so the same seed gives the same result for any number of threads or workers. g is the largest (up
    to 20) that keeps every feature's sum of z^2, about n, below 2^(52 - 2g): 20 up to 4,096 points, 16 for a
    million; the rounding moves a point by 2^-g of each feature's spread at most. The fitted prior's ``mean``,
    ``rate`` and statistics are in z's units, a DPMM's ``cluster_params_`` in X's. Those rows hold 24 bytes a
    point and feature (two values and their column indices): 0.9 GB for 100,000 points of 384 features, 9 GB for
    a million, held for the whole fit.
    """

    kind = "diagonal"
    FINEST_GRID = 20
    # Below this grid (a point moved by 1/64 of a feature's spread) the data are refused: too many points to sum
    # exactly (n beyond 2^40).
    COARSEST_GRID = 6

    def __init__(self, kappa=0.01, mean=None, shape=None, rate=None):
        self.kappa = kappa
        self.mean = mean
        self.shape = shape
        self.rate = rate

    def checkpoint_label(self):
        return f"NormalGamma(kappa={self.kappa!r}, shape={self.shape!r}, rate={self.rate!r})"

    def check_data(self, X):
        if sp.issparse(X):
            raise ValueError("NormalGamma prior needs dense data; got a sparse matrix")

    def fitted(self, X):
        """A copy with the data-based defaults, the varying features, their centring, spreads and grid filled in
        (class docstring): a fitted prior (a model's ``prior_``) keeps its features and coordinates and takes a
        grid for X. ValueError naming any invalid hyper-parameter."""
        kappa = check_positive(self.kappa, "NormalGamma kappa")
        shape = 2.0 if self.shape is None else check_positive(self.shape, "NormalGamma shape")
        n, d = X.shape
        X = np.asarray(X, dtype=np.float64)
        fitted = vars(self).get("center") is not None
        if fitted:
            features = FeatureMap.of(self, self.center.shape[0])
            kept_columns = features.select(X, "NormalGamma")
            features.check_holds(X, "NormalGamma")
            X = kept_columns
            center, spread = self.center, self.spread
            mean, rate = self.mean, self.rate
        else:
            features = map_features(X, linear=False)
            kept = features.features
            given_mean = None if self.mean is None else _real_array(self.mean, "mean", (d,), "NormalGamma")[kept]
            given_rate = self.rate
            if self.rate is not None and np.ndim(self.rate) != 0:
                given_rate = _real_array(self.rate, "rate", (d,), "NormalGamma")
                if not np.all(given_rate > 0):
                    raise ValueError("NormalGamma rate must be positive in every feature")
                given_rate = given_rate[kept]
            X = X[:, kept]
            d = X.shape[1]
            center = X.mean(axis=0) if n else np.zeros(d)
            deviation = X - center
            # the standard deviation of deviation / top, times top: neither squares of huge values overflow nor
            # those of tiny ones underflow
            top = np.abs(deviation).max(axis=0) if n else np.zeros(d)
            top = np.where(top > 0, top, 1.0)
            std = top * (deviation / top).std(axis=0) if n > 1 else np.zeros(d)
            spread = np.where(std > 0, std, 1.0)
            mean = np.zeros(d) if given_mean is None else (given_mean - center) / spread
            with np.errstate(over="ignore", under="ignore"):
                if given_rate is None:
                    # min(0.1 v, v_f) / spread_f^2 = min(0.1 v / spread_f^2, 1) (constant features, all of them
                    # then, spread 1, keep 0.1 v), with v = mean(std^2) = largest^2 mean((std / largest)^2)
                    largest_std = float(std.max()) if d else 0.0
                    if largest_std > 0:
                        rate = 0.1 * float(np.mean((std / largest_std) ** 2)) * (largest_std / spread) ** 2
                    else:
                        rate = 0.1 / spread ** 2
                    rate = np.where(std > 0, np.minimum(rate, 1.0), rate)
                elif np.ndim(given_rate) == 0:
                    rate = check_positive(given_rate, "NormalGamma rate") / spread ** 2
                else:
                    rate = given_rate / spread ** 2
        if not np.all(np.isfinite(rate) & (rate > 0)):
            raise ValueError("NormalGamma rate, in units of each feature's variance, leaves the float range "
                             "(features whose spreads differ by 1e150 and more, or a rate far from them); rescale "
                             "X's columns, or give a rate per feature")
        if not np.isfinite((kappa + n) * (shape + n)):
            raise ValueError(f"NormalGamma kappa={kappa!r} or shape={shape!r} is too large: they overflow with "
                             f"n = {n} points")
        with np.errstate(over="ignore"):
            largest = float((((X - center) / spread) ** 2).sum(axis=0).max()) if n else 0.0
        grid = (min(self.FINEST_GRID, int(np.floor((52.0 - np.log2(max(largest, 1.0))) / 2.0)))
                if np.isfinite(largest) else -1)
        if grid < self.COARSEST_GRID:
            raise ValueError(
                f"X has too many points ({n}), or values too far from the fitted ones, for the NormalGamma prior "
                f"to sum exactly (the sum of squares of a standardised column reaches {largest:.3g}); fit a sample "
                "of the points")
        copy = NormalGamma(kappa=kappa, mean=mean, shape=shape, rate=np.array(rate, dtype=np.float64))
        copy.center, copy.spread, copy.grid = center, spread, grid
        if features.drops:
            copy.feature_map = features
        return copy

    def log_point_constant(self, X):
        """(n,) -sum_f log spread_f over the kept features: the kernels score z, X in units of each feature's
        spread, and a density of X is that of z over the spreads."""
        return np.full(X.shape[0], -np.log(self.spread).sum())

    def kernel_data(self, X):
        """X (n, d) as the kernels take it, for a fitted prior: CSR rows (z, z^2), z on the grid (class
        docstring), every entry stored (zeros too), indices sorted. ValueError if z^2 overflows (values far beyond
        the fitted data's)."""
        X = FeatureMap.of(self, self.center.shape[0]).select(np.asarray(X, dtype=np.float64), "NormalGamma")
        n, d = X.shape
        step = 2.0 ** self.grid
        values = np.empty((n, 2 * d))  # (z, z^2), computed in place: no temporaries of the data's size
        z = values[:, :d]
        with np.errstate(over="ignore", invalid="ignore"):
            np.subtract(X, self.center, out=z)
            z /= self.spread
            z *= step
            np.round(z, out=z)
            z /= step
            np.multiply(z, z, out=values[:, d:])
        if not np.all(np.isfinite(values)):
            raise ValueError("X has values too far from the NormalGamma prior's fitted data for its scores (their "
                             "squares in units of each feature's spread overflow)")
        return sp.csr_matrix((values.ravel(), np.tile(np.arange(2 * d, dtype=np.int32), n),
                              np.arange(0, 2 * d * n + 1, 2 * d, dtype=np.int64)), shape=(n, 2 * d))

    def kernel_args(self, d):
        """``(kind, hyper)`` for the kernels; ``d`` is the kernels' number of features, 2 per feature of X."""
        return 2, np.concatenate([[float(self.kappa), float(self.shape)], self.rate, self.mean, [d]])

    def posterior(self, stats):
        """``(kappa_n (*B,), mu_n (*B, D), a_n (*B,), b_n (*B, D))`` from statistics of the rows (z, z^2)."""
        s1 = np.asarray(stats.s1, dtype=np.float64)
        D = s1.shape[-1] // 2
        n = np.asarray(stats.n, dtype=np.float64)
        kappa_n = self.kappa + n
        mu_n = (self.kappa * self.mean + s1[..., :D]) / kappa_n[..., None]
        b_n = self.rate + 0.5 * (s1[..., D:] + self.kappa * self.mean ** 2 - kappa_n[..., None] * mu_n ** 2)
        return kappa_n, mu_n, self.shape + 0.5 * n, b_n

    def sample(self, posterior, rng):
        """Returns ``(log_rate (*B, 2D), offset (*B,))``, the kernels' form of Gaussians with means mu and
        precisions tau ((mu tau, -tau / 2) and sum_f [log tau_f - tau_f mu_f^2] / 2 - D log(2 pi) / 2), for
        tau ~ Gamma(a_n, b_n) and mu ~ N(mu_n, 1 / (kappa_n tau)); drawn as in
        ``kernels._sample_count_params`` (log tau by ``sample_log_dirichlet``'s identity, finite scores where tau
        underflows)."""
        kappa_n, mu_n, a_n, b_n = posterior
        a = np.broadcast_to(a_n[..., None], b_n.shape)
        log_g = np.log(rng.standard_gamma(a + 1.0))
        log_tau = log_g + np.log(rng.uniform(size=a.shape)) / a - np.log(b_n)
        e = rng.standard_normal(b_n.shape) / np.sqrt(kappa_n)[..., None]
        root = np.exp(0.5 * log_tau)
        offset = (0.5 * (log_tau - (mu_n * root + e) ** 2).sum(axis=-1)
                  - 0.5 * mu_n.shape[-1] * np.log(2.0 * np.pi))
        return np.concatenate([mu_n * root ** 2 + e * root, -0.5 * root ** 2], axis=-1), offset

    def posterior_mean(self, stats):
        """``{"mean": (*B, D), "variance": (*B, D)}`` in X's units: each cluster's posterior mean of mu and of the
        variances 1 / tau (b_n / (a_n - 1), or b_n / a_n where a_n <= 1)."""
        _, mu_n, a_n, b_n = self.posterior(stats)
        denom = np.where(a_n > 1.0, a_n - 1.0, a_n)[..., None]
        return {"mean": mu_n * self.spread + self.center, "variance": b_n / denom * self.spread ** 2}

    def expanded(self, params):
        """``posterior_mean``'s parameters of the varying columns as parameters of all X's columns: a constant
        column has its value as mean and variance 0."""
        features = FeatureMap.of(self, self.center.shape[0])
        return {"mean": features.means(params["mean"]), "variance": features.variances(params["variance"])}

    def expected_params(self, stats):
        """The kernels' ``(log_rate, offset)`` of Gaussians at the posterior means of mu and tau (a_n / b_n)."""
        _, mu_n, a_n, b_n = self.posterior(stats)
        tau = a_n[..., None] / b_n
        offset = 0.5 * (np.log(tau) - tau * mu_n ** 2).sum(axis=-1) - 0.5 * mu_n.shape[-1] * np.log(2.0 * np.pi)
        return np.concatenate([mu_n * tau, -0.5 * tau], axis=-1), offset


# Residual variance, as a share of a standardised column's, below which the full-covariance prior takes the column
# for a linear function of those before it: the float32 kernels resolve directions of the data down to about
# 1e-5 of its spread (variance 1e-10), and a direction flat for every cluster merges them (``FeatureMap``).
DEPENDENT_RESIDUAL = 1e-10


class FeatureMap(NamedTuple):
    """The columns of X (n, ``n_features``) a Gaussian prior fits, ``features``, and the others as linear functions
    of them: X[:, dropped] = intercepts + X[:, features] @ coefficients.T, ``dropped`` the other indices in order.

    A column constant over the data tells nothing of the clusters, and in a Gaussian likelihood whose variances
    are unknown its zero scatter gives each cluster a term growing as n log n in its size, which merges clusters;
    for full covariances the same holds of any direction in which the data are flat (a column that is a sum of
    others, proportions that sum to 1). So both Gaussian priors leave constant columns out, and
    ``NormalInverseWishart`` also each column that is a linear function of the columns kept before it. (The same
    term arises wherever a cluster, not the whole data, has no spread: binary or sparse features, whose clusters
    can be all zeros in a feature, are merged the same way; counts belong to ``Multinomial``.)"""

    features: np.ndarray  # (n_kept,) int
    coefficients: np.ndarray  # (n_dropped, n_kept)
    intercepts: np.ndarray  # (n_dropped,)
    n_features: int

    @classmethod
    def identity(cls, n_features):
        """The map that keeps every column."""
        return cls(np.arange(n_features), np.zeros((0, n_features)), np.zeros(0), n_features)

    @classmethod
    def of(cls, prior, n_features):
        """A fitted prior's map (kept as its ``feature_map`` only where it leaves columns out), or the identity."""
        kept = vars(prior).get("feature_map")
        return kept if kept is not None else cls.identity(n_features)

    @property
    def drops(self):
        return self.features.size < self.n_features

    @property
    def dropped(self):
        kept = np.zeros(self.n_features, dtype=bool)
        kept[self.features] = True
        return np.flatnonzero(~kept)

    def select(self, X, prior):
        """X's kept columns (X itself when all are kept); ValueError naming a width other than the fitted one."""
        if X.shape[1] != self.n_features:
            raise ValueError(f"X has {X.shape[1]} features; the fitted {prior} prior was fitted on {self.n_features}")
        return X if self.features.size == X.shape[1] else X[:, self.features]

    def check_holds(self, X, prior):
        """ValueError if a column left out is not, in X, the function of the kept ones it was (a fitted prior
        given new data): the new fit would ignore what it holds."""
        if not self.drops or not X.shape[0]:
            return
        dropped = X[:, self.dropped]
        deviation = dropped - (self.intercepts + X[:, self.features] @ self.coefficients.T)
        spread = np.sqrt(((dropped - dropped.mean(axis=0)) ** 2).mean(axis=0))
        allowed = np.sqrt(DEPENDENT_RESIDUAL) * spread + 1e-9 * np.abs(dropped).max(axis=0)
        broken = np.sqrt((deviation ** 2).mean(axis=0)) > allowed
        if broken.any():
            raise ValueError(
                f"the fitted {prior} prior left out X's column(s) {self.dropped[broken].tolist()}, constant or a "
                "linear function of the others in the data it was fitted on, which they are not in this X; fit "
                f"with a new {prior}() instead")

    def means(self, means):
        """Means (..., n_kept) of the kept columns as means (..., n_features) of every column."""
        full = np.empty(means.shape[:-1] + (self.n_features,))
        full[..., self.features] = means
        full[..., self.dropped] = self.intercepts + means @ self.coefficients.T
        return full

    def covariances(self, covariances):
        """Covariances (..., n_kept, n_kept) of the kept columns as (..., n_features, n_features) of every column."""
        jacobian = np.zeros((self.n_features, self.features.size))
        jacobian[self.features, np.arange(self.features.size)] = 1.0
        jacobian[self.dropped] = self.coefficients
        return jacobian @ covariances @ jacobian.T

    def variances(self, variances):
        """Variances (..., n_kept) of independent kept columns as variances (..., n_features) of every column."""
        full = np.empty(variances.shape[:-1] + (self.n_features,))
        full[..., self.features] = variances
        full[..., self.dropped] = variances @ (self.coefficients ** 2).T
        return full


def map_features(X, linear):
    """The ``FeatureMap`` of X (n, d): constant columns dropped (all kept when every one is) and, with ``linear``,
    each column whose residual variance given the columns kept before it is below ``DEPENDENT_RESIDUAL`` of its
    own (in column order, by an incremental Cholesky factor of their correlations)."""
    n, d = X.shape
    varies = X.max(axis=0) > X.min(axis=0) if n else np.zeros(d, dtype=bool)
    if not varies.any():
        return FeatureMap.identity(d)
    center = X.mean(axis=0)
    candidates = np.flatnonzero(varies)
    if linear:
        z = X[:, candidates] - center[candidates]
        z = z / np.abs(z).max(axis=0)  # first into [-1, 1]: no square underflows or overflows
        z = z / np.sqrt((z ** 2).mean(axis=0))
        correlation = z.T @ z / n
        factor = np.zeros((candidates.size, candidates.size))
        kept = []
        for j in range(candidates.size):
            link = solve_triangular(factor[:len(kept), :len(kept)], correlation[kept, j], lower=True)
            residual = correlation[j, j] - link @ link
            if residual > DEPENDENT_RESIDUAL:
                factor[len(kept), :len(kept)] = link
                factor[len(kept), len(kept)] = np.sqrt(residual)
                kept.append(j)
        candidates = candidates[kept]
    features = candidates
    dropped = np.setdiff1d(np.arange(d), features)
    coefficients = np.zeros((dropped.size, features.size))  # a constant column's
    dependent = varies[dropped]
    if dependent.any():
        coefficients[dependent] = np.linalg.lstsq(X[:, features] - center[features],
                                                  X[:, dropped[dependent]] - center[dropped[dependent]],
                                                  rcond=None)[0].T
    return FeatureMap(features, coefficients, center[dropped] - coefficients @ center[features], d)


def _checked_psi(psi):
    """``psi`` after checking it is symmetric positive definite; ValueError saying which it is not."""
    if np.abs(psi - psi.T).max() > 1e-8 * np.abs(psi).max():
        raise ValueError("NormalInverseWishart psi must be symmetric positive definite; it is not symmetric")
    try:
        np.linalg.cholesky(psi)
    except np.linalg.LinAlgError:
        raise ValueError("NormalInverseWishart psi must be symmetric positive definite; it is not positive "
                         "definite") from None
    return psi


def _real_array(value, name, shape, prior="NormalInverseWishart"):
    """``value`` as a finite float64 array of ``shape``; ValueError naming the ``prior``'s ``name``."""
    try:
        array = np.asarray(value)
    except ValueError as error:  # ragged nested sequences
        raise ValueError(f"{prior} {name} must be an array of shape {shape}: {error}") from None
    if array.dtype.kind not in "iuf":
        raise ValueError(f"{prior} {name} must hold real numbers, got dtype {array.dtype}")
    if array.shape != shape:
        raise ValueError(f"{prior} {name} must have shape {shape}, got {array.shape}")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{prior} {name} must be finite; it holds NaN or inf")
    return array.astype(np.float64)


def log_multigamma(a, d):
    """log Gamma_d(a) = d(d-1)/4 log(pi) + sum_{j<d} lgamma(a - j/2), elementwise over the array ``a``."""
    a = np.asarray(a, dtype=np.float64)
    return 0.25 * d * (d - 1) * np.log(np.pi) + gammaln(a[..., None] - 0.5 * np.arange(d)).sum(axis=-1)


# From this many features on, real-valued data get diagonal covariances by default: full ones merge clusters that
# k-means separates (three clusters of 2,000 points in 50 dimensions: two), and cost d^2 a point
# (``benchmarks/dpmm_diagonal.py``).
DIAGONAL_FROM_FEATURES = 50


def default_prior(X):
    """``Multinomial()`` for non-negative integer data (dense or sparse) of two features or more, ``PoissonGamma()``
    for one (a multinomial reads each point's proportions over the features, which over one feature are all 1:
    every partition would be as likely); for other data ``NormalGamma()`` (diagonal covariances) from
    ``DIAGONAL_FROM_FEATURES`` varying features on (constant ones are left out), ``NormalInverseWishart()``
    below."""
    values = X.data if sp.issparse(X) else X
    if np.all(values >= 0) and np.all(values == np.round(values)):
        return Multinomial() if X.shape[1] > 1 else PoissonGamma()
    hint = rounding_hint(values, "X") if np.all(values >= 0) else ""
    if hint:
        warnings.warn(f"X is read as continuous data (a Gaussian prior), not as counts{hint}", UserWarning,
                      stacklevel=user_stacklevel())
    if sp.issparse(X):
        raise ValueError(
            "sparse X with negative or non-integer values: count priors need non-negative integers and the "
            "Gaussian prior needs dense data"
        )
    varying = np.count_nonzero(X.max(axis=0) > X.min(axis=0)) if X.shape[0] else X.shape[1]
    return NormalGamma() if varying >= DIAGONAL_FROM_FEATURES else NormalInverseWishart()
