"""Dot products of rows with V for every kind of chunk: float arrays and encoded chunks.

The pass kernels (LAS, WNAS, degrees, the bare pass) call ``dots_setup`` once per
chunk and ``chunk_dots`` per block of rows; numba compiles one version per kind of
chunk (``storage/encoding.py``):

- float32 / float64 arrays: ``common.row_dots``;
- float16 (raw 16-bit patterns): the float arrays' kernels, each code converted to
  float64 where it is read (``common.as_float64``: exact, in hardware where the CPU can);
- int8 codes with a scale per row: the float arrays' kernels over the codes (sum_j
  c_ij V[c, j] in float64), times the scale;
- binary (packed bits) with a scale per row: per-byte lookup tables of partial dot
  products, T[p, byte, c] = sum of V[c, 8p + b] over the bits b set in ``byte``, so a
  row of r bits costs r / 8 lookups per column (bytes that are 0 are skipped); for many
  columns (tables larger than ``LUT_MAX_BYTES``) the bits are expanded into a buffer.

Every column goes through the same arithmetic whatever the other columns are, so a
value does not depend on how many columns were computed with it.
"""

import numba
import numpy as np
from numba import types
from numba.extending import overload

from .common import FAST, ROW_BLOCK, pad3, row_dots
from .compile_lock import lock_compiles

LUT_MAX_BYTES = 1 << 21         # largest lookup table (all columns) worth building: ~L2


def chunk_rows(x):
    """Rows of a chunk (an array or an Encoded tuple)."""


def dots_setup(x, V):
    """What ``chunk_dots`` needs once per chunk and V (the binary lookup tables)."""


def chunk_dots(x, i0, i1, V, T, P):
    """P[t, c] = decoded row i0 + t of x . V[c], for rows i0 <= i < i1 (V: multiple of 3 rows)."""


def _codes_dtype(x):
    return x.types[0].dtype if isinstance(x, types.BaseTuple) else None


@overload(chunk_rows, jit_options={"nogil": True})
def _chunk_rows(x):
    if isinstance(x, types.Array):
        return lambda x: x.shape[0]
    return lambda x: x[0].shape[0]


@overload(dots_setup, jit_options={"nogil": True})
def _dots_setup(x, V):
    if _codes_dtype(x) == types.uint8:
        return lambda x, V: binary_tables(x[0].shape[1], V)
    return lambda x, V: np.zeros((0, 0, 0))


@overload(chunk_dots, jit_options={"nogil": True, "fastmath": FAST})
def _chunk_dots(x, i0, i1, V, T, P):
    if isinstance(x, types.Array):
        return lambda x, i0, i1, V, T, P: row_dots(x, i0, i1, V, P)
    dt = _codes_dtype(x)
    if dt == types.uint16:
        return lambda x, i0, i1, V, T, P: row_dots(x[0], i0, i1, V, P)
    if dt == types.int8:
        return lambda x, i0, i1, V, T, P: int8_dots(x[0], x[1], i0, i1, V, P)
    if dt == types.uint8:
        return lambda x, i0, i1, V, T, P: binary_dots(x[0], x[1], i0, i1, V, T, P)
    raise TypeError(f"no dot products for chunks of {x}")


@numba.njit(nogil=True, cache=True, fastmath=FAST)
def buffer_dots(buf, scale, V, P, t):
    """P[t, c] = scale * (buf . V[c]) for a decoded float64 row buf; three columns per loop."""
    k, r = V.shape
    for c in range(0, k, 3):
        s0 = 0.0
        s1 = 0.0
        s2 = 0.0
        for j in range(r):
            v = buf[j]
            s0 += v * V[c, j]
            s1 += v * V[c + 1, j]
            s2 += v * V[c + 2, j]
        P[t, c] = scale * s0
        P[t, c + 1] = scale * s1
        P[t, c + 2] = scale * s2


@numba.njit(nogil=True, cache=True, fastmath=FAST)
def int8_dots(codes, scale, i0, i1, V, P):
    """P[t, c] = scale_i * (codes_i . V[c]): the float kernels' shapes over the codes
    (each converted to float64 where it is read), the row's scale applied once."""
    row_dots(codes, i0, i1, V, P)
    for i in range(i0, i1):
        s = np.float64(scale[i])
        for c in range(V.shape[0]):
            P[i - i0, c] *= s


@numba.njit(nogil=True, cache=True)
def binary_tables(n_bytes, V):
    """T[p, byte, c] = sum of V[c, 8p + b] over the bits b set in byte (0 beyond r);
    an empty table when it would exceed LUT_MAX_BYTES (many columns)."""
    k, r = V.shape
    if n_bytes * 256 * k * 8 > LUT_MAX_BYTES:
        return np.zeros((0, 0, 0))
    T = np.zeros((n_bytes, 256, k))
    for p in range(n_bytes):
        for byte in range(1, 256):
            low = byte & -byte                       # the lowest set bit
            b = 0
            while (1 << b) != low:
                b += 1
            j = 8 * p + b
            for c in range(k):
                T[p, byte, c] = T[p, byte ^ low, c] + (V[c, j] if j < r else 0.0)
    return T


