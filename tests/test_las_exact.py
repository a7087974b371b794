"""LAS against the independent dense reference: f, the impact factor and the queries,
for every store kind, dtype and chunking (1 row, 7 rows, all rows). On the local backend
here; test_las_exact_distributed.py runs the tests that take a backend on a dask cluster."""

import itertools

import numpy as np
import pytest

import bigsearch
from bigsearch.engine.core.steps import FUSED_LABELS, QuadraticForm, quadratic_forms
from bigsearch.engine.guidance.remaining import remaining_summary
from bigsearch.storage.encoding import read_only
from bigsearch.synthetic import clustered_points
from bigsearch.testing import brute_force_impact, dense_f, dense_J, dense_las_run, dense_wnas

from conftest import DTYPES, KINDS, chunkings, run_queries

RTOL = 1e-9
GRID = list(itertools.product(KINDS, DTYPES, chunkings(80)))


@pytest.fixture
def backend():
    """The backend under test (test_las_exact_distributed.py overrides it)."""
    return "local"


def rel_err(a, b):
    return np.abs(np.asarray(a) - b).max() / np.abs(b).max()


def stored_X(path):
    """X exactly as the engine reads it (float32 stores round the values)."""
    s = bigsearch.open_store(path)
    return s.read_rows(np.arange(s.n))


@pytest.mark.parametrize("kind,dtype,chunk_rows", GRID)
def test_f_and_impact_match_brute_force(backend, small_data, store_factory, kind, dtype, chunk_rows):
    X, y = small_data
    path = store_factory(X, y, kind, dtype, chunk_rows)
    Xs = stored_X(path)
    labels = np.full(len(y), -1)
    search = bigsearch.LAS(path, backend=backend, pi=0.2, eta=0.5, alpha=0.01)
    start = [int(np.flatnonzero(y)[0]), int(np.flatnonzero(y == 0)[0])]
    search.tell(start, [1, 0])
    labels[start] = [1, 0]
    for step in range(6):                         # checked at init and after updates
        f, im = brute_force_impact(Xs, labels, pi=0.2, eta=0.5)
        assert rel_err(search.f, f) < RTOL
        assert rel_err(search.impact, im) < RTOL
        i = search.ask()
        search.tell(i, int(y[i]))
        labels[i] = y[i]


@pytest.mark.parametrize("alpha", [0.0, 1e-2, 1.0])
@pytest.mark.parametrize("kind,dtype,chunk_rows", GRID)
def test_query_sequence_matches_dense(backend, small_data, store_factory, kind, dtype, chunk_rows, alpha):
    X, y = small_data
    path = store_factory(X, y, kind, dtype, chunk_rows)
    init = [int(np.flatnonzero(y)[3])]
    expected = dense_las_run(stored_X(path), y, init, 40, pi=0.15, eta=0.6, w0=0.02, alpha=alpha)
    search = bigsearch.LAS(path, backend=backend, pi=0.15, eta=0.6, w0=0.02, alpha=alpha)
    search.tell(init[0], 1)
    got = []
    for _ in range(40):
        i = search.ask()
        got.append(i)
        search.tell(i, int(y[i]))
    assert got == expected


@pytest.mark.parametrize("kind,dtype", list(itertools.product(KINDS, DTYPES)))
def test_asg_equals_las(backend, small_data, store_factory, kind, dtype):
    X, y = small_data
    path = store_factory(X, y, kind, dtype, 7)
    las = bigsearch.LAS(path, backend=backend, alpha=0.5)
    asg = bigsearch.ASG(path, alpha=0.5)                # dense, in memory: no backend
    start = int(np.flatnonzero(y)[0])
    for s in (las, asg):
        s.tell(start, 1)
    for _ in range(30):
        i, j = las.ask(), asg.ask()
        assert i == j
        assert rel_err(asg.f, las.f) < RTOL and rel_err(asg.impact, las.impact) < RTOL
        las.tell(i, int(y[i]))
        asg.tell(i, int(y[i]))


@pytest.mark.parametrize("kind,dtype,chunk_rows", GRID)
def test_wnas_matches_definition(backend, small_data, store_factory, kind, dtype, chunk_rows):
    X, y = small_data
    path = store_factory(X, y, kind, dtype, chunk_rows)
    Xs = stored_X(path)
    search = bigsearch.WNAS(path, backend=backend)
    labels = np.full(len(y), -1)
    first = int(np.flatnonzero(y)[0])
    search.tell(first, 1)
    labels[first] = 1
    for _ in range(25):
        f = dense_wnas(Xs, labels)
        np.testing.assert_allclose(search.f, f, rtol=0, atol=1e-12)
        expected = int(np.argmax(np.where(labels < 0, f, -np.inf)))
        i = search.ask()
        assert i == expected
        search.tell(i, int(y[i]))
        labels[i] = y[i]


