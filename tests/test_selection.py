"""The query is exactly the argmax of f + alpha * s * IM over unlabeled points (lowest
index among ties), whatever the chunking: the candidate lists and bounds of
engine/core/select.py must never miss the winner."""

import numpy as np
import pytest

import bigsearch
from bigsearch.engine.core.select import ChunkPartials, PassSummary, select
from bigsearch.kernels.common import TOP_K
from bigsearch.testing import brute_force_impact, clustered_points, dense_K


def dense_scores(X, labels, pi, eta=0.5, w0=None, alpha=0.0):
    """f + alpha * s * IM (s = mean_U f / mean_U IM), -inf on labeled points, from X and the
    definitions: M = I - S A (S = B D^-1, A = X X^T), f = M^-1 c, and IM_i from f^+ of
    labeling i positive, which changes row i of M by u_i = -(db / d_i) A_i (Sherman-Morrison:
    f^+ - f = M^-1[:, i] (dc_i - u_i f) / (1 + u_i M^-1[:, i])). M^-1 = I + S X K^-1 X^T by
    Woodbury (K: testing.dense_K), so that A M^-1 = X K^-1 X^T and all is O(n r^2)."""
    X = np.asarray(X, np.float64)
    w0 = 1.0 / len(X) if w0 is None else w0
    d, unl = X @ X.sum(axis=0), labels < 0
    b_unl, b_lab = 1.0 / (1.0 + w0), 1.0 - eta
    S = np.where(unl, b_unl, b_lab) / d
    c = (1.0 - S * d) * np.where(unl, pi, labels)
    Kinv = np.linalg.inv(dense_K(X, labels, eta, w0))
    f = c + S * (X @ (Kinv @ (X.T @ c)))
    if alpha:
        J = np.einsum("ij,jk,ik->i", X, Kinv, X)                  # (A M^-1)_ii
        shift = -(b_lab - b_unl) / d                              # u_i = shift_i A_i
        coef = ((1.0 - b_lab) - c - shift * (X @ (X.T @ f))) / (1.0 + shift * J)
        col_sums_U = unl + X @ (Kinv @ (X.T @ (S * unl)))         # sum over j in U of M^-1[j, :]
        im = np.where(unl, f * coef * (col_sums_U - (1.0 + S * J)), 0.0)
        f = f + alpha * f[unl].sum() / im[unl].sum() * im
    return np.where(unl, f, -np.inf)


def expected_query(X, labels, pi, alpha, eta=0.5, w0=None):
    """The lowest index among the maxima of the scores from X (dense_scores): maxima within
    1e-9 (relative) of each other are ties, as rounding leaves exact ties of the engine's
    (duplicated points) apart in the dense solve."""
    score = dense_scores(X, labels, pi, eta, w0, alpha)
    return int(np.flatnonzero(score >= score.max() - 1e-9 * abs(score.max()))[0])


def test_dense_scores_agree_with_brute_force():
    X, y = clustered_points(60, 5, prevalence=0.2, seed=2)
    labels = np.full(60, -1)
    labels[[int(np.flatnonzero(y)[0]), 3, 7]] = y[[int(np.flatnonzero(y)[0]), 3, 7]]
    f, im = brute_force_impact(X, labels, pi=0.2)
    unl = labels < 0
    expected = np.where(unl, f + 0.3 * f[unl].sum() / im[unl].sum() * im, -np.inf)
    np.testing.assert_allclose(dense_scores(X, labels, 0.2, alpha=0.3), expected, rtol=1e-9)


