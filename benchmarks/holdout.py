"""Biclusters in counts without structure, and what holding counts out for the test costs on the paper's cases.

For each ``holdout`` (None, 0.3, 0.5): the biclusters ``CDP(holdout=...)`` reports on 20 unstructured matrices of
100 x 80 (ten of Poisson(0.2) counts, ten of 5% ones; any bicluster there is a false one), then its mean and
lowest Jaccard on ``--replicates`` shuffled replicates of each of the paper's four cases (seeds 0, 1, ...).

    python benchmarks/holdout.py [--replicates 20]        # about 40 s
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

from conjoined import CDP
from conjoined.datasets import make_cdp_case
from conjoined.metrics import jaccard_score

HOLDOUTS = (None, 0.3, 0.5)


def unstructured(seed):
    """A Poisson(0.2) matrix and a matrix of 5% ones, 100 x 80."""
    return (np.random.default_rng(seed).poisson(0.2, (100, 80)),
            (np.random.default_rng(100 + seed).random((100, 80)) < 0.05).astype(np.int64))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--replicates", type=int, default=20)
    args = parser.parse_args(argv)
    if args.replicates < 1:
        parser.error(f"--replicates must be at least 1, got {args.replicates}")
    warnings.simplefilter("ignore")  # AllZeroWarning: sparse noise has empty rows
    print("holdout  biclusters in noise: mean, matrices with any (of 20)  cases 1 / 2 / 3 / 4: mean Jaccard "
          "(lowest)  seconds")
    for holdout in HOLDOUTS:
        start = time.perf_counter()
        found = [CDP(random_state=seed, holdout=holdout).fit(matrix).n_biclusters_
                 for seed in range(10) for matrix in unstructured(seed)]
        scores = []
        for case in (1, 2, 3, 4):
            case_scores = []
            for seed in range(args.replicates):
                X, rows, columns = make_cdp_case(case, random_state=seed, shuffle=True)
                model = CDP(random_state=seed, holdout=holdout).fit(X)
                case_scores.append(jaccard_score((model.rows_, model.columns_), (rows, columns)))
            scores.append(f"{np.mean(case_scores):.3f} ({min(case_scores):.3f})")
        print(f"{holdout!s:>7}  {np.mean(found):19.2f}, {sum(n > 0 for n in found):2d}{'':22}"
              f"{' / '.join(scores)}  {time.perf_counter() - start:5.1f}", flush=True)


if __name__ == "__main__":
    main()
