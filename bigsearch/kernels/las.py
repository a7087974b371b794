"""LAS kernels: one chunk of X, that chunk's per-point state, small global state.

Notation (docs/algorithm.md): for point i with degree d_i, b_i = 1 - eta when labeled
and 1 / (1 + w0) when not; rho_i = b_i / d_i; q_i = eta y_i when labeled and
pi w0 / (1 + w0) when not; z_i = rho_i when unlabeled, else 0. Per point we keep only
the label (int8), d, J, f and the impact factor; rho, q and z follow from them.

The fused update is one pass: for each row, the dot products with
V = [K^-1 xq, K^-1 xz, g_1 .. g_B] give

    f_i  = q_i + rho_i (x_i . K^-1 xq)
    J_i <- J_i - sum_b c_b (x_i . g_b)^2            (Sherman-Morrison on K^-1)
    Mu_i = z_i + rho_i (x_i . K^-1 xz)               (M^-1 u)
    m_i  = (1 + rho_i J_i) rho_i                     (diag M^-1)
    c_i  = d_i (A1 - A2 f_i) / (1 + d_i A2 m_i),     A1 = 1/lam - pi w0, A2 = 1/lam - w0
    IM_i = f_i c_i (Mu_i - m_i)                      (unlabeled points; 0 otherwise)

and the chunk's partials: sum of f and IM over unlabeled points, their count, and
the top candidates by f and by IM (engine/core/select.py picks the winner from them).

A chunk is cut into work items of ITEM_ROWS rows (from its first row), each with its own
sums and candidate lists, merged in order into the chunk's: ``update_scores`` runs them
one after the other, ``update_items`` on several threads over many chunks (the local
backend's pass over a store whose maps are held), with the same partials bit for bit.
"""

import numba
import numpy as np

from .common import (
    FAST,
    ROW_BLOCK,
    aligned_zeros,
    may_enter,
    pad3,
    push_flagged,
    unlabeled_sums,
)
from .compile_lock import lock_compiles
from .encoded import chunk_dots, chunk_rows, dots_setup
from .items import ITEM_ROWS, chunk_partials, new_items, next_item


@numba.njit(nogil=True, cache=True, fastmath=FAST)
def degrees(x, s, deg):
    """deg_i = x_i . s; returns the count of degrees <= 0 (or not finite) and the first one."""
    V = pad3(s.reshape(1, -1))
    T = dots_setup(x, V)
    P = np.empty((ROW_BLOCK, 3))
    bad, first = 0, -1
    m = chunk_rows(x)
    for i0 in range(0, m, ROW_BLOCK):
        i1 = min(i0 + ROW_BLOCK, m)
        chunk_dots(x, i0, i1, V, T, P)
        for t in range(i1 - i0):
            d = P[t, 0]
            deg[i0 + t] = d
            if not d > 0.0:
                bad += 1
                if first < 0:
                    first = i0 + t
    return bad, first


@numba.njit(nogil=True, cache=True)
def point_weights(label, deg, eta, w0, pi):
    """rho, q and z for a chunk (the diagonal of R = B D^-1, q = (I - B) y', z = R u)."""
    m = label.shape[0]
    rho, q, z = np.empty(m), np.empty(m), np.empty(m)
    b_lab, b_unl, q_unl = 1.0 - eta, 1.0 / (1.0 + w0), pi * w0 / (1.0 + w0)
    for i in range(m):
        if label[i] >= 0:
            rho[i] = b_lab / deg[i]
            q[i] = eta * label[i]
            z[i] = 0.0
        else:
            rho[i] = b_unl / deg[i]
            q[i] = q_unl
            z[i] = rho[i]
    return rho, q, z


BLOCK_ROWS = 1024    # rows whose dot products are computed before their per-point update


