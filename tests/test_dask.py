"""DPMM on Dask: identical labels to the local backend, survival of a killed worker, optional-extra behaviour."""

import os
import pickle
import signal
import subprocess
import sys
import warnings

import numpy as np
import pytest

import conjoined

distributed = pytest.importorskip("distributed")
from mixtures import DATA, count_mixture, gaussian_mixture

from conjoined.dpmm.dask_backend import DaskBackend

PARAMS = {"n_iter": 24, "random_state": 7, "n_shards": 6, "warmup": 12}


def local_cluster(n_workers):
    return distributed.LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                                    dashboard_address=":0", scheduler_kwargs={"dashboard": False})


@pytest.fixture(scope="module")
def clients():
    """{n_workers: Client} for LocalClusters of 1 and 2 worker processes."""
    with local_cluster(1) as one, local_cluster(2) as two, distributed.Client(one) as client_one, \
            distributed.Client(two) as client_two:
        yield {1: client_one, 2: client_two}


def assert_same_fit(a, b):
    np.testing.assert_array_equal(a.labels_trace_, b.labels_trace_)
    np.testing.assert_array_equal(a.labels_, b.labels_)
    np.testing.assert_array_equal(a.n_clusters_trace_, b.n_clusters_trace_)
    np.testing.assert_array_equal(a.log_posterior_trace_, b.log_posterior_trace_)
    np.testing.assert_array_equal(a.n_splits_trace_, b.n_splits_trace_)
    np.testing.assert_array_equal(a.n_merges_trace_, b.n_merges_trace_)


@pytest.mark.parametrize("kind, prior", [("counts", None), ("gaussian", None),
                                         ("gaussian", conjoined.NormalInverseWishart(psi="sample")),
                                         ("gaussian", conjoined.NormalGamma())])
@pytest.mark.parametrize("n_workers", [1, 2])
def test_same_labels_as_local_backend(clients, kind, prior, n_workers):
    X = DATA[kind]()
    local = conjoined.DPMM(prior=prior, **PARAMS).fit(X)
    assert local.n_clusters_trace_.max() > 1  # the chain moves: the comparison is not trivial
    dask = conjoined.DPMM(backend="dask", client=clients[n_workers], prior=prior, **PARAMS).fit(X)
    assert_same_fit(local, dask)
    np.testing.assert_array_equal(local.psi_scale_trace_, dask.psi_scale_trace_)
    # The client is the caller's: still usable after the fit.
    assert clients[n_workers].submit(sum, [1, 2]).result() == 3


def test_most_probable_sample_as_on_the_local_backend(clients):
    # estimate="map" keeps the sample's labels as drawn, without the trace: the driver's copy, as the local one's
    X = DATA["gaussian"]()
    params = {**PARAMS, "estimate": "map", "store_labels": False}
    local = conjoined.DPMM(**params).fit(X)
    dask = conjoined.DPMM(backend="dask", client=clients[2], **params).fit(X)
    assert local.labels_iteration_ == dask.labels_iteration_ < PARAMS["n_iter"] - 1  # not the last sample
    np.testing.assert_array_equal(local.labels_, dask.labels_)
    np.testing.assert_array_equal(local.weights_, dask.weights_)


def test_scheduler_address(clients):
    X = count_mixture(1)
    local = conjoined.DPMM(**PARAMS).fit(X)
    address = clients[2].scheduler.address
    assert_same_fit(local, conjoined.DPMM(backend="dask", address=address, **PARAMS).fit(X))


def test_embedded_local_cluster_gives_the_local_fit_and_leaves_the_environment_alone():
    X = gaussian_mixture(2)
    environment = dict(os.environ)  # Dask's nannies set OMP_NUM_THREADS=1, PYTHONHASHSEED, ... in the process
    assert_same_fit(conjoined.DPMM(**PARAMS).fit(X), conjoined.DPMM(backend="dask", **PARAMS).fit(X))
    assert dict(os.environ) == environment


@pytest.mark.parametrize("kind, kill_at_call", [("counts", 2 * 5 + 1), ("gaussian", 2 * 9 + 2)])
def test_fit_survives_a_worker_killed_mid_fit(clients, monkeypatch, kind, kill_at_call):
    """SIGKILL the worker process of one actor while its pass is in flight; its nanny restarts it later."""
    X = DATA[kind](3)
    expected = conjoined.DPMM(**PARAMS).fit(X)
    client = clients[2]
    client.wait_for_workers(2, timeout=60)
    original_call = DaskBackend._call
    calls = {"n": 0}

    def call_then_kill(backend, g, kernel_params):
        future = original_call(backend, g, kernel_params)
        calls["n"] += 1
        if calls["n"] == kill_at_call:
            address = backend.placement[g]
            os.kill(client.run(os.getpid, workers=[address])[address], signal.SIGKILL)
        return future

    monkeypatch.setattr(DaskBackend, "_call", call_then_kill)
    with pytest.warns(RuntimeWarning, match="Dask worker lost: re-creating streams"):
        model = conjoined.DPMM(backend="dask", client=client, **PARAMS).fit(X)
    assert calls["n"] == 2 * PARAMS["n_iter"] + 1  # every pass of both actors, plus the re-run
    assert_same_fit(expected, model)


