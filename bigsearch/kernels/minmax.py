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
computed once per draw (fingerprint counts repeat: about 35 entries per distinct pair),
with its t kept beside it, so that a row's winners are hashed in vectorized loops (no
division per draw). A row's entries are compared four at a time per sweep of the lanes,
so the best so far is stored once per four entries. Every arithmetic operation is the
definition's, in the same order, so the buckets are bit-identical to the plain loop
(tests/test_featurizers.py keeps that loop and the recipe's committed bytes).
"""

import numba
import numpy as np

from .compile_lock import lock_compiles

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


@numba.njit(cache=True, nogil=True)
def entry_logs(n_rows, rows, columns, values):
    """:func:`sparse_logs` of a block given by its entries (rows, columns, values), in row
    order and increasing column order within a row (fingerprints): the same CSR, the same
    logarithms."""
    indptr = np.zeros(n_rows + 1, np.int64)
    for e in range(len(rows)):
        if values[e] > 0:
            indptr[rows[e] + 1] += 1
    for i in range(n_rows):
        indptr[i + 1] += indptr[i]
    kept = np.empty(indptr[n_rows], np.int64)
    logs = np.empty(indptr[n_rows])
    j = 0
    for e in range(len(rows)):
        if values[e] > 0:
            kept[j] = columns[e]
            logs[j] = np.log(values[e])
            j += 1
    return indptr, kept, logs


@numba.njit(cache=True, nogil=True, error_model="numpy")  # IEEE division: no zero check, vectorized
def cws_tiles(indptr, pair_of, pair_k, pair_log, tiles, salts, power, n_buckets, first_tile, end_tile, out):
    """The buckets of feature blocks d in tiles [first_tile, end_tile) for every row, into
    out[:, d] (rows without a positive entry are left as they are). Row i's entries are
    indptr[i]:indptr[i + 1] of ``pair_of``, in increasing feature order; pair p is
    (``pair_k[p]``, ``pair_log[p]``).

    Per tile, each distinct pair's candidate ln a and t in every lane are computed once
    (tables of pairs x lanes); a row's draw is then the smallest of its entries' table rows
    (ties: the earlier entry, the lower k), and the winners' (k, t) are hashed lane by lane."""
    lanes = tiles.shape[3]
    per_tile = lanes // power
    n_blocks = out.shape[1]
    log_a = np.empty((len(pair_k), lanes))
    t_of = np.empty((len(pair_k), lanes))
    best = np.empty(lanes)
    best_p = np.empty(lanes, np.int64)
    won_k = np.empty(lanes, np.int64)
    won_t = np.empty(lanes)
    keyed = np.empty(lanes, np.uint64)
    hashes = np.empty(per_tile, np.uint64)
    for tile in range(first_tile, end_tile):
        for p in range(len(pair_k)):
            k = pair_k[p]
            _candidates(pair_log[p], tiles[tile, k, 0], tiles[tile, k, 1], tiles[tile, k, 2], t_of[p], log_a[p])
        tile_salts = salts[tile * lanes : tile * lanes + lanes]
        blocks = min(per_tile, n_blocks - tile * per_tile)
        for i in range(len(indptr) - 1):
            if indptr[i] == indptr[i + 1]:
                continue
            best[:] = np.inf
            best_p[:] = -1
            j, end = indptr[i], indptr[i + 1]
            while j + 4 <= end:  # four entries per sweep of the lanes: a quarter of the stores
                p0, p1, p2, p3 = pair_of[j], pair_of[j + 1], pair_of[j + 2], pair_of[j + 3]
                _keep_smallest4(log_a[p0], log_a[p1], log_a[p2], log_a[p3], p0, p1, p2, p3, best, best_p)
                j += 4
            for j in range(j, end):
                _keep_smaller(log_a[pair_of[j]], pair_of[j], best, best_p)
            _key_winners(best_p, pair_k, t_of, tile_salts, blocks * power, won_k, won_t, keyed)
            _hash_blocks(keyed, tile * per_tile, blocks, power, n_buckets, hashes, out[i])


@numba.njit(cache=True, nogil=True, inline="always", error_model="numpy")
def _candidates(log_x, gamma_r, beta, log_c, t_out, out):
    """One (feature, ln x) pair's t and ln a in each lane: t = floor(ln x / r + beta),
    ln a = ln c - r (t - beta) - r (the definition's operations, in its order)."""
    for s in range(len(out)):
        t = np.floor(log_x / gamma_r[s] + beta[s])
        t_out[s] = t
        out[s] = log_c[s] - gamma_r[s] * (t - beta[s]) - gamma_r[s]


@numba.njit(cache=True, nogil=True, inline="always")
def _key_winners(best_p, pair_k, t_of, salts, n_lanes, won_k, won_t, out):
    """The winning (k, t) of the first ``n_lanes`` lanes (the others pad the last tile),
    salted and mixed: the term each draw adds to its block's hash. The winners are
    gathered first, so that the mixing loop vectorizes."""
    for s in range(n_lanes):
        w = best_p[s]
        won_k[s] = pair_k[w]
        won_t[s] = t_of[w, s]
    for s in range(n_lanes):
        out[s] = salts[s] ^ (np.uint64(won_k[s]) * GOLDEN) ^ mix(np.uint64(np.int64(won_t[s]) + (1 << 40)))


@numba.njit(cache=True, nogil=True, inline="always")
def _hash_blocks(keyed, first_block, blocks, power, n_buckets, hashes, out):
    """out[first_block + q] = the bucket of block q's ``power`` draws (lanes q * power + p
    of ``keyed``); ``hashes`` is scratch."""
    for q in range(blocks):
        hashes[q] = np.uint64(first_block + q) * GOLDEN
    for p in range(power):
        for q in range(blocks):
            hashes[q] = mix(hashes[q] ^ keyed[q * power + p])
    if n_buckets & (n_buckets - 1) == 0:  # a power of two: the same remainder, vectorized
        mask = np.uint64(n_buckets - 1)
        for q in range(blocks):
            out[first_block + q] = np.int64(hashes[q] & mask)
    else:
        for q in range(blocks):
            out[first_block + q] = np.int64(hashes[q] % np.uint64(n_buckets))


@numba.njit(cache=True, nogil=True, inline="always")
def _keep_smallest4(a0, a1, a2, a3, p0, p1, p2, p3, best, best_p):
    """:func:`_keep_smaller` of pairs p0..p3 in turn (ln a in a0..a3), the lane's best held
    in registers between them and stored once, unmasked: the masked stores of one pair at
    a time were the loop's bottleneck (two per vector)."""
    for s in range(len(best)):
        b, bp = best[s], best_p[s]
        if a0[s] < b:
            b, bp = a0[s], p0
        if a1[s] < b:
            b, bp = a1[s], p1
        if a2[s] < b:
            b, bp = a2[s], p2
        if a3[s] < b:
            b, bp = a3[s], p3
        best[s], best_p[s] = b, bp


@numba.njit(cache=True, nogil=True, inline="always")
def _keep_smaller(log_a, p, best, best_p):
    """Keep pair p in each lane where its ln a beats the best so far (ties keep the
    earlier). LLVM turns the branch into one compare and two masked stores per vector."""
    for s in range(len(best)):
        if log_a[s] < best[s]:
            best[s] = log_a[s]
            best_p[s] = p


@numba.njit(cache=True, nogil=True)
def one_hot_blocks(buckets, rows, n_buckets, value, out):
    """out[i, d * n_buckets + buckets[i, d]] = value for every d and every i in ``rows``."""
    for i in rows:
        for d in range(buckets.shape[1]):
            out[i, d * n_buckets + np.int64(buckets[i, d])] = value


lock_compiles(globals())
