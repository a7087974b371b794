"""Hardening (issue 13) beyond the bad-input table: results that must be true, not only
refusals (honest counts, correct normalization, a damaged cache recomputed), sessions under
a removed lock or a forged checkpoint, escaped output, and overwrites that keep the old
copy until the new one is whole."""

import io
import json
import os
from pathlib import Path

import numpy as np
import pytest

import bigsearch
from bigsearch.engine.core.registry import plan_methods
from bigsearch.errors import ParameterError, SessionCorruptError
from bigsearch.session.files import read_sealed_json, sealed_json
from bigsearch.testing import clustered_points

from conftest import run_cli


@pytest.fixture
def store(tmp_path):
    X, y = clustered_points(60, 5, prevalence=0.2, seed=1, spread=0.8)
    return bigsearch.create_store(tmp_path / "s.zarr", X, y, chunk_rows=7)


# -- results that must be true ------------------------------------------------------------
@pytest.mark.parametrize("method", ["las", "wnas", "agr"])
def test_top_zero_is_empty_and_negative_is_refused(store, method):
    (planned,) = plan_methods([method], {"anchors": 5})
    search = planned.create(store)
    search.tell([0, 1], [1, 0])
    indices, scores = search.top(0)
    assert indices.shape == (0,) and scores.shape == (0,)
    for k in (-1, 1.5, True):
        with pytest.raises(ParameterError, match="top"):
            search.top(k)
    assert len(search.top(3)[0]) == 3


def test_normalize_keeps_rows_of_huge_and_tiny_values(tmp_path):
    (tmp_path / "in.csv").write_text("a,b\n1e200,1e200\n3e-200,4e-200\n3,4\n")
    done = run_cli("ingest", tmp_path / "in.csv", tmp_path / "o.zarr", "--normalize", "--dtype", "float64")
    assert done.returncode == 0, done.stderr
    with bigsearch.open_store(tmp_path / "o.zarr") as s:
        X = s.read_rows(np.arange(3))
    np.testing.assert_allclose(X, [[2 ** -0.5, 2 ** -0.5], [0.6, 0.8], [0.6, 0.8]], rtol=1e-12)


def test_a_damaged_anchor_cache_is_recomputed(store, tmp_path):
    clean = bigsearch.simulate(store, "agr", 5, anchors=6)
    cache = list((tmp_path / ".bigsearch-cache").glob("*.npz"))
    assert len(cache) == 1
    for damage in (b"not a zip file", cache[0].read_bytes()[:100]):
        cache[0].write_bytes(damage)
        with pytest.warns(RuntimeWarning, match="damaged AGR anchor cache"):
            again = bigsearch.simulate(store, "agr", 5, anchors=6)
        assert again["queries"] == clean["queries"]
    bad = io.BytesIO()
    np.savez(bad, anchors=np.full((6, 5), np.nan))          # readable, but not anchors
    cache[0].write_bytes(bad.getvalue())
    with pytest.warns(RuntimeWarning, match="damaged AGR anchor cache"):
        assert bigsearch.simulate(store, "agr", 5, anchors=6)["queries"] == clean["queries"]


# -- sessions -------------------------------------------------------------------------------
@pytest.fixture
def session_dir(tmp_path):
    X, y = clustered_points(60, 5, prevalence=0.2, seed=1, spread=0.8)
    ids = np.array([f"p{i}" for i in range(60)], dtype=object)
    ids[7] = "evil\x1b[2J\x1b]0;owned\x07"
    store = bigsearch.create_store(tmp_path / "s.zarr", X, y, ids=ids, chunk_rows=7)
    with bigsearch.Session.create(store, tmp_path / "sess", pi=0.2, checkpoint_every=1) as s:
        s.tell([1, 2], [1, 0])
    return tmp_path / "sess"


def test_a_removed_lock_file_does_not_let_a_second_writer_in(session_dir):
    with bigsearch.Session.open(session_dir) as writer:
        os.unlink(session_dir / "lock")
        second = run_cli("session", "label", session_dir, "3", "1")
        assert second.returncode == 2 and "in use" in second.stderr
        writer.tell(4, 0)
    after = run_cli("session", "label", session_dir, "5", "1")
    assert after.returncode == 0, after.stderr
    with bigsearch.Session.open(session_dir, readonly=True) as s:
        assert s.history == [(1, 1), (2, 0), (4, 0), (5, 1)]


