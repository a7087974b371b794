"""Pruned selection (engine/pruning/las.py) against the full-pass engine and the dense
reference: identical queries and bit-identical chosen scores, for every store kind,
dtype and chunking; alpha > 0 falls back to the full pass. Block summaries stored with
the store (engine/pruning/summaries.py) give the same queries, and are not used once X changed."""

import itertools

import numpy as np
import pytest

import bigsearch
from bigsearch.engine.pruning.summaries import GROUP, write_block_summaries
from bigsearch.errors import ParameterError
from bigsearch.testing import clustered_points, dense_las_run

from conftest import DTYPES, KINDS, chunkings, store_path, tight_blocks

N = 600


@pytest.fixture(scope="module")
def data():
    """600 points in 8 dimensions, rows sorted by cluster so that blocks are tight."""
    return tight_blocks(N, 8, 0.08, seed=5)


def run_top(search, y, steps, k=1):
    """Queries and the scores they were chosen with; ``k`` points per round."""
    queries, chosen = [], []
    while len(queries) < steps:
        idx, sc = search.top(k)
        queries += idx.tolist()
        chosen += sc.tolist()
        search.tell(idx.tolist(), [int(y[i]) for i in idx])
    return queries, chosen


def start(y):
    return int(np.flatnonzero(y == 1)[0])


def both(path, y, steps, k=1, **params):
    runs = []
    for prune in (False, True):
        s = bigsearch.LAS(path, prune=prune, block_rows=64, **params)
        s.tell(start(y), 1)
        runs.append((s, *run_top(s, y, steps, k)))
    return runs


@pytest.mark.parametrize("kind,dtype,chunk_rows", list(itertools.product(KINDS, DTYPES, chunkings(N))))
def test_pruned_queries_and_scores_are_the_full_pass(data, store_factory, kind, dtype, chunk_rows):
    X, y = data
    path = store_factory(X, y, kind, dtype, chunk_rows)
    (full, q_full, f_full), (pruned, q_pruned, f_pruned) = both(path, y, 40, pi=0.08)
    assert pruned.pruning_status.startswith("on")
    assert q_pruned == q_full
    assert f_pruned == f_full                     # bit-identical, not merely close
    assert sum(pruned.query_bytes) < sum(full.query_bytes)
    # asked for, every per-point value is brought up to date
    assert np.array_equal(pruned.f, full.f)
    assert np.allclose(pruned.J, full.J, rtol=1e-9, atol=0)
    assert np.allclose(pruned.impact, full.impact, rtol=1e-7, atol=1e-12 * np.abs(full.impact).max())


def test_pruned_queries_match_the_dense_reference(data, store_factory):
    X, y = data
    path = store_factory(X, y, "zarr", "float64", 100)
    Xs = bigsearch.open_store(path).read_rows(np.arange(N))
    expected = dense_las_run(Xs, y, [start(y)], 30, pi=0.08, eta=0.5, w0=1.0 / N, alpha=0.0)
    s = bigsearch.LAS(path, pi=0.08, prune=True, block_rows=64)
    s.tell(start(y), 1)
    assert run_top(s, y, 30)[0] == list(expected)


@pytest.mark.parametrize("chunk_rows", [7, N])
def test_batches_of_queries_are_the_full_pass(data, store_factory, chunk_rows):
    X, y = data
    path = store_factory(X, y, "hdf5", "float32", chunk_rows)
    (_, q_full, f_full), (_, q_pruned, f_pruned) = both(path, y, 30, k=5, pi=0.08)
    assert (q_pruned, f_pruned) == (q_full, f_full)


@pytest.mark.parametrize("kind", KINDS)
def test_alpha_above_zero_falls_back_to_the_full_pass(data, store_factory, kind):
    X, y = data
    path = store_factory(X, y, kind, "float32", 64)
    (full, q_full, f_full), (pruned, q_pruned, f_pruned) = both(path, y, 20, alpha=1e-3, pi=0.08)
    assert pruned.pruning_status.startswith("off: alpha > 0")
    assert (q_pruned, f_pruned) == (q_full, f_full)
    assert pruned.query_bytes == full.query_bytes


