"""Where the points live: a ``Shard`` holds some points, their labels and their random streams.

A shard receives cluster parameters, runs one fused pass (``kernels.py``) and returns sufficient statistics; it
applies the driver's split and relabelling messages, and hands out the points of given clusters for exact moves.
The points are cut into ``n_shards`` contiguous streams whatever the backend, and stream ``s`` draws its uniforms
from child ``s`` of ``SeedSequence.spawn``: the same seed gives the same labels on every backend and with any
number of threads or workers. The local backend is one shard holding every stream; a distributed backend holds one
shard per stream on its workers.
"""

from __future__ import annotations

import contextlib
import functools
import operator
import threading
from typing import NamedTuple

import numba
import numpy as np
import scipy.sparse as sp
from threadpoolctl import ThreadpoolController

from . import kernels
from .priors import SufficientStats

# Blocks per stream for float (Gaussian) statistics: fixed, so that sums do not depend on the thread count.
GAUSSIAN_BLOCKS = 2
# Fewest points per random stream (``shard_bounds``).
MIN_STREAM_POINTS = 32
# Below this many non-zeros (or points x features) a pass runs single-threaded: thread start-up would dominate.
PARALLEL_MIN_WORK = 200_000


class SparseRows(NamedTuple):
    """Some rows of a CSR matrix as plain arrays (cheap to build and to send): indptr, indices, data."""

    indptr: np.ndarray
    indices: np.ndarray
    data: np.ndarray
    n_features: int

    @property
    def shape(self):
        return self.indptr.shape[0] - 1, self.n_features


def point_priorities(seed, first, n):
    """(n,) uint64 pseudo-random ranks of the points with global indices ``first .. first + n - 1`` for the pass
    keyed by ``seed``.

    A SplitMix64 hash of seed and global index: every shard computes the ranks of its own points without a
    message, and the driver those of all points.
    """
    return kernels.splitmix64(np.uint64(seed), np.uint64(first), int(n))


