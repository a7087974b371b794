"""BLR (Bayesian linear regression) against a dense reference written here, from the
definitions: at every step mu = m + X w and v = diag(X A^-1 X^T) by a closed-form solve
with A = lam I + X_L^T X_L / s2, and the queries as argmax of the acquisition; across
store formats, dtypes, chunkings and both backends. The evidence maximization is checked
against a direct optimization of the Gaussian log likelihood, and recovers lam and s2 on
data drawn from the model."""

import itertools

import numpy as np
import pytest
from scipy.linalg import solve_triangular
from scipy.optimize import minimize

import bigsearch
from bigsearch.engine.methods import blr_evidence
from bigsearch.errors import LabelError
from bigsearch.testing.dense import one_blas_thread

from conftest import DTYPES, KINDS, chunkings

RTOL = 1e-9
GRID = list(itertools.product(KINDS, DTYPES, chunkings(80)))


# -- the reference ---------------------------------------------------------------------
def dense_posterior(X, idx, y, lam, noise):
    """(mu, v) for every row of X from the labels y of rows idx: the closed form of the
    model with a flat prior on the intercept, by solving for (b, w) jointly: the prior's
    precision is diag(0, lam I) on [1, x] (written independently of the centred form the
    engine uses)."""
    X = np.asarray(X, np.float64)
    n, r = X.shape
    X1 = np.hstack([np.ones((n, 1)), X])
    if not len(idx):
        return np.zeros(n), np.einsum("ij,ij->i", X, X) / lam
    P = np.diag(np.r_[0.0, np.full(r, lam)]) + X1[idx].T @ X1[idx] / noise
    beta = np.linalg.solve(P, X1[idx].T @ np.asarray(y, np.float64)) / noise
    v = np.einsum("ij,ji->i", X1, np.linalg.solve(P, X1.T))
    return X1 @ beta, v


def dense_choice(score, labeled):
    score = np.where(labeled, -np.inf, score)
    return int(np.argmax(score))  # lowest index among ties


def dense_run(X, y, init, steps, lam, noise, beta=0.0):
    """The queries of greedy (beta = 0) or UCB, one label at a time."""
    idx = list(init)
    out = []
    for _ in range(steps):
        mu, v = dense_posterior(X, idx, y[idx], lam, noise)
        labeled = np.zeros(len(X), bool)
        labeled[idx] = True
        i = dense_choice(mu + beta * np.sqrt(np.maximum(v, 0)), labeled)
        out.append(i)
        idx.append(i)
    return out


def stored_X(path):
    s = bigsearch.open_store(path)
    return s.read_rows(np.arange(s.n))


def rel_err(a, b):
    return np.abs(np.asarray(a) - b).max() / max(np.abs(b).max(), 1e-300)


