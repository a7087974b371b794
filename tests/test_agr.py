"""AGR: the engine against a dense anchor-graph computation, LAE against the exact
simplex-constrained least squares, streaming k-means against in-memory Lloyd, the
anchor cache, and AGR through the real CLI."""

import json

import numpy as np
import pytest
from scipy.optimize import minimize

from bigsearch.engine import AGR
from bigsearch.engine.core.kmeans import kmeans
from bigsearch.engine.methods.agr_anchors import cache_path
from bigsearch.kernels.agr import local_anchor_embedding, simplex_projection
from bigsearch.storage import open_store
from bigsearch.testing import clustered_points

from conftest import KINDS, run_cli


# -- an independent dense reference, written from Liu et al. and their LAE.m -----------------
def dense_lae(x, U, iterations):
    """LAE by Nesterov's projected gradient, line by line from the authors' LAE.m (U: r x s)."""
    s = U.shape[1]
    z0 = np.ones(s) / s
    z1 = z0.copy()
    delta, beta = [0.0, 1.0], [1.0]
    for t in range(iterations):
        alpha = (delta[t] - 1) / delta[t + 1]
        v = z1 + alpha * (z1 - z0)
        gv = np.sum((x - U @ v) ** 2) / 2
        dgv = U.T @ U @ v - U.T @ x
        for j in range(101):
            b = 2 ** j * beta[t]
            z = project_simplex(v - dgv / b)
            gz = np.sum((x - U @ z) ** 2) / 2
            if gz <= gv + dgv @ (z - v) + b * np.sum((z - v) ** 2) / 2:
                break
        beta.append(b)
        z0, z1 = z1, z
        delta.append((1 + np.sqrt(1 + 4 * delta[t + 1] ** 2)) / 2)
        if np.abs(z1 - z0).sum() <= 1e-4:
            break
    return z1


def project_simplex(v):
    """Euclidean projection onto the probability simplex (Duchi et al. 2008)."""
    u = np.sort(v)[::-1]
    css = np.cumsum(u)
    rho = np.flatnonzero(u - (css - 1) / np.arange(1, len(v) + 1) > 0)[-1]
    return np.maximum(v - (css[rho] - 1) / (rho + 1), 0)


def dense_kmeans(X, k, seed, iterations, sample_size):
    """k-means from X alone, as the paper's anchors are made: a random sample (the same draws
    as the engine's, from the same seed), D^2 seeding on it, then Lloyd on all of X until the
    inertia improves by at most 1e-4 of itself. Shares no code with engine/core/kmeans.py."""
    rng = np.random.default_rng(seed)
    S = X[np.sort(rng.choice(len(X), size=sample_size, replace=False))]
    centers = [S[rng.integers(len(S))]]
    for _ in range(1, k):
        d2 = np.min([((S - c) ** 2).sum(axis=1) for c in centers], axis=0)
        u = rng.random() * d2.sum()
        centers.append(S[min(np.flatnonzero(np.cumsum(d2) > u)[0], len(S) - 1)])
    centers, previous = np.array(centers), np.inf
    for _ in range(iterations):
        d = ((X[:, None] - centers[None]) ** 2).sum(axis=2)
        lab, inertia = d.argmin(axis=1), d.min(axis=1).sum()
        centers = np.array([X[lab == c].mean(axis=0) if (lab == c).any() else centers[c] for c in range(k)])
        if previous - inertia <= 1e-4 * inertia:
            break
        previous = inertia
    return centers


def dense_agr_embedding(X, anchors, s=3, iterations=10):
    """Z: each row's LAE weights on its s nearest anchors (the labels do not enter it)."""
    n, k = len(X), len(anchors)
    D = ((X[:, None, :] - anchors[None, :, :]) ** 2).sum(axis=2)
    unit = anchors / np.linalg.norm(anchors, axis=1, keepdims=True)
    Z = np.zeros((n, k))
    for i in range(n):
        near = np.argsort(D[i], kind="stable")[:s]
        Z[i, near] = dense_lae(X[i] / np.linalg.norm(X[i]), unit[near].T, iterations)
    return Z