def test_a_checkpoint_naming_a_file_outside_its_directory_is_not_read(session_dir):
    """A forged manifest (its seal recomputed) points an array at ../../f.npy; the
    checkpoint is treated as damaged and the state replayed from the journal."""
    ckpt = sorted((session_dir / "checkpoints").iterdir())[-1]
    body = read_sealed_json(ckpt / "manifest.json")
    name = sorted(body["arrays"])[0]
    outside = session_dir.parent / f"{name}.npy"
    os.replace(ckpt / body["arrays"][name]["file"], outside)
    body["arrays"][name]["file"] = f"../../{name}.npy"
    (ckpt / "manifest.json").write_bytes(sealed_json(body))
    with pytest.raises(SessionCorruptError, match="only NAME.npy files of its own directory"):
        with bigsearch.Session.open(session_dir, readonly=True) as s:
            s.search
    with bigsearch.Session.rebuild(session_dir) as s:          # the journal still has every label
        assert s.history == [(1, 1), (2, 0)]


def test_ids_are_printed_with_control_characters_escaped(session_dir):
    done = run_cli("session", "next", session_dir, "-k", "60")
    assert done.returncode == 0, done.stderr
    assert "\x1b" not in done.stdout and "\x07" not in done.stdout
    assert "evil\\x1b[2J\\x1b]0;owned\\x07" in done.stdout


def test_export_writes_a_new_file_and_refuses_an_existing_one(session_dir, tmp_path):
    journal = (session_dir / "journal.jsonl").read_bytes()
    done = run_cli("session", "export", session_dir, "--csv", tmp_path / "labels.csv")
    assert done.returncode == 0 and (tmp_path / "labels.csv").read_text().startswith("index,id,label")
    again = run_cli("session", "export", session_dir, "--csv", session_dir / "journal.jsonl")
    assert again.returncode == 2 and "already exists" in again.stderr
    assert (session_dir / "journal.jsonl").read_bytes() == journal
    assert not [p for p in session_dir.iterdir() if p.name.startswith(".")]     # no temporary left


# -- experiments ----------------------------------------------------------------------------
def test_overwrite_replaces_the_results_and_keeps_other_files(store, tmp_path):
    out = tmp_path / "runs"
    assert run_cli("run", store, "--budget", 3, "--out", out, "-q", "--no-plots").returncode == 0
    (out / "notes.txt").write_text("mine")
    done = run_cli("run", store, "--budget", 5, "--out", out, "-q", "--overwrite", "--no-plots")
    assert done.returncode == 0, done.stderr
    results = json.loads((out / "results.json").read_text())
    assert results["budget"] == 5 and len(results["runs"][0]["queries"]) == 5
    assert (out / "notes.txt").read_text() == "mine"
    resumed = run_cli("run", store, "--budget", 5, "--out", out, "-q", "--runs", 2, "--no-plots")  # the new one goes on
    assert resumed.returncode == 0, resumed.stderr


def test_the_labels_are_part_of_an_experiment(store, tmp_path):
    out = tmp_path / "runs"
    assert run_cli("run", store, "--budget", 3, "--out", out, "-q", "--no-plots").returncode == 0
    X, y = clustered_points(60, 5, prevalence=0.2, seed=1, spread=0.8)
    y = y.copy()
    y[:10] = 1 - y[:10]
    bigsearch.create_store(store, X, y, chunk_rows=7, overwrite=True)
    done = run_cli("run", store, "--budget", 3, "--out", out, "-q", "--runs", 2)
    assert done.returncode == 2 and "labels" in done.stderr


# -- stores: fsync before publication -----------------------------------------------------
@pytest.mark.parametrize("kind", ["zarr", "hdf5"])
def test_every_file_of_a_store_is_fsynced_before_it_is_published(tmp_path, monkeypatch, kind):
    synced, published = set(), []
    real_fsync, real_rename, real_replace = os.fsync, os.rename, os.replace

    def fsync(fd):
        synced.add(os.path.realpath(f"/proc/self/fd/{fd}"))
        return real_fsync(fd)

    def rename(src, dst, *args, **kwargs):
        if Path(dst).name.startswith("out"):
            published.append(set(_files(src)) - synced)
        return real_rename(src, dst, *args, **kwargs)

    def replace(src, dst, *args, **kwargs):
        if Path(dst).name.startswith("out"):
            published.append(set(_files(src)) - synced)
        return real_replace(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "rename", rename)
    monkeypatch.setattr(os, "replace", replace)
    X = np.random.default_rng(0).normal(size=(50, 4))
    bigsearch.create_store(tmp_path / ("out.zarr" if kind == "zarr" else "out.h5"), X, chunk_rows=7)
    assert published and published[-1] == set(), f"published without fsync: {sorted(published[-1])[:5]}"