@numba.njit(nogil=True, cache=True)   # no fastmath: see update_block
def update_scores(x, V, c, offset, label, deg, J, f, im, eta, w0, pi, t_prev):
    """The fused LAS pass over one chunk (see the module docstring).

    x: (m, r) chunk; V: (2 + B, r) rows K^-1 xq, K^-1 xz, g_1..g_B; c: (B,) the
    Sherman-Morrison coefficients of the g_b; offset: global index of the chunk's first
    row; t_prev: the selection weight of the last query (a guess of this one's).
    Updates J, f, im in place and returns the partials
    (sums [sum f, sum IM, n unlabeled], candidates (idx, f, IM) and K-th values of the
    lists by f, by IM and by f + t_prev IM; engine/core/select.py explains them).

    The chunk goes item by item (ITEM_ROWS rows) through the functions ``update_items``
    runs on many threads over many chunks, so both return the same partials, bit for bit.
    """
    m = chunk_rows(x)
    nv = V.shape[0]
    V = pad3(V)
    T = dots_setup(x, V)
    Q, H = block_buffer(V.shape[0]), hit_flags()
    n_items = (m + ITEM_ROWS - 1) // ITEM_ROWS
    sums, vals, idx = new_items(n_items)
    for k in range(n_items):
        a, b = k * ITEM_ROWS, min((k + 1) * ITEM_ROWS, m)
        update_rows(x, a, b, V, nv, T, c, label, deg, J, f, im, eta, w0, pi, t_prev, vals[k], idx[k], Q, H, sums[k])
    return chunk_partials(sums, vals, idx, 0, n_items, offset, f, im)


@numba.njit(nogil=True, cache=True)
def update_items(x0, addresses, starts, items, counter, V, nv, c, label, deg, J, f, im, eta, w0, pi, t_prev, sums,
                 vals, idx):
    """``update_scores`` over many chunks at once, run by several threads together: each
    takes the next work item (``counter``, shared) until none is left, so every thread is
    busy to the end of the pass whatever the chunks' sizes.

    x0: the first chunk; addresses: every chunk's, of x0's type and width (``chunk_at``;
    the caller keeps them alive); starts: (n_chunks + 1,) each chunk's first global row,
    then n; items: (n_items, 3) chunk, first and end row in it (ITEM_ROWS
    apart from the chunk's first row, as in ``update_scores``); V padded (``pad3``), nv its
    rows before padding; label .. im: whole per-point arrays. Item k's partials go to
    sums[k], vals[k], idx[k] (``new_items``); ``chunk_partials`` then makes each chunk's.
    """
    T = dots_setup(x0, V)
    Q, H = block_buffer(V.shape[0]), hit_flags()
    while True:
        k, x, a, b, s, e = next_item(counter, items, addresses, starts, x0)
        if k < 0:
            return
        update_rows(x, a, b, V, nv, T, c, label[s:e], deg[s:e], J[s:e], f[s:e], im[s:e], eta, w0, pi, t_prev,
                    vals[k], idx[k], Q, H, sums[k])


@numba.njit(nogil=True, cache=True)   # no fastmath: an item's sums add block after block
def update_rows(x, a, b, V, nv, T, c, label, deg, J, f, im, eta, w0, pi, t_prev, vals, idx, Q, H, total):
    """J, f and the impact factor of rows a <= i < b, BLOCK_ROWS at a time (Q, H: the
    buffers of ``block_buffer`` and ``hit_flags``; V padded by ``pad3``, nv its rows
    before padding). Writes [sum of f, sum of IM, count] over the unlabeled rows into
    ``total`` (the item's row of sums); the rows of a block that may enter the candidate
    lists (vals, idx) are offered to them (``push_flagged``)."""
    K = vals.shape[1]
    total[0] = total[1] = total[2] = 0.0
    for i0 in range(a, b, BLOCK_ROWS):
        i1 = min(i0 + BLOCK_ROWS, b)
        sum_f, sum_im, n_u, hit = update_block(x, i0, i1, V, nv, T, c, label, deg, J, f, im, eta, w0, pi,
                                               t_prev, vals[0, K - 1], vals[1, K - 1], vals[2, K - 1], Q, H)
        total[0] += sum_f
        total[1] += sum_im
        total[2] += n_u
        if hit:
            push_flagged(f, im, i0, i1, H, t_prev, vals, idx)


