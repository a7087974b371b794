"""The screening method (engine/methods/screen.py) against the dense reference replayed from
X (testing.dense_screen): f after every batch of labels, and the queries, on every store
format, dtype and chunking, locally and on a dask cluster; a saved search continues
exactly; its parameters are checked."""

import numpy as np
import pytest

import bigsearch
from bigsearch.engine.guidance.exploration import exploring, misses_in_a_row, random_unread
from bigsearch.engine.methods.screen import Screen
from bigsearch.errors import ParameterError
from bigsearch.synthetic import clustered_points
from bigsearch.testing.dense import dense_screen

from conftest import KINDS, chunkings, run_cli

RTOL = 1e-9


@pytest.fixture(scope="module")
def data():
    X, y = clustered_points(90, 6, prevalence=0.15, seed=7, spread=0.7)
    return X, y


def replay(search, X, y, steps, **params):
    """Ask and tell ``steps`` times, then check f after every answer against the reference
    (replayed once for the whole run) and each query as its argmax."""
    first = [int(np.flatnonzero(y)[0]), int(np.flatnonzero(y == 0)[0])]
    batches = [(first, [1, 0])]
    search.tell(first, [1, 0])
    Xs = np.asarray(search.store.read_rows(np.arange(len(y))), np.float64)  # as stored
    scores, queries = [], []
    for _ in range(steps):
        scores.append(np.array(search.f))  # a copy: f may be a view the next pass updates
        i = search.ask()
        queries.append(i)
        batches.append(([i], [int(y[i])]))
        search.tell(i, int(y[i]))
    labeled = np.zeros(len(y), bool)
    for got, ref, i, (idx, _) in zip(scores, dense_screen(Xs, batches[:-1], every=True, **params), queries, batches):
        scale = np.abs(ref).max()
        assert np.abs(got - ref).max() <= RTOL * scale
        labeled[idx] = True
        best = np.where(labeled, -np.inf, ref)
        assert best[i] >= best.max() - 1e-9 * scale  # the argmax, up to rounding ties
    return queries


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_scores_and_queries_are_the_references(store_factory, data, kind, dtype):
    X, y = data
    for chunk_rows in chunkings(len(X)):
        path = store_factory(X, y, kind, dtype, chunk_rows)
        with Screen(path) as search:
            replay(search, X, y, 12)


@pytest.mark.parametrize("weight", [0.0, 2.5])
@pytest.mark.parametrize("neighbours", [1, 2])
@pytest.mark.parametrize("unread, adapt", [(20.0, True), (20.0, False), (0.0, True)])
def test_other_parameters_are_the_references(store_factory, data, weight, neighbours, unread, adapt):
    X, y = data
    params = dict(ridge=0.3, balance=3.0, unread=unread, adapt=adapt, neighbours=neighbours, neighbour_weight=weight)
    with Screen(store_factory(X, y, "zarr", "float32", 13), **params) as search:
        replay(search, X, y, 10, **params)


class LowRankScreen(Screen):
    """The fit through G's eigendecomposition at any width (Screen uses it from 1,024 features)."""

    LOW_RANK_MIN_FEATURES = 1


@pytest.fixture(scope="module")
def wide():
    return clustered_points(120, 24, prevalence=0.12, seed=3, spread=0.8)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_low_rank_fit_is_the_reference(store_factory, wide, kind, dtype):
    """While the labels are fewer than the features the fit is Woodbury's on G's
    eigenbasis; after, the Cholesky one: both the reference's f and queries."""
    X, y = wide
    for chunk_rows in chunkings(len(X)):
        with LowRankScreen(store_factory(X, y, kind, dtype, chunk_rows), neighbour_weight=1.5) as search:
            replay(search, X, y, 30, neighbour_weight=1.5)
            assert 2 < search._coords_count < 32  # both fits were used: low rank up to 22 labels
    for unread in (40.0, 1000.0):  # B = c_un G + ridge I changes every query
        with LowRankScreen(store_factory(X, y, kind, dtype, 13), unread=unread) as search:
            replay(search, X, y, 20, unread=unread)


def test_a_saved_low_rank_search_continues_exactly(store_factory, wide):
    X, y = wide
    path = store_factory(X, y, "zarr", "float32", 7)
    first = [int(np.flatnonzero(y)[0]), int(np.flatnonzero(y == 0)[0])]
    runs = []
    for cut in (None, 5):
        with LowRankScreen(path) as search:
            search.tell(first, [1, 0])
            q = []
            for step in range(14):
                if step == cut:
                    state = search.export_state()
                    search.close()
                    search = LowRankScreen.from_state(path, state)  # its coordinates read again
                q.append(search.ask())
                search.tell(q[-1], int(y[q[-1]]))
            runs.append((q, np.asarray(search.f)))
            search.close()
    assert runs[0][0] == runs[1][0]
    assert np.abs(runs[0][1] - runs[1][1]).max() <= 1e-10 * np.abs(runs[0][1]).max()


