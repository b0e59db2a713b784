"""conjoined: non-parametric probabilistic biclustering with the Conjoined Dirichlet Process.

Estimators: ``CDP`` (``ConjoinedDirichletProcess``) and the Dirichlet-process mixture ``DPMM`` with its priors.
Submodules: ``datasets``, ``metrics``, ``baselines``, ``io``, ``extract``, ``reassign``; ``plot`` (matplotlib) and
``anndata`` (AnnData/scanpy) are imported on demand because their dependencies are optional extras.
"""

from . import baselines, datasets, extract, io, metrics, reassign
from .cdp import CDP, ConjoinedDirichletProcess
from .datasets import load_20news_w100, make_cdp_case
from .dpmm import DPMM, Multinomial, NormalInverseWishart, PoissonGamma
from .metrics import jaccard_score

__version__ = "0.1.0"

__all__ = [
    "CDP",
    "DPMM",
    "ConjoinedDirichletProcess",
    "Multinomial",
    "NormalInverseWishart",
    "PoissonGamma",
    "baselines",
    "datasets",
    "extract",
    "io",
    "jaccard_score",
    "load_20news_w100",
    "make_cdp_case",
    "metrics",
    "reassign",
    "__version__",
]
