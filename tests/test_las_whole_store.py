"""LAS's and BLR's pass over the whole store at once (engine/core/steps.py
las_update_over_store, engine/methods/blr.py blr_update_over_store: the local backend with
chunk maps held): the same per-point values, partials and queries as the pass chunk by
chunk, bit for bit, with chunks of several work items, on any number of threads; and the
chunk-by-chunk path is no longer what a held store's iteration runs."""

import numpy as np
import pytest

import bigsearch
from bigsearch.backends.distributed import ShardBackend
from bigsearch.backends.local import LocalBackend
from bigsearch.engine.core.steps import LAS_UPDATE, ItemPlan, work_items
from bigsearch.kernels.common import addresses_of, pad3
from bigsearch.kernels.items import ITEM_ROWS, chunk_partials, items_partials, new_items
from bigsearch.kernels.las import block_buffer, update_items, update_scores
from bigsearch.synthetic import clustered_points

from conftest import KINDS


@pytest.fixture(scope="module")
def data():
    """20,000 points: chunks of 9,000 rows hold two work items and a part of a third."""
    X, y = clustered_points(20_000, 6, prevalence=0.02, seed=21, spread=0.8)
    return X, y


METHODS = {
    "las alpha 0": lambda store, n_threads: bigsearch.LAS(store, alpha=0.0, pi=0.05, n_threads=n_threads),
    "las alpha 0.05": lambda store, n_threads: bigsearch.LAS(store, alpha=0.05, pi=0.05, n_threads=n_threads),
    "blr greedy": lambda store, n_threads: bigsearch.BLR(store, n_threads=n_threads),
    "blr ucb": lambda store, n_threads: bigsearch.BLR(store, acquisition="ucb", n_threads=n_threads),
    "blr thompson": lambda store, n_threads: bigsearch.BLR(store, acquisition="thompson", n_threads=n_threads),
}


def run(path, y, hold, method, n_threads=2, steps=12):
    """Queries, then every per-point array and the partials' sums, maps held or not."""
    store = bigsearch.open_store(path)
    store.hold_maps = hold
    search = METHODS[method](store, n_threads)
    search.tell([int(np.flatnonzero(y)[0]), int(np.flatnonzero(y == 0)[0])], [1, 0])
    queries = []
    for _ in range(steps):
        queries.append(search.ask())
        search.tell(queries[-1], int(y[queries[-1]]))
    search.sync()
    arrays = [np.array(search.backend.gather(a.name)) for a in search.POINT_STATE]
    summary = search._summary
    out = queries, arrays, (summary.sum_f, summary.sum_im, summary.n_unlabeled)
    search.close()
    return out


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("method", METHODS)
def test_whole_store_pass_equals_chunk_by_chunk_bit_for_bit(store_factory, data, kind, method):
    X, y = data
    path = store_factory(X, y, kind, "float32", 9_000)
    per_chunk = run(path, y, False, method)
    for n_threads in (1, 2, 3):
        whole = run(path, y, True, method, n_threads)
        assert whole[0] == per_chunk[0]
        for a, b in zip(whole[1], per_chunk[1]):
            np.testing.assert_array_equal(a, b)
        assert whole[2] == per_chunk[2]


@pytest.mark.parametrize("method", ["las alpha 0.05", "blr greedy"])
def test_held_maps_run_no_step_chunk_by_chunk(store_factory, data, monkeypatch, method):
    """With the maps held, an iteration's update is one call of the kernel per thread: the
    backend runs no update step one chunk at a time (it did, one task per chunk, before;
    BLR's refits of its prior, early on, still go chunk by chunk)."""
    X, y = data
    path = store_factory(X, y, "zarr", "float32", 2_000)
    search = METHODS[method](path, None)
    search.tell(int(np.flatnonzero(y)[0]), 1)
    search.ask()
    per_chunk = []
    real = LocalBackend._run
    monkeypatch.setattr(
        LocalBackend, "_run", lambda self, step, st, args: (per_chunk.append(step), real(self, step, st, args))[1]
    )
    for _ in range(3):
        search.tell(search.ask(), 0)
    updates = [step for step in per_chunk if step.run.__name__.endswith("update_step")]
    assert search.store.hold_maps and updates == [] and (method.startswith("blr") or per_chunk == [])
    search.close()


def test_held_chunks_and_their_plan_are_made_once_while_the_maps_are_held(store_factory, data, monkeypatch):
    """A pass over a held store takes no chunk map and makes no plan of work items anew:
    both are made at the first pass and kept until the maps are released (then made
    again); a store that does not hold its maps has none."""
    X, y = data
    path = store_factory(X, y, "zarr", "float32", 2_000)
    plans = []
    real = ItemPlan.of
    monkeypatch.setattr(ItemPlan, "of", classmethod(lambda cls, chunks: plans.append(1) or real(chunks)))
    search = bigsearch.LAS(path, alpha=0.01, pi=0.05)
    search.tell(int(np.flatnonzero(y)[0]), 1)
    chunks = search.store.held_chunks()
    assert len(chunks) == search.store.n_chunks and search.store.held_chunks() is chunks
    for _ in range(3):
        search.tell(search.ask(), 0)
    assert search.store.held_chunks() is chunks and len(plans) == 1
    search.store.release_maps()
    search.tell(search.ask(), 0)
    assert search.store.held_chunks() is not chunks and len(plans) == 2
    search.store.hold_maps = False
    assert search.store.held_chunks() is None
    search.close()


