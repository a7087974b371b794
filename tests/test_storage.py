"""Feature stores: format-specific read paths (sharded, fill values, big-endian, plain
zarr or h5py files), leftovers of dead writers, and clear errors for stores bigsearch
cannot use. What every format must do is in test_store_formats.py."""

import json
import os
import pickle
import resource
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import h5py
import numpy as np
import pytest
import zarr

import bigsearch
from bigsearch.errors import StoreError, StoreNotFoundError
from bigsearch.storage import open_store
from bigsearch.testing import clustered_points

from conftest import KINDS, read_all


def test_plain_zarr_written_without_bigsearch_is_a_store(tmp_path):
    """The format is open: a group with X (and y) made with zarr alone works."""
    X = np.random.default_rng(1).random((30, 3)).astype(np.float32)
    g = zarr.open_group(tmp_path / "plain.zarr", mode="w")
    g.create_array("X", shape=X.shape, chunks=(8, 3), dtype="float32", compressors=None)[:] = X
    s = open_store(tmp_path / "plain.zarr")
    assert s.fast_path and s.format_version == 1
    np.testing.assert_array_equal(read_all(s), X)


def test_compressed_zarr_takes_the_decoding_path(tmp_path):
    X = np.random.default_rng(2).random((40, 3))
    g = zarr.open_group(tmp_path / "z.zarr", mode="w")
    g.create_array("X", shape=X.shape, chunks=(9, 3), dtype="float64")[:] = X  # zstd by default
    s = open_store(tmp_path / "z.zarr")
    assert not s.fast_path and "need decoding" in s.slow_reason
    np.testing.assert_array_equal(read_all(s), X)


def test_sharded_zarr_reads_whole_shards(tmp_path):
    X = np.random.default_rng(3).random((40, 3)).astype(np.float32)
    g = zarr.open_group(tmp_path / "sh.zarr", mode="w")
    g.create_array("X", shape=X.shape, chunks=(5, 3), shards=(20, 3), dtype="float32",
                   compressors=None)[:] = X
    s = open_store(tmp_path / "sh.zarr")
    assert s.chunk_rows == 20 and not s.fast_path
    np.testing.assert_array_equal(read_all(s), X)


def test_unwritten_zarr_chunk_reads_as_fill_value(tmp_path):
    g = zarr.open_group(tmp_path / "fill.zarr", mode="w")
    a = g.create_array("X", shape=(10, 2), chunks=(5, 2), dtype="float32", compressors=None, fill_value=0)
    a[5:] = 1.0
    s = open_store(tmp_path / "fill.zarr")
    np.testing.assert_array_equal(read_all(s), np.r_[np.zeros((5, 2)), np.ones((5, 2))])


@pytest.mark.parametrize("chunks", [None, (6, 3)])
def test_hdf5_contiguous_chunked_and_filtered(tmp_path, chunks):
    X = np.random.default_rng(4).random((25, 3))
    for compression in (None, "gzip"):
        path = tmp_path / f"h{compression}{chunks}.h5"
        with h5py.File(path, "w") as fh:
            fh.create_dataset("X", data=X, chunks=chunks if compression is None else (6, 3),
                              compression=compression)
        s = open_store(path, {"chunk_rows": 4})
        assert s.fast_path == (compression is None)
        np.testing.assert_array_equal(read_all(s), X)


def test_big_endian_hdf5_is_decoded(tmp_path):
    X = np.random.default_rng(5).random((12, 2))
    with h5py.File(tmp_path / "be.h5", "w") as fh:
        fh.create_dataset("X", data=X.astype(">f8"))
    s = open_store(tmp_path / "be.h5")
    assert not s.fast_path
    np.testing.assert_array_equal(read_all(s), X)


# -- errors -----------------------------------------------------------------------

def test_missing_store(tmp_path):
    with pytest.raises(StoreNotFoundError, match="no feature store"):
        open_store(tmp_path / "nothing.zarr")
    with pytest.raises(FileNotFoundError):
        open_store(tmp_path / "nothing.h5")


