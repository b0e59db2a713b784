"""The biclustering methods the CDP paper compares against, each written from its original paper.

- :class:`ChengChurch`: Cheng & Church (2000), mean squared residue.
- :class:`Plaid`: Lazzeroni & Owen (2002), fitted as in Turner et al. (2005).
- :class:`Bimax`: Prelic et al. (2006), every maximal all-ones bicluster of a binarised matrix.
- :class:`Spectral`: Kluger et al. (2003), via scikit-learn's ``SpectralBiclustering``.
- :class:`DT2B`: Rugeles et al. (2017), dual-topic Gibbs sampling with K_r and K_c given.

Their defaults follow the settings the CDP paper used (see each class's docstring); ``benchmarks/paper_tables.py``
runs them all on the paper's simulation cases.
"""

from .bimax import Bimax
from .cheng_church import ChengChurch
from .dt2b import DT2B
from .plaid import Plaid
from .spectral import Spectral

__all__ = ["DT2B", "Bimax", "ChengChurch", "Plaid", "Spectral"]
