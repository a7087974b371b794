"""The method contract: the registry, the parameters records, and a method added the
documented way (one class, one registry line) running through simulate and sessions."""

import dataclasses
import inspect

import numpy as np
import pytest

import bigsearch
from bigsearch import simulate
from bigsearch.backends import Backend, ChunkStep, StepCall
from bigsearch.engine import METHODS, ChunkedSearch, MethodSpec, method_spec
from bigsearch.engine.core.base import ActiveSearch, PointArray
from bigsearch.engine.core.params import (
    AGRParams,
    DriftCheck,
    LASParams,
    Options,
    Params,
    RandomParams,
    WNASParams,
)
from bigsearch.engine.core.registry import plan_methods
from bigsearch.engine.core.select import ChunkPartials
from bigsearch.errors import ParameterError
from bigsearch.kernels.common import TOP_K
from bigsearch.testing import clustered_points

from conftest import chunkings, run_queries, write_store


@pytest.fixture(scope="module")
def data():
    return clustered_points(60, 5, prevalence=0.2, seed=4, spread=0.8)


@pytest.fixture
def store(tmp_path, data):
    return write_store(tmp_path, *data, chunk_rows=7)


# -- the registry ------------------------------------------------------------------------
@pytest.mark.parametrize("name", list(METHODS))
def test_every_entry_matches_its_class(name, store):
    spec = METHODS[name]
    cls = spec.cls
    assert cls.method == name and issubclass(cls, ActiveSearch)
    assert spec.ranks == (cls._top is not ActiveSearch._top)
    assert spec.sessions == (issubclass(cls, ChunkedSearch) and cls._restore is not ChunkedSearch._restore)
    (planned,) = plan_methods([name], {"pi": 0.2, "anchors": 5}, seed=3)
    with planned.create(store, backend="local") as search:
        assert isinstance(search.params, Params) and set(search.params.names()) <= set(spec.settings())
        assert dataclasses.is_dataclass(search.params) and search.params.__dataclass_params__.frozen
    # the options record declared in the registry is the constructor's keywords, defaults included
    assert issubclass(spec.options, Options) and spec.options.__dataclass_params__.frozen
    assert {f.name: f.default for f in dataclasses.fields(spec.options)} == constructor_options(cls)


def constructor_options(cls):
    """The keyword-only arguments of a method's constructor and their defaults, but where it runs."""
    where = ("backend", "n_threads", "store_options")
    return {name: p.default for name, p in inspect.signature(cls.__init__).parameters.items()
            if p.kind is p.KEYWORD_ONLY and name not in where}


def test_a_plan_passes_only_what_a_method_takes(store):
    options = {"pi": 0.2, "alpha": 0.5, "anchors": 6, "neighbors": 2}
    (w,) = plan_methods(["wnas"], options)
    las, r = plan_methods(["las", "random"], options, seed=5)
    with w.create(store, n_threads=1) as w, las.create(store, n_threads=1) as las, r.create(store, n_threads=1) as r:
        assert w.params.as_dict() == {}
        assert las.params.as_dict() == {"pi": 0.2, "w0": 1 / 60, "eta": 0.5, "alpha": 0.5}
        assert r.params.as_dict() == {"seed": 5}


def test_unknown_methods_and_missing_capabilities():
    with pytest.raises(ParameterError, match="unknown method 'nope'; choose from las, wnas, agr, asg, random"):
        method_spec("nope")
    with pytest.raises(ParameterError, match="unknown method for sessions 'agr'; choose from las, wnas"):
        method_spec("agr", need="sessions")
    with pytest.raises(ParameterError, match="pi does not apply to wnas, which takes prune, block_rows"):
        METHODS["wnas"].check_settings({"pi": 0.1, "eta": None})
    METHODS["las"].check_settings({"pi": 0.1, "eta": None, "check_every": 5})


def test_sessions_refuse_other_methods_parameters(store, tmp_path):
    with pytest.raises(ParameterError, match="alpha does not apply to wnas"):
        bigsearch.Session.create(store, tmp_path / "s", method="wnas", alpha=0.1)
    with pytest.raises(ParameterError, match="for sessions 'random'"):
        bigsearch.Session.create(store, tmp_path / "s", method="random")
    assert not (tmp_path / "s").exists()


