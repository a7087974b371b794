"""What a practitioner meets around the edges of the CLI (issue 17): closed pipes, outputs
that cannot be, budgets larger than the data; through the real command in a subprocess."""

import csv
import json
import os
import signal
import subprocess
import sys

import numpy as np
import pytest

import bigsearch
from bigsearch import Session
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
        return subprocess.run(
            [sys.executable, "-m", "bigsearch", *map(str, args)],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=300,
            env=env,
        )
    finally:
        os.close(write_end)


def test_a_closed_pipe_ends_quietly(labeled, tmp_path):
    store, y = labeled
    directory = tmp_path / "sess"
    with Session.create(store, directory, pi=0.1) as s:  # (new and label: test_session_cli.py)
        s.tell(int(np.flatnonzero(y)[0]), 1)
    for args in (
        ["session", "status", directory],
        ["session", "next", directory, "-k", 200],
        ["session", "export", directory, "--csv", "-"],
    ):
        res = run_into_closed_pipe(*args)
        assert res.returncode in (0, 128 + signal.SIGPIPE), (args, res.returncode, res.stderr)
        # nothing about the pipe (`session next` may say how it chose its query, on stderr)
        assert not any(w in res.stderr for w in ("Error", "pipe", "Traceback")), (args, res.stderr)


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
    res = run_cli(
        "run", store, "--method", "random", "--budget", 297, "--init-negatives", 2, "--out", out, "-q", "--no-plots"
    )
    assert res.returncode == 0, res.stderr


def test_simulate_refuses_a_budget_larger_than_the_unlabeled_points_as_run_does(labeled):
    from bigsearch import simulate
    from bigsearch.errors import ParameterError

    store, y = labeled
    init = [(int(np.flatnonzero(y == 1)[0]), 1), *[(int(i), 0) for i in np.flatnonzero(y == 0)[:2]]]
    with pytest.raises(ParameterError, match="budget 298 is more than the 297 points .* at most 297"):
        simulate(store, "random", 298, init=init)
    record = simulate(store, "random", 297, init=init)
    assert len(record["queries"]) == 297 and record["hits"][-1] == int(y.sum()) - 1


def test_run_saves_ids_and_the_final_ranking(tmp_path):
    X, y = clustered_points(300, 8, prevalence=0.1, seed=4, spread=0.8)
    ids = np.array([f"rec-{i:04d}" for i in range(300)])
    store = bigsearch.create_store(tmp_path / "s.zarr", X, y, ids, chunk_rows=40)
    out = tmp_path / "o"
    res = run_cli("run", store, "--method", "las,random", "--budget", 12, "--out", out, "-q", "--no-plots")
    assert res.returncode == 0, res.stderr
    with open(out / "runs.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 24 and all(row["id"] == ids[int(row["index"])] for row in rows)
    with open(out / "ranking.csv") as fh:
        ranking = list(csv.DictReader(fh))
    assert {row["method"] for row in ranking} == {"las"}  # random has no scores to rank by
    assert [int(row["rank"]) for row in ranking] == list(range(1, 101))
    assert all(row["id"] == ids[int(row["index"])] for row in ranking)
    # the ranking is LAS's top 100 after the run's labels, as the library gives it
    las = next(r for r in json.loads((out / "results.json").read_text())["runs"] if r["method"] == "las")
    search = bigsearch.LAS(store)
    labels = las["init"] + las["queries"]
    search.tell([i for i, _ in labels], [lab for _, lab in labels])
    index, score = search.top(100)
    assert [int(row["index"]) for row in ranking] == index.tolist()
    np.testing.assert_allclose([float(row["score"]) for row in ranking], score, rtol=1e-12)
    assert not {int(row["index"]) for row in ranking} & {i for i, _ in labels}


def test_the_recall_figure_reads_in_print_and_for_everyone(labeled, tmp_path):
    pytest.importorskip("matplotlib")
    from matplotlib.colors import to_hex

    from bigsearch.experiments.plots import BAND_LABEL, OKABE_ITO, recall_figure

    store, _ = labeled
    out = tmp_path / "o"
    res = run_cli("run", store, "--method", "las,wnas,random", "--budget", 20, "--runs", 2, "--out", out, "-q")
    assert res.returncode == 0, res.stderr
    assert (out / "recall.png").read_bytes().startswith(b"\x89PNG")
    assert (out / "recall.pdf").read_bytes().startswith(b"%PDF")
    assert b"<svg" in (out / "recall.svg").read_bytes()[:1000]
    results = json.loads((out / "results.json").read_text())
    from bigsearch.experiments.reports import recall_curves
    from bigsearch.experiments.runner import recall_title

    title = recall_title(results)
    assert title == "Positives found vs queries on s (300 points, 2 runs)"
    curves = recall_curves(results["runs"], 300, 30)
    fig = recall_figure(curves, title)
    ax = fig.axes[0]
    assert ax.get_title() == title
    methods = [line for line in ax.get_lines() if line.get_label().endswith("(2 runs)")]
    assert len(methods) == 3
    assert [to_hex(line.get_color()).upper() for line in methods] == list(OKABE_ITO[:3])
    assert len({line.get_linestyle() for line in methods}) == 3 and len({line.get_marker() for line in methods}) == 3
    assert BAND_LABEL in [t.get_text() for t in ax.get_legend().get_texts()]
    assert "±1 SD" in BAND_LABEL
    # --no-plots: the finished experiment rerun leaves the figures out, the earlier ones too,
    # without importing matplotlib (here one whose import fails: the run would say so)
    fake = tmp_path / "site" / "matplotlib"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('matplotlib is not installed')\n")
    env = {"PYTHONPATH": f"{fake.parent}{os.pathsep}{os.getcwd()}"}
    res = run_cli(
        "run", store, "--method", "las,wnas,random", "--budget", 20, "--runs", 2, "--out", out, "--no-plots", env=env
    )
    assert res.returncode == 0 and "not written" not in res.stderr, res.stderr
    assert not list(out.glob("recall.*")) and (out / "results.json").is_file()