def test_actors_keep_to_their_fits_client(clients, monkeypatch):
    """An actor binds to the current client when it is made, which was the default client or the one of the
    caller's ``with Client(...)``: with two fits in two threads, possibly the other fit's, closed under this one
    when that fit ended. Here another client is the current one while the actors start, and closed after their
    first pass."""
    X = count_mixture(1)
    original_pass, others = DaskBackend._pass, []

    def with_another_client(self, kernel_params):
        if others:
            return original_pass(self, kernel_params)
        others.append(distributed.Client(clients[1].scheduler.address))
        try:
            with others[0].as_current():
                return original_pass(self, kernel_params)
        finally:
            others[0].close()

    monkeypatch.setattr(DaskBackend, "_pass", with_another_client)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # "Dask worker lost: re-creating streams ..."
        dask = conjoined.DPMM(backend="dask", address=clients[1].scheduler.address, **PARAMS).fit(X)
    assert others and others[0].status == "closed"
    assert_same_fit(conjoined.DPMM(**PARAMS).fit(X), dask)


def test_checkpoint_of_a_dask_fit_resumes_on_the_local_backend(clients, tmp_path, monkeypatch):
    """The driver's copy of labels and random states is what a checkpoint saves, mid-fit, pending messages and all."""
    from conjoined.dpmm import estimator

    X = count_mixture(4)
    path = tmp_path / "fit.npz"
    original, calls = estimator.sams_move, {"n": 0}

    def interrupted_move(*args):
        calls["n"] += 1
        if calls["n"] > 9:
            raise KeyboardInterrupt
        return original(*args)

    with monkeypatch.context() as patch:
        patch.setattr(estimator, "sams_move", interrupted_move)
        with pytest.raises(KeyboardInterrupt):
            conjoined.DPMM(backend="dask", client=clients[2], checkpoint=path, checkpoint_every=3, **PARAMS).fit(X)
    assert_same_fit(conjoined.DPMM(**PARAMS).fit(X), conjoined.DPMM(checkpoint=path, **PARAMS).fit(X))


def test_cdp_starts_one_local_cluster_for_all_its_mixtures(monkeypatch):
    from conjoined.datasets import make_cdp_case
    from conjoined.dpmm import dask_backend

    started = []

    def counted(*args, **kwargs):
        started.append(kwargs)
        return distributed.LocalCluster(*args, **kwargs)

    monkeypatch.setattr(dask_backend, "LocalCluster", counted)
    X, _, _ = make_cdp_case(3, random_state=0)
    params = {"n_iter": 20, "n_reassign": 5, "random_state": 0, "n_shards": 4}
    environment = dict(os.environ)
    dask = conjoined.CDP(backend="dask", **params).fit(X)
    assert len(started) == 1 and len(dask.dpmm_trends_) == 6  # six mixture fits, one cluster
    assert dict(os.environ) == environment
    local = conjoined.CDP(**params).fit(X)
    for name in ("row_labels_", "column_labels_", "mixture_row_labels_", "mixture_column_labels_", "rows_",
                 "columns_", "theta_"):
        np.testing.assert_array_equal(getattr(local, name), getattr(dask, name), err_msg=name)


def test_cdp_runs_its_dpmms_on_dask(clients):
    from conjoined.datasets import make_cdp_case

    X, _, _ = make_cdp_case(3, random_state=0)
    params = {"n_iter": 20, "n_reassign": 5, "random_state": 0, "n_shards": 4}
    local = conjoined.CDP(**params).fit(X)
    dask = conjoined.CDP(backend="dask", client=clients[2], **params).fit(X)
    for name in ("row_labels_", "column_labels_", "mixture_row_labels_", "mixture_column_labels_", "rows_",
                 "columns_", "theta_"):
        np.testing.assert_array_equal(getattr(local, name), getattr(dask, name), err_msg=name)
    assert_same_fit(local.row_dpmm_, dask.row_dpmm_)
    # A client is a connection: a clone shares it (GridSearchCV, pipelines), a pickle keeps none.
    from sklearn.base import clone

    twin = clone(dask)
    assert twin.client is clients[2] and twin.get_params()["n_iter"] == 20
    assert conjoined.CDP(backend="dask", client=clients[2], **params).fit(X).rows_.tolist() == dask.rows_.tolist()
    back = pickle.loads(pickle.dumps(dask))
    assert back.client is None and back.row_dpmm_.client is None and dask.client is clients[2]
    np.testing.assert_array_equal(back.rows_, dask.rows_)
    assert_same_fit(back.row_dpmm_, dask.row_dpmm_)


