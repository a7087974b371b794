"""Bayesian linear regression kernel: one chunk of X, its per-point state, small global state.

The model (engine/methods/blr.py): y = b + x . w + noise, w ~ N(0, I / lam), a flat prior on the
intercept b, noise ~ N(0, s2). With the labeled rows' mean xbar, the labels' mean ybar and
A = lam I + X_c^T X_c / s2 (X_c: the labeled rows minus xbar), each point's predictive
mean and variance are

    mu_i = ybar - xbar . w + x_i . w,                 w = A^-1 X_c^T y / s2,
    v_i  = Q_i - 2 x_i . h + xbar . h + s2 / n_L,     Q_i = x_i^T A^-1 x_i,  h = A^-1 xbar,

where Q is kept per point as J, like LAS's J: new labels lower it by c_b (x_i . g_b)^2,
g_b = A^-1 z_b (Sherman-Morrison on the rows z_b that the labels add to the scatter).

One pass over a chunk computes, per row, the dot products with the rows of
V = [w, d, h, g_1 .. g_B] (d: a Thompson draw's w~ - w, or zeros) and sets

    f_i  = mean + x_i . w                                  (mean = ybar - xbar . w)
    J_i <- J_i - sum_b c_b (x_i . g_b)^2,   v_i = J_i - 2 x_i . h + v0
    im_i = beta sqrt(max(v_i, 0)) + x_i . d + d0           (d0 = -xbar . d)

so that the acquisition's score is f + im (greedy: beta = 0 and d = 0; UCB: d = 0;
Thompson: beta = 0), and returns the chunk's partials in the form every method's
selection reads (sums over unlabeled points, candidates by f, by im and by f + t im).
"""

import math

import numba
import numpy as np

from .common import (
    FAST,
    N_LISTS,
    ROW_BLOCK,
    TOP_K,
    aligned_zeros,
    candidate_partials,
    copy_to,
    new_top,
    pad3,
    push_candidates,
    push_top,
    unlabeled_sums,
)
from .encoded import chunk_dots, chunk_rows, dots_setup


@numba.njit(nogil=True, cache=True)  # no fastmath: docs/contributing.md, "Fast-math in a kernel"
def blr_scores(x, V, c, offset, label, J, v, f, im, mean, v0, d0, beta, t):
    """The fused BLR pass over one chunk (see the module docstring).

    x: (m, r) chunk; V: (3 + B, r) rows w, d, h, g_1..g_B; c: (B,) the Sherman-Morrison
    coefficients of the g_b; offset: the global index of the chunk's first row; mean, v0,
    d0: the constants above; beta: the UCB weight of sqrt(v); t: the weight of im in the
    selection (0 greedy, 1 otherwise). Updates J, v, f and im in place and returns the
    partials (sums [sum f, sum im, n unlabeled], candidates and the lists' K-th values).
    Without a Thompson draw (d = 0: greedy and UCB) x . d is 0 and is not computed, so a
    query with one new label costs LAS's three dot products per row, not six.
    """
    m = chunk_rows(x)
    n_g = V.shape[0] - 3
    with_d = has_nonzero(V[1])
    U = V if with_d else without_row(V, 1)  # x . d = 0 without a draw: one product less per row
    g0 = 3 if with_d else 2  # the first g_b's row in U
    U = pad3(U)
    T = dots_setup(x, U)
    Q = aligned_zeros(U.shape[0], ROW_BLOCK)  # the dot products, a row a vector (las.block_buffer)
    zeros = np.zeros(ROW_BLOCK)
    vals, idx = new_top(N_LISTS, TOP_K)
    sum_f, sum_im, n_u = 0.0, 0.0, 0
    for i0 in range(0, m, ROW_BLOCK):
        i1 = min(i0 + ROW_BLOCK, m)
        n = i1 - i0
        chunk_dots(x, i0, i1, U, T, Q.T)
        xw, xd, xh = Q[0, :n], Q[1, :n] if with_d else zeros[:n], Q[g0 - 1, :n]
        Jb, vb, fb, ib, lb = J[i0:i1], v[i0:i1], f[i0:i1], im[i0:i1], label[i0:i1]
        if n_g == 1:  # one new label, the usual case
            xg, c0 = Q[g0, :n], c[0]
            for k in range(n):
                Jb[k] -= c0 * xg[k] * xg[k]
        elif n_g > 1:
            for k in range(n):
                j = Jb[k]
                for b in range(n_g):
                    j -= c[b] * Q[g0 + b, k] * Q[g0 + b, k]
                Jb[k] = j
        for k in range(n):
            vi = Jb[k] - 2.0 * xh[k] + v0
            vb[k] = vi
            fi = mean + xw[k]
            fb[k] = fi
            lab = lb[k] >= 0
            imi = 0.0 if lab else beta * math.sqrt(max(vi, 0.0)) + xd[k] + d0
            ib[k] = imi
            n_u += 0 if lab else 1
        block_f, block_im = unlabeled_sums(lb, fb, ib, n)
        sum_f += block_f
        sum_im += block_im
        push_candidates(label, f, im, i0, i1, t, vals, idx)
    sums = np.array([sum_f, sum_im, n_u])
    return (sums,) + candidate_partials(vals, idx, offset, f, im)


@numba.njit(nogil=True, cache=True)
def has_nonzero(a):
    """Whether some entry of a is not 0."""
    for value in a:
        if value != 0.0:
            return True
    return False


@numba.njit(nogil=True, cache=True)
def without_row(V, k):
    """V without its row k."""
    out = np.empty((V.shape[0] - 1, V.shape[1]))
    copy_to(out[:k], V[:k])
    copy_to(out[k:], V[k + 1 :])
    return out


@numba.njit(nogil=True, cache=True, fastmath=FAST)
def sample_tops(x, W, offset, label, k):
    """For each row w~_b of W (one Thompson draw per member of a batch), the k unlabeled
    rows of the chunk with the highest x . w~_b: (global indices (B, k), values (B, k)),
    best first, ties to the lowest index; -1 / -inf where the chunk has fewer."""
    m = chunk_rows(x)
    nw = W.shape[0]
    Wp = pad3(W)
    T = dots_setup(x, Wp)
    P = np.empty((ROW_BLOCK, Wp.shape[0]))
    vals, idx = new_top(nw, k)
    for i0 in range(0, m, ROW_BLOCK):
        i1 = min(i0 + ROW_BLOCK, m)
        chunk_dots(x, i0, i1, Wp, T, P)
        for t in range(i1 - i0):
            if label[i0 + t] >= 0:
                continue
            for b in range(nw):
                if P[t, b] > vals[b, k - 1]:
                    push_top(vals, idx, b, P[t, b], i0 + t)
    for b in range(nw):
        for p in range(k):
            if idx[b, p] >= 0:
                idx[b, p] += offset
    return idx, vals
