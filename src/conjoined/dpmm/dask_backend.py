"""The sampler's data pass on a Dask distributed cluster: workers hold the points, the driver the rest.

The points are cut into the same streams as on the local backend (``backends.shard_bounds``). Each worker holds an
actor (``ShardGroup``) with a few consecutive streams; the data are sent once, when the actor is created. An iteration is one round of concurrent actor calls: the driver sends the cluster parameters
(and the relabelling messages of the previous iteration), each actor runs the fused pass over its streams and
returns their statistics, labels, sub-labels and random-stream states.

The driver keeps a full copy of what the workers hold, as of the last completed pass: the data, the labels and
sub-labels (it applies the same relabelling messages) and every stream's random state. This copy serves the exact
split/merge moves (``points_of``, ``labels_at``) without a round trip, and it is how a lost worker is survived:
when a call fails because its worker died, the streams of that actor are re-created on a surviving worker from the
copy and their pass is run again with the same parameters and the same random states, so the fit ends exactly as
an undisturbed one would. Checkpoints read and restore the same copy (``checkpoint.py``).

Statistics are summed over streams in stream order, as the local backend does, so float (Gaussian) statistics are
bit-identical; count statistics are integer-valued floats, exact in any order, so an actor holds all its streams
of count data in one shard and sends one (K, 2, d) array rather than one per stream.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
import warnings
from concurrent.futures import CancelledError

import numba
import numpy as np

try:
    from distributed import Client, LocalCluster
    from distributed.comm.addressing import get_address_host_port, parse_address
    from distributed.scheduler import KilledWorker
except ImportError as error:  # pragma: no cover - exercised by hiding the module in a test
    raise ImportError(
        'backend="dask" needs Dask distributed, an optional dependency: pip install "dask[distributed]"'
    ) from error

from .backends import Shard
from .estimator import numba_threads

# What a call raises when the worker that holds its actor died (the connection drops, or the scheduler already
# forgot the actor).
WORKER_LOST = (OSError, KilledWorker, CancelledError)
# Re-creations of lost streams allowed within one pass before giving up.
MAX_RECOVERIES = 5
# Seconds to wait for a worker to (re)join when every known worker has been lost.
WORKER_WAIT = 60


class ShardGroup:
    """Dask actor: consecutive streams of points, restored from the driver's copy.

    ``parts`` is a list of ``(data, seeds, offset, edges, labels, sublabels, rng_states)``, each one
    ``Shard`` of the streams ``seeds`` whose points start at ``offset + edges[:-1]`` (the global stream edges,
    which a shard of several streams would not recompute exactly from its own size): one shard for all the
    group's streams, whose pass returns float statistics stream by stream, so that the driver adds them in stream
    order (count statistics are exact integers in any order). ``n_threads`` are the numba threads of a pass: one
    parallel launch for the group (a shard per stream took 8-16 small launches a pass, whose idle threads, on a
    worker of two threads, made Gaussian passes ten times slower).
    """

    def __init__(self, parts, n_threads):
        self.n_threads = max(1, min(int(n_threads), numba.config.NUMBA_NUM_THREADS))
        self.shards = []
        for data, seeds, offset, edges, labels, sublabels, rng_states in parts:
            shard = Shard(data, seeds, offset, self.n_threads)
            shard.streams, shard.stream_sizes = edges, np.diff(edges)
            shard.labels, shard.sublabels = labels, sublabels
            for rng, state in zip(shard.rngs, rng_states):
                rng.bit_generator.state = state
            self.shards.append(shard)

    def assign(self, messages, *kernel_params):
        """Apply the driver's messages ``[(method name, args), ...]`` in order, then one pass per shard.

        Returns ``(stats, labels, sublabels, rng_states)``: SufficientStats per shard, the concatenated labels and
        sub-labels, and the random state of every stream.
        """
        for name, args in messages:
            for shard in self.shards:
                getattr(shard, name)(*args)
        with numba_threads(self.n_threads):
            stats = [part for shard in self.shards for part in shard.assign(*kernel_params, per_stream=True)]
        return (
            stats,
            np.concatenate([shard.labels for shard in self.shards]),
            np.concatenate([shard.sublabels for shard in self.shards]),
            [rng.bit_generator.state for shard in self.shards for rng in shard.rngs],
        )


@contextlib.contextmanager
def _workers_ignoring_ctrl_c():
    """Worker processes started inside inherit an ignored SIGINT (Python leaves an ignored SIGINT ignored). A
    Ctrl-C at a terminal reaches the whole process group: the driver's KeyboardInterrupt closes the cluster, and
    the workers no longer each print a traceback of their own. (A Ctrl-C while the cluster starts, a second or
    two, is ignored; a worker its nanny restarts later takes Python's handler again.) Outside the main thread,
    where signals cannot be set, or under a handler installed outside Python, which could not be put back,
    nothing changes."""
    previous = signal.getsignal(signal.SIGINT)
    if threading.current_thread() is not threading.main_thread() or previous is None:
        yield
        return
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@contextlib.contextmanager
def _nanny_variables_undone():
    """Around the start of an embedded cluster: yield a dict, filled afterwards with the variables the start set
    in ``os.environ`` (name -> (value before or None, value set)), which are then put back as they were, also
    if the start fails.

    Before spawning a worker, a Dask nanny sets variables in the environment of the process that starts it
    (OMP_NUM_THREADS=1, MKL_NUM_THREADS=1, PYTHONHASHSEED, ...: distributed's ``pre-spawn-environ``): left there,
    they would make the user's later libraries and subprocesses single-threaded, with a fixed hash seed. The
    workers already spawned keep them."""
    before = dict(os.environ)
    changed = {}
    try:
        yield changed
    finally:
        changed.update({name: (before.get(name), value) for name, value in os.environ.items()
                        if before.get(name) != value})
        changed.update({name: (value, None) for name, value in before.items() if name not in os.environ})
        _undo(changed)


def _undo(changed):
    """Put back the variables of ``changed`` (from :func:`_nanny_variables_undone`) that still hold the value the
    nanny set; a variable changed since by anyone else is left alone."""
    for name, (value_before, value_set) in changed.items():
        if os.environ.get(name) != value_set:
            continue
        if value_before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value_before


@contextlib.contextmanager
def embedded_client(n_workers=2, threads_per_worker=1):
    """A ``distributed.Client`` of a ``LocalCluster`` started in this process on 127.0.0.1 (``n_workers`` worker
    processes of ``threads_per_worker`` threads), closed with the cluster on exit. A Ctrl-C is ignored while the
    workers start (:func:`_workers_ignoring_ctrl_c`); the variables their nannies set are undone after the start
    and again at the close (:func:`_nanny_variables_undone`)."""
    # The scheduler's HTTP server (health routes) gets a free port: 8787 may be taken by another cluster.
    with _workers_ignoring_ctrl_c(), _nanny_variables_undone() as changed:
        cluster = LocalCluster(n_workers=n_workers, threads_per_worker=threads_per_worker, processes=True,
                               host="127.0.0.1", dashboard_address=":0", scheduler_kwargs={"dashboard": False})
    try:
        with Client(cluster, set_as_default=False) as client:
            yield client
    finally:
        cluster.close()
        _undo(changed)  # a nanny that restarted a worker set its variables again


def _checked_address(address):
    """``address`` after checking that a TCP or TLS one has a host and a port: a ``Client`` given one without
    fails half-way through its start and, at exit, holds the process for a minute before it closes."""
    if not isinstance(address, str):  # a Cluster object, which Client also takes
        return address
    scheme, _ = parse_address(address)
    if scheme in ("tcp", "tls"):
        try:
            get_address_host_port(address)
        except ValueError as error:
            raise ValueError(f"address {address!r} is not a Dask scheduler's address ({error}): give "
                             "HOST:PORT, e.g. 127.0.0.1:8786, or tcp://HOST:PORT") from None
    return address


def _connected_client(address):
    """A ``Client`` of the scheduler at ``address``; OSError naming the address where none answers as a scheduler:
    a server of another kind there (a dashboard's port, 8787, for the scheduler's, 8786) made Dask read its
    reply as a message length and fail for lack of exabytes of memory (``MemoryError``). One that accepts the
    connection and never answers holds Dask's handshake (docs/scale.md)."""
    # Made in two steps so that a client whose start failed can be closed: left to its __del__, it held the
    # process for a minute at exit.
    client = Client.__new__(Client)
    try:
        client.__init__(address, set_as_default=False)
    except (OSError, MemoryError, TimeoutError) as error:
        with contextlib.suppress(Exception):
            client.close(timeout=1)
        raise OSError(f"no Dask scheduler answered at {address!r} ({type(error).__name__}: {error}): give the "
                      "scheduler's address (its port 8786 by default, not the dashboard's 8787)") from None
    return client


def _check_running(client, lost=False):
    """RuntimeError, saying so, where the Dask ``client`` is closed or has lost its scheduler (``lost``: it has,
    whatever its status says): a fit cannot go on without its workers, and the errors Dask gives then
    (``KeyError: 'workers'``, ``IOLoop is closed``) do not say why."""
    if lost or client.status != "running":
        state = "closed" if client.status in ("closing", "closed") else "not connected"
        raise RuntimeError(f"the Dask client is {state} (status {client.status!r}): its cluster is gone or was "
                           "closed; fit with a running client, or without one (an embedded cluster)")


class DaskBackend(Shard):
    """Backend whose passes run on Dask workers; the driver-side ``Shard`` (every stream) is the recovery copy.

    Parameters
    ----------
    data : CSR counts or dense (n, d) float array, the points.
    seeds : list of SeedSequence, one per stream (as for ``LocalBackend``).
    client : distributed.Client or None
        An existing client; left open at ``close``.
    address : str or None
        Scheduler address to connect to (a client is opened and closed at ``close``).
    Without either, an embedded ``LocalCluster`` on 127.0.0.1 (``n_workers`` processes with
    ``threads_per_worker`` threads) is started and closed at ``close``.

    Actors are started at the first pass, one per worker (at most one per stream), from the driver's copy; so
    labels restored from a checkpoint before that are what the workers receive.
    """

    def __init__(self, data, seeds, client=None, address=None, n_workers=2, threads_per_worker=1):
        super().__init__(data, seeds, 0, 1)
        self.n_points = self.n
        self.seeds = list(seeds)
        self.owned = contextlib.ExitStack()  # what close() closes: a client opened here, a cluster started here
        if client is not None:
            _check_running(client)
            self.client = client
        elif address is not None:
            self.client = self.owned.enter_context(_connected_client(_checked_address(address)))
        else:
            self.client = self.owned.enter_context(embedded_client(n_workers, threads_per_worker))
        self.groups = None  # stream indices of each actor
        self.actors, self.actor_futures, self.placement, self.pending = [], [], [], []
        self.lost_workers = set()

    # Driver-side views of the copy.
    def labels_at(self, index):
        return self.labels[index]

    def all_labels(self):
        return self.labels

    def _workers(self):
        """{address: threads} of the live workers; waits up to WORKER_WAIT seconds for one if none is left."""
        deadline = time.monotonic() + WORKER_WAIT
        while True:
            _check_running(self.client)
            info = self.client.scheduler_info(n_workers=-1)
            if "workers" not in info:  # closed while this asked
                _check_running(self.client, lost=True)
            workers = {address: worker["nthreads"] for address, worker in info["workers"].items()
                       if address not in self.lost_workers}
            if workers:
                return workers
            if time.monotonic() > deadline:
                raise RuntimeError(f"no Dask worker left after losing {sorted(self.lost_workers)}")
            time.sleep(0.5)

    def _start_actors(self):
        workers = self._workers()
        n_streams = len(self.streams) - 1
        self.groups = [g.tolist() for g in np.array_split(np.arange(n_streams), min(len(workers), n_streams))]
        self.actors = [None] * len(self.groups)
        self.actor_futures = [None] * len(self.groups)
        self.placement = [None] * len(self.groups)
        self.pending = [[] for _ in self.groups]
        for g, address in zip(range(len(self.groups)), sorted(workers)):
            try:
                self._start_group(g, address, workers[address])
            except WORKER_LOST:
                self.placement[g] = address
                self._recover([g])

    def _start_group(self, g, address, n_threads):
        """Create actor ``g`` on worker ``address`` from the driver's copy of its streams."""
        streams = self.groups[g]
        edges = self.streams[streams[0]: streams[-1] + 2]
        a, b = edges[0], edges[-1]
        parts = [(self.data[a:b] if self.sparse else self.values[a:b], [self.seeds[s] for s in streams], int(a),
                  edges - a, self.labels[a:b].copy(), self.sublabels[a:b].copy(),
                  [self.rngs[s].bit_generator.state for s in streams])]
        [payload] = self.client.scatter([parts], workers=[address], hash=False)
        future = self.client.submit(ShardGroup, payload, n_threads, actor=True, workers=[address],
                                    allow_other_workers=False, pure=False)
        try:
            # An actor binds to the current client when it is made: without this, the default client, which
            # may be another fit's (two fits in two threads), closed under this one when that fit ends.
            with self.client.as_current():
                actor = future.result()
        finally:
            payload.release()
        self.actors[g], self.actor_futures[g], self.placement[g] = actor, future, address
        self.pending[g] = []

    def _recover(self, lost):
        """Re-create the actors ``lost`` on surviving workers, spreading them over the least loaded."""
        for g in lost:
            self.lost_workers.add(self.placement[g])
            if self.actor_futures[g] is not None:
                self.actor_futures[g].release()
            self.actors[g] = self.actor_futures[g] = self.placement[g] = None
        for g in lost:
            while True:
                workers = self._workers()
                load = {address: self.placement.count(address) for address in workers}
                address = min(sorted(workers), key=load.get)
                warnings.warn(
                    f"Dask worker lost: re-creating streams {self.groups[g]} on {address} from the driver's copy",
                    RuntimeWarning,
                )
                try:
                    self._start_group(g, address, workers[address])
                    break
                except WORKER_LOST:
                    self.lost_workers.add(address)

    def _call(self, g, kernel_params):
        """Start actor ``g``'s pass; returns its ActorFuture, or None when the actor is known to be lost."""
        if self.actor_futures[g].status != "finished":
            return None
        return self.actors[g].assign(self.pending[g], *kernel_params)

    def _pass(self, kernel_params):
        """One concurrent round of actor passes, re-running those whose worker died; results in group order."""
        if self.groups is None:
            self._start_actors()
        results = [None] * len(self.groups)
        todo = list(range(len(self.groups)))
        for attempt in range(MAX_RECOVERIES + 1):
            calls = [(g, self._call(g, kernel_params)) for g in todo]
            lost = []
            for g, call in calls:
                if call is None:
                    lost.append(g)
                    continue
                try:
                    results[g] = call.result()
                except WORKER_LOST:
                    lost.append(g)
            if not lost:
                return results
            if attempt == MAX_RECOVERIES:
                break
            self._recover(lost)
            todo = lost
        raise RuntimeError(f"Dask workers kept failing: streams {[self.groups[g] for g in lost]} could not be run "
                           f"after {MAX_RECOVERIES} re-creations")

    def assign(self, params, log_w, sub_params, sub_log_w, random_sub, anchors=None):
        """The pass of ``Shard.assign`` run by the actors; same return value."""
        results = self._pass((params, log_w, sub_params, sub_log_w, random_sub, anchors))
        stats = None
        for part in (part for group_stats, _, _, _ in results for part in group_stats):
            stats = part if stats is None else stats + part
        rng_states = [state for _, _, _, states in results for state in states]
        for rng, state in zip(self.rngs, rng_states):
            rng.bit_generator.state = state
        for g in range(len(self.groups)):
            self.pending[g] = []
        self.labels = np.concatenate([labels for _, labels, _, _ in results])
        self.sublabels = np.concatenate([sublabels for _, _, sublabels, _ in results])
        return stats

    def _queue(self, name, *args):
        if self.groups is not None:
            for messages in self.pending:
                messages.append((name, args))

    def update(self, splits, mapping, moved=None):
        """``Shard.update`` here, and on the workers with the next pass."""
        super().update(splits, mapping, moved)
        self._queue("update", splits, mapping, moved)

    def close(self):
        for future in self.actor_futures:
            if future is not None:
                future.release()
        self.actors, self.actor_futures = [], []
        self.owned.close()
