"""BLR's pruned queries (engine/pruning/blr.py): the same queries as the full pass, bit for
bit, for greedy and UCB, single labels and batches, across store formats, dtypes and
chunkings that don't divide n, on stores whose blocks are tight (so pruning skips some);
fewer bytes read; the bounds sound against NumPy; and `run --method blr --prune`."""

import itertools
import json

import numpy as np
import pytest

import bigsearch

from conftest import DTYPES, KINDS, ask_in_step, run_cli, tight_blocks

N, R, STEPS = 2000, 8, 40


@pytest.fixture(scope="module")
def data():
    return tight_blocks(N, R, prevalence=0.05, seed=4)


def start(y, n_random=15):
    rng = np.random.default_rng(1)
    return sorted({int(np.flatnonzero(y)[0]), *rng.choice(len(y), n_random, replace=False).tolist()})


def run(path, y, prune, *, batch=1, bulk_at=None, **options):
    """The queries of a run answered from y, and the engine: ``batch`` per round; with
    ``bulk_at``, 12 more labels told at once (not chosen) after that many rounds."""
    e = bigsearch.BLR(path, prune=prune, block_rows=64, **options)
    init = start(y)
    e.tell(init, y[init].tolist())
    queries = []
    for t in range(STEPS // batch):
        chosen = [e.ask()] if batch == 1 else e.next_batch(batch)
        queries += chosen
        e.tell(chosen, y[chosen].tolist())
        if t == bulk_at:
            free = np.flatnonzero(e.labels < 0)[::97][:12]
            e.tell(free.tolist(), y[free].tolist())
    return queries, e


def assert_same_and_cheaper(path, y, share=0.8, **kw):
    """The pruned run's queries are the full pass's, and its rounds read on average at
    most ``share`` of X (None: no check); f (and J for UCB) the same bits after."""
    full, e_full = run(path, y, False, **kw)
    pruned, e = run(path, y, True, **kw)
    assert pruned == full
    assert e.pruning_status.startswith("on")
    details = e.run_details()
    read, x_bytes = details["bytes_read"][1:], details["x_bytes"]  # the first round includes the start
    assert 0 < sum(read) < sum(e_full.run_details()["bytes_read"][1:])
    if share is not None:
        assert sum(read) < share * len(read) * x_bytes, [b / x_bytes for b in read]
    assert e_full.run_details()["pruning"].startswith("off")
    np.testing.assert_array_equal(e.f, e_full.f)  # the unread blocks brought up to date: the same bits
    if kw.get("acquisition") == "ucb":
        np.testing.assert_array_equal(e.J, e_full.J)
    return e


@pytest.mark.parametrize("kind,dtype,acquisition", list(itertools.product(KINDS, DTYPES, ["greedy", "ucb"])))
def test_pruned_queries_are_the_full_pass(data, store_factory, kind, dtype, acquisition):
    X, y = data
    path = store_factory(X, None, kind, dtype, 700)  # 700 does not divide n
    assert_same_and_cheaper(path, y, acquisition=acquisition, lam=1.0, noise=0.5)


@pytest.mark.parametrize("acquisition", ["greedy", "ucb"])
def test_pruned_queries_across_refits(data, store_factory, acquisition):
    """lam and the noise refitted as the labels grow (each refit a full pass that resets
    the cache). The evidence finds little signal in these labels (a huge lam: nearly
    flat UCB scores, so its queries read most of X); greedy still reads less."""
    X, y = data
    path = store_factory(X, None, "zarr", "float32", 700)
    e = assert_same_and_cheaper(path, y, share=0.8 if acquisition == "greedy" else None, acquisition=acquisition)
    assert len(e.refits) >= 3


def test_a_refit_costs_greedy_no_pass_and_the_share_read_stays_small(tmp_path):
    """The benchmark's protocol (benchmarks/blr_query.py: 1 positive and 20 negatives, 20
    greedy queries, lam and the noise fitted: 3 refits) on a small store of the generator
    with its rows grouped by cluster: every query the full pass's, and the share of X read
    counted per query. A refit needs no pass (f stays linear in x: the blocks' bounds still
    hold; each read 100% of X before, a mean of 10% at 10M); these bounds read 2.3% mean,
    7.4% at most."""
    from bigsearch.synthetic import make_clustered_store

    path = make_clustered_store(
        tmp_path / "g.zarr", 20000, 128, prevalence=0.005, spread=0.7, chunk_rows=7000, order="generated"
    )
    y = bigsearch.open_store(path).labels()
    init = [int(np.flatnonzero(y)[0])] + np.flatnonzero(y == 0)[:20].tolist()
    pruned, full = bigsearch.BLR(path, prune=True, block_rows=64), bigsearch.BLR(path)
    for e in (pruned, full):
        e.tell(init, y[init].tolist())
    for _ in range(21):
        i = pruned.ask()
        assert i == full.ask()
        for e in (pruned, full):
            e.tell(i, int(y[i]))
    assert [r["labels"] for r in pruned.refits] == [21, 27, 34]
    share = np.array(pruned.run_details()["bytes_read"][1:]) / pruned.store.nbytes
    assert len(share) == 20
    assert share.mean() <= 0.035 and share.max() <= 0.15, share.round(3).tolist()


@pytest.fixture(scope="module")
def kmeans_store(tmp_path_factory):
    """The issue-40 store in small: the generator's data (0.5% positives), rows in k-means
    order (`tools/make_store.py --cluster-order`), chunks that do not divide n."""
    from bigsearch.ingest.cluster_order import cluster_order
    from bigsearch.synthetic import make_clustered_store

    folder = tmp_path_factory.mktemp("kmeans")
    source = make_clustered_store(folder / "g.zarr", 20000, 128, prevalence=0.005, spread=0.7, chunk_rows=7000)
    cluster_order(source, folder / "k.zarr", chunk_rows=7000)
    return folder / "k.zarr"


@pytest.mark.parametrize("acquisition", ["greedy", "ucb"])
def test_from_one_positive_every_query_reads_little_and_refits_make_no_pass(kmeans_store, passes, acquisition):
    """Issue 40's protocol in small: from one positive (drawn as `bigsearch run --seed 0`
    draws it), 25 queries, each the full pass's, every query's share of X counted. The
    first query (every score the mean: the first unlabeled row) reads nothing; the cache is
    reset where the weights go when its answer differs, so the next reads a block or two
    (before: 100% and 96% of X, the blocks' maxima taken at the flat scores bounding
    nothing); over all 25, 6.4% (14.3% before). Greedy's refits of lam and the noise (9)
    make no pass over X; UCB's each make one (its v may grow), and nothing else does."""
    path = kmeans_store
    y = bigsearch.open_store(path).labels()
    p = int(np.random.default_rng(0).choice(np.flatnonzero(y == 1), size=1, replace=False)[0])
    e = bigsearch.BLR(path, prune=True, block_rows=64, acquisition=acquisition)
    e.tell([p], [1])
    e.sync()
    init_bytes, at_init = e.bytes_since_query, len(passes)
    queries = []
    for _ in range(25):
        queries.append(e.ask())
        e.tell(queries[-1], int(y[queries[-1]]))
    e.sync()
    assert len(e.refits) >= 5
    assert len(passes) - at_init == (0 if acquisition == "greedy" else len(e.refits)), passes[at_init:]
    full = bigsearch.BLR(path, acquisition=acquisition)
    full.tell([p], [1])
    for i in queries:
        assert full.ask() == i
        full.tell(i, int(y[i]))
    if acquisition == "ucb":
        return
    read = np.array(e.query_bytes, np.float64)
    read[0] -= init_bytes  # the first query's own reads, apart from initialization's passes
    share = read / e.store.nbytes
    assert share[0] == 0 and share[1] <= 3 * 64 / 20000, share[:2]
    assert share.mean() <= 0.1 and share[2:].max() <= 0.2, share.round(4).tolist()


def test_while_every_label_is_alike_queries_read_nothing(data, store_factory):
    """With every label alike the weights are 0 and every score the mean: the queries are
    the first unlabeled rows, the full pass's, and read none of X."""
    X, y = data
    path = store_factory(X, None, "zarr", "float32", 700)
    e, full = (bigsearch.BLR(path, prune=p, block_rows=64) for p in (True, False))
    for s in (e, full):
        s.tell([2], [1])
    e.sync()
    init_bytes = e.bytes_since_query
    for expected in (0, 1, 3, 4):
        i = e.ask()
        assert i == full.ask() == expected
        for s in (e, full):
            s.tell(i, 1)
    assert e.query_bytes == [init_bytes, 0, 0, 0]
    i = e.ask()
    assert i == full.ask() and e.query_bytes[-1] == 0
    for s in (e, full):
        s.tell(i, 0)
    assert e.ask() == full.ask()
    np.testing.assert_array_equal(e.f, full.f)


@pytest.mark.parametrize("start_label", [1, 0])
def test_from_one_label_the_cache_is_set_where_the_weights_go(data, store_factory, start_label):
    """From one label (x_1) the first query is the first unlabeled row x_q, and the cache is
    reset at v = x_q - x_1 and -v: when x_q's answer differs, w is along one of them
    (a positive answered 0: -v; a negative answered 1: v), so every block's bound is its
    best unlabeled score to the rounding margin and the query reads a block or two."""
    X, y = data
    path = store_factory(X, None, "zarr", "float64", 700)
    e, full = (bigsearch.BLR(path, prune=p, block_rows=64, lam=1.0, noise=0.5) for p in (True, False))
    first = int(np.flatnonzero(y == start_label)[3])
    for s in (e, full):
        s.tell([first], [start_label])
    q = e.ask()
    assert q == full.ask() == 0
    for s in (e, full):
        s.tell(q, 1 - start_label)
    assert e.ask() == full.ask()
    assert 0 < e.query_bytes[1] <= 2 * 64 * e.store.bytes_per_point
    u, pr, sm = e.pruning.u(), e.pruning.pruner, e.pruning.summaries
    score = np.where(e.labels < 0, X @ u[:-1] + u[-1], -np.inf)
    best = np.maximum.reduceat(score, sm.start)
    bounds = pr.bounds(u)
    assert np.all(bounds >= best) and np.allclose(bounds, best, rtol=0, atol=1e-6)


@pytest.mark.parametrize("acquisition,batch", list(itertools.product(["greedy", "ucb"], [5, 10])))
def test_pruned_batches_are_the_full_pass(data, store_factory, acquisition, batch):
    """Batches (10: more than the labels one kernel call folds in) and a bulk of labels
    told at once, whose J update UCB's blocks replay through BLAS when read; lam and
    the noise fixed, so no refit resets the cache."""
    X, y = data
    path = store_factory(X, None, "zarr", "float64", 600)
    assert_same_and_cheaper(path, y, 0.95, batch=batch, bulk_at=1, acquisition=acquisition, lam=1.0, noise=0.5)


@pytest.mark.parametrize("acquisition", ["greedy", "ucb"])
def test_pruned_queries_on_real_valued_labels(data, store_factory, acquisition):
    X, y = data
    score = X @ np.linspace(1.0, -1.0, R) + 3.0 * y  # a measured score, higher is better
    path = store_factory(X, None, "hdf5", "float32", 900)
    assert_same_and_cheaper(path, score, acquisition=acquisition, lam=1.0, noise=0.5)


def test_thompson_keeps_the_full_pass_and_says_why(data, store_factory):
    X, y = data
    path = store_factory(X, None, "zarr", "float32", 700)
    full, _ = run(path, y, False, acquisition="thompson", seed=3)
    pruned, e = run(path, y, True, acquisition="thompson", seed=3)
    assert pruned == full
    assert e.pruning_status == "off: Thompson: a full pass per query: a new draw each query"
    assert all(b >= e.store.nbytes for b in e.run_details()["bytes_read"])


@pytest.mark.parametrize("acquisition,fitted", [("greedy", False), ("greedy", True), ("ucb", False)])
def test_block_bounds_hold(data, store_factory, acquisition, fitted):
    """After pruned queries (greedy: also across refits of lam and the noise, which make
    no pass), each block's bound at the current weights is at least the best score of its
    unlabeled rows, computed here by NumPy from X (f = b + X w, and for UCB beta sqrt(v)
    from a dense A^-1); the kernel's bounds are its NumPy formula's."""
    X, y = data
    path = store_factory(X, None, "zarr", "float64", 700)
    _, e = run(path, y, True, acquisition=acquisition, **({} if fitted else dict(lam=1.0, noise=0.5)))
    assert bool(e.refits) == fitted
    pr, sm = e.pruning.pruner, e.pruning.summaries
    u = e.pruning.u()
    bounds = pr.bounds(u)
    np.testing.assert_allclose(bounds, pr.reference_bounds(u), rtol=1e-12)
    labeled = e.labels >= 0
    idx = np.flatnonzero(labeled)
    XL = X[idx]
    w, b = e.w, e.intercept
    score = b + X @ w
    if acquisition == "ucb":
        xbar = XL.mean(axis=0)
        A = 1.0 * np.eye(R) + (XL - xbar).T @ (XL - xbar) / 0.5
        Xc = X - xbar
        v = np.einsum("ij,ij->i", Xc @ np.linalg.inv(A), Xc) + 0.5 / len(idx)
        score = score + e.params.beta * np.sqrt(v)
    score[labeled] = -np.inf
    best = np.maximum.reduceat(score, sm.start)
    assert np.all(bounds >= best - 1e-9 * np.abs(best).max())
    if not fitted:  # (after refits the blocks' versions may all predate a rescaled w: the
        # share read across refits is test_a_refit_costs_greedy_no_pass_and_the_share_read_stays_small's)
        assert np.any(bounds < best.max())  # some blocks can be skipped


def test_a_scaled_w_is_bounded_as_tightly_as_the_blocks_were_read(data, store_factory):
    """Greedy's bounds also try each version's u scaled (a refit of lam and the noise
    scales w): at u = (2 w, c + 0.3), every block's bound is its best unlabeled score at u
    (computed here from X) to the rounding margin, where the change 2 w - w alone bounds
    no block so closely."""
    X, y = data
    path = store_factory(X, None, "zarr", "float64", 700)
    e = bigsearch.BLR(path, prune=True, block_rows=64, lam=1.0, noise=0.5)
    e.tell(start(y), y[start(y)].tolist())
    e.ask()
    pr, sm, u = e.pruning.pruner, e.pruning.summaries, e.pruning.u()
    pr.reset(u, e.f, e.backend.gather("label"))  # every block read at u
    w, c = u[:-1], u[-1]
    scaled = np.append(2 * w, c + 0.3)
    score = np.where(e.labels < 0, X @ (2 * w) + c + 0.3, -np.inf)
    best = np.maximum.reduceat(score, sm.start)
    bounds = pr.bounds(scaled)
    np.testing.assert_allclose(bounds, pr.reference_bounds(scaled), rtol=1e-12)
    assert np.all(bounds >= best) and np.allclose(bounds, best, rtol=0, atol=1e-6)
    pr.rescale = False
    assert np.all(pr.bounds(scaled) - best > 1e-3)


def test_run_cli_blr_prune(data, store_factory, tmp_path):
    X, y = data
    path = store_factory(X, y.astype(np.int8), "zarr", "float32", 700)
    outs = {}
    for flag in ([], ["--prune"]):
        out = tmp_path / ("pruned" if flag else "full")
        done = run_cli(
            "run",
            path,
            "--method",
            "blr",
            "--acquisition",
            "ucb",
            "--blr-lam",
            1,
            "--blr-noise",
            0.5,
            "--budget",
            20,
            "--init-index",
            int(np.flatnonzero(y)[0]),
            *flag,
            "-v",
            "--no-plots",
            "--out",
            out,
        )
        assert done.returncode == 0, done.stderr
        outs[bool(flag)] = (json.loads((out / "results.json").read_text())["runs"][0], done.stderr)
    (full, _), (pruned, err) = outs[False], outs[True]
    assert "blr: pruning on" in err and "X read per round" in err
    assert pruned["queries"] == full["queries"]
    assert sum(pruned["bytes_read"][1:]) < sum(full["bytes_read"][1:])


@pytest.mark.parametrize(
    "encoding,acquisition", list(itertools.product(["int8", "float16", "binary"], ["greedy", "ucb"]))
)
def test_encoded_stores_prune_to_the_full_pass(data, tmp_path, encoding, acquisition):
    X, y = data
    X = (X > 0).astype(float) if encoding == "binary" else X
    path = tmp_path / "e.zarr"
    bigsearch.create_store(path, X, None, encoding=encoding, chunk_rows=700, kind="zarr")
    assert_same_and_cheaper(path, y, 0.95, acquisition=acquisition, lam=1.0, noise=0.5)


@pytest.mark.parametrize("acquisition", ["greedy", "ucb"])
def test_session_keeps_pruning_across_reopen(data, store_factory, tmp_path, acquisition):
    """A pruned session saved (for UCB, J of unread blocks brought up to date first) and
    reopened goes on with the full pass's queries."""
    from bigsearch.session import Session

    X, y = data
    path = store_factory(X, None, "zarr", "float64", 700)
    opts = dict(acquisition=acquisition, lam=1.0, noise=0.5)
    full = bigsearch.BLR(path, **opts)
    with Session.create(path, tmp_path / "s", method="blr", prune=True, checkpoint_every=4, **opts) as s:
        assert s.search.pruning_status.startswith("on")
        for i in start(y):
            s.tell(i, int(y[i]))
            full.tell(i, int(y[i]))
        for _ in range(10):
            i = int(s.search.ask())
            assert i == full.ask()
            s.tell(i, int(y[i]))
            full.tell(i, int(y[i]))
    with Session.open(tmp_path / "s") as s:
        assert s.search.pruning_status.startswith("on")
        for _ in range(5):
            i = int(s.search.ask())
            assert i == full.ask()
            s.tell(i, int(y[i]))
            full.tell(i, int(y[i]))


def first_query_rows(path, y, acquisition, backend):
    """Rows of X read up to the first pruned query, included (the workers report theirs)."""
    e = bigsearch.BLR(path, prune=True, block_rows=64, lam=1.0, noise=0.5, acquisition=acquisition, backend=backend)
    e.tell(start(y), y[start(y)].tolist())
    e.top(1)
    e.close()
    return e.query_bytes[0] // e.store.bytes_per_point


def test_the_dask_backend_prunes_greedy_and_ucb(data, store_factory, client):
    """Greedy and UCB: each worker prunes its chunks (UCB: the J updates travel with the
    queries and each chunk replays them on the blocks it reads); the queries are the local
    full pass's, single and batched, and read less than X per round; J the same bits after.
    The first pruned query reads only the blocks its bounds require (issue 24): with one
    chunk, as many rows as the local backend's."""
    X, y = data
    path, path_one = (store_factory(X, None, "zarr", "float32", rows) for rows in (700, N))
    for acquisition in ("greedy", "ucb"):  # the first pruned query reads what its bounds require
        local, remote = (first_query_rows(path_one, y, acquisition, backend) for backend in ("local", client))
        assert remote == local < 3 * N + N / 2  # (3 passes before: the scores, X^T X, the summaries)
        assert first_query_rows(path, y, acquisition, client) < 3 * N + N / 2
    for acquisition, batch in (("greedy", 1), ("ucb", 1), ("ucb", 4)):
        opts = dict(lam=1.0, noise=0.5, acquisition=acquisition, batch=batch)
        full, e_full = run(path, y, False, **opts)
        pruned, e = run(path, y, True, backend=client, **opts)
        assert pruned == full, acquisition
        assert e.pruning_status.endswith(f"({acquisition}), each worker pruning its own chunks")
        details = e.run_details()
        read = details["bytes_read"][1:]
        assert sum(read) < 0.8 * len(read) * details["x_bytes"], acquisition
        np.testing.assert_array_equal(e.f, e_full.f)
        np.testing.assert_array_equal(e.J, e_full.J)
        e.close()
    # from one label: the workers' caches reset where the weights go (BLRPruner.reset_ahead)
    e, full = bigsearch.BLR(path, prune=True, block_rows=64, backend=client), bigsearch.BLR(path)
    for s in (e, full):
        s.tell([int(np.flatnonzero(y)[3])], [1])
    for _ in range(6):
        i = e.ask()
        assert i == full.ask()
        for s in (e, full):
            s.tell(i, int(y[i]))
    chunks = e.store.n_chunks
    assert e.query_bytes[1] <= 2 * chunks * 64 * e.store.bytes_per_point, e.query_bytes
    e.close()
    refitted, e = run(path, y, True, backend=client)  # greedy refits, no pass: the workers' caches carry over
    assert refitted == run(path, y, False)[0] and len(e.refits) >= 3
    e.close()
    refitted, e = run(path, y, True, backend=client, acquisition="ucb", bulk_at=5)
    assert refitted == run(path, y, False, acquisition="ucb", bulk_at=5)[0] and len(e.refits) >= 3
    e.close()


@pytest.mark.parametrize("acquisition", ["greedy", "ucb"])
def test_a_fork_prunes_on_its_own_arrays(data, store_factory, acquisition):
    """The labelling page's in-memory copy (serve/fork.py) of a pruned search goes on with
    the full pass's queries, and so does the original after it."""
    from bigsearch.serve.fork import fork

    X, y = data
    path = store_factory(X, None, "zarr", "float32", 700)
    opts = dict(acquisition=acquisition, lam=1.0, noise=0.5)
    full, e = bigsearch.BLR(path, **opts), bigsearch.BLR(path, prune=True, block_rows=64, **opts)
    for s in (full, e):
        s.tell(start(y), y[start(y)].tolist())
    for _ in range(5):
        i = e.ask()
        assert i == full.ask()
        e.tell(i, int(y[i]))
        full.tell(i, int(y[i]))
    e.sync()
    copy = fork(e)
    reference = fork(full)
    ask_in_step(((copy, reference), (e, full)), y, 8)
