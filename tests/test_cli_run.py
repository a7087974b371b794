"""`bigsearch run`, `info` and `demo` through the real command in a subprocess."""

import json

import numpy as np

import bigsearch
from bigsearch.testing import clustered_points

from conftest import run_cli, run_on_a_terminal


def test_run_writes_the_documented_record(tmp_path):
    X, y = clustered_points(1000, 16, prevalence=0.02, seed=5)    # (ASG, dense: O(n^2) a query)
    store = bigsearch.create_store(tmp_path / "s.h5", X, y, chunk_rows=170)
    out = tmp_path / "out"
    res = run_cli("run", store, "--method", "las,wnas,asg,random", "--budget", 25, "--seed", 3,
                  "--alpha", 1e-3, "--out", out)
    assert res.returncode == 0, res.stderr
    record = json.loads((out / "results.json").read_text())
    assert record["n"] == 1000 and record["budget"] == 25
    runs = {r["method"]: r for r in record["runs"]}
    assert set(runs) == {"las", "wnas", "asg", "random"}
    for r in runs.values():
        assert r["seed"] == 3 and len(r["queries"]) == 25 and len(r["hits"]) == 25
        assert r["init"] == runs["las"]["init"] and y[r["init"][0][0]] == 1
        for (i, label), h0, h1 in zip(r["queries"], [0] + r["hits"], r["hits"]):
            assert label == y[i] and h1 - h0 == label
        assert len({i for i, _ in r["queries"]} | {r["init"][0][0]}) == 26
        assert r["timings"]["init_seconds"] >= 0 and len(r["timings"]["iteration_seconds"]) == 24
    assert runs["las"]["params"]["alpha"] == 1e-3 and runs["las"]["params"]["w0"] == 1 / 1000
    assert runs["las"]["queries"] == runs["asg"]["queries"]       # ASG and LAS agree
    assert runs["las"]["hits"][-1] > runs["random"]["hits"][-1]
    # the same command with the same seed gives the same queries
    again = run_cli("run", store, "--method", "las", "--budget", 25, "--seed", 3, "--alpha", 1e-3,
                    "--out", tmp_path / "again", "--no-plots")
    assert again.returncode == 0
    assert json.loads((tmp_path / "again" / "results.json").read_text())["runs"][0]["queries"] == \
        runs["las"]["queries"]
    # an existing results.json is kept unless --overwrite
    res = run_cli("run", store, "--budget", 2, "--out", out)
    assert res.returncode == 2 and "already exists" in res.stderr


def test_run_from_given_indices(tmp_path):
    X, y = clustered_points(500, 8, prevalence=0.1, seed=6)
    store = bigsearch.create_store(tmp_path / "s.zarr", X, y)
    pos, neg = int(np.flatnonzero(y)[0]), int(np.flatnonzero(y == 0)[0])
    res = run_cli("run", store, "--budget", 5, "--init-index", f"{pos},{neg}", "--out", tmp_path / "o", "-q",
                  "--no-plots")
    assert res.returncode == 0, res.stderr
    r = json.loads((tmp_path / "o" / "results.json").read_text())["runs"][0]
    assert r["init"] == [[pos, 1], [neg, 0]]


def test_info_and_demo(tmp_path):
    res, terminal = run_on_a_terminal("demo", "--dir", tmp_path, "--n", 20000, "--budget", 30)
    assert res.returncode == 0, terminal
    assert "writing" in terminal and "20000/20000" in terminal      # a bar while the store is written
    lines = res.stdout.strip().splitlines()
    assert lines[0].split() == ["method", "hits", "queries", "init", "s", "ms/iter", "compile", "s"]
    hits = {line.split()[0]: int(line.split()[1]) for line in lines[1:]}
    assert hits["las"] > hits["random"] and hits["wnas"] > hits["random"]
    res = run_cli("info", tmp_path / "demo-20000.zarr", "--json")
    info = json.loads(res.stdout)
    assert info["n"] == 20000 and info["r"] == 32 and info["fast_path"] and info["labels"]["1"] > 0
    assert "20,000 points x 32 features" in run_cli("info", tmp_path / "demo-20000.zarr").stdout


