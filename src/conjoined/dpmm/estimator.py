"""``DPMM``: the scikit-learn style estimator around the sampler (loop, traces, progress bar, validation)."""

from __future__ import annotations

import numbers
import time
import warnings
from contextlib import contextmanager
from typing import NamedTuple

import numba
import numpy as np
import scipy.sparse as sp
from scipy.special import logsumexp
from sklearn.base import BaseEstimator, ClusterMixin, clone
from sklearn.utils.validation import check_is_fitted

from .._interrupt import unwrapping_interruptions
from .._progress import progress_bar
from .._stack import user_stacklevel
from .._validation import (
    check_bool,
    check_int,
    check_matrix,
    check_non_negative,
    check_positive,
    check_verbose,
    keeping_state_on_failure,
    record_features,
)
from . import diagnostics, kernels, sampler
from .backends import LocalBackend, parallel_section
from .checkpoint import (
    Checkpointer,
    MostProbableSample,
    check_checkpoint_path,
    data_digest,
    prior_description,
)
from .point_moves import point_moves
from .priors import CountPrior, NormalGamma, NormalInverseWishart, default_prior
from .sams import sams_move

# Collapsed Gibbs updates of single random points per iteration after warm-up (``point_moves.py``).
POINT_MOVES = 16
# Values (entries stored: points x features, or a sparse input's non-zeros) scored at a time by predict,
# predict_proba and score_samples.
PREDICTION_BLOCK_VALUES = 1 << 22


def fresh_seed():
    """A random int seed, for a run without one that must record the seed it used, so that it can be repeated."""
    return int(np.random.SeedSequence().generate_state(1)[0] >> 1)


def seed_sequence(random_state):
    """A ``numpy.random.SeedSequence`` from None, an int, a SeedSequence, a RandomState or a Generator.

    A SeedSequence is copied: spawning from the caller's would change it, and the next fit given it would
    differ."""
    if random_state is None:
        return np.random.SeedSequence()
    if isinstance(random_state, np.random.SeedSequence):
        return np.random.SeedSequence(random_state.entropy, spawn_key=random_state.spawn_key,
                                      pool_size=random_state.pool_size,
                                      n_children_spawned=random_state.n_children_spawned)
    if isinstance(random_state, numbers.Integral) and not isinstance(random_state, bool):
        if random_state < 0:
            raise ValueError(f"random_state must be a non-negative integer, got {random_state}")
        return np.random.SeedSequence(int(random_state))
    if isinstance(random_state, np.random.RandomState):
        return np.random.SeedSequence(int(random_state.randint(0, 2**31 - 1)))
    if isinstance(random_state, np.random.Generator):
        return np.random.SeedSequence(int(random_state.integers(0, 2**63 - 1)))
    raise ValueError(
        f"random_state must be None, an int, a SeedSequence, a RandomState or a Generator, got {random_state!r}")


def _draws_a_seed_each_fit(random_state):
    """Whether ``random_state`` is a RandomState or a Generator: each fit draws another seed from it."""
    return isinstance(random_state, (np.random.RandomState, np.random.Generator))


def resolve_n_jobs(n_jobs):
    """Threads to use: None or -1 mean every core numba sees; -2 all but one, and so on."""
    available = numba.config.NUMBA_NUM_THREADS
    if n_jobs is None:
        return available
    if isinstance(n_jobs, bool) or not isinstance(n_jobs, numbers.Integral) or n_jobs == 0:
        raise ValueError(
            f"n_jobs must be None or a non-zero integer (-1: every core, -2: all but one, ...), got {n_jobs!r}"
        )
    if n_jobs < 0:
        return max(1, available + 1 + int(n_jobs))
    return min(int(n_jobs), available)


BACKENDS = ("local", "dask")
ESTIMATES = ("sample", "map")


class RunSettings(NamedTuple):
    """The validated parameters that shape the chain (a checkpoint must match them to be resumed)."""

    alpha: float
    n_iter: int
    burn_out: int
    init_clusters: int
    warmup: int
    exact_moves: int
    n_shards: int


