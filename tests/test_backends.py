"""The backend contract (backends/base.py), one suite that every backend runs: per-point
arrays, chunk steps in chunk order, state-only calls, and what the engine sees of them.
A new backend adds a subclass of BackendTests with its ``make``."""

import ast
from pathlib import Path

import numpy as np
import pytest

import bigsearch
from bigsearch.backends import Backend, ChunkStep, LocalBackend
from bigsearch.backends.distributed import DistributedBackend
from bigsearch.storage import open_store
from bigsearch.testing import clustered_points

from conftest import write_store


def rows_step(x, state, scale):
    """Writes a per-point value from X and returns the chunk's place and row sums."""
    state.value[:] = np.asarray(x, np.float64).sum(axis=1) * scale
    return state.chunk_id, state.start, state.stop, float(state.value.sum())


def label_count(state, threshold):
    return state.chunk_id, int((state.value > threshold).sum())


ROWS = ChunkStep(rows_step, from_scratch=True)


@pytest.fixture(scope="module")
def data():
    return clustered_points(230, 5, prevalence=0.1, seed=3)


CHUNKINGS = [1, 7, 230]


def pytest_generate_tests(metafunc):
    """Every test of a backend on stores of one-row chunks, chunks that do not divide n and
    one chunk; an engine on the backend on those its class names (``engine_chunkings``)."""
    if "chunk_rows" in metafunc.fixturenames:
        rows = CHUNKINGS
        if metafunc.function.__name__ == "test_an_engine_on_it_asks_what_the_local_engine_asks":
            rows = metafunc.cls.engine_chunkings
        metafunc.parametrize("chunk_rows", rows, ids=lambda c: f"chunk{c}")


class BackendTests:
    """What every backend must do; subclasses give ``make(store)``."""

    engine_chunkings = CHUNKINGS

    def make(self, store):
        raise NotImplementedError

    @pytest.fixture
    def backend(self, tmp_path, data, chunk_rows):
        store = open_store(write_store(tmp_path, *data, dtype="float64", chunk_rows=chunk_rows))
        backend = self.make(store)
        yield backend
        backend.close()

    def test_satisfies_the_protocol(self, backend):
        assert isinstance(backend, Backend) and isinstance(backend.name, str)

    def test_alloc_assign_gather(self, backend, data):
        n = len(data[0])
        backend.alloc("label", np.int8, -1)
        backend.alloc("value", np.float64, 0.5)
        np.testing.assert_array_equal(backend.gather("label"), np.full(n, -1, np.int8))
        values = np.arange(n, dtype=np.float64)
        backend.assign("value", values)
        out = backend.gather("value")
        np.testing.assert_array_equal(out, values)
        assert out.dtype == np.float64 and not out.flags.writeable

    def test_map_runs_every_chunk_in_order(self, backend, data):
        X = data[0]
        backend.alloc("value", np.float64, 0.0)
        parts = backend.map(ROWS, 2.0)
        store = backend.store
        assert [p[:3] for p in parts] == [(j, a, b) for j, (a, b) in enumerate(store.chunks)]
        expected = 2.0 * store.read_rows(np.arange(len(X))).astype(np.float64).sum(axis=1)
        np.testing.assert_allclose(backend.gather("value"), expected, rtol=1e-15)
        np.testing.assert_allclose([p[3] for p in parts], [expected[a:b].sum() for a, b in store.chunks])

    def test_map_state_reads_only_the_given_chunks(self, backend):
        backend.alloc("value", np.float64, 0.0)
        backend.map(ROWS, 1.0)
        ids = list(range(backend.store.n_chunks))[::-2]
        out = backend.map_state(label_count, ids, 0.0)
        values = backend.gather("value")
        assert out == [(j, int((values[a:b] > 0).sum())) for j, (a, b) in ((j, backend.store.chunks[j]) for j in ids)]

    def test_map_chunks_runs_a_step_on_the_given_chunks_only(self, backend, data):
        """``map_chunks``: the step on the chunks asked for (where they live), their results
        in the order asked; the other chunks' state untouched."""
        backend.alloc("value", np.float64, -1.0)
        store = backend.store
        ids = list(range(store.n_chunks))[::-2]
        parts = backend.map_chunks(ROWS, ids, 3.0)
        assert [p[:3] for p in parts] == [(j, *store.chunks[j]) for j in ids]
        expected = np.full(store.n, -1.0)
        for j in ids:
            a, b = store.chunks[j]
            expected[a:b] = 3.0 * store.read_rows(np.arange(a, b)).astype(np.float64).sum(axis=1)
        np.testing.assert_allclose(backend.gather("value"), expected, rtol=1e-15)
        assert isinstance(backend.in_process, bool)

    def test_an_engine_on_it_asks_what_the_local_engine_asks(self, backend, data):
        X, y = data
        path = backend.store.path
        with bigsearch.LAS(path, pi=0.1, alpha=0.01, backend=self.engine_backend(backend)) as a, \
                bigsearch.LAS(path, pi=0.1, alpha=0.01) as b:
            for s in (a, b):
                s.tell(int(np.flatnonzero(y)[0]), 1)
            for _ in range(5):
                i = a.ask()
                assert i == b.ask()
                a.tell(i, int(y[i]))
                b.tell(i, int(y[i]))
            np.testing.assert_allclose(a.f, b.f, rtol=1e-12, atol=1e-300)

    def engine_backend(self, backend):
        raise NotImplementedError


