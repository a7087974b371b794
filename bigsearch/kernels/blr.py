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
    ROW_BLOCK,
    aligned_zeros,
    copy_to,
    may_enter,
    new_top,
    pad3,
    push_flagged,
    push_top,
    unlabeled_sums,
)
from .compile_lock import lock_compiles
from .encoded import chunk_dots, chunk_rows, dots_setup
from .items import ITEM_ROWS, chunk_partials, new_items, next_item


@numba.njit(nogil=True, cache=True)  # no fastmath: docs/contributing.md, "Fast-math in a kernel"
def blr_scores(x, V, c, offset, label, J, v, f, im, mean, v0, d0, beta, t):
    """The fused BLR pass over one chunk (see the module docstring).

    x: (m, r) chunk; V: (3 + B, r) rows w, d, h, g_1..g_B; c: (B,) the Sherman-Morrison
    coefficients of the g_b; offset: the global index of the chunk's first row; mean, v0,
    d0: the constants above; beta: the UCB weight of sqrt(v); t: the weight of im in the
    selection (0 greedy, 1 otherwise). Updates J, v, f and im in place and returns the
    partials (sums [sum f, sum im, n unlabeled], candidates and the lists' K-th values).

    The chunk goes item by item (kernels/items.py) through the function ``blr_items`` runs
    on many threads over many chunks, so both return the same partials, bit for bit.
    """
    m = chunk_rows(x)
    U, g0, with_d = blr_vectors(V)
    T = dots_setup(x, U)
    Q, H = aligned_zeros(U.shape[0], ROW_BLOCK), np.zeros(ROW_BLOCK, np.uint8)
    points, consts = (label, J, v, f, im), (mean, v0, d0, beta, t)
    n_items = (m + ITEM_ROWS - 1) // ITEM_ROWS
    sums, vals, idx = new_items(n_items)
    for k in range(n_items):
        a, b = k * ITEM_ROWS, min((k + 1) * ITEM_ROWS, m)
        blr_rows(x, a, b, U, g0, with_d, V.shape[0] - 3, T, c, points, consts, vals[k], idx[k], Q, H, sums[k])
    return chunk_partials(sums, vals, idx, 0, n_items, offset, f, im)


@numba.njit(nogil=True, cache=True)
def blr_items(x0, addresses, starts, items, counter, U, g0, with_d, n_g, c, points, consts, sums, vals, idx):
    """``blr_scores`` over many chunks at once, run by several threads together, each
    taking the next work item until none is left (as kernels/las.py ``update_items``,
    whose arguments x0 .. counter and sums, vals, idx these are). U, g0, with_d: the
    vectors of ``blr_vectors``; n_g: the number of g_b; points: the whole per-point arrays
    (label, J, v, f, im); consts: (mean, v0, d0, beta, t)."""
    T = dots_setup(x0, U)
    Q, H = aligned_zeros(U.shape[0], ROW_BLOCK), np.zeros(ROW_BLOCK, np.uint8)
    while True:
        k, x, a, b, s, e = next_item(counter, items, addresses, starts, x0)
        if k < 0:
            return
        rows = (points[0][s:e], points[1][s:e], points[2][s:e], points[3][s:e], points[4][s:e])
        blr_rows(x, a, b, U, g0, with_d, n_g, T, c, rows, consts, vals[k], idx[k], Q, H, sums[k])


@numba.njit(nogil=True, cache=True)
def blr_vectors(V):
    """The vectors of a pass's dot products, padded (``pad3``), the row of the first g_b
    among them, and whether the Thompson direction d is among them: without a draw (d = 0:
    greedy and UCB) x . d is 0 and is not computed, so a query with one new label costs
    LAS's three dot products per row, not six."""
    with_d = has_nonzero(V[1])
    U = V if with_d else without_row(V, 1)
    return pad3(U), 3 if with_d else 2, with_d


@numba.njit(nogil=True, cache=True)  # no fastmath: an item's sums add block after block
def blr_rows(x, a, b, U, g0, with_d, n_g, T, c, points, consts, vals, idx, Q, H, total):
    """J, v, f and im of rows a <= i < b, ROW_BLOCK at a time (points: label, J, v, f, im;
    consts: mean, v0, d0, beta, t; Q, H: a block's dot products and its flags of rows that
    may enter a candidate list, as in kernels/las.py). Writes [sum of f, sum of im, count]
    over the unlabeled rows into ``total``."""
    label, J, v, f, im = points
    mean, v0, d0, beta, t = consts
    K = vals.shape[1]
    zeros = np.zeros(ROW_BLOCK)
    total[0] = total[1] = total[2] = 0.0
    for i0 in range(a, b, ROW_BLOCK):
        i1 = min(i0 + ROW_BLOCK, b)
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
                for q in range(n_g):
                    j -= c[q] * Q[g0 + q, k] * Q[g0 + q, k]
                Jb[k] = j
        k_f, k_im, k_s = vals[0, K - 1], vals[1, K - 1], vals[2, K - 1]
        n_u, hit = 0, False
        for k in range(n):
            vi = Jb[k] - 2.0 * xh[k] + v0
            vb[k] = vi
            fi = mean + xw[k]
            fb[k] = fi
            lab = lb[k] >= 0
            imi = 0.0 if lab else beta * math.sqrt(max(vi, 0.0)) + xd[k] + d0
            ib[k] = imi
            n_u += 0 if lab else 1
            enters = may_enter(lab, fi, imi, t, k_f, k_im, k_s)
            H[k] = enters
            hit |= enters
        block_f, block_im = unlabeled_sums(lb, fb, ib, n)
        total[0] += block_f
        total[1] += block_im
        total[2] += n_u
        if hit:
            push_flagged(f, im, i0, i1, H, t, vals, idx)


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


lock_compiles(globals())
