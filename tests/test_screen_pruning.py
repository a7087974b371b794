"""Screen's pruned queries (engine/pruning/screen.py): the same queries as the full pass,
and the same scores for them, bit for bit, across store formats, dtypes and chunkings,
with adapt on and off, batches, a save and restore mid-way and a session reopened, on
the dask backend and through `run --prune`; fewer bytes read (on a clustered store, a
small share of X a query); the bounds sound against NumPy; off, saying why, with the
neighbour term."""

import itertools
import json

import numpy as np
import pytest

import bigsearch
from bigsearch.engine.methods.screen import Screen

from conftest import DTYPES, KINDS, ask_in_step, run_cli, tight_blocks

N, R, STEPS = 2000, 8, 30


@pytest.fixture(scope="module")
def data():
    return tight_blocks(N, R, prevalence=0.05, seed=4)


def start(y):
    """One relevant and one irrelevant record (the screening protocol's start)."""
    return [int(np.flatnonzero(y == 1)[0]), int(np.flatnonzero(y == 0)[0])]


def run(path, y, prune, *, batch=1, steps=STEPS, save_at=None, bulk_at=None, **options):
    """(queries, their scores, the engine) of a run answered from y, ``batch`` a round
    (the top B, as `run --batch-size B`); with ``save_at``, the search saved and restored
    after that many rounds; with ``bulk_at``, 12 more labels told at once (not chosen)."""
    e = Screen(path, prune=prune, block_rows=64, **options)
    e.tell(start(y), y[start(y)].tolist())
    queries, scores = [], []
    for t in range(steps // batch):
        if t == save_at:
            state = e.export_state()
            e.close()
            e = Screen.from_state(path, state)
        idx, sc = e.top(batch)
        queries += idx.tolist()
        scores += sc.tolist()
        e.tell(idx.tolist(), y[idx].tolist())
        if t == bulk_at:
            free = np.flatnonzero(e.labels < 0)[::97][:12]
            e.tell(free.tolist(), y[free].tolist())
    return queries, scores, e


def assert_same_and_cheaper(path, y, share=0.8, **kw):
    """The pruned run's queries and their scores are the full pass's; its rounds read on
    average at most ``share`` of X; f the same bits after (the unread blocks brought up
    to date)."""
    full, full_scores, e_full = run(path, y, False, **kw)
    pruned, scores, e = run(path, y, True, **kw)
    assert pruned == full
    assert scores == full_scores
    assert e.pruning_status.startswith("on"), e.pruning_status
    assert e_full.pruning_status.startswith("off")
    read, x_bytes = e.run_details()["bytes_read"][1:], e.store.nbytes  # the first round includes the start
    assert 0 < sum(read) < sum(e_full.run_details()["bytes_read"][1:])
    assert sum(read) < share * len(read) * x_bytes, [b / x_bytes for b in read]
    assert e.f_costs_a_pass()
    np.testing.assert_array_equal(e.f, e_full.f)
    assert not e.f_costs_a_pass()
    e_full.close()
    return e


@pytest.mark.parametrize(
    "kind,dtype,chunk_rows",
    [
        *itertools.product(KINDS, DTYPES, [700, N]),  # 700 does not divide n
        *(pytest.param(k, d, 1, marks=pytest.mark.slow) for k, d in itertools.product(KINDS, DTYPES)),
    ],
)
def test_pruned_queries_are_the_full_pass(data, store_factory, kind, dtype, chunk_rows):
    X, y = data
    path = store_factory(X, None, kind, dtype, chunk_rows)
    share = 0.8 if chunk_rows > 1 else 1.0  # one-row chunks: a block is a row, the bounds as loose
    steps = STEPS if chunk_rows > 1 else 12
    assert_same_and_cheaper(path, y, share, steps=steps).close()


@pytest.mark.parametrize("options", [{"adapt": False}, {"unread": 0.0}, {"ridge": 0.2, "balance": 3.0}])
def test_other_fits_prune_to_the_full_pass(data, store_factory, options):
    """adapt off (the unread ridge alone), the answers alone, other penalties."""
    X, y = data
    path = store_factory(X, None, "zarr", "float32", 700)
    assert_same_and_cheaper(path, y, **options).close()


@pytest.mark.parametrize("batch", [5, 10])
def test_pruned_batches_are_the_full_pass(data, store_factory, batch):
    """The top B a round, and a bulk of labels told at once."""
    X, y = data
    path = store_factory(X, None, "hdf5", "float64", 600)
    assert_same_and_cheaper(path, y, 0.95, batch=batch, bulk_at=1).close()


def test_a_saved_pruned_search_continues_exactly(data, store_factory):
    """Saved after 10 pruned queries (f of the unread blocks stale: not saved) and
    restored: the next queries and their scores are the full pass's, uninterrupted."""
    X, y = data
    path = store_factory(X, None, "zarr", "float32", 700)
    full, full_scores, e_full = run(path, y, False)
    resumed, scores, e = run(path, y, True, save_at=10)
    assert resumed == full and scores == full_scores
    assert e.pruning_status.startswith("on")
    np.testing.assert_array_equal(e.f, e_full.f)
    for s in (e, e_full):
        s.close()


def test_session_keeps_pruning_across_reopen(data, store_factory, tmp_path):
    """A pruned session (checkpoints every 4 labels) closed and reopened goes on with the
    full pass's queries (a session applies each answer as it comes: so does the reference)."""
    from bigsearch.session import Session

    X, y = data
    path = store_factory(X, None, "zarr", "float64", 700)
    full = Screen(path)

    def both(s, i):
        s.tell(i, int(y[i]))
        full.tell(i, int(y[i]))
        full.sync()

    with Session.create(path, tmp_path / "s", method="screen", prune=True, checkpoint_every=4) as s:
        assert s.search.pruning_status.startswith("on")
        for i in start(y):
            both(s, i)
        for _ in range(10):
            i = int(s.search.ask())
            assert i == full.ask()
            both(s, i)
    with Session.open(tmp_path / "s") as s:
        assert s.search.pruning_status.startswith("on")
        for _ in range(5):
            i = int(s.search.ask())
            assert i == full.ask()
            both(s, i)
    full.close()


def test_the_neighbour_term_keeps_the_full_pass_and_says_why(data, store_factory):
    X, y = data
    path = store_factory(X, None, "zarr", "float32", 700)
    full, full_scores, e_full = run(path, y, False, steps=10, neighbour_weight=1.0)
    pruned, scores, e = run(path, y, True, steps=10, neighbour_weight=1.0)
    assert pruned == full and scores == full_scores
    assert e.pruning_status.startswith("off: neighbour_weight > 0: the similarity to the nearest positives is not")
    assert all(b >= e.store.nbytes for b in e.run_details()["bytes_read"])
    np.testing.assert_array_equal(e.f, e_full.f)


@pytest.fixture(scope="module")
def clustered(tmp_path_factory):
    """The generator's data (1% positives) with its rows grouped by cluster, chunks that
    do not divide n."""
    from bigsearch.synthetic import make_clustered_store

    folder = tmp_path_factory.mktemp("clustered")
    return make_clustered_store(
        folder / "g.zarr", 20000, 64, prevalence=0.01, spread=0.7, chunk_rows=7000, order="generated"
    )


def test_on_a_clustered_store_a_query_reads_a_small_share(clustered):
    """From one relevant and one irrelevant record, 30 queries, each the full pass's and
    its share of X counted (all of them): a mean of 0.5% here, 1% at most; each block's
    bound at the last weights at least its best unlabeled score, computed by NumPy from X."""
    y = bigsearch.open_store(clustered).labels()
    e, full = Screen(clustered, prune=True, block_rows=64), Screen(clustered)
    for s in (e, full):
        s.tell(start(y), y[start(y)].tolist())
    e.sync()
    init = e.bytes_since_query
    for _ in range(30):
        i = e.ask()
        assert i == full.ask()
        for s in (e, full):
            s.tell(i, int(y[i]))
    e.sync()
    read = np.array(e.query_bytes, np.float64)
    read[0] -= init  # the start's passes: the scores, X^T X, the summaries
    assert init == 3 * e.store.nbytes
    share = read / e.store.nbytes
    assert share.mean() <= 0.03 and share.max() <= 0.1, share.round(4).tolist()
    pr, sm, u = e.pruning.pruner, e.pruning.summaries, e.pruning.u()
    X = np.asarray(e.store.read_rows(np.arange(e.n)), np.float64)
    score = np.where(e.labels < 0, X @ u[:-1] + u[-1], -np.inf)
    best = np.maximum.reduceat(score, sm.start)
    bounds = pr.bounds(u)
    np.testing.assert_allclose(bounds, pr.reference_bounds(u), rtol=1e-12)
    assert np.all(bounds >= best - 1e-9 * np.abs(best).max())
    assert np.mean(bounds < best.max()) > 0.5  # most blocks can be skipped


@pytest.mark.slow  # the ingest and its cluster order: ~10 s
def test_a_text_store_prunes_to_the_full_pass(tmp_path):
    """A tiny screening export ingested as text (`ingest --text-column --cluster-order`, in
    this process): the pruned queries and their scores are the full pass's."""
    from test_ingest_text import corpus, write_csv

    from bigsearch.ingest.options import FeatureOptions, LabelOptions, OutputOptions
    from bigsearch.ingest.pipeline import ingest

    data = write_csv(tmp_path / "export.csv", corpus(600, seed=3))
    store = tmp_path / "text.zarr"
    ingest(
        [data],
        store,
        labels=LabelOptions(column="label_included"),
        features=FeatureOptions(text_columns=("title", "abstract"), text_dim=48),
        output=OutputOptions(cluster_order=0, chunk_rows=250),
    )
    y = bigsearch.open_store(store).labels()
    assert_same_and_cheaper(store, y, share=1.0, steps=20).close()


def test_simulate_and_run_cli_take_prune(data, store_factory, tmp_path):
    """`simulate(..., prune=True)` in this process, and `bigsearch run --method screen
    --prune --batch-size 3 -v`: the full pass's queries, fewer bytes read, and the run
    says pruning is on."""
    X, y = data
    path = store_factory(X, y.astype(np.int8), "zarr", "float32", 700)
    init = [(i, int(y[i])) for i in start(y)]
    records = {p: bigsearch.simulate(path, "screen", 12, init=init, prune=p) for p in (False, True)}
    assert records[True]["queries"] == records[False]["queries"]
    outs = {}
    for flag in ([], ["--prune"]):
        out = tmp_path / ("pruned" if flag else "full")
        args = ["run", path, "--method", "screen", "--budget", 12, "--batch-size", 3, "--init-index"]
        done = run_cli(*args, ",".join(str(i) for i in start(y)), *flag, "-v", "--out", out)
        assert done.returncode == 0, done.stderr
        outs[bool(flag)] = (json.loads((out / "results.json").read_text())["runs"][0], done.stderr)
    (full, _), (pruned, err) = outs[False], outs[True]
    assert "screen: pruning on" in err, err
    assert pruned["queries"] == full["queries"]
    assert sum(pruned["bytes_read"][1:]) < sum(full["bytes_read"][1:])


def test_the_dask_backend_prunes(data, store_factory, client):
    """Each worker prunes its chunks: single queries and batches are the local full pass's,
    read less than X a round (a batch of B: each chunk's own top B), and f is the same
    bits after."""
    X, y = data
    path = store_factory(X, None, "zarr", "float32", 700)
    for batch, share in ((1, 0.8), (4, 1.0)):
        full, full_scores, e_full = run(path, y, False, batch=batch, steps=16)
        pruned, scores, e = run(path, y, True, batch=batch, steps=16, backend=client)
        assert pruned == full and scores == full_scores
        assert e.pruning_status.endswith("(a linear score), each worker pruning its own chunks")
        read = e.run_details()["bytes_read"][1:]
        assert sum(read) < share * len(read) * e.store.nbytes, [b / e.store.nbytes for b in read]
        np.testing.assert_array_equal(e.f, e_full.f)
        for s in (e, e_full):
            s.close()


def test_a_fork_prunes_on_its_own_arrays(data, store_factory):
    """The labelling page's in-memory copy (serve/fork.py) of a pruned search goes on with
    the full pass's queries, and so does the original after it."""
    from bigsearch.serve.fork import fork

    X, y = data
    path = store_factory(X, None, "zarr", "float32", 700)
    full, e = Screen(path), Screen(path, prune=True, block_rows=64)
    for s in (full, e):
        s.tell(start(y), y[start(y)].tolist())
    for _ in range(5):
        i = e.ask()
        assert i == full.ask()
        for s in (e, full):
            s.tell(i, int(y[i]))
    e.sync()
    copy, reference = fork(e), fork(full)
    ask_in_step(((copy, reference), (e, full)), y, 8)
