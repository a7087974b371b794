"""Worker loss: a worker process of a real LocalCluster is killed (SIGKILL) in the middle
of a run; its chunks are rebuilt on another worker and the run asks exactly the queries
of the local backend, with the same f and impact factor."""

import contextlib
import os
import signal
import threading
import time

import numpy as np
import pytest
from distributed import Client, LocalCluster

import bigsearch
from bigsearch.testing import clustered_points

from conftest import run_queries

RTOL = 1e-9
LAS_OPTIONS = {"pi": 0.05, "alpha": 0.05}


@pytest.fixture(scope="module")
def cluster():
    # The nanny restarts a killed worker, so every test starts with 2 workers again.
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as c:
        yield c


@pytest.fixture
def client(cluster):
    with Client(cluster) as c:
        c.wait_for_workers(2, timeout=60)
        yield c


@pytest.fixture(scope="module")
def data():
    return clustered_points(600, 10, prevalence=0.05, seed=8, spread=0.8)


def make(method, path, backend="local"):
    if method == "las":
        return bigsearch.LAS(path, backend=backend, **LAS_OPTIONS)
    return bigsearch.WNAS(path, backend=backend)


def first_shard_worker(client, search):
    """(address, process id) of the worker holding the first chunks."""
    address = search.backend.shards[0].address
    return address, client.run(os.getpid, workers=[address])[address]


def kill_worker_of_first_shard(client, search):
    """SIGKILL the process of the worker holding the first chunks; returns its address."""
    address, pid = first_shard_worker(client, search)
    os.kill(pid, signal.SIGKILL)
    return address


def wait_until_removed(client, address, timeout=30):
    deadline = time.monotonic() + timeout
    while address in client.scheduler_info()["workers"]:
        assert time.monotonic() < deadline, f"the scheduler still lists {address}"
        time.sleep(0.05)


def assert_same_as_local(method, path, remote, y, first, before, after):
    local = make(method, path)
    local.tell(first, 1)
    assert before + after == run_queries(local, y, len(before) + len(after))
    rel = np.abs(remote.f - local.f).max() / np.abs(local.f).max()
    assert rel < RTOL
    if method == "las":
        assert np.abs(remote.impact - local.impact).max() / np.abs(local.impact).max() < RTOL


@pytest.mark.parametrize("method,kind,when", [
    ("las", "zarr", "noticed"),        # the scheduler has removed the worker before the next pass
    ("wnas", "hdf5", "unnoticed"),     # the next pass is sent to a worker that just died
    ("las", "hdf5", "before init"),    # killed before the initialization passes
])
def test_run_continues_after_a_worker_process_is_killed(client, data, store_factory, method, kind, when):
    X, y = data
    path = store_factory(X, y, kind, "float32", 37)
    remote = make(method, path, client)
    first = int(np.flatnonzero(y)[0])
    remote.tell(first, 1)
    before = [] if when == "before init" else run_queries(remote, y, 10)
    lost = kill_worker_of_first_shard(client, remote)
    if when == "noticed":
        wait_until_removed(client, lost)
    with pytest.warns(RuntimeWarning, match=f"dask worker {lost} was lost"):
        after = run_queries(remote, y, 15)
    assert [r["worker"] for r in remote.backend.recoveries] == [lost]
    assert lost not in {s.address for s in remote.backend.shards}
    assert [j for s in remote.backend.shards for j in s.chunks] == list(range(remote.store.n_chunks))
    assert_same_as_local(method, path, remote, y, first, before, after)
    remote.close()


def test_worker_killed_while_passes_run(client, store_factory):
    """The kill lands at an arbitrary moment of a run of longer passes, most likely
    inside one (a pass here takes most of an iteration)."""
    X, y = clustered_points(60_000, 32, prevalence=0.01, seed=9)
    path = store_factory(X, y, "zarr", "float32", 4096)
    remote = make("las", path, client)
    first = int(np.flatnonzero(y)[0])
    remote.tell(first, 1)
    before = run_queries(remote, y, 3)
    address, pid = first_shard_worker(client, remote)
    killer = threading.Timer(0.05, os.kill, (pid, signal.SIGKILL))
    killer.start()
    with pytest.warns(RuntimeWarning, match="was lost"):
        after = run_queries(remote, y, 25)
    killer.join()
    assert len(remote.backend.recoveries) == 1
    assert_same_as_local("las", path, remote, y, first, before, after)
    remote.close()



async def drop_worker(address, dask_scheduler=None):
    """What the scheduler does to a worker it cannot hear from, here without asking the
    worker (or its nanny) to close, as behind a network partition."""
    return await dask_scheduler.remove_worker(address, stimulus_id="test-partition", close=False)


@pytest.mark.parametrize("direct", [True, False], ids=["direct", "via-scheduler"])
def test_worker_cut_off_while_a_pass_waits_for_it(cluster, data, store_factory, direct):
    """The worker is frozen (SIGSTOP: its connections stay open, so a call straight to it
    would wait forever) and the scheduler drops it while a pass waits for its answer: the
    driver notices that the worker left the cluster, stops waiting, rebuilds its chunks
    elsewhere and asks the same queries."""
    with Client(cluster, direct_to_workers=direct) as client:
        client.wait_for_workers(2, timeout=60)
        cut_off_during_a_pass(client, data, store_factory)


def cut_off_during_a_pass(client, data, store_factory):
    X, y = data
    path = store_factory(X, y, "zarr", "float32", 37)
    remote = make("las", path, client)
    first = int(np.flatnonzero(y)[0])
    remote.tell(first, 1)
    before = run_queries(remote, y, 5)
    address, pid = first_shard_worker(client, remote)
    os.kill(pid, signal.SIGSTOP)
    cut = threading.Timer(0.3, client.run_on_scheduler, (drop_worker, address))
    try:
        cut.start()
        with pytest.warns(RuntimeWarning, match=f"dask worker {address} was lost"):
            after = run_queries(remote, y, 10)
    finally:
        cut.join()
        with contextlib.suppress(ProcessLookupError):   # its nanny may have ended it already
            os.kill(pid, signal.SIGKILL)
    assert [r["worker"] for r in remote.backend.recoveries] == [address]
    assert_same_as_local("las", path, remote, y, first, before, after)
    remote.close()
