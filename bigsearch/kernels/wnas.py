"""WNAS kernel: weighted-neighbour scores, one pass per batch of new labels.

f_i = sum_{j in L} s_j (x_i . x_j) / sum_{j in L} |x_i . x_j| with s_j = +1 for a
positive and -1 for a negative; each point keeps the numerator and denominator, so a
new label costs one dot product per point. 0/0 gives 0 (no evidence either way).
"""

import numba
import numpy as np

from .common import FAST, ROW_BLOCK, TOP_K, candidate_partials, new_top, pad3, push_top
from .compile_lock import lock_compiles
from .encoded import chunk_dots, chunk_rows, dots_setup


@numba.njit(nogil=True, cache=True, fastmath=FAST)
def add_similarities(x, Z, signs, offset, label, num, den, f):
    """Add the labeled rows Z (k, r) with signs (k,) to num and den; recompute f.

    Returns the same partials as the LAS kernel (the impact-factor parts are 0), so
    both methods share the selection code.
    """
    m, k = chunk_rows(x), Z.shape[0]
    Zp = pad3(Z)
    T = dots_setup(x, Zp)
    P = np.empty((ROW_BLOCK, Zp.shape[0]))
    vals, idx = new_top(1, TOP_K)
    sum_f, n_u = 0.0, 0
    for i0 in range(0, m, ROW_BLOCK):
        i1 = min(i0 + ROW_BLOCK, m)
        if k:
            chunk_dots(x, i0, i1, Zp, T, P)
        for t in range(i1 - i0):
            i = i0 + t
            a, b = num[i], den[i]
            for c in range(k):
                a += signs[c] * P[t, c]
                b += abs(P[t, c])
            num[i] = a
            den[i] = b
            f[i] = a / b if b > 0.0 else 0.0
        k_f = vals[0, TOP_K - 1]
        for i in range(i0, i1):
            if label[i] < 0:
                sum_f += f[i]
                n_u += 1
                if f[i] > k_f:
                    push_top(vals, idx, 0, f[i], i)
                    k_f = vals[0, TOP_K - 1]
    sums = np.array([sum_f, 0.0, n_u])
    return (sums,) + candidate_partials(vals, idx, offset, f, f[:0])


lock_compiles(globals())