def dense_agr_f(Z, labels, gamma=0.01):
    """f = Z a / (1^T Z a) with a = (Z_l^T Z_l + gamma L~ + 1e-6 I)^-1 Z_l^T y_l, all dense."""
    k = Z.shape[1]
    T = Z.T @ Z
    lam = Z.sum(axis=0)
    L = T - T @ np.diag(np.where(lam > 0, 1 / np.where(lam > 0, lam, 1), 0)) @ T
    lab = np.flatnonzero(labels >= 0)
    Zl = Z[lab]
    a = np.linalg.solve(Zl.T @ Zl + gamma * L + 1e-6 * np.eye(k), Zl.T @ labels[lab])
    return Z @ a / (Z @ a).sum()


# -- the engine ----------------------------------------------------------------------------
@pytest.mark.parametrize("kind", KINDS)
def test_agr_f_and_queries_equal_the_dense_anchor_graph(store_factory, tmp_path, kind):
    X, y = clustered_points(240, 6, prevalence=0.15, seed=3, spread=0.9)
    store = store_factory(X, y, kind=kind, chunk_rows=37)
    search = AGR(store, anchors=24, neighbors=3, cache_dir=tmp_path / "cache")
    pos, neg = np.flatnonzero(y == 1), np.flatnonzero(y == 0)
    labels = np.full(len(y), -1)
    for i, lab in ((pos[0], 1), (neg[0], 0), (pos[5], 1)):
        search.tell(int(i), lab)
        labels[i] = lab
    Xs = open_store(store).read_rows(np.arange(len(y)))            # float32 as stored
    anchors = dense_kmeans(Xs, 24, seed=0, iterations=20, sample_size=len(Xs))   # AGR's defaults
    np.testing.assert_allclose(search.anchors, anchors, rtol=1e-10, atol=1e-12)
    Z = dense_agr_embedding(Xs, anchors)
    for _ in range(6):
        f = dense_agr_f(Z, labels)
        np.testing.assert_allclose(search.f, f, rtol=1e-9, atol=1e-12)
        i = int(np.flatnonzero(labels < 0)[np.argmax(f[labels < 0])])
        assert search.ask() == i
        search.tell(i, int(y[i]))
        labels[i] = y[i]
    nearest, weight = search.embedding()
    dense = np.zeros_like(Z)
    np.put_along_axis(dense, nearest.astype(np.int64), weight, axis=1)
    np.testing.assert_allclose(dense, Z, atol=1e-12)
    assert np.allclose(weight.sum(axis=1), 1) and (weight >= 0).all()
    search.close()


def test_agr_without_a_positive_scores_zero_and_asks_the_lowest_index(store_factory, tmp_path):
    X, y = clustered_points(60, 5, prevalence=0.2, seed=4)
    search = AGR(store_factory(X, y), anchors=8, cache_dir=tmp_path)
    search.tell(int(np.flatnonzero(y == 0)[3]), 0)
    assert not search.f.any()
    assert search.ask() == 0
    assert search.top(3)[0].tolist() == [0, 1, 2]


def test_lae_reaches_the_constrained_least_squares_optimum():
    rng = np.random.default_rng(0)
    for _ in range(20):
        U = rng.normal(size=(4, 9))
        U /= np.linalg.norm(U, axis=1, keepdims=True)
        x = rng.normal(size=9)
        x /= np.linalg.norm(x)
        z = np.empty(4)
        local_anchor_embedding(x, U, 500, z)
        best = minimize(lambda w: np.sum((x - U.T @ w) ** 2) / 2, np.ones(4) / 4, method="SLSQP",
                        bounds=[(0, 1)] * 4, constraints={"type": "eq", "fun": lambda w: w.sum() - 1},
                        options={"ftol": 1e-14, "maxiter": 500}).x
        assert abs(z.sum() - 1) < 1e-12 and (z >= 0).all()
        # LAE stops once an iteration moves z by <= 1e-4 (l1), so it is near, not at, the optimum
        assert np.sum((x - U.T @ z) ** 2) <= np.sum((x - U.T @ best) ** 2) + 1e-5
        assert np.abs(z - best).max() < 1e-2
        # 10 iterations, as AGR uses, follow the authors' steps exactly
        z10 = np.empty(4)
        local_anchor_embedding(x, U, 10, z10)
        np.testing.assert_allclose(z10, dense_lae(x, U.T, 10), atol=1e-14)