def data(n=80, r=6, seed=3):
    """Raw features with no transform (some negative), labels from a linear rule."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, r))
    y = (X @ rng.normal(size=r) + 0.3 * rng.normal(size=n) > 1.0).astype(np.int8)
    return X, y


# -- exactness -------------------------------------------------------------------------
@pytest.mark.parametrize("kind,dtype,chunk_rows", GRID)
def test_mean_and_variance_match_the_closed_form(store_factory, kind, dtype, chunk_rows):
    X, y = data()
    path = store_factory(X, y, kind, dtype, chunk_rows)
    Xs = stored_X(path)
    search = bigsearch.BLR(path, acquisition="ucb", lam=0.7, noise=0.3)
    idx = [int(np.flatnonzero(y)[0]), int(np.flatnonzero(y == 0)[0])]
    search.tell(idx, [1, 0])
    for _ in range(6):
        mu, v = dense_posterior(Xs, idx, y[idx], 0.7, 0.3)
        assert rel_err(search.f, mu) < RTOL
        assert rel_err(search.variance, v) < RTOL
        i = search.ask()
        search.tell(i, int(y[i]))
        idx.append(i)


@pytest.mark.parametrize("acquisition,beta", [("greedy", 0.0), ("ucb", 1.5)])
@pytest.mark.parametrize("kind,dtype,chunk_rows", GRID)
def test_queries_match_the_reference(store_factory, kind, dtype, chunk_rows, acquisition, beta):
    X, y = data(seed=5)
    path = store_factory(X, y, kind, dtype, chunk_rows)
    init = [int(np.flatnonzero(y)[0]), int(np.flatnonzero(y == 0)[0])]  # one label would leave mu flat: ties
    expected = dense_run(stored_X(path), y, init, 30, 2.0, 0.5, beta)
    search = bigsearch.BLR(path, acquisition=acquisition, beta=beta if beta else 2.0, lam=2.0, noise=0.5)
    search.tell(init, [1, 0])
    got = []
    for _ in range(30):
        i = search.ask()
        got.append(i)
        search.tell(i, int(y[i]))
    assert got == expected


def test_graded_and_score_labels(store_factory):
    X, y = data(seed=7)
    scores = X @ np.arange(1.0, 7.0) - 3.0  # a real-valued target, higher is better
    path = store_factory(X, y, "zarr", "float64", 7)
    search = bigsearch.BLR(path, lam=1.0, noise=0.2)
    idx = [0, 1, 2, 3]
    search.tell(idx, [float(v) for v in scores[idx]])
    search.tell([4, 5], [0.25, 1])
    labels = np.r_[scores[idx], 0.25, 1.0]
    mu, _ = dense_posterior(stored_X(path), idx + [4, 5], labels, 1.0, 0.2)
    assert rel_err(search.f, mu) < RTOL
    with pytest.raises(LabelError, match="finite"):
        search.tell(9, float("nan"))


def test_batches(store_factory):
    """Greedy: the top B of mu. UCB: each member chosen after the earlier ones joined A
    (variance falls, the mean does not move). Thompson: one draw per member, distinct."""
    X, y = data(n=120, seed=9)
    path = store_factory(X, y, "zarr", "float64", 11)
    Xs = stored_X(path)
    init = list(np.flatnonzero(y)[:2]) + list(np.flatnonzero(y == 0)[:3])
    mu, v = dense_posterior(Xs, init, y[init], 1.0, 0.5)
    labeled = np.zeros(len(X), bool)
    labeled[init] = True

    greedy = bigsearch.BLR(path, lam=1.0, noise=0.5)
    greedy.tell(init, y[init].tolist())
    order = np.lexsort((np.arange(len(X)), -np.where(labeled, -np.inf, mu)))
    assert greedy.next_batch(5) == order[:5].tolist()

    ucb = bigsearch.BLR(path, acquisition="ucb", beta=2.0, lam=1.0, noise=0.5)
    ucb.tell(init, y[init].tolist())
    expected, members = [], []
    for _ in range(5):
        X_A = list(init) + members
        vb = dense_posterior(Xs, X_A, np.zeros(len(X_A)), 1.0, 0.5)[1]  # v depends on the rows alone
        taken = labeled.copy()
        taken[members] = True
        members.append(dense_choice(mu + 2.0 * np.sqrt(vb), taken))
    expected = members
    batch = ucb.next_batch(5)
    assert batch == expected
    ucb.tell(batch, y[batch].tolist())  # the real answers: A already holds them
    mu2, v2 = dense_posterior(Xs, init + batch, y[init + batch], 1.0, 0.5)
    assert rel_err(ucb.f, mu2) < RTOL and rel_err(ucb.variance, v2) < RTOL

    thompson = bigsearch.BLR(path, acquisition="thompson", lam=1.0, noise=0.5, seed=1)
    thompson.tell(init, y[init].tolist())
    batch = thompson.next_batch(8)
    assert len(set(batch)) == 8 and not labeled[batch].any()


def test_an_unlabelled_ucb_batch_leaves_no_trace(store_factory):
    X, y = data(n=60, seed=2)
    path = store_factory(X, y, "zarr", "float64", 7)
    search = bigsearch.BLR(path, acquisition="ucb", lam=1.0, noise=0.5)
    search.tell([0, 1, 2], y[:3].tolist())
    batch = search.next_batch(4)
    search.tell(batch[0], int(y[batch[0]]))  # only one member answered
    idx = [0, 1, 2, batch[0]]
    mu, v = dense_posterior(stored_X(path), idx, y[idx], 1.0, 0.5)
    assert rel_err(search.f, mu) < RTOL and rel_err(search.variance, v) < RTOL


def test_thompson_draws_are_exact_posterior_samples(store_factory):
    """The draws' mean and covariance are w and A^-1 (10,000 draws, r = 3)."""
    X, y = data(n=40, r=3, seed=4)
    path = store_factory(X, y, "zarr", "float64", 40)
    search = bigsearch.BLR(path, acquisition="thompson", lam=0.5, noise=0.2, seed=3)
    search.tell(list(range(10)), y[:10].tolist())
    search.sync()
    D = search._draw(10000)
    Xc = stored_X(path)[:10] - stored_X(path)[:10].mean(axis=0)  # the intercept's flat prior centres the rows
    Ainv = np.linalg.inv(0.5 * np.eye(3) + Xc.T @ Xc / 0.2)
    assert np.abs(D.mean(axis=0)).max() < 4 * np.sqrt(np.diag(Ainv).max() / 10000)
    assert np.abs(np.cov(D.T) - Ainv).max() < 0.05 * np.abs(Ainv).max()