def test_labels_told_together_equal_labels_told_one_by_one(backend, small_data, store_factory):
    """Several tells before an ask are applied in one pass (sequential Sherman-Morrison)."""
    X, y = small_data
    path = store_factory(X, y, "zarr", "float64", 7)
    batch = [3, 10, 40, 41, 77]
    one, many = bigsearch.LAS(path, backend=backend, pi=0.2), bigsearch.LAS(path, backend=backend, pi=0.2)
    one.tell(0, int(y[0]))
    many.tell(0, int(y[0]))
    one.ask()
    many.ask()
    for i in batch:
        one.tell(i, int(y[i]))
        one.ask()
    many.tell(batch, [int(y[i]) for i in batch])
    labels = np.full(len(y), -1)
    labels[[0, *batch]] = y[[0, *batch]]
    ref = dense_f(stored_X(path), labels, pi=0.2)
    assert rel_err(many.f, ref) < RTOL and rel_err(one.f, ref) < RTOL
    assert rel_err(many.J, one.J) < RTOL


def test_initial_labels_given_before_first_ask_use_one_initialization(backend, small_data, store_factory):
    X, y = small_data
    path = store_factory(X, y, "hdf5", "float64", 7)
    s = bigsearch.LAS(path, backend=backend, pi=0.2)
    s.tell([1, 2, 3], [int(y[1]), int(y[2]), int(y[3])])
    labels = np.full(len(y), -1)
    labels[[1, 2, 3]] = y[[1, 2, 3]]
    assert rel_err(s.f, dense_f(stored_X(path), labels, pi=0.2)) < RTOL


def test_no_labels_at_all(backend, small_data, store_factory):
    X, y = small_data
    path = store_factory(X, y, "zarr", "float64", 7)
    s = bigsearch.LAS(path, backend=backend, pi=0.2)
    ref = dense_f(stored_X(path), np.full(len(y), -1), pi=0.2)
    assert rel_err(s.f, ref) < RTOL
    assert 0 <= s.ask() < len(y)


def batch_at_alpha_0(path, y, labels, pi):
    """A LAS search at alpha = 0 whose last update was a batch (more labels than the fused
    kernel takes): its pass updated f, not J (engine/las.py, ``_update``)."""
    s = bigsearch.LAS(path, pi=pi, alpha=0.0)
    first = int(np.flatnonzero(y)[0])
    s.tell(first, 1)
    labels[first] = 1
    batch = s.next_batch(FUSED_LABELS + 4)
    s.tell(batch, [int(y[i]) for i in batch])
    labels[batch] = y[batch]
    s.sync()
    return s


@pytest.mark.parametrize("kind", KINDS)
def test_f_and_export_after_a_batch_at_alpha_0_rebuild_no_J(small_data, store_factory, passes, kind):
    """f needs no J: reading it (and the positives-left estimate from it) and exporting the
    state make no pass at all; the impact factor then makes the one J pass it needs, and
    every value is the dense reference's (counted passes, not timed)."""
    X, y = small_data
    path = store_factory(X, y, kind, "float64", 7)
    Xs, labels = stored_X(path), np.full(len(y), -1)
    s = batch_at_alpha_0(path, y, labels, pi=0.2)
    passes.clear()
    assert rel_err(s.f, dense_f(Xs, labels, pi=0.2)) < RTOL
    remaining_summary(s.f, s.labels, y[labels >= 0])
    state = s.export_state()
    assert passes == [] and state["meta"]["J_stale"]
    f, im = brute_force_impact(Xs, labels, pi=0.2)
    assert rel_err(s.impact, im) < RTOL
    assert [p.rebuilds_J for p in passes] == [True]
    assert rel_err(s.f, f) < RTOL and rel_err(s.impact, im) < RTOL and len(passes) == 1
    assert s.export_state()["meta"]["J_stale"] is False


