"""Single-cell scale: a full CDP fit on a synthetic matrix of the Marques et al. size, phase by phase.

Data: ``conjoined.datasets.make_marques_like()``, 23,226 genes x 5,053 cells, ~14.5 million non-zeros (87.6%
zeros), block structure, negative-binomial counts. Genes are the rows, cells the columns.

Sections (all by default; each can be skipped):

``fit``      The full CDP fit with the paper's single-cell settings: genes alpha=10 beta=0.1, cells alpha=10 beta=1,
             ``--iterations`` (500) per DPMM, then the token reassignment and the extraction. ``--pipeline paper``
             (default) is ``CDP(mode="paper")``: the published pipeline, independent *multinomial* DPMMs on the raw
             matrix; ``--pipeline defaults`` is our default CDP (``CDP(n_iter=--iterations)``: Poisson
             likelihoods, alpha=1, beta=1, 2 conjoined rounds). Prints every phase's time and, per DPMM, where its
             iterations spend their time, during warm-up and after: the data pass (``LocalBackend.assign``), the
             rest of ``sampler.step`` (parameter draws; during warm-up the sub-cluster splits and merges) and the
             rest of the iteration (the exact split/merge move of ``sams.py``, the traces). Then the peak resident
             memory (``ru_maxrss``) and the NMI of the labels against the simulation's truth. ``--time-limit``
             stops the process after that many seconds and prints what was measured so far.
``parts``    Every phase of the paper pipeline except the genes DPMM, at full size: the cells DPMM, the choice of
             K and labels from its trace, the reassignment, the extraction; the true gene modules stand in for the
             genes DPMM's labels.
``scaling``  Time per DPMM iteration and per data pass against non-zeros (cells DPMM on 1/4, 1/2 and all cells)
             and against K (all cells, 10 to 80 clusters), with the pass's nanoseconds per non-zero per cluster:
             constant means linear in both.

    python benchmarks/scale.py                                   # everything, paper pipeline
    python benchmarks/scale.py --skip parts scaling              # the full fit only
    python benchmarks/scale.py --pipeline defaults --skip parts scaling
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
from sklearn.metrics import normalized_mutual_info_score

import conjoined
from conjoined import cdp
from conjoined.datasets import make_marques_like
from conjoined.dpmm import sampler
from conjoined.dpmm.backends import LocalBackend

SAMPLER_STEP, LOCAL_ASSIGN = sampler.step, LocalBackend.assign


def peak_memory_gb():
    """Peak resident set size of this process so far (Linux reports ru_maxrss in kilobytes)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6


class Recorder:
    """Times the phases of a CDP fit and, per DPMM, every iteration's sampler step and data pass."""

    def __init__(self):
        self.phases = []  # (name, seconds, peak GB)
        self.current = None  # (name, start) of the running phase
        self.dpmm = None  # the running DPMM: {"name", "iterations": [(step s, pass s, K, warm-up), ...]}
        self.n_dpmm = 0
        self.pass_seconds = 0.0
        self.started = time.perf_counter()

    def phase(self, name, function):
        def timed(*args, **kwargs):
            self.current = (name, time.perf_counter())
            result = function(*args, **kwargs)
            self.phases.append((name, time.perf_counter() - self.current[1], peak_memory_gb()))
            print(f"  {name}: {self.phases[-1][1]:.1f} s (peak memory so far {self.phases[-1][2]:.2f} GB)",
                  flush=True)
            self.current = None
            return result
        return timed

    def install_sampler(self, verbose=True):
        """Wrap ``sampler.step`` and ``LocalBackend.assign`` to record every iteration of the running DPMM."""

        def timed_assign(backend, *args):
            began = time.perf_counter()
            result = LOCAL_ASSIGN(backend, *args)
            self.pass_seconds += time.perf_counter() - began
            return result

        def timed_step(*args, subcluster_moves=True, **kwargs):
            self.pass_seconds, began = 0.0, time.perf_counter()
            state, info = SAMPLER_STEP(*args, subcluster_moves=subcluster_moves, **kwargs)
            record = (time.perf_counter() - began, self.pass_seconds, state.age.shape[0], subcluster_moves)
            self.dpmm["iterations"].append(record)
            it = len(self.dpmm["iterations"])
            if verbose and (it % 100 == 0 or record[0] > 10):
                print(f"    iteration {it}: step {record[0]:.2f} s (pass {record[1]:.2f} s), K={record[2]}",
                      flush=True)
            return state, info

        sampler.step, LocalBackend.assign = timed_step, timed_assign

    @staticmethod
    def uninstall_sampler():
        sampler.step, LocalBackend.assign = SAMPLER_STEP, LOCAL_ASSIGN

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
                recorder.dpmm = None
                return self

        cdp.DPMM = TimedDPMM
        cdp.reassign_tokens = self.phase("token reassignment", cdp.reassign_tokens)
        cdp.topic_parameters = self.phase("topic parameters", cdp.topic_parameters)
        cdp.extract_biclusters = self.phase("bicluster extraction", cdp.extract_biclusters)

    def summarise_dpmm(self, model=None):
        """Where the running (or, with its fitted ``model``, finished) DPMM's iterations spent their time."""
        if not self.dpmm or not self.dpmm["iterations"]:
            return
        step, data_pass, ks, warm = (np.array(column) for column in zip(*self.dpmm["iterations"]))
        warm = warm.astype(bool)
        whole = step if model is None else model.time_trace_[:step.shape[0]]
        for label, part in (("warm-up", warm), ("after warm-up", ~warm)):
            if not part.any():
                continue
            line = (f"    {label}: {part.sum()} iterations, {whole[part].sum():.1f} s "
                    f"(median {np.median(whole[part]) * 1e3:.0f} ms): data pass {data_pass[part].sum():.1f} s, "
                    f"rest of the step {(step - data_pass)[part].sum():.1f} s")
            if model is not None:
                line += f", exact split/merge move and traces {(whole - step)[part].sum():.1f} s"
            print(f"{line}; K {int(ks[part][0])} -> {int(ks[part][-1])}", flush=True)

    def report(self, reason):
        now = time.perf_counter()
        total, running = now - self.started, 0.0
        print(f"\n{reason} after {total:.1f} s; peak memory {peak_memory_gb():.2f} GB")
        if self.current:
            name, began = self.current
            running = now - began
            print(f"  running for {running:.1f} s: {name}")
            self.summarise_dpmm()
        for name, seconds, _ in self.phases:
            print(f"  {seconds:8.1f} s  {name}")
        print(f"  {total - running - sum(seconds for _, seconds, _ in self.phases):8.1f} s  outside these phases (validation, "
              "canonical order of rows and columns, labels from the traces)")
        sys.stdout.flush()