@numba.njit(nogil=True, cache=True, fastmath=FAST)
def binary_dots(codes, scale, i0, i1, V, T, P):
    k, r = V.shape
    n_bytes = codes.shape[1]
    if T.shape[0] == 0:                               # too many columns for tables
        buf = np.empty(r)
        for i in range(i0, i1):
            for j in range(r):
                buf[j] = np.float64((codes[i, j >> 3] >> (j & 7)) & 1)
            buffer_dots(buf, np.float64(scale[i]), V, P, i - i0)
        return
    for i in range(i0, i1):
        s = np.float64(scale[i])
        for c in range(0, k, 3):
            s0 = 0.0
            s1 = 0.0
            s2 = 0.0
            for p in range(n_bytes):
                byte = codes[i, p]
                if byte:
                    s0 += T[p, byte, c]
                    s1 += T[p, byte, c + 1]
                    s2 += T[p, byte, c + 2]
            P[i - i0, c] = s * s0
            P[i - i0, c + 1] = s * s1
            P[i - i0, c + 2] = s * s2


@numba.njit(nogil=True, cache=True, fastmath=FAST)
def stream_dots(x, V):
    """The bare streaming pass: every row times V, reduced to one number.

    This is the floor a LAS iteration is measured against (benchmarks/): the same
    reads and the same dot products, none of the per-point work.
    """
    V = pad3(V)
    T = dots_setup(x, V)
    P = np.empty((ROW_BLOCK, V.shape[0]))
    total = 0.0
    m = chunk_rows(x)
    for i0 in range(0, m, ROW_BLOCK):
        i1 = min(i0 + ROW_BLOCK, m)
        chunk_dots(x, i0, i1, V, T, P)
        for t in range(i1 - i0):
            total += P[t, 0]
    return total


@numba.njit(nogil=True, cache=True, fastmath=FAST)
def binary_products(codes, scale, i0, i1, Gt):
    """P[t] = decoded row i0 + t . Gt[:, b] for every b, for packed bits: the rows of Gt
    (r x B) at the row's set bits added up, times its scale. With a few percent of bits
    set this is 20-30x fewer operations than the dense product (a batch of labels on
    fingerprints)."""
    r, B = Gt.shape
    P = np.zeros((i1 - i0, B))
    bits = np.empty(r, np.int64)
    for i in range(i0, i1):
        t = i - i0
        for a in range(set_bits(codes, i, r, bits)):
            j = bits[a]
            for c in range(B):
                P[t, c] += Gt[j, c]
        s = np.float64(scale[i])
        for c in range(B):
            P[t, c] *= s
    return P


@numba.njit(nogil=True, cache=True)
def set_bits(codes, i, r, out):
    """The indices of the bits set in packed row i (below r), into ``out``; their count."""
    k = 0
    for p in range(codes.shape[1]):
        byte = np.int64(codes[i, p])
        while byte:
            low = byte & -byte
            b = 0
            while (1 << b) != low:
                b += 1
            if 8 * p + b < r:
                out[k] = 8 * p + b
                k += 1
            byte ^= low
    return k


@numba.njit(nogil=True, cache=True)
def binary_gram(codes, scale, r, rho, q, z, G, xq, xz):
    """G += X^T diag(rho) X, xq += X^T q, xz += X^T z over packed bits (scale s_i per
    row): each row adds rho_i s_i^2 to the k^2 entries of its k set bits, not r^2
    multiply-adds (init of a fingerprint store: about (4% of 2,048)^2 = 6,700 per row)."""
    bits = np.empty(r, np.int64)
    for i in range(codes.shape[0]):
        k = set_bits(codes, i, r, bits)
        s = np.float64(scale[i])
        w = rho[i] * s * s
        for a in range(k):
            ja = bits[a]
            xq[ja] += q[i] * s
            xz[ja] += z[i] * s
            for b in range(k):
                G[ja, bits[b]] += w


@numba.njit(nogil=True, cache=True)
def binary_quadratic(codes, scale, r, A, out):
    """out[i] = x_i^T A x_i over packed bits: s_i^2 times the sum of A over the pairs of
    set bits (J_i = x_i^T K^-1 x_i at init: k^2 reads instead of r^2 multiply-adds)."""
    bits = np.empty(r, np.int64)
    for i in range(codes.shape[0]):
        k = set_bits(codes, i, r, bits)
        t = 0.0
        for a in range(k):
            row = bits[a]
            for b in range(k):
                t += A[row, bits[b]]
        s = np.float64(scale[i])
        out[i] = s * s * t


lock_compiles(globals())
