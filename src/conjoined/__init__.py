"""conjoined: non-parametric probabilistic biclustering with the Conjoined Dirichlet Process."""

__version__ = "0.1.0"
