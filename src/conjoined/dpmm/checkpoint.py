"""Checkpoints of a DPMM fit: all it takes to continue the chain exactly where it stopped.

A checkpoint holds the number of completed iterations, the driver-side sampler state (``DPMMState``), the
driver's random state, every point's label and sub-label, every stream's random state, the traces so far and, for
``estimate="map"``, the most probable sample so far. It is an ``.npz`` file (no pickled objects: random states
are stored as JSON), written to a temporary file in the same directory and moved over the old one with
``os.replace``, so a fit killed while writing leaves the previous checkpoint intact.

The label trace (``store_labels``), n_iter x n_points, is not in it: a save would rewrite it whole, and a chain's
saves would write it about ``n_iter / (2 checkpoint_every)`` times over (for a million points and 1,000
iterations, some 200 GB). It goes to the file beside it named ``<checkpoint>.labels`` (``LABELS_SUFFIX``), raw
int32 rows of n_points, one per iteration, to which each save appends the iterations since the last, on disk
before the checkpoint that counts them replaces the previous one; rows that a saved checkpoint counts are never
rewritten, so a fit killed at any point leaves the two files consistent. The checkpoint holds the CRC-32 of the
rows it counts: a labels file shortened, overwritten or paired with another chain's checkpoint is refused, not
read. (Checkpoints of format version 1, which held the trace, are still read.)

A checkpoint is tied to the data and to every parameter that changes the chain (``fingerprint``); loading one
written for anything else raises a ValueError that names the difference. ``random_state=None`` matches any seed:
the chain continues with the saved random states.
"""

from __future__ import annotations

import hashlib
import json
import os
import zipfile
import zlib
from contextlib import contextmanager
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp

from ..io import atomic_output_file
from .priors import SufficientStats
from .sampler import DPMMState

FORMAT_VERSION = 2
READABLE_VERSIONS = (1, 2)  # version 1 held the label trace in the checkpoint
LABELS_SUFFIX = ".labels"


def _digest(values):
    """sha256 hex digest of a sequence of arrays and plain values."""
    h = hashlib.sha256()
    for value in values:
        if isinstance(value, np.ndarray):
            h.update(f"{value.dtype.str}{value.shape}".encode())
            h.update(np.ascontiguousarray(value).tobytes())
        else:
            h.update(repr(value).encode())
    return h.hexdigest()


def data_digest(data):
    """Digest of the points (CSR counts or a dense array) as the sampler sees them."""
    if sp.issparse(data):
        return _digest(["csr", data.shape, np.asarray(data.indptr, np.int64), np.asarray(data.indices, np.int64),
                        np.asarray(data.data, np.float64)])
    return _digest(["dense", np.asarray(data, np.float64)])


def prior_description(prior):
    """``prior.checkpoint_label()`` with a digest of all its (fitted) attributes, which the label may not show."""
    attributes = sorted(vars(prior).items())
    digest = _digest([name for name, _ in attributes] + [value for _, value in attributes])[:16]
    return f"{prior.checkpoint_label()} #{digest}"


def check_checkpoint_path(path):
    """``path`` as given, after checking it names a file in an existing folder; ValueError naming it otherwise."""
    if not isinstance(path, (str, os.PathLike)) or not os.fspath(path):
        raise ValueError(f"checkpoint must be None or a file's path, got {path!r}")
    if os.path.isdir(path):
        raise ValueError(f"checkpoint {os.fspath(path)} is a folder; give the path of a file in it, e.g. "
                         f"{os.path.join(path, 'dpmm.npz')}")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise ValueError(f"checkpoint {os.fspath(path)}: the folder {folder} does not exist; create it or choose "
                         "another checkpoint path")
    return path


def _read_arrays(path):
    """Every array of the ``.npz`` file at ``path``, by name."""
    file = np.load(path, allow_pickle=False)
    if not isinstance(file, np.lib.npyio.NpzFile):
        raise TypeError("it holds a single array, not the arrays of a checkpoint")
    with file:
        return {name: file[name] for name in file.files}


class MostProbableSample(NamedTuple):
    """A ``DPMM(estimate="map")`` fit's most probable posterior sample so far.

    iteration : int, where it was drawn.
    log_posterior : float, its log posterior (the estimate's criterion).
    labels : (n_points,) int32, its partition.
    stats : SufficientStats with batch shape (K,), its clusters' statistics.
    """

    iteration: int
    log_posterior: float
    labels: np.ndarray
    stats: SufficientStats


