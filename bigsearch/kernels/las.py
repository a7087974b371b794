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
"""

import numba
import numpy as np

from .common import FAST, N_LISTS, ROW_BLOCK, TOP_K, candidate_partials, new_top, pad3, push_candidates
from .encoded import chunk_dots, chunk_rows, dots_setup


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


@numba.njit(nogil=True, cache=True, fastmath=FAST)
def update_scores(x, V, c, offset, label, deg, J, f, im, eta, w0, pi, t_prev):
    """The fused LAS pass over one chunk (see the module docstring).

    x: (m, r) chunk; V: (2 + B, r) rows K^-1 xq, K^-1 xz, g_1..g_B; c: (B,) the
    Sherman-Morrison coefficients of the g_b; offset: global index of the chunk's first
    row; t_prev: the selection weight of the last query (a guess of this one's).
    Updates J, f, im in place and returns the partials
    (sums [sum f, sum IM, n unlabeled], candidates (idx, f, IM) and K-th values of the
    lists by f, by IM and by f + t_prev IM; engine/core/select.py explains them).
    """
    m = chunk_rows(x)
    nv = V.shape[0]
    V = pad3(V)
    T = dots_setup(x, V)
    lam = (1.0 - eta) / eta
    b_lab, b_unl, q_unl = 1.0 - eta, 1.0 / (1.0 + w0), pi * w0 / (1.0 + w0)
    A1, A2 = 1.0 / lam - pi * w0, 1.0 / lam - w0
    P = np.empty((ROW_BLOCK, V.shape[0]))
    vals, idx = new_top(N_LISTS, TOP_K)
    sum_f, sum_im, n_u = 0.0, 0.0, 0
    for i0 in range(0, m, ROW_BLOCK):
        i1 = min(i0 + ROW_BLOCK, m)
        chunk_dots(x, i0, i1, V, T, P)
        # Branch-free per-point update and sums, so LLVM can vectorize them across rows.
        for t in range(i1 - i0):
            i = i0 + t
            d = deg[i]
            j = J[i]
            if nv == 3:         # one new label, the usual case: no inner loop
                j -= c[0] * P[t, 2] * P[t, 2]
            else:
                for b in range(nv - 2):
                    j -= c[b] * P[t, 2 + b] * P[t, 2 + b]
            J[i] = j
            lab = label[i] >= 0
            rho = (b_lab if lab else b_unl) / d
            fi = (eta * label[i] if lab else q_unl) + rho * P[t, 0]
            mu = rho * (1.0 + P[t, 1])
            mi = (1.0 + rho * j) * rho
            ci = d * (A1 - A2 * fi) / (1.0 + d * A2 * mi)
            f[i] = fi
            imi = 0.0 if lab else fi * ci * (mu - mi)
            im[i] = imi
            sum_f += 0.0 if lab else fi
            sum_im += imi
            n_u += 0 if lab else 1
        # Candidates: compared with each list's current K-th value inline; inserted rarely.
        push_candidates(label, f, im, i0, i1, t_prev, vals, idx)
    sums = np.array([sum_f, sum_im, n_u])
    return (sums,) + candidate_partials(vals, idx, offset, f, im)