def test_hdf5_without_X(tmp_path):
    with h5py.File(tmp_path / "noX.h5", "w") as fh:
        fh.create_dataset("features", data=np.ones((3, 2)))
    with pytest.raises(StoreError, match="no dataset 'X'"):
        open_store(tmp_path / "noX.h5")


def test_zarr_without_X(tmp_path):
    zarr.open_group(tmp_path / "noX.zarr", mode="w").create_array("Y", shape=(3,), dtype="f4")
    with pytest.raises(StoreError, match="no array 'X'"):
        open_store(tmp_path / "noX.zarr")


@pytest.mark.parametrize("shape", [(10,), (2, 3, 4)])
def test_X_of_the_wrong_rank(tmp_path, shape):
    with h5py.File(tmp_path / "rank.h5", "w") as fh:
        fh.create_dataset("X", data=np.ones(shape))
    with pytest.raises(StoreError, match=f"2-D array.*got {len(shape)}-D"):
        open_store(tmp_path / "rank.h5")


def test_integer_X_is_refused_with_a_fix(tmp_path):
    with h5py.File(tmp_path / "int.h5", "w") as fh:
        fh.create_dataset("X", data=np.ones((3, 2), np.int32))
    with pytest.raises(StoreError, match="float32 or float64"):
        open_store(tmp_path / "int.h5")


def test_column_chunked_X_is_refused_with_a_fix(tmp_path):
    g = zarr.open_group(tmp_path / "cols.zarr", mode="w")
    g.create_array("X", shape=(10, 4), chunks=(10, 2), dtype="f4")
    with pytest.raises(StoreError, match="chunked along columns.*whole rows"):
        open_store(tmp_path / "cols.zarr")


def test_newer_format_version_is_refused(tmp_path):
    path = bigsearch.create_store(tmp_path / "new.zarr", np.ones((3, 2)), attrs={"bigsearch_format": 99})
    with pytest.raises(StoreError, match="newer than this bigsearch"):
        open_store(path)


def test_bad_labels_are_refused(tmp_path):
    g = zarr.open_group(tmp_path / "y.zarr", mode="w")
    g.create_array("X", shape=(3, 2), dtype="f4", compressors=None)[:] = 1
    g.create_array("y", shape=(3,), dtype="i1")[:] = [0, 1, 2]
    with pytest.raises(StoreError, match=r"y\[2\] = 2"):
        open_store(tmp_path / "y.zarr").labels()


def test_not_a_store(tmp_path):
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(StoreError, match="neither a Zarr directory nor an HDF5 file"):
        open_store(tmp_path / "notes.txt")


# -- atomic writes (and every format's round trip: test_store_formats.py) -------------

def test_a_new_write_removes_what_dead_writers_left(tmp_path):
    """Leftovers of a dead writer on this host go (an old copy only while the store is in
    place: test_hardening_kills restores one when it is not); a live writer's and another
    host's stay."""
    import subprocess
    import sys

    from bigsearch.storage.atomic import _HOST
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        names = {"dead": f".s.zarr.partial-{_HOST}-{dead}-0123abcd",
                 "dead_old": f".s.zarr.old-{_HOST}-{dead}-0123abcd",
                 "live": f".s.zarr.partial-{_HOST}-{live.pid}-0123abcd",
                 "other_host": f".s.zarr.partial-{_HOST}x-{dead}-0123abcd",
                 "other_store": f".t.zarr.partial-{_HOST}-{dead}-0123abcd"}
        bigsearch.create_store(tmp_path / "s.zarr", np.zeros((3, 2), np.float32))
        for n in names.values():
            (tmp_path / n).mkdir()
        bigsearch.create_store(tmp_path / "s.zarr", np.ones((3, 2), np.float32), overwrite=True)
        left = {p.name for p in tmp_path.iterdir()}
        assert left == {"s.zarr", names["live"], names["other_host"], names["other_store"]}
    finally:
        live.kill()
        live.wait()


