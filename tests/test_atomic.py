"""storage/atomic.py and storage/journal.py: publication is all-or-nothing (also when the
writer is killed), leftovers of dead writers are removed, and journals detect damage."""

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bigsearch.storage.atomic import (
    atomic_open,
    atomic_path,
    atomic_write_bytes,
    atomic_write_json,
    remove_stale_leftovers,
    temp_sibling,
)
from bigsearch.storage.journal import JournalDamagedError, JournalWriter, encode_record, read_journal, truncate_journal

PACKAGE = Path(__file__).resolve().parents[1] / "bigsearch"
DURABLE_MODULES = {PACKAGE / "storage" / "atomic.py", PACKAGE / "storage" / "journal.py"}


def siblings(tmp_path):
    return sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("."))


def test_a_write_replaces_the_file_whole(tmp_path):
    path = tmp_path / "r.json"
    atomic_write_json(path, {"a": 1})
    atomic_write_json(path, {"a": 2})
    assert json.loads(path.read_text()) == {"a": 2}
    assert siblings(tmp_path) == []


def test_a_failed_write_leaves_the_old_file_and_nothing_else(tmp_path):
    path = tmp_path / "r.txt"
    atomic_write_bytes(path, b"old")
    with pytest.raises(RuntimeError):
        with atomic_open(path) as fh:
            fh.write("half of the new")
            raise RuntimeError("cut short")
    assert path.read_bytes() == b"old" and siblings(tmp_path) == []


def test_a_directory_tree_is_published_whole(tmp_path):
    path = tmp_path / "tree"
    with atomic_path(path) as tmp:
        (tmp / "sub").mkdir(parents=True)
        for i in range(40):  # fsync'd by threads
            (tmp / "sub" / f"{i}.bin").write_bytes(bytes([i]) * 100)
        assert not path.exists()
    assert sorted(int(p.stem) for p in (path / "sub").iterdir()) == list(range(40))
    assert siblings(tmp_path) == []


