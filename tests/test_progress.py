"""Progress for the long steps, and compilation kept out of the measured times (issue 17
item 8): AGR's k-means is reported before its first query, `bigsearch run` shows it on a
terminal, the demo shows its store being written (test_cli_run.py), opening a session
shows restoring its state, and numba's compilation is timed apart
from ``init_seconds``."""

import json
import subprocess
import sys

import numpy as np
import pytest

import bigsearch
from bigsearch import simulate
from bigsearch.testing import clustered_points

from conftest import run_on_a_terminal


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    X, y = clustered_points(300, 6, prevalence=0.1, seed=5, spread=0.8)
    return bigsearch.create_store(tmp_path_factory.mktemp("progress") / "s.zarr", X, y, chunk_rows=40)


def test_agr_reports_its_kmeans_before_the_first_query(store, tmp_path, monkeypatch):
    monkeypatch.setenv("BIGSEARCH_CACHE_DIR", str(tmp_path))  # no cached anchors: k-means runs
    events = []
    simulate(
        store,
        "agr",
        3,
        anchors=5,
        kmeans_iterations=4,
        init_progress=lambda what, done, total: events.append((what, done, total)),
        progress=lambda step, hits: events.append(("query", step, 3)),
    )
    first_query = events.index(("query", 1, 3))
    kmeans = [e for e in events[:first_query] if e[0] == "k-means"]
    assert kmeans[0] == ("k-means", 0, 4) and kmeans[-1] == ("k-means", 4, 4)
    assert [d for _, d, _ in kmeans] == sorted(d for _, d, _ in kmeans) and len(kmeans) >= 3
    assert ("anchor graph", 1, 1) in events[:first_query]


def test_run_shows_the_kmeans_bar_then_the_queries(store, tmp_path):
    res, terminal = run_on_a_terminal(
        "run",
        store,
        "--method",
        "agr",
        "--agr-anchors",
        5,
        "--budget",
        4,
        "--out",
        tmp_path / "o",
        env={"BIGSEARCH_CACHE_DIR": str(tmp_path)},
    )
    assert res.returncode == 0, terminal
    assert "agr k-means" in terminal and "agr hits" in terminal
    assert terminal.index("agr k-means") < terminal.index("agr hits")


def test_compilation_is_timed_apart_from_the_initialization(store):
    # a fresh process: its first run compiles the kernels (or loads them from numba's cache)
    code = (
        "import json, sys; from bigsearch import simulate; "
        "print(json.dumps([simulate(sys.argv[1], 'las', 3, seed=s)['timings'] for s in (0, 1)]))"
    )
    res = subprocess.run([sys.executable, "-c", code, str(store)], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    first, second = json.loads(res.stdout)
    assert first["compile_seconds"] > first["init_seconds"]  # 300 points initialize in milliseconds
    assert second["compile_seconds"] < first["compile_seconds"]  # compiled once per process


def test_opening_a_session_reports_restoring_and_replaying(store, tmp_path):
    y = bigsearch.open_store(store).labels()
    directory = tmp_path / "sess"
    with bigsearch.Session.create(store, directory, pi=0.1, checkpoint_every=2) as s:
        s.tell([int(i) for i in np.flatnonzero(y)[:2]], [1, 1])  # a checkpoint after 2 labels
        s.tell(int(np.flatnonzero(y == 0)[0]), 0)
        s.tell(int(np.flatnonzero(y == 0)[1]), 0)
    events = []
    with bigsearch.Session.open(directory, readonly=True) as s:
        s.progress = lambda what, done, total: events.append((what.split(" (")[0], done, total))
        s.ask()
    restored = [e[1:] for e in events if e[0].startswith("restoring the checkpoint")]
    chunks = bigsearch.open_store(store).n_chunks  # 8: the bar moves chunk by chunk
    assert restored[0] == (0, chunks) and restored[-1] == (chunks, chunks)
    assert {done for done, _ in restored} >= set(range(chunks + 1))
    res, terminal = run_on_a_terminal("session", "next", directory)
    assert res.returncode == 0, terminal
    assert "restoring the checkpoint after label" in terminal