# -- chunk maps held across passes (storage/base.py, hold_maps) --------------------------
def maps_of(path):
    """How many mappings of files at or under ``path`` this process has now (/proc/self/maps)."""
    root = str(Path(path).resolve())
    with open("/proc/self/maps") as fh:
        files = [line.split(maxsplit=5)[5].strip() for line in fh if len(line.split(maxsplit=5)) == 6]
    return sum(f == root or f.startswith(root + os.sep) for f in files)


def run_held_or_not(path, method, y, hold):
    """20 queries of ``method`` over the store, maps held or not; (queries, f, maps of X's
    files left after each round, the store)."""
    store = open_store(path)
    store.hold_maps = hold
    search = {"las": bigsearch.LAS, "wnas": bigsearch.WNAS}[method](store, n_threads=4)
    search.tell(int(np.flatnonzero(y)[0]), 1)
    queries, maps = [], []
    for _ in range(20):
        queries.append(search.ask())
        search.tell(queries[-1], int(y[queries[-1]]))
        maps.append(maps_of(path))
    f = np.array(search.f)
    search.close()
    return queries, f, maps, store


@pytest.mark.parametrize("method", ["las", "wnas"])
@pytest.mark.parametrize("kind", KINDS)
def test_maps_held_across_passes_give_the_same_queries_and_are_released_on_close(store_factory, kind, method):
    X, y = clustered_points(600, 10, prevalence=0.1, seed=4)
    path = store_factory(X, y, kind, "float32", 50)
    held = run_held_or_not(path, method, y, True)
    per_pass = run_held_or_not(path, method, y, False)
    assert held[0] == per_pass[0] and np.array_equal(held[1], per_pass[1])
    assert held[2] == [12] * 20 and per_pass[2] == [0] * 20    # one map per chunk, kept; or none
    assert maps_of(path) == 0                                 # the search's close released them
    store = held[3]
    read_all(store)
    assert maps_of(path) == 12 and len(store._held) == 12
    copy = pickle.loads(pickle.dumps(store))                  # a dask worker's copy: no maps of its own yet
    assert copy.hold_maps and copy._held == {} and np.array_equal(read_all(copy), read_all(store))
    copy.close()
    store.close()
    assert maps_of(path) == 0


def test_threads_reading_one_chunk_keep_one_map(store_factory):
    X = np.random.default_rng(5).random((300, 8)).astype(np.float32)
    path = store_factory(X, None, "zarr", "float32", 30)
    store = open_store(path)
    assert store.hold_maps

    def read(j):
        with store.chunk(j) as x:
            return float(np.asarray(x, np.float64).sum())
    with ThreadPoolExecutor(8) as pool:
        sums = list(pool.map(read, [0] * 64 + list(range(10)) * 4))
    assert sums[:64] == [sums[0]] * 64 and sums[0] == float(X[:30].astype(np.float64).sum())
    assert maps_of(path) == 10
    store.close()
    assert maps_of(path) == 0


def test_a_store_larger_than_half_the_memory_maps_each_pass_anew(store_factory, monkeypatch):
    X = np.random.default_rng(6).random((64, 4)).astype(np.float32)
    path = store_factory(X, None, "hdf5", "float32", 8)
    monkeypatch.setenv("BIGSEARCH_MEMORY_BYTES", str(2 * X.nbytes - 1))
    store = open_store(path)
    np.testing.assert_array_equal(read_all(store), X)
    assert not store.hold_maps and maps_of(path) == 0
    monkeypatch.setenv("BIGSEARCH_MEMORY_BYTES", str(2 * X.nbytes))
    store = open_store(path)
    np.testing.assert_array_equal(read_all(store), X)
    assert store.hold_maps and maps_of(path) == 8
    store.close()


def test_a_store_of_more_chunks_than_maps_to_spare_maps_each_pass_anew(store_factory, monkeypatch):
    """Linux limits the maps of a process (vm.max_map_count): a store of many chunks holds none."""
    from bigsearch.storage import base

    X = np.random.default_rng(7).random((64, 4)).astype(np.float32)
    path = store_factory(X, None, "zarr", "float32", 8)
    monkeypatch.setattr(base, "MAX_HELD_MAPS", 7)
    store = open_store(path)
    np.testing.assert_array_equal(read_all(store), X)
    assert not store.hold_maps and maps_of(path) == 0


