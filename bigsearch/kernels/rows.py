"""Products of blocks of rows with a small matrix at about BLAS's speed, each row's result
the same bits wherever the row sits.

BLAS computes ``Y @ M`` with code that depends on a row's place in its blocking (edge
tiles, the split between threads), and so do its additions: with OpenBLAS's Haswell
kernels (``OPENBLAS_CORETYPE=Haswell``) two copies of a point in different chunks got J
values 1 ulp apart, and LAS's query among exact ties was no longer dense ASG's lowest
index. Here every output element is the sum over k of Y[t, k] M[k, j], added in the order
of k by fused multiply-adds, with the same instructions for every row: a value depends on
the row and M alone, on every CPU and whatever BLAS is installed.

The shape is a BLAS micro-kernel's (``_tile``, written in LLVM IR because numba cannot
keep a tile of vectors in registers): TILE_ROWS rows by TILE_COLUMNS columns of
accumulators, one column-vector of M and one value per row read per step of k, M packed
tile by tile so the steps read it at unit stride. Rows past the end of a panel repeat its
last row, as in ``common.rows4_dots``, so every row goes through the same arithmetic.
Measured against BLAS's trmm for x L (one thread, Intel Xeon, AVX-512): 1.0x at r = 128,
1.1-1.3x at r = 512, 1.5x at r = 2,048 (benchmarks/rows_products.py).
"""

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from .common import FAST
from .compile_lock import lock_compiles

LANES = 8  # doubles per vector (one AVX-512 register; two AVX2 registers)
VECTORS = 2  # vectors per tile row
TILE_ROWS = 4
TILE_COLUMNS = LANES * VECTORS
PANEL_ROWS = 256  # rows whose block of Y stays in L2 while M's tiles go by
DEPTH = 256  # steps of k per pass over a panel (a tile of M: 32 KiB)


@intrinsic
def _tile(typingctx, Y, Mt, rows, j, k0, k1, out):
    """out[rows[q], j:j + TILE_COLUMNS] += sum_{k0 <= k < k1} Y[rows[q], k] Mt[k, :] for the
    TILE_ROWS rows listed in ``rows`` (Mt: M's packed tile, k x TILE_COLUMNS, C order)."""
    if not all(isinstance(a, types.Array) and a.dtype == types.float64 for a in (Y, Mt, out)):
        return None

    def codegen(context, builder, signature, args):
        Y_, Mt_, rows_, j_, k0_, k1_, out_ = args
        Ya, Ma, ra, oa = (context.make_array(signature.args[n])(context, builder, args[n]) for n in (0, 1, 2, 6))
        i64, dbl = ir.IntType(64), ir.DoubleType()
        vec = ir.VectorType(dbl, LANES)

        def at(base, offset, typ):
            return builder.inttoptr(builder.add(base, offset), typ.as_pointer())

        def const(v):
            return ir.Constant(i64, v)

        y_stride = cgutils.unpack_tuple(builder, Ya.strides)[0]
        out_stride = cgutils.unpack_tuple(builder, oa.strides)[0]
        y0, m0, o0 = (builder.ptrtoint(a.data, i64) for a in (Ya, Ma, oa))
        col = builder.mul(j_, const(8))
        y_rows, out_rows = [], []
        for q in range(TILE_ROWS):
            row = builder.load(builder.gep(ra.data, [const(q)]))
            y_rows.append(builder.add(y0, builder.mul(row, y_stride)))
            out_rows.append(builder.add(builder.add(o0, builder.mul(row, out_stride)), col))
        acc = [[cgutils.alloca_once(builder, vec) for _ in range(VECTORS)] for _ in range(TILE_ROWS)]
        for q in range(TILE_ROWS):
            for v in range(VECTORS):
                builder.store(builder.load(at(out_rows[q], const(64 * v), vec), align=8, typ=vec), acc[q][v])
        fma = cgutils.get_or_insert_function(builder.module, ir.FunctionType(vec, [vec] * 3), f"llvm.fma.v{LANES}f64")
        splat = ir.Constant(ir.VectorType(ir.IntType(32), LANES), [0] * LANES)
        lane0 = ir.Constant(ir.IntType(32), 0)
        with cgutils.for_range_slice(builder, k0_, k1_, const(1), intp=i64) as (k, _):
            m_k = builder.add(m0, builder.mul(k, const(8 * TILE_COLUMNS)))
            mv = [builder.load(at(m_k, const(8 * LANES * v), vec), align=8, typ=vec) for v in range(VECTORS)]
            y_k = builder.mul(k, const(8))
            for q in range(TILE_ROWS):
                y = builder.load(at(y_rows[q], y_k, dbl), align=8, typ=dbl)
                yv = builder.shuffle_vector(
                    builder.insert_element(ir.Constant(vec, ir.Undefined), y, lane0),
                    ir.Constant(vec, ir.Undefined),
                    splat,
                )
                for v in range(VECTORS):
                    builder.store(builder.call(fma, [yv, mv[v], builder.load(acc[q][v], typ=vec)]), acc[q][v])
        for q in range(TILE_ROWS):
            for v in range(VECTORS):
                builder.store(builder.load(acc[q][v], typ=vec), at(out_rows[q], const(64 * v), vec), align=8)
        return context.get_dummy_value()

    return types.void(Y, Mt, rows, j, k0, k1, out), codegen