@contextmanager
def numba_threads(n):
    previous = numba.get_num_threads()
    numba.set_num_threads(n)
    try:
        yield
    finally:
        numba.set_num_threads(previous)


class SharedClientMixin:
    """For an estimator with a ``client`` parameter (a ``distributed.Client``: a connection, which cannot be
    copied or pickled). ``sklearn.base.clone`` gives the clone the same client; pickling, and so
    ``copy.deepcopy``, keeps no client (a fitted estimator does not need one; set one again to fit on that
    cluster, or the copy starts its own local one)."""

    def __sklearn_clone__(self):
        params = self.get_params(deep=False)
        client = params.pop("client")
        return type(self)(**{name: clone(value, safe=False) for name, value in params.items()}, client=client)

    def __getstate__(self):
        state = super().__getstate__()
        if state.get("client") is not None:
            state = {**state, "client": None}
        return state


class DPMM(SharedClientMixin, ClusterMixin, BaseEstimator):
    """Dirichlet-process mixture model fitted by the sub-cluster split/merge MCMC sampler (Chang & Fisher 2013).

    The number of clusters is not given: it is sampled. Every iteration is one restricted-Gibbs pass over the data
    (labels and sub-labels, parallel over points) followed by split and merge proposals with their
    Metropolis-Hastings ratios, so the traces are posterior samples.

    Parameters
    ----------
    alpha : float, default=1.0
        Concentration of the Dirichlet process (larger: more clusters).
    prior : Multinomial, PoissonGamma, NormalInverseWishart, NormalGamma or None, default=None
        Conjugate prior, which also fixes the likelihood. None picks ``Multinomial()`` for non-negative integer
        data (dense or sparse), which reads each point's proportions over the features, not its total (pass
        ``PoissonGamma()`` for counts whose levels differ, or a Gaussian prior), and ``PoissonGamma()`` for such
        data of one feature; for other data ``NormalInverseWishart()`` (full covariances, data-based defaults)
        below 50 features and ``NormalGamma()`` (diagonal covariances) from 50 on, where full covariances merge
        clusters and cost d^2 a point. For embeddings of tens of dimensions whose clusters overlap,
        ``NormalInverseWishart(psi="sample")`` samples the clusters' common scale with the partition.
    n_iter : int, default=100
        Sampler iterations.
    burn_out : int, default=15
        Passes a cluster must have had since it was created or reset before a sub-cluster split or merge.
        Those proposals are made in the warm-up only. In its last ``burn_out`` passes, where a new cluster
        cannot come of age, every younger cluster whose sub-clusters have had a pass is split whenever they
        are more probable apart (all the warm-up when ``burn_out >= warmup``: at the defaults, ``n_iter <
        32``). Clusters so made are not merged in the warm-up: a short one may end with a few too many, which
        the exact moves after it merge.
    warmup : int or None, default=None
        Iterations at the start that also use Chang & Fisher's sub-cluster split/merge proposals, which find
        clusters fast on large data but are not exact (a test against enumerated posteriors on a handful of points
        shows the bias). None means ``n_iter // 2``; at most ``n_iter``. After warm-up, the parallel pass over
        the points is an exact Gibbs update (anchored: no cluster empties, see ``sampler.py``); every iteration
        also makes ``exact_moves`` sequentially-allocated split/merge proposals (Dahl 2003) and, after warm-up,
        collapsed Gibbs updates of 16 random points (Neal 2000, algorithm 3); these create and remove clusters,
        so the iterations after warm-up form an exact MCMC chain.
    exact_moves : int, default=1
        Exact split/merge proposals per iteration (all iterations).
    init_clusters : int, default=1
        Clusters of the random initial labelling.
    random_state : None, int, SeedSequence, RandomState or Generator
        Same value, same result, whatever ``n_jobs``: an int or a SeedSequence (not consumed) gives every fit
        the same chain; a RandomState or a Generator gives each fit another seed, drawn from it (scikit-learn's
        convention), and None a new one.
    n_jobs : int or None, default=None
        Threads of the data pass; None or -1 uses every core, -2 all but one, and so on. With
        ``backend="dask"`` each worker's pass uses that worker's threads instead.
    verbose : bool or int, default=False
        Progress bar on stderr (an integer level as in scikit-learn: any level above 0 shows it).
    store_labels : bool, default=True
        Keep the (n_iter, n_samples) label trace; turn off for huge data.
    n_shards : int, default=16
        The points are cut into this many contiguous shards (fewer for small data: at least 32 points each), each
        with its own random stream. Results depend on it (not on threads, backend or workers); it bounds the
        number of useful distributed workers.
    backend : {"local", "dask"}, default="local"
        Where the data pass runs. "dask" spreads the shards over Dask distributed workers (actors holding the
        points, sent once); the driver keeps a copy of the data and labels and re-creates the shards of a worker
        that dies, so the fit goes on with the same result. Same seed, same labels as "local". Needs the extra
        ``pip install 'dask[distributed]'`` (or the ``dask`` extra).
    client : distributed.Client or None, default=None
        With ``backend="dask"``: the cluster to use (left open). ``sklearn.base.clone`` shares it with the clone;
        a pickled estimator keeps no client.
    address : str or None, default=None
        With ``backend="dask"``: a scheduler address to connect to. Without ``client`` or ``address``, an embedded
        ``LocalCluster`` on 127.0.0.1 (2 worker processes, 1 thread each) is started and closed by ``fit``.
    checkpoint : str, path or None, default=None
        File (``.npz``) where the fit is saved every ``checkpoint_every`` iterations and at the end,
        atomically. If the file exists when ``fit`` starts and was written for the same data and parameters,
        the fit resumes from it and ends exactly as an uninterrupted fit would (a finished checkpoint gives
        the result without sampling); one written for other data or parameters raises a ValueError, but for a
        larger ``n_iter``: with ``warmup`` as it was, the chain goes on to it, the chain an uninterrupted fit
        of that length draws (so a chain that has not settled can be extended), and the file then holds the
        longer chain. ``random_state=None``, a RandomState or a Generator (each fit draws another seed from
        it) resumes whatever seed the file was started with. With
        ``store_labels``, the label trace is kept beside it, in ``<checkpoint>.labels`` (``n_iter x n_samples x
        4`` bytes), to which each save appends the iterations since the last; keep or delete the two together.
    checkpoint_every : int, default=10
        Iterations between checkpoints.
    estimate : {"sample", "map"}, default="sample"
        The partition that ``labels_``, ``n_clusters_``, ``weights_``, ``cluster_params_`` and the predictions
        describe. "sample": the last iteration's, a draw from the posterior. "map": the most probable of the
        posterior samples (highest ``log_posterior_trace_`` among the iterations after warm-up, or the last if
        there are none; with a sampled scale, the density of the partition and log s, in which the scale's prior
        is flat), a point estimate for a clustering. A Dirichlet-process mixture's number of clusters is not
        consistent (Miller and Harrison, 2013): its posterior spreads over partitions that cut a cluster into
        pieces, each far less probable than the uncut one but so many that together they hold much of the mass,
        and a single draw is often one of them (three Gaussian blobs of 200 points, 300 iterations, seeds 0-2:
        last samples of 5 clusters, 50-160 nats below the most probable samples, which hold the three blobs and
        at most a singleton). The traces are the same posterior samples either way.

    Attributes
    ----------
    labels_ : (n_samples,) int, cluster of each point in the partition ``estimate`` picks (the last iteration's by
        default).
    labels_iteration_ : int, the iteration of that partition (``n_iter - 1`` with ``estimate="sample"``).
    n_clusters_ : int, its number of clusters.
    weights_ : (n_clusters_,) share of points in each cluster.
    cluster_params_ : dict of posterior-mean parameters per cluster: ``theta`` (K, d) for Multinomial, ``rate``
        (K, d) for PoissonGamma, ``mean`` (K, d) and ``covariance`` (K, d, d) for NormalInverseWishart, ``mean``
        (K, d) and ``variance`` (K, d) for NormalGamma (in X's units; a column the Gaussian priors leave out,
        constant over X or for full covariances a linear function of others, has that function of the others'
        parameters: a constant has its value as mean and no variance).
    labels_trace_ : (n_iter, n_samples) int32 or None, labels after each iteration.
    warmup_ : int, iterations that used sub-cluster proposals; the trace from there on are posterior samples.
    log_posterior_trend_ : ``ChainTrend(n_samples, change, z, late_z, effective_size, settled)``, the trend of
        ``log_posterior_trace_`` after warm-up (``conjoined.dpmm.diagnostics.trend``): its rise in nats, the z of
        its slope (on its ranks, against their autocorrelation), the same over the last half, the number of
        independent samples the trace is worth, and whether it has settled (False when ``|z| > 4``, the last half
        still moves the same way and the change is over 1 nat; None with fewer than 20 samples after warm-up). A
        chain that has not settled gets a ``ChainNotSettledWarning`` from ``fit``: its result may change with more
        iterations. Settled means no drift was seen at the end, not that the chain has visited every mode.
    n_clusters_trace_ : (n_iter,) int, K after each iteration.
    log_posterior_trace_ : (n_iter,) float, log p(labels, X) after each iteration, up to a constant of the data
        (terms that do not depend on the labels are left out: compare values within one fit, not across data
        sets; with a sampled scale: given that iteration's s, without its prior).
    n_splits_trace_, n_merges_trace_ : (n_iter,) int, accepted moves per iteration.
    time_trace_ : (n_iter,) seconds spent in each iteration.
    prior_ : the prior used, with data-based defaults filled in (a sampled scale: its draw at
        ``labels_iteration_``). ``NormalGamma``'s hold in standardised units (each feature centred at its mean
        and divided by its standard deviation, as the prior reads the data); ``NormalInverseWishart``'s in the
        data's.
    psi_scale_trace_ : (n_iter,) float or None, the Normal-inverse-Wishart scale s (``psi = s I``) after each
        iteration when it is sampled (``NormalInverseWishart(psi="sample")``), else None.
    n_features_in_ : int.
    feature_names_in_ : (n_features_in_,) object array of the column names, when X was a DataFrame with string
        column names (absent otherwise).
    """

    def __init__(self, alpha=1.0, prior=None, n_iter=100, burn_out=15, init_clusters=1, random_state=None,
                 n_jobs=None, verbose=False, store_labels=True, n_shards=16, warmup=None, exact_moves=1,
                 backend="local", client=None, address=None, checkpoint=None, checkpoint_every=10,
                 estimate="sample"):
        self.alpha = alpha
        self.prior = prior
        self.n_iter = n_iter
        self.burn_out = burn_out
        self.init_clusters = init_clusters
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.verbose = verbose
        self.store_labels = store_labels
        self.n_shards = n_shards
        self.warmup = warmup
        self.exact_moves = exact_moves
        self.backend = backend
        self.client = client
        self.address = address
        self.checkpoint = checkpoint
        self.checkpoint_every = checkpoint_every
        self.estimate = estimate

    def _validate_data_and_prior(self, X):
        raw = check_matrix(X, name="X")
        prior = default_prior(raw) if self.prior is None else self.prior
        if not isinstance(prior, (CountPrior, NormalInverseWishart, NormalGamma)):
            raise ValueError(
                f"prior must be Multinomial, PoissonGamma, NormalInverseWishart, NormalGamma or None, got {prior!r}"
            )
        if prior.kind == "counts" and sp.issparse(X):
            check_non_negative(X)  # as stored: a negative entry summed with a positive duplicate is not a count
        prior.check_data(raw)
        prior = prior.fitted(raw)
        return prior.kernel_data(raw), prior

    def _translate_results(self, shift):
        """Move the results of a fit on data centred by ``-shift`` (Gaussian prior) back to the data's place."""
        self.prior_ = self.prior_.translated(shift)
        self.cluster_params_["mean"] = self.cluster_params_["mean"] + shift
        mu, chol_precision, log_det = self._expected_params
        self._expected_params = (mu + shift, chol_precision, log_det)

    def fit(self, X, y=None):
        """Run the sampler on X (n_samples, n_features), dense or scipy.sparse; returns self. Warns
        (``ChainNotSettledWarning``) when the chain has not settled (``log_posterior_trend_``)."""
        self._fit(X)
        if self.log_posterior_trend_.settled is False:
            described = diagnostics.describe(self.log_posterior_trend_, self._sampled_k_ends())
            warnings.warn(
                f"the DPMM has not settled: {described}. "
                f"Its result may change with more iterations: raise n_iter (now {self.n_iter}) and read "
                "log_posterior_trace_ and n_clusters_trace_.",
                diagnostics.ChainNotSettledWarning, stacklevel=user_stacklevel(),
            )
        return self

    def _sampled_k_ends(self):
        """(K at the first iteration after warm-up, K at the last); the chain had at least one."""
        sampled = self.n_clusters_trace_[self.warmup_:]
        return int(sampled[0]), int(sampled[-1])

    @unwrapping_interruptions
    @keeping_state_on_failure
    def _fit(self, X, init_labels=None, extends=True, progress_name=None):
        """``fit`` without its warning (a CDP fit says it once for all its mixtures). ``init_labels`` (n_samples,):
        the chain's first partition, in place of ``init_clusters`` random clusters (CDP's spectral start); its
        clusters are renumbered 0, 1, ... in order of first appearance. ``extends=False``: a checkpoint of fewer
        iterations is refused, not run on (CDP's later mixtures read data that depend on the earlier ones).
        ``progress_name``: what the progress bar calls the run (default: "DPMM on n points")."""
        n_iter = check_int(self.n_iter, "n_iter", minimum=1)
        settings = RunSettings(
            alpha=check_positive(self.alpha, "alpha"),
            n_iter=n_iter,
            burn_out=check_int(self.burn_out, "burn_out", minimum=0),
            init_clusters=check_int(self.init_clusters, "init_clusters", minimum=1),
            warmup=n_iter // 2 if self.warmup is None else check_int(self.warmup, "warmup", minimum=0),
            exact_moves=check_int(self.exact_moves, "exact_moves", minimum=0),
            n_shards=check_int(self.n_shards, "n_shards", minimum=1),
        )
        if self.estimate not in ESTIMATES:
            raise ValueError(f"estimate must be one of {ESTIMATES}, got {self.estimate!r}")
        if settings.warmup > n_iter:
            raise ValueError(f"warmup={settings.warmup} is larger than n_iter={n_iter}: the chain would stop "
                             "inside its warm-up")
        checkpoint_every = check_int(self.checkpoint_every, "checkpoint_every", minimum=1)
        checkpoint = None if self.checkpoint is None else check_checkpoint_path(self.checkpoint)
        n_threads = resolve_n_jobs(self.n_jobs)
        check_verbose(self.verbose)
        store_labels = check_bool(self.store_labels, "store_labels")
        if self.backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {self.backend!r}")
        if self.backend == "local" and (self.client is not None or self.address is not None):
            raise ValueError('client and address are for backend="dask"; backend is "local"')
        if self.client is not None and self.address is not None:
            raise ValueError("give either client or address, not both")
        data, prior = self._validate_data_and_prior(X)
        record_features(self, X, reset=True)  # before the work: names that cannot be used fail first
        n = data.shape[0]
        if settings.init_clusters > n:
            raise ValueError(f"init_clusters={settings.init_clusters} is larger than the number of points ({n})")
        if init_labels is not None:
            init_labels = np.asarray(init_labels)
            if init_labels.shape != (n,) or init_labels.dtype.kind not in "iu":
                raise ValueError(f"init_labels must be {n} integer labels, got shape {init_labels.shape} of "
                                 f"{init_labels.dtype}")
            _, first, init_labels = np.unique(init_labels, return_index=True, return_inverse=True)
            init_labels = np.argsort(np.argsort(first))[init_labels]  # numbered by first appearance
            settings = settings._replace(init_clusters=int(init_labels.max()) + 1)

        seeds = seed_sequence(self.random_state)
        checkpointer = None
        if checkpoint is not None:
            seed = None
            # a Generator or RandomState gives each fit another seed: as None, it resumes the file's
            if self.random_state is not None and not _draws_a_seed_each_fit(self.random_state):
                seed = [seeds.entropy, list(seeds.spawn_key)]
                # a SeedSequence that has spawned children spawns others (left out when 0, as in the checkpoints
                # written before it was recorded)
                if seeds.n_children_spawned:
                    seed.append(seeds.n_children_spawned)
            # Gaussian fits run centred (below): a checkpoint of an earlier, uncentred fit holds its state in
            # other coordinates, and this setting makes resuming it an error that says so.
            centred = {"centred": True} if prior.kind == "gaussian" else {}
            # the most probable sample so far is part of a "map" fit's checkpoint; "sample" writes files as before
            estimate = {"estimate": "map"} if self.estimate == "map" else {}
            # a chain started from given labels is tied to them (left out otherwise, as in earlier checkpoints)
            start = {} if init_labels is None else {"init_labels": data_digest(init_labels.astype(np.float64))}
            checkpointer = Checkpointer(
                checkpoint, checkpoint_every, data_digest(data), extends,
                dict(settings._asdict(), prior=prior_description(prior), store_labels=store_labels,
                     seed=seed, **centred, **estimate, **start),
            )
        shift = None
        if prior.kind == "gaussian":
            # Centred: the Gaussian statistics are raw sums, and data far from the origin relative to their spread
            # lose precision in s2 - n xbar xbar^T and in the pass's float32 copy. Every likelihood and posterior
            # moves with a translation of the data and the prior's mean; _translate_results moves the results
            # back. (Clusters far apart relative to their own spread, 1e7 times and more, still lose precision.)
            # In place: check_matrix made data a private copy.
            shift = data.mean(axis=0)
            data -= shift
            prior = prior.translated(-shift)
        driver_seed, shard_seed = seeds.spawn(2)
        rng = np.random.default_rng(driver_seed)
        stream_seeds = shard_seed.spawn(settings.n_shards)
        if self.backend == "dask":
            from .dask_backend import DaskBackend

            backend = DaskBackend(data, stream_seeds, client=self.client, address=self.address)
        else:
            backend = LocalBackend(data, stream_seeds, n_threads)
        self._run(backend, prior, settings, rng, n_threads, checkpointer, init_labels, progress_name)
        if shift is not None:
            self._translate_results(shift)
        self.cluster_params_ = self.prior_.expanded(self.cluster_params_)
        return self

    def _run(self, backend, prior, settings, rng, n_threads, checkpointer, init_labels=None,
             progress_name=None):
        n_iter = settings.n_iter
        traces = {
            "labels": np.empty((n_iter, backend.n_points), np.int32) if self.store_labels else None,
            "n_clusters": np.empty(n_iter, np.int64),
            "log_posterior": np.empty(n_iter),
            "n_splits": np.empty(n_iter, np.int64),
            "n_merges": np.empty(n_iter, np.int64),
            "time": np.empty(n_iter),
            "psi_scale": np.empty(n_iter) if prior.sampled_scale else None,
        }
        # estimate="map": the most probable posterior sample so far (a MostProbableSample), from this iteration on
        first_sample = min(settings.warmup, n_iter - 1) if self.estimate == "map" else None
        best = None
        bar = progress_bar(n_iter, progress_name or f"DPMM on {backend.n_points} points", self.verbose)
        try:
            with numba_threads(n_threads):
                resumed = None if checkpointer is None else checkpointer.resume(backend, rng, traces)
                if resumed is None:
                    start, state = 0, sampler.init(backend, settings.init_clusters, prior, init_labels)
                else:
                    start, state, best = resumed
                    if best is not None and best.iteration < first_sample:
                        best = None  # a chain extended past its warm-up's end: samples count from there on
                    if traces["psi_scale"] is not None:  # a checkpoint holds at least one iteration
                        prior = prior.with_scale(traces["psi_scale"][start - 1])
                    bar.update(start)
                for it in range(start, n_iter):
                    began = time.perf_counter()
                    state, (n_splits, n_merges) = sampler.step(
                        state, backend, prior, settings.alpha, settings.burn_out, rng,
                        subcluster_moves=it < settings.warmup,
                        passes_left=settings.warmup - it,
                    )
                    for _ in range(settings.exact_moves):
                        state, split, merge = sams_move(state, backend, prior, settings.alpha, rng)
                        n_splits += split
                        n_merges += merge
                    if it >= settings.warmup:
                        state, opened, closed = point_moves(state, backend, prior, settings.alpha, rng, POINT_MOVES)
                        n_splits += opened
                        n_merges += closed
                    cluster_stats = state.stats.sum(axis=1)
                    if prior.sampled_scale:
                        prior = prior.resampled(cluster_stats, rng)
                        traces["psi_scale"][it] = prior.psi[0, 0]
                    K = state.age.shape[0]
                    traces["n_clusters"][it] = K
                    traces["log_posterior"][it] = sampler.log_posterior(prior, settings.alpha, cluster_stats)
                    traces["n_splits"][it] = n_splits
                    traces["n_merges"][it] = n_merges
                    traces["time"][it] = time.perf_counter() - began
                    if traces["labels"] is not None:
                        traces["labels"][it] = backend.all_labels()
                    if first_sample is not None and it >= first_sample:
                        log_p = traces["log_posterior"][it]
                        if best is None or log_p > best.log_posterior:
                            best = MostProbableSample(it, log_p, backend.all_labels().copy(), cluster_stats)
                    if checkpointer is not None and checkpointer.due(it + 1, n_iter):
                        checkpointer.save(it + 1, state, rng, backend, traces, best)
                    # refresh=False: the bar redraws at tqdm's own pace, not on every iteration
                    bar.set_postfix_str(f"K={K}", refresh=False)
                    bar.update()
            if best is None:
                best = MostProbableSample(n_iter - 1, traces["log_posterior"][-1], backend.all_labels().copy(),
                                          state.stats.sum(axis=1))
            elif prior.sampled_scale:
                prior = prior.with_scale(traces["psi_scale"][best.iteration])
        finally:
            bar.close()
            backend.close()

        cluster_stats = best.stats
        self.prior_ = prior
        self.labels_ = best.labels
        self.labels_iteration_ = best.iteration
        self.n_clusters_ = int(cluster_stats.n.shape[0])
        self.weights_ = cluster_stats.n / cluster_stats.n.sum()
        self.cluster_params_ = prior.posterior_mean(cluster_stats)
        self._expected_params = prior.expected_params(cluster_stats)
        self.labels_trace_ = traces["labels"]
        self.warmup_ = settings.warmup
        self.log_posterior_trend_ = diagnostics.log_posterior_trend(traces["log_posterior"], settings.warmup)
        self.n_clusters_trace_ = traces["n_clusters"]
        self.log_posterior_trace_ = traces["log_posterior"]
        self.n_splits_trace_ = traces["n_splits"]
        self.n_merges_trace_ = traces["n_merges"]
        self.time_trace_ = traces["time"]
        self.psi_scale_trace_ = traces["psi_scale"]

    def _prediction_data(self, X):
        """X checked against the fit (features, names, the prior's data rules): dense or CSR."""
        check_is_fitted(self, "labels_")
        # A DataFrame's names are checked first (other columns are that, not bad values); anything else's shape
        # after check_matrix, whose errors say more than a feature count.
        is_frame = hasattr(X, "columns")
        if is_frame:
            record_features(self, X, reset=False)
        raw = check_matrix(X, name="X")
        if not is_frame:
            record_features(self, X, reset=False)
        self.prior_.check_data(raw)
        return raw

    def _log_joint(self, raw):
        """(n_samples, n_clusters_) log weight plus log likelihood of each point of ``raw`` (checked) in each
        cluster, without the terms no cluster changes (``prior_.log_point_constant``). Points are scored
        ``PREDICTION_BLOCK_VALUES`` values at a time: the kernels' form of the data (``NormalGamma``'s CSR rows of
        (z, z^2): 24 bytes a value) is made for one block at a time, not for all of ``raw``."""
        log_w = np.log(self.weights_)
        n = raw.shape[0]
        values_per_point = raw.nnz / max(n, 1) if sp.issparse(raw) else raw.shape[1]
        block = max(1, int(PREDICTION_BLOCK_VALUES // max(values_per_point, 1)))
        scores = np.empty((n, log_w.shape[0]))
        if self.prior_.sparse_kernels:
            log_rate, offset = self._expected_params
            log_rate_t = np.ascontiguousarray(log_rate.T)
        # parallel kernels, whatever the size: under numba's workqueue layer they must take turns with any fit
        with numba_threads(resolve_n_jobs(self.n_jobs)), parallel_section(True):
            for start in range(0, n, block):
                part = self.prior_.kernel_data(raw[start:start + block])
                if self.prior_.sparse_kernels:
                    scores[start:start + block] = kernels.count_log_likelihoods(
                        part.indptr.astype(np.int64, copy=False), part.indices.astype(np.int32, copy=False),
                        part.data, log_rate_t, offset,
                    )
                else:
                    scores[start:start + block] = kernels.gaussian_log_likelihoods(part, *self._expected_params)
        return scores + log_w

    def predict_proba(self, X):
        """(n_samples, n_clusters_) posterior probability of each cluster under the posterior-mean parameters and
        weights of the partition ``labels_`` reports."""
        log_joint = self._log_joint(self._prediction_data(X))
        return np.exp(log_joint - logsumexp(log_joint, axis=1, keepdims=True))

    def predict(self, X):
        """Most probable cluster of each point under the posterior-mean parameters and weights of the partition
        ``labels_`` reports (int32, as ``labels_``). On the fitted points it can differ from ``labels_`` (unlike
        scikit-learn's mixtures' ``fit_predict``): ``labels_`` is a partition the chain visited, and a point on
        the edge of two clusters may sit in the one its parameters make less likely (about 1% of the points of
        overlapping blobs under ``estimate="sample"``; ``estimate="map"`` reports the chain's most probable
        partition, where they mostly agree)."""
        return np.argmax(self._log_joint(self._prediction_data(X)), axis=1).astype(np.int32)

    def score_samples(self, X):
        """(n_samples,) log likelihood of each point under the mixture ``predict_proba`` uses: the weights and
        posterior-mean parameters of the partition ``labels_`` reports (for ``NormalGamma``, each feature at its
        posterior mean and precision). Counts: the log probability of the point's counts (``Multinomial``: given
        their total). Gaussian priors: the log density over the columns the prior keeps. A column left out,
        constant over the fitted data or a linear function of others, is not scored: a point whose value there
        departs from the fitted constant or function scores as if it did not (the model gives it no density)."""
        raw = self._prediction_data(X)
        return logsumexp(self._log_joint(raw), axis=1) + self.prior_.log_point_constant(raw)

    def score(self, X, y=None):
        """Mean of ``score_samples(X)``: the average log likelihood of the points."""
        return float(np.mean(self.score_samples(X)))

    def fit_predict(self, X, y=None):
        """``fit(X).labels_``: the partition the chain reports (see ``predict`` for how it relates to the most
        probable cluster of each point)."""
        return self.fit(X).labels_

    def __setstate__(self, state):
        # a model pickled before ``estimate`` existed reported its last sample
        state.setdefault("estimate", "sample")
        if "labels_" in state:
            state.setdefault("labels_iteration_", len(state["n_clusters_trace_"]) - 1)
            if "log_posterior_trend_" not in state:
                state["log_posterior_trend_"] = diagnostics.log_posterior_trend(state["log_posterior_trace_"],
                                                                                state["warmup_"])
        super().__setstate__(state)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.non_deterministic = False
        return tags
