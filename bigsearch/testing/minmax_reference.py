"""The MinMax map's buckets as first written (one plain loop per row, draw and feature):
the reference the tiled kernel (kernels/minmax.py) must match bit for bit."""

import numba
import numpy as np

from ..kernels.minmax import GOLDEN, mix


@numba.njit(cache=True, nogil=True)
def reference_cws_buckets(Z, gamma_r, log_c, beta, salts, power, n_buckets):
    """Per row and per feature block d: the bucket of the power CWS draws of block d.

    Draw s of row x (Ioffe 2010): for each k with x_k > 0, t_k = floor(ln x_k / r_k +
    beta_k), ln a_k = ln c_k - r_k (t_k - beta_k) - r_k; the pair is (k*, t_k*) with
    k* = argmin_k ln a_k (ties: lowest k)."""
    m, r = Z.shape
    n_blocks = gamma_r.shape[0] // power
    out = np.zeros((m, n_blocks), np.int64)
    nz = np.empty(r, np.int64)
    for i in range(m):
        n_nz = 0
        for k in range(r):
            if Z[i, k] > 0:
                nz[n_nz] = k
                n_nz += 1
        if n_nz == 0:
            continue
        for d in range(n_blocks):
            h = np.uint64(d) * GOLDEN
            for p in range(power):
                s = d * power + p
                best, best_k, best_t = np.inf, -1, 0
                for j in range(n_nz):
                    k = nz[j]
                    t = np.floor(np.log(Z[i, k]) / gamma_r[s, k] + beta[s, k])
                    log_a = log_c[s, k] - gamma_r[s, k] * (t - beta[s, k]) - gamma_r[s, k]
                    if log_a < best:
                        best, best_k, best_t = log_a, k, np.int64(t)
                h = mix(h ^ salts[s] ^ (np.uint64(best_k) * GOLDEN) ^ mix(np.uint64(best_t + (1 << 40))))
            out[i, d] = np.int64(h % np.uint64(n_buckets))
    return out