def run_fit(X, truth, args):
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
    model.fit(X)
    recorder.report("CDP fit finished")
    gene_modules, cell_types = truth
    print(f"  K genes {model.n_row_clusters_} (NMI {normalized_mutual_info_score(gene_modules, model.row_labels_):.3f}"
          f" vs the {gene_modules.max() + 1} modules), K cells {model.n_column_clusters_} (NMI "
          f"{normalized_mutual_info_score(cell_types, model.column_labels_):.3f} vs the {cell_types.max() + 1} "
          f"types), {model.n_biclusters_} biclusters")


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
        recorder.uninstall_sampler()
    recorder.summarise_dpmm(cells)
    cell_labels, K_c, _ = recorder.phase("labels and K from the cells trace", cdp._select_labels)(
        cells, sp.csr_matrix(X.T))
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

    alpha is tiny so that the exact split/merge move splits nothing, and warm-up is off (anchored passes): K stays
    near its start. The rest of an iteration is the parameter draws and one exact split/merge move, whose cost
    depends on the sizes of the clusters it picks, not on K.
    """
    recorder = Recorder()
    recorder.dpmm = {"name": f"cells DPMM from {K} clusters", "iterations": []}
    recorder.install_sampler(verbose=False)
    try:
        model = conjoined.DPMM(alpha=1e-8, prior=conjoined.Multinomial(beta=1.0), n_iter=10, warmup=0,
                               init_clusters=K, random_state=0, store_labels=False).fit(points)
    finally:
        recorder.uninstall_sampler()
    pass_seconds = np.array([record[1] for record in recorder.dpmm["iterations"]])
    return (float(np.median(model.time_trace_[2:])), float(np.median(pass_seconds[2:])),
            float(model.n_clusters_trace_[2:].mean()))


def run_scaling():
    print("\nscaling: cells DPMM (Multinomial(beta=1)), after warm-up, median times per iteration")
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
    parser.add_argument("--skip", nargs="*", default=(), choices=("fit", "parts", "scaling"))
    parser.add_argument("--time-limit", type=float, default=0, help="seconds before the fit is stopped (0: none)")
    args = parser.parse_args()

    began = time.perf_counter()
    X, gene_modules, cell_types = make_marques_like(random_state=0)
    print(f"data: make_marques_like(random_state=0): {X.shape[0]:,} x {X.shape[1]:,}, {X.nnz:,} non-zeros "
          f"({100 * (1 - X.nnz / (X.shape[0] * X.shape[1])):.1f}% zeros), {int(X.sum()):,} tokens; "
          f"{time.perf_counter() - began:.1f} s to generate, peak memory {peak_memory_gb():.2f} GB; "
          f"{os.cpu_count()} cores")
    if "scaling" not in args.skip:
        run_scaling()
    if "parts" not in args.skip:
        run_parts(X, gene_modules, args)
    if "fit" not in args.skip:
        print()
        run_fit(X, (gene_modules, cell_types), args)


if __name__ == "__main__":
    main()
