"""Cold starts (engine/guidance/seeding.py): --start-from ids / vector / keyword in sessions and
runs, the seed's queries, and exactness of everything told to the engine."""

import json

import numpy as np
import pytest

import bigsearch
from bigsearch import Session, simulate
from bigsearch.engine.guidance.seeding import from_keyword, from_vector, parse_start, resolve_start
from bigsearch.errors import BigsearchError, LabelError, ParameterError
from bigsearch.experiments import run_methods
from bigsearch.testing import clustered_points
from bigsearch.testing.dense import dense_f

from conftest import read_all, run_cli, store_path

N = 60


@pytest.fixture(scope="module")
def data():
    X, y = clustered_points(N, 5, prevalence=0.15, seed=7, spread=0.8)
    return X, y


@pytest.fixture(scope="module")
def stores(data, tmp_path_factory):
    """The same points in stores of every chunking, dtype and kind that matter here."""
    X, y = data
    folder = tmp_path_factory.mktemp("seed")
    out = {}
    for kind, dtype, rows in (("zarr", "float32", 1), ("zarr", "float64", 7), ("hdf5", "float32", N)):
        path = store_path(folder, f"s-{dtype}-{rows}", kind)
        ids = np.array([f"row-{i}" for i in range(N)])
        bigsearch.create_store(path, X, y, ids, dtype=dtype, chunk_rows=rows, kind=kind)
        out[(kind, dtype, rows)] = path
    return out


@pytest.mark.parametrize("key", [("zarr", "float32", 1), ("zarr", "float64", 7), ("hdf5", "float32", N)])
def test_a_vector_ranks_points_by_linear_similarity(stores, key):
    path = stores[key]
    v = np.linspace(-1, 1, 5)
    with bigsearch.open_store(path) as store:
        start = from_vector(store, v, keep=12)
        sim = read_all(store).astype(np.float64) @ v
    expected = np.lexsort((np.arange(N), -sim))[:12]
    assert start.candidates.tolist() == expected.tolist() and start.ordered


def test_vector_start_asks_the_most_similar_until_a_positive_then_the_engine_exactly(tmp_path, data, stores):
    X, y = data
    path = stores[("zarr", "float64", 7)]
    v = -X[np.flatnonzero(y == 1)].mean(axis=0)  # points away from the positives: a few negatives first
    np.save(tmp_path / "v.npy", v)
    order = np.lexsort((np.arange(N), -(X @ v)))
    first_pos = next(k for k, i in enumerate(order) if y[i] == 1)
    assert first_pos >= 2  # the data gives the seed something to do
    with Session.create(path, tmp_path / "s", pi=0.15, start_from=f"vector:{tmp_path / 'v.npy'}") as s:
        asked = []
        for _ in range(first_pos + 4):
            i = s.ask()
            assert s.top(3).indices[0] == i
            asked.append(i)
            s.tell(i, int(y[i]))
        assert asked[: first_pos + 1] == order[: first_pos + 1].tolist()  # the seed's order
        labels = np.array(s.search.labels, np.int64)
        np.testing.assert_allclose(s.search.f, dense_f(X, labels, 0.15), rtol=1e-10, atol=1e-12)
        assert s.ask() == s.search.ask()  # a positive is known: the engine chooses
    with Session.open(tmp_path / "s", readonly=True) as r:  # the start survives reopening
        assert r.start.candidates.tolist()[:5] == order[:5].tolist()
    with Session.create(path, tmp_path / "k", pi=0.15, start_from={"vector": v}) as s:
        s.skip(int(order[0]))  # a skipped candidate comes after every other point
        assert s.top(2).indices.tolist() == order[1:3].tolist() and s.ask() == order[1]
        assert [c["index"] for c in s.candidates(2)] == order[1:3].tolist()  # what `session next` shows


CSV = "title,year,label\n" + "".join(
    f"{t},{2000 + i % 20},{int(t.startswith('Quantum') and i % 3 == 0)}\n"
    for i, t in enumerate(["Quantum dots", "Classical music", "quantum chaos", "Dots and boxes"] * 15)
)