def test_simplex_projection():
    rng = np.random.default_rng(1)
    for v in [rng.normal(size=5) * 3 for _ in range(50)] + [np.array([0.2, 0.3, 0.5]), np.array([5.0, 5.0])]:
        out = np.empty_like(v)
        simplex_projection(v, out)
        np.testing.assert_allclose(out, project_simplex(v), atol=1e-15)


# -- anchors: streaming k-means and the cache --------------------------------------------------
def test_streaming_kmeans_equals_in_memory_lloyd(store_factory):
    X, y = clustered_points(500, 7, prevalence=0.1, seed=5, spread=1.0)
    store = open_store(store_factory(X, y, chunk_rows=45, dtype="float64"))
    passes = []

    def mapper(step, *args):
        passes.append(step.run.__name__)
        out = []
        for j in range(store.n_chunks):
            with store.chunk(j) as x:
                out.append(step(x, None, *args))
        return out

    anchors = kmeans(store, 12, seed=2, iterations=6, mapper=mapper)
    np.testing.assert_allclose(anchors, dense_kmeans(X, 12, seed=2, iterations=6, sample_size=len(X)),
                               rtol=1e-10, atol=1e-12)
    assert 1 <= len(passes) <= 6 and set(passes) == {"lloyd_step"}


def test_anchors_are_cached_beside_the_store_and_reused(store_factory):
    X, y = clustered_points(150, 5, prevalence=0.1, seed=6)
    path = store_factory(X, y)
    before = sorted(p.name for p in path.rglob("*"))
    search = AGR(path, anchors=10)
    search.f
    cached = cache_path(open_store(path), 10, 0, 20)
    assert cached.exists() and cached.parent == path.parent / ".bigsearch-cache"
    assert sorted(p.name for p in path.rglob("*")) == before           # the store is not written to
    with np.load(cached) as c:
        np.testing.assert_array_equal(c["anchors"], search.anchors)
    # a second search reads the cached file: changed anchors there are used as they are
    planted = search.anchors[::-1].copy()
    with open(cached, "wb") as fh:
        np.savez(fh, anchors=planted)
    np.testing.assert_array_equal(_anchors_of(AGR(path, anchors=10)), planted)
    # other k-means parameters, another file
    assert cache_path(open_store(path), 10, 1, 20) != cached and cache_path(open_store(path), 11, 0, 20) != cached


def _anchors_of(search):
    return search.anchors


def test_agr_refuses_more_anchors_than_points(store_factory, tmp_path):
    X, y = clustered_points(30, 4, prevalence=0.2, seed=7)
    from bigsearch.errors import ParameterError
    with pytest.raises(ParameterError, match="anchors"):
        AGR(store_factory(X, y), anchors=40, cache_dir=tmp_path).sync()


# -- through the CLI -------------------------------------------------------------------------
def test_agr_through_the_cli(tmp_path, store_factory):
    X, y = clustered_points(1500, 8, prevalence=0.04, seed=8, spread=0.7)
    store = store_factory(X, y, chunk_rows=200)
    res = run_cli("run", store, "--method", "agr,random", "--budget", 30, "--runs", 2, "--agr-anchors", 40,
                  "--out", tmp_path / "o", "-q", "--no-plots")
    assert res.returncode == 0, res.stderr
    record = json.loads((tmp_path / "o" / "results.json").read_text())
    agr = [r for r in record["runs"] if r["method"] == "agr"]
    assert [r["params"]["anchors"] for r in agr] == [40, 40] and agr[0]["params"]["gamma"] == 0.01
    assert sum(r["hits"][-1] for r in agr) > sum(r["hits"][-1] for r in record["runs"] if r["method"] == "random")
    res = run_cli("run", store, "--method", "agr", "--budget", 5, "--agr-anchors", 5000, "--out", tmp_path / "p")
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "anchors" in res.stderr
