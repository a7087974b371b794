"""Graded labels (issue 18): tell(i, y) with y in [0, 1] is label propagation with soft
labels. LAS (and the dense ASG) against the independent dense reference, for every store
kind, dtype and chunking; told at initialization and in updates, one by one and in batches."""

import itertools
import json

import numpy as np
import pytest

import bigsearch
from bigsearch.errors import LabelError
from bigsearch.testing import brute_force_impact, clustered_points, dense_f, dense_las_run, dense_wnas

from conftest import DTYPES, KINDS, chunkings

RTOL = 1e-9
GRID = list(itertools.product(KINDS, DTYPES, chunkings(80)))


def rel_err(a, b):
    return np.abs(np.asarray(a) - b).max() / np.abs(b).max()


def stored_X(path):
    s = bigsearch.open_store(path)
    return s.read_rows(np.arange(s.n))


def grades(y, seed=0):
    """Soft answers: positives 0.6..1, negatives 0..0.3, a few exact 0s and 1s."""
    rng = np.random.default_rng(seed)
    g = np.where(y == 1, rng.uniform(0.6, 1.0, len(y)), rng.uniform(0.0, 0.3, len(y)))
    g[::9] = y[::9]
    return g


@pytest.mark.parametrize("kind,dtype,chunk_rows", GRID)
def test_graded_f_and_impact_match_brute_force(small_data, store_factory, kind, dtype, chunk_rows):
    X, y = small_data
    g = grades(y)
    path = store_factory(X, y, kind, dtype, chunk_rows)
    Xs = stored_X(path)
    labels = np.full(len(y), -1.0)
    search = bigsearch.LAS(path, pi=0.2, eta=0.5, alpha=0.01)
    start = [int(np.flatnonzero(y)[0]), int(np.flatnonzero(y == 0)[0]), 5]
    search.tell(start, [float(g[i]) for i in start])  # graded labels at initialization
    labels[start] = g[start]
    for step in range(5):
        f, im = brute_force_impact(Xs, labels, pi=0.2, eta=0.5)
        assert rel_err(search.f, f) < RTOL  # labeled points' f included
        assert rel_err(search.impact, im) < RTOL
        batch = [int(i) for i in search.top(1 + step % 3)[0]]  # one and several per update
        search.tell(batch, [float(g[i]) for i in batch])
        labels[batch] = g[batch]
    assert search.labels[start[0]] == int(g[start[0]] >= 0.5)


@pytest.mark.parametrize("kind,dtype,chunk_rows", GRID[::3])
def test_graded_query_sequence_matches_dense(small_data, store_factory, kind, dtype, chunk_rows):
    X, y = small_data
    g = grades(y, seed=1)
    path = store_factory(X, y, kind, dtype, chunk_rows)
    init = [int(np.flatnonzero(y)[3])]
    expected = dense_las_run(stored_X(path), g, init, 25, pi=0.15, eta=0.6, w0=0.02)
    search = bigsearch.LAS(path, pi=0.15, eta=0.6, w0=0.02)
    search.tell(init[0], float(g[init[0]]))
    got = []
    for _ in range(25):
        i = search.ask()
        got.append(i)
        search.tell(i, float(g[i]))
    assert got == expected


def test_graded_state_round_trip_and_asg(small_data, store_factory):
    X, y = small_data
    g = grades(y, seed=2)
    path = store_factory(X, y, "zarr", "float64", 7)
    search = bigsearch.LAS(path, pi=0.2)
    told = [0, 3, int(np.flatnonzero(y)[1])]
    search.tell(told, [float(g[i]) for i in told])
    search.tell(search.ask(), 0.25)
    restored = bigsearch.LAS.from_state(path, search.export_state())
    assert np.allclose(restored.f, search.f, rtol=0, atol=1e-12)
    assert restored.ask() == search.ask()
    asg = bigsearch.ASG(path, pi=0.2)
    asg.tell([i for i, _ in search.history], [y for _, y in search.history])
    labels = np.full(len(y), -1.0)
    for i, v in search.history:
        labels[i] = v
    assert rel_err(asg.f, dense_f(stored_X(path), labels, 0.2)) < RTOL


def test_graded_labels_are_checked(small_data, store_factory):
    path = store_factory(*small_data)
    search = bigsearch.LAS(path, pi=0.2)
    for bad in (1.5, -0.1, float("nan"), "0.5"):
        with pytest.raises(LabelError, match="graded label in \\[0, 1\\]"):
            search.tell(1, bad)
    with pytest.raises(LabelError, match="is not 0 \\(negative\\), 1 \\(positive\\)$"):
        bigsearch.RandomSearch(path).tell(1, 0.5)  # random search takes 0 and 1 only


