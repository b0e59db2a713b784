"""Many blocks in a sparse matrix: CDP's defaults with the mixtures started from the spectrum and from one cluster.

Blocks of equal size tile the rows and the columns (``make_biclusters_counts``, rows and columns shuffled); a share
``p`` of the ``N`` counts falls in the blocks. For each design and seed it fits ``CDP(random_state=seed)`` with
``init="one"`` (a DP mixture's usual start) and ``init="spectral"`` (the default) and prints the Jaccard score,
the number of biclusters found and the fit time (docs/results.md, "Many weak blocks in a sparse matrix").

    python benchmarks/many_blocks.py [--seeds 3]          # about 5 minutes on 2 cores
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

from conjoined import CDP
from conjoined.datasets import make_biclusters_counts
from conjoined.metrics import jaccard_score

# (blocks, rows, columns, counts N, share p in the blocks)
DESIGNS = [
    (30, 3000, 2000, 300_000, 0.2),
    (20, 3000, 2000, 300_000, 0.2),
    (12, 600, 480, 40_000, 0.25),
    (10, 1000, 800, 100_000, 0.2),
    (20, 2000, 5000, 400_000, 0.25),
    (30, 3000, 2000, 1_000_000, 0.2),
]
INITS = ("one", "spectral")


def draw(design, seed):
    """``(X, rows, columns)`` of one draw of a design."""
    n_blocks, n_rows, n_cols, n_tokens, p = design
    blocks = list(zip(np.array_split(np.arange(n_rows), n_blocks), np.array_split(np.arange(n_cols), n_blocks)))
    return make_biclusters_counts((n_rows, n_cols), blocks, n_tokens, p, random_state=seed, shuffle=True)


def fit(X, rows, columns, seed, init):
    """(Jaccard, biclusters found, seconds) of CDP's defaults with ``init``."""
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # short chains of hard designs warn that they have not settled
        model = CDP(random_state=seed, init=init).fit(X)
    return (jaccard_score((model.rows_, model.columns_), (rows, columns)), model.rows_.shape[0],
            time.perf_counter() - start)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=3, help="draws of each design (seeds 0, 1, ...)")
    args = parser.parse_args()
    print("| blocks, rows x columns, counts (density), lift | " + " | ".join(f"init={init!r}" for init in INITS)
          + " |")
    print("|---|" + "---|" * len(INITS))
    for design in DESIGNS:
        n_blocks, n_rows, n_cols, n_tokens, p = design
        marked = n_rows * n_cols / n_blocks  # the cells of all the blocks
        lift = (p / marked) / ((1 - p) / (n_rows * n_cols - marked))
        cells = {init: [] for init in INITS}
        for seed in range(args.seeds):
            data = draw(design, seed)
            for init in INITS:
                cells[init].append(fit(*data, seed, init))
        print(f"| {n_blocks}, {n_rows:,} x {n_cols:,}, {n_tokens:,} ({n_tokens / (n_rows * n_cols):.3f}), "
              f"{lift:.1f}x | " + " | ".join(", ".join(f"{j:.3f} ({b}, {s:.0f} s)" for j, b, s in cells[init])
                                            for init in INITS) + " |", flush=True)


if __name__ == "__main__":
    main()