@pytest.mark.parametrize("alpha", [0.0, 1e-3, 0.3, 5.0, 100.0])
@pytest.mark.parametrize("chunk_rows", [1, 7, 50, 400])
def test_query_is_argmax_with_duplicate_points(store_factory, alpha, chunk_rows):
    # 20 distinct points, each repeated 20 times: exact ties everywhere, so chunks
    # must be rescanned and ties resolved to the lowest index.
    X, y = clustered_points(20, 5, prevalence=0.3, seed=4)
    X, y = np.repeat(X, 20, axis=0), np.repeat(y, 20)
    order = np.random.default_rng(0).permutation(len(X))
    X, y = X[order], y[order]
    path = store_factory(X, y, "zarr", "float64", chunk_rows)
    s = bigsearch.LAS(path, pi=0.3, alpha=alpha)
    labels = np.full(len(y), -1)
    labels[int(np.flatnonzero(y)[0])] = 1
    s.tell(int(np.flatnonzero(y)[0]), 1)
    for _ in range(30):
        i = s.ask()
        assert i == expected_query(X, labels, 0.3, alpha)
        s.tell(i, int(y[i]))
        labels[i] = y[i]


@pytest.mark.parametrize("alpha", [1e-4, 1e-2, 1.0, 30.0])
def test_query_is_argmax_when_the_weight_moves(store_factory, alpha):
    X, y = clustered_points(3000, 8, prevalence=0.05, seed=9)
    path = store_factory(X, y, "hdf5", "float32", 64)
    s = bigsearch.LAS(path, alpha=alpha)
    Xs = bigsearch.open_store(path).read_rows(np.arange(len(y)))     # as stored (float32)
    labels = np.full(len(y), -1)
    labels[int(np.flatnonzero(y)[0])] = 1
    s.tell(int(np.flatnonzero(y)[0]), 1)
    for _ in range(25):
        i = s.ask()
        assert i == expected_query(Xs, labels, s.params.pi, alpha)
        s.tell(i, int(y[i]))
        labels[i] = y[i]


def fabricated_chunk(rng, start, m, t_prev):
    """Partials of a chunk built the way the kernel builds them, from random f and IM."""
    f, im = rng.random(m), rng.normal(size=m)
    lists = [f, im, f + t_prev * im]
    idx = np.array([np.argsort(-v, kind="stable")[:TOP_K] for v in lists])
    kth = np.array([np.sort(v)[::-1][TOP_K - 1] for v in lists])
    sums = np.array([f.sum(), im.sum(), m])
    return ChunkPartials(sums, idx + start, f[idx], im[idx], kth), f, im


@pytest.mark.parametrize("seed", range(20))
def test_select_finds_the_argmax_for_any_weight(seed):
    rng = np.random.default_rng(seed)
    t_prev = rng.choice([0.0, 0.1, 1.0])
    chunks = [fabricated_chunk(rng, 100 * j, 100, t_prev) for j in range(12)]
    f = np.concatenate([c[1] for c in chunks])
    im = np.concatenate([c[2] for c in chunks])
    summary = PassSummary.from_partials([c[0] for c in chunks], t_prev)
    for t in (0.0, t_prev / 3, t_prev, 2 * t_prev + 0.05, 10.0):
        rescanned = []

        def rescan(ids, t, k):
            rescanned.extend(ids)
            out = []
            for j in ids:
                sc = f[100 * j:100 * j + 100] + t * im[100 * j:100 * j + 100]
                order = np.argsort(-sc, kind="stable")[:k]
                out.append((100 * j + order, sc[order]))
            return out
        assert select(summary, t, rescan)[0][0] == int(np.argmax(f + t * im))
        if t == t_prev:                  # the lists ranked by this very weight: tight bounds
            assert len(rescanned) <= 2


def adversarial_chunk(start, t_prev):
    """Each list is filled by points that lose at t = 1 (for t_prev of 0.05, by the
    points with f = 1; for 3, by those with IM = 1); the winner is in no list."""
    f = np.r_[np.ones(10), np.zeros(10), 0.6, np.full(30, 0.1)]
    im = np.r_[np.zeros(10), np.ones(10), 0.6, np.full(30, 0.1)]
    lists = [f, im, f + t_prev * im]
    idx = np.array([np.argsort(-v, kind="stable")[:TOP_K] for v in lists])
    kth = np.array([np.sort(v)[::-1][TOP_K - 1] for v in lists])
    return ChunkPartials(np.array([f.sum(), im.sum(), len(f)]), idx + start, f[idx], im[idx], kth), f, im


