"""conjoined: non-parametric probabilistic biclustering with the Conjoined Dirichlet Process.

Estimators: ``CDP`` (``ConjoinedDirichletProcess``) and the Dirichlet-process mixture ``DPMM`` with its priors.
Submodules: ``datasets``, ``metrics``, ``baselines``, ``io``, CDP's steps after the mixtures (``reassign``,
``refine``, ``background``, ``extract``, ``predict``), ``fit_folder`` (``save_fit``: a fit made in Python as the
folder ``conjoined fit`` writes); ``plot`` (matplotlib) and ``anndata`` (AnnData/scanpy) need optional extras.

Names are imported when first used (PEP 562), so that ``import conjoined`` and the ``conjoined`` command start
without loading numba and scikit-learn before they are needed.
"""

import importlib

__version__ = "0.1.0"

_SUBMODULES = ("background", "baselines", "datasets", "extract", "fit_folder", "io", "metrics", "predict",
               "reassign", "refine")
# public name -> the submodule that defines it
_NAMES = {
    "AllZeroWarning": "cdp",
    "CDP": "cdp",
    "ChainNotSettledWarning": "dpmm",
    "ConjoinedDirichletProcess": "cdp",
    "DPMM": "dpmm",
    "HoldoutWarning": "cdp",
    "Multinomial": "dpmm",
    "NormalGamma": "dpmm",
    "NormalInverseWishart": "dpmm",
    "PoissonGamma": "dpmm",
    "compare_chains": "dpmm",
    "jaccard_score": "metrics",
    "load_20news_w100": "datasets",
    "make_cdp_case": "datasets",
    "save_fit": "fit_folder",
}

__all__ = sorted([*_NAMES, *_SUBMODULES, "__version__"])


def __getattr__(name):
    if name in _SUBMODULES:
        return importlib.import_module(f".{name}", __name__)
    if name in _NAMES:
        value = getattr(importlib.import_module(f".{_NAMES[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted({*globals(), *__all__})