KILLED_WRITER = """
import os, signal, sys
from bigsearch.storage.atomic import atomic_open
with atomic_open(sys.argv[1], "wb") as fh:
    fh.write(b"new, never finished")
    fh.flush()
    os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_killed_writer_leaves_the_old_file_and_the_next_write_cleans_up(tmp_path):
    path = tmp_path / "r.bin"
    atomic_write_bytes(path, b"old")
    r = subprocess.run([sys.executable, "-c", KILLED_WRITER, str(path)], env={**os.environ})
    assert r.returncode == -9
    assert path.read_bytes() == b"old"
    left = siblings(tmp_path)
    assert len(left) == 1 and left[0].startswith(".r.bin.tmp-")
    assert remove_stale_leftovers(path, tags=("tmp",)) == left
    assert siblings(tmp_path) == []


def test_a_live_writers_temporary_file_is_not_removed(tmp_path):
    path = tmp_path / "r.bin"
    mine = temp_sibling(path, "tmp")
    mine.write_bytes(b"in progress")
    assert remove_stale_leftovers(path, tags=("tmp",)) == [] and mine.exists()


def test_only_the_atomic_module_renames_and_fsyncs():
    """Every atomic write in the package goes through storage/atomic.py (or the journal)."""
    calls = {"replace", "rename", "fsync"}
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        if path in DURABLE_MODULES:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in calls
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "os"
            ):
                offenders.append(f"{path.relative_to(PACKAGE)}:{node.lineno} os.{node.func.attr}")
    assert offenders == []


# Files the package writes in place, outside an atomic block, and why that is safe.
SCRATCH_WRITES = {
    "ingest/cluster_order.py": "spill files in a temporary directory beside the output",
    "kernels/__init__.py": "a stamp beside numba's cache: a torn one only drops the cache again",
    "kernels/compile_lock.py": "an empty lock file beside numba's cache, opened to lock, never written",
}


def in_place_writes(tree):
    """(line, call) of every write to a file (``open`` for writing, ``write_text``,
    ``write_bytes``, ``savefig``) not inside a ``with atomic_path/atomic_open(...)`` block."""
    found = []

    def visit(node, atomic):
        if isinstance(node, ast.With):
            atomic = atomic or any(
                ast.unparse(i.context_expr).startswith(("atomic_path", "atomic_open")) for i in node.items
            )
        if isinstance(node, ast.Call) and not atomic:
            f = node.func
            if isinstance(f, ast.Name) and f.id == "open":
                mode = (
                    node.args[1]
                    if len(node.args) > 1
                    else next((k.value for k in node.keywords if k.arg == "mode"), None)
                )
                if isinstance(mode, ast.Constant) and set(str(mode.value)) & set("wxa"):
                    found.append((node.lineno, f"open(..., {mode.value!r})"))
            elif isinstance(f, ast.Attribute) and f.attr in ("write_text", "write_bytes", "savefig"):
                found.append((node.lineno, f.attr))
        for child in ast.iter_child_nodes(node):
            visit(child, atomic)

    visit(tree, False)
    return found


def test_files_are_published_atomically():
    """Results, reports, figures, sessions: written at a temporary sibling and published by
    storage/atomic.py, so a killed writer never leaves half a file."""
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        name = str(path.relative_to(PACKAGE))
        if path in DURABLE_MODULES or name in SCRATCH_WRITES or name.startswith("testing/"):
            continue
        offenders += [f"{name}:{line} {call}" for line, call in in_place_writes(ast.parse(path.read_text()))]
    assert offenders == []
    caught = in_place_writes(
        ast.parse(
            "def f(p):\n    p.write_text('x')\n    with atomic_path(p) as t:\n        open(t, 'w')\n    open(p, 'ab')\n"
        )
    )
    assert caught == [(2, "write_text"), (5, "open(..., 'ab')")]


def test_journal_round_trip_torn_tail_and_damage(tmp_path):
    path = tmp_path / "j.jsonl"
    with JournalWriter(path) as j:
        j.append({"run": 0, "x": [1, 2]})
        j.append({"run": 1, "x": "é"})
        size = j.size
    assert read_journal(path).records == [{"run": 0, "x": [1, 2]}, {"run": 1, "x": "é"}]
    with open(path, "ab") as fh:
        fh.write(encode_record({"run": 2})[:-5])  # a write cut short
    contents = read_journal(path)
    assert len(contents.records) == 2 and contents.valid_bytes == size and contents.torn_bytes > 0
    truncate_journal(path, contents.valid_bytes)
    with JournalWriter(path) as j:
        j.append({"run": 2})
    assert [r["run"] for r in read_journal(path).records] == [0, 1, 2]
    data = bytearray(path.read_bytes())
    data[data.index(b'"x":"') + 5] ^= 0x01  # one flipped bit in line 2
    path.write_bytes(bytes(data))
    with pytest.raises(JournalDamagedError, match="line 2 is damaged"):
        read_journal(path)


def test_chunks_are_synced_behind_the_writer_and_vanishing_files_are_left_to_publish(tmp_path, monkeypatch):
    """A store writer sends its written chunks to the disk while it goes on writing (one
    thread), so that the fsync at publish finds them clean; fsync_written skips a file
    that vanishes meanwhile (an abort removing the tree)."""
    import numpy as np

    from bigsearch.storage import StoreWriter, atomic

    synced = []
    real = atomic._fsync_file

    def record(path):
        synced.append(str(path))
        real(path)

    monkeypatch.setattr(atomic, "_fsync_file", record)
    with StoreWriter(tmp_path / "s.zarr", 4, chunk_rows=10) as w:
        for a in range(5):
            w.append(np.full((10, 4), float(a)))
            w._synced.result()  # (the test waits; the writer does not)
        behind = list(synced)
    assert sum("/X/c/" in p for p in behind) >= 4  # the first chunks, synced before the store was closed
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "a").write_bytes(b"a")
    monkeypatch.setattr(atomic, "_fsync_file", lambda p: (_ for _ in ()).throw(FileNotFoundError(p)))
    atomic.fsync_written(tmp_path / "t")  # no error: publishing's fsync_tree reports them


def test_fsync_written_syncs_each_file_once_across_calls(tmp_path, monkeypatch):
    """A writer calls fsync_written after every chunk: the files it synced before are
    skipped, so each call costs the new files, not the whole tree again."""
    from bigsearch.storage import atomic

    synced = []
    real = atomic._fsync_file
    monkeypatch.setattr(atomic, "_fsync_file", lambda p: (synced.append(p), real(p)))
    (tmp_path / "a").write_bytes(b"a")
    done = set()
    atomic.fsync_written(tmp_path, done)
    (tmp_path / "b").write_bytes(b"b")
    atomic.fsync_written(tmp_path, done)
    assert sorted(os.path.basename(p) for p in synced) == ["a", "b"]