def test_a_batch_of_labels_is_one_step(store_factory, data):
    X, y = data
    path = store_factory(X, y, "zarr", "float64", 17)
    with Screen(path) as search:
        first = [int(np.flatnonzero(y)[0]), int(np.flatnonzero(y == 0)[0])]
        search.tell(first, [1, 0])
        batch = search.next_batch(5)
        search.tell(batch, [int(y[i]) for i in batch])
        ref = dense_screen(np.asarray(X, np.float64), [(first, [1, 0]), (batch, [int(y[i]) for i in batch])])
        assert np.abs(np.asarray(search.f) - ref).max() <= RTOL * np.abs(ref).max()


def test_the_cluster_gives_the_local_queries(store_factory, data, client):
    X, y = data
    path = store_factory(X, y, "zarr", "float32", 11)
    runs = []
    for backend in ("local", client):
        with Screen(path, backend=backend, explore_after=3) as search:  # draws too, after 3 misses
            first = [int(np.flatnonzero(y)[0]), int(np.flatnonzero(y == 0)[0])]
            search.tell(first, [1, 0])
            q, drew = [], 0
            for _ in range(16):
                drew += search.exploring
                q.append(search.ask())
                search.tell(q[-1], int(y[q[-1]]))
            assert drew >= 2
            runs.append((q, np.asarray(search.f)))
    assert runs[0][0] == runs[1][0]
    np.testing.assert_allclose(runs[0][1], runs[1][1], rtol=1e-12)


def test_a_saved_search_continues_exactly(store_factory, data):
    X, y = data
    path = store_factory(X, y, "zarr", "float32", 9)
    first = [int(np.flatnonzero(y)[0]), int(np.flatnonzero(y == 0)[0])]

    def steps(search, k):
        out = []
        for _ in range(k):
            out.append(search.ask())
            search.tell(out[-1], int(y[out[-1]]))
        return out

    with Screen(path) as whole:
        whole.tell(first, [1, 0])
        expected = steps(whole, 12)
    with Screen(path) as part:
        part.tell(first, [1, 0])
        head = steps(part, 6)
        state = part.export_state()
    with Screen.from_state(path, state) as resumed:
        assert head + steps(resumed, 6) == expected


@pytest.mark.parametrize(
    "params, message",
    [
        ({"ridge": 0}, "ridge"),
        ({"balance": -1}, "balance"),
        ({"unread": -2}, "unread"),
        ({"adapt": "yes"}, "adapt"),
        ({"neighbours": 4}, "neighbours"),
        ({"neighbour_weight": -1}, "neighbour_weight"),
        ({"explore_after": -1}, "explore_after"),
        ({"explore_after": 2.5}, "explore_after"),
    ],
)
def test_parameters_are_checked(store_factory, data, params, message):
    X, y = data
    with pytest.raises(ParameterError, match=message):
        Screen(store_factory(X, y), **params)


def test_simulate_records_the_recall_estimate_and_stops(store_factory):
    X, y = clustered_points(400, 6, prevalence=0.1, seed=3, spread=0.5)
    path = store_factory(X, y, "zarr", "float32", 64)
    record = bigsearch.simulate(path, "screen", 380, seed=0, stop_at_recall=0.9)
    estimates = record["recall_estimate"]
    assert len(estimates) == len(record["queries"])
    stopped = record["stopped"]
    assert stopped is not None and stopped == len(record["queries"]) < 380
    value, low, high = estimates[-1]
    assert low >= 0.9 and low <= value <= high


