"""Single-cell scale: a full CDP fit on a synthetic matrix of the Marques et al. size, phase by phase.

Data: ``conjoined.datasets.make_marques_like()``, 23,226 genes x 5,053 cells, ~14.5 million non-zeros (87.6%
zeros), block structure, negative-binomial counts. Genes are the rows, cells the columns.

Sections (all by default; each can be skipped):

``fit``      The full CDP fit with the paper's single-cell settings: genes alpha=10 beta=0.1, cells alpha=10 beta=1,
             ``--iterations`` (500) per DPMM, then the token reassignment and the extraction. ``--pipeline paper``
             (default) is ``CDP(mode="paper")``: the published pipeline, independent *multinomial* DPMMs on the raw
             matrix; ``--pipeline defaults`` is our default CDP (``CDP(n_iter=--iterations)``: Poisson
             likelihoods, alpha=1, beta=1, 2 conjoined rounds). Prints every phase's time, the sampler's time spent seating points drawn
             "new" in each pass (``sampler.seat_new_points``), and the peak resident memory (``ru_maxrss``).
             ``--time-limit`` stops the process after that many seconds and prints what was measured so far.
``new``      Why the genes DPMM is slow: its first iterations on the first 750..6000 genes, split into the
             sequential seating of the points drawn "new" and the rest of the iteration.
``parts``    Every phase of the paper pipeline except the genes DPMM, at full size: the cells DPMM, the choice of
             K and labels from its trace, the reassignment, the extraction; the true gene modules stand in for the
             genes DPMM's labels.
``scaling``  Time per DPMM iteration and per data pass against non-zeros (cells DPMM on 1/4, 1/2 and all cells)
             and against K (all cells, 10 to 80 clusters), with the pass's nanoseconds per non-zero per cluster:
             constant means linear in both.

    python benchmarks/scale.py                                   # everything, paper pipeline
    python benchmarks/scale.py --skip new parts scaling --time-limit 3600
    python benchmarks/scale.py --pipeline defaults --skip new parts scaling
    python benchmarks/scale.py --skip fit                        # everything but the full fit
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import threading
import time

import numpy as np
import scipy.sparse as sp

import conjoined
from conjoined import cdp
from conjoined.datasets import make_marques_like
from conjoined.dpmm import sampler
from conjoined.dpmm.backends import LocalBackend

SAMPLER_STEP, SAMPLER_SEAT = sampler.step, sampler.seat_new_points
LOCAL_ASSIGN = LocalBackend.assign


def peak_memory_gb():
    """Peak resident set size of this process so far (Linux reports ru_maxrss in kilobytes)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6


class Recorder:
    """Times the phases of a CDP fit and, per DPMM, every iteration and its seating of "new" points."""

    def __init__(self):
        self.phases = []  # (name, seconds, peak GB)
        self.current = None
        self.dpmm = None  # per-iteration records of the running DPMM
        self.n_dpmm = 0
        self.started = time.perf_counter()

    def phase(self, name, function):
        def timed(*args, **kwargs):
            self.current, began = name, time.perf_counter()
            result = function(*args, **kwargs)
            self.phases.append((name, time.perf_counter() - began, peak_memory_gb()))
            print(f"  {name}: {self.phases[-1][1]:.1f} s (peak memory so far {self.phases[-1][2]:.2f} GB)",
                  flush=True)
            self.current = None
            return result
        return timed

    def install_sampler(self, verbose=True):
        """Wrap the sampler's step and seating to record every iteration of the running DPMM."""

        def timed_step(*args, **kwargs):
            began = time.perf_counter()
            self.seating = (0, 0.0, 0.0)
            state, info = SAMPLER_STEP(*args, **kwargs)
            seconds = time.perf_counter() - began
            record = (seconds, state.age.shape[0]) + self.seating
            self.dpmm["iterations"].append(record)
            it = len(self.dpmm["iterations"])
            if verbose and (it % 50 == 0 or seconds > 10):
                print(f"    iteration {it}: {seconds:.2f} s, K={record[1]}, {record[2]:,} points drawn new "
                      f"(seating {record[3]:.2f} s, log MH ratio {record[4]:.0f})", flush=True)
            return state, info

        def timed_seat(prior, alpha, rows, log_single, rng):
            began = time.perf_counter()
            result = SAMPLER_SEAT(prior, alpha, rows, log_single, rng)
            self.seating = (rows.shape[0], time.perf_counter() - began, result[2])
            return result

        sampler.step, sampler.seat_new_points = timed_step, timed_seat

    def install(self):
        """Also wrap ``cdp.DPMM.fit``, the reassignment and the extraction as phases."""
        recorder = self
        self.install_sampler()

        class TimedDPMM(conjoined.DPMM):
            def fit(self, X, y=None):
                side = ("genes", "cells")[recorder.n_dpmm % 2]  # CDP fits rows (genes) then columns, in turn
                recorder.n_dpmm += 1
                name = f"DPMM on {side} ({X.shape[0]:,} x {X.shape[1]:,}, alpha={self.alpha}, {self.prior!r})"
                recorder.dpmm = {"name": name, "iterations": []}
                print(f"  {name}: started", flush=True)
                recorder.phase(name, super().fit)(X, y)
                recorder.summarise_dpmm(self)
                return self

        cdp.DPMM = TimedDPMM
        cdp.reassign_tokens = self.phase("token reassignment", cdp.reassign_tokens)
        cdp.topic_parameters = self.phase("topic parameters", cdp.topic_parameters)
        cdp.extract_biclusters = self.phase("bicluster extraction", cdp.extract_biclusters)

    def summarise_dpmm(self, model=None):
        """One line on the running (or, with its fitted ``model``, finished) DPMM."""
        if not self.dpmm or not self.dpmm["iterations"]:
            return
        its = np.array([r[:4] for r in self.dpmm["iterations"]])
        seconds, ks, new, seating = its.T
        whole = ""
        if model is not None:
            whole = (f"{model.time_trace_.sum():.1f} s in iterations (median {np.median(model.time_trace_):.3f} s), "
                     f"of which ")
        print(f"    {len(its)} iterations: {whole}{seconds.sum():.1f} s in the pass step (sampler.step; the rest is "
              f"the exact split/merge move), of which seating new points {seating.sum():.1f} s, "
              f"{new.mean():,.0f} points drawn new per iteration on average; K {int(ks[0])} -> {int(ks[-1])}",
              flush=True)

    def report(self, reason):
        total = time.perf_counter() - self.started
        print(f"\n{reason} after {total:.1f} s; peak memory {peak_memory_gb():.2f} GB")
        if self.current:
            print(f"  running: {self.current}")
            self.summarise_dpmm()
        for name, seconds, _ in self.phases:
            print(f"  {seconds:8.1f} s  {name}")
        sys.stdout.flush()