def test_sessions_continue_exactly(store_factory):
    X, y = data(n=90, seed=8)
    path = store_factory(X, y, "hdf5" if "hdf5" in KINDS else KINDS[0], "float32", 13)
    for acquisition in ("greedy", "ucb", "thompson"):
        a = bigsearch.BLR(path, acquisition=acquisition, seed=4)
        a.tell([0, 1, 2, 3], y[:4].tolist())
        for _ in range(8):
            i = a.ask()
            a.tell(i, int(y[i]))
        b = type(a).from_state(path, a.export_state())
        for _ in range(8):
            i, j = a.ask(), b.ask()
            assert i == j
            a.tell(i, int(y[i]))
            b.tell(j, int(y[j]))
        assert np.array_equal(a.f, b.f)


def test_a_state_an_older_bigsearch_saved_continues(store_factory):
    """States saved before A was kept as a factor hold A itself (r x r): A's factor is made
    again from the rows in A (labeled, and a UCB batch's members told nothing yet), the same
    A, and the search asks what it would have asked."""
    X, y = data(n=90, seed=9)
    path = store_factory(X, y, "zarr", "float64", 13)
    for acquisition in ("greedy", "ucb", "thompson"):
        a = bigsearch.BLR(path, acquisition=acquisition, lam=0.7, noise=0.4, seed=2)
        a.tell([0, 1, 2, 3], y[:4].tolist())
        for _ in range(6):
            i = a.ask()
            a.tell(i, int(y[i]))
        state = a.export_state()
        arrays = dict(state["arrays"])
        arrays["A"] = a._A.value()
        del arrays["A_factor"]
        b = type(a).from_state(path, {"meta": state["meta"], "arrays": arrays})
        assert np.abs(b._A.value() - a._A.value()).max() < 1e-12 * np.abs(a._A.value()).max()
        if acquisition == "thompson":  # the same distribution, other draws: it goes on
            b.tell(b.ask(), 0)
            continue
        for _ in range(6):
            i, j = a.ask(), b.ask()
            assert i == j
            a.tell(i, int(y[i]))
            b.tell(j, int(y[j]))


def test_ridge_factor_is_A():
    """RidgeFactor: lam I + F^T F through appended rows and the QR step that keeps F at most
    2 r rows; A v and the root's covariance (sqrt(lam) e1 + F^T e2) are A's."""
    from bigsearch.engine.core.rank_updates import RidgeFactor

    rng = np.random.default_rng(3)
    r, lam = 5, 0.3
    A = RidgeFactor(lam, r)
    expected = lam * np.eye(r)
    for m in (1, 4, 7):  # 12 rows in all: more than 2 r, so one QR step
        rows, gamma = rng.normal(size=(m, r)), rng.uniform(0.5, 2.0, m)
        A.add(rows, gamma)
        expected += (rows.T * gamma) @ rows
    assert len(A.F) <= 2 * r
    assert np.abs(A.value() - expected).max() < 1e-12 * np.abs(expected).max()
    V = rng.normal(size=(3, r))
    assert np.abs(A.times(V) - V @ expected).max() < 1e-12 * np.abs(V @ expected).max()
    U = A.root(rng.normal(size=(200_000, r)), rng.normal(size=(200_000, len(A.F))))
    assert np.abs(np.cov(U.T) - expected).max() < 0.02 * np.abs(expected).max()


@pytest.mark.parametrize("acquisition", ["greedy", "ucb"])
def test_the_dask_backend_asks_the_same(store_factory, client, acquisition):
    X, y = data(n=100, seed=6)
    path = store_factory(X, y, "zarr", "float32", 9)
    expected = dense_run(stored_X(path), y, [0, 1], 15, 1.5, 0.4, 2.0 if acquisition == "ucb" else 0.0)
    search = bigsearch.BLR(path, acquisition=acquisition, lam=1.5, noise=0.4, backend=client)
    search.tell([0, 1], y[:2].tolist())
    got = []
    for _ in range(15):
        i = search.ask()
        got.append(i)
        search.tell(i, int(y[i]))
    search.close()
    assert got == expected