def _files(root):
    root = os.path.realpath(root)
    if os.path.isfile(root):
        return [root]
    out = [root]
    for d, _, files in os.walk(root):
        out.append(d)
        out += [os.path.join(d, f) for f in files]
    return out


# -- writes that fail: a file size limit, a full disk ------------------------------------------
ADULT_300 = ["--label-column", "14", "--positive", ">50K", "--bins", "5"]


def _fails_cleanly(done, out):
    assert done.returncode == 2, (done.returncode, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"Error: {out}: writing the store failed"), done.stderr
    assert os.listdir(out.parent) == [], "a temporary was left behind"
    return lines[0]


@pytest.mark.parametrize("name", ["a.h5", "a.zarr"])
def test_a_write_past_the_file_size_limit_ends_in_one_line(tmp_path, name):
    """`ulimit -f`: HDF5 crashed (SIGSEGV, exit 139) leaving its temporary; Zarr said only
    "File too large"."""
    import resource
    import subprocess
    import sys

    from conftest import FIXTURES

    out = tmp_path / "o" / name
    out.parent.mkdir()
    limit = 40 * 1024     # bytes: the store needs about 120 KiB

    def limit_file_size():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    done = subprocess.run([sys.executable, "-m", "bigsearch", "ingest", FIXTURES / "adult_head300.data", out,
                           *ADULT_300], capture_output=True, text=True, timeout=300, preexec_fn=limit_file_size)
    message = _fails_cleanly(done, out)
    assert "(File too large)" in message and "raise the limit" in message and "ulimit -f" in message


@pytest.mark.parametrize("name", ["a.h5", "a.zarr"])
def test_a_full_disk_ends_in_one_line(tmp_path, name):
    """ENOSPC, on a small tmpfs mounted in a user and mount namespace of its own: large enough for
    the check of the space free before writing (about 116 KiB of X), too small for the store."""
    import shutil
    import subprocess
    import sys

    from conftest import FIXTURES

    if shutil.which("unshare") is None or subprocess.run(["unshare", "-Urm", "true"]).returncode:
        pytest.skip("needs unshare -Urm (user and mount namespaces) to mount a small tmpfs")
    disk = tmp_path / "disk"
    disk.mkdir()
    out = disk / "o" / name
    script = (f"mount -t tmpfs -o size=136k tmpfs {disk} && mkdir {out.parent} && "
              f"{sys.executable} -m bigsearch ingest {FIXTURES / 'adult_head300.data'} {out} {' '.join(ADULT_300)}; "
              f"status=$?; ls -A {out.parent} >&2; exit $status")
    done = subprocess.run(["unshare", "-Urm", "sh", "-c", script.replace(">50K", "'>50K'")], capture_output=True,
                          text=True, timeout=300, env={**os.environ, "PYTHONPATH": os.getcwd()})
    assert done.returncode == 2, (done.returncode, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, f"one line, and nothing left in the output directory: {done.stderr}"
    assert lines[0].startswith(f"Error: {out}: writing the store failed (No space left on device); "
                               "the disk is full"), lines


def test_an_io_error_on_the_store_is_named_and_one_on_another_file_is_not():
    """EIO: the translation alone (no device fails on demand here); EFBIG and ENOSPC run above."""
    import errno

    from bigsearch.storage.writer import write_failure

    ours = OSError(errno.EIO, "Input/output error", "/d/.a.zarr.partial-x/X/c/0/0")
    assert "check the disk" in str(write_failure(Path("/d/a.zarr"), Path("/d/.a.zarr.partial-x"), ours))
    other = OSError(errno.EIO, "Input/output error", "/d/input.csv")
    assert write_failure(Path("/d/a.zarr"), Path("/d/.a.zarr.partial-x"), other) is None
    hdf5 = RuntimeError("Can't decrement id ref count (file write failed: ..., errno = 28, error message = 'x')")
    assert "disk is full" in str(write_failure(Path("/d/a.h5"), Path("/d/.a.h5.partial-x"), hdf5))
