"""The dask.distributed backend on a real LocalCluster with 2 worker processes: the same
queries, f and impact factor as the local backend, on Zarr and HDF5 stores.
(Worker loss: test_distributed_loss.py.)"""

import json
import shutil

import numpy as np
import pytest

import bigsearch
from bigsearch import Session
from bigsearch.backends import Backend
from bigsearch.backends.distributed import Distributed, PersistedChunks
from bigsearch.errors import ClusterError
from bigsearch.testing import clustered_points
from bigsearch.testing.cluster import assert_persisted, persisted_chunks

from conftest import run_cli, run_queries

RTOL = 1e-9
LAS_OPTIONS = {"pi": 0.05, "eta": 0.6, "alpha": 0.05}


@pytest.fixture(scope="module")
def data():
    return clustered_points(600, 10, prevalence=0.05, seed=4, spread=0.8)


def rel_err(a, b):
    return np.abs(np.asarray(a) - b).max() / np.abs(b).max()


def assert_same_search(local, remote, y, steps, las=True):
    first = int(np.flatnonzero(y)[0])
    for s in (local, remote):
        s.tell(first, 1)
    assert run_queries(remote, y, steps) == run_queries(local, y, steps)
    assert rel_err(remote.f, local.f) < RTOL
    if las:
        assert rel_err(remote.impact, local.impact) < RTOL
        assert rel_err(remote.J, local.J) < RTOL
        r_idx, r_sc = remote.top(20)             # k > the candidates a chunk reports: rescans
        l_idx, l_sc = local.top(20)
        np.testing.assert_array_equal(r_idx, l_idx)
        np.testing.assert_allclose(r_sc, l_sc, rtol=RTOL)


@pytest.mark.parametrize("kind,chunk_rows", [("zarr", 37), ("hdf5", 37), ("zarr", 600)])
def test_las_matches_local_backend(client, data, store_factory, kind, chunk_rows):
    X, y = data
    path = store_factory(X, y, kind, "float32", chunk_rows)
    local, remote = bigsearch.LAS(path, **LAS_OPTIONS), bigsearch.LAS(path, backend=client, **LAS_OPTIONS)
    assert isinstance(remote.backend, Backend) and isinstance(local.backend, Backend)
    shards = remote.backend.shards
    assert [j for s in shards for j in s.chunks] == list(range(remote.store.n_chunks))
    assert len({s.address for s in shards}) == min(2, remote.store.n_chunks)  # both workers hold chunks
    assert_same_search(local, remote, y, 30)
    remote.close()


@pytest.mark.parametrize("kind", ["numpy", "h5py"])
def test_an_array_travels_to_the_workers(client, data, tmp_path, kind):
    X, y = data
    if kind == "numpy":
        x, options = X.astype(np.float32), {"store_options": {"chunk_rows": 37}}
    else:
        import h5py
        with h5py.File(tmp_path / "x.h5", "w") as f:
            f.create_dataset("emb", data=X, chunks=(37, X.shape[1]))
        x, options = h5py.File(tmp_path / "x.h5", "r")["emb"], {}
    remote = bigsearch.LAS(x, backend=client, **LAS_OPTIONS, **options)
    assert len({s.address for s in remote.backend.shards}) == 2
    assert_same_search(bigsearch.LAS(x, **LAS_OPTIONS, **options), remote, y, 20)
    remote.close()


@pytest.mark.parametrize("kind", ["zarr", "hdf5"])
def test_wnas_matches_local_backend(client, data, store_factory, kind):
    X, y = data
    path = store_factory(X, y, kind, "float64", 37)
    remote = bigsearch.WNAS(path, backend=client)
    assert_same_search(bigsearch.WNAS(path), remote, y, 30, las=False)
    remote.close()


def test_persisted_X_gives_the_same_search(client, data, store_factory):
    X, y = data
    path = store_factory(X, y, "zarr", "float32", 37)
    remote = bigsearch.LAS(path, backend=Distributed(client, persist=True), **LAS_OPTIONS)
    assert_same_search(bigsearch.LAS(path, **LAS_OPTIONS), remote, y, 20)
    assert_persisted(remote.backend)                # X is in the workers' memory, split between them
    remote.close()
    remote = bigsearch.LAS(path, backend=client, **LAS_OPTIONS)
    remote.ask()
    assert not any(persisted_chunks(remote.backend).values())   # without persist the workers read the store
    remote.close()


