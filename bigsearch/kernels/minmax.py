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
come as sparse (CSR) lists of (k, ln x_k), each logarithm taken once per row; a
(k, ln x_k) pair's candidates depend on nothing else, so each distinct pair of a block is
computed once per draw (fingerprint counts repeat: about 35 entries per distinct pair).
Every arithmetic operation is the definition's, in the same order, so the buckets are
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
def cws_tiles(indptr, pair_of, pair_k, pair_log, tiles, salts, power, n_buckets, first_tile, end_tile, out):
    """The buckets of feature blocks d in tiles [first_tile, end_tile) for every row, into
    out[:, d] (rows without a positive entry are left as they are). Row i's entries are
    indptr[i]:indptr[i + 1] of ``pair_of``, in increasing feature order; pair p is
    (``pair_k[p]``, ``pair_log[p]``).

    Per tile, each distinct pair's candidate ln a in every lane is computed once (a table of
    pairs x lanes); a row's draw is then the smallest of its entries' table rows (ties: the
    earlier entry, the lower k), and only the winner's t is computed again, for the hash."""
    lanes = tiles.shape[3]
    per_tile = lanes // power
    n_blocks = out.shape[1]
    table = np.empty((len(pair_k), lanes))
    best = np.empty(lanes)
    best_p = np.empty(lanes, np.int64)
    for tile in range(first_tile, end_tile):
        for p in range(len(pair_k)):
            k = pair_k[p]
            _candidates(pair_log[p], tiles[tile, k, 0], tiles[tile, k, 1], tiles[tile, k, 2], table[p])
        for i in range(len(indptr) - 1):
            if indptr[i] == indptr[i + 1]:
                continue
            best[:] = np.inf
            best_p[:] = -1
            for j in range(indptr[i], indptr[i + 1]):
                _keep_smaller(table[pair_of[j]], pair_of[j], best, best_p)
            for q in range(per_tile):
                d = tile * per_tile + q
                if d >= n_blocks:
                    break
                h = np.uint64(d) * GOLDEN
                for p in range(power):
                    lane = q * power + p
                    k = pair_k[best_p[lane]]
                    t = np.int64(np.floor(pair_log[best_p[lane]] / tiles[tile, k, 0, lane] + tiles[tile, k, 1, lane]))
                    h = mix(h ^ salts[d * power + p] ^ (np.uint64(k) * GOLDEN) ^ mix(np.uint64(t + (1 << 40))))
                out[i, d] = np.int64(h % np.uint64(n_buckets))


@numba.njit(cache=True, nogil=True, inline="always", error_model="numpy")
def _candidates(log_x, gamma_r, beta, log_c, out):
    """One (feature, ln x) pair's ln a in each lane: t = floor(ln x / r + beta),
    ln a = ln c - r (t - beta) - r (the definition's operations, in its order)."""
    for s in range(len(out)):
        t = np.floor(log_x / gamma_r[s] + beta[s])
        out[s] = log_c[s] - gamma_r[s] * (t - beta[s]) - gamma_r[s]


@numba.njit(cache=True, nogil=True, inline="always")
def _keep_smaller(log_a, p, best, best_p):
    """Keep pair p in each lane where its ln a beats the best so far (ties keep the
    earlier). Branch-free, so LLVM vectorizes it."""
    for s in range(len(best)):
        better = log_a[s] < best[s]
        best[s] = log_a[s] if better else best[s]
        best_p[s] = p if better else best_p[s]


@numba.njit(cache=True, nogil=True)
def one_hot_blocks(buckets, rows, n_buckets, value, out):
    """out[i, d * n_buckets + buckets[i, d]] = value for every d and every i in ``rows``."""
    for i in rows:
        for d in range(buckets.shape[1]):
            out[i, d * n_buckets + buckets[i, d]] = value
