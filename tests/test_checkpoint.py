"""DPMM checkpoints: an interrupted and resumed fit equals an uninterrupted one; mismatches and bad writes."""

import json
import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from mixtures import DATA, count_mixture

import conjoined
from conjoined.cdp import repeatable_params
from conjoined.dpmm import checkpoint as checkpoint_module
from conjoined.dpmm import estimator, sampler

PARAMS = {"n_iter": 24, "random_state": 5, "n_shards": 4, "warmup": 12}


class Interrupted(Exception):
    pass


def interrupt_during_iteration(monkeypatch, iteration):
    """Make the fit raise in the middle of iteration ``iteration`` (0-based: after that many complete ones)."""
    original = estimator.sams_move
    calls = {"n": 0}

    def move(*args):
        calls["n"] += 1
        if calls["n"] > iteration:
            raise Interrupted
        return original(*args)

    monkeypatch.setattr(estimator, "sams_move", move)


def count_steps(monkeypatch):
    original = sampler.step
    calls = {"n": 0}

    def step(*args, **kwargs):
        calls["n"] += 1
        return original(*args, **kwargs)

    monkeypatch.setattr(sampler, "step", step)
    return calls


def assert_same_fit(a, b):
    assert a.labels_iteration_ == b.labels_iteration_
    for name in ("labels_", "labels_trace_", "n_clusters_trace_", "log_posterior_trace_", "n_splits_trace_",
                 "n_merges_trace_", "weights_", "psi_scale_trace_"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    for key in a.cluster_params_:
        np.testing.assert_array_equal(a.cluster_params_[key], b.cluster_params_[key])


MAP = {"estimate": "map", "warmup": 6, "store_labels": False}  # the most probable sample, from the checkpoint alone


@pytest.mark.parametrize("kind, prior, estimate", [
    ("counts", None, {}), ("gaussian", None, {}), ("gaussian", conjoined.NormalInverseWishart(psi="sample"), {}),
    ("counts", None, MAP), ("gaussian", conjoined.NormalInverseWishart(psi="sample"), MAP),
])
def test_resumed_fit_equals_uninterrupted_fit(tmp_path, monkeypatch, kind, prior, estimate):
    X = DATA[kind]()
    path = tmp_path / "fit.npz"
    params = {**PARAMS, "prior": prior, **estimate}
    expected = conjoined.DPMM(**params).fit(X)
    assert expected.n_clusters_trace_.max() > 1
    with monkeypatch.context() as patch:
        interrupt_during_iteration(patch, 13)
        with pytest.raises(Interrupted):
            conjoined.DPMM(checkpoint=path, checkpoint_every=5, **params).fit(X)
    with np.load(path) as saved:
        assert int(saved["iteration"]) == 10
        assert ("best_iteration" in saved) == bool(estimate)
    steps = count_steps(monkeypatch)
    resumed = conjoined.DPMM(checkpoint=path, checkpoint_every=5, **params).fit(X)
    assert steps["n"] == PARAMS["n_iter"] - 10
    assert_same_fit(expected, resumed)
    # The finished checkpoint gives the same result again without sampling.
    again = conjoined.DPMM(checkpoint=path, **params).fit(X)
    assert steps["n"] == PARAMS["n_iter"] - 10
    assert_same_fit(expected, again)
    np.testing.assert_array_equal(resumed.time_trace_, again.time_trace_)


def test_fit_killed_in_a_subprocess_resumes(tmp_path):
    """SIGKILL the fitting process itself in the middle of iteration 17; resume here."""
    path = tmp_path / "fit.npz"
    script = textwrap.dedent(f"""
        import os, signal, sys
        sys.path.insert(0, {os.path.dirname(__file__)!r})
        import conjoined
        from conjoined.dpmm import estimator
        from test_checkpoint import PARAMS, count_mixture
        original, calls = estimator.sams_move, []
        def move(*args):
            calls.append(1)
            if len(calls) > 17:
                os.kill(os.getpid(), signal.SIGKILL)
            return original(*args)
        estimator.sams_move = move
        conjoined.DPMM(checkpoint={str(path)!r}, checkpoint_every=3, **PARAMS).fit(count_mixture(1))
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False)
    assert result.returncode == -9, result.stderr
    with np.load(path) as saved:
        assert int(saved["iteration"]) == 15
    X = count_mixture(1)
    assert_same_fit(conjoined.DPMM(**PARAMS).fit(X),
                    conjoined.DPMM(checkpoint=path, checkpoint_every=3, **PARAMS).fit(X))


def test_failed_write_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    X = count_mixture(2)
    path = tmp_path / "fit.npz"
    original = np.savez
    calls = {"n": 0}

    def savez_then_fail(file, **arrays):
        calls["n"] += 1
        if calls["n"] == 3:
            file.write(b"half a checkpoint")
            raise OSError("disk full")
        original(file, **arrays)

    with monkeypatch.context() as patch:
        patch.setattr(np, "savez", savez_then_fail)
        with pytest.raises(OSError, match="disk full"):
            conjoined.DPMM(checkpoint=path, checkpoint_every=4, **PARAMS).fit(X)
    # no temporary file left behind; the label trace holds the failed save's rows, which the checkpoint does not count
    assert sorted(os.listdir(tmp_path)) == ["fit.npz", "fit.npz.labels"]
    with np.load(path) as saved:
        assert int(saved["iteration"]) == 8
    assert os.path.getsize(tmp_path / "fit.npz.labels") == 12 * X.shape[0] * 4
    assert_same_fit(conjoined.DPMM(**PARAMS).fit(X), conjoined.DPMM(checkpoint=path, **PARAMS).fit(X))


def test_each_save_appends_only_its_iterations_to_the_label_trace(tmp_path, monkeypatch):
    """The label trace (n_iter x n_points) goes to ``<checkpoint>.labels``, each save writing the iterations since
    the last: over a chain, the trace's size once, where the checkpoint itself rewrote it at every save."""
    X = count_mixture(2)
    path = tmp_path / "fit.npz"
    written = []
    real_open = open

    class Counted:
        def __init__(self, file):
            self.file = file

        def __enter__(self):
            self.file.__enter__()
            return self

        def __exit__(self, *exc):
            return self.file.__exit__(*exc)

        def write(self, data):
            written.append(len(data))
            return self.file.write(data)

        def __getattr__(self, name):
            return getattr(self.file, name)

    def counted_open(file, *args, **kwargs):
        opened = real_open(file, *args, **kwargs)
        return Counted(opened) if os.fspath(file).endswith(".labels") else opened

    monkeypatch.setattr(checkpoint_module, "open", counted_open, raising=False)
    model = conjoined.DPMM(checkpoint=path, checkpoint_every=4, **PARAMS).fit(X)
    trace_bytes = PARAMS["n_iter"] * X.shape[0] * 4
    assert written == [4 * X.shape[0] * 4] * 6 and sum(written) == trace_bytes
    on_disk = np.fromfile(str(path) + ".labels", np.int32).reshape(PARAMS["n_iter"], X.shape[0])
    np.testing.assert_array_equal(on_disk, model.labels_trace_)
    with np.load(path) as saved:
        assert "trace_labels" not in saved.files


def test_a_version_1_checkpoint_with_its_label_trace_inside_resumes(tmp_path, monkeypatch):
    X = count_mixture(2)
    path = tmp_path / "fit.npz"
    with monkeypatch.context() as patch:
        interrupt_during_iteration(patch, 13)
        with pytest.raises(Interrupted):
            conjoined.DPMM(checkpoint=path, checkpoint_every=4, **PARAMS).fit(X)
    labels_file = tmp_path / "fit.npz.labels"
    with np.load(path) as saved:
        arrays = dict(saved)
    arrays.update(format_version=np.array(1),
                  trace_labels=np.fromfile(labels_file, np.int32).reshape(-1, X.shape[0])[:12])
    with open(path, "wb") as file:
        np.savez(file, **arrays)
    labels_file.unlink()
    resumed = conjoined.DPMM(checkpoint=path, checkpoint_every=4, **PARAMS).fit(X)
    assert_same_fit(conjoined.DPMM(**PARAMS).fit(X), resumed)
    # its later saves wrote the whole trace beside it
    np.testing.assert_array_equal(np.fromfile(labels_file, np.int32).reshape(-1, X.shape[0]), resumed.labels_trace_)


@pytest.mark.parametrize("how, reason", [
    ("missing", "FileNotFoundError"),
    ("short", "23 iterations of labels, not 24"),
    ("another chain's", "its rows are not those the checkpoint counts"),
])
def test_a_missing_short_or_foreign_label_trace_is_named(tmp_path, how, reason):
    X = count_mixture(2)
    path = tmp_path / "fit.npz"
    conjoined.DPMM(checkpoint=path, **PARAMS).fit(X)
    labels_file = tmp_path / "fit.npz.labels"
    if how == "missing":
        labels_file.unlink()
    elif how == "short":
        labels_file.write_bytes(labels_file.read_bytes()[:-4 * X.shape[0]])
    else:
        conjoined.DPMM(checkpoint=tmp_path / "other.npz", **dict(PARAMS, random_state=6)).fit(X)
        os.replace(tmp_path / "other.npz.labels", labels_file)
    with pytest.raises(ValueError, match=rf"checkpoint {re.escape(str(path))} is damaged: its label trace "
                                         rf"{re.escape(str(labels_file))} cannot be read \({reason}.*delete both"):
        conjoined.DPMM(checkpoint=path, **PARAMS).fit(X)
    # a chain that keeps no label trace writes no such file
    conjoined.DPMM(checkpoint=tmp_path / "none.npz", **dict(PARAMS, store_labels=False)).fit(X)
    assert not (tmp_path / "none.npz.labels").exists()


def test_a_label_trace_shortened_during_a_fit_is_refused_not_padded(tmp_path, monkeypatch):
    """A save seeks to the rows it appends: past the end of a shortened file (another fit started afresh on the
    same checkpoint), it would leave rows of zeros that the checkpoint then counts as labels."""
    X = count_mixture(2)
    path = tmp_path / "fit.npz"
    original, calls = estimator.sams_move, {"n": 0}

    def move(*args):
        calls["n"] += 1
        if calls["n"] == 6:  # after the save at 4
            (tmp_path / "fit.npz.labels").write_bytes(b"")
        return original(*args)

    monkeypatch.setattr(estimator, "sams_move", move)
    with pytest.raises(ValueError, match="holds fewer than the 4 iterations saved in it"):
        conjoined.DPMM(checkpoint=path, checkpoint_every=4, **PARAMS).fit(X)
    with np.load(path) as saved:
        assert int(saved["iteration"]) == 4


@pytest.mark.parametrize("kind, estimate", [("counts", {}), ("gaussian", MAP), ("counts", dict(MAP, warmup=24))])
def test_a_chain_resumed_with_more_iterations_is_the_longer_chain(tmp_path, monkeypatch, kind, estimate):
    X = DATA[kind]()
    params = {**PARAMS, **estimate}
    path = tmp_path / "fit.npz"
    conjoined.DPMM(checkpoint=path, **params).fit(X)  # finished at 24 iterations
    steps = count_steps(monkeypatch)
    extended = conjoined.DPMM(checkpoint=path, **dict(params, n_iter=40)).fit(X)
    assert steps["n"] == 40 - 24
    assert_same_fit(conjoined.DPMM(**dict(params, n_iter=40)).fit(X), extended)


def test_checkpoint_of_another_fit_is_refused(tmp_path):
    X = count_mixture(3)
    path = tmp_path / "fit.npz"
    conjoined.DPMM(checkpoint=path, **PARAMS).fit(X)
    with pytest.raises(ValueError, match="different data"):
        conjoined.DPMM(checkpoint=path, **PARAMS).fit(count_mixture(4))
    with pytest.raises(ValueError, match="alpha: 1.0 in the file, 2.0 now"):
        conjoined.DPMM(checkpoint=path, **dict(PARAMS, alpha=2.0)).fit(X)
    with pytest.raises(ValueError, match="prior"):
        conjoined.DPMM(checkpoint=path, prior=conjoined.Multinomial(beta=0.5), **PARAMS).fit(X)
    with pytest.raises(ValueError, match="seed"):
        conjoined.DPMM(checkpoint=path, **dict(PARAMS, random_state=6)).fit(X)
    spawned = np.random.SeedSequence(5)
    spawned.spawn(1)  # the same entropy, other children
    with pytest.raises(ValueError, match="seed"):
        conjoined.DPMM(checkpoint=path, **dict(PARAMS, random_state=spawned)).fit(X)
    with pytest.raises(ValueError, match="n_iter: 24 in the file, 20 now"):
        conjoined.DPMM(checkpoint=path, **dict(PARAMS, n_iter=20)).fit(X)
    with pytest.raises(ValueError, match=r"warmup: 12 in the file, 15 now\) \(a chain goes on to more iterations "
                                         r"with the warm-up it was drawn with: give warmup=12\)"):
        conjoined.DPMM(checkpoint=path, **dict(PARAMS, n_iter=30, warmup=None)).fit(X)
    # a checkpoint holds the most probable sample only if written for it
    with pytest.raises(ValueError, match="estimate: None in the file, 'map' now"):
        conjoined.DPMM(checkpoint=path, **dict(PARAMS, estimate="map")).fit(X)
    # random_state=None continues whatever seed the checkpoint was started with.
    assert_same_fit(conjoined.DPMM(**PARAMS).fit(X),
                    conjoined.DPMM(checkpoint=path, **dict(PARAMS, random_state=None)).fit(X))
    # the prior is described by its fitted parameters: beta=1 and beta=1.0 are the same prior
    conjoined.DPMM(checkpoint=tmp_path / "int.npz", prior=conjoined.Multinomial(beta=1), **PARAMS).fit(X)
    assert_same_fit(conjoined.DPMM(prior=conjoined.Multinomial(beta=1.0), **PARAMS).fit(X),
                    conjoined.DPMM(checkpoint=tmp_path / "int.npz", prior=conjoined.Multinomial(beta=np.float64(1)),
                                   **PARAMS).fit(X))
    (tmp_path / "other.npz").write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="is not a DPMM checkpoint"):
        conjoined.DPMM(checkpoint=tmp_path / "other.npz", **PARAMS).fit(X)


def test_gaussian_checkpoint_of_an_uncentred_fit_is_refused(tmp_path):
    """Gaussian fits run on centred data: a checkpoint written before that (its settings without "centred", its
    state in the data's coordinates) must not be resumed; the error names the setting."""
    import json
    X = DATA["gaussian"]()
    path = tmp_path / "fit.npz"
    conjoined.DPMM(checkpoint=path, **PARAMS).fit(X)
    with np.load(path) as saved:
        arrays = dict(saved)
    settings = json.loads(str(arrays["settings"]))
    assert settings.pop("centred") is True
    arrays["settings"] = np.array(json.dumps(settings, sort_keys=True))
    np.savez(path, **arrays)
    with pytest.raises(ValueError, match="centred: None in the file, True now"):
        conjoined.DPMM(checkpoint=path, **PARAMS).fit(X)


def test_cdp_resumes_from_its_checkpoint_directory(tmp_path, monkeypatch):
    from conjoined.datasets import make_cdp_case

    X, _, _ = make_cdp_case(3, random_state=0)
    params = {"n_iter": 20, "n_reassign": 5, "random_state": 0}
    expected = conjoined.CDP(**params).fit(X)
    directory = tmp_path / "cdp"
    with monkeypatch.context() as patch:
        interrupt_during_iteration(patch, 2 * 20 + 13)  # iteration 13 of the third DPMM run (first round)
        with pytest.raises(Interrupted):
            conjoined.CDP(checkpoint=directory, **params).fit(X)
    runs = ["dpmm-1-row.npz", "dpmm-2-column.npz", "dpmm-3-row.npz"]
    assert sorted(os.listdir(directory)) == sorted(runs + [run + ".labels" for run in runs] + ["seed.json"])
    resumed = conjoined.CDP(checkpoint=directory, **params).fit(X)
    for name in ("row_labels_", "column_labels_", "mixture_row_labels_", "mixture_column_labels_", "rows_",
                 "columns_", "theta_"):
        np.testing.assert_array_equal(getattr(expected, name), getattr(resumed, name), err_msg=name)
    assert_same_fit(expected.row_dpmm_, resumed.row_dpmm_)
    assert_same_fit(expected.column_dpmm_, resumed.column_dpmm_)


def test_a_folder_begun_with_a_seed_resumes_without_it_and_names_it_to_another(tmp_path, monkeypatch):
    """A folder begun with random_state=0 records it: a fit without a seed resumes it (the command without
    --seed), one with another seed is told which began it; a folder an earlier version began with a seed, which
    it did not record, is refused to a fit without one before anything in it changes. Before: a fit without a
    seed drew another, failed on the spectral start's hash, and wrote its seed into the folder, which then
    refused every fit without --seed."""
    from conjoined.datasets import make_cdp_case

    X, _, _ = make_cdp_case(3, random_state=0)
    params = {"n_iter": 20, "n_reassign": 5}
    directory = tmp_path / "cdp"
    with monkeypatch.context() as patch:
        interrupt_during_iteration(patch, 2 * 20 + 13)
        with pytest.raises(Interrupted):
            conjoined.CDP(checkpoint=directory, random_state=0, **params).fit(X)
    assert json.loads((directory / "seed.json").read_text()) == {"entropy": 0}
    files = {path.name: path.read_bytes() for path in directory.iterdir()}
    with pytest.raises(ValueError, match=r"was begun with random_state=0, not 1: give random_state=0 \(--seed 0"):
        conjoined.CDP(checkpoint=directory, random_state=1, **params).fit(X)
    assert {path.name: path.read_bytes() for path in directory.iterdir()} == files
    resumed = conjoined.CDP(checkpoint=directory, **params).fit(X)
    expected = conjoined.CDP(random_state=0, **params).fit(X)
    for name in ("row_labels_", "column_labels_", "mixture_row_labels_", "mixture_column_labels_", "rows_",
                 "columns_", "theta_"):
        np.testing.assert_array_equal(getattr(expected, name), getattr(resumed, name), err_msg=name)
    assert repeatable_params(resumed)["random_state"] == 0
    (directory / "seed.json").unlink()  # as an earlier version left it
    files = {path.name: path.read_bytes() for path in directory.iterdir()}
    with pytest.raises(ValueError, match="begun by a fit with a seed that the folder does not record"):
        conjoined.CDP(checkpoint=directory, **params).fit(X)
    assert {path.name: path.read_bytes() for path in directory.iterdir()} == files
    again = conjoined.CDP(checkpoint=directory, random_state=0, **params).fit(X)  # the seed given: resumed
    np.testing.assert_array_equal(again.rows_, expected.rows_)


def test_a_cdp_checkpoint_folder_is_not_run_on_to_more_iterations(tmp_path):
    """CDP's later mixtures read data that depend on the earlier ones: a folder written at one n_iter is refused
    at another before any file in it is rewritten, and still resumes at its own."""
    from conjoined.datasets import make_cdp_case

    X, _, _ = make_cdp_case(2, random_state=0)
    params = {"n_iter": 20, "n_reassign": 5, "random_state": 0, "checkpoint": tmp_path / "cdp"}
    first = conjoined.CDP(**params).fit(X)
    files = {path.name: path.read_bytes() for path in (tmp_path / "cdp").iterdir()}
    with pytest.raises(ValueError, match="n_iter: 20 in the file, 21 now"):
        conjoined.CDP(**dict(params, n_iter=21)).fit(X)
    assert {path.name: path.read_bytes() for path in (tmp_path / "cdp").iterdir()} == files
    np.testing.assert_array_equal(conjoined.CDP(**params).fit(X).rows_, first.rows_)


def test_cdp_without_a_seed_records_its_seed_in_the_checkpoint_folder(tmp_path, monkeypatch):
    # random_state=None drew a new root seed at every fit: a fit started again could neither resume the
    # folder's DPMM runs nor reuse them, and was refused as written with other parameters
    from conjoined.datasets import make_cdp_case

    X, _, _ = make_cdp_case(3, random_state=0)
    directory = tmp_path / "cdp"
    params = {"n_iter": 20, "n_reassign": 5, "n_rounds": 1}
    with monkeypatch.context() as patch:
        interrupt_during_iteration(patch, 2 * 20 + 13)
        with pytest.raises(Interrupted):
            conjoined.CDP(checkpoint=directory, **params).fit(X)
    entropy = json.loads((directory / "seed.json").read_text())["entropy"]
    assert 0 <= entropy < 2**31  # an int seed, storable anywhere: given as random_state it repeats the fit
    resumed = conjoined.CDP(checkpoint=directory, **params).fit(X)
    assert repeatable_params(resumed)["random_state"] == entropy and resumed.random_state is None
    expected = conjoined.CDP(random_state=entropy, **params).fit(X)
    for name in ("row_labels_", "column_labels_", "mixture_row_labels_", "mixture_column_labels_", "rows_",
                 "columns_", "theta_"):
        np.testing.assert_array_equal(getattr(expected, name), getattr(resumed, name), err_msg=name)
    assert_same_fit(expected.row_dpmm_, resumed.row_dpmm_)
    for damaged in ('{"entropy": "abc"}', '{"entropy": null}', "", "{}"):
        (directory / "seed.json").write_text(damaged)
        with pytest.raises(ValueError, match="seed.json is damaged"):
            conjoined.CDP(checkpoint=directory, **params).fit(X)
        assert (directory / "seed.json").read_text() == damaged


def test_a_fit_seeded_by_a_generator_resumes_its_checkpoint(tmp_path, monkeypatch):
    """A Generator (or RandomState) gives each fit another seed: started again on the same estimator, an
    interrupted fit drew a new one and was refused ("written with other parameters (seed: ...)"). As with None,
    the checkpoint's seed is taken: a CDP folder records the seed the first fit drew, a DPMM file resumes its own."""
    from conjoined.datasets import make_cdp_case

    X, _, _ = make_cdp_case(3, random_state=0)
    params = {"n_iter": 20, "n_reassign": 5, "n_rounds": 1}
    model = conjoined.CDP(random_state=np.random.default_rng(0), checkpoint=tmp_path / "cdp", **params)
    with monkeypatch.context() as patch:
        interrupt_during_iteration(patch, 2 * 20 + 13)
        with pytest.raises(Interrupted):
            model.fit(X)
    entropy = json.loads((tmp_path / "cdp" / "seed.json").read_text())["entropy"]
    model.fit(X)
    assert repeatable_params(model)["random_state"] == entropy  # what conjoined.anndata.cdp records
    expected = conjoined.CDP(random_state=entropy, **params).fit(X)
    for name in ("row_labels_", "column_labels_", "mixture_row_labels_", "mixture_column_labels_", "rows_",
                 "columns_", "theta_"):
        np.testing.assert_array_equal(getattr(expected, name), getattr(model, name), err_msg=name)

    points = count_mixture(1)
    dpmm = conjoined.DPMM(checkpoint=tmp_path / "dpmm.npz", **dict(PARAMS, random_state=np.random.default_rng(3)))
    with monkeypatch.context() as patch:
        interrupt_during_iteration(patch, 17)
        with pytest.raises(Interrupted):
            dpmm.fit(points)
    dpmm.fit(points)  # the generator has moved on: the file's seed is taken
    assert_same_fit(conjoined.DPMM(**dict(PARAMS, random_state=np.random.default_rng(3))).fit(points), dpmm)


def test_a_cdp_checkpoint_of_another_start_says_which_start_resumes_it(tmp_path):
    # a folder written by a fit whose first mixtures started from one cluster (as before the spectral start) is
    # refused by the default, with the option that resumes it, which then gives that fit
    from conjoined.datasets import make_cdp_case

    X, _, _ = make_cdp_case(3, random_state=0)
    directory = tmp_path / "cdp"
    params = {"n_iter": 20, "n_reassign": 5, "random_state": 0, "checkpoint": directory}
    before = conjoined.CDP(init="one", **params).fit(X)
    with pytest.raises(ValueError, match=r"init_labels: None in the file, '[0-9a-f]+' now\) \(a CDP fit's first "
                                         r"mixtures start from the matrix's spectrum by default: one begun from one "
                                         r"cluster resumes with init='one', --init one"):
        conjoined.CDP(**params).fit(X)
    again = conjoined.CDP(init="one", **params).fit(X)
    np.testing.assert_array_equal(before.rows_, again.rows_)


def test_bad_checkpoint_every():
    with pytest.raises(ValueError, match="checkpoint_every"):
        conjoined.DPMM(checkpoint_every=0).fit(count_mixture())


def _damage(path, how):
    """Rewrite the checkpoint at ``path`` truncated, without one array, or with garbled JSON."""
    if how == "truncated":
        path.write_bytes(path.read_bytes()[:-200])
        return
    with np.load(path) as saved:
        arrays = {name: saved[name] for name in saved.files}
    if how == "missing array":
        del arrays["age"]
    else:
        arrays["random_states"] = np.array("{not json")
    with open(path, "wb") as file:
        np.savez(file, **arrays)


@pytest.mark.parametrize("how", ["truncated", "missing array", "bad JSON"])
def test_damaged_checkpoint_is_named(tmp_path, how):
    X = count_mixture(5, n=40)
    path = tmp_path / "fit.npz"
    params = dict(PARAMS, n_iter=4, warmup=2)
    conjoined.DPMM(checkpoint=path, **params).fit(X)
    _damage(path, how)
    with pytest.raises(ValueError, match=rf"checkpoint {re.escape(str(path))} is damaged.*delete it"):
        conjoined.DPMM(checkpoint=path, **params).fit(X)


@pytest.mark.parametrize("name, message", [
    ("missing/fit.npz", "the folder .*missing does not exist"),
    ("", "checkpoint must be None or a file's path"),
    (".", "is a folder"),
])
def test_checkpoint_path_is_checked_before_sampling(tmp_path, monkeypatch, name, message):
    monkeypatch.chdir(tmp_path)
    steps = count_steps(monkeypatch)
    with pytest.raises(ValueError, match=message):
        conjoined.DPMM(checkpoint=name, **PARAMS).fit(count_mixture())
    assert steps["n"] == 0
