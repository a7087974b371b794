"""Consistent weighted sampling of sparse non-negative rows: the kernel of ingest's MinMax map.

Draw s of a row x (Ioffe 2010; ingest/minmax.py defines the map): for each k with
x_k > 0, t_k = floor(ln x_k / r_sk + beta_sk) and ln a_k = ln c_sk - r_sk (t_k - beta_sk)
- r_sk; the draw is the pair (k*, t_k*) with k* = argmin_k ln a_k (ties: lowest k). The
``power`` draws of feature block d are hashed together (SplitMix64) into one of
``n_buckets`` buckets.

The draws' random numbers are packed in tiles of ``lanes`` consecutive draws,
``tiles[tile, k, q, lane]`` with q = 0, 1, 2 for r, beta and ln c, so that for one
non-zero feature the ``lanes`` draws of a tile are contiguous (one vectorized loop) and a
tile's numbers stay in cache while every row of a block is sampled against them. Rows
come as sparse (CSR) lists of (k, ln x_k), each logarithm taken once per row. Every
arithmetic operation is the definition's, in the same order, so the buckets are
bit-identical to the plain loop (tests/test_featurizers.py keeps that loop).
"""

import numba
import numpy as np

GOLDEN = np.uint64(0x9E3779B97F4A7C15)


@numba.njit(cache=True, nogil=True)
def mix(h):
    """SplitMix64's finalizer: a well-spread 64-bit hash of h."""
    h = (h ^ (h >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    h = (h ^ (h >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return h ^ (h >> np.uint64(31))


@numba.njit(cache=True, nogil=True)
def sparse_logs(Z):
    """The positive entries of each row of Z as CSR: (indptr, columns, ln values)."""
    m, r = Z.shape
    indptr = np.zeros(m + 1, np.int64)
    for i in range(m):
        count = 0
        for k in range(r):
            if Z[i, k] > 0:
                count += 1
        indptr[i + 1] = indptr[i] + count
    columns = np.empty(indptr[m], np.int64)
    logs = np.empty(indptr[m])
    for i in range(m):
        j = indptr[i]
        for k in range(r):
            if Z[i, k] > 0:
                columns[j] = k
                logs[j] = np.log(Z[i, k])
                j += 1
    return indptr, columns, logs


@numba.njit(cache=True, nogil=True, error_model="numpy")  # IEEE division: no zero check, vectorized
def cws_tiles(indptr, columns, logs, tiles, salts, power, n_buckets, first_tile, end_tile, out):
    """The buckets of feature blocks d in tiles [first_tile, end_tile) for every row, into
    out[:, d] (rows without a positive entry are left as they are)."""
    lanes = tiles.shape[3]
    per_tile = lanes // power
    n_blocks = out.shape[1]
    best = np.empty(lanes)
    best_k = np.empty(lanes, np.int64)
    best_t = np.empty(lanes)
    for tile in range(first_tile, end_tile):
        for i in range(len(indptr) - 1):
            if indptr[i] == indptr[i + 1]:
                continue
            best[:] = np.inf
            best_k[:] = -1
            best_t[:] = 0.0
            for j in range(indptr[i], indptr[i + 1]):
                k = columns[j]
                log_x = logs[j]
                _sample_feature(log_x, k, tiles[tile, k, 0], tiles[tile, k, 1], tiles[tile, k, 2], best, best_k, best_t)
            for q in range(per_tile):
                d = tile * per_tile + q
                if d >= n_blocks:
                    break
                h = np.uint64(d) * GOLDEN
                for p in range(power):
                    lane = q * power + p
                    t = np.int64(best_t[lane])
                    h = mix(
                        h ^ salts[d * power + p] ^ (np.uint64(best_k[lane]) * GOLDEN) ^ mix(np.uint64(t + (1 << 40)))
                    )
                out[i, d] = np.int64(h % np.uint64(n_buckets))


@numba.njit(cache=True, nogil=True, inline="always", error_model="numpy")
def _sample_feature(log_x, k, gamma_r, beta, log_c, best, best_k, best_t):
    """One feature's candidate in each lane, kept where it beats the best so far (ties
    keep the earlier, lower k). Branch-free, so LLVM vectorizes it."""
    for s in range(len(best)):
        t = np.floor(log_x / gamma_r[s] + beta[s])
        log_a = log_c[s] - gamma_r[s] * (t - beta[s]) - gamma_r[s]
        better = log_a < best[s]
        best[s] = log_a if better else best[s]
        best_k[s] = k if better else best_k[s]
        best_t[s] = t if better else best_t[s]


@numba.njit(cache=True, nogil=True)
def one_hot_blocks(buckets, rows, n_buckets, value, out):
    """out[i, d * n_buckets + buckets[i, d]] = value for every d and every i in ``rows``."""
    for i in rows:
        for d in range(buckets.shape[1]):
            out[i, d * n_buckets + buckets[i, d]] = value
