"""AGR kernels: k-means sums, nearest anchors, Local Anchor Embedding, anchor-graph scores.

Anchor Graph Regularization (Liu, He, Chang, ICML 2010) represents each point by its
weights on its s nearest anchors: row i of Z has s nonzeros z_i, the solution of the
Local Anchor Embedding (LAE) problem

    min_z  1/2 ||x_i - U_i z||^2    subject to  z >= 0,  sum(z) = 1

where U_i holds the s nearest anchors as columns. As in the authors' code, x_i and the
anchors are unit-normalized for LAE (not for choosing the nearest anchors), and the
problem is solved by Nesterov's accelerated projected gradient with a backtracking step
size, for at most ``iterations`` steps (stopping early when sum |z_t - z_{t-1}| <= 1e-4).

No fastmath here: LAE compares two computed objective values to accept a step, and the
comparison should round the same way on every machine.
"""

import numba
import numpy as np

from .common import TOP_K, candidate_partials, copy_to, new_top, push_top
from .compile_lock import lock_compiles

LAE_TOLERANCE = 1e-4     # stop when the l1 change of z is at most this (the authors' value)
MAX_BACKTRACKS = 101     # step sizes tried per iteration: beta, 2 beta, ..., 2^100 beta


@numba.njit(nogil=True, cache=True)
def cluster_sums(labels, x, sums, counts):
    """Add each row of x to its cluster's sum and count it (labels: cluster per row)."""
    for i in range(x.shape[0]):
        c = labels[i]
        counts[c] += 1
        for j in range(x.shape[1]):
            sums[c, j] += x[i, j]


@numba.njit(nogil=True, cache=True)
def nearest_anchors(dist, s, out):
    """out[i] = the s columns of dist[i] with the smallest values, nearest first (the
    lowest index among equal distances, as repeated argmin would give)."""
    m, k = dist.shape
    best = np.empty(s)
    for i in range(m):
        n_kept = 0
        for c in range(k):
            d = dist[i, c]
            if n_kept == s and not d < best[s - 1]:
                continue
            p = n_kept if n_kept < s else s - 1
            while p > 0 and d < best[p - 1]:
                best[p] = best[p - 1]
                out[i, p] = out[i, p - 1]
                p -= 1
            best[p] = d
            out[i, p] = c
            if n_kept < s:
                n_kept += 1


@numba.njit(nogil=True, cache=True)
def simplex_projection(v, out):
    """out = the Euclidean projection of v onto {z >= 0, sum(z) = 1}."""
    s = v.shape[0]
    t = -np.sort(-v)
    total, theta = 0.0, 0.0
    for j in range(s):
        total += t[j]
        candidate = (total - 1.0) / (j + 1)
        if t[j] - candidate > 0.0:
            theta = candidate
    for j in range(s):
        out[j] = max(v[j] - theta, 0.0)


@numba.njit(nogil=True, cache=True)
def _half_residual(x, U, z):
    """1/2 ||x - U^T z||^2 with U (s, r): the anchors as rows."""
    total = 0.0
    for j in range(x.shape[0]):
        e = x[j]
        for a in range(U.shape[0]):
            e -= U[a, j] * z[a]
        total += e * e
    return 0.5 * total


@numba.njit(nogil=True, cache=True)
def local_anchor_embedding(x, U, iterations, z1):
    """LAE weights of x (r,) on the anchors U (s, r), both unit-normalized; into z1 (s,).

    Nesterov's method as in Liu's LAE.m: probe v = z1 + a_t (z1 - z0), then the
    smallest step 1/b (b = beta_t 2^j) whose projected gradient step satisfies the
    quadratic upper bound.
    """
    s, r = U.shape
    G, Ux = np.zeros((s, s)), np.zeros(s)
    for a in range(s):
        for j in range(r):
            Ux[a] += U[a, j] * x[j]
        for b in range(s):
            for j in range(r):
                G[a, b] += U[a, j] * U[b, j]
    z0 = np.full(s, 1.0 / s)
    copy_to(z1, z0)
    v, grad, z = np.empty(s), np.empty(s), np.empty(s)
    delta_prev, delta, beta = 0.0, 1.0, 1.0
    for _ in range(iterations):
        a = (delta_prev - 1.0) / delta
        for c in range(s):
            v[c] = z1[c] + a * (z1[c] - z0[c])
        gv = _half_residual(x, U, v)
        for c in range(s):
            grad[c] = -Ux[c]
            for e in range(s):
                grad[c] += G[c, e] * v[e]
        b = beta
        for j in range(MAX_BACKTRACKS):
            b = beta * 2.0 ** j
            simplex_projection(v - grad / b, z)
            gz = _half_residual(x, U, z)
            step = 0.0
            for c in range(s):
                step += grad[c] * (z[c] - v[c]) + 0.5 * b * (z[c] - v[c]) ** 2
            if gz <= gv + step:
                break
        beta = b
        copy_to(z0, z1)
        copy_to(z1, z)
        delta_prev, delta = delta, (1.0 + np.sqrt(1.0 + 4.0 * delta * delta)) / 2.0
        if np.abs(z1 - z0).sum() <= LAE_TOLERANCE:
            break


@numba.njit(nogil=True, cache=True)
def embed_rows(x, nearest, anchors_unit, iterations, weights):
    """LAE weights of every row of x on its nearest anchors (rows of anchors_unit).

    A row of zeros cannot be normalized; it gets equal weights.
    """
    s = nearest.shape[1]
    U = np.empty((s, anchors_unit.shape[1]))
    xi = np.empty(x.shape[1])
    for i in range(x.shape[0]):
        norm = 0.0
        for j in range(x.shape[1]):
            xi[j] = np.float64(x[i, j])
            norm += xi[j] * xi[j]
        if norm == 0.0:
            weights[i, :] = 1.0 / s
            continue
        xi /= np.sqrt(norm)
        for a in range(s):
            U[a] = anchors_unit[nearest[i, a]]
        local_anchor_embedding(xi, U, iterations, weights[i])


@numba.njit(nogil=True, cache=True)
def anchor_gram(nearest, weights, k):
    """Z^T Z (k, k) and Z^T 1 (k,) of a chunk's rows of Z."""
    T = np.zeros((k, k))
    colsum = np.zeros(k)
    m, s = nearest.shape
    for i in range(m):
        for a in range(s):
            colsum[nearest[i, a]] += weights[i, a]
            for b in range(s):
                T[nearest[i, a], nearest[i, b]] += weights[i, a] * weights[i, b]
    return T, colsum


@numba.njit(nogil=True, cache=True)
def anchor_scores(nearest, weights, coef, offset, label, f):
    """f_i = z_i . coef[nearest anchors of i]; returns the partials the selection needs
    (engine/core/select.py): sums [f, 0, count] over unlabeled points and the top by f."""
    vals, idx = new_top(1, TOP_K)
    sum_f, n_u = 0.0, 0
    for i in range(nearest.shape[0]):
        v = 0.0
        for a in range(nearest.shape[1]):
            v += weights[i, a] * coef[nearest[i, a]]
        f[i] = v
        if label[i] < 0:
            sum_f += v
            n_u += 1
            if v > vals[0, TOP_K - 1]:
                push_top(vals, idx, 0, v, i)
    sums = np.array([sum_f, 0.0, n_u])
    return (sums,) + candidate_partials(vals, idx, offset, f, f[:0])


lock_compiles(globals())