def test_persist_refuses_rows_that_would_crowd_the_worker(data, store_factory):
    X, y = data
    store = bigsearch.open_store(store_factory(X, y, "zarr", "float32", 37))
    held = PersistedChunks(store, range(2, 5), memory_limit=2 * 3 * 37 * 10 * 4)   # exactly half: kept
    with store.chunk(3) as x, held.chunk(3) as kept:
        np.testing.assert_array_equal(kept, x)
    with pytest.raises(ClusterError, match="more than half of its memory limit"):
        PersistedChunks(store, range(2, 5), memory_limit=2 * 3 * 37 * 10 * 4 - 1)


@pytest.mark.parametrize("method", ["las", "wnas"])
def test_state_saved_locally_continues_on_the_cluster(client, data, store_factory, method):
    X, y = data
    path = store_factory(X, y, "hdf5", "float32", 37)
    cls, kw = (bigsearch.LAS, LAS_OPTIONS) if method == "las" else (bigsearch.WNAS, {})
    local = cls(path, **kw)
    local.tell(int(np.flatnonzero(y)[0]), 1)
    run_queries(local, y, 10)
    remote = cls.from_state(path, local.export_state(), backend=client)
    np.testing.assert_array_equal(remote.f, local.f)
    assert run_queries(remote, y, 15) == run_queries(local, y, 15)
    remote.close()


def test_workers_that_cannot_open_the_store_give_a_clear_error(client, data, store_factory):
    X, y = data
    path = store_factory(X, y, "zarr", "float32", 37)
    store = bigsearch.open_store(path)               # the driver has it open ...
    shutil.rmtree(path)                              # ... the workers will not find it
    with pytest.raises(ClusterError, match="cannot open the feature store.*Every worker must reach the store"):
        bigsearch.LAS(store, backend=client, **LAS_OPTIONS)


def test_run_command_on_a_local_cluster_and_on_a_scheduler(client, tmp_path):
    X, y = clustered_points(3000, 16, prevalence=0.02, seed=5)
    store = bigsearch.create_store(tmp_path / "s.zarr", X, y, chunk_rows=250)
    common = ["run", store, "--method", "las,wnas", "--budget", 15, "--alpha", 1e-3, "-q", "--no-plots"]
    local = run_cli(*common, "--out", tmp_path / "local")
    # with encryption required, only a TLS cluster can run: --cluster local:N speaks TLS by default
    spawned = run_cli(*common, "--cluster", "local:2", "--out", tmp_path / "spawned",
                      env={"DASK_DISTRIBUTED__COMM__REQUIRE_ENCRYPTION": "True"})
    attached = run_cli(*common, "--scheduler", client.scheduler.address, "--persist", "--out", tmp_path / "attached")
    # what `dask scheduler --scheduler-file` writes (Client.write_scheduler_file cannot encode
    # this dask version's worker metrics once workers have run something)
    (tmp_path / "scheduler.json").write_text(json.dumps({"type": "Scheduler", "address": client.scheduler.address}))
    by_file = run_cli(*common, "--scheduler", tmp_path / "scheduler.json", "--out", tmp_path / "by_file")
    for res in (local, spawned, attached, by_file):
        assert res.returncode == 0, res.stderr
    runs = {name: json.loads((tmp_path / name / "results.json").read_text())["runs"]
            for name in ("local", "spawned", "attached", "by_file")}
    for name in ("spawned", "attached", "by_file"):
        assert [r["queries"] for r in runs[name]] == [r["queries"] for r in runs["local"]]


@pytest.mark.parametrize("options,message", [
    (["--cluster", "local:0"], "local:N with N >= 1"),
    (["--cluster", "slurm"], "local:N with N >= 1"),
    (["--cluster", "local:2", "--scheduler", "tcp://127.0.0.1:1"], "not both"),
    (["--persist"], "needs --scheduler or --cluster"),
])
def test_bad_cluster_options_exit_2_with_one_line(tmp_path, options, message):
    X, y = clustered_points(200, 8, prevalence=0.1, seed=6)
    store = bigsearch.create_store(tmp_path / "s.zarr", X, y)
    res = run_cli("run", store, "--budget", 2, "--out", tmp_path / "o", *options)
    last = res.stderr.strip().splitlines()[-1]
    assert res.returncode == 2 and last.startswith("Error:") and message in last, res.stderr