def test_pruning_reads_a_small_part_of_clustered_data(store_factory):
    """Rows in cluster order: after the first queries, most blocks are never read."""
    X, y = clustered_points(6000, 16, prevalence=0.01, seed=2, spread=0.5)
    order = np.argsort(np.argmax(X[:, :-1] @ np.linalg.qr(np.random.default_rng(0).normal(size=(15, 15)))[0],
                                 axis=1), kind="stable")
    path = store_factory(X[order], y[order], "zarr", "float32", 1024)
    (_, q_full, _), (pruned, q_pruned, _) = both(path, y[order], 60, pi=0.01)
    assert q_pruned == q_full
    fraction = np.array(pruned.query_bytes[10:]) / pruned.store.nbytes
    assert fraction.mean() < 0.5


def test_state_saved_while_pruning_continues_with_the_same_queries(data, store_factory):
    X, y = data
    path = store_factory(X, y, "zarr", "float32", 100)
    s = bigsearch.LAS(path, pi=0.08, prune=True, block_rows=64)
    s.tell(start(y), 1)
    run_top(s, y, 10)
    state = s.export_state()
    assert state["meta"]["J_stale"] and state["meta"]["prune"] == {"block_rows": 64}
    restored = bigsearch.LAS.from_state(path, state)
    assert restored.pruning_status.startswith("on")
    assert run_top(restored, y, 15) == run_top(s, y, 15)


def test_refresh_while_pruning_keeps_the_queries(data, store_factory):
    X, y = data
    path = store_factory(X, y, "zarr", "float64", 100)
    (full, _, _), (pruned, _, _) = both(path, y, 12, pi=0.08)
    drift = pruned.refresh()
    full.refresh()
    assert drift["J"] < 1e-9 and drift["f"] < 1e-9
    assert run_top(pruned, y, 10) == run_top(full, y, 10)


@pytest.mark.parametrize("block_rows", [0, 32, 100, 64.5, True])
def test_block_rows_must_be_a_multiple_of_the_kernel_block(data, store_factory, block_rows):
    X, y = data
    path = store_factory(X, y)
    with pytest.raises(ParameterError, match="block_rows"):
        bigsearch.LAS(path, pi=0.08, prune=True, block_rows=block_rows)


def test_prune_options_are_one_record(data, store_factory, tmp_path):
    """PruneOptions(block_rows, basis_dim): what ``prune=`` takes (the older block_rows
    keyword means the same, and disagreeing with it is one clear error); saved states and
    sessions keep it whole."""
    from bigsearch import PruneOptions
    from bigsearch.engine.pruning.contract import Pruning
    from bigsearch.session import Session

    X, y = data
    path = store_factory(X, y, "zarr", "float32", 100)
    record = PruneOptions(block_rows=64, basis_dim=3)
    s, old = bigsearch.LAS(path, pi=0.08, prune=record), bigsearch.LAS(path, pi=0.08, prune=True, block_rows=64)
    for e in (s, old):
        e.tell(start(y), 1)
    assert run_top(s, y, 10) == run_top(old, y, 10)
    assert s.pruning.options == record and s.pruning.basis.shape[1] == 3 < old.pruning.basis.shape[1]
    assert old.pruning.options == PruneOptions(64)
    for other in (bigsearch.WNAS(path, prune=record), bigsearch.BLR(path, prune=record), s):
        assert isinstance(other.pruning, Pruning) and other.pruning.options == record
    state = s.export_state()
    assert state["meta"]["prune"] == {"block_rows": 64, "basis_dim": 3}
    assert bigsearch.LAS.from_state(path, state).pruning.options == record
    with pytest.raises(ParameterError, match="block_rows=128 disagrees"):
        bigsearch.LAS(path, pi=0.08, prune=PruneOptions(64), block_rows=128)
    with pytest.raises(ParameterError, match="basis_dim"):
        PruneOptions(basis_dim=0)
    with Session.create(path, tmp_path / "s", pi=0.08, prune=PruneOptions(64, 3)) as session:
        session.tell(int(np.flatnonzero(y)[0]), 1)
    with Session.open(tmp_path / "s") as session:
        assert session.search.pruning.options == PruneOptions(64, 3)


