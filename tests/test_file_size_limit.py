"""A file size limit (`ulimit -f`: RLIMIT_FSIZE) reached while a store is written ends the
write in one line, exit status 2, and leaves nothing behind, for HDF5 and Zarr, wherever
the limit falls: the first chunk, a chunk in the middle, the metadata written at close.

HDF5 crashed (SIGSEGV, exit 139, its temporary left behind) when the limit fell inside a
write of variable-length strings (the records kept beside X): the library fails inside the
write and frees what it never allocated, before any error reaches Python. The HDF5 writer
now checks every call against the limit before HDF5 sees it (storage/hdf5_store.py,
``_Room``); the tests at the end check its bounds against what HDF5 actually allocates.
"""

import errno
import os
import resource
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import bigsearch
from bigsearch.storage import hdf5_store
from bigsearch.storage.writer import StoreWriter

from conftest import QUIET_AND_TRACED

ROWS, COLUMNS, CHUNK_ROWS = 3000, 40, 30  # chunks of 30 x 40 float32: 4,800 bytes raw


def write_input(path):
    """A CSV whose stores put each limit below where it falls. Rows 0-199: float16 values
    (Zarr's zstd chunks about 2,960 bytes); 200-999: ones (21 bytes); 1000-2999: random
    floats at full precision (about 4,350 bytes, and about 1 KB of record text a row: the
    records, about 2.9 MB, are more than HDF5's metadata cache holds, so writing them at
    close pushed heap collections to the file in the middle of the write: the crash)."""
    rng = np.random.default_rng(7)
    lines = [",".join([f"n{j:02d}" for j in range(COLUMNS)] + ["label"])]
    for i in range(ROWS):
        if i < 200:
            values = [repr(float(np.float16(v))) for v in rng.random(COLUMNS)]
        elif i < 1000:
            values = ["1"] * COLUMNS
        else:
            values = [repr(float(v)) for v in rng.random(COLUMNS)]
        lines.append(",".join([*values, "yes" if rng.random() < 0.3 else "no"]))
    path.write_text("\n".join(lines) + "\n")
    return path


# Limits in bytes, from the stores' sizes (measured; the margins are hundreds of bytes at least).
# HDF5, one file that grows: y's first chunk alone is 1 MiB (LABEL_CHUNK int8), X 480,000 bytes in
# three blocks of the input, the records (about 2.9 MB) and the last metadata at close; 4.5 MB in all.
# Zarr, a file per chunk: the limit is each file's. The metadata written first is at most 700 bytes,
# X's chunks are about 2,960 (rows 0-209), 21, then 4,350 bytes from chunk 34 (rows 1020-) on (4,800
# raw), the root zarr.json with the attributes set at the end about 6,000.
LIMITS = {
    ("hdf5", "first chunk"): 256 << 10,  # the first write: X's first chunks and y's 1 MiB chunk
    ("hdf5", "middle chunk"): (1 << 20) + 400_000,  # X's second or third block
    ("hdf5", "close"): 2_500_000,  # every block of the ingest fits; the close does not
    ("zarr", "first chunk"): 2000,  # X's chunk 0
    ("zarr", "middle chunk"): 3600,  # X's chunk 34
    ("zarr", "close"): 5000,  # the root zarr.json, with the attributes of the end
}
FLAGS = ["--label-column", "label", "--positive", "yes", "--chunk-rows", str(CHUNK_ROWS)]
OPTIONS = {"hdf5": [], "zarr": ["--codec", "zstd"]}


@pytest.mark.parametrize("kind, where", list(LIMITS))
def test_a_file_size_limit_ends_the_write_in_one_line(tmp_path, kind, where):
    source = write_input(tmp_path / "in.csv")
    out = tmp_path / "o" / ("a.h5" if kind == "hdf5" else "a.zarr")
    out.parent.mkdir()
    limit = LIMITS[kind, where]

    def limit_file_size():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    command = [sys.executable, "-m", "bigsearch", "ingest", source, out, *FLAGS, *OPTIONS[kind]]
    done = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=limit_file_size,
        env={**os.environ, **QUIET_AND_TRACED},
    )
    assert done.returncode == 2, (done.returncode, done.stderr[-3000:])
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert lines[0].startswith(f"Error: {out}: writing the store failed (File too large); "), lines[0]
    assert f"the file size limit (ulimit -f {limit // 1024}: {limit:,} bytes)" in lines[0], lines[0]
    assert "raise the limit (ulimit -f unlimited)" in lines[0], lines[0]
    assert os.listdir(out.parent) == [], "a temporary was left behind"


# -- the bounds the HDF5 writer checks --------------------------------------------------------
@pytest.fixture
def allocations(monkeypatch):
    """Every check of an HDF5 call against a limit (a huge one: the checks run, and pass), as
    (file, space allocated before the call, the call's bound)."""
    monkeypatch.setattr(hdf5_store, "file_size_limit", lambda: 1 << 60)  # checked, never refused
    calls, check = [], hdf5_store._Room.check

    def spy(self, path, allocated, need):
        calls.append((str(path), allocated, need))
        return check(self, path, allocated, need)

    monkeypatch.setattr(hdf5_store._Room, "check", spy)
    return calls