# -- the evidence ----------------------------------------------------------------------
def gaussian_log_density(y, C):
    """log N(y; 0, C) through a Cholesky factor of C (the textbook form; scipy's
    multivariate_normal takes an eigendecomposition per call, 8x the cost)."""
    L = np.linalg.cholesky(C)
    z = solve_triangular(L, y, lower=True)
    return -0.5 * (z @ z) - np.log(np.diag(L)).sum() - 0.5 * len(y) * np.log(2 * np.pi)


@one_blas_thread  # hundreds of Cholesky factors of up to 299 x 299: threaded, 10-30x slower on a busy machine
def reference_fit(XL, y, starts=([0.0, 0.0], [3.0, -2.0], [-3.0, 1.0]), prior=True):
    """(lam, s2) maximizing the Gaussian likelihood of the labels with the intercept
    integrated out (flat prior): that of the labels' n - 1 coordinates in a basis
    orthogonal to the constant, times R2 (1 - R2) (a uniform prior on R2, the share of
    the variance the weights explain on average, in log lam and log s2), by a general
    optimizer from several starts. Without ``prior``, the likelihood alone."""
    n = len(y)
    Q = np.linalg.svd(np.eye(n) - 1.0 / n)[0][:, : n - 1]  # orthonormal, orthogonal to 1
    yq, Xq = Q.T @ y, Q.T @ XL
    K = Xq @ Xq.T
    signal = np.trace(K) / (n - 1)  # the mean prior variance of x . w, times lam

    def nll(t):
        C = K / np.exp(t[0]) + np.exp(t[1]) * np.eye(n - 1)
        r2 = signal / np.exp(t[0]) / (signal / np.exp(t[0]) + np.exp(t[1]))
        log_prior = np.log(r2) + np.log1p(-r2) if prior else 0.0
        return -gaussian_log_density(yq, C) - log_prior

    best = min(
        (minimize(nll, s, method="Nelder-Mead", options=dict(xatol=1e-10, fatol=1e-12, maxiter=4000)) for s in starts),
        key=lambda r: r.fun,
    )
    return np.exp(best.x)


@pytest.mark.parametrize("n", [40, 300])  # fewer labels than features, and more
def test_the_evidence_maximum(n):
    rng = np.random.default_rng(n)
    XL = rng.normal(size=(n, 60))
    y = XL @ rng.normal(size=60) * 0.3 + rng.normal(size=n)
    lam, s2 = blr_evidence.fit(XL, y)
    ref = reference_fit(XL, y)
    assert np.allclose([lam, s2], ref, rtol=1e-3)


def test_the_evidence_alone_on_request():
    rng = np.random.default_rng(3)
    XL = rng.normal(size=(40, 60))
    y = XL @ rng.normal(size=60) * 0.3 + rng.normal(size=40)
    fitted = blr_evidence.fit(XL, y, r2_prior=False)
    assert np.allclose(fitted, reference_fit(XL, y, prior=False), rtol=1e-3)
    assert not np.allclose(fitted, blr_evidence.fit(XL, y), rtol=1e-3)  # the prior matters at 40 labels


def test_one_positive_keeps_the_fit_off_the_edge():
    """With one positive among 100 0/1 labels on sparse bits the evidence alone is
    flattest at "all noise" (lam at the search's edge, 1e10 times the Gram's scale); the
    R2 prior keeps the maximum inside, where the reference optimizer finds it too."""
    rng = np.random.default_rng(5)
    XL = (rng.random((100, 300)) < 0.1).astype(np.float64)
    y = np.zeros(100)
    y[7] = 1.0
    lam, s2 = blr_evidence.fit(XL, y)
    sp = blr_evidence.spectrum(XL, y)
    kbar = float(np.sum(sp.k * sp.count)) / sp.n
    assert 1e-3 < kbar / lam / (kbar / lam + s2) < 0.999  # R2 inside
    ref = reference_fit(XL, y, starts=([np.log(lam), np.log(s2)], [np.log(kbar), np.log(0.01)]))
    assert np.allclose([lam, s2], ref, rtol=1e-3)