def test_run_cli_prunes_and_reports_the_bytes_read(data, store_factory, tmp_path):
    import json

    from conftest import run_cli
    X, y = data
    path = store_factory(X, y, "zarr", "float32", 128)
    outs = {}
    for flag in ([], ["--prune"]):
        out = tmp_path / ("pruned" if flag else "full")
        done = run_cli("run", path, "--budget", 25, "--init-index", start(y), *flag, "-v", "--no-plots", "--out", out)
        assert done.returncode == 0, done.stderr
        outs[bool(flag)] = (json.loads((out / "results.json").read_text())["runs"][0], done.stderr)
    (full, _), (pruned, err) = outs[False], outs[True]
    assert "las: pruning on" in err and "X read per round" in err
    assert pruned["queries"] == full["queries"]
    assert len(pruned["bytes_read"]) == 25 and sum(pruned["bytes_read"][1:]) < sum(full["bytes_read"][1:])


def test_session_keeps_pruning_across_reopen(data, store_factory, tmp_path):
    from bigsearch.session import Session
    X, y = data
    path = store_factory(X, y, "zarr", "float32", 128)
    full = bigsearch.LAS(path, pi=0.08)
    with Session.create(path, tmp_path / "s", pi=0.08, prune=True, checkpoint_every=4) as s:
        assert s.search.pruning_status.startswith("on")
        for _ in range(10):
            i = int(s.search.ask())
            assert i == full.ask()
            s.tell(i, int(y[i]))
            full.tell(i, int(y[i]))
    with Session.open(tmp_path / "s") as s:
        assert s.search.pruning_status.startswith("on")
        assert s.search.top(3)[0].tolist() == full.top(3)[0].tolist()
        reads = s.reads()          # the query read part of X; reopening is not counted
        assert len(reads["bytes_read"]) == 1 and 0 < reads["bytes_read"][0] < reads["x_bytes"]


@pytest.mark.parametrize("encoding,kind", [("int8", "zarr"), ("float16", "hdf5"), ("binary", "zarr")])
def test_encoded_stores_prune_to_the_full_pass(data, tmp_path, encoding, kind):
    X, y = data
    if encoding == "binary":       # 0/1 features (and a constant one): every degree is positive
        X = np.hstack([(X[:, :-1] > 0).astype(float), np.ones((len(X), 1))])
    path = store_path(tmp_path, "e", kind)
    bigsearch.create_store(path, X, y, encoding=encoding, chunk_rows=100, kind=kind)
    (full, q_full, f_full), (pruned, q_pruned, f_pruned) = both(path, y, 25, pi=0.08)
    assert (q_pruned, f_pruned) == (q_full, f_full)
    assert sum(pruned.query_bytes) < sum(full.query_bytes)


def test_ingest_cluster_order_with_an_encoding(tmp_path):
    from conftest import run_cli
    X, y = clustered_points(300, 5, prevalence=0.1, seed=6, spread=0.3)
    np.save(tmp_path / "x.npy", X.astype(np.float32))
    np.save(tmp_path / "y.npy", y)
    out = tmp_path / "o.zarr"
    done = run_cli("ingest", tmp_path / "x.npy", out, "--labels", tmp_path / "y.npy", "--positive", "1",
                   "--cluster-order", "3", "--encoding", "int8")
    assert done.returncode == 0, done.stderr
    store = bigsearch.open_store(out)
    assert store.encoding == "int8" and sorted(store.ids().tolist()) == list(range(300))
    assert np.allclose(store.read_rows(np.arange(300)), X[store.ids()], atol=0.01)
    las = bigsearch.LAS(out, prune=True)       # the cluster-ordered store holds its block summaries
    las.sync()
    assert las.pruning.summaries_from == "store"


def both_wnas(path, y, steps, k=1):
    runs = []
    for prune in (False, True):
        s = bigsearch.WNAS(path, prune=prune, block_rows=64)
        s.tell([start(y), int(np.flatnonzero(y == 0)[0])], [1, 0])
        runs.append((s, *run_top(s, y, steps, k)))
    return runs


