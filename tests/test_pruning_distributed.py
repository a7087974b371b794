"""Pruned queries on the dask backend (a real LocalCluster with 2 worker processes), LAS,
WNAS and BLR UCB: each worker prunes its own chunks, one round trip per query, and the
queries and chosen scores are the local full pass's, also after a worker process is
killed; the first pruned query reads only the blocks its bounds require."""

import os
import signal
import time

import numpy as np
import pytest
from distributed import Client, LocalCluster

import bigsearch

from conftest import tight_blocks

N = 600


@pytest.fixture(scope="module")
def cluster():
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as c:
        yield c


@pytest.fixture
def client(cluster):
    with Client(cluster) as c:
        c.wait_for_workers(2, timeout=60)
        yield c


@pytest.fixture(scope="module")
def data():
    return tight_blocks(N, 8, 0.08, seed=5)


def rounds(search, y, steps, k):
    queries, chosen = [], []
    while len(queries) < steps:
        idx, sc = search.top(k)
        queries += idx.tolist()
        chosen += sc.tolist()
        search.tell(idx.tolist(), [int(y[i]) for i in idx])
    return queries, chosen


def kill_first_worker(client, search):
    """SIGKILL the worker process holding the search's first shard; wait until it is gone."""
    address = search.backend.shards[0].address
    os.kill(client.run(os.getpid, workers=[address])[address], signal.SIGKILL)
    deadline = time.monotonic() + 30
    while address in client.scheduler_info()["workers"]:
        assert time.monotonic() < deadline
        time.sleep(0.05)


@pytest.mark.parametrize("kind,dtype,chunk_rows,k", [("zarr", "float32", 37, 1), ("hdf5", "float64", N, 3)])
def test_pruned_on_the_cluster_is_the_local_full_pass(client, data, store_factory, kind, dtype, chunk_rows, k):
    X, y = data
    path = store_factory(X, y, kind, dtype, chunk_rows)
    runs = []
    for backend, prune in (("local", False), (client, True)):
        s = bigsearch.LAS(path, pi=0.08, backend=backend, prune=prune, block_rows=64)
        s.tell(int(np.flatnonzero(y)[0]), 1)
        runs.append((s, *rounds(s, y, 30, k)))
    (full, q_full, f_full), (remote, q_remote, f_remote) = runs
    assert "each worker pruning its own chunks" in remote.pruning_status
    assert (q_remote, f_remote) == (q_full, f_full)
    if chunk_rows > 64:      # a chunk reads at least one of its blocks per query
        assert sum(remote.query_bytes[1:]) < sum(full.query_bytes[1:])
    assert np.array_equal(remote.f, full.f)
    remote.close()


def test_pruned_search_continues_after_a_worker_is_killed(client, data, store_factory):
    X, y = data
    path = store_factory(X, y, "zarr", "float32", 37)
    full = bigsearch.LAS(path, pi=0.08)
    remote = bigsearch.LAS(path, pi=0.08, backend=client, prune=True, block_rows=64)
    for s in (full, remote):
        s.tell(int(np.flatnonzero(y)[0]), 1)
    before = rounds(remote, y, 8, 1)
    kill_first_worker(client, remote)
    with pytest.warns(RuntimeWarning, match="was lost"):
        after = rounds(remote, y, 12, 1)
    assert before[0] + after[0] == rounds(full, y, 20, 1)[0]
    remote.close()


def first_query_rows(search, y):
    """Rows of X the first pruned query read (the workers report their reads), after one
    positive told."""
    search.tell(int(np.flatnonzero(y)[0]), 1)
    search.top(1)
    return search.query_bytes[0] // search.store.bytes_per_point


