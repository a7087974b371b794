"""Screening kernel: a linear score plus the similarity to the nearest relevant records.

f_i = x_i . v + b + t * nn_i, where nn_i is the mean of the ``k`` largest similarities
x_i . x_p over the positives p (engine/methods/screen.py). Each point keeps its three
largest similarities (``nn0 >= nn1 >= nn2``, -inf while fewer positives exist), so a
new positive costs one dot product per point, computed in the same pass as x_i . v.
"""

import numba
import numpy as np

from .common import FAST, ROW_BLOCK, TOP_K, candidate_partials, new_top, pad3, push_top
from .compile_lock import lock_compiles
from .encoded import chunk_dots, chunk_rows, dots_setup

NEIGHBOURS = 3  # similarities kept per point


@numba.njit(nogil=True, cache=True, fastmath=FAST)
def screen_scores(x, V, b, t, k, offset, label, nn0, nn1, nn2, f):
    """Insert the similarities to the new positives (rows 1: of V) into each point's three
    largest, then f = x . V[0] + b + t * (mean of the k largest; 0 before any positive).

    Returns the partials of engine/core/select.py with one list (by f) and, as sums over
    the unlabeled points, [sum of nn, sum of nn^2, count]: the spread of nn that scales t
    for the next query."""
    m, new = chunk_rows(x), V.shape[0] - 1
    Vp = pad3(V)
    T = dots_setup(x, Vp)
    P = np.empty((ROW_BLOCK, Vp.shape[0]))
    vals, idx = new_top(1, TOP_K)
    s1, s2, n_u = 0.0, 0.0, 0
    for i0 in range(0, m, ROW_BLOCK):
        i1 = min(i0 + ROW_BLOCK, m)
        chunk_dots(x, i0, i1, Vp, T, P)
        for q in range(i1 - i0):
            i = i0 + q
            a, c, d = nn0[i], nn1[i], nn2[i]
            for p in range(1, new + 1):
                s = P[q, p]
                if s > d:
                    if s > c:
                        d = c
                        if s > a:
                            c = a
                            a = s
                        else:
                            c = s
                    else:
                        d = s
            nn0[i], nn1[i], nn2[i] = a, c, d
            near = _mean_top(a, c, d, k)
            f[i] = P[q, 0] + b + t * near
            if label[i] < 0:
                s1 += near
                s2 += near * near
                n_u += 1
        k_f = vals[0, TOP_K - 1]
        for i in range(i0, i1):
            if label[i] < 0 and f[i] > k_f:
                push_top(vals, idx, 0, f[i], i)
                k_f = vals[0, TOP_K - 1]
    sums = np.array([s1, s2, float(n_u)])
    return (sums,) + candidate_partials(vals, idx, offset, f, f[:0])


@numba.njit(nogil=True, cache=True, inline="always")
def _mean_top(a, c, d, k):
    """The mean of the k largest of (a >= c >= d), the -inf of missing positives left out
    (k is at most the number of positives); 0 when k is 0."""
    if k == 0:
        return 0.0
    if k == 1:
        return a
    if k == 2:
        return (a + c) / 2.0
    return (a + c + d) / 3.0


lock_compiles(globals())