def test_the_evidence_recovers_lam_and_noise():
    rng = np.random.default_rng(0)
    lam, s2, r, n = 4.0, 0.25, 20, 4000
    XL = rng.normal(size=(n, r))
    y = 1.5 + XL @ rng.normal(scale=1 / np.sqrt(lam), size=(r, 30)) + rng.normal(scale=np.sqrt(s2), size=(n, 30))
    fits = np.array([blr_evidence.fit(XL, y[:, j]) for j in range(30)])
    assert abs(np.median(fits[:, 1]) / s2 - 1) < 0.05
    assert abs(np.exp(np.median(np.log(fits[:, 0]))) / lam - 1) < 0.4  # r = 20 draws of w per fit


def test_refits_are_recorded_and_follow_the_schedule(store_factory):
    X, y = data(n=200, r=8, seed=12)
    path = store_factory(X, y, "zarr", "float64", 50)
    search = bigsearch.BLR(path, refit_share=0.5)
    idx = list(np.flatnonzero(y)[:3]) + list(np.flatnonzero(y == 0)[:3])
    search.tell(idx, y[idx].tolist())
    for _ in range(14):
        i = search.ask()
        search.tell(i, int(y[i]))
        idx.append(i)
    search.sync()
    labels = [fit["labels"] for fit in search.refits]
    assert labels[0] == 6 and all(b >= 1.5 * a for a, b in zip(labels, labels[1:]))
    lam, s2 = reference_fit(stored_X(path)[idx[: labels[-1]]], y[idx[: labels[-1]]].astype(float))
    assert np.allclose([search.refits[-1]["lam"], search.refits[-1]["noise"]], [lam, s2], rtol=1e-3)
    mu, v = dense_posterior(stored_X(path), idx, y[idx], search.lam, search.noise)
    assert rel_err(search.f, mu) < RTOL and rel_err(search.variance, v) < RTOL


@pytest.mark.parametrize("m", [1, 5, 39, 40, 64])
def test_ridge_inverse_on_either_side_of_r(m):
    """(lam I + R^T R)^-1 by Woodbury (fewer rows than r = 40 features) or by the inverse:
    the closed form's, exactly symmetric."""
    from bigsearch.engine.core.rank_updates import ridge_inverse

    rows = np.random.default_rng(m).normal(size=(m, 40)) * 3.0
    got = ridge_inverse(0.7, rows)
    expected = np.linalg.solve(0.7 * np.eye(40) + rows.T @ rows, np.eye(40))
    assert np.array_equal(got, got.T)
    assert np.abs(got - expected).max() < 1e-12 * np.abs(expected).max()


@pytest.mark.parametrize("acquisition", ["greedy", "ucb"])
def test_kept_base_products_follow_the_base(tmp_path, acquisition):
    """BLR keeps A^-1's base times [X^T y, X^T 1, the rows in A's sum] up to date from each
    label's sparse rows: through single labels, batches, a UCB batch's members, folds of the
    correction into the base and refits, they equal the products made afresh, and mu and v
    stay the reference's."""
    rng = np.random.default_rng(5)
    bits = rng.random((400, 16)) < 0.15  # r = 16: the correction folds every 8 rows
    y = (bits[:, :3].sum(axis=1) >= 1).astype(np.int8)
    X = (bits * rng.uniform(0.5, 1.5, size=(400, 1))).astype(np.float32)  # no two scores tie
    path = tmp_path / "bits.zarr"
    bigsearch.create_store(path, X, y, chunk_rows=61)
    Xs = stored_X(path)
    search = bigsearch.BLR(path, acquisition=acquisition, refit_share=1.0)
    idx = [int(np.flatnonzero(y)[0]), int(np.flatnonzero(y == 0)[0])]
    search.tell(idx, y[idx].tolist())
    folds = 0
    for step in range(14):
        batch = search.next_batch(1 if step % 3 else 5)
        search.tell(batch, y[batch].tolist())
        idx += batch
        kept = search._base_products()
        fresh = search._inverse.base @ np.vstack([search.xy, search.x1, search.xA]).T
        assert np.abs(kept - fresh.T).max() <= 1e-12 * np.abs(fresh).max()
        folds = max(folds, search._inverse.folds)
    assert folds >= 1 and len(search.refits) >= 2  # both ways the base changed were taken
    mu, v = dense_posterior(Xs, idx, y[idx], search.lam, search.noise)
    assert rel_err(search.f, mu) < RTOL and rel_err(search.variance, v) < RTOL