@pytest.mark.parametrize("kind,dtype,chunk_rows", GRID[::2])
def test_graded_wnas_matches_the_definition(small_data, store_factory, kind, dtype, chunk_rows):
    """WNAS with a graded label y weighs its neighbours by 2y - 1: f is the definition's
    with those signs, told at initialization and in updates; a saved state continues."""
    X, y = small_data
    g = grades(y, seed=3)
    path = store_factory(X, y, kind, dtype, chunk_rows)
    Xs = stored_X(path)
    search = bigsearch.WNAS(path)
    labels = np.full(len(y), -1.0)
    start = [int(np.flatnonzero(y)[0]), 7]
    search.tell(start, [float(g[i]) for i in start])
    labels[start] = g[start]
    for step in range(5):
        f = dense_wnas(Xs, labels)
        assert rel_err(search.f, f) < RTOL
        batch = [int(i) for i in search.top(1 + step % 3)[0]]
        assert batch[0] == int(np.argmax(np.where(labels < 0, f, -np.inf)))
        search.tell(batch, [float(g[i]) for i in batch])
        labels[batch] = g[batch]
    restored = bigsearch.WNAS.from_state(path, search.export_state())
    assert np.array_equal(restored.f, search.f) and restored.ask() == search.ask()


@pytest.mark.parametrize("chunk_rows", [128, 300])
def test_graded_pruned_wnas_queries_are_the_full_pass(store_factory, chunk_rows):
    """A graded label's sign is in (-1, 1): the pruning bounds it as a raising term, and
    the pruned queries stay those of the full pass and of the definition."""
    X, y = clustered_points(600, 8, prevalence=0.05, seed=3, spread=0.8)
    g = grades(y, seed=4)
    path = store_factory(X, y, "zarr", "float64", chunk_rows)
    Xs = stored_X(path)
    pruned, full = bigsearch.WNAS(path, prune=True), bigsearch.WNAS(path)
    labels = np.full(len(y), -1.0)
    first = int(np.flatnonzero(y)[0])
    for s in (pruned, full):
        s.tell(first, float(g[first]))
    labels[first] = g[first]
    for _ in range(12):
        i = pruned.ask()
        assert i == full.ask() == int(np.argmax(np.where(labels < 0, dense_wnas(Xs, labels), -np.inf)))
        for s in (pruned, full):
            s.tell(i, float(g[i]))
        labels[i] = g[i]
    assert pruned.pruning_status.startswith("on")


def test_run_cli_graded_scores_fantasy_and_rf(small_data, store_factory, tmp_path):
    """`bigsearch run --scores --grade` tells LAS the mapped graded answers (the same
    queries as simulate with those answers); --fantasy and --method rf run end to end."""
    import json

    from bigsearch import simulate
    from bigsearch.experiments.graded import grade

    from conftest import run_cli

    X, y = small_data
    path = store_factory(X, y)
    scores = np.where(y == 1, -9.0, -6.0) + np.random.default_rng(3).normal(0, 0.5, len(y))
    np.save(tmp_path / "scores.npy", scores)
    r = run_cli(
        "run",
        path,
        "--method",
        "las,rf,wnas",
        "--budget",
        "12",
        "--batch-size",
        "4",
        "--pi",
        "0.2",
        "--scores",
        tmp_path / "scores.npy",
        "--grade=-9,-7",
        "--out",
        tmp_path / "o",
        "-q",
        "--no-plots",
    )
    assert r.returncode == 0, r.stderr
    runs = {rec["method"]: rec for rec in json.loads((tmp_path / "o" / "results.json").read_text())["runs"]}
    expected = simulate(path, "las", 12, seed=0, batch_size=4, pi=0.2, answers=grade(scores, -9, -7))
    assert runs["las"]["queries"] == expected["queries"]  # answers [i, stored label]; queries chosen on grades
    assert len(runs["rf"]["queries"]) == 12 and len(runs["wnas"]["queries"]) == 12
    r = run_cli(
        "run",
        path,
        "--budget",
        "8",
        "--batch-size",
        "4",
        "--pi",
        "0.2",
        "--fantasy",
        "0",
        "--out",
        tmp_path / "f",
        "-q",
        "--no-plots",
    )
    assert r.returncode == 0, r.stderr
    for bad, message in (
        (["--scores", tmp_path / "scores.npy"], "which none of las takes (blr does); to grade them, give --grade"),
        (["--grade", "1,0"], "--grade maps the answers of --scores"),
        (["--scores", tmp_path / "scores.npy", "--grade", "x,1"], "--grade BEST 'x'"),
        (["--fantasy", "2"], "fantasy must be"),
    ):
        r = run_cli("run", path, "--budget", "4", "--out", tmp_path / "bad", *bad)
        assert r.returncode == 2 and r.stderr.startswith("Error:") and message in r.stderr, r.stderr


