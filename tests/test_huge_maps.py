"""A pass over a store that fits in memory maps whole chunks with transparent huge pages
(read from the disk 2 MiB at a time, mapped cheaply on every later pass); reads of a few
rows (pruned queries, stored rows) and stores larger than half the memory available map
without them (storage/base.py). Checked in the kernel's own record of each
mapping, /proc/self/smaps, where huge-page advice shows as the ``hg`` VmFlag."""

import numpy as np
import pytest

from bigsearch.backends import ChunkStep
from bigsearch.backends.local import LocalBackend
from bigsearch.storage import base, open_store

from conftest import write_store

pytestmark = pytest.mark.skipif(not base.HUGE_MAPS, reason="this system offers no transparent huge pages")


def advised(x):
    """Whether the mapping holding array x has huge-page advice (smaps' VmFlags ``hg``)."""
    address = x.__array_interface__["data"][0]
    inside = False
    with open("/proc/self/smaps") as fh:
        for line in fh:
            head = line.split()[0]
            if "-" in head and not head.endswith(":"):
                lo, hi = (int(v, 16) for v in head.split("-"))
                inside = lo <= address < hi
            elif inside and head == "VmFlags:":
                return "hg" in line.split()[1:]
    raise AssertionError("no mapping holds the array")


def flags_step(x, state):
    return advised(x)


@pytest.mark.parametrize("kind", ["zarr", "hdf5"])
def test_passes_map_with_huge_pages_and_partial_reads_without(tmp_path, kind):
    """Maps made per pass (the path of a store whose maps are not held)."""
    X = np.random.default_rng(0).random((300, 16)).astype(np.float32)
    store = open_store(write_store(tmp_path, X, kind=kind, chunk_rows=100))
    store.hold_maps = False
    assert store.fast_path
    with store.chunk(1) as x:
        assert advised(x)
        assert np.array_equal(x, X[100:200])
    with store.chunk(1, whole=False) as x:
        assert not advised(x)
        assert np.array_equal(x, X[100:200])
    backend = LocalBackend(store)
    try:
        assert backend.map(ChunkStep(flags_step)) == [True] * 3
        assert backend.map(ChunkStep(flags_step, whole_chunk=False)) == [False] * 3
    finally:
        backend.close()


def test_held_maps_have_huge_pages_and_partial_reads_use_them(tmp_path):
    """A store whose maps are held maps each chunk once, with huge pages: a read of a few
    rows uses that map (the passes before any query have read every page)."""
    X = np.random.default_rng(0).random((300, 16)).astype(np.float32)
    store = open_store(write_store(tmp_path, X, chunk_rows=100))
    assert store.hold_maps
    with store.chunk(1, whole=False) as x:
        assert advised(x)
        first = x.__array_interface__["data"][0]
    with store.chunk(1) as x:
        assert x.__array_interface__["data"][0] == first and np.array_equal(x, X[100:200])
    store.close()


def test_without_huge_pages_offered_nothing_is_advised(tmp_path, monkeypatch):
    X = np.arange(64, dtype=np.float32).reshape(16, 4)
    store = open_store(write_store(tmp_path, X, chunk_rows=8))
    monkeypatch.setattr(base, "HUGE_MAPS", False)
    with store.chunk(0) as x:
        assert not advised(x)
        assert np.array_equal(x, X[:8])


def test_a_store_larger_than_half_the_memory_maps_without_huge_pages(tmp_path, monkeypatch):
    """Every pass over it reads from the disk: no later pass would gain, and each 2 MiB
    folio could cost compaction."""
    X = np.arange(64, dtype=np.float32).reshape(16, 4)
    path = write_store(tmp_path, X, chunk_rows=8)
    monkeypatch.setenv("BIGSEARCH_MEMORY_BYTES", str(2 * X.nbytes - 1))
    store = open_store(path)
    assert not store.huge_maps
    with store.chunk(0) as x:
        assert not advised(x)
    monkeypatch.setenv("BIGSEARCH_MEMORY_BYTES", str(2 * X.nbytes))
    store = open_store(path)
    assert store.huge_maps
    with store.chunk(0) as x:
        assert advised(x)


def test_pruned_queries_read_blocks_without_huge_pages(tmp_path, monkeypatch):
    """The pruned engine's block reads go through chunk(..., whole=False)."""
    from bigsearch import LAS

    rng = np.random.default_rng(1)
    X = np.abs(rng.normal(size=(400, 6))).astype(np.float32)
    y = (rng.random(400) < 0.05).astype(np.int8)
    store = open_store(write_store(tmp_path, X, y, chunk_rows=100))
    seen = []
    chunk = type(store).chunk

    def spy(self, j, whole=True):
        seen.append(whole)
        return chunk(self, j, whole)
    las = LAS(store, prune=True)
    las.tell([int(np.flatnonzero(y == 1)[0]), int(np.flatnonzero(y == 0)[0])], [1, 0])
    las.ask()
    monkeypatch.setattr(type(store), "chunk", spy)
    for _ in range(3):
        i = las.ask()
        las.tell(i, int(y[i]))
    assert seen and not any(seen)