@numba.njit(nogil=True, cache=True, error_model="numpy")   # IEEE division: vectorized
def update_block(x, a, b, V, nv, T, c, label, deg, J, f, im, eta, w0, pi, t_prev, k_f, k_im, k_s, Q, H):
    """``update_rows`` for one block (the module docstring's formulas): the sums over its
    unlabeled rows, and whether one may enter a candidate list whose K-th values are
    k_f, k_im, k_s, with H[t] set for each row that may (the test for f + t_prev IM has a
    margin for rounding, so it errs only toward yes). Testing each row here, in the
    vectorized loop, spares a second scan of the block: nearly every block has a row that
    enters some list of its item (each item's lists start empty), and that scan cost
    about 1 ms of a 12 ms pass over 1M x 128 rows on two AMD EPYC cores.

    Only the dot products (``chunk_dots``) are fast-math: with it here, a dask worker's
    impact factors differed in the last bit from its driver's (docs/contributing.md,
    "Fast-math in a kernel"). The per-point loop reads the dot products as Q's rows, at unit
    stride (``block_buffer``), and vectorizes without fast-math: its sums are left to
    ``unlabeled_sums``, which adds them in a fixed order."""
    chunk_dots(x, a, b, V, T, Q.T)
    n = b - a
    xq, xz, xg = Q[0, :n], Q[1, :n], Q[2, :n]
    lb, dg, Jb, fb, ib = label[a:b], deg[a:b], J[a:b], f[a:b], im[a:b]
    if nv == 3:         # one new label, the usual case
        c0 = c[0]
        for t in range(n):
            Jb[t] -= c0 * xg[t] * xg[t]
    elif nv > 3:
        for t in range(n):
            j = Jb[t]
            for q in range(nv - 2):
                j -= c[q] * Q[2 + q, t] * Q[2 + q, t]
            Jb[t] = j
    lam = (1.0 - eta) / eta
    b_lab, b_unl, q_unl = 1.0 - eta, 1.0 / (1.0 + w0), pi * w0 / (1.0 + w0)
    A1, A2 = 1.0 / lam - pi * w0, 1.0 / lam - w0
    n_u, hit = 0, False
    for t in range(n):
        d = dg[t]
        lab = lb[t] >= 0
        rho = (b_lab if lab else b_unl) / d
        fi = (eta * lb[t] if lab else q_unl) + rho * xq[t]
        mu = rho * (1.0 + xz[t])
        mi = (1.0 + rho * Jb[t]) * rho
        ci = d * (A1 - A2 * fi) / (1.0 + d * A2 * mi)
        fb[t] = fi
        imi = 0.0 if lab else fi * ci * (mu - mi)
        ib[t] = imi
        n_u += 0 if lab else 1
        enters = may_enter(lab, fi, imi, t_prev, k_f, k_im, k_s)
        H[t] = enters
        hit |= enters
    sum_f, sum_im = unlabeled_sums(lb, fb, ib, n)
    return sum_f, sum_im, n_u, hit


@numba.njit(nogil=True, cache=True)
def block_buffer(k):
    """A block's dot products with k vectors, one row a vector (k, BLOCK_ROWS): the dot
    products write them through the transpose, the per-point loop reads each at unit stride.
    A copy from a (BLOCK_ROWS, k) buffer cost 1-2 ms a pass over 1M rows on one AMD EPYC
    core, and 4 ms more with both buffers on cache lines (their lines at the same 4 KiB
    offsets); one buffer, 22.6-23.0 ms against 27.6 (docs/performance.md)."""
    return aligned_zeros(k, BLOCK_ROWS)


@numba.njit(nogil=True, cache=True)
def hit_flags():
    """A block's flags of rows that may enter a candidate list (``update_block``), as
    bytes, eight of them read at a time."""
    return np.zeros(BLOCK_ROWS, np.uint8)


lock_compiles(globals())