def _checkpoint(arrays):
    """The ``Checkpoint`` held by a file's arrays (KeyError, TypeError or ValueError if one is missing or garbled)."""
    random_states = json.loads(str(arrays["random_states"]))
    stats = SufficientStats(arrays["stats_n"], arrays["stats_s1"], arrays.get("stats_s2"))
    traces = {key[len("trace_"):]: value for key, value in arrays.items() if key.startswith("trace_")}
    best = None
    if "best_iteration" in arrays:
        best = MostProbableSample(
            int(arrays["best_iteration"]), float(arrays["best_log_posterior"]), arrays["best_labels"],
            SufficientStats(arrays["best_stats_n"], arrays["best_stats_s1"], arrays.get("best_stats_s2")),
        )
    crc = int(arrays["labels_crc32"]) if "labels_crc32" in arrays else None
    return Checkpoint(int(arrays["iteration"]), DPMMState(stats, arrays["age"], arrays["random_sub"]),
                      random_states["driver"], arrays["labels"], arrays["sublabels"], random_states["streams"],
                      traces, best, crc)


class Checkpoint(NamedTuple):
    """The content of a checkpoint file (see the module docstring)."""

    iteration: int
    state: DPMMState
    rng_state: dict
    labels: np.ndarray
    sublabels: np.ndarray
    stream_states: list
    traces: dict
    best: MostProbableSample | None
    labels_crc32: int | None = None  # of the label trace's rows in the labels file (None: version 1)


