"""Time per DPMM iteration on a sparse 20,000 x 5,000 count matrix with 10 million non-zeros at K around 20.

The data are a 20-cluster multinomial mixture, so the sampler's posterior has K around 20 (an earlier version drew
distinct columns with counts 1 + Poisson(1): a misspecified model whose posterior opened 28-29 clusters).

The reference, measured in the same run, is one ``X @ log_theta.T`` product of the same shapes with SciPy: the
floor of any iteration, which must at least score every non-zero under every cluster. Goal: ratio <= 2.0.

    python benchmarks/dpmm_iteration.py [--rows 20000] [--cols 5000] [--nnz-per-row 500] [--clusters 20]
"""

from __future__ import annotations

import argparse
import time

import numba
import numpy as np
import scipy.sparse as sp

import conjoined


def make_sparse_mixture(n_rows, n_cols, nnz_per_row, n_clusters, seed=0):
    """CSR counts from a multinomial mixture (the model the sampler fits, so its posterior K is the true one):
    cluster distributions ~ Dirichlet(0.5) over the columns, each row a multinomial draw of a number of tokens
    chosen so that rows have ``nnz_per_row`` distinct columns on average. Returns (X, labels)."""
    rng = np.random.default_rng(seed)
    theta = rng.dirichlet(np.full(n_cols, 0.5), size=n_clusters)
    labels = rng.integers(n_clusters, size=n_rows)
    lo, hi = float(nnz_per_row), 50.0 * nnz_per_row
    for _ in range(50):  # bisection on E[distinct columns of a row] = sum_f 1 - (1 - theta_f)^tokens
        tokens = 0.5 * (lo + hi)
        distinct = (1.0 - (1.0 - theta) ** tokens).sum(axis=1).mean()
        lo, hi = (tokens, hi) if distinct < nnz_per_row else (lo, tokens)
    parts, rows_of = [], []
    for k in range(n_clusters):
        rows = np.flatnonzero(labels == k)
        parts.append(sp.csr_matrix(rng.multinomial(int(round(lo)), theta[k], size=rows.size)))
        rows_of.append(rows)
    X = sp.vstack(parts).tocsr()[np.argsort(np.concatenate(rows_of))]
    return X.astype(np.float64), labels


def median_time(fn, repeats=5):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--cols", type=int, default=5_000)
    parser.add_argument("--nnz-per-row", type=int, default=500)
    parser.add_argument("--clusters", type=int, default=20)
    parser.add_argument("--iterations", type=int, default=15)
    args = parser.parse_args()

    start = time.perf_counter()
    X, labels = make_sparse_mixture(args.rows, args.cols, args.nnz_per_row, args.clusters)
    print(f"data: {X.shape[0]} x {X.shape[1]}, {X.nnz:,} non-zeros, {args.clusters} clusters "
          f"({time.perf_counter() - start:.1f} s to generate); numba threads: {numba.get_num_threads()}")

    log_theta = np.log(np.random.default_rng(1).dirichlet(np.ones(args.cols), size=args.clusters))
    floor = median_time(lambda: X @ log_theta.T)
    print(f"reference X @ log_theta.T (SciPy, {args.clusters} clusters): {floor * 1e3:.1f} ms")

    # Warm the numba caches so compilation is not timed.
    conjoined.DPMM(n_iter=2, init_clusters=2, random_state=0).fit(X[:200])
    common = dict(n_iter=args.iterations, init_clusters=args.clusters, random_state=0, store_labels=False)
    for phase, warmup in (("exact phase", 0), ("warm-up phase (sub-cluster moves)", args.iterations)):
        model = conjoined.DPMM(warmup=warmup, burn_out=0, **common).fit(X)
        per_iter = float(np.median(model.time_trace_[2:]))
        k_mean = float(model.n_clusters_trace_[2:].mean())
        print(f"{phase}: {per_iter * 1e3:.1f} ms per iteration at K = {k_mean:.1f} "
              f"(median of {args.iterations - 2}); ratio to the reference: {per_iter / floor:.2f} "
              f"(per cluster: {per_iter / k_mean / (floor / args.clusters):.2f})")


if __name__ == "__main__":
    main()