@pytest.mark.parametrize("t_prev", [0.0, 0.05, 3.0])
def test_select_rescans_when_the_winner_is_in_no_list(t_prev):
    chunks = [adversarial_chunk(100 * j, t_prev) for j in range(3)]
    summary = PassSummary.from_partials([c[0] for c in chunks], t_prev)
    rescanned = []

    def rescan(ids, t, k):
        rescanned.extend(ids)
        out = []
        for j in ids:
            sc = chunks[j][1] + t * chunks[j][2]
            order = np.argsort(-sc, kind="stable")[:k]
            out.append((100 * j + order, sc[order]))
        return out
    assert select(summary, 1.0, rescan)[0][0] == 20          # the balanced point of chunk 0
    assert rescanned == [0, 1, 2]


@pytest.mark.parametrize("k", [1, 5, 8, 9, 30, 1000])
@pytest.mark.parametrize("alpha", [0.0, 0.5])
def test_top_k_is_the_sorted_scores(store_factory, k, alpha):
    X, y = clustered_points(20, 5, prevalence=0.3, seed=4)
    X, y = np.repeat(X, 15, axis=0), np.repeat(y, 15)          # ties: lowest index first
    path = store_factory(X, y, "hdf5", "float64", 13)
    for s in (bigsearch.LAS(path, pi=0.3, alpha=alpha), bigsearch.WNAS(path)):
        s.tell([0, 1], [int(y[0]), int(y[1])])
        idx, sc = s.top(k)
        f = np.array(s.f)
        im = np.array(s.impact) if isinstance(s, bigsearch.LAS) else np.zeros_like(f)
        t = alpha * s.impact_scale if isinstance(s, bigsearch.LAS) else 0.0
        score = f + t * im if t else f
        unl = np.flatnonzero(s.labels < 0)
        order = unl[np.lexsort((unl, -score[unl]))][:k]
        np.testing.assert_array_equal(idx, order)
        np.testing.assert_array_equal(sc, score[order])
        assert s.ask() == idx[0]


@pytest.mark.parametrize("seed", range(3))
def test_flagged_rows_make_the_lists_of_a_full_scan(seed):
    """push_flagged offers only the rows a kernel flagged (any superset of those above the
    lists' K-th values when the block began, here with ties and labeled rows): the lists
    come out as a scan offering every unlabeled row makes them, values and indices."""
    from bigsearch.kernels.common import N_LISTS, new_top, offer_row, push_flagged

    rng = np.random.default_rng(seed)
    n, block, t_prev = 3000, 997, 0.3                           # blocks end inside a word of flags
    f, im = rng.integers(0, 40, n) / 8.0, rng.normal(size=n)   # many exact ties in f
    label = np.where(rng.random(n) < 0.2, 1, -1).astype(np.int8)
    for e in range(block, n, block):          # labeled rows that would top every list, where a
        label[e:e + 8], f[e:e + 8] = 1, 99.0   # block's last word of flags ends past the block
    scanned, flagged = new_top(N_LISTS, TOP_K), new_top(N_LISTS, TOP_K)
    for i0 in range(0, n, block):
        i1 = min(i0 + block, n)
        for i in np.flatnonzero(label[i0:i1] < 0) + i0:
            offer_row(f, im, i, t_prev, *scanned)
        kth = flagged[0][:, -1].copy()
        sl = slice(i0, i1)
        enters = (label[sl] < 0) & ((f[sl] > kth[0]) | (im[sl] > kth[1]) | (f[sl] + t_prev * im[sl] > kth[2]))
        extra = rng.random(i1 - i0) < 0.05                          # flags may err toward yes
        flags = np.ones(1024, np.uint8)                              # past the block: stale flags
        flags[: i1 - i0] = enters | (extra & (label[sl] < 0))
        push_flagged(f, im, i0, i1, flags, t_prev, *flagged)
    np.testing.assert_array_equal(flagged[0], scanned[0])
    np.testing.assert_array_equal(flagged[1], scanned[1])
    assert (scanned[1] >= 0).all()
