"""What a practitioner meets around the edges of the CLI (issue 17): closed pipes, outputs
that cannot be, budgets larger than the data; through the real command in a subprocess."""

import os
import signal
import subprocess
import sys

import numpy as np
import pytest

import bigsearch
from bigsearch.testing import clustered_points

from conftest import run_cli


@pytest.fixture
def labeled(tmp_path):
    X, y = clustered_points(300, 8, prevalence=0.1, seed=4, spread=0.8)
    return bigsearch.create_store(tmp_path / "s.zarr", X, y, chunk_rows=40), y


def run_into_closed_pipe(*args):
    """The command with stdout a pipe whose reader has already gone, as `... | head` leaves
    it once head has read its lines: every write fails with EPIPE."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        env = {**os.environ, "PYTHONWARNINGS": "ignore"}
        return subprocess.run([sys.executable, "-m", "bigsearch", *map(str, args)], stdout=write_end,
                              stderr=subprocess.PIPE, text=True, timeout=300, env=env)
    finally:
        os.close(write_end)


def test_a_closed_pipe_ends_quietly(labeled, tmp_path):
    store, y = labeled
    directory = tmp_path / "sess"
    assert run_cli("session", "new", store, directory).returncode == 0
    pos = int(np.flatnonzero(y)[0])
    assert run_cli("session", "label", directory, pos, 1).returncode == 0
    for args in (["session", "status", directory], ["session", "next", directory, "-k", 200],
                 ["session", "export", directory, "--csv", "-"]):
        res = run_into_closed_pipe(*args)
        assert res.returncode in (0, 128 + signal.SIGPIPE), (args, res.returncode, res.stderr)
        assert res.stderr == "", (args, res.stderr)


def test_run_refuses_stdout_as_out(labeled, tmp_path):
    store, _ = labeled
    res = run_cli("run", store, "--budget", 3, "--out", "-", "-q", cwd=tmp_path)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert res.stderr.startswith("Error: ") and "--out" in res.stderr and len(res.stderr.splitlines()) == 1
    assert not (tmp_path / "-").exists()


def test_run_refuses_a_budget_larger_than_the_unlabeled_points(labeled, tmp_path):
    store, _ = labeled
    out = tmp_path / "o"
    # 300 points, one initial positive and two negatives: 297 are left to query
    res = run_cli("run", store, "--budget", 298, "--init-negatives", 2, "--out", out, "-q")
    assert res.returncode == 2 and res.stderr.startswith("Error: budget 298 ") and "at most 297" in res.stderr
    assert not out.exists()
    res = run_cli("run", store, "--method", "random", "--budget", 297, "--init-negatives", 2, "--out", out, "-q")
    assert res.returncode == 0, res.stderr