def test_refits_with_fewer_labels_than_features(store_factory):
    """Every refit with fewer labels than features (A^-1 by Woodbury, A made only when
    read): mu, v and the queries of the reference at the fitted lam and noise."""
    X, y = data(n=150, r=40, seed=31)
    path = store_factory(X, y, "zarr", "float64", 37)
    Xs = stored_X(path)
    search = bigsearch.BLR(path, refit_share=0.2)
    idx = list(np.flatnonzero(y)[:3]) + list(np.flatnonzero(y == 0)[:3])
    search.tell(idx, y[idx].tolist())
    for _ in range(24):
        lam, noise = search.lam, search.noise
        i = search.ask()
        if search.refits and search.refits[-1]["labels"] == len(idx):
            lam, noise = search.lam, search.noise  # refitted at this query
        mu, _ = dense_posterior(Xs, idx, y[idx], lam, noise)
        assert i == dense_choice(mu, np.isin(np.arange(len(y)), idx))
        search.tell(i, int(y[i]))
        idx.append(i)
    search.sync()
    assert len(search.refits) >= 4 and all(fit["labels"] < 40 for fit in search.refits)
    mu, v = dense_posterior(Xs, idx, y[idx], search.lam, search.noise)
    assert rel_err(search.f, mu) < RTOL and rel_err(search.variance, v) < RTOL
    A = search._A.value()
    assert np.abs(A @ search.Ainv - np.eye(40)).max() < 1e-10


@pytest.mark.parametrize("encoding", ["float16", "int8", "binary", "sparse-bits"])
@pytest.mark.parametrize("acquisition,beta", [("greedy", 0.0), ("ucb", 1.0)])
def test_encoded_stores(tmp_path, encoding, acquisition, beta):
    """float16 and int8 codes, and packed bits (a fifth of them set: BLAS on decoded rows;
    3%: the sparse kernels): the same mu, v and queries as the reference on the decoded X."""
    rng = np.random.default_rng(21)
    sparse = encoding == "sparse-bits"
    bits = rng.random((90, 96 if sparse else 24)) < (0.03 if sparse else 0.2)
    y = (bits[:, :4].sum(axis=1) >= (1 if sparse else 2)).astype(np.int8)
    scale = rng.uniform(0.5, 1.5, size=(90, 1))  # bits with a scale per row: no two scores tie
    X = (bits * scale if encoding in ("binary", "sparse-bits") else rng.normal(size=(90, 24))).astype(np.float32)
    path = tmp_path / f"s-{encoding}.zarr"
    bigsearch.create_store(path, X, y, encoding="binary" if sparse else encoding, chunk_rows=13)
    Xs = stored_X(path)
    init = [int(np.flatnonzero(y)[0]), int(np.flatnonzero(y == 0)[0])]
    expected = dense_run(Xs, y, init, 12, 1.5, 0.5, beta)
    search = bigsearch.BLR(path, acquisition=acquisition, beta=beta or 2.0, lam=1.5, noise=0.5)
    search.tell(init, y[init].tolist())
    got = []
    for _ in range(12):
        i = search.ask()
        got.append(i)
        search.tell(i, int(y[i]))
    assert got == expected
    mu, v = dense_posterior(Xs, init + got, y[init + got], 1.5, 0.5)
    assert rel_err(search.f, mu) < RTOL and rel_err(search.variance, v) < RTOL


def test_a_drifted_inverse_is_rebuilt(store_factory):
    """With lam and noise fixed, the schedule of refits checks |A A^-1 - I| instead; a
    damaged A^-1 is rebuilt from X (warned), and the scores are the reference's again."""
    X, y = data(n=120, seed=13)
    path = store_factory(X, y, "zarr", "float64", 16)
    search = bigsearch.BLR(path, acquisition="ucb", lam=1.0, noise=0.5)
    idx = [0, 1, 2, 3]
    search.tell(idx, y[idx].tolist())
    search.sync()
    search._inverse.base[0, 0] += 1e-6  # the drift of many updates, at once
    with pytest.warns(RuntimeWarning, match="drifted"):
        for _ in range(4):
            i = search.ask()
            search.tell(i, int(y[i]))
            idx.append(i)
        search.sync()
    mu, v = dense_posterior(stored_X(path), idx, y[idx], 1.0, 0.5)
    assert rel_err(search.f, mu) < RTOL and rel_err(search.variance, v) < RTOL
