"""`bigsearch run`, `info` and `demo` through the real command in a subprocess."""

import json

import numpy as np

import bigsearch
from bigsearch.testing import clustered_points

from conftest import run_cli, run_on_a_terminal


def test_run_writes_the_documented_record(tmp_path):
    X, y = clustered_points(3000, 16, prevalence=0.02, seed=5)
    store = bigsearch.create_store(tmp_path / "s.h5", X, y, chunk_rows=500)
    out = tmp_path / "out"
    res = run_cli("run", store, "--method", "las,wnas,asg,random", "--budget", 25, "--seed", 3,
                  "--alpha", 1e-3, "--out", out)
    assert res.returncode == 0, res.stderr
    record = json.loads((out / "results.json").read_text())
    assert record["n"] == 3000 and record["budget"] == 25
    runs = {r["method"]: r for r in record["runs"]}
    assert set(runs) == {"las", "wnas", "asg", "random"}
    for r in runs.values():
        assert r["seed"] == 3 and len(r["queries"]) == 25 and len(r["hits"]) == 25
        assert r["init"] == runs["las"]["init"] and y[r["init"][0][0]] == 1
        for (i, label), h0, h1 in zip(r["queries"], [0] + r["hits"], r["hits"]):
            assert label == y[i] and h1 - h0 == label
        assert len({i for i, _ in r["queries"]} | {r["init"][0][0]}) == 26
        assert r["timings"]["init_seconds"] >= 0 and len(r["timings"]["iteration_seconds"]) == 24
    assert runs["las"]["params"]["alpha"] == 1e-3 and runs["las"]["params"]["w0"] == 1 / 3000
    assert runs["las"]["queries"] == runs["asg"]["queries"]       # ASG and LAS agree
    assert runs["las"]["hits"][-1] > runs["random"]["hits"][-1]
    # the same command with the same seed gives the same queries
    again = run_cli("run", store, "--method", "las", "--budget", 25, "--seed", 3, "--alpha", 1e-3,
                    "--out", tmp_path / "again")
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
    res = run_cli("run", store, "--budget", 5, "--init-index", f"{pos},{neg}", "--out", tmp_path / "o", "-q")
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