class TestLocalBackend(BackendTests):
    def make(self, store):
        return LocalBackend(store, n_threads=2)

    def engine_backend(self, backend):
        return "local"


class TestDistributedBackend(BackendTests):
    # One-row chunks on the cluster: test_las_exact_distributed.py's engines against the dense
    # reference (here an engine on 230 one-row chunks took a minute on two loaded cores)
    engine_chunkings = [7, 230]

    @pytest.fixture(autouse=True)
    def _client(self, client):
        self.client = client

    def make(self, store):
        return DistributedBackend(store, self.client)

    def engine_backend(self, backend):
        return self.client


def declared_steps(tree):
    """The functions a module declares as chunk steps (``NAME = ChunkStep(function, ...)``)."""
    return {node.value.args[0].id for node in ast.walk(tree)
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
            and getattr(node.value.func, "id", None) == "ChunkStep" and isinstance(node.value.args[0], ast.Name)}


def own_returns(fn):
    """The return statements of ``fn`` itself (not of functions defined inside it)."""
    todo, out = list(fn.body), []
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Return):
            out.append(node)
        if not isinstance(node, (ast.FunctionDef, ast.Lambda)):
            todo += ast.iter_child_nodes(node)
    return out


def bare_tuple_returns(tree, names):
    """(function, line) of each ``return (a, b)`` / ``return tuple(...)`` in the functions ``names``."""
    found = []
    for fn in ast.walk(tree):
        if isinstance(fn, ast.FunctionDef) and fn.name in names:
            for node in own_returns(fn):
                v = node.value
                if isinstance(v, ast.Tuple) or (isinstance(v, ast.Call) and getattr(v.func, "id", None) == "tuple"):
                    found.append((fn.name, node.lineno))
    return sorted(found)


def test_chunk_steps_return_named_partials():
    """Partials travel from workers to the driver and are read by field name (NamedTuples),
    never as bare tuples read by position."""
    package = Path(bigsearch.__file__).parent
    found, steps = [], 0
    for path in sorted(package.rglob("*.py")):
        tree = ast.parse(path.read_text())
        names = declared_steps(tree)
        steps += len(names)
        found += [f"{path.relative_to(package)}:{line} {fn}" for fn, line in bare_tuple_returns(tree, names)]
    assert steps >= 15 and found == []
    example = ast.parse("def f(x):\n    def g():\n        return 1, 2\n    return (x, g())\nF = ChunkStep(f)\n")
    assert bare_tuple_returns(example, declared_steps(example)) == [("f", 4)]