def test_bad_backend_parameters():
    X = count_mixture()
    with pytest.raises(ValueError, match="backend must be one of"):
        conjoined.DPMM(backend="spark").fit(X)
    with pytest.raises(ValueError, match="client and address are for backend=\"dask\""):
        conjoined.DPMM(address="tcp://127.0.0.1:8786").fit(X)
    with pytest.raises(ValueError, match="either client or address"):
        conjoined.DPMM(backend="dask", client=object(), address="tcp://127.0.0.1:8786").fit(X)
    # a Client given an address without a port failed half-way and held the process a minute at exit
    for address in ("127.0.0.1", "tcp://scheduler", "host:port"):
        with pytest.raises(ValueError, match=rf"address '{address}' is not a Dask scheduler's address .*HOST:PORT"):
            conjoined.DPMM(backend="dask", address=address).fit(X)


def test_a_closed_client_and_a_server_that_is_no_scheduler_are_named():
    """A closed client gave KeyError: 'workers'; a server of another kind at the address (a dashboard's port)
    gave MemoryError (its HTTP reply read as a message length) and held the process a minute at exit."""
    X = count_mixture()
    with distributed.LocalCluster(n_workers=1, processes=False, dashboard_address=None) as cluster:
        client = distributed.Client(cluster)
        client.close()
        with pytest.raises(RuntimeError, match=r"the Dask client is closed \(status 'closed'\)"):
            conjoined.DPMM(n_iter=3, backend="dask", client=client).fit(X)
    script = (
        "import socket, threading, numpy as np, conjoined\n"
        "server = socket.socket(); server.bind(('127.0.0.1', 0)); server.listen(5)\n"
        "def answer():\n"
        "    while True:\n"
        "        connection, _ = server.accept(); connection.recv(1024)\n"
        "        connection.sendall(b'HTTP/1.1 400 Bad Request\\r\\n\\r\\n' * 10); connection.close()\n"
        "threading.Thread(target=answer, daemon=True).start()\n"
        "address = f'tcp://127.0.0.1:{server.getsockname()[1]}'\n"
        "try:\n"
        "    conjoined.DPMM(n_iter=3, backend='dask', address=address).fit(np.ones((20, 3)))\n"
        "except OSError as error:\n"
        "    print(error)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=40)
    assert "no Dask scheduler answered at 'tcp://127.0.0.1:" in done.stdout, done.stderr
    assert "not the dashboard's 8787" in done.stdout and "Exception ignored" not in done.stderr


def test_without_dask_the_error_says_how_to_install(monkeypatch):
    monkeypatch.delitem(sys.modules, "conjoined.dpmm.dask_backend")
    monkeypatch.setitem(sys.modules, "distributed", None)
    with pytest.raises(ImportError, match=r'pip install "dask\[distributed\]"'):
        conjoined.DPMM(backend="dask", n_iter=2).fit(count_mixture())


def test_local_backend_does_not_import_dask():
    code = ("import sys, numpy as np, conjoined; "
            "conjoined.DPMM(n_iter=3, random_state=0).fit(np.random.default_rng(0).poisson(2.0, (40, 6))); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('dask', 'distributed')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_worker_processes_start_with_ctrl_c_ignored():
    """The embedded cluster's workers are started with SIGINT ignored, which a new Python process keeps: a Ctrl-C
    at the terminal interrupts the driver (which closes the cluster), not every worker with a traceback of its
    own. The driver's own handler is back afterwards."""
    from conjoined.dpmm.dask_backend import _workers_ignoring_ctrl_c
    before = signal.getsignal(signal.SIGINT)
    probe = [sys.executable, "-c", "import signal; print(signal.getsignal(signal.SIGINT) is signal.SIG_IGN)"]
    with _workers_ignoring_ctrl_c():
        assert subprocess.run(probe, capture_output=True, text=True, check=True).stdout.strip() == "True"
    assert signal.getsignal(signal.SIGINT) is before
    assert subprocess.run(probe, capture_output=True, text=True, check=True).stdout.strip() == "False"
