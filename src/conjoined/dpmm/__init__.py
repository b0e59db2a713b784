"""The Dirichlet-process mixture sampler: priors, the sub-cluster split/merge step, kernels and backends."""

from .diagnostics import ChainNotSettledWarning, ChainTrend
from .estimator import DPMM
from .priors import Multinomial, NormalGamma, NormalInverseWishart, PoissonGamma, SufficientStats

__all__ = [
    "DPMM", "ChainNotSettledWarning", "ChainTrend", "Multinomial", "NormalGamma", "NormalInverseWishart",
    "PoissonGamma", "SufficientStats",
]