def test_unreachable_scheduler_is_a_one_line_error(tmp_path, monkeypatch):
    X, y = clustered_points(200, 8, prevalence=0.1, seed=6)
    store = bigsearch.create_store(tmp_path / "s.zarr", X, y)
    monkeypatch.setenv("DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT", "2s")
    res = run_cli("run", store, "--budget", 2, "--out", tmp_path / "o", "--scheduler", "tcp://127.0.0.1:9")
    assert res.returncode == 2 and res.stderr.startswith("Error: cannot connect to the dask scheduler"), res.stderr


def test_session_commands_on_a_cluster_follow_the_local_session(client, data, tmp_path):
    """new / label / next / undo through --scheduler ask what the same session asks on the
    local backend, step by step (the local session's commands: test_session_cli.py)."""
    X, y = data
    store = bigsearch.create_store(tmp_path / "s.zarr", X, y, chunk_rows=64)
    first = int(np.flatnonzero(y)[0])
    on_cluster = ["--scheduler", client.scheduler.address]
    d = tmp_path / "cluster"
    assert run_cli("session", "new", store, d, "--alpha", "0.01", "--pi", 0.1, *on_cluster).returncode == 0
    assert run_cli("session", "label", d, first, 1, *on_cluster).returncode == 0
    with Session.create(store, tmp_path / "local", alpha=0.01, pi=0.1) as local:
        local.tell(first, 1)
        out = json.loads(run_cli("session", "next", d, "--json", *on_cluster).stdout)
        assert [{**r, "record": None} for r in out] == [{**r, "record": None} for r in local.candidates(1)]
        i = out[0]["index"]
        assert run_cli("session", "label", d, i, int(y[i]), *on_cluster).returncode == 0
        local.tell(i, int(y[i]))
        assert run_cli("session", "undo", d, 1, *on_cluster).returncode == 0
        local.undo(1)
        expected = [{**r, "record": None} for r in local.candidates(5)]
    got = json.loads(run_cli("session", "next", d, "-k", 5, "--json", *on_cluster).stdout)
    assert [{**r, "record": None} for r in got] == expected


def test_refresh_on_the_cluster_matches_local(client, data, store_factory):
    """A refresh maps its comparing step over the workers and reports the drift as locally."""
    X, y = data
    path = store_factory(X, y, "zarr", "float32", 37)
    local, remote = bigsearch.LAS(path, **LAS_OPTIONS), bigsearch.LAS(path, backend=client, **LAS_OPTIONS)
    for s in (local, remote):
        s.tell(int(np.flatnonzero(y)[0]), 1)
        run_queries(s, y, 5)
        s.Kinv += 1e-7                      # the same drifted inverse on both
        run_queries(s, y, 2)
    drift_local, drift_remote = local.refresh(), remote.refresh()
    assert drift_local["J"] > 1e-9 and drift_remote["J"] == pytest.approx(drift_local["J"], rel=1e-9)
    assert drift_remote["f"] == pytest.approx(drift_local["f"], rel=1e-9)
    for name in ("f", "J", "impact"):
        assert rel_err(getattr(remote, name), getattr(local, name)) < RTOL
    assert run_queries(remote, y, 5) == run_queries(local, y, 5)
    remote.close()


def test_fantasized_batches_verify_on_the_workers(client, data, store_factory):
    """The verification passes of fantasized batches run on the workers; few candidates
    force several of them, and the batch is the local backend's."""
    from bigsearch.engine.methods.fantasy import FantasizedBatch

    X, y = data
    path = store_factory(X, y, "zarr", "float32", 37)
    batches = []
    for backend in ("local", client):
        search = bigsearch.LAS(path, pi=0.05, backend=backend)
        search.tell([int(np.flatnonzero(y)[0]), 0, 1], [1, 0, 0])
        search.sync()
        chooser = FantasizedBatch(search, 0.0, candidates=3, cap=2)
        batches.append((chooser.choose(10), chooser.passes))
        search.close()
    assert batches[0] == batches[1] and batches[0][1] > 1
