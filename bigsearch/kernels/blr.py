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

from .common import FAST, N_LISTS, ROW_BLOCK, TOP_K, candidate_partials, new_top, pad3, push_candidates, push_top
from .encoded import chunk_dots, chunk_rows, dots_setup


@numba.njit(nogil=True, cache=True, fastmath=FAST)
def blr_scores(x, V, c, offset, label, J, v, f, im, mean, v0, d0, beta, t):
    """The fused BLR pass over one chunk (see the module docstring).

    x: (m, r) chunk; V: (3 + B, r) rows w, d, h, g_1..g_B; c: (B,) the Sherman-Morrison
    coefficients of the g_b; offset: the global index of the chunk's first row; mean, v0,
    d0: the constants above; beta: the UCB weight of sqrt(v); t: the weight of im in the
    selection (0 greedy, 1 otherwise). Updates J, v, f and im in place and returns the
    partials (sums [sum f, sum im, n unlabeled], candidates and the lists' K-th values).
    """
    m = chunk_rows(x)
    nv = V.shape[0]
    V = pad3(V)
    T = dots_setup(x, V)
    P = np.empty((ROW_BLOCK, V.shape[0]))
    vals, idx = new_top(N_LISTS, TOP_K)
    sum_f, sum_im, n_u = 0.0, 0.0, 0
    for i0 in range(0, m, ROW_BLOCK):
        i1 = min(i0 + ROW_BLOCK, m)
        chunk_dots(x, i0, i1, V, T, P)
        for k in range(i1 - i0):
            i = i0 + k
            j = J[i]
            for b in range(nv - 3):
                j -= c[b] * P[k, 3 + b] * P[k, 3 + b]
            J[i] = j
            vi = j - 2.0 * P[k, 2] + v0
            v[i] = vi
            fi = mean + P[k, 0]
            f[i] = fi
            lab = label[i] >= 0
            imi = 0.0 if lab else beta * math.sqrt(max(vi, 0.0)) + P[k, 1] + d0
            im[i] = imi
            sum_f += 0.0 if lab else fi
            sum_im += imi
            n_u += 0 if lab else 1
        push_candidates(label, f, im, i0, i1, t, vals, idx)
    sums = np.array([sum_f, sum_im, n_u])
    return (sums,) + candidate_partials(vals, idx, offset, f, im)


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