@pytest.mark.parametrize("dtype,chunk_rows", list(itertools.product(DTYPES, chunkings(80))))
def test_initialization_computes_J_only_where_a_query_reads_it(small_data, store_factory, passes, dtype, chunk_rows):
    """At alpha = 0 the queries choose by f alone: initialization makes no J pass (an n r^2
    pass, as long as the Gram pass), the queries are the dense run's, and reading J or the
    impact factor then makes the one J pass they need. At alpha > 0 initialization makes
    exactly one, and J is the dense reference's (counted passes, not timed)."""
    X, y = small_data
    path = store_factory(X, y, "zarr", dtype, chunk_rows)
    Xs, first = stored_X(path), int(np.flatnonzero(y)[3])
    expected = dense_las_run(Xs, y, [first], 6, pi=0.15, eta=0.6, w0=0.02, alpha=0.0)
    s = bigsearch.LAS(path, pi=0.15, eta=0.6, w0=0.02)
    s.tell(first, 1)
    passes.clear()
    assert run_queries(s, y, 6) == expected
    assert not any(p.rebuilds_J for p in passes) and passes[0].step == "colsum_step"
    labels = np.full(len(y), -1)
    labels[[first, *expected]] = y[[first, *expected]]
    s.sync()                                      # the last label's pass
    passes.clear()
    assert rel_err(s.J, dense_J(Xs, labels, eta=0.6, w0=0.02)) < RTOL
    assert rel_err(s.impact, brute_force_impact(Xs, labels, pi=0.15, eta=0.6, w0=0.02)[1]) < RTOL
    assert [p.rebuilds_J for p in passes] == [True]
    s = bigsearch.LAS(path, pi=0.15, eta=0.6, w0=0.02, alpha=0.01)
    s.tell(first, 1)
    passes.clear()
    s.ask()
    assert [p.rebuilds_J for p in passes] == [False, False, True]
    labels = np.full(len(y), -1)
    labels[first] = 1
    assert rel_err(s.J, dense_J(Xs, labels, eta=0.6, w0=0.02)) < RTOL and len(passes) == 3


def test_initialization_computes_the_degrees_once(small_data, store_factory, monkeypatch):
    """The Gram pass computes every chunk's degrees and the J-and-scores pass right after it
    keeps them (one O(n r) pass less); a restored search, whose chunks have none yet,
    computes them; f and the impact factor are the dense reference's (counted, not timed)."""
    from bigsearch.engine.core import steps

    X, y = small_data
    path = store_factory(X, y, "zarr", "float64", 7)
    rows = []
    real = steps.degrees
    monkeypatch.setattr(steps, "degrees", lambda x, s, deg: rows.append(len(x)) or real(x, s, deg))
    search = bigsearch.LAS(path, pi=0.2, eta=0.5, alpha=0.01)
    first = int(np.flatnonzero(y)[0])
    search.tell(first, 1)
    search.ask()
    assert sum(rows) == len(y)
    rows.clear()
    restored = bigsearch.LAS.from_state(path, search.export_state())
    assert sum(rows) == len(y)
    labels = np.full(len(y), -1)
    labels[first] = 1
    f, im = brute_force_impact(stored_X(path), labels, pi=0.2, eta=0.5)
    for s in (search, restored):
        assert rel_err(s.f, f) < RTOL and rel_err(s.impact, im) < RTOL


@pytest.mark.parametrize("dtype,chunk_rows", list(itertools.product(DTYPES, chunkings(90))))
def test_J_and_impact_over_several_column_blocks(store_factory, dtype, chunk_rows):
    """r = 70: J's products by blocks of 32, 32 and 6 columns of K^-1's Cholesky factor; J, f
    and the impact factor at initialization and after a query, against the dense reference."""
    X, y = clustered_points(90, 70, prevalence=0.2, seed=5, spread=0.8)
    path = store_factory(X, y, "zarr", dtype, chunk_rows)
    Xs, labels = stored_X(path), np.full(len(y), -1)
    s = bigsearch.LAS(path, pi=0.2, eta=0.5, alpha=0.01)
    for i in (int(np.flatnonzero(y)[0]), None):
        i = s.ask() if i is None else i
        s.tell(i, int(y[i]))
        labels[i] = y[i]
        f, im = brute_force_impact(Xs, labels, pi=0.2, eta=0.5)
        assert rel_err(s.J, dense_J(Xs, labels, eta=0.5)) < RTOL
        assert rel_err(s.f, f) < RTOL and rel_err(s.impact, im) < RTOL


@pytest.mark.parametrize("definite", [True, False])
@pytest.mark.parametrize("rows", [1, 7, 300, 4103])
def test_quadratic_forms_match_numpy(definite, rows):
    """x^T A x per row, through A's Cholesky factor (kernels/rows.py's x L over each block of
    rows; 4,103 rows: a block of 4,096 rows, then one of 7 in the same buffer) or, for an A
    that is not positive definite, through x A; against NumPy."""
    rng = np.random.default_rng(rows)
    r = 130
    B = rng.normal(size=(r, r))
    A = B @ B.T + r * np.eye(r) if definite else (B + B.T) / 2
    form = QuadraticForm.of(A)
    assert form.lower == definite
    x = read_only(rng.normal(size=(rows, r)).astype(np.float32))
    out = np.empty(rows)
    quadratic_forms(x, form, out)
    X = x.astype(np.float64)
    expected = np.einsum("ij,jk,ik->i", X, A, X)
    assert np.abs(out - expected).max() <= 1e-12 * np.abs(expected).max()
