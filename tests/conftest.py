"""Shared fixtures: small stores of every kind, dtype and chunking, written to disk."""

import os
import pty
import subprocess
import sys
import threading
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pytest

import bigsearch
from bigsearch import datasets
from bigsearch.storage import STORE_FORMATS, store_format
from bigsearch.testing import clustered_points

FIXTURES = Path(__file__).resolve().parent / "fixtures"
# The project's copy of the public data sets beside a worktree (as in CI): the default mirror
# of `bigsearch datasets`. A clone without it skips the tests that need whole data sets.
SHARED = Path(__file__).resolve().parents[2] / "shared" / "datasets"
if SHARED.is_dir():
    os.environ.setdefault(datasets.MIRROR_ENV, str(SHARED))
KINDS = list(STORE_FORMATS)     # every store format: tests parametrized by kind run on each
DTYPES = ["float32", "float64"]


def dataset_files(name, *files):
    """Paths of files of a public data set (bigsearch/datasets.py), fetched from the mirror
    into the cache on first use; skips the calling test when the data set cannot be had."""
    if not datasets.is_fetched(name):
        if not os.environ.get(datasets.MIRROR_ENV):
            pytest.skip(f"data set {name} is not here: run `bigsearch datasets fetch {name}` or set "
                        f"{datasets.MIRROR_ENV} to a mirror (CI: ../shared/datasets)")
        datasets.fetch(name)
    folder = datasets.path(name)
    return [folder / f for f in files]


def read_all(store):
    """Every row of X, read chunk by chunk through the store."""
    parts = []
    for j in range(store.n_chunks):
        with store.chunk(j) as x:
            parts.append(np.array(x))
    return np.concatenate(parts)


def chunkings(n):
    """Chunk sizes the engine must be exact for: one row, a size not dividing n, all rows."""
    return [1, 7, n]


@pytest.fixture(scope="session")
def small_data():
    """80 points, 6 features, ~20% positives: small enough for brute-force references."""
    X, y = clustered_points(80, 6, prevalence=0.2, seed=11, spread=0.8)
    return X, y


def tight_blocks(n, r, prevalence, seed):
    """Clustered points with rows sorted so that consecutive rows (blocks) are tight: what
    the pruned engines' bounds are tested on."""
    X, y = clustered_points(n, r, prevalence=prevalence, seed=seed, spread=0.5)
    order = np.lexsort((X[:, 1], X[:, 0]))
    return X[order], y[order]


def store_path(folder, name, kind):
    """``folder/name`` with the suffix of store format ``kind`` (.zarr, .h5, ...)."""
    return folder / f"{name}{store_format(kind).suffixes[0]}"


def write_store(tmp_path, X, y=None, kind="zarr", dtype="float32", chunk_rows=7, name="s"):
    path = store_path(tmp_path, name, kind)
    bigsearch.create_store(path, X, y, dtype=dtype, chunk_rows=chunk_rows, kind=kind)
    return path


@pytest.fixture
def store_factory(tmp_path):
    counter = iter(range(10**6))

    def make(X, y=None, kind="zarr", dtype="float32", chunk_rows=7):
        return write_store(tmp_path, X, y, kind, dtype, chunk_rows, name=f"s{next(counter)}")
    return make


@pytest.fixture
def passes(monkeypatch):
    """Every pass over X that the local backend makes from now on, as Pass records: the
    real backend, its ``map`` only recorded (counted, not timed)."""
    from bigsearch.backends.local import LocalBackend

    seen = []
    real = LocalBackend.map

    def recorded(self, step, *args):
        seen.append(Pass(str(self.store.path), step.run.__name__, rebuilds_J(step, args)))
        return real(self, step, *args)
    monkeypatch.setattr(LocalBackend, "map", recorded)
    return seen


class Pass(NamedTuple):
    store: str          # the store's path
    step: str           # the step's function
    rebuilds_J: bool    # LAS's J from K^-1: an n r^2 pass


def rebuilds_J(step, args):
    """Whether a pass is LAS's rescore with K^-1 given (J recomputed from it)."""
    from bigsearch.engine.core.steps import LAS_REFRESH, LAS_RESCORE

    return step in (LAS_RESCORE, LAS_REFRESH) and args[3] is not None


def run_queries(search, y, steps):
    """Ask and answer from the stored labels ``steps`` times; the queries in order."""
    out = []
    for _ in range(steps):
        i = search.ask()
        out.append(i)
        search.tell(i, int(y[i]))
    return out


def run_cli(*args, cwd=None, timeout=300, env=None):
    """The real `bigsearch` command in a subprocess; returns CompletedProcess. ``env``:
    variables to set (a value None removes one)."""
    env = {k: v for k, v in {**os.environ, "PYTHONWARNINGS": "ignore", **(env or {})}.items() if v is not None}
    return subprocess.run([sys.executable, "-m", "bigsearch", *map(str, args)], capture_output=True,
                          text=True, cwd=cwd, timeout=timeout, env=env)


def run_on_a_terminal(*args, cwd=None, env=None):
    """The real command with stderr a terminal (a pty), as a person runs it: returns the
    CompletedProcess (stdout captured) and what the terminal showed. ``env``: variables to set."""
    master, slave = pty.openpty()
    chunks = []

    def read():
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:
                return
            if not data:
                return
            chunks.append(data)
    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    env = {**os.environ, "PYTHONWARNINGS": "ignore", "COLUMNS": "120", **(env or {})}
    try:
        res = subprocess.run([sys.executable, "-m", "bigsearch", *map(str, args)], stdout=subprocess.PIPE,
                             stderr=slave, text=True, timeout=300, env=env, cwd=cwd)
    finally:
        os.close(slave)
        reader.join(timeout=10)
        os.close(master)
    return res, b"".join(chunks).decode(errors="replace")
