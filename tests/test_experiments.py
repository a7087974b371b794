"""Batch experiments: reproducible paired runs, resuming after an interruption, the
data behind the recall plot and the tables, batch sizes against the dense reference,
and the Table 2 (pairs) experiment."""

import contextlib
import csv
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import bigsearch
from bigsearch import simulate
from bigsearch.engine import METHODS, WNAS, MethodSpec
from bigsearch.engine.core.params import WNASOptions
from bigsearch.errors import ExperimentExistsError, LabelError, ParameterError
from bigsearch.experiments import (
    Experiment,
    pair_experiment,
    recall_curves,
    run_experiment,
    run_methods,
    run_pairs,
    summarize,
)
from bigsearch.experiments.plan import initial_labels
from bigsearch.experiments.reports import markdown_table
from bigsearch.testing import clustered_points, dense_f, dense_las_run, dense_wnas

from conftest import run_cli


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    X, y = clustered_points(3000, 12, prevalence=0.03, seed=21, spread=0.8)
    return bigsearch.create_store(tmp_path_factory.mktemp("exp") / "s.zarr", X, y, chunk_rows=400)


def queries_by_key(results):
    return {(r["method"], r["run"]): r["queries"] for r in results["runs"]}


def test_runs_are_paired_and_reproducible_from_the_seed(store, tmp_path):
    exp = Experiment(str(store), ("las", "wnas", "random"), budget=20, runs=3, seed=7, init_negatives=1)
    first, _ = run_experiment(exp, tmp_path / "a", plot=False)
    again, _ = run_experiment(exp, tmp_path / "b", plot=False)
    assert queries_by_key(first) == queries_by_key(again)
    y = bigsearch.open_store(store).labels()
    starts = {}
    for r in first["runs"]:
        assert r["seed"] == 7 + r["run"] and len(r["queries"]) == 20
        starts.setdefault(r["run"], r["init"])
        assert r["init"] == starts[r["run"]]                      # every method, the same start
        assert [y[i] for i, _ in r["init"]] == [1, 0]
    assert len({json.dumps(s) for s in starts.values()}) == 3     # runs differ by their starts
    # run r alone, from seed 7 + r, is the same run
    alone, _ = run_experiment(Experiment(str(store), ("las",), 20, 1, 9, init_negatives=1), tmp_path / "c",
                              plot=False)
    assert alone["runs"][0]["queries"] == queries_by_key(first)[("las", 2)]


def test_an_interrupted_experiment_resumes_to_the_same_results(store, tmp_path):
    exp = Experiment(str(store), ("las", "wnas"), budget=15, runs=3, seed=1)
    whole, _ = run_experiment(exp, tmp_path / "whole", plot=False)
    started = []

    def progress(method, run):              # records which runs start; Ctrl-C at the fourth
        if stop_at is not None and len(started) == stop_at:
            raise KeyboardInterrupt
        started.append((method, run))
        return contextlib.nullcontext(None)

    stop_at = 3
    with pytest.raises(KeyboardInterrupt):
        run_experiment(exp, tmp_path / "cut", progress=progress, plot=False)
    assert len((tmp_path / "cut" / "runs.jsonl").read_text().splitlines()) == 1 + 3     # the identity, 3 runs
    assert not (tmp_path / "cut" / "results.json").exists()
    started.clear()
    stop_at = None
    resumed, _ = run_experiment(exp, tmp_path / "cut", progress=progress, plot=False)
    assert started == [("wnas", 1), ("las", 2), ("wnas", 2)]     # only the unfinished runs
    assert queries_by_key(resumed) == queries_by_key(whole)
    assert resumed["summary"] == whole["summary"]