def run_fit(X, args):
    recorder = Recorder()
    recorder.install()
    if args.pipeline == "paper":
        settings = {"row_alpha": 10.0, "row_beta": 0.1, "column_alpha": 10.0, "column_beta": 1.0,
                    "n_iter": args.iterations, "random_state": 0}
        model = cdp.CDP(mode="paper", **settings)
        print(f"fit: CDP(mode='paper') = independent multinomial DPMMs on the raw matrix, {settings}")
    else:
        model = cdp.CDP(n_iter=args.iterations, random_state=0)
        print(f"fit: CDP defaults (alphas {model.row_alpha}/{model.column_alpha}, likelihoods "
              f"{model.row_likelihood}/{model.column_likelihood}, betas {model.row_beta}/{model.column_beta}, "
              f"{model.n_rounds} conjoined rounds), {args.iterations} iterations per DPMM")
    if args.time_limit:
        def stop():
            recorder.report(f"TIME LIMIT of {args.time_limit:.0f} s reached")
            os._exit(3)

        timer = threading.Timer(args.time_limit, stop)
        timer.daemon = True
        timer.start()
    began = time.perf_counter()
    model.fit(X)
    total = time.perf_counter() - began
    recorder.report("CDP fit finished")
    print(f"  total {total:.1f} s; K genes {model.n_row_clusters_}, K cells {model.n_column_clusters_}, "
          f"{model.n_biclusters_} biclusters")


def run_new_point_diagnosis(X):
    print("\nnew: genes DPMM (alpha=10, Multinomial(beta=0.1)), first 3 iterations on the first n genes")
    print("  genes   non-zeros  points new/iter  seating s/iter  rest s/iter  log MH ratio of the seating")
    for n in (750, 1500, 3000, 6000):
        recorder = Recorder()
        recorder.dpmm = {"name": f"genes DPMM on {n} genes", "iterations": []}
        recorder.install_sampler(verbose=False)
        try:
            conjoined.DPMM(alpha=10.0, prior=conjoined.Multinomial(beta=0.1), n_iter=3, random_state=0,
                           store_labels=False).fit(X[:n])
        finally:
            sampler.step, sampler.seat_new_points = SAMPLER_STEP, SAMPLER_SEAT
        seconds, _, new, seating, log_ratio = np.array(recorder.dpmm["iterations"]).T
        print(f"  {n:5d} {X[:n].nnz:11,d} {new.mean():16,.0f} {seating.mean():15.2f} "
              f"{(seconds - seating).mean():12.3f}  {', '.join(f'{x:.0f}' for x in log_ratio)}", flush=True)