@pytest.mark.parametrize("kind,dtype,chunk_rows", list(itertools.product(KINDS, DTYPES, chunkings(N))))
def test_pruned_wnas_is_the_full_pass(data, store_factory, kind, dtype, chunk_rows):
    X, y = data
    path = store_factory(X, y, kind, dtype, chunk_rows)
    (full, q_full, f_full), (pruned, q_pruned, f_pruned) = both_wnas(path, y, 30)
    assert pruned.pruning_status.startswith("on")
    assert (q_pruned, f_pruned) == (q_full, f_full)
    assert sum(pruned.query_bytes[1:]) < sum(full.query_bytes[1:])
    assert np.array_equal(pruned.f, full.f)


@pytest.mark.parametrize("k", [3, 10])     # 10: more than 8 labels per batch, applied by a full pass
def test_pruned_wnas_batches(data, store_factory, k):
    X, y = data
    path = store_factory(X, y, "zarr", "float32", 100)
    (_, q_full, f_full), (pruned, q_pruned, f_pruned) = both_wnas(path, y, 40, k)
    assert (q_pruned, f_pruned) == (q_full, f_full)


def test_pruned_wnas_state_continues(data, store_factory):
    X, y = data
    path = store_factory(X, y, "hdf5", "float64", 100)
    (full, _, _), (pruned, _, _) = both_wnas(path, y, 12)
    restored = bigsearch.WNAS.from_state(path, pruned.export_state())
    assert restored.pruning_status.startswith("on")
    assert run_top(restored, y, 10) == run_top(full, y, 10)