class Checkpointer:
    """Saves a fit every ``every`` iterations (and at the last) to ``path``, and resumes from it.

    ``settings`` is a dict of plain values (parameters that change the chain, the seed's entropy or None); with
    ``data_key`` (``data_digest``) it must match the file's for a resume, but for a larger ``n_iter`` when
    ``extends``: the chain then goes on to it.
    """

    def __init__(self, path, every, data_key, extends, settings):
        self.path = os.fspath(path)
        self.every = every
        self.data_key = data_key
        self.extends = extends
        self.settings = settings
        self.labels_path = self.path + LABELS_SUFFIX
        self._labels_saved = 0  # leading rows of the label trace that the labels file holds
        self._labels_crc = 0  # their CRC-32

    def due(self, iteration, n_iter):
        """Whether to save after ``iteration`` completed iterations."""
        return iteration % self.every == 0 or iteration == n_iter

    def save(self, iteration, state, rng, backend, traces, best=None):
        """Write the checkpoint after ``iteration`` completed iterations; ``traces`` are full-length arrays,
        ``best`` a ``MostProbableSample`` or None."""
        arrays = {
            "format_version": np.array(FORMAT_VERSION),
            "data_key": np.array(self.data_key),
            "settings": np.array(json.dumps(self.settings, sort_keys=True)),
            "iteration": np.array(iteration),
            "stats_n": state.stats.n,
            "stats_s1": state.stats.s1,
            "age": state.age,
            "random_sub": state.random_sub,
            "labels": backend.labels,
            "sublabels": backend.sublabels,
            "random_states": np.array(json.dumps({
                "driver": rng.bit_generator.state,
                "streams": [stream.bit_generator.state for stream in backend.rngs],
            })),
        }
        if state.stats.s2 is not None:
            arrays["stats_s2"] = state.stats.s2
        for name, trace in traces.items():
            if trace is not None and name != "labels":
                arrays[f"trace_{name}"] = trace[:iteration]
        if traces.get("labels") is not None:
            self._append_labels(traces["labels"], iteration)
            arrays["labels_crc32"] = np.array(self._labels_crc, np.int64)
        if best is not None:
            arrays.update(best_iteration=np.array(best.iteration), best_log_posterior=np.array(best.log_posterior),
                          best_labels=best.labels, best_stats_n=best.stats.n, best_stats_s1=best.stats.s1)
            if best.stats.s2 is not None:
                arrays["best_stats_s2"] = best.stats.s2
        with atomic_output_file(self.path) as temporary, open(temporary, "wb") as file:
            np.savez(file, **arrays)
            file.flush()
            os.fsync(file.fileno())  # a checkpoint is for surviving a crash: on disk before it replaces the last

    def _append_labels(self, trace, iteration):
        """Write rows ``[saved, iteration)`` of the label trace (n_iter, n_points) to the labels file, ``saved``
        being the rows it holds already (none for a new chain, whose file is started afresh), and fsync it: on
        disk before the checkpoint that counts them replaces the last."""
        start, row_bytes = self._labels_saved, trace.shape[1] * 4
        rows = np.ascontiguousarray(trace[start:iteration], np.int32).tobytes()
        with open(self.labels_path, "r+b" if start else "wb") as file:
            if os.fstat(file.fileno()).st_size < start * row_bytes:  # a seek past the end would leave zeros
                raise ValueError(f"checkpoint {self.path}: its label trace {self.labels_path} holds fewer than the "
                                 f"{start} iterations saved in it (another fit writing to the same checkpoint?)")
            file.seek(start * row_bytes)
            file.write(rows)
            file.truncate()
            file.flush()
            os.fsync(file.fileno())
        self._labels_saved = iteration
        self._labels_crc = zlib.crc32(rows, self._labels_crc)

    def _saved_labels(self, iteration, n_points, crc):
        """``(rows, their CRC-32)``: the first ``iteration`` rows of the label trace, (iteration, n_points) int32,
        from the labels file; ValueError naming both files if it is missing, shorter, or its rows' CRC-32 is not
        ``crc`` (None: not checked)."""
        try:
            values = np.fromfile(self.labels_path, np.int32, count=iteration * n_points)
        except OSError as error:
            values, reason = None, f"{type(error).__name__}: {error}"
        else:
            reason = f"{values.size // max(n_points, 1)} iterations of labels, not {iteration}"
            actual = zlib.crc32(values)
            if values.size == iteration * n_points and crc is not None and actual != crc:
                reason = "its rows are not those the checkpoint counts: written by another chain, or changed since"
                values = None
        if values is None or values.size < iteration * n_points:
            raise ValueError(
                f"checkpoint {self.path} is damaged: its label trace {self.labels_path} cannot be read ({reason}); "
                "if an interrupted fit left them, delete both files to start afresh, else choose another "
                "checkpoint path"
            )
        return values.reshape(iteration, n_points), actual

    def load(self):
        """The ``Checkpoint`` at ``path``, or None if there is no file. ValueError if it belongs to another fit or
        cannot be read."""
        if not os.path.exists(self.path):
            return None
        with self._reading():
            arrays = _read_arrays(self.path)
        version = arrays.get("format_version")
        if (version is None or version.shape != () or version.dtype.kind not in "iu"
                or int(version) not in READABLE_VERSIONS):
            raise ValueError(f"{self.path} is not a DPMM checkpoint of format version "
                             f"{' or '.join(map(str, READABLE_VERSIONS))}")
        with self._reading():
            data_key = str(arrays["data_key"])
            settings = dict(json.loads(str(arrays["settings"])))
            checkpoint = _checkpoint(arrays)
        if data_key != self.data_key:
            raise ValueError(f"checkpoint {self.path} was written for different data; remove it or choose "
                             "another checkpoint path")
        self._check_settings(settings)
        return checkpoint

    @contextmanager
    def _reading(self):
        """Report any failure to read the file as one ValueError that names it."""
        try:
            yield
        except (OSError, EOFError, KeyError, TypeError, ValueError, zipfile.BadZipFile) as error:
            raise ValueError(
                f"checkpoint {self.path} is damaged or is not a DPMM checkpoint ({type(error).__name__}: {error}); "
                "if an interrupted fit left it, delete it to start afresh, else choose another checkpoint path"
            ) from error

    def _check_settings(self, saved):
        current = dict(self.settings)
        if current.get("seed") is None:
            current["seed"] = saved.get("seed")
        keys = [key for key in sorted(set(saved) | set(current)) if saved.get(key) != current.get(key)]
        # a chain resumed with more iterations goes on to them: it is the chain an uninterrupted fit draws
        extending = (self.extends and isinstance(saved.get("n_iter"), int)
                     and current.get("n_iter", 0) > saved["n_iter"])
        if extending:
            keys.remove("n_iter")
        differ = [f"{key}: {saved.get(key)!r} in the file, {current.get(key)!r} now" for key in keys]
        if differ:
            start = ""
            if keys == ["warmup"] and extending:
                start = (f" (a chain goes on to more iterations with the warm-up it was drawn with: give "
                         f"warmup={saved['warmup']})")
            if saved.get("init_labels") != current.get("init_labels"):
                # CDP's first mixtures: a fit started from one cluster (before the spectral start, or init="one")
                # resumes with the start it was made with
                start = (" (a CDP fit's first mixtures start from the matrix's spectrum by default: one begun from "
                         "one cluster resumes with init='one', --init one; one begun from the spectrum with the "
                         "default)")
            raise ValueError(f"checkpoint {self.path} was written with other parameters ({'; '.join(differ)}){start}; "
                             "remove it or choose another checkpoint path")

    def resume(self, backend, rng, traces):
        """Restore a saved fit into ``backend``, ``rng`` and ``traces`` (filled up to the saved iteration).

        Returns ``(iteration, state, best)`` (``best``: the saved ``MostProbableSample`` or None), or None when
        there is no checkpoint yet.
        """
        saved = self.load()
        if saved is None:
            return None
        if saved.labels.shape[0] != backend.n_points or len(saved.stream_states) != len(backend.rngs):
            raise ValueError(f"checkpoint {self.path} does not match the data's points or streams")
        with self._reading():
            backend.labels = saved.labels.astype(np.int32)
            backend.sublabels = saved.sublabels.astype(np.int8)
            for stream, state in zip(backend.rngs, saved.stream_states):
                stream.bit_generator.state = state
            rng.bit_generator.state = saved.rng_state
            for name, trace in traces.items():
                if trace is not None and not (name == "labels" and name not in saved.traces):
                    trace[:saved.iteration] = saved.traces[name]
        if traces.get("labels") is not None and "labels" not in saved.traces:  # not a version-1 checkpoint
            rows, self._labels_crc = self._saved_labels(saved.iteration, backend.n_points, saved.labels_crc32)
            traces["labels"][:saved.iteration] = rows
            self._labels_saved = saved.iteration
        return saved.iteration, saved.state, saved.best