def test_the_cli_resumes_after_a_kill(store, tmp_path):
    args = ["run", store, "--method", "las,wnas", "--budget", 40, "--runs", 4, "--seed", 3, "-q", "--no-plots"]
    out = tmp_path / "killed"
    proc = subprocess.Popen([sys.executable, "-m", "bigsearch", *map(str, args), "--out", str(out)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, "PYTHONWARNINGS": "ignore"})
    journal = out / "runs.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if journal.exists() and journal.read_text().count("\n") >= 1:
            break
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    finished = journal.read_text().count("\n") - 1       # after the identity's line
    assert 1 <= finished < 8
    with open(journal, "a") as fh:                # what a kill in the middle of a write leaves
        fh.write('{"run": 3, "method": "las", "quer')
    res = run_cli(*args, "--out", out)
    assert res.returncode == 0, res.stderr
    res = run_cli(*args, "--out", tmp_path / "straight")
    assert res.returncode == 0, res.stderr
    resumed = json.loads((out / "results.json").read_text())
    straight = json.loads((tmp_path / "straight" / "results.json").read_text())
    assert queries_by_key(resumed) == queries_by_key(straight) and len(resumed["runs"]) == 8
    assert len(journal.read_text().splitlines()) == 1 + 8


def test_a_different_command_on_the_same_directory_is_refused(store, tmp_path):
    out = tmp_path / "o"
    assert run_cli("run", store, "--method", "las", "--budget", 5, "--out", out, "-q", "--no-plots").returncode == 0
    res = run_cli("run", store, "--method", "las", "--budget", 5, "--alpha", 0.01, "--out", out, "-q")
    assert res.returncode == 2 and res.stderr.count("\n") == 1
    assert "already exists for a different experiment (options.las.alpha 0.0 there, 0.01 here)" in res.stderr
    assert "pass --overwrite to replace it" in res.stderr
    # more runs and another method of the same experiment are added to it
    res = run_cli("run", store, "--method", "las,random", "--budget", 5, "--runs", 2, "--out", out, "-q", "--no-plots")
    assert res.returncode == 0, res.stderr
    assert len(json.loads((out / "results.json").read_text())["runs"]) == 4
    res = run_cli("run", store, "--method", "las", "--budget", 5, "--alpha", 0.01, "--out", out, "-q", "--overwrite",
                  "--no-plots")
    assert res.returncode == 0
    record = json.loads((out / "results.json").read_text())
    assert [r["params"]["alpha"] for r in record["runs"]] == [0.01]
    res = run_cli("run", store, "--budget", 5, "--runs", 2, "--init-index", "1,2", "--out", tmp_path / "p")
    assert res.returncode == 2 and "--init-index" in res.stderr


