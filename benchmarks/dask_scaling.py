"""Iterations per second of the DPMM on the local backend and on Dask with 1 and 2 local workers, same data.

Data: the cells side of ``make_marques_like()`` (5,053 cells as points, 23,226 genes as features, ~14.5 million
non-zeros; Multinomial(beta=1), alpha=10), and a tiny matrix (2,000 x 50) on which a pass costs next to nothing, so
that its time per iteration is the fixed cost of a round of actor calls. Every configuration runs the same chain
(the script checks that the labels are identical); the time per iteration is the median over the iterations after
the first two (the first creates the actors and sends the data). Overhead per iteration = Dask minus the local
backend with as many threads as Dask has worker threads.

    python benchmarks/dask_scaling.py [--iterations 30]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import scipy.sparse as sp
from distributed import Client, LocalCluster

import conjoined
from conjoined.datasets import make_marques_like


def fit(X, iterations, **backend):
    return conjoined.DPMM(alpha=10.0, prior=conjoined.Multinomial(beta=1.0), n_iter=iterations, random_state=0,
                          **backend).fit(X)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--iterations", type=int, default=30)
    args = parser.parse_args()

    genes_by_cells, _, _ = make_marques_like(random_state=0)
    datasets = {
        "cells (5,053 x 23,226)": sp.csr_matrix(genes_by_cells.T),
        "tiny (2,000 x 50)": sp.csr_matrix(np.random.default_rng(0).poisson(0.5, (2000, 50))),
    }
    for name, X in datasets.items():
        print(f"\n{name}: {X.nnz:,} non-zeros, {args.iterations} iterations")
        print("  backend                      cluster start  first iter  s/iter   it/s  overhead/iter   K")
        conjoined.DPMM(n_iter=2, random_state=0).fit(X[:100])  # numba caches loaded outside the timings
        reference, per_iter = None, {}
        configs = [("local, 1 thread", {"n_jobs": 1}, None), ("local, 2 threads", {"n_jobs": 2}, None),
                   ("dask, 1 worker x 1 thread", None, 1), ("dask, 2 workers x 1 thread", None, 2)]
        for label, local, n_workers in configs:
            startup = 0.0
            if local is not None:
                model = fit(X, args.iterations, **local)
                threads = local["n_jobs"]
            else:
                began = time.perf_counter()
                with LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address=":0", scheduler_kwargs={"dashboard": False}) as cluster, \
                        Client(cluster) as client:
                    startup = time.perf_counter() - began
                    model = fit(X, args.iterations, backend="dask", client=client)
                threads = n_workers
            if reference is None:
                reference = model.labels_trace_
            assert np.array_equal(reference, model.labels_trace_), f"{label}: labels differ from the local backend"
            seconds = float(np.median(model.time_trace_[2:]))
            overhead = "" if local is not None else f"{(seconds - per_iter[threads]) * 1e3:+10.1f} ms"
            if local is not None:
                per_iter[threads] = seconds
            ks = model.n_clusters_trace_
            print(f"  {label:<27} {startup:12.1f} s {model.time_trace_[0]:9.2f} s {seconds:7.3f} {1 / seconds:6.1f}"
                  f" {overhead:>14}   {ks.min()}-{ks.max()}", flush=True)


if __name__ == "__main__":
    main()