def shard_bounds(n, n_shards):
    """Edges of ``min(n_shards, n // MIN_STREAM_POINTS)`` (at least one) contiguous, near-equal streams of n
    points: a stream's random draws cost a call, so small data get fewer, longer streams."""
    n_shards = max(1, min(int(n_shards), n // MIN_STREAM_POINTS))
    return np.linspace(0, n, n_shards + 1).astype(np.int64)


class Shard:
    """Points ``offset .. offset + n`` with their labels and one random stream per ``seeds`` entry.

    ``data`` is a CSR matrix of counts (count priors) or a dense (n, d) array (Gaussian prior).
    """

    def __init__(self, data, seeds, offset=0, n_threads=1):
        self.data = data
        self.offset = offset
        self.n_threads = n_threads
        self.sparse = sp.issparse(data)
        if self.sparse:
            self.indptr = np.ascontiguousarray(data.indptr, dtype=np.int64)
            self.indices = np.ascontiguousarray(data.indices, dtype=np.int32)
            self.values = np.ascontiguousarray(data.data, dtype=np.float64)
            work = data.nnz
        else:
            self.values = np.ascontiguousarray(data, dtype=np.float64)
            self.values32 = self.values.astype(np.float32)
            work = data.shape[0] * data.shape[1] ** 2
        self.n, self.d = data.shape
        self.streams = shard_bounds(self.n, len(seeds))
        self.rngs = [np.random.default_rng(seed) for seed in seeds[: len(self.streams) - 1]]
        self.stream_sizes = np.diff(self.streams)
        self.parallel = n_threads > 1 and work >= PARALLEL_MIN_WORK
        self.thread_blocks = shard_bounds(self.n, n_threads if self.parallel else 1)
        self.labels = np.zeros(self.n, np.int32)
        self.sublabels = np.zeros(self.n, np.int8)

    def _uniforms(self):
        if len(self.rngs) == 1:
            return self.rngs[0].random((self.n, 2))
        return np.concatenate([rng.random((size, 2)) for rng, size in zip(self.rngs, self.stream_sizes)])

    def initialize(self, n_clusters, prior, labels=None):
        """Uniformly random labels in 0..n_clusters-1, or ``labels`` (n,) themselves (0..n_clusters-1), and random
        sub-labels; returns their statistics."""
        u = self._uniforms()
        if labels is None:
            self.labels = np.minimum((u[:, 0] * n_clusters).astype(np.int32), n_clusters - 1)
        else:
            self.labels = np.asarray(labels[self.offset:self.offset + self.n], dtype=np.int32).copy()
        self.sublabels = (u[:, 1] < 0.5).astype(np.int8)
        n_sub = 2 * n_clusters
        codes = 2 * self.labels.astype(np.int64) + self.sublabels
        counts = np.bincount(codes, minlength=n_sub).astype(np.float64)
        if self.sparse:
            indicator = sp.csr_matrix((np.ones(self.n), (codes, np.arange(self.n))), shape=(n_sub, self.n))
            return _as_stats(counts, (indicator @ self.data).toarray(), None, n_clusters)
        sums = np.zeros((n_sub, self.d))
        outer = np.zeros((n_sub, self.d, self.d))
        for c in np.flatnonzero(counts):
            points = self.values[codes == c]
            sums[c] = points.sum(axis=0)
            outer[c] = points.T @ points
        return _as_stats(counts, sums, outer, n_clusters)

    def assign(self, params, log_w, sub_params, sub_log_w, random_sub, anchors=None, per_stream=False):
        """One pass: draw labels and sub-labels given the parameters; returns statistics with batch (K, 2).

        ``anchors`` is None (every label allowed) or ``(seed, anchor_priority, anchor_index)``: the points' ranks
        are ``point_priorities(seed, offset, n)`` and each cluster keeps its anchor (``kernels.py``).
        ``per_stream``: a list of statistics to be added in order, one per stream for float data (whose sums
        depend on their order: a Dask worker's streams are added by the driver with every other's), one for counts.
        """
        K = log_w.shape[0]
        u = self._uniforms()
        if anchors is None:
            priority, anchor_priority, anchor_index = np.zeros(0, np.uint64), np.zeros(0, np.uint64), np.zeros(0, np.int64)
        else:
            seed, anchor_priority, anchor_index = anchors
            priority = point_priorities(seed, self.offset, self.n)
        restriction = (self.labels, priority, anchor_priority, anchor_index, self.offset)
        if self.sparse:
            log_rate, offset = params
            sub_log_rate, sub_offset = sub_params
            kernel = kernels.assign_counts if self.parallel else kernels.assign_counts_serial
            with parallel_section(self.parallel):
                labels, sublabels, counts, sums = kernel(
                    self.indptr, self.indices, self.values, np.ascontiguousarray(log_rate.T), offset, log_w,
                    np.ascontiguousarray(sub_log_rate.T), sub_offset, sub_log_w, random_sub, *restriction, u,
                    self.thread_blocks,
                )
            if counts.shape[0] > 1:
                counts, sums = counts.sum(axis=0), sums.sum(axis=0)
            stats = [_as_stats(counts, sums, None, K)]
        else:
            kernel = kernels.assign_gaussian if self.parallel else kernels.assign_gaussian_serial
            bounds = np.unique(np.concatenate([
                np.linspace(a, b, GAUSSIAN_BLOCKS + 1).astype(np.int64)
                for a, b in zip(self.streams[:-1], self.streams[1:])
            ]))
            mu, chol_prec, log_det = params
            sub_mu, sub_chol_prec, sub_log_det = sub_params
            single = np.float32
            # The kernel's matrix products are small and run inside numba's threads: BLAS must not add its own.
            with single_threaded_blas(), parallel_section(self.parallel):
                labels, sublabels, counts, sums, outer = kernel(
                    self.values, self.values32, mu.astype(single), chol_prec.astype(single), log_det, log_w,
                    sub_mu.astype(single), sub_chol_prec.astype(single), sub_log_det, sub_log_w, random_sub,
                    *restriction, u, bounds,
                )
            block_stream = np.searchsorted(self.streams, bounds[:-1], side="right") - 1
            stats = []
            for s in range(len(self.streams) - 1):
                mine = block_stream == s
                stats.append(_as_stats(counts[mine].sum(axis=0), sums[mine].sum(axis=0), outer[mine].sum(axis=0), K))
        self.labels, self.sublabels = labels, sublabels
        return stats if per_stream else functools.reduce(operator.add, stats)

    def update(self, splits, mapping, moved=None):
        """Apply splits ``[(k, new_k), ...]`` (points of k in sub-cluster 1 move to new_k) and ``moved``
        (global point indices, their new label), then the relabelling ``mapping``."""
        for k, new in splits:
            self.labels[(self.labels == k) & (self.sublabels == 1)] = new
        if moved is not None:
            index, label = moved
            label = np.asarray(label)
            mine = (index >= self.offset) & (index < self.offset + self.n)
            self.labels[index[mine] - self.offset] = label[mine] if label.ndim else label
        mapping = np.asarray(mapping, np.int64)
        if (mapping != np.arange(mapping.shape[0])).any():
            self.labels = mapping[self.labels].astype(np.int32)

    def points_of(self, clusters):
        """Global indices (sorted) and data rows of the points whose label is in ``clusters``."""
        in_clusters = self.labels == clusters[0]
        for k in clusters[1:]:
            in_clusters |= self.labels == k
        local = np.flatnonzero(in_clusters)
        return local + self.offset, self._rows(local)

    def held_points(self):
        """Every point held here, as ``SparseRows`` (no copy): count data, which is always held sparse. The kernels
        of the exact moves read it with global point indices, so it is for the driver's backends, which hold every
        point from offset 0."""
        if self.offset != 0:
            raise RuntimeError("held_points is indexed globally: only a backend holding every point has them")
        if not self.sparse:
            raise RuntimeError("held_points serves the count kernels, whose data is held sparse")
        return SparseRows(self.indptr, self.indices, self.values, self.d)

    def rows_at(self, index):
        """Data rows of the points with global indices ``index`` (sorted, all held here)."""
        return self._rows(np.asarray(index, np.int64) - self.offset)

    def _rows(self, local):
        """Data rows ``local`` (sorted indices): ``SparseRows`` or a dense array."""
        if not self.sparse:
            return self.values[local]
        return SparseRows(*kernels.csr_take_rows(self.indptr, self.indices, self.values, local), self.d)


@functools.cache
def _blas_controller():
    """The process's BLAS libraries, found once (threadpoolctl's look-up costs milliseconds per call), including
    SciPy's, which numba's ``np.dot`` calls."""
    import scipy.linalg.cython_blas  # noqa: F401  (loads that library before the look-up)

    return ThreadpoolController()


class _SharedBlasLimit:
    """One BLAS thread while any holder is inside, the original limits back when the last one leaves.

    BLAS's thread count is the process's: a limit entered and left by each of two overlapping fits would have
    the first to leave lift it under the other, and the last put back the "1" it found on entry."""

    def __init__(self):
        self._lock = threading.Lock()
        self._holders = 0
        self._limiter = None

    @contextlib.contextmanager
    def held(self):
        with self._lock:
            if self._holders == 0:
                self._limiter = _blas_controller().limit(limits=1, user_api="blas")
            self._holders += 1
        try:
            yield
        finally:
            with self._lock:
                self._holders -= 1
                if self._holders == 0:
                    self._limiter.restore_original_limits()
                    self._limiter = None


_BLAS_LIMIT = _SharedBlasLimit()


def single_threaded_blas():
    """Context manager keeping BLAS on one thread: for small matrix products inside numba's threads, or many
    times over in a loop, where BLAS's own threads cost more than they give (four times more on a machine whose
    cores other work keeps busy). Fits overlapping in several threads share the limit (``_SharedBlasLimit``)."""
    return _BLAS_LIMIT.held()


_WORKQUEUE_LOCK = threading.Lock()


@contextlib.contextmanager
def parallel_section(parallel):
    """Around a call of a ``parallel=True`` kernel: one at a time in the process under numba's workqueue threading
    layer (where neither OpenMP nor TBB is found, as for many pip installs on macOS), which aborts the process
    when two threads run parallel kernels at once; OpenMP and TBB let overlapping fits run together."""
    if not parallel:
        yield
        return
    try:
        layer = numba.threading_layer()
    except ValueError:  # no parallel kernel has run yet: the layer is chosen at the first
        layer = None
    if layer in ("omp", "tbb"):
        yield
    else:
        with _WORKQUEUE_LOCK:
            yield


def _as_stats(counts, sums, outer, K):
    d = sums.shape[-1]
    return SufficientStats(
        counts.reshape(K, 2), sums.reshape(K, 2, d), None if outer is None else outer.reshape(K, 2, d, d)
    )


class LocalBackend(Shard):
    """Every point in this process: one shard with every stream; passes use ``n_threads`` numba threads."""

    def __init__(self, data, seeds, n_threads=1):
        super().__init__(data, seeds, 0, n_threads)
        self.n_points = self.n
        self.shards = [self]

    def labels_at(self, index):
        return self.labels[index]

    def all_labels(self):
        return self.labels

    def close(self):
        pass
