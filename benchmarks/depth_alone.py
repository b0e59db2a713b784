"""Biclusters where rows and columns differ in depth alone, and blocks raised over such depths.

Counts at row depth x column depth (depths Gamma(2, 1), mean 1 per cell; no block raised: any bicluster is a
false one), for two shapes: the biclusters CDP's defaults report (``background="auto"``) and with the paper's
one density (``background="uniform"``). Then depths drawn the same way, 60 x 50, with a block of 12 rows x 10
columns raised two- and three-fold: the mean Jaccard against it and the biclusters reported. Seeds 0, 1, ...
(``--draws``).

    python benchmarks/depth_alone.py [--draws 30]        # about a minute
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

from conjoined import CDP
from conjoined.metrics import jaccard_score

SHAPES = ((30, 40), (150, 100))
LIFTS = (2.0, 3.0)
BLOCK = (12, 10)


def depth_counts(seed, shape, lift=1.0):
    """Poisson counts at row depth x column depth (shape (n_rows, n_cols)), with ``BLOCK`` random rows x
    columns raised ``lift``-fold: ``(X, rows (n_rows,) bool, columns (n_cols,) bool)``."""
    rng = np.random.default_rng(seed)
    n_rows, n_cols = shape
    means = np.outer(rng.gamma(2.0, 1.0, n_rows), rng.gamma(2.0, 1.0, n_cols)) / 4.0
    rows, columns = np.zeros(n_rows, bool), np.zeros(n_cols, bool)
    rows[rng.choice(n_rows, BLOCK[0], replace=False)] = True
    columns[rng.choice(n_cols, BLOCK[1], replace=False)] = True
    means[np.ix_(rows, columns)] *= lift
    return rng.poisson(means), rows, columns


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--draws", type=int, default=30)
    args = parser.parse_args(argv)
    if args.draws < 1:
        parser.error(f"--draws must be at least 1, got {args.draws}")
    warnings.simplefilter("ignore")  # sparse draws can have empty rows; short chains may not settle
    print(f"depth alone, {args.draws} draws each: biclusters a matrix (matrices with any)")
    for shape in SHAPES:
        start = time.perf_counter()
        line = []
        for background in ("auto", "uniform"):
            model = CDP(random_state=0, background=background)
            found = [model.fit(depth_counts(seed, shape)[0]).n_biclusters_ for seed in range(args.draws)]
            line.append(f"{background} {np.mean(found):.2f} ({sum(n > 0 for n in found)})")
        seconds = time.perf_counter() - start
        print(f"  {shape[0]} x {shape[1]}: " + ", ".join(line) + f"  {seconds:.0f} s", flush=True)
    print(f"a {BLOCK[0]} x {BLOCK[1]} block raised over the depths, 60 x 50: "
          "mean Jaccard, biclusters a matrix")
    for lift in LIFTS:
        scores, found = [], []
        for seed in range(args.draws):
            X, rows, columns = depth_counts(seed, (60, 50), lift)
            model = CDP(random_state=0).fit(X)
            found.append(model.n_biclusters_)
            scores.append(jaccard_score((model.rows_, model.columns_), (rows[None], columns[None])))
        print(f"  lift {lift:g}: {np.mean(scores):.3f}, {np.mean(found):.2f} (most {max(found)})", flush=True)


if __name__ == "__main__":
    main()