def run_parts(X, gene_modules, args):
    """Every phase of the paper pipeline except the genes DPMM, at full size, with the true gene modules standing
    in for the genes DPMM's labels."""
    print(f"\nparts: the phases after the genes DPMM, full size ({args.iterations} iterations for the cells DPMM); "
          "the true gene modules (K=20) stand in for the genes DPMM's labels")
    recorder = Recorder()
    recorder.dpmm = {"name": "cells DPMM", "iterations": []}
    recorder.install_sampler()
    settings = cdp.CDP()
    try:
        cells = recorder.phase("DPMM on cells (alpha=10, Multinomial(beta=1.0))", conjoined.DPMM(
            alpha=10.0, prior=conjoined.Multinomial(beta=1.0), n_iter=args.iterations, random_state=0).fit)(
            sp.csr_matrix(X.T))
    finally:
        sampler.step, sampler.seat_new_points = SAMPLER_STEP, SAMPLER_SEAT
    recorder.summarise_dpmm(cells)
    cell_labels, K_c, _ = recorder.phase("labels and K from the cells trace", cdp._select_labels)(cells)
    K_r = int(gene_modules.max()) + 1
    smoothing = {"a_r": settings.a_r, "a_c": settings.a_c, "lam": settings.lam}
    counts = recorder.phase(f"token reassignment ({settings.n_reassign} sweeps, K={K_r} x {K_c})",
                            cdp.reassign_tokens)(X, gene_modules, cell_labels, K_r, K_c, n_sweeps=settings.n_reassign,
                                                 random_state=np.random.default_rng(0), **smoothing)
    recorder.phase("topic parameters", cdp.topic_parameters)(counts, **smoothing)
    found = recorder.phase("bicluster extraction (significance)", cdp.extract_biclusters)(
        X, counts, rule="significance", row_labels=gene_modules, column_labels=cell_labels)
    recorder.report(f"parts finished ({found.rows.shape[0]} biclusters)")


def time_per_iteration(points, K):
    """Median seconds per iteration and per data pass (after two iterations) of the cells DPMM started from K
    random clusters, and the mean K.

    alpha is tiny so that no new cluster opens and warm-up is off: K stays near its start. The rest of an iteration
    is the parameter draws and one exact split/merge move, whose cost depends on the sizes of the clusters it
    picks, not on K.
    """
    pass_seconds = []

    def timed_assign(backend, *args):
        began = time.perf_counter()
        result = LOCAL_ASSIGN(backend, *args)
        pass_seconds.append(time.perf_counter() - began)
        return result

    LocalBackend.assign = timed_assign
    try:
        model = conjoined.DPMM(alpha=1e-8, prior=conjoined.Multinomial(beta=1.0), n_iter=10, warmup=0,
                               init_clusters=K, random_state=0, store_labels=False).fit(points)
    finally:
        LocalBackend.assign = LOCAL_ASSIGN
    return (float(np.median(model.time_trace_[2:])), float(np.median(pass_seconds[2:])),
            float(model.n_clusters_trace_[2:].mean()))


def run_scaling():
    print("\nscaling: cells DPMM (Multinomial(beta=1)), median times per iteration")
    print("  cells  non-zeros     K  ms/iter  ms/pass  ns per non-zero per cluster (pass)")
    cases = []
    for share in (4, 2, 1):
        X, _, _ = make_marques_like(n_cols=5053 // share, random_state=1)
        cases.append((sp.csr_matrix(X.T), 20))
    X, _, _ = make_marques_like(random_state=1)
    full = sp.csr_matrix(X.T)
    cases += [(full, K) for K in (10, 40, 80)]
    for points, K in cases:
        seconds, pass_seconds, k_mean = time_per_iteration(points, K)
        print(f"  {points.shape[0]:5d} {points.nnz:10,d} {k_mean:5.1f} {seconds * 1e3:8.1f} {pass_seconds * 1e3:8.1f} "
              f"{pass_seconds * 1e9 / (points.nnz * k_mean):10.2f}", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--iterations", type=int, default=500, help="iterations per DPMM (default 500)")
    parser.add_argument("--pipeline", choices=("paper", "defaults"), default="paper")
    parser.add_argument("--skip", nargs="*", default=(), choices=("fit", "new", "parts", "scaling"))
    parser.add_argument("--time-limit", type=float, default=0, help="seconds before the fit is stopped (0: none)")
    args = parser.parse_args()

    began = time.perf_counter()
    X, gene_modules, _ = make_marques_like(random_state=0)
    print(f"data: make_marques_like(random_state=0): {X.shape[0]:,} x {X.shape[1]:,}, {X.nnz:,} non-zeros "
          f"({100 * (1 - X.nnz / (X.shape[0] * X.shape[1])):.1f}% zeros), {int(X.sum()):,} tokens; "
          f"{time.perf_counter() - began:.1f} s to generate, peak memory {peak_memory_gb():.2f} GB; "
          f"{os.cpu_count()} cores")
    if "scaling" not in args.skip:
        run_scaling()
    if "new" not in args.skip:
        run_new_point_diagnosis(X)
    if "parts" not in args.skip:
        run_parts(X, gene_modules, args)
    if "fit" not in args.skip:
        print()
        run_fit(X, args)


if __name__ == "__main__":
    main()
