"""Saving and restoring engine state, and the numerical health checks."""

import numpy as np
import pytest

import bigsearch
from bigsearch.testing import clustered_points, dense_f

from conftest import run_queries


@pytest.fixture
def store(store_factory):
    X, y = clustered_points(400, 10, prevalence=0.05, seed=21)
    return store_factory(X, y, "zarr", "float32", 37), y


@pytest.mark.parametrize("method", ["las", "wnas"])
def test_restored_search_continues_exactly(store, method):
    path, y = store
    cls = {"las": bigsearch.LAS, "wnas": bigsearch.WNAS}[method]
    kw = {"alpha": 0.05} if method == "las" else {}
    ref, first = cls(path, **kw), cls(path, **kw)
    for s in (ref, first):
        s.tell(int(np.flatnonzero(y)[0]), 1)
    run_queries(ref, y, 10)
    run_queries(first, y, 10)
    if method == "las":                 # reading K^-1 (a drift check, an explanation) changes no number
        first.sync()
        assert first.inverse_residual() < 1e-10 and first._inverse.k > 0
    state = first.export_state()
    first.close()
    restored = cls.from_state(path, state)
    np.testing.assert_array_equal(restored.f, ref.f)
    if method == "las":
        np.testing.assert_array_equal(restored.J, ref.J)
        np.testing.assert_array_equal(restored.impact, ref.impact)
    assert run_queries(restored, y, 15) == run_queries(ref, y, 15)


def test_a_state_saved_with_J_behind_restores_without_rebuilding_it(store, passes):
    """After a batch at alpha = 0, J lags behind (f does not need it): the restore is one
    pass that rebuilds no J, the restored search continues to the bit, and J is rebuilt
    when the impact factor is read, as in the saved search."""
    path, y = store
    saved, ref = bigsearch.LAS(path, pi=0.05), bigsearch.LAS(path, pi=0.05)
    for s in (saved, ref):
        s.tell(int(np.flatnonzero(y)[0]), 1)
        batch = s.next_batch(12)
        s.tell(batch, [int(y[i]) for i in batch])
    state = saved.export_state()
    assert state["meta"]["J_stale"]
    passes.clear()
    restored = bigsearch.LAS.from_state(path, state)
    assert [p.rebuilds_J for p in passes] == [False]
    np.testing.assert_array_equal(restored.f, ref.f)
    assert run_queries(restored, y, 5) == run_queries(ref, y, 5)
    passes.clear()
    np.testing.assert_array_equal(restored.impact, ref.impact)
    np.testing.assert_array_equal(restored.J, ref.J)
    assert sum(p.rebuilds_J for p in passes) == 2      # one J pass in each search


def test_state_saved_before_the_low_rank_correction_is_read(store):
    """A LAS state that keeps K^-1 whole as "Kinv" (before issue 12's correction, and no
    V) restores to the same scores and queries, to rounding."""
    path, y = store
    ref = bigsearch.LAS(path, alpha=0.05)
    ref.tell(int(np.flatnonzero(y)[0]), 1)
    run_queries(ref, y, 10)
    state = ref.export_state()
    arrays = state["arrays"]
    assert arrays["Kinv_G"].shape[0] > 0            # 11 labels, fold_rank(10) = 8: a correction to keep
    old = {k: v for k, v in arrays.items() if k not in ("Kinv_base", "Kinv_G", "Kinv_c", "V")}
    old["Kinv"] = ref.Kinv
    restored = bigsearch.LAS.from_state(path, {"meta": state["meta"], "arrays": old})
    for name in ("f", "J", "impact"):
        np.testing.assert_allclose(getattr(restored, name), getattr(ref, name), rtol=1e-10, atol=1e-14)
    assert run_queries(restored, y, 10) == run_queries(ref, y, 10)


def test_state_for_another_store_is_refused(store, store_factory):
    path, y = store
    s = bigsearch.LAS(path)
    s.tell(0, int(y[0]))
    state = s.export_state()
    X, y2 = clustered_points(300, 10, seed=2)
    with pytest.raises(bigsearch.errors.StoreError, match="saved state is for a store of 400 x 10"):
        bigsearch.LAS.from_state(store_factory(X, y2), state)


def test_refresh_reports_small_drift_and_keeps_exactness(store):
    path, y = store
    s = bigsearch.LAS(path, check_every=None)
    s.tell(int(np.flatnonzero(y)[0]), 1)
    run_queries(s, y, 60)
    assert s.inverse_residual() < 1e-10
    drift = s.refresh()
    assert drift["labels"] == 61
    assert max(drift["Kinv"], drift["J"], drift["f"]) < 1e-10
    Xs = bigsearch.open_store(path).read_rows(np.arange(400))
    ref = dense_f(Xs, np.array(s.labels, dtype=int), pi=s.params.pi)
    assert np.abs(s.f - ref).max() / np.abs(ref).max() < 1e-9


def test_drift_check_triggers_a_refresh(store):
    path, y = store
    s = bigsearch.LAS(path, check_every=5, drift_tol=1e-8)
    s.tell(int(np.flatnonzero(y)[0]), 1)
    run_queries(s, y, 3)
    s.Kinv += 1e-6                      # an inverse that has drifted
    with pytest.warns(RuntimeWarning, match="K\\^-1 drifted"):
        run_queries(s, y, 3)
    assert len(s.refreshes) == 1 and s.inverse_residual() < 1e-10


def test_drift_check_waits_until_it_is_cheap_against_the_updates(store_factory):
    """With r^3 large against n r (39 features, 60 points) the O(r^3) check waits until
    it costs at most a tenth of the updates since the last one, then still finds drift."""
    X, y = clustered_points(60, 39, prevalence=0.2, seed=3)
    r = X.shape[1]
    s = bigsearch.LAS(store_factory(X, y, "zarr", "float32", 60), check_every=1, drift_tol=1e-8)
    s.tell(int(np.flatnonzero(y)[0]), 1)
    s.sync()
    s.Kinv += 1e-6                      # an inverse that has drifted
    per_label = 2.0 * 60 * r * 3 + 6.0 * r * r      # a pass of 3 dot products per row, K^-1
    due = int(np.ceil(2.0 * r ** 3 / (0.1 * per_label)))    # labels until the check may run
    assert due > 1
    with pytest.warns(RuntimeWarning, match="K\\^-1 drifted"):
        run_queries(s, y, due + 1)
    assert [d["labels"] for d in s.refreshes] == [1 + due]


def test_refresh_measures_the_drift_it_removes(store):
    path, y = store
    s = bigsearch.LAS(path, check_every=None, n_threads=2)
    s.tell(int(np.flatnonzero(y)[0]), 1)
    run_queries(s, y, 5)
    s.Kinv += 1e-7                      # an inverse that has drifted: J and f follow it
    run_queries(s, y, 2)
    old_J, old_f = np.array(s.J), np.array(s.f)
    drift = s.refresh()
    for name, old, new in (("J", old_J, s.J), ("f", old_f, s.f)):
        expected = np.abs(old - new).max() / np.abs(new).max()
        assert expected > 1e-9
        assert drift[name] == pytest.approx(expected, rel=1e-12)