def test_reports_hold_the_expected_numbers(store, tmp_path):
    res = run_cli("run", store, "--method", "las,wnas,random", "--budget", 30, "--runs", 3, "--seed", 2,
                  "--out", tmp_path / "o")
    assert res.returncode == 0, res.stderr
    out = tmp_path / "o"
    record = json.loads((out / "results.json").read_text())
    for m in ("las", "wnas", "random"):
        runs = [r for r in record["runs"] if r["method"] == m]
        for t in ("15", "30"):
            found = [r["hits"][int(t) - 1] for r in runs]
            assert record["summary"][m][t] == {"mean": pytest.approx(np.mean(found)),
                                               "std": pytest.approx(np.std(found, ddof=1)),
                                               "se": pytest.approx(np.std(found, ddof=1) / np.sqrt(3)), "runs": 3}
    table = (out / "table.md").read_text()
    assert table in res.stdout
    las = record["summary"]["las"]
    assert (f"| las | {las['15']['mean']:.1f} ± {las['15']['std']:.1f} (SE {las['15']['se']:.1f}) | "
            f"{las['30']['mean']:.1f} ± ") in table
    assert "sample standard deviation (ddof=1)" in table and "standard error" in table
    with open(out / "runs.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 9 * 30
    for r in record["runs"]:
        mine = [row for row in rows if row["method"] == r["method"] and int(row["run"]) == r["run"]]
        assert [int(row["index"]) for row in mine] == [i for i, _ in r["queries"]]
        assert [int(row["hits"]) for row in mine] == r["hits"]
        seconds = [float(row["seconds"]) for row in mine]
        assert seconds == sorted(seconds) and seconds[0] > 0
    assert (out / "recall.png").stat().st_size > 0


def test_the_recall_curves_have_the_expected_data():
    init = [[0, 1], [1, 0]]
    records = [{"method": "a", "run": 0, "init": init, "hits": [1, 2, 2, 3]},
               {"method": "a", "run": 1, "init": init, "hits": [0, 1, 2, 2]},
               {"method": "b", "run": 0, "init": init, "hits": [0, 0, 1, 1]},
               {"method": "b", "run": 1, "init": init, "hits": [0, 0, 0, 1]}]
    curves = recall_curves(records, n=102, n_positive=3)         # 2 positives left among 100 points
    assert curves["queries"] == [1, 2, 3, 4]
    assert curves["methods"]["a"]["mean"] == [0.5, 1.5, 2.0, 2.5]
    assert curves["methods"]["a"]["std"] == pytest.approx([0.5**0.5, 0.5**0.5, 0.0, 0.5**0.5])   # sample SD
    assert curves["methods"]["b"]["runs"] == 2
    assert curves["ideal"] == [1, 2, 2, 2]
    assert curves["random"] == pytest.approx([0.02, 0.04, 0.06, 0.08])
    summary = summarize(records, 4)
    assert summary["a"]["2"] == {"mean": 1.5, "std": pytest.approx(0.5 ** 0.5), "se": pytest.approx(0.5),
                                 "runs": 2} and summary["b"]["4"]["mean"] == 1.0
    assert "| b | 0.0 ± 0.0 (SE 0.0) | 1.0 ± 0.0 (SE 0.0) |" in markdown_table(summary, 4)
    one = summarize(records[:1], 4)
    assert one["a"]["4"] == {"mean": 3.0, "std": None, "se": None, "runs": 1}
    assert "| a | 2.0 | 3.0 |" in markdown_table(one, 4)


def test_real_recall_curves_lie_between_random_and_ideal(store):
    y = bigsearch.open_store(store).labels()
    records = [{"run": r, **simulate(store, m, 40, seed=r)} for r in range(2) for m in ("las", "random")]
    curves = recall_curves(records, len(y), int(y.sum()))
    las = np.array(curves["methods"]["las"]["mean"])
    assert (las <= np.array(curves["ideal"])).all()
    assert las[-1] > 3 * curves["random"][-1]
    assert curves["ideal"][:5] == [1, 2, 3, 4, 5]


# -- batch size ------------------------------------------------------------------------------
def test_batch_size_one_is_the_exact_sequential_algorithm(store_factory):
    X, y = clustered_points(120, 6, prevalence=0.15, seed=9, spread=0.8)
    path = store_factory(X, y, chunk_rows=13)
    init = [(int(np.flatnonzero(y)[0]), 1)]
    pi = float(y.mean())
    record = simulate(path, "las", 25, init=init, batch_size=1, pi=pi, alpha=1e-3)
    Xs = bigsearch.open_store(path).read_rows(np.arange(len(y)))
    assert [i for i, _ in record["queries"]] == dense_las_run(Xs, y, [init[0][0]], 25, pi, alpha=1e-3)
    assert record["batch_size"] == 1 and len(record["timings"]["iteration_seconds"]) == 24


@pytest.mark.parametrize("method", ["las", "wnas"])
def test_a_batch_is_the_top_b_of_one_pass(store_factory, method):
    X, y = clustered_points(150, 6, prevalence=0.15, seed=10, spread=0.8)
    path = store_factory(X, y, chunk_rows=11)
    Xs = bigsearch.open_store(path).read_rows(np.arange(len(y)))
    init = [(int(np.flatnonzero(y)[1]), 1), (int(np.flatnonzero(y == 0)[0]), 0)]
    pi = float(y.mean())
    record = simulate(path, method, 22, init=init, batch_size=5, pi=pi)
    labels = np.full(len(y), -1)
    for i, lab in init:
        labels[i] = lab
    queries = [i for i, _ in record["queries"]]
    for start in range(0, 22, 5):
        f = dense_f(Xs, labels, pi) if method == "las" else dense_wnas(Xs, labels)
        unl = np.flatnonzero(labels < 0)
        batch = unl[np.lexsort((unl, -f[unl]))][:min(5, 22 - start)]
        assert queries[start:start + len(batch)] == batch.tolist()
        labels[batch] = y[batch]
    assert record["batch_size"] == 5 and len(record["timings"]["iteration_seconds"]) == 4


def test_batch_size_through_the_cli(store, tmp_path):
    res = run_cli("run", store, "--method", "las,random", "--budget", 30, "--batch-size", 10, "--out", tmp_path / "o",
                  "-q", "--no-plots")
    assert res.returncode == 0, res.stderr
    runs = {r["method"]: r for r in json.loads((tmp_path / "o" / "results.json").read_text())["runs"]}
    assert runs["las"]["batch_size"] == 10 and len(runs["las"]["timings"]["iteration_seconds"]) == 2
    assert runs["random"]["batch_size"] == 1 and len(runs["random"]["queries"]) == 30


# -- Table 2 -----------------------------------------------------------------------------------
def test_pairs_count_positives_in_the_dense_top(store_factory):
    X, y = clustered_points(200, 6, prevalence=0.1, seed=12, spread=1.2)
    path = store_factory(X, y, chunk_rows=30)
    Xs = bigsearch.open_store(path).read_rows(np.arange(len(y)))
    record = pair_experiment(path, ("las", "wnas"), pairs=6, top=10, seed=4)
    pi = float(y.mean())
    counted = [d for d in record["draws"] if d["counted"]]
    assert len(counted) == 6 and record["summary"]["counted"] == 6
    positives_used = [d["positive"] for d in record["draws"]]
    assert len(set(positives_used)) == len(positives_used)        # each positive starts one pair
    for d in record["draws"]:
        labels = np.full(len(y), -1)
        labels[[d["positive"], d["negative"]]] = [1, 0]
        unl = np.flatnonzero(labels < 0)
        for m, f in (("las", dense_f(Xs, labels, pi)), ("wnas", dense_wnas(Xs, labels))):
            top = unl[np.lexsort((unl, -f[unl]))][:10]
            assert d["found"][m] == int(y[top].sum())
        assert d["counted"] == any(d["found"].values())
    assert record["summary"]["methods"]["las"]["mean"] == pytest.approx(np.mean([d["found"]["las"] for d in counted]))


def test_pairs_through_the_cli(store, tmp_path):
    res = run_cli("pairs", store, "--pairs", 5, "--top", 20, "--out", tmp_path / "o")
    assert res.returncode == 0, res.stderr
    record = json.loads((tmp_path / "o" / "pairs.json").read_text())
    assert record["summary"]["counted"] == 5 and set(record["summary"]["methods"]) == {"las", "wnas"}
    assert (tmp_path / "o" / "table2.md").read_text() in res.stdout
    res = run_cli("pairs", store, "--method", "las,random", "--out", tmp_path / "p")
    assert res.returncode == 2 and "unknown method 'random'" in res.stderr


def test_library_errors_name_parameters(store, tmp_path):
    """The library speaks of its parameters; the CLI (test above) of its flags."""
    with pytest.raises(ParameterError, match="init_index gives every run the same start.*use init_positives"):
        Experiment(str(store), ("las",), budget=5, runs=2, init_index=(1, 2))
    with pytest.raises(LabelError, match="init_index 5000 is out of range"):
        initial_labels(np.zeros(3000, np.int8), 0, init_index=[5000])
    run_methods(store, ["las"], 3, tmp_path / "o", plot=False)
    with pytest.raises(ExperimentExistsError, match="or pass overwrite=True to replace it"):
        run_methods(store, ["las"], 3, tmp_path / "o", alpha=0.01, plot=False)


def test_run_methods_and_run_pairs_write_their_directories(store, tmp_path):
    results, notes = run_methods(store, ["las", "random"], 6, tmp_path / "r", seed=3, runs=2, plot=False)
    assert notes == [] and json.loads((tmp_path / "r" / "results.json").read_text()) == results
    with open(tmp_path / "r" / "runs.csv") as fh:
        assert len(list(csv.DictReader(fh))) == 2 * 2 * 6
    assert (tmp_path / "r" / "table.md").read_text() == markdown_table(results["summary"], 6)
    record, table = run_pairs(store, tmp_path / "p", ("las", "wnas"), pairs=3, top=10, seed=1)
    assert json.loads((tmp_path / "p" / "pairs.json").read_text()) == record
    assert (tmp_path / "p" / "table2.md").read_text() == table
    with open(tmp_path / "p" / "pairs.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 2 * len(record["draws"])
    assert {(int(r["pair"]), r["method"]): int(r["found"]) for r in rows} == \
        {(k, m): d["found"][m] for k, d in enumerate(record["draws"]) for m in ("las", "wnas")}


class CountedWNAS(WNAS):
    """WNAS, counting the searches built on each number of points (the real class: the
    count is of engines, not of a stand-in)."""
    method = "counted"
    built: dict = {}

    def __init__(self, store, **options):
        super().__init__(store, **options)
        CountedWNAS.built[self.n] = CountedWNAS.built.get(self.n, 0) + 1


def test_an_experiment_builds_one_engine_per_run(store, tmp_path, monkeypatch):
    """Options are checked from their record, not by building every method on the store:
    one engine on the store per run (and the warm-up's, on a copy of at most 64 rows)."""
    monkeypatch.setitem(METHODS, "counted", MethodSpec("counted", f"{__name__}:CountedWNAS", "WNAS, counted",
                                                       options=WNASOptions))
    monkeypatch.setattr(CountedWNAS, "built", {})
    results, _ = run_methods(store, ["counted", "las"], 4, tmp_path / "o", runs=3, plot=False, alpha=0.1,
                             prune=True)
    assert CountedWNAS.built.pop(3000) == 3
    assert set(CountedWNAS.built) <= set(range(2, 65))
    assert [r["method"] for r in results["runs"]] == ["counted", "las"] * 3


def test_options_are_checked_before_the_store_is_opened(tmp_path):
    """The options records need no store: a bad option is refused before the (missing)
    store is looked for, naming the option."""
    missing = str(tmp_path / "nowhere.zarr")
    for options, error in (({"alpha": -1}, "alpha = -1.0 is outside its range"),
                           ({"anchors": 0}, "anchors must be >= 1, got 0"),
                           ({"prune": "yes"}, "prune must be True or False, got 'yes'"),
                           ({"block_rows": 100}, "block_rows must be a positive multiple of"),
                           ({"fantasy": 2}, "fantasy must be 'f' or a label in \\[0, 1\\], got 2")):
        with pytest.raises(ParameterError, match=error):
            run_methods(missing, ["las", "wnas", "agr"], 5, tmp_path / "o", **options)
    assert not (tmp_path / "o").exists()
    assert METHODS["agr"].validate({"anchors": None, "alpha": 3}).for_shape(1642, 8).anchors == 164
    assert METHODS["agr"].validate().for_shape(100_000, 8).anchors == 500
    with pytest.raises(ParameterError, match="alpha does not apply to agr, which takes anchors, neighbors"):
        METHODS["agr"].validate({"alpha": 3}, strict=True)