def test_run_cli_scores_from_a_csv_column(small_data, store_factory, tmp_path):
    """`run --scores FILE.csv:COLUMN` takes the scores from a column of a CSV (by name, as
    ingest's --label-column): the same queries as simulate with those graded answers; a
    missing column, a column of text or the wrong number of rows is one line, exit 2."""
    import json

    from bigsearch import simulate
    from bigsearch.experiments.graded import grade

    from conftest import run_cli

    X, y = small_data
    path = store_factory(X, y)
    scores = np.where(y == 1, -9.0, -6.0) + np.random.default_rng(5).normal(0, 0.5, len(y))
    table = tmp_path / "library.csv"
    table.write_text(
        "smiles,score,hit\n" + "".join(f"C{i},{float(s)!r},{h}\n" for i, (s, h) in enumerate(zip(scores, y)))
    )
    common = [
        "--method",
        "las",
        "--budget",
        "8",
        "--batch-size",
        "4",
        "--pi",
        "0.2",
        "--grade=-9,-7",
        "-q",
        "--no-plots",
    ]
    r = run_cli("run", path, "--scores", f"{table}:score", "--out", tmp_path / "o", *common)
    assert r.returncode == 0, r.stderr
    las = json.loads((tmp_path / "o" / "results.json").read_text())["runs"][0]
    expected = simulate(path, "las", 8, seed=0, batch_size=4, pi=0.2, answers=grade(scores, -9, -7))
    assert las["queries"] == expected["queries"]
    rows = table.read_text().splitlines()
    (tmp_path / "short.csv").write_text("\n".join(rows[:-1]) + "\n")
    for spec, message in (
        (f"{table}:energy", "--scores 'energy': no such column (columns: smiles, score, hit)"),
        (f"{table}:0", "column 0 (smiles) holds text, not numbers"),
        (f"{tmp_path / 'short.csv'}:1", f"{len(y) - 1} scores for a store of {len(y)} points"),
    ):
        r = run_cli("run", path, "--scores", spec, "--out", tmp_path / "bad", *common)
        assert r.returncode == 2 and r.stderr.startswith("Error:") and message in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_sessions_keep_graded_labels(small_data, store_factory, tmp_path):
    """A session journals and checkpoints graded labels: reopened (replay + checkpoint) and
    after an undo, f is the dense reference's with the same soft labels."""
    from bigsearch import Session

    X, y = small_data
    path = store_factory(X, y, "zarr", "float64", 7)
    s = Session.create(path, tmp_path / "sess", pi=0.2, checkpoint_every=2)
    s.tell([1, 2], [0.7, 0])
    s.tell(3, 0.25)
    s.tell(5, 1)
    before = np.array(s.search.f)
    s.close()
    s = Session.open(tmp_path / "sess")
    assert np.array_equal(np.array(s.search.f), before)
    s.undo(1)
    labels = np.full(len(y), -1.0)
    labels[[1, 2, 3]] = [0.7, 0, 0.25]
    assert rel_err(s.search.f, dense_f(stored_X(path), labels, 0.2)) < RTOL
    s.close()


def test_graded_labels_from_the_session_command_line(small_data, store_factory, tmp_path, method="las"):
    """`session label DIR 3 0.4` and a CSV with graded labels: journaled, counted as
    positive from 0.5, and the reopened (and rebuilt) session's f is the dense reference's."""
    from bigsearch import Session

    from conftest import run_cli

    X, y = small_data
    path = store_factory(X, y, "zarr", "float64", 7)
    d = tmp_path / "sess"
    options = {"pi": 0.2} if method == "las" else {}
    Session.create(path, d, method=method, checkpoint_every=2, **options).close()  # (`session new`: test_session_cli)
    res = run_cli("session", "label", d, "3", "0.4", "5", "1", "9", "0")
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("recorded 3 labels (1 positive, 1 graded)")
    labels_csv = tmp_path / "more.csv"
    labels_csv.write_text("index,label\n11,0.75\n12,0.0\n")
    assert run_cli("session", "label", d, "--from", labels_csv).returncode == 0
    status = json.loads(run_cli("session", "status", d, "--json").stdout)
    assert (status["positives"], status["negatives"], status["graded"]) == (2, 3, 2)
    assert status["hits"] == [0, 1, 1, 2, 2]
    labels = np.full(len(y), -1.0)
    labels[[3, 5, 9, 11, 12]] = [0.4, 1, 0, 0.75, 0]
    Xs = stored_X(path)
    expected = dense_f(Xs, labels, 0.2) if method == "las" else dense_wnas(Xs, labels)
    with Session.open(d, readonly=True) as s:
        assert s.history == [(3, 0.4), (5, 1), (9, 0), (11, 0.75), (12, 0)]
        assert rel_err(s.search.f, expected) < RTOL
    Session.rebuild(d).close()  # what `session rebuild` runs (the command: test_session_cli)
    with Session.open(d, readonly=True) as s:
        assert rel_err(s.search.f, expected) < RTOL


def test_wnas_sessions_keep_graded_labels(small_data, store_factory, tmp_path):
    from bigsearch import Session

    X, y = small_data
    path = store_factory(X, y, "zarr", "float64", 7)
    s = Session.create(path, tmp_path / "sess", method="wnas", checkpoint_every=2)
    s.tell([1, 2], [0.7, 0])
    s.tell(3, 0.25)
    s.tell(5, 1)
    s.close()
    s = Session.open(tmp_path / "sess")
    s.undo(1)
    labels = np.full(len(y), -1.0)
    labels[[1, 2, 3]] = [0.7, 0, 0.25]
    assert rel_err(s.search.f, dense_wnas(stored_X(path), labels)) < RTOL
    assert s.status(estimate=False)["graded"] == 2
    s.close()
