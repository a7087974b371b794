"""An explicit random-feature map of the MinMax (weighted Tanimoto) kernel (``ingest --minmax``).

For non-negative vectors x, x' the MinMax kernel is

    K(x, x') = sum_k min(x_k, x'_k) / sum_k max(x_k, x'_k),

the Tanimoto (Jaccard) similarity when x and x' are binary fingerprints, and a positive
definite kernel. Consistent weighted sampling (Ioffe, "Improved consistent sampling,
weighted minhash and L1 sketching", ICDM 2010) draws from x one pair h(x) = (k*, t*)
such that, over the random draw,

    P[h(x) = h(x')] = K(x, x')      exactly.

With D independent draws and each pair hashed into one of B buckets, the feature vector
z(x) has D blocks of B entries; block d holds 1/sqrt(D) at the bucket of draw d. Then

    E[z(x) . z(x')] = P[same bucket] = K^p + (1 - K^p) / B

exactly in expectation, where p = ``power``: a draw of power p hashes p independent CWS
pairs together, so two points share it with probability K^p (a sharper kernel, closer to
a nearest-neighbour graph). The inner product is an affine function of K^p with positive
slope (1 - 1/B) and intercept 1/B, like unit rows plus a bias feature; every z(x) has unit
norm and every similarity is >= 0, so LAS degrees are positive. Its standard deviation
is at most 1 / (2 sqrt(D)).

The random numbers (Gamma(2, 1) r and c, uniform beta for each draw and feature) come from
``numpy.random.default_rng([seed, 2])`` (:func:`minmax_draws`), and the bucket of a draw from a SplitMix64 hash
of (draw, k*, t*) salted by the same generator, so the map depends on the seed only.
"""

import math
import os
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass
from functools import partial

import numpy as np

from ..errors import InputError, ParameterError
from ..kernels.minmax import cws_tiles, entry_logs, one_hot_blocks, sparse_logs
from .workers import shared_empty

# Draws per tile: enough that the loop over one feature's draws is long and vectorized
# (rounded to whole SIMD vectors and whole feature blocks); measured best from 32 to 256.
TILE_DRAWS = 128
# Entries of a CSR batch of rows mapped together: it bounds each thread's two tables of the
# distinct (feature, value) pairs' candidates and t (pairs x TILE_DRAWS float64, 64 MiB at most).
BATCH_ENTRIES = 1 << 15


def check_minmax(spec):
    """spec: {"samples": D, "buckets": B, "power": p, "seed": S}."""
    if spec["samples"] < 1:
        raise ParameterError("minmax D needs D >= 1 samples")
    if spec["buckets"] < 2:
        raise ParameterError("minmax_buckets B needs B >= 2")
    if not 1 <= spec["power"] <= 8:
        raise ParameterError("minmax_power p must be between 1 and 8")


def minmax_width(spec):
    return spec["samples"] * spec["buckets"]


def minmax_draws(r, spec):
    """The random numbers of the map for inputs of r features: (r, log c, beta, salts),
    one row of r numbers per draw (D * p draws)."""
    rng = np.random.default_rng([spec["seed"], 2])
    draws = spec["samples"] * spec["power"]
    gamma_r = rng.gamma(2.0, 1.0, (draws, r))
    log_c = np.log(rng.gamma(2.0, 1.0, (draws, r)))
    beta = rng.uniform(0.0, 1.0, (draws, r))
    salts = rng.integers(0, 2**63 - 1, draws, dtype=np.int64).astype(np.uint64)
    return gamma_r, log_c, beta, salts


@dataclass(frozen=True)
class MinMaxParams:
    """The draws packed for the kernel (kernels/minmax.py): ``tiles[tile, k, q, lane]``,
    q = 0, 1, 2 for r, beta, log c of draw tile * lanes + lane (the last tile padded).
    ``shared``: the handles of tiles and salts when they are in the memory the ingest
    worker processes share (workers.py); such params are pickled as those handles."""

    tiles: np.ndarray
    salts: np.ndarray
    power: int
    samples: int
    shared: tuple = None

    def __reduce__(self):
        if self.shared is None:
            return MinMaxParams, (self.tiles, self.salts, self.power, self.samples)
        return _attached_params, (self.shared, self.power, self.samples)


def _attached_params(shared, power, samples):
    tiles, salts = (handle.attach() for handle in shared)
    return MinMaxParams(tiles, salts, power, samples, shared)


