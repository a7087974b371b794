"""Kills during overwrites: `ingest --overwrite` and `run --overwrite` are SIGKILLed at
spread-out moments; after every kill the old copy or the new one is in place, whole, and
the next command finishes the job. A writer killed between the two renames of the
fallback replacement is repaired, never deleted as a leftover.

KILLS gives the number of kills per test (docs/reliability.md reports the counts).
"""

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import bigsearch
from bigsearch.errors import StoreExistsError
from bigsearch.storage.atomic import _HOST, temp_sibling
from bigsearch.storage.writer import StoreWriter
from bigsearch.testing import clustered_points

from conftest import run_cli

KILLS = 6          # per ingest test; the run test uses RUN_KILLS
RUN_KILLS = 4


def start(*args, cwd):
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    return subprocess.Popen([sys.executable, "-m", "bigsearch", *map(str, args)], cwd=cwd, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def kill_after(proc, seconds):
    """SIGKILL ``proc`` after ``seconds`` (or let it finish first); True when killed."""
    try:
        proc.wait(timeout=seconds)
        return False
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        return True


def dead_pid():
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def store_rows(path):
    with bigsearch.open_store(path) as s:
        for j in range(s.n_chunks):          # every chunk readable
            with s.chunk(j) as x:
                assert np.isfinite(x).all()
        return s.n


def test_ingest_overwrite_killed_leaves_the_old_or_the_new_store(tmp_path):
    rng = np.random.default_rng(0)
    rows = "\n".join(",".join(f"{v:.6f}" for v in r) for r in rng.normal(size=(120_000, 12)))
    (tmp_path / "new.csv").write_text("\n".join(f"f{j}" for j in range(12)).replace("\n", ",") + "\n" + rows + "\n")
    old = bigsearch.create_store(tmp_path / "out.zarr", rng.normal(size=(77, 12)), chunk_rows=10)
    t0 = time.perf_counter()
    done = run_cli("ingest", "new.csv", "probe.zarr", "--chunk-rows", 5000, "-q", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    whole = time.perf_counter() - t0
    seen, killed = set(), 0
    for k in range(KILLS):
        proc = start("ingest", "new.csv", "out.zarr", "--overwrite", "--chunk-rows", 5000, "-q", cwd=tmp_path)
        killed += kill_after(proc, whole * (0.1 + 0.7 * k / KILLS))
        n = store_rows(old)               # there, whole, old or new
        assert n in (77, 120_000)
        seen.add(n)
        if n == 120_000:                  # the new one landed: start again from the old
            bigsearch.create_store(old, rng.normal(size=(77, 12)), chunk_rows=10, overwrite=True)
    assert killed >= KILLS // 2 and 77 in seen
    done = run_cli("ingest", "new.csv", "out.zarr", "--overwrite", "--chunk-rows", 5000, "-q", cwd=tmp_path)
    assert done.returncode == 0 and store_rows(old) == 120_000
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".out.zarr")]   # leftovers removed


def test_a_store_left_between_the_two_renames_is_restored(tmp_path):
    X = np.random.default_rng(1).normal(size=(30, 3))
    path = bigsearch.create_store(tmp_path / "s.zarr", X, chunk_rows=7)
    aside = tmp_path / f".s.zarr.old-{_HOST}-{dead_pid()}-abcdef12"
    os.rename(path, aside)                # what a writer killed between the renames leaves
    with pytest.raises(StoreExistsError):
        StoreWriter(path, 3)              # not overwriting: the old store is back, and kept
    assert store_rows(path) == 30 and not aside.exists()
    os.rename(path, aside)
    bigsearch.create_store(path, X[:10], chunk_rows=7, overwrite=True)
    assert store_rows(path) == 10 and not aside.exists()


def test_a_live_writers_old_copy_is_left_alone(tmp_path):
    X = np.random.default_rng(1).normal(size=(30, 3))
    path = bigsearch.create_store(tmp_path / "s.zarr", X, chunk_rows=7)
    aside = temp_sibling(path, "old")     # this process: alive
    os.rename(path, aside)
    bigsearch.create_store(path, X[:10], chunk_rows=7)
    assert aside.exists() and store_rows(aside) == 30


def test_run_overwrite_killed_leaves_one_experiment(tmp_path):
    X, y = clustered_points(400, 6, prevalence=0.1, seed=3, spread=0.8)
    store = bigsearch.create_store(tmp_path / "s.zarr", X, y, chunk_rows=50)
    old = ["run", store, "--budget", 4, "--out", "runs", "-q", "--no-plots"]   # (figures: 1 s a command)
    new = ["run", store, "--budget", 40, "--method", "las,wnas", "--runs", 2, "--out", "runs", "-q", "--no-plots"]
    assert run_cli(*old, cwd=tmp_path).returncode == 0
    t0 = time.perf_counter()
    assert run_cli(*new, "--out", "probe", cwd=tmp_path).returncode == 0
    whole = time.perf_counter() - t0
    budgets, killed = set(), 0
    for k in range(RUN_KILLS):
        proc = start(*new, "--overwrite", cwd=tmp_path)
        killed += kill_after(proc, whole * (0.1 + 0.6 * k / RUN_KILLS))
        header = json.loads((tmp_path / "runs" / "runs.jsonl").read_text().splitlines()[0])
        budget = header["experiment"]["budget"]
        budgets.add(budget)
        assert budget in (4, 40)
        cmd = old if budget == 4 else new          # the experiment in place resumes with its command
        done = run_cli(*cmd, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        results = json.loads((tmp_path / "runs" / "results.json").read_text())
        assert results["budget"] == budget
        if budget == 40:
            assert run_cli(*old, "--overwrite", cwd=tmp_path).returncode == 0
    assert killed >= RUN_KILLS // 2 and 4 in budgets      # (a loaded machine may finish some first)
