"""numpy Generators over the MT19937 stream of ``RandomState(seed)``, for the numba kernels that draw.

Inside a kernel, numba's ``np.random.seed`` and ``np.random.random`` act on one global state (per thread), shared
with every jitted function the user runs: seeding it there restarted the user's own stream. A kernel that takes a
Generator draws from its own state instead. Over a bit generator seeded as ``RandomState(seed)`` seeds it,
``random``, ``poisson``, bounded integers (``numba.np.random.random_methods.random_interval``) and ``binomial``
with ``n min(p, 1 - p) <= 30`` (inversion) give the very draws numba's global ``np.random`` gave after
``np.random.seed(seed)`` (tests/test_reassign.py). Above that, both use BTPE with numba 0.68 and numpy 2.4, the
versions Table 2 was re-run with (every score unchanged), but numba's global stream used inversion before 0.68 and
may keep an older BTPE than its Generator after; ``binomial(0, p)`` and ``p = 1`` draw differently too (the
reassignment draws neither). ``gamma`` differs: numpy's Generator draws its normals otherwise.
"""

from __future__ import annotations

import numpy as np


def legacy_generator(seed):
    """A ``numpy.random.Generator`` whose MT19937 state is ``RandomState(seed)``'s; ``seed`` an int in
    [0, 2**32 - 1]."""
    _, key, pos = np.random.RandomState(seed).get_state()[:3]
    bit_generator = np.random.MT19937(0)
    bit_generator.state = {"bit_generator": "MT19937", "state": {"key": key, "pos": pos}}
    return np.random.Generator(bit_generator)