@pytest.mark.parametrize("kind", KINDS)
def test_a_store_of_more_chunks_than_files_to_spare_runs_under_ulimit_n(store_factory, tmp_path, kind):
    """Each held map holds a file: a run over a store of 600 chunks, under `ulimit -n 256`
    (macOS's default), maps each chunk in each pass instead of failing with "Too many open
    files", and asks what it asks without the limit."""
    X, y = clustered_points(1200, 4, prevalence=0.05, seed=5)
    path = store_factory(X, y, kind, "float32", 2)

    def run(out, limit=None):
        fewer = (lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))) if limit else None
        done = subprocess.run([sys.executable, "-m", "bigsearch", "run", str(path), "--budget", "8", "--no-plots",
                               "--out", str(out)], capture_output=True, text=True, preexec_fn=fewer, timeout=300)
        assert done.returncode == 0, done.stderr
        return [(r["init"], r["queries"]) for r in json.loads((out / "results.json").read_text())["runs"]]

    limited, free = run(tmp_path / "limited", 256), run(tmp_path / "free")
    assert limited == free and len(free[0][1]) == 8


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("encoding, given, block", [("float32", np.float64, 3), ("binary", np.float64, 3),
                                                    ("float32", np.float32, 3), ("float32", np.float32, 12)])
def test_blocks_across_chunk_boundaries_are_written_in_order(tmp_path, kind, encoding, given, block):
    """Blocks of 3 (or 12) rows into chunks of 5: pending blocks are joined in the two
    buffers the writer reuses in turn, and the rows left over after each chunk (views of
    a buffer, or of the block itself: float32 rows are held as given) are carried to the
    next one intact."""
    from bigsearch.storage import StoreWriter

    rng = np.random.default_rng(3)
    X = ((rng.random((31, 10)) < 0.5) * 0.25).astype(given)
    path = tmp_path / ("s.zarr" if kind == "zarr" else "s.h5")
    with StoreWriter(path, 10, chunk_rows=5, kind=kind, labels=True, encoding=encoding) as w:
        for a in range(0, len(X), block):
            w.append(X[a : a + block].copy(), np.arange(a, min(a + block, len(X))) % 2)
    with open_store(path) as store:
        np.testing.assert_array_equal(store.read_rows(np.arange(store.n)), X)
        np.testing.assert_array_equal(store.labels(), np.arange(len(X)) % 2)


@pytest.mark.parametrize("kind", KINDS)
def test_arrays_of_one_entry_per_row_are_what_was_appended(tmp_path, kind):
    """add_rows_array's arrays (the records, the pixels) hold what was appended, in order,
    whatever the pieces' sizes against the chunk (they are written a whole chunk at a time,
    the rest at close)."""
    from bigsearch.storage.writer import StoreWriter

    sizes = [3, 37, 1, 24, 0, 9, 26]  # chunk 16: pieces inside, across and over chunk boundaries
    texts = np.array([f'{{"row": {i}}}' for i in range(sum(sizes))], dtype=object)
    pixels = np.arange(sum(sizes) * 2, dtype=np.uint8).reshape(-1, 2)
    path = tmp_path / f"s.{'h5' if kind == 'hdf5' else 'zarr'}"
    with StoreWriter(path, 2, kind=kind) as w:
        records, image = w.add_rows_array("records", (), str, 16), w.add_rows_array("pixels", (2,), np.uint8, 16)
        a = 0
        for size in sizes:
            if size:
                w.append(np.ones((size, 2)), None, None)
            records.append(texts[a : a + size])
            image.append(pixels[a : a + size])
            a += size
    with open_store(path) as s:
        got = [t.decode() if isinstance(t, bytes) else str(t) for t in s.read_per_row("records")]
        assert got == list(texts)
        assert np.array_equal(s.read_per_row("pixels"), pixels)