def few_distinct_points(tmp_path, n=1642, distinct=300):
    """A store of n rows with only ``distinct`` distinct points (repeated rows, as binned
    data has): k-means finds no more than ``distinct`` anchors in it."""
    X, y = clustered_points(distinct, 8, prevalence=0.05, seed=2)
    rows = np.concatenate([np.arange(distinct), np.random.default_rng(0).integers(distinct, size=n - distinct)])
    return bigsearch.create_store(tmp_path / "few.zarr", X[rows], y[rows], chunk_rows=400)


def test_the_readme_command_runs_agr_on_a_small_store(tmp_path):
    """AGR's anchors come from the store's size by default (one per 10 points up to 500):
    the README's command on 1,642 rows of 300 distinct points used to ask for 500."""
    store = few_distinct_points(tmp_path)
    res = run_cli("run", store, "--method", "las,wnas,agr,random", "--budget", 5, "--seed", 0, "--out",
                  tmp_path / "o", "-q")
    assert res.returncode == 0, res.stderr
    runs = {r["method"]: r for r in json.loads((tmp_path / "o" / "results.json").read_text())["runs"]}
    assert runs["agr"]["params"]["anchors"] == 164 and len(runs["agr"]["queries"]) == 5


def test_options_are_checked_for_every_method_before_anything_is_written(tmp_path):
    """A bad option of the last method fails before the first run, naming its flag."""
    store = few_distinct_points(tmp_path)
    out = tmp_path / "o"
    for flags, error in ((["--agr-anchors", 2000], "Error: AGR needs 1 <= --agr-anchors <= n = 1,642 (the points of "
                                                   "the store), got --agr-anchors=2000; give fewer\n"),
                         (["--agr-anchors", 2, "--agr-neighbors", 3], "Error: AGR needs 1 <= --agr-neighbors <= "
                          "--agr-anchors, got --agr-neighbors=3 and --agr-anchors=2\n"),
                         (["--batch-size", 4, "--fantasy", 0.5, "--prune"], "Error: fantasized batches need every "
                          "f after each pass: use --prune or --fantasy, not both\n")):
        res = run_cli("run", store, "--method", "las,wnas,agr", "--budget", 5, "--out", out, *flags)
        assert res.returncode == 2 and res.stderr == error
        assert not out.exists()


def test_a_failed_experiment_does_not_block_the_corrected_command(tmp_path):
    """AGR fails on the data (more anchors than distinct points) after LAS and WNAS of run 0
    are saved: the message names --agr-anchors, and the corrected command continues the
    experiment without --overwrite, keeping the runs already done."""
    store = few_distinct_points(tmp_path)
    out = tmp_path / "o"
    command = ["run", store, "--method", "las,wnas,agr,random", "--budget", 5, "--out", out, "-q", "--no-plots"]
    res = run_cli(*command, "--agr-anchors", 400)
    assert res.returncode == 2 and res.stderr == ("Error: AGR: --agr-anchors=400 is more than the 300 distinct "
                                                  "points of a sample of 1,642 rows of the store; give "
                                                  "--agr-anchors=300 or fewer\n"), res.stderr
    journal = (out / "runs.jsonl").read_text().splitlines()
    assert [json.loads(line)["method"] for line in journal[1:]] == ["las", "wnas"]
    res = run_cli(*command, "--agr-anchors", 300)
    assert res.returncode == 0, res.stderr
    runs = json.loads((out / "results.json").read_text())["runs"]
    assert [r["method"] for r in runs] == ["las", "wnas", "agr", "random"] and runs[2]["params"]["anchors"] == 300
    assert (out / "runs.jsonl").read_text().splitlines()[1:3] == journal[1:]      # LAS and WNAS not rerun
    # a changed option of a method with finished runs is still another experiment
    res = run_cli(*command, "--agr-anchors", 300, "--alpha", 0.1)
    assert res.returncode == 2 and "(options.las.alpha 0.0 there, 0.1 here)" in res.stderr