def test_run_says_where_the_rule_stopped_and_the_recall_there(store_factory, tmp_path):
    """`run --stop-at-recall`: the table's budget columns keep a stopped run's last count, so
    the run's end and the recall estimated there are said, as results.json has them."""
    import json

    X, y = clustered_points(400, 6, prevalence=0.1, seed=3, spread=0.5)
    path = store_factory(X, y, "zarr", "float32", 64)
    for budget, runs in ((380, 1), (120, 1), (380, 2)):
        out = tmp_path / f"r{budget}-{runs}"
        done = run_cli(
            "run", path, "--method", "screen", "--budget", budget, "--runs", runs, "--stop-at-recall", 0.9, "--out", out
        )
        assert done.returncode == 0, done.stderr
        records = json.loads((out / "results.json").read_text())["runs"]
        if runs == 2:
            at = sorted(r["stopped"] for r in records)
            assert f"screen: the rule stopped 2 of 2 runs, after {at[0]}-{at[1]} queries" in done.stderr
            continue
        (record,) = records
        value, low, high = record["recall_estimate"][-1]
        estimate = f"recall {value:.1%} estimated ({low:.1%}-{high:.1%}, 95% interval)"
        read = len(record["init"]) + len(record["queries"])
        if budget == 380:
            assert record["stopped"] == len(record["queries"]) < budget and low >= 0.9
            said = f"screen: stopped by the rule after {record['stopped']} queries ({read} of 400 records read): "
            assert said + estimate + ", a recall of 90% reached with 95% confidence" in done.stderr
        else:
            assert record["stopped"] is None and low < 0.9
            said = f"screen: not stopped by the rule within the budget ({read} of 400 records read): "
            assert said + estimate in done.stderr


def explore_replay(search, X, y, steps, explore_after, batch=1):
    """Ask (or take a batch) and tell ``steps`` times: while exploring (``explore_after``
    irrelevant answers in a row, then draws and ranked records by turns of ``explore_after``)
    the queries are the reference's random draws, else the argmax of the reference's f; f is
    the reference's after every answer. Returns (queries, draws)."""
    first = [int(np.flatnonzero(y)[0]), int(np.flatnonzero(y == 0)[0])]
    batches, history = [(first, [1, 0])], [1, 0]
    search.tell(first, [1, 0])
    queries, draws = [], 0
    for _ in range(steps):
        ref = dense_screen(X, batches)  # f does not depend on the draws
        np.testing.assert_allclose(search.f, ref, rtol=0, atol=RTOL * np.abs(ref).max())
        labeled = np.concatenate([idx for idx, _ in batches])
        if exploring(history, explore_after):
            expected = random_unread(len(y), labeled, batch, step=len(history))
            assert search.exploring
            draws += 1
        else:
            expected = np.argsort(-np.where(np.isin(np.arange(len(y)), labeled), -np.inf, ref), kind="stable")[:batch]
            expected = expected.tolist()
        got = [search.ask()] if batch == 1 else search.next_batch(batch)
        assert got == expected
        queries += got
        answers = [int(y[i]) for i in got]
        batches.append((got, answers))
        history += answers
        search.tell(got, answers)
    return queries, draws


@pytest.mark.parametrize("batch", [1, 3])
def test_a_search_run_dry_draws_unread_records_at_random(store_factory, data, batch):
    """After explore_after irrelevant answers in a row, the next explore_after records are
    drawn uniformly from the unread ones (guidance/exploration.py), then as many ranked, by
    turns until one is relevant; the scores go on as the reference's, and a search saved
    while drawing draws the same records after."""
    X, y = data
    path = store_factory(X, y, "zarr", "float32", 13)
    with Screen(path, explore_after=3) as search:
        Xs = np.asarray(search.store.read_rows(np.arange(len(y))), np.float64)  # as stored
        queries, draws = explore_replay(search, Xs, y, 25, 3, batch)
        assert draws >= 3 and len(set(queries)) == len(queries)
        state = search.export_state()
        expected = search.next_batch(4)
    with Screen.from_state(path, state) as resumed:
        assert resumed.next_batch(4) == expected


def test_the_draws_are_the_unread_records_uniformly():
    """random_unread: distinct unread records, each about as often, the first of k draws the
    one draw."""
    rng = np.random.default_rng(0)
    for step in range(300):
        n = int(rng.integers(1, 40))
        labeled = rng.choice(n, int(rng.integers(0, n + 1)), replace=False)
        unread = set(range(n)) - set(labeled.tolist())
        got = random_unread(n, labeled, 3, step)
        assert len(got) == len(set(got)) == min(3, len(unread)) and set(got) <= unread
        assert random_unread(n, labeled, 1, step) == got[:1]  # ask() is the first of top(k)
    counts = np.bincount([random_unread(20, np.arange(5), 1, step)[0] for step in range(3000)], minlength=20)
    assert counts[:5].sum() == 0
    assert np.abs(counts[5:] - 200).max() < 5 * np.sqrt(200)  # 15 records, 200 each expected
    assert misses_in_a_row([1, 0, 0]) == 2 and misses_in_a_row([0.2, 0.0]) == 2 and misses_in_a_row([0.7]) == 0
    turns = [exploring([1] + [0] * k, 3) for k in range(13)]
    assert turns == [False] * 3 + [True] * 3 + [False] * 3 + [True] * 3 + [False]
    assert not any(exploring([0] * k, 0) for k in range(10)) and not exploring([0] * 9 + [1], 3)
