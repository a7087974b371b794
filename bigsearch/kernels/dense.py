"""Kernels over the r x r state (K^-1) and its low-rank correction (engine/core/rank_updates.py).

At r = 2,048, K^-1 is 32 MiB; NumPy's ``Kinv -= c * np.outer(g, g)`` makes three
passes with temporaries, and a threaded BLAS on a busy machine spent 8x longer on a
matrix-vector product than one thread (docs/performance.md). These kernels read K^-1
once (products) and read and write it once (the rank-B update), in one thread.
"""

import numba
import numpy as np

from .common import FAST
from .compile_lock import lock_compiles


@numba.njit(nogil=True, cache=True, fastmath=FAST)
def times_columns(A, M):
    """A @ M for A (r x r) and M (r x m) with few columns, given as M^T (m x r): one pass
    over A, one dot product per row of A and column of M. Returns (r x m)."""
    m = M.shape[0]
    out = np.empty((A.shape[0], m))
    for i in range(A.shape[0]):
        for c in range(m):
            s = 0.0
            for j in range(A.shape[1]):
                s += A[i, j] * M[c, j]
            out[i, c] = s
    return out


@numba.njit(nogil=True, cache=True, fastmath=FAST)
def subtract_outer(A, G, c):
    """A -= sum_b c_b g_b g_b^T in place (G: the g_b as rows, B x r), in one pass."""
    B, r = G.shape
    Gc = np.empty((r, B))
    for b in range(B):
        for j in range(r):
            Gc[j, b] = c[b] * G[b, j]
    if B == 1:              # one label, the usual case: a loop LLVM vectorizes (10x faster here)
        for i in range(r):
            gi = Gc[i, 0]
            for j in range(r):
                A[i, j] -= gi * G[0, j]
        return
    for i in range(r):
        for j in range(r):
            s = 0.0
            for b in range(B):
                s += Gc[i, b] * G[b, j]
            A[i, j] -= s


@numba.njit(nogil=True, cache=True, fastmath=FAST)
def sparse_rows_times(R, A):
    """R @ A for rows R (B x r) with few nonzeros and A (r x r): each output row adds up
    the rows of A at its row's nonzeros, B * nnz * r multiply-adds instead of B * r^2
    (with A symmetric, the g_b = A x_b of a batch of fingerprint labels). A row of A is read
    once for all the rows of R that use it; each output adds its terms in the order of j,
    so a row's product is the same bits alone or with others."""
    B, r = R.shape
    out = np.zeros((B, A.shape[1]))
    for j in range(r):
        for b in range(B):
            v = R[b, j]
            if v != 0.0:
                for k in range(A.shape[1]):
                    out[b, k] += v * A[j, k]
    return out


@numba.njit(nogil=True, cache=True, fastmath=FAST)
def subtract_low_rank(out, Gt, c, k, rows):
    """out[b] -= sum_{a<k} c_a (g_a . rows[b]) g_a for each row b, with the g_a the rows of
    Gt: a few labels' K^-1 x_b corrected by the labels kept as a low-rank term (O(r k))."""
    for b in range(rows.shape[0]):
        for a in range(k):
            s = 0.0
            for j in range(rows.shape[1]):
                s += Gt[a, j] * rows[b, j]
            s *= c[a]
            for j in range(rows.shape[1]):
                out[b, j] -= s * Gt[a, j]


lock_compiles(globals())