@pytest.fixture(scope="module")
def text_store(tmp_path_factory):
    folder = tmp_path_factory.mktemp("kw")
    (folder / "papers.csv").write_text(CSV)
    res = run_cli(
        "ingest",
        folder / "papers.csv",
        folder / "papers.zarr",
        "--label-column",
        "label",
        "--positive",
        1,
        "--categorical",
        "title",
        "--normalize",
        "--bias",
        "-q",
    )
    assert res.returncode == 0, res.stderr
    return folder / "papers.zarr"


def test_a_keyword_matches_whole_words_of_a_text_column(text_store):
    with bigsearch.open_store(text_store) as store:
        start = from_keyword(store, "title", "QUANTUM")
        assert start.candidates.tolist() == [i for i in range(60) if i % 4 in (0, 2)] and not start.ordered
        assert from_keyword(store, "title", "quantum dots").candidates.tolist() == list(range(0, 60, 4))
        with pytest.raises(ParameterError, match="no column 'name'.*columns: title, year, label"):
            from_keyword(store, "name", "x")
        with pytest.raises(ParameterError, match="no record has 'dot'"):
            from_keyword(store, "title", "dot")


def test_keyword_start_asks_matches_by_f_and_a_run_records_it(text_store):
    rec = simulate(text_store, "las", 8, start_from="keyword:title=quantum")
    first = [i for i, _ in rec["queries"]]
    pos = next(k for k, (_, lab) in enumerate(rec["queries"]) if lab == 1)
    assert all(i % 4 in (0, 2) for i in first[: pos + 1])  # matches only, until the first positive
    assert rec["init"] == [] and rec["start_from"]["strategy"] == "keyword"
    with bigsearch.LAS(text_store) as las:  # each was the engine's best match
        for i, lab in rec["queries"][: pos + 1]:
            f = las.f
            free = [j for j in range(60) if j % 4 in (0, 2) and las.labels[j] < 0]
            assert i == min(free, key=lambda j: (-round(f[j], 12), j))
            las.tell(i, lab)


def test_ids_are_known_positives_told_as_labels(tmp_path, stores):
    path = stores[("zarr", "float32", 1)]
    d = tmp_path / "s"
    res = run_cli("session", "new", path, d, "--pi", 0.15, "--start-from", "ids:row-3,row-9")
    assert res.returncode == 0, res.stderr
    assert "started from 2 known positives, recorded as labels" in res.stdout
    with Session.open(d, readonly=True) as s:
        assert s.history == [(3, 1), (9, 1)] and s.start is None
    with pytest.raises(LabelError, match="start_from ids: 1 id.s. not in the store, e.g. 'nope'"):
        Session.create(path, tmp_path / "t", start_from="ids:row-3,nope")
    assert not (tmp_path / "t").exists()  # nothing half-made


@pytest.mark.parametrize("kind,dtype,rows", [("zarr", "float32", 1), ("hdf5", "float64", 7)])
def test_the_stored_labels_start_a_session_as_its_first_labels(tmp_path, data, kind, dtype, rows):
    """A store whose file held some decisions (a pilot screening): --start-from labels tells
    every one of them, as they are, in one group; f is then the dense reference's."""
    X, y = data
    decided = np.r_[np.flatnonzero(y == 1)[:2], np.flatnonzero(y == 0)[:4]]
    partial = np.full(N, -1, np.int8)
    partial[decided] = y[decided]
    path = bigsearch.create_store(
        store_path(tmp_path, "pilot", kind), X, partial, dtype=dtype, chunk_rows=rows, kind=kind
    )
    with Session.create(path, tmp_path / "s", pi=0.15, start_from="labels") as s:
        assert s.history == [(int(i), int(y[i])) for i in sorted(decided)]
        assert s.info["start"] == {"strategy": "labels", "source": "labels", "told": 6, "positive": 2, "negative": 4}
        labels = np.array(s.search.labels, np.int64)
        np.testing.assert_allclose(s.search.f, dense_f(X.astype(dtype), labels, 0.15), rtol=1e-10, atol=1e-12)
        # the told labels count as found, not as the search's pace: the estimate waits for 100 read past them
        assert s.recall()["window"] == 0 and s.recall()["found"] == 2
    res = run_cli("session", "new", path, tmp_path / "c", "--pi", 0.15, "--start-from", "labels")
    assert res.returncode == 0, res.stderr
    assert "started from the store's 6 labels (2 positive, 4 negative), recorded as labels" in res.stdout
    assert "blind start" not in res.stdout