def minmax_params(r, spec):
    """The map's random numbers for inputs of r features, packed (computed once per ingest):
    :func:`minmax_draws`'s numbers, drawn in the same order a tile at a time and packed as
    they come, without the full (draws, r) arrays. Within ``fingerprint_workers`` they are
    drawn into the workers' shared memory, so they reach each worker once."""
    rng = np.random.default_rng([spec["seed"], 2])
    power = spec["power"]
    draws = spec["samples"] * power
    tiles, tiles_handle = _empty_tiles(draws, r, power, shared_empty)
    lanes = tiles.shape[3]
    for q, draw in (
        (0, lambda n: rng.gamma(2.0, 1.0, (n, r))),
        (2, lambda n: np.log(rng.gamma(2.0, 1.0, (n, r)))),
        (1, lambda n: rng.uniform(0.0, 1.0, (n, r))),
    ):
        for tile in range(tiles.shape[0]):
            n = min(lanes, draws - tile * lanes)
            tiles[tile, :, q, :n] = draw(n).T
    salts, salts_handle = shared_empty((draws,), np.uint64)
    salts[:] = rng.integers(0, 2**63 - 1, draws, dtype=np.int64).astype(np.uint64)
    shared = None if tiles_handle is None else (tiles_handle, salts_handle)
    return MinMaxParams(tiles, salts, power, draws // power, shared)


def pack_draws(gamma_r, log_c, beta, salts, power):
    """The draws (:func:`minmax_draws`) as :class:`MinMaxParams`."""
    draws, r = gamma_r.shape
    tiles, _ = _empty_tiles(draws, r, power)
    lanes = tiles.shape[3]
    for q, values in enumerate((gamma_r, beta, log_c)):
        for tile in range(tiles.shape[0]):
            part = values[tile * lanes : (tile + 1) * lanes]
            tiles[tile, :, q, : len(part)] = part.T
    return MinMaxParams(tiles, salts, power, draws // power)


def _empty_tiles(draws, r, power, empty=lambda shape: (np.empty(shape), None)):
    """The tiles of :class:`MinMaxParams` for ``draws`` draws, their padding filled in, and
    ``empty``'s handle of them."""
    step = math.lcm(8, power)
    lanes = min(max(step, TILE_DRAWS // step * step), -(-draws // step) * step)
    n_tiles = -(-draws // lanes)
    tiles, handle = empty((n_tiles, r, 3, lanes))
    tiles[-1, :, :, draws - (n_tiles - 1) * lanes :] = 1.0  # padding draws: finite, never hashed
    return tiles, handle


def minmax_features(Z, spec, params, dtype=np.float64):
    """z(Z) as the module docstring defines it: (m, D * B) of ``dtype``. ``Z`` is a dense
    block or :class:`Entries` (a sparse one: fingerprints come so, ingest/featurize.py)."""
    _check_non_negative(Z)
    indptr, columns, logs = Z.csr() if isinstance(Z, Entries) else sparse_logs(np.ascontiguousarray(Z, np.float64))
    buckets = _csr_buckets(indptr, columns, logs, params, spec["buckets"])
    return one_hot_features(buckets, np.flatnonzero(np.diff(indptr)), spec, dtype)


def one_hot_features(buckets, rows, spec, dtype=np.float64, out=None):
    """z from each row's bucket per feature block: 1/sqrt(D) at the bucket of every block
    of ``rows``, the rows with a positive entry (the others, all-zero, stay zero); into
    ``out`` (zeros, (m, D * B)) when given."""
    D, B = spec["samples"], spec["buckets"]
    out = np.zeros((len(buckets), D * B), dtype) if out is None else out
    one_hot_blocks(buckets, rows, B, 1.0 / np.sqrt(D), out)
    return out


def entries_buckets(entries, params, n_buckets, n_threads=None):
    """The map of a sparse block (:class:`Entries`) up to its one-hot rows: (each row's
    bucket per feature block, (m, D) of the smallest unsigned type that holds B - 1; the
    rows with a positive entry), 1/16 of the float32 rows or less, for sending between
    processes (:func:`one_hot_features` makes the rows)."""
    _check_non_negative(entries)
    indptr, columns, logs = entries.csr()
    buckets = _csr_buckets(indptr, columns, logs, params, n_buckets, n_threads)
    return buckets.astype(np.min_scalar_type(n_buckets - 1)), np.flatnonzero(np.diff(indptr))


def load_kernels():
    """Call the kernels of :func:`entries_buckets` and :func:`one_hot_features` once on a
    tiny block, with the types ingest gives them, so that numba loads (or compiles) them
    now: before the ingest's worker processes fork, which then inherit them."""
    spec = {"samples": 1, "buckets": 2, "power": 1, "seed": 0}
    params = pack_draws(*minmax_draws(1, spec), 1)
    one = np.ones(1, np.int64)
    buckets, rows = entries_buckets(Entries(1, one - 1, one - 1, np.ones(1)), params, 2, n_threads=1)
    for dtype in ("float32", "float64"):
        one_hot_features(buckets, rows, spec, dtype)


def _check_non_negative(Z):
    sparse = isinstance(Z, Entries)
    negative = (Z.values < 0) if sparse else (Z < 0) if Z.size and Z.min() < 0 else None
    if negative is not None and negative.any():
        row = int(Z.rows[negative].min() if sparse else np.argwhere(negative)[0][0])
        raise InputError(f"minmax needs non-negative features; row {row} of the block has a negative one")


@dataclass(frozen=True)
class Entries:
    """A sparse block of ``n_rows`` rows: its non-zero entries (rows, columns, values), each
    (row, column) once."""

    n_rows: int
    rows: np.ndarray
    columns: np.ndarray
    values: np.ndarray

    def __len__(self):
        return self.n_rows

    def csr(self):
        """(indptr, columns, ln values) of the positive entries, columns increasing in a row."""
        rows, columns, values = self.rows, self.columns, self.values
        same_row = rows[1:] == rows[:-1]
        if not np.all((rows[1:] > rows[:-1]) | (same_row & (columns[1:] > columns[:-1]))):
            order = np.lexsort((columns, rows))
            rows, columns, values = rows[order], columns[order], values[order]
        return entry_logs(self.n_rows, rows, columns, np.asarray(values, np.float64))


def minmax_buckets(Z, params, n_buckets, n_threads=None):
    """Each row's bucket per feature block, (m, D) int64. The tiles of draws are shared
    among ``n_threads`` threads (default: every core); each reads its tiles once per batch
    of rows (at most BATCH_ENTRIES positive entries, or one row)."""
    return _csr_buckets(*sparse_logs(np.ascontiguousarray(Z, np.float64)), params, n_buckets, n_threads)


def _csr_buckets(indptr, columns, logs, params, n_buckets, n_threads=None):
    """:func:`minmax_buckets` of rows given as CSR of their logarithms."""
    out = np.zeros((len(indptr) - 1, params.samples), np.int64)
    n_tiles = params.tiles.shape[0]
    n_threads = max(1, min(n_tiles, n_threads or os.cpu_count() or 1))
    bounds = np.linspace(0, n_tiles, n_threads + 1).astype(int)
    with ThreadPoolExecutor(n_threads) if n_threads > 1 else nullcontext() as pool:
        for a, b in _row_batches(indptr, BATCH_ENTRIES):
            entries = slice(indptr[a], indptr[b])
            batch = (indptr[a : b + 1] - indptr[a], *distinct_pairs(columns[entries], logs[entries]))
            tiles = partial(cws_tiles, *batch, params.tiles, params.salts, params.power, n_buckets)
            if pool is None:  # one thread (a worker process): no pool to hand the tiles to
                tiles(0, n_tiles, out[a:b])
            else:
                list(pool.map(lambda first, end: tiles(first, end, out[a:b]), bounds[:-1], bounds[1:]))
    return out


def distinct_pairs(columns, logs):
    """The distinct (feature, ln value) pairs of CSR entries: (pair of each entry, the
    pairs' features, the pairs' ln values), pairs in increasing (feature, value) order.
    Fingerprint counts are small integers: 636 molecules of Enamine 10k hold 32,762
    entries but 940 distinct pairs, whose candidates are then computed once."""
    order = np.lexsort((logs, columns))
    k, log_x = columns[order], logs[order]
    new = np.ones(len(k), bool)
    new[1:] = (k[1:] != k[:-1]) | (log_x[1:] != log_x[:-1])
    pair_of = np.empty(len(k), np.int64)
    pair_of[order] = np.cumsum(new) - 1
    return pair_of, k[new], log_x[new]


def _row_batches(indptr, entries):
    """Consecutive row ranges [a, b) of at most ``entries`` positive entries (or one row)."""
    a, m = 0, len(indptr) - 1
    while a < m:
        b = max(a + 1, int(np.searchsorted(indptr, indptr[a] + entries, side="right")) - 1)
        yield a, min(b, m)
        a = b


def cws_buckets(Z, gamma_r, log_c, beta, salts, power, n_buckets):
    """Per row and per feature block d: the bucket of the power CWS draws of block d
    (kernels/minmax.py), from the draws as :func:`minmax_draws` returns them."""
    return minmax_buckets(Z, pack_draws(gamma_r, log_c, beta, salts, power), n_buckets)


def minmax_kernel(A, B):
    """The exact MinMax kernel between the rows of A and of B (for tests and small data)."""
    A, B = np.asarray(A, np.float64), np.asarray(B, np.float64)
    num = np.minimum(A[:, None, :], B[None, :, :]).sum(axis=2)
    den = np.maximum(A[:, None, :], B[None, :, :]).sum(axis=2)
    return np.where(den > 0, num / np.where(den > 0, den, 1.0), 0.0)
