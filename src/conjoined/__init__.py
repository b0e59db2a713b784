"""conjoined: non-parametric probabilistic biclustering with the Conjoined Dirichlet Process."""

from .cdp import CDP, ConjoinedDirichletProcess
from .dpmm import DPMM, Multinomial, NormalInverseWishart, PoissonGamma

__version__ = "0.1.0"

__all__ = [
    "CDP",
    "DPMM",
    "ConjoinedDirichletProcess",
    "Multinomial",
    "NormalInverseWishart",
    "PoissonGamma",
    "__version__",
]