def test_the_stored_labels_are_for_sessions_and_must_be_there(tmp_path, data, stores):
    X, _ = data
    with pytest.raises(BigsearchError, match="start_from labels is for sessions"):
        simulate(stores[("zarr", "float32", 1)], "las", 3, start_from="labels")
    unlabeled = bigsearch.create_store(tmp_path / "none.zarr", X)
    with pytest.raises(LabelError, match="has no labels: ingest its file again with its label column"):
        Session.create(unlabeled, tmp_path / "s", start_from="labels")
    undecided = bigsearch.create_store(tmp_path / "undecided.zarr", X, np.full(N, -1, np.int8))
    with pytest.raises(LabelError, match="every row is unlabeled"):
        Session.create(undecided, tmp_path / "t", pi=0.1, start_from="labels")
    assert not (tmp_path / "s").exists() and not (tmp_path / "t").exists()
    res = run_cli("session", "new", undecided, tmp_path / "u", "--pi", 0.1, "--start-from", "labels:x")
    assert res.returncode == 2 and res.stderr.startswith("Error: --start-from 'labels:x': give ids:ID")


def test_run_from_known_positives_and_from_a_vector(tmp_path, data, stores):
    X, y = data
    path = stores[("zarr", "float32", 1)]
    pos = np.flatnonzero(y == 1)[:2]
    rec = simulate(path, "las", 3, start_from=f"ids:row-{pos[0]},row-{pos[1]}")
    assert rec["init"] == [[int(pos[0]), 1], [int(pos[1]), 1]]
    np.save(tmp_path / "v.npy", X[pos[0]])
    out = tmp_path / "run"  # the CLI's --start-from is run by tests/test_quickstart.py
    run_methods(path, ["las"], 4, out, start_from=f"vector:{tmp_path / 'v.npy'}", plot=False)
    record = json.loads((out / "results.json").read_text())["runs"][0]
    sim = X.astype(np.float32).astype(np.float64) @ X[pos[0]]
    assert record["queries"][0][0] == int(np.lexsort((np.arange(N), -sim))[0]) and record["init"] == []


def test_bad_starts_are_refused_with_what_to_give(tmp_path, stores):
    with bigsearch.open_store(stores[("zarr", "float32", 1)]) as store:
        for spec, match in (
            ("words", "give ids:ID"),
            ("vector:nope.npy", "cannot read nope.npy"),
            ("keyword:title", "give keyword:COLUMN=WORDS"),
            ("ids:", "give ids:ID"),
        ):
            with pytest.raises(ParameterError, match=match):
                parse_start(store, spec)
        np.save(tmp_path / "short.npy", np.ones(3))
        with pytest.raises(ParameterError, match="expected 5 values"):
            parse_start(store, f"vector:{tmp_path / 'short.npy'}")
        with pytest.raises(ParameterError, match="keeps no source records"):
            parse_start(store, "keyword:title=x")
    with pytest.raises(BigsearchError, match="init_index or start_from"):
        run_methods(stores[("zarr", "float32", 1)], ["las"], 2, tmp_path / "o", init_index=[1], start_from="ids:row-1")
    with pytest.raises(BigsearchError, match="every run the same start"):
        run_methods(stores[("zarr", "float32", 1)], ["las"], 2, tmp_path / "o", runs=2, start_from="ids:row-1")
    with bigsearch.open_store(stores[("zarr", "float32", 1)]) as store:  # the Python forms
        assert resolve_start(store, {"ids": ["row-4", "row-2"]}).positives.tolist() == [2, 4]
        assert (
            resolve_start(store, {"vector": np.ones(5)}).candidates.tolist()
            == from_vector(store, np.ones(5)).candidates.tolist()
        )
        with pytest.raises(ParameterError, match="give one of"):
            resolve_start(store, {"vectors": 1})
    with pytest.raises(LabelError, match="out of range"):
        X = np.abs(np.random.default_rng(0).random((5, 2)))
        p = bigsearch.create_store(tmp_path / "noids.zarr", X)
        with bigsearch.open_store(p) as store:
            parse_start(store, "ids:7")