def over_bound(calls, path, size):
    """The calls on ``path`` that allocated more than their bound: what a call allocated is
    the space allocated at the next check, or the file's ``size`` after close for the last."""
    mine = [(allocated, need) for p, allocated, need in calls if p == str(path)]
    ends = [allocated for allocated, _ in mine[1:]] + [size]
    return [(allocated, need, end - allocated) for (allocated, need), end in zip(mine, ends) if end - allocated > need]


def texts(rng, n, kind):
    if kind == "json":
        return np.array([str({f"c{j}": float(v) for j, v in enumerate(rng.random(20))}) for _ in range(n)], object)
    lengths = {
        "tiny": lambda: 1,
        "empty": lambda: 0,
        "mixed": lambda: int(rng.integers(0, 5000)),
        "large": lambda: int(rng.choice([10, 40_000, 70_000])),
        "halves": lambda: int(rng.choice([15_500, 16_500])),  # 31,000 or 33,000 bytes: about half a collection
    }
    return np.array(["\u00e9" * lengths[kind]() for _ in range(n)], object)  # 2 bytes each in UTF-8


CASES = {  # name: (rows, width, chunk rows, codec, ids, records, records' chunk rows)
    "floats": (3000, 64, 250, None, None, None, 0),
    "one-row chunks": (800, 8, 1, None, None, None, 0),
    "gzip": (3000, 64, 250, "gzip", None, None, 0),
    "integer ids": (3000, 16, 500, None, "int", None, 0),
    "records of json": (5000, 16, 100, None, None, "json", 4096),
    "records in small chunks": (2000, 16, 100, None, None, "json", 7),
    "ids, empty strings": (2000, 16, 500, None, "empty", None, 0),
    "ids, mixed lengths": (1500, 16, 500, None, "mixed", None, 0),
    "records, large values": (60, 16, 10, None, None, "large", 8),
    "records, just over half a collection": (60, 16, 10, None, None, "halves", 8),
}


@pytest.mark.parametrize("case", list(CASES))
def test_no_hdf5_call_allocates_more_than_its_bound(tmp_path, allocations, case):
    n, r, chunk_rows, codec, ids, records, records_chunk = CASES[case]
    rng = np.random.default_rng(1)
    X = rng.random((n, r)).astype(np.float32)
    y = (rng.random(n) < 0.3).astype(np.int8)
    id_values = None if ids is None else np.arange(n) if ids == "int" else texts(rng, n, ids)
    w = StoreWriter(
        tmp_path / "s.h5",
        r,
        chunk_rows=chunk_rows,
        labels=True,
        compressors=codec,
        ids_dtype=None if ids is None else id_values.dtype,
    )
    kept = None if records is None else w.add_rows_array("records", (), str, records_chunk)
    block = max(1, n // 7)
    for a in range(0, n, block):
        if kept is not None:
            kept.append(texts(rng, min(n, a + block) - a, records))
        w.append(X[a : a + block], y[a : a + block], None if ids is None else id_values[a : a + block])
    w.set_attrs(featurization={"names": [f"feature {i}" for i in range(3000)]}, big="x" * 50_000)
    tmp = w.tmp
    w.close()
    assert over_bound(allocations, tmp, (tmp_path / "s.h5").stat().st_size) == []
    assert len(allocations) > 3


def test_regions_written_in_any_order_stay_within_their_bounds(tmp_path, allocations):
    rng = np.random.default_rng(2)
    for name, codec in (("plain.h5", None), ("gzip.h5", "gzip")):
        X = rng.random((20_000, 32)).astype(np.float32)
        w = StoreWriter(tmp_path / name, 32, chunk_rows=700, labels=True, compressors=codec)
        edges = np.unique(np.r_[0, rng.integers(1, len(X), 40), len(X)])
        regions = list(zip(edges[:-1], edges[1:]))
        rng.shuffle(regions)
        for a, b in regions:
            w.write_at(int(a), X[a:b], np.zeros(b - a, np.int8))
        tmp = w.tmp
        w.close()
        assert over_bound(allocations, tmp, (tmp_path / name).stat().st_size) == []


def test_a_group_that_would_pass_the_limit_is_refused_before_hdf5_writes(tmp_path):
    """The summaries' group (write_group) under a real limit: refused with EFBIG before HDF5
    writes anything, the store as it was (publish_group removes its copy)."""
    import signal

    X = np.random.default_rng(3).random((500, 8))
    path = bigsearch.create_store(tmp_path / "s.h5", X)
    before = path.read_bytes()
    previous = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (len(before) + 100_000, hard))
    try:
        for write in (hdf5_store.HDF5Store.write_group, hdf5_store.HDF5Store.publish_group):
            with pytest.raises(OSError) as failed:
                write(path, "summaries", {"m": np.zeros((400, 64))}, {"n": 1})  # 204,800 bytes
            assert failed.value.errno == errno.EFBIG
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, previous)
    assert path.read_bytes() == before
    assert sorted(p.name for p in Path(tmp_path).iterdir()) == ["s.h5"]
    with bigsearch.open_store(path) as store:
        np.testing.assert_array_equal(store.read_rows(np.arange(500)), X)