def test_update_items_equals_update_scores_per_chunk_with_ties():
    """The kernel alone: chunks cut into several items, many equal scores (repeated rows):
    each chunk's partials, candidates and their order among ties included, are those of
    update_scores over that chunk."""
    rng = np.random.default_rng(8)
    base = np.abs(rng.random((50, 5))).astype(np.float32)
    X = base[rng.integers(0, 50, 3 * ITEM_ROWS + 700)]  # every row repeated: scores tie
    X.flags.writeable = False
    cuts = [0, ITEM_ROWS + 300, 2 * ITEM_ROWS + 301, len(X)]
    n = len(X)
    V = rng.normal(size=(3, 5)) * 1e-2
    c = np.array([1e-3])
    label = np.full(n, -1, np.int8)
    label[::613] = 1
    deg = X.astype(np.float64) @ np.ones(5) + 1.0
    J0 = rng.random(n)
    args = (0.5, 1e-3, 0.02, 0.7)
    J, f, im = J0.copy(), np.zeros(n), np.zeros(n)
    lengths = np.diff(cuts)
    items = work_items(lengths)
    sums, vals, idx = new_items(len(items))
    chunks = [X[a:b] for a, b in zip(cuts[:-1], cuts[1:])]
    update_items(
        chunks[0],
        addresses_of(chunks),
        np.array(cuts),
        items,
        np.zeros(1, np.int64),
        pad3(V),
        3,
        c,
        label,
        deg,
        J,
        f,
        im,
        *args,
        sums,
        vals,
        idx,
    )
    first = np.searchsorted(items[:, 0], np.arange(len(lengths) + 1))
    stacked = items_partials(sums.copy(), vals.copy(), idx.copy(), first, np.array(cuts), f, im)
    for j, (a, b) in enumerate(zip(cuts[:-1], cuts[1:])):
        Jj, fj, imj = J0[a:b].copy(), np.zeros(b - a), np.zeros(b - a)
        expected = update_scores(X[a:b], V, c, a, label[a:b], deg[a:b], Jj, fj, imj, *args)
        got = chunk_partials(sums, vals, idx, first[j], first[j + 1], a, f[a:b], im[a:b])
        for e, g, every in zip(expected, got, stacked):
            np.testing.assert_array_equal(g, e)
            np.testing.assert_array_equal(every[j], e)  # all chunks' partials in one call
        np.testing.assert_array_equal(J[a:b], Jj)
        np.testing.assert_array_equal(f[a:b], fj)
        assert len(set(fj[label[a:b] < 0])) < 60  # ties there were


def test_batches_of_many_labels_go_chunk_by_chunk(store_factory, data):
    """More labels than the fused kernel takes (their products go to BLAS chunk by chunk):
    the step declines the whole-store path, changing nothing, and the numbers agree."""
    X, y = data
    assert LAS_UPDATE.over_store([], {}, None, np.zeros((12, 6)), np.zeros(10), None, None, 0.5, 0.1, 0.1, 0.0) is None
    path = store_factory(X, y, "zarr", "float32", 9_000)
    out = []
    for hold in (True, False):
        store = bigsearch.open_store(path)
        store.hold_maps = hold
        search = bigsearch.LAS(store, alpha=0.05, pi=0.05)
        search.tell(int(np.flatnonzero(y)[0]), 1)
        batch = search.next_batch(20)
        search.tell(batch, [int(y[i]) for i in batch])
        out.append((search.ask(), np.array(search.f), np.array(search.J), np.array(search.impact)))
        search.close()
    assert out[0][0] == out[1][0]
    for a, b in zip(out[0][1:], out[1][1:]):
        np.testing.assert_array_equal(a, b)


def test_what_the_kernels_stream_starts_on_a_cache_line(store_factory, data):
    """V, the block buffers and the per-point arrays start on 64-byte lines (numba aligns
    to 32 bytes, NumPy to 16): off a line, every 512-bit load spans two lines, and a pass
    ran 1.3-1.5x slower on an AMD EPYC core, by where an allocation happened to fall."""
    for k, r in [(k, r) for k in range(1, 8) for r in (5, 33, 128, 1000)] * 3:
        V = pad3(np.ones((k, r)))
        assert V.ctypes.data % 64 == 0 and V.shape == (max(3, -(-k // 3) * 3), r)
        assert np.array_equal(V[:k], np.ones((k, r))) and not V[k:].any()
        assert block_buffer(k).ctypes.data % 64 == 0 and block_buffer(k).shape == (k, 1024)
    X, y = data
    store = bigsearch.open_store(store_factory(X, y, "zarr", "float32", 9000))
    for backend in (LocalBackend(store, 1), ShardBackend(store, range(1, 3), 1)):
        for name, dtype, fill in [("label", np.int8, -1), ("deg", np.float64, 0.5), ("f", np.float64, 0.0)]:
            backend.alloc(name, dtype, fill)
            whole = backend._arrays[name]
            assert whole.ctypes.data % 64 == 0 and whole.dtype == dtype and (whole == fill).all()
            assert len(whole) == backend.states[-1].stop - backend.states[0].start
            for st in backend.states:
                part = getattr(st, name)
                assert len(part) == st.stop - st.start and np.shares_memory(part, whole)
        backend.close()