# -- block summaries stored with the store ------------------------------------------
def summarized(tmp_path, X, y, kind, chunk_rows=100):
    path = store_path(tmp_path, f"s{chunk_rows}", kind)
    bigsearch.create_store(path, X, y, chunk_rows=chunk_rows, kind=kind)
    written = write_block_summaries(path, block_rows=64)
    assert written["blocks"] == sum(-(-(b - a) // 64) for a, b in bigsearch.open_store(path).chunks)
    return path


def pruned_run(path, y, steps=30, k=1):
    s = bigsearch.LAS(path, pi=0.08, prune=True, block_rows=64)
    s.tell(start(y), 1)
    return s, run_top(s, y, steps, k)


@pytest.mark.parametrize("kind", KINDS)
def test_stored_summaries_give_the_full_pass_queries(data, tmp_path, kind):
    X, y = data
    path = summarized(tmp_path, X, y, kind, chunk_rows=100)
    full = bigsearch.LAS(path, pi=0.08)
    full.tell(start(y), 1)
    expected = run_top(full, y, 30, k=2)
    stored, got = pruned_run(path, y, k=2)
    assert stored.pruning.summaries_from == "store"
    assert got == expected  # queries and scores, bit for bit
    assert sum(stored.query_bytes[1:]) < sum(full.query_bytes[1:])
    # the stored summaries are those the engine computes (with the no-label basis)
    computed = bigsearch.LAS(store_path_copy(tmp_path, X, y, kind), pi=0.08, prune=True, block_rows=64)
    computed.tell(start(y), 1)
    computed.sync()
    assert computed.pruning.summaries_from == "computed: the store has none"
    a, b = stored.pruning.summaries, computed.pruning.summaries
    assert np.array_equal(a.start, b.start) and np.array_equal(a.deg_min, b.deg_min)
    assert np.allclose(a.centre, b.centre, rtol=0, atol=1e-12) and np.allclose(a.radius, b.radius, atol=1e-12)


def store_path_copy(tmp_path, X, y, kind):
    path = store_path(tmp_path, "plain", kind)
    bigsearch.create_store(path, X, y, chunk_rows=100, kind=kind)
    return path


def edit_x(path, kind, edit):
    """Change X as a user with plain zarr / h5py would (the summaries stay behind)."""
    if kind == "zarr":
        import zarr

        x = zarr.open_group(str(path), mode="r+")["X"]
        values = x[...]
        edit(values)
        x[...] = values
    else:
        import h5py

        with h5py.File(path, "r+") as f:
            values = f["X"][()]
            edit(values)
            f["X"][...] = values


def swap_rows(values):  # every column sum stays: only the blocks' degrees say X changed
    values[[5, 90]] = values[[90, 5]]


def scale_row(values):
    values[300] *= 1.5


@pytest.mark.parametrize("kind,edit", [("zarr", swap_rows), ("hdf5", swap_rows), ("zarr", scale_row)])
def test_summaries_of_an_older_x_are_not_used(data, tmp_path, kind, edit):
    X, y = data
    path = summarized(tmp_path, X, y, kind)
    edit_x(path, kind, edit)
    full = bigsearch.LAS(path, pi=0.08)
    full.tell(start(y), 1)
    expected = run_top(full, y, 30)
    s, got = pruned_run(path, y)
    assert s.pruning.summaries_from == "computed: X changed since the stored summaries were written"
    assert got == expected


def test_plain_readers_still_read_x_and_other_block_sizes_compute(data, tmp_path):
    import h5py
    import zarr

    X, y = data
    z, h = summarized(tmp_path, X, y, "zarr"), summarized(tmp_path, X, y, "hdf5")
    assert np.array_equal(zarr.open_group(str(z), mode="r")["X"][...], X)
    with h5py.File(h, "r") as f:
        assert np.array_equal(f["X"][()], X) and GROUP in f
    s = bigsearch.LAS(z, pi=0.08, prune=True, block_rows=128)
    s.sync()
    assert s.pruning.summaries_from == "computed: the store has summaries of blocks of 64 rows"


def unlabeled_f(search, X, u):
    """f at u of every unlabeled row (NumPy), -inf for labeled ones."""
    p = search.params
    f = p.pi * p.w0 / (1 + p.w0) + (X @ u) / (X @ X.sum(axis=0)) / (1 + p.w0)
    return np.where(search._label < 0, f, -np.inf)


def test_bound_kernel_is_the_numpy_formula_and_bounds_f(data, store_factory):
    """The kernel's bounds are the NumPy formula's (to rounding, which the margin covers),
    with blocks at several versions, and bound every unlabeled row's f at the new u."""
    X, y = data
    path = store_factory(X, y, "zarr", "float64", 100)
    s = bigsearch.LAS(path, pi=0.08, prune=True, block_rows=64)
    s.tell(start(y), 1)
    run_top(s, y, 8)
    pr = s.pruning.pruner
    assert (pr.table_count > 0).sum() > 2 and pr.table_count.sum() == pr.sm.n_blocks
    s.tell(int(np.flatnonzero(s._label < 0)[0]), 0)
    s._sync()
    u = s.pruning.u()
    kernel, ref = pr.bounds(u), pr.reference_bounds(u)
    assert np.array_equal(np.isinf(kernel), np.isinf(ref)) and np.isfinite(kernel).any()
    fin = np.isfinite(ref)
    assert np.all(np.abs(kernel[fin] - ref[fin]) <= 1e-12 * np.abs(ref[fin]))
    assert np.all(np.maximum.reduceat(unlabeled_f(s, X, u), pr.sm.start) <= kernel)


def test_groups_of_blocks_bound_their_rows_and_keep_the_order(store_factory):
    """Groups of 3 blocks (instead of 64, so that a small store has many): a pruned search
    keeps the full pass's queries; at each query every group's bound holds for its rows,
    and the blocks come in the order of min(own bound, group's bound), ties to the lower
    index, as a full sort of those gives."""
    from bigsearch.engine.pruning.block_summaries import group_summaries
    from bigsearch.engine.pruning.las import Descending, GroupedOrder

    X, y = tight_blocks(3000, 12, 0.02, seed=4)
    path = store_factory(X, y, "zarr", "float32", 700)
    full, pruned = (bigsearch.LAS(path, pi=0.02, prune=prune, block_rows=64) for prune in (False, True))
    for s in (full, pruned):
        s.tell(start(y), 1)
        s.sync()
    pr = pruned.pruning.pruner
    gs = pr.sm.groups = group_summaries(pr.sm, 3)
    row_starts = pr.sm.start[gs.start]            # each group's rows: a box, balls and degrees hold them
    group = np.repeat(np.arange(gs.n_blocks), np.diff(np.append(row_starts, len(X))))
    x = X.astype(np.float32).astype(np.float64)   # the stored rows
    D = x - gs.centre[group]
    Z = D @ gs.basis
    tol = 1e-13 * np.linalg.norm(x, axis=1).max()
    assert np.all((gs.lo[group] - tol <= Z) & (Z <= gs.hi[group] + tol))
    assert np.all(np.linalg.norm(D - Z @ gs.basis.T, axis=1) <= gs.radius_perp[group] + tol)
    assert np.all(np.linalg.norm(D, axis=1) <= gs.radius[group] + tol)
    assert np.all(np.linalg.norm(x, axis=1) <= gs.norm_max[group] + tol)
    deg = pruned.backend.gather("deg")
    assert np.all((gs.deg_min[group] <= deg) & (deg <= gs.deg_max[group]))
    checked = 0
    for _ in range(25):
        u = pruned.pruning.u()
        grouped = GroupedOrder(pr, pr.version_terms(u))
        f_max = np.maximum.reduceat(unlabeled_f(pruned, X, u), pr.sm.start)
        assert np.all(np.maximum.reduceat(f_max, gs.start) <= grouped.group_bound)
        effective = np.minimum(pr.bounds(u), np.repeat(grouped.group_bound, gs.stop - gs.start))
        plain, count = Descending(effective), 1
        while True:
            a, b = grouped.next(count, -np.inf), plain.next(count, -np.inf)
            assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
            if not len(a[0]):
                break
            checked, count = checked + len(a[0]), count * 2
        q = pruned.ask()
        assert q == full.ask()
        for s in (full, pruned):
            s.tell(q, int(y[q]))
    assert checked > 25 * 30


def test_descending_order_is_the_stable_sort():
    """The lazily sorted order of blocks is the full stable sort's (ties, -inf and NaN
    blocks dropped), as far as any head asks, whatever the floor."""
    from bigsearch.engine.pruning.las import Descending

    rng = np.random.default_rng(3)
    bound = np.round(rng.normal(size=5000), 1)           # many ties
    bound[rng.choice(5000, 300, replace=False)] = -np.inf
    bound[rng.choice(5000, 10, replace=False)] = np.nan
    bound[:3] = np.inf
    full = np.argsort(-np.where(np.isnan(bound), -np.inf, bound), kind="stable")
    full = full[np.where(np.isnan(bound), -np.inf, bound)[full] > -np.inf]
    for stop in (1, 2, 63, 64, 65, 700, 5000, 6000):
        assert np.array_equal(Descending(bound).head(stop, -np.inf), full[:stop])
    for floor in (1.0, 0.0, -2.5):
        order = Descending(bound)
        above = full[bound[full] >= floor]
        head = order.head(1, floor)
        for stop in (5, 80, 1000, 6000):
            head = order.head(stop, floor)
            assert np.array_equal(head[: len(above)], above[:stop])


def test_unlabeled_maxima_are_numpys():
    from bigsearch.kernels.pruning import unlabeled_maxima

    rng = np.random.default_rng(1)
    f, label = rng.normal(size=1000), rng.choice(np.array([-1, 0, 1], np.int8), 1000, p=[0.5, 0.3, 0.2])
    label[:64] = 0                                       # a block with no unlabeled row: -inf
    start = np.arange(0, 1000, 64)
    stop = np.minimum(start + 64, 1000)
    expected = np.maximum.reduceat(np.where(label < 0, f, -np.inf), start)
    assert np.array_equal(unlabeled_maxima(f, label, start, stop, np.empty(len(start))), expected)
    assert expected[0] == -np.inf


def test_only_the_placement_asks_where_the_caches_live():
    """The pruners of LAS, WNAS and BLR state their method's math; whether their caches
    live here or per chunk (the backend's ``in_process``) is decided once, by
    engine/pruning/placement.py, and no pruner keeps or reads a flag of its own for it."""
    import ast
    from pathlib import Path

    asked = []
    for path in sorted((Path(bigsearch.__file__).parent / "engine" / "pruning").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if path.name != "placement.py" and isinstance(node, ast.Attribute) and (
                    node.attr == "in_process" or (node.attr == "local" and isinstance(node.value, ast.Name)
                                                  and node.value.id == "self")):
                asked.append(f"{path.name}:{node.lineno} .{node.attr}")
    assert asked == []
