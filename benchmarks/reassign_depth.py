"""Token reassignment on deep counts: the cost of a sweep as the counts of a fixed matrix grow.

A cell with at least K_r x K_c tokens is updated on its allocation's tally (``reassign._deep_cell_update``): a
multinomial proposal drawn by binomials over the pairs, O(K_r K_c), and one pass over its tokens, instead of a
draw and a column-sum update per token. This script times sweeps of a 30 x 30 Poisson(2) matrix multiplied by 1,
100, 1,000 and 30,000, with 3 x 4 topics. The reference, measured in the same run, is the per-token path's cost
per token, from a 600 x 300 matrix of 11 tokens a cell (below 12: every cell takes that path) with the same
topics; "token path" is that cost times the deep matrix's tokens, what a sweep cost before the tally path.

    python benchmarks/reassign_depth.py [--sweeps 3]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from conjoined.reassign import reassign_tokens


def seconds_per_sweep(X, row_labels, column_labels, n_row_topics, n_column_topics, n_sweeps):
    arguments = dict(a_r=0.1, a_c=0.1, lam=0.1, random_state=0)
    reassign_tokens(X, row_labels, column_labels, n_row_topics, n_column_topics, n_sweeps=1, **arguments)
    start = time.perf_counter()
    reassign_tokens(X, row_labels, column_labels, n_row_topics, n_column_topics, n_sweeps=n_sweeps, **arguments)
    return (time.perf_counter() - start) / n_sweeps


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweeps", type=int, default=3)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    base = rng.poisson(2.0, (30, 30))
    shallow = np.full((600, 300), 11)
    per_token = seconds_per_sweep(shallow, np.arange(600) % 3, np.arange(300) % 4, 3, 4, args.sweeps) / shallow.sum()
    print(f"per-token path: {per_token * 1e9:.1f} ns a token ({shallow.sum():,} tokens, 11 a cell)")
    print(f"{'scale':>7} {'tokens':>11} {'max cell':>9} {'sweep':>10} {'ns/token':>9} {'token path':>11} {'ratio':>6}")
    for scale in (1, 100, 1000, 30000):
        X = base * scale
        tally = seconds_per_sweep(X, np.arange(30) % 3, np.arange(30) % 4, 3, 4, args.sweeps)
        estimate = per_token * X.sum()
        print(f"{scale:>7} {X.sum():>11,} {X.max():>9,} {tally * 1e3:>8.1f}ms {tally / X.sum() * 1e9:>9.1f} "
              f"{estimate * 1e3:>9.1f}ms {estimate / tally:>6.1f}")


if __name__ == "__main__":
    main()