@numba.njit(nogil=True, cache=True)
def packed_tiles(M):
    """M (r x k) as tiles of TILE_COLUMNS columns, each r x TILE_COLUMNS in C order (the
    columns past k zero)."""
    r, k = M.shape
    n_tiles = (k + TILE_COLUMNS - 1) // TILE_COLUMNS
    tiles = np.zeros((n_tiles, r, TILE_COLUMNS))
    for t in range(n_tiles):
        for a in range(r):
            for c in range(min(TILE_COLUMNS, k - t * TILE_COLUMNS)):
                tiles[t, a, c] = M[a, t * TILE_COLUMNS + c]
    return tiles


@numba.njit(nogil=True, cache=True)
def rows_times(Y, tiles, lower, out):
    """out[t, :] = Y[t] @ M for the rows of Y (m x r, float64, C order), with M given as
    ``packed_tiles(M)``; out is m x (a multiple of TILE_COLUMNS at least M's width).

    With ``lower`` M is lower triangular (M[k, j] = 0 for j > k), and the steps of k
    below a tile's first column are skipped: about half the multiply-adds for x L.
    """
    m, r = Y.shape
    for t in range(m):
        for c in range(out.shape[1]):
            out[t, c] = 0.0
    rows = np.empty(TILE_ROWS, np.int64)
    for t0 in range(0, m, PANEL_ROWS):
        t1 = min(t0 + PANEL_ROWS, m)
        for k0 in range(0, r, DEPTH):
            k1 = min(k0 + DEPTH, r)
            for tile in range(tiles.shape[0]):
                j = tile * TILE_COLUMNS
                first = max(k0, j) if lower else k0
                if first >= k1:
                    continue
                for i in range(t0, t1, TILE_ROWS):
                    for q in range(TILE_ROWS):
                        rows[q] = min(i + q, t1 - 1)
                    _tile(Y, tiles[tile], rows, j, first, k1, out)


def rows_product(Y, M):
    """Y @ M with each row's result independent of its place (a convenience for small Y)."""
    Y = np.ascontiguousarray(Y, dtype=np.float64)
    M = np.asarray(M, dtype=np.float64)
    vector = M.ndim == 1
    M = M.reshape(len(M), -1)
    out = product_buffer(len(Y), M.shape[1])
    rows_times(Y, packed_tiles(M), False, out)
    return out[:, 0] if vector else out[:, : M.shape[1]]


def product_buffer(m, width):
    """A buffer for ``rows_times``' output: m rows, ``width`` columns rounded up to tiles."""
    return np.empty((m, -(-width // TILE_COLUMNS) * TILE_COLUMNS))


@numba.njit(nogil=True, cache=True, fastmath=FAST)
def row_squares(Z, out):
    """out[i] = sum_k Z[i, k]^2 (the same loop for every row)."""
    for i in range(out.shape[0]):
        acc = 0.0
        for k in range(Z.shape[1]):
            acc += Z[i, k] * Z[i, k]
        out[i] = acc


@numba.njit(nogil=True, cache=True, fastmath=FAST)
def row_products(Z, Y, out):
    """out[i] = sum_k Z[i, k] Y[i, k] over Y's columns (x^T (A x) when Z = Y A)."""
    for i in range(out.shape[0]):
        acc = 0.0
        for k in range(Y.shape[1]):
            acc += Z[i, k] * Y[i, k]
        out[i] = acc


@numba.njit(nogil=True, cache=True, fastmath=FAST)
def subtract_weighted_squares(P, c, out):
    """out[i] -= sum_b c_b P[i, b]^2 over c's length: J lowered by many labels'
    (x_i . g_b)^2 at once."""
    for i in range(out.shape[0]):
        acc = 0.0
        for b in range(c.shape[0]):
            acc += c[b] * (P[i, b] * P[i, b])
        out[i] -= acc


@numba.njit(nogil=True, cache=True, fastmath=FAST)
def add_signed_and_absolute(S, signs, num, den):
    """num[i] += sum_b signs_b S[i, b] and den[i] += sum_b |S[i, b]| over signs' length:
    WNAS's numerator and denominator given many labels' similarities to each row."""
    for i in range(num.shape[0]):
        a = 0.0
        d = 0.0
        for b in range(signs.shape[0]):
            a += signs[b] * S[i, b]
            d += abs(S[i, b])
        num[i] += a
        den[i] += d


lock_compiles(globals())