def test_the_first_pruned_query_reads_only_what_its_bounds_require(client, data, store_factory):
    """Issue 24: right after each full pass the workers set their chunks' caches from f, so
    the first pruned query reads only the blocks its bounds require, not every block. With
    one chunk the worker's pruner is the local backend's: the same count of rows; with two
    chunks, each reads only part of its rows (BLR: tests/test_blr_pruning.py)."""
    X, y = data
    one_chunk = store_factory(X, y, "zarr", "float64", N)
    local = first_query_rows(bigsearch.LAS(one_chunk, pi=0.08, prune=True, block_rows=64), y)
    remote = bigsearch.LAS(one_chunk, pi=0.08, backend=client, prune=True, block_rows=64)
    assert first_query_rows(remote, y) == local < N / 2
    remote.close()
    two_chunks = store_factory(X, y, "zarr", "float64", N // 2)
    remote = bigsearch.LAS(two_chunks, pi=0.08, backend=client, prune=True, block_rows=64)
    assert first_query_rows(remote, y) < N / 2
    remote.close()


@pytest.mark.parametrize("batch", [1, 3])
def test_pruned_ucb_continues_after_a_worker_is_killed(client, data, store_factory, batch):
    """BLR UCB: the chunks rebuilt on the live worker have J current (the engine's recipe)
    and skip the J updates already sent; the others keep theirs: the full pass's queries."""
    X, y = data
    path = store_factory(X, y, "zarr", "float32", 100)
    opts = dict(acquisition="ucb", lam=1.0, noise=0.5)
    full, remote = bigsearch.BLR(path, **opts), bigsearch.BLR(path, backend=client, prune=True, block_rows=64, **opts)
    init = [int(i) for i in np.flatnonzero(y)[:1]] + list(range(0, N, 40))

    def ucb_rounds(search, rounds):
        queries = []
        for _ in range(rounds):
            chosen = search.next_batch(batch)
            queries += chosen
            search.tell(chosen, [int(y[i]) for i in chosen])
        return queries

    for s in (full, remote):
        s.tell(init, [int(y[i]) for i in init])
    before = ucb_rounds(remote, 4)
    kill_first_worker(client, remote)
    with pytest.warns(RuntimeWarning, match="was lost"):
        after = ucb_rounds(remote, 6)
    assert before + after == ucb_rounds(full, 10)
    # (J of the rebuilt chunks is x^T A^-1 x afresh, not the sum of the rank updates: last bits differ)
    np.testing.assert_allclose(remote.J, full.J, rtol=1e-12)
    remote.close()


def wnas_rounds(search, y, steps, k):
    search.tell([int(np.flatnonzero(y == 1)[0]), int(np.flatnonzero(y == 0)[0])], [1, 0])
    return rounds(search, y, steps, k)


@pytest.mark.parametrize("kind,dtype,chunk_rows,k", [("zarr", "float32", 100, 1), ("hdf5", "float64", 37, 3)])
def test_pruned_wnas_on_the_cluster_is_the_local_full_pass(client, data, store_factory, kind, dtype, chunk_rows, k):
    X, y = data
    path = store_factory(X, y, kind, dtype, chunk_rows)
    full = bigsearch.WNAS(path)
    remote = bigsearch.WNAS(path, backend=client, prune=True, block_rows=64)
    assert "each worker pruning its own chunks" in remote.pruning_status
    assert wnas_rounds(remote, y, 30, k) == wnas_rounds(full, y, 30, k)      # queries and scores
    if chunk_rows > 64:
        assert sum(remote.query_bytes[2:]) < sum(full.query_bytes[2:])
    assert np.array_equal(remote.f, full.f)
    restored = bigsearch.WNAS.from_state(path, remote.export_state())       # every block brought up to date
    assert rounds(restored, y, 5, 1) == rounds(full, y, 5, 1)
    remote.close()


def test_pruned_wnas_continues_after_a_worker_is_killed(client, data, store_factory):
    X, y = data
    path = store_factory(X, y, "zarr", "float32", 100)
    full = bigsearch.WNAS(path)
    remote = bigsearch.WNAS(path, backend=client, prune=True, block_rows=64)
    before = wnas_rounds(remote, y, 8, 1)
    kill_first_worker(client, remote)
    with pytest.warns(RuntimeWarning, match="was lost"):
        after = rounds(remote, y, 12, 1)
    assert before[0] + after[0] == wnas_rounds(full, y, 20, 1)[0]
    assert max(remote.query_bytes[8:]) >= remote.store.nbytes     # every chunk's sums recomputed
    remote.close()


# -- block summaries stored with the store (engine/pruning/summaries.py) ----------------------
def swap_unsampled_rows(values):
    """Rows of two blocks of chunk 1 (of 100-row chunks: not sampled by the fingerprint),
    swapped: the column sums stay (X holds multiples of 2^-12: every sum is exact in any
    order), so only that chunk's worker can tell (its degrees)."""
    values[[110, 190]] = values[[190, 110]]


@pytest.mark.parametrize("kind,dtype,edit", [("zarr", "float32", None), ("hdf5", "float64", None),
                                             ("zarr", "float32", swap_unsampled_rows)])
def test_workers_read_their_slice_of_the_stored_summaries(client, data, store_factory, kind, dtype, edit):
    from test_pruning import edit_x

    from bigsearch.engine.pruning.summaries import CHANGED, write_block_summaries

    X, y = data
    path = store_factory(np.round(X * 4096) / 4096 if edit else X, y, kind, dtype, 100)
    write_block_summaries(path, block_rows=64)
    if edit:
        edit_x(path, kind, edit)
    full = bigsearch.LAS(path, pi=0.08)
    remote = bigsearch.LAS(path, pi=0.08, backend=client, prune=True, block_rows=64)
    for s in (full, remote):
        s.tell(int(np.flatnonzero(y)[0]), 1)
    assert rounds(remote, y, 20, 2) == rounds(full, y, 20, 2)
    assert remote.pruning.summaries_from.startswith("store")
    expected = ["store"] * 6
    if edit:
        expected[1] = CHANGED
    assert remote.pruning.chunk_summaries_from() == expected
    remote.close()
    full, remote = bigsearch.WNAS(path), bigsearch.WNAS(path, backend=client, prune=True, block_rows=64)
    assert wnas_rounds(remote, y, 20, 2) == wnas_rounds(full, y, 20, 2)
    assert remote.pruning.summaries_from == (CHANGED if edit else "store")
    if not edit:     # the workers' first query read only the blocks it needed, not their chunks
        assert remote.query_bytes[0] < 2 * remote.store.nbytes
    remote.close()