def test_backends_and_steps_declare_the_contract(store):
    with bigsearch.LAS(store, pi=0.2, n_threads=2) as s:
        assert isinstance(s.backend, Backend)
        s.sync()
        step, args = s.rebuild_recipe()
        assert isinstance(step, ChunkStep) and not step.from_scratch      # it updates state it did not create
        parts = s.backend.map(step, *args)
        assert all(isinstance(p, ChunkPartials) for p in parts) and len(parts) == s.store.n_chunks


# -- parameters records ------------------------------------------------------------------
@pytest.mark.parametrize("make, message", [
    (lambda: DriftCheck(check_every=-1), "check_every must be >= 0"),
    (lambda: DriftCheck(check_every=2.5), "check_every must be an integer"),
    (lambda: DriftCheck(drift_tol=-1e-3), "drift_tol = -0.001 is outside"),
    (lambda: DriftCheck(drift_tol=float("nan")), "drift_tol = nan is outside"),
    (lambda: AGRParams(anchors=0), "anchors must be >= 1"),
    (lambda: AGRParams(anchors=4, neighbors=5), "neighbors <= anchors"),
    (lambda: AGRParams(gamma=-1), "gamma = -1.0 is outside"),
    (lambda: AGRParams(lae_iterations=True), "lae_iterations must be an integer"),
    (lambda: RandomParams(seed=-2), "seed must be >= 0"),
    (lambda: LASParams(pi=0.1, w0=0.0), "w0 = 0.0 is outside"),
])
def test_parameters_are_validated(make, message):
    with pytest.raises(ParameterError, match=message):
        make()


def test_parameters_are_frozen_and_typed():
    p = AGRParams(anchors=np.int64(8), gamma=1)
    assert p.as_dict() == {"anchors": 8, "neighbors": 3, "gamma": 1.0, "lae_iterations": 10,
                           "kmeans_iterations": 20, "kmeans_seed": 0}
    assert type(p.anchors) is int and type(p.gamma) is float
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.gamma = 2.0
    assert WNASParams().as_dict() == {} and DriftCheck(None).check_every is None


def test_las_validates_its_drift_check(store):
    with pytest.raises(ParameterError, match="check_every must be >= 0"):
        bigsearch.LAS(store, pi=0.2, check_every=-5)
    with bigsearch.LAS(store, pi=0.2, check_every=0, drift_tol=0) as s:
        assert s.engine_options() == {"check_every": 0, "drift_tol": 0.0}


# -- a method added the documented way -------------------------------------------------------
# docs/architecture.md's worked example, as written there, with a NumPy chunk step
# standing in for the numba kernel: one module's worth of code and one registry line.
def centroid_step(x, state, c, label_idx, label_val):
    state.apply_labels(label_idx, label_val)
    return ChunkPartials(*centroid_scores(x, c, state.start, state.label, state.f))


CENTROID = ChunkStep(centroid_step, from_scratch=True)   # f depends on x and c only


@dataclasses.dataclass(frozen=True)
class CentroidParams(Params):                # no fields: no parameters
    pass


class Centroid(ChunkedSearch):
    """f_i = x_i . (mean of the positives - mean of the negatives)."""

    method = "centroid"
    POINT_STATE = (PointArray("label", np.int8, -1), PointArray("f", np.float64, 0.0))

    def __init__(self, store, *, backend="local", n_threads=None, store_options=None):
        super().__init__(store, CentroidParams(), backend=backend, n_threads=n_threads,
                         store_options=store_options)

    def _update(self, idx, lab):                 # one pass per group of new labels
        step, args = self.rebuild_recipe()
        self._pass(step, *args)

    def rebuild_recipe(self):                    # a chunk's whole state from the global state
        idx, lab = self.history_arrays()
        return StepCall(CENTROID, (self._direction(idx, lab), idx, lab))

    def _direction(self, idx, lab):
        X = self.store.read_rows(idx).astype(np.float64)
        pos, neg = X[lab == 1], X[lab == 0]
        return (pos.mean(axis=0) if len(pos) else 0.0) - (neg.mean(axis=0) if len(neg) else 0.0) + np.zeros(X.shape[1])

    def _restore(self, meta):                    # after from_state: recompute f (sessions)
        self._update(*self.history_arrays())


