"""Numba building blocks shared by the LAS and WNAS kernels.

Conventions: a chunk ``x`` is (m, r) float32 or float64, or uint16 float16 codes;
every product is taken in float64 (each value converted explicitly by ``as_float64``);
vectors applied to the rows are the rows of a small C-ordered float64 matrix ``V`` (k, r),
so each dot product runs over two contiguous arrays, which LLVM vectorizes. ``FAST``
allows reassociation (several partial sums in a reduction) and fused multiply-add, but
keeps NaN/inf semantics so the finiteness checks stay meaningful.
"""

import platform

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic, overload

from .compile_lock import lock_compiles

FAST = {"reassoc", "contract", "nsz"}
ROW_BLOCK = 64          # rows whose dot products are computed before the per-point update
TOP_K = 8               # candidates a chunk reports per criterion (see engine/core/select.py)
N_LISTS = 3             # criteria: f, IM, and f + t_prev IM (the last query's weight)


@numba.njit(nogil=True, cache=True)
def pad3(V):
    """V with zero rows appended so that its row count is a multiple of 3, starting on a
    cache line (``aligned_zeros``): every kernel reads its vectors through this."""
    k, r = V.shape
    out = aligned_zeros(max(3, (k + 2) // 3 * 3), r)
    copy_to(out[:k], V)
    return out


CACHE_LINE = 64


@numba.njit(nogil=True, cache=True)
def aligned_zeros(k, r):
    """A (k, r) float64 array of zeros whose data starts on a 64-byte cache line.

    numba aligns arrays to 32 bytes only. The dot products load each vector of V once a
    row in 64-byte pieces on CPUs with 512-bit vectors: with V 32 bytes off a line, every
    load spans two lines, and a pass over a 1M x 128 store took 26.6 ms on one AMD EPYC
    (Zen 5) core against 17.7 ms (floor.py's loop: 20.4 against 17.9), by where V's
    allocation happened to fall (docs/performance.md, "What differs on AMD")."""
    per_line = CACHE_LINE // 8
    buf = np.zeros(k * r + per_line - 1)
    start = (-buf.ctypes.data) % CACHE_LINE // 8
    return buf[start:start + k * r].reshape(k, r)


@numba.njit(nogil=True, cache=True, inline="always")
def copy_to(out, values):
    """out[...] = values for arrays of one shape, element by element: numba compiles a
    slice assignment's shape-error message with it, 4-5 s of a first run's compiling (the
    demo's 28 s)."""
    for index in np.ndindex(out.shape):
        out[index] = values[index]


def _cpuinfo(field):
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith(field):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


def _cpu_vendor():
    return _cpuinfo("vendor_id")


# float16 codes (uint16 bit patterns) become float64 by LLVM's half -> double conversion,
# which x86 CPUs with F16C (every one since 2012) and ARM run in vector registers (8 values
# per instruction), about 2x faster than integer operations here; elsewhere by moving the
# bits into a float64 and rescaling (exact for finite values too). Both are exact.
HALF_IN_HARDWARE = platform.machine().lower() not in ("x86_64", "amd64", "i686", "x86") or \
    "f16c" in _cpuinfo("flags").split()
F16_SCALE = 2.0 ** 1008         # half bits shifted into a float64 give the value / 2^1008


@intrinsic
def _half_bits_to_float64(typingctx, h):
    def codegen(context, builder, signature, args):
        if HALF_IN_HARDWARE:
            return builder.fpext(builder.bitcast(args[0], ir.HalfType()), ir.DoubleType())
        i64 = ir.IntType(64)
        bits = builder.zext(args[0], i64)
        sign = builder.shl(builder.and_(bits, ir.Constant(i64, 0x8000)), ir.Constant(i64, 48))
        magnitude = builder.shl(builder.and_(bits, ir.Constant(i64, 0x7FFF)), ir.Constant(i64, 42))
        value = builder.bitcast(builder.or_(sign, magnitude), ir.DoubleType())
        return builder.fmul(value, ir.Constant(ir.DoubleType(), F16_SCALE))
    return types.float64(types.uint16), codegen


def as_float64(v):
    """A stored value as float64: float16 codes (uint16 bit patterns) are decoded."""


@overload(as_float64, jit_options={"nogil": True})
def _as_float64(v):
    if v == types.uint16:
        return lambda v: _half_bits_to_float64(v)
    return lambda v: np.float64(v)


@intrinsic
def take_ticket(typingctx, counter):
    """counter[0] += 1 as one atomic operation; returns the value before. Threads that
    share ``counter`` (an int64 array) take work items in turn, each item exactly once."""
    if not (isinstance(counter, types.Array) and counter.dtype == types.int64):
        return None

    def codegen(context, builder, signature, args):
        data = context.make_array(signature.args[0])(context, builder, args[0]).data
        return builder.atomic_rmw("add", data, ir.Constant(ir.IntType(64), 1), "monotonic")
    return types.int64(counter), codegen


@intrinsic
def _pointer(typingctx, address, like):
    """``address`` (an integer) as a pointer to values of ``like``'s type."""
    if not (isinstance(address, types.Integer) and isinstance(like, types.Array)):
        return None

    def codegen(context, builder, signature, args):
        return builder.inttoptr(args[0], context.get_value_type(signature.return_type))
    return types.CPointer(like.dtype)(address, like), codegen


@numba.njit(nogil=True, cache=True, inline="always")
def chunk_at(addresses, starts, j, like):
    """Chunk j of a store passed by address: the C-ordered (starts[j+1] - starts[j], r)
    rows at addresses[j], of ``like``'s type and width. Chunks go to a kernel as their
    addresses (``addresses_of``), not as a numba typed List, whose own methods numba
    compiles anew in every process (0.4 s of every command's first pass); whoever passes
    the addresses keeps the arrays alive."""
    return numba.carray(_pointer(addresses[j], like), (starts[j + 1] - starts[j], like.shape[1]))


def addresses_of(chunks):
    """The data addresses of C-contiguous arrays, for ``chunk_at``."""
    return np.array([x.__array_interface__["data"][0] for x in chunks], np.int64)


# Kernel shapes (benchmarks/encodings.py --only widths measures all three on the machine):
# one row and three columns per loop streams float rows of r <= 1,024 about 2x faster
# than two rows on AMD EPYC hosts, two rows were faster on the Intel hosts of
# docs/performance.md; wide rows (V of 3 x r no longer fits the L1 cache) go four rows at
# a time, so each load of V feeds four rows. Codes narrower than float32 (float16
# patterns, int8) go four rows at a time at every width: a code costs so little to load
# that the loads of V are what is left, and sharing them made the pass over int8 codes
# 1.5-1.8x faster, float16's up to 1.45x (one thread, in RAM, AMD EPYC; docs/performance.md,
# encodings). The choice is fixed per CPU kind (numba's cache is keyed by the CPU) and per
# stored type, and a row's value never depends on its position in a block: rows past the
# end of a block repeat the last row, so every row goes through the same arithmetic.
ONE_ROW_SHAPE = _cpu_vendor() == "AuthenticAMD"
WIDE_ROWS = 1024
NARROW_CODES = 2        # stored values of at most this many bytes: the four-row shape


@numba.njit(nogil=True, cache=True, fastmath=FAST)
def row_dots(x, i0, i1, V, P):
    """P[t, c] = x[i0 + t] . V[c] for rows i0 <= i < i1, in float64.

    V must have a multiple of 3 rows (see ``pad3``). Every column goes through the same
    loop, so a value does not depend on how many columns were computed with it: restored
    or rebuilt state is bit-identical to state that was updated incrementally.
    """
    if V.shape[1] > WIDE_ROWS or x.itemsize <= NARROW_CODES:
        rows4_dots(x, i0, i1, V, P)
    elif ONE_ROW_SHAPE:
        row1_dots(x, i0, i1, V, P)
    else:
        rows2_dots(x, i0, i1, V, P)


@numba.njit(nogil=True, cache=True, fastmath=FAST)
def row1_dots(x, i0, i1, V, P):
    """``row_dots`` one row and three columns at a time (one loop, three accumulators)."""
    k, r = V.shape
    for i in range(i0, i1):
        for c in range(0, k, 3):
            s0 = 0.0
            s1 = 0.0
            s2 = 0.0
            for j in range(r):
                v = as_float64(x[i, j])
                s0 += v * V[c, j]
                s1 += v * V[c + 1, j]
                s2 += v * V[c + 2, j]
            P[i - i0, c] = s0
            P[i - i0, c + 1] = s1
            P[i - i0, c + 2] = s2


@numba.njit(nogil=True, cache=True, fastmath=FAST)
def rows4_dots(x, i0, i1, V, P):
    """``row_dots`` four rows and three columns at a time (for wide rows)."""
    k, r = V.shape
    for i in range(i0, i1, 4):
        ia, ib, ic = min(i + 1, i1 - 1), min(i + 2, i1 - 1), min(i + 3, i1 - 1)
        for c in range(0, k, 3):
            a0 = 0.0
            b0 = 0.0
            c0 = 0.0
            a1 = 0.0
            b1 = 0.0
            c1 = 0.0
            a2 = 0.0
            b2 = 0.0
            c2 = 0.0
            a3 = 0.0
            b3 = 0.0
            c3 = 0.0
            for j in range(r):
                v0 = V[c, j]
                v1 = V[c + 1, j]
                v2 = V[c + 2, j]
                x0 = as_float64(x[i, j])
                x1 = as_float64(x[ia, j])
                x2 = as_float64(x[ib, j])
                x3 = as_float64(x[ic, j])
                a0 += x0 * v0
                b0 += x0 * v1
                c0 += x0 * v2
                a1 += x1 * v0
                b1 += x1 * v1
                c1 += x1 * v2
                a2 += x2 * v0
                b2 += x2 * v1
                c2 += x2 * v2
                a3 += x3 * v0
                b3 += x3 * v1
                c3 += x3 * v2
            for q, (sa, sb, sc) in enumerate(((a0, b0, c0), (a1, b1, c1), (a2, b2, c2), (a3, b3, c3))):
                if i + q < i1:
                    P[i + q - i0, c] = sa
                    P[i + q - i0, c + 1] = sb
                    P[i + q - i0, c + 2] = sc


@numba.njit(nogil=True, cache=True, fastmath=FAST)
def rows2_dots(x, i0, i1, V, P):
    """``row_dots`` two rows and three columns at a time: each load of x and of V feeds
    six accumulators (on Intel hosts about 1.3x faster than one dot product at a time)."""
    k, r = V.shape
    i = i0
    while i < i1:
        two = i + 1 < i1
        i2 = i + 1 if two else i
        t = i - i0
        for c in range(0, k, 3):
            a0 = 0.0
            b0 = 0.0
            c0 = 0.0
            a1 = 0.0
            b1 = 0.0
            c1 = 0.0
            for j in range(r):
                x0 = as_float64(x[i, j])
                x1 = as_float64(x[i2, j])
                v0 = V[c, j]
                v1 = V[c + 1, j]
                v2 = V[c + 2, j]
                a0 += x0 * v0
                b0 += x0 * v1
                c0 += x0 * v2
                a1 += x1 * v0
                b1 += x1 * v1
                c1 += x1 * v2
            P[t, c] = a0
            P[t, c + 1] = b0
            P[t, c + 2] = c0
            if two:
                P[t + 1, c] = a1
                P[t + 1, c + 1] = b1
                P[t + 1, c + 2] = c1
        i += 2


@numba.njit(nogil=True, cache=True)
def push_top(vals, idx, row, v, i):
    """Insert value v of point i into row ``row`` of the descending lists (vals, idx).

    Only strictly greater values enter, and equal values keep their order, so among
    equal values the lowest index (seen first) wins. Callers compare v with the row's
    last value first, so this runs rarely.
    """
    K = vals.shape[1]
    if not v > vals[row, K - 1]:
        return
    p = K - 1
    while p > 0 and v > vals[row, p - 1]:
        vals[row, p] = vals[row, p - 1]
        idx[row, p] = idx[row, p - 1]
        p -= 1
    vals[row, p] = v
    idx[row, p] = i


@numba.njit(nogil=True, cache=True)
def push_flagged(f, im, i0, i1, flags, t_prev, vals, idx):
    """Offer the rows i0 + t (t < i1 - i0) whose flags[t] is set (``may_enter``, tested
    against the K-th values the block began with) to the three candidate lists: by f, by
    im and by f + t_prev im. The others cannot enter (the K-th values only rise), so the
    lists are those a scan offering every unlabeled row makes; the flags are read eight
    at a time, as uint64 words."""
    n = i1 - i0
    words = flags.view(np.uint64)
    for q in range((n + 7) // 8):
        if words[q] != 0:
            for t in range(8 * q, min(8 * q + 8, n)):
                if flags[t]:
                    offer_row(f, im, i0 + t, t_prev, vals, idx)


@numba.njit(nogil=True, cache=True, inline="always")
def may_enter(labeled, fi, imi, t_prev, k_f, k_im, k_s):
    """Whether an unlabeled row may enter a candidate list whose K-th values are k_f, k_im,
    k_s (the test for f + t_prev im has a margin for rounding, so it errs only toward yes).
    Bitwise operators, not ``and``/``or``: the kernels' per-point loops stay vectorized."""
    ti = t_prev * imi
    return (not labeled) & ((fi > k_f) | (imi > k_im) | (fi + ti + 1e-12 * (abs(fi) + abs(ti)) > k_s))


@numba.njit(nogil=True, cache=True, inline="always")
def offer_row(f, im, i, t_prev, vals, idx):
    """Row i's f, im and f + t_prev im, each to its list if above the list's K-th value."""
    K = vals.shape[1]
    if f[i] > vals[0, K - 1]:
        push_top(vals, idx, 0, f[i], i)
    if im[i] > vals[1, K - 1]:
        push_top(vals, idx, 1, im[i], i)
    s = f[i] + t_prev * im[i]
    if s > vals[2, K - 1]:
        push_top(vals, idx, 2, s, i)


@numba.njit(nogil=True, cache=True, inline="always")
def unlabeled_sums(lb, fb, ib, n):
    """The sums of f over the unlabeled rows t < n and of IM (0 on labeled rows), each in
    four partial sums over t mod 4 added in a fixed order: the same bits however LLVM
    compiles it, and without fast-math still four adds per instruction."""
    f0 = f1 = f2 = f3 = 0.0
    i0 = i1 = i2 = i3 = 0.0
    n4 = n - n % 4
    for t in range(0, n4, 4):
        f0 += 0.0 if lb[t] >= 0 else fb[t]
        f1 += 0.0 if lb[t + 1] >= 0 else fb[t + 1]
        f2 += 0.0 if lb[t + 2] >= 0 else fb[t + 2]
        f3 += 0.0 if lb[t + 3] >= 0 else fb[t + 3]
        i0 += ib[t]
        i1 += ib[t + 1]
        i2 += ib[t + 2]
        i3 += ib[t + 3]
    for t in range(n4, n):
        f0 += 0.0 if lb[t] >= 0 else fb[t]
        i0 += ib[t]
    return (f0 + f1) + (f2 + f3), (i0 + i1) + (i2 + i3)


@numba.njit(nogil=True, cache=True)
def new_top(n_lists, K):
    """n_lists empty candidate lists of length K: values -inf, indices -1."""
    return np.full((n_lists, K), -np.inf), np.full((n_lists, K), -1, np.int64)


@numba.njit(nogil=True, cache=True)
def candidate_partials(vals, idx, offset, f, im):
    """The chunk's candidates as partials: global indices, their f and IM, and each
    list's K-th value (the bound on every point left out of it)."""
    n_lists, K = idx.shape
    cf, cim = np.zeros((n_lists, K)), np.zeros((n_lists, K))
    for a in range(n_lists):
        for b in range(K):
            if idx[a, b] >= 0:
                cf[a, b] = f[idx[a, b]]
                cim[a, b] = im[idx[a, b]] if im.shape[0] else 0.0
                idx[a, b] += offset
    return idx, cf, cim, vals[:, K - 1].copy()


@numba.njit(nogil=True, cache=True)
def top_unlabeled(label, f, im, t, k):
    """The k best f + t * im over unlabeled points, best first (lowest index among
    ties): (local indices, scores). Plain arithmetic (no fused multiply-add), so
    scores round exactly as NumPy's f + t * im does in engine/core/select.py."""
    unl = np.flatnonzero(label < 0)
    sc = np.empty(unl.shape[0])
    for a in range(unl.shape[0]):
        i = unl[a]
        sc[a] = f[i] + t * im[i] if t != 0.0 else f[i]
    if k == 1:                                   # the common case: one linear scan
        if unl.shape[0] == 0:
            return unl, sc
        best = 0
        for a in range(1, sc.shape[0]):
            if sc[a] > sc[best]:
                best = a
        return unl[best:best + 1], sc[best:best + 1]
    order = np.argsort(-sc, kind="mergesort")[:k]   # stable: equal scores keep index order
    return unl[order], sc[order]


@numba.njit(nogil=True, cache=True)
def column_sums(x):
    """Column sums of a chunk in float64, and the first row holding a non-finite value
    (-1 if none). A non-finite value always makes its column sum non-finite, so rows
    are scanned only when a sum is."""
    m, r = x.shape
    s = np.zeros(r)
    for i in range(m):
        for j in range(r):
            s[j] += np.float64(x[i, j])
    if np.all(np.isfinite(s)):
        return s, -1
    for i in range(m):
        for j in range(r):
            if not np.isfinite(x[i, j]):
                return s, i
    return s, -1


@numba.njit(nogil=True, cache=True)
def scaled_rows(x, a, w, out):
    """out[i] = w[a + i] * x[a + i] in float64 for the rows of ``out``: a chunk's rows
    converted and weighted in one pass, into a buffer the caller reuses (BLAS reads it)."""
    for i in range(out.shape[0]):
        wi = w[a + i]
        for k in range(out.shape[1]):
            out[i, k] = wi * np.float64(x[a + i, k])


@numba.njit(nogil=True, cache=True, fastmath=FAST)
def add_row_squares(Z, out):
    """out[i] += sum_k Z[i, k]^2: the squared norms of a block of |x L| columns added in
    place, with no temporary (several partial sums per row: 3.5x NumPy's einsum)."""
    for i in range(Z.shape[0]):
        acc = 0.0
        for k in range(Z.shape[1]):
            acc += Z[i, k] * Z[i, k]
        out[i] += acc


lock_compiles(globals())
