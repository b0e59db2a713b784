"""The Dirichlet-process mixture sampler: priors, the sub-cluster split/merge step, kernels and backends."""

from .diagnostics import ChainComparison, ChainNotSettledWarning, ChainTrend, compare_chains
from .estimator import DPMM
from .priors import Multinomial, NormalGamma, NormalInverseWishart, PoissonGamma, SufficientStats

__all__ = [
    "DPMM", "ChainComparison", "ChainNotSettledWarning", "ChainTrend", "Multinomial", "NormalGamma",
    "NormalInverseWishart", "PoissonGamma", "SufficientStats", "compare_chains",
]