def centroid_scores(x, c, offset, label, f):
    """The kernel's contract in NumPy: f of the chunk's rows, and its ChunkPartials fields."""
    f[:] = np.asarray(x, np.float64) @ c
    unl = np.flatnonzero(label < 0)
    best = unl[np.lexsort((unl, -f[unl]))][:TOP_K]
    cand, top_f = np.full((1, TOP_K), -1, np.int64), np.full((1, TOP_K), -np.inf)
    cand[0, :len(best)], top_f[0, :len(best)] = best + offset, f[best]
    kth = top_f[:, -1].copy()
    return np.array([f[unl].sum(), 0.0, len(unl)]), cand, np.where(cand >= 0, top_f, 0.0), np.zeros((1, TOP_K)), kth


@pytest.fixture
def centroid_registered(monkeypatch):
    monkeypatch.setitem(METHODS, "centroid", MethodSpec("centroid", f"{__name__}:Centroid", "difference of class means",
                                                        sessions=True))


def dense_centroid_queries(X, y, start, steps):
    labeled = dict(start)
    out = []
    for _ in range(steps):
        idx = np.array(sorted(labeled))
        lab = np.array([labeled[i] for i in idx])
        pos, neg = X[idx[lab == 1]], X[idx[lab == 0]]
        c = (pos.mean(axis=0) if len(pos) else 0) - (neg.mean(axis=0) if len(neg) else 0)
        f = np.where(np.isin(np.arange(len(X)), idx), -np.inf, X.astype(np.float64) @ c)
        i = int(np.argmax(f))
        out.append(i)
        labeled[i] = int(y[i])
    return out


@pytest.mark.parametrize("chunk_rows", chunkings(60))
def test_a_registered_method_runs_exactly_through_simulate(centroid_registered, tmp_path, data, chunk_rows):
    X, y = data
    path = write_store(tmp_path, X, y, dtype="float64", chunk_rows=chunk_rows)
    start = [(int(np.flatnonzero(y == 1)[0]), 1)]
    record = simulate(path, "centroid", budget=12, init=start)
    assert [i for i, _ in record["queries"]] == dense_centroid_queries(X, y, start, 12)
    assert record["params"] == {}


def test_a_registered_method_survives_a_session(centroid_registered, tmp_path, data):
    X, y = data
    path = write_store(tmp_path, X, y, dtype="float64")
    with bigsearch.Session.create(path, tmp_path / "s", method="centroid", checkpoint_every=3) as s:
        s.tell(int(np.flatnonzero(y == 1)[0]), 1)
        for _ in range(7):
            i = s.ask()
            s.tell(i, int(y[i]))
        expected = s.top(5)
        # what `session next` and `status` ask of any method: nothing it does not declare
        assert s.reads() is None and not s.search.f_costs_a_pass() and s.remaining()["unlabeled"] == 52
    with bigsearch.Session.open(tmp_path / "s", readonly=True) as s:
        np.testing.assert_array_equal(s.top(5).indices, expected.indices)
        with Centroid(path) as fresh:
            fresh.tell([i for i, _ in s.history], [lab for _, lab in s.history])
            assert run_queries(fresh, y, 3) == run_queries(s.search, y, 3)


def test_a_registered_method_is_served(centroid_registered, tmp_path, data):
    """The labelling page's labeler takes any session method; scores it cannot explain
    (serve/explain.py knows LAS's and WNAS's) go without the explanation."""
    from bigsearch.serve.labeler import Labeler
    X, y = data
    path = write_store(tmp_path, X, y, dtype="float64")
    with bigsearch.Session.create(path, tmp_path / "s", method="centroid") as s:
        s.tell(int(np.flatnonzero(y == 1)[0]), 1)
        labeler = Labeler(s, prefetch=True)
        try:
            for _ in range(3):
                labeler.settle()            # both answers' next items computed ahead
                item = labeler.view()["item"]
                assert item["index"] == s.candidates(1)[0]["index"] and item["why"] is None
                labeler.answer(item["index"], int(y[item["index"]]))
            assert s.n_labels == 4 and labeler.adopted == 3
        finally:
            labeler.close()
