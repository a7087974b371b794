"""Chunk steps: what a backend maps over the chunks of X.

Every step has the kernel contract ``step(x, state, *small_args) -> small partials``:
``x`` is one chunk of X (m x r), ``state`` that chunk's per-point arrays (updated in
place), the other arguments O(r^2) global state. Steps are module-level functions of
their arguments only, so the distributed backend can run them on workers unchanged;
each is declared once as a :class:`~bigsearch.backends.ChunkStep` (the UPPER-CASE
names), which says how it is redone for a chunk lost mid-pass. The partials are named
tuples, read by name.

The Gram matrix X^T diag(rho) X goes to BLAS (sqrt(rho) X's syrk on float64 blocks of
rows, ``weighted_blocks``: one reused buffer per chunk): it is one global sum. Every
per-point value (x_i^T K^-1 x_i through K^-1's Cholesky factor, ``QuadraticForm``; the
products with many labels' vectors) comes from kernels/rows.py, whose result for a row does
not depend on where the row sits or on the BLAS installed, so duplicates score alike and
queries are those of dense ASG however the store is chunked.
"""

from typing import NamedTuple

import numpy as np

from ...backends import ChunkStep
from ...kernels.common import addresses_of, column_sums, pad3, scaled_rows, top_unlabeled
from ...kernels.encoded import binary_gram, binary_products, binary_quadratic
from ...kernels.items import ITEM_ROWS, items_partials, new_items
from ...kernels.las import degrees, point_weights, update_items, update_scores
from ...kernels.rows import (
    add_signed_and_absolute,
    packed_tiles,
    product_buffer,
    row_products,
    row_squares,
    rows_times,
    subtract_weighted_squares,
)
from ...kernels.wnas import add_similarities
from ...storage.encoding import SPARSE_BITS, Encoded, decode, n_features, n_rows
from .select import ChunkPartials, Ranked

BLAS_ROWS = 4096         # rows converted to float64 at a time: bounded temporaries ...
BLAS_BLOCK_BYTES = 1 << 22   # ... of at most 4 MiB when rows are wide
FUSED_LABELS = 8         # more new labels than this: their products go to BLAS, not the fused kernel


def decoded_blocks(x):
    """(first row, float64 block of decoded rows) over a chunk."""
    rows = max(16, min(BLAS_ROWS, BLAS_BLOCK_BYTES // (8 * n_features(x))))
    for a in range(0, n_rows(x), rows):
        yield a, decode(x, a, a + rows)


def weighted_blocks(x, w=None, extra=None):
    """(first row, float64 block of decoded rows, each times w_i when w is given, followed
    by the columns of ``extra`` (m x e) when given) over a chunk, in ONE buffer that each
    block overwrites. Blocks hold at least r / 2 rows (up to BLAS_ROWS), so an r x r product
    per block is not dominated by writing its r x r result."""
    m, r = n_rows(x), n_features(x)
    rows = max(1, min(m, BLAS_ROWS, max(16, BLAS_BLOCK_BYTES // (8 * r), r // 2)))
    buf = np.empty((rows, r + (0 if extra is None else extra.shape[1])))
    for a in range(0, m, rows):
        block = buf[:min(rows, m - a)]
        b, Y = a + len(block), block[:, :r]
        if isinstance(x, Encoded):
            Y[:] = decode(x, a, b)
            if w is not None:
                Y *= w[a:b, None]
        elif w is not None:
            scaled_rows(x, a, w, Y)
        else:
            Y[:] = x[a:b]
        if extra is not None:
            block[:, r:] = extra[a:b]
        yield a, block


class QuadraticForm(NamedTuple):
    """x^T A x for every row x (J_i = x_i^T K^-1 x_i): A symmetric, and as packed tiles
    (kernels/rows.py) its Cholesky factor L (A = L L^T: x^T A x = |x L|^2 at half the
    multiply-adds) when A is positive definite, else A itself (then x . (x A))."""
    A: np.ndarray
    tiles: np.ndarray
    lower: bool

    @classmethod
    def of(cls, A):
        try:
            return cls(A, packed_tiles(np.linalg.cholesky(A)), True)
        except np.linalg.LinAlgError:       # not positive definite: x A, then the dot products
            return cls(A, packed_tiles(np.ascontiguousarray(A)), False)


def quadratic_forms(x, form, out):
    """out_i = x_i^T A x_i over a chunk (``form``: a QuadraticForm of A), in float64."""
    if sparse_bits(x):
        binary_quadratic(x.codes, x.scale, x.n_features, form.A, out)
        return
    Z = None
    for a, Y in weighted_blocks(x):
        Z = product_buffer(len(Y), n_features(x)) if Z is None else Z
        rows_times(Y, form.tiles, form.lower, Z[:len(Y)])
        if form.lower:
            row_squares(Z[:len(Y)], out[a:a + len(Y)])
        else:
            row_products(Z[:len(Y)], Y, out[a:a + len(Y)])


def sparse_bits(x):
    """Whether a chunk is packed bits sparse enough for kernels/encoded.py's sparse kernels:
    a row of k set bits costs them k^2 scattered operations (k B for products) against r^2 / 2
    at BLAS speed on decoded rows, so they win up to about SPARSE_BITS of r set on average
    (at r = 2,048 the Gram at 2% of bits set 0.03 s sparse, 0.24 s BLAS; at 10% 0.49 s and
    0.11 s; at 50%, a MinMax map's one-hot rows, 2.5 s and 0.11 s)."""
    if not (isinstance(x, Encoded) and x.codes.dtype == np.uint8):
        return False
    return int(_SET_BITS[x.codes].sum(dtype=np.int64)) <= SPARSE_BITS * n_features(x) * n_rows(x)


_SET_BITS = np.array([bin(b).count("1") for b in range(256)], np.uint8)  # per byte value


def _products(x, Gt):
    """(first row, block whose first B columns are x_i . Gt[:, b] for its rows) over a
    chunk: kernels/rows.py on decoded rows, or for sparse packed bits the sums of
    kernels/encoded.py."""
    B = Gt.shape[1]
    rows = max(16, min(BLAS_ROWS, BLAS_BLOCK_BYTES // (8 * max(B, n_features(x)))))
    if sparse_bits(x):
        for a in range(0, n_rows(x), rows):
            yield a, binary_products(x.codes, x.scale, a, min(a + rows, n_rows(x)), Gt)
        return
    tiles, P = packed_tiles(Gt), product_buffer(min(rows, n_rows(x)), B)
    for a in range(0, n_rows(x), rows):
        Y = decode(x, a, a + rows)
        rows_times(Y, tiles, False, P[:len(Y)])
        yield a, P[:len(Y)]


class ColumnSums(NamedTuple):
    sums: np.ndarray          # the chunk's column sums of X (float64)
    first_bad: int            # global index of its first row with a non-finite value, or -1


def colsum_step(x, state):
    """Column sums and the first non-finite row (global index, or -1)."""
    if not isinstance(x, Encoded):
        s, bad = column_sums(x)
    else:   # decoded by NumPy, which also turns float16 inf/NaN patterns into inf/NaN
        s, bad = np.zeros(x.n_features), -1
        for a, xb in decoded_blocks(x):
            sb, bad_b = column_sums(xb)
            s += sb
            if bad < 0 and bad_b >= 0:
                bad = a + bad_b
    return ColumnSums(s, state.start + bad if bad >= 0 else -1)


class PlainGram(NamedTuple):
    G: np.ndarray             # X^T X over the chunk (r x r, float64)
    s: np.ndarray             # X^T 1


def plain_gram_step(x, state):
    """The chunk's X^T X and X^T 1 in float64 (syrk over blocks of rows, with a column of
    ones: one product gives both)."""
    r = n_features(x)
    if sparse_bits(x):
        G, s, unused = np.zeros((r, r)), np.zeros(r), np.zeros(r)
        ones = np.ones(n_rows(x))
        binary_gram(x.codes, x.scale, r, ones, ones, ones * 0.0, G, s, unused)
        return PlainGram(G, s)
    full, product = np.zeros((r + 1, r + 1)), np.empty((r + 1, r + 1))
    for _, Y in weighted_blocks(x, None, np.ones((n_rows(x), 1))):
        full += np.matmul(Y.T, Y, out=product)
    return PlainGram(full[:r, :r], full[:r, r])


class GramPartials(NamedTuple):
    n_bad: int                # points with a degree <= 0 (then the products are zeros)
    first_bad: int            # global index of the first such point, or -1
    G: np.ndarray             # X^T diag(rho) X over the chunk (r x r)
    xq: np.ndarray            # X^T q
    xz: np.ndarray            # X^T z


def gram_step(x, state, s, label_idx, label_val, eta, w0, pi):
    """Degrees, then this chunk's X^T diag(rho) X, X^T q and X^T z."""
    state.apply_labels(label_idx, label_val)
    bad, first = degrees(x, s, state.deg)
    r = n_features(x)
    if bad or sparse_bits(x):
        G, xq, xz = np.zeros((r, r)), np.zeros(r), np.zeros(r)
        if bad:
            return GramPartials(bad, state.start + first, G, xq, xz)
        binary_gram(x.codes, x.scale, r, *point_weights(state.label, state.deg, eta, w0, pi), G, xq, xz)
        return GramPartials(0, -1, G, xq, xz)
    rho, q, z = point_weights(state.label, state.deg, eta, w0, pi)
    # One syrk (NumPy calls it for Y^T Y: half a product's flops) over Y = [sqrt(rho) X,
    # q / sqrt(rho), z / sqrt(rho)] gives X^T diag(rho) X, X^T q and X^T z at once (rho > 0).
    root = np.sqrt(rho)
    full, product = np.zeros((r + 2, r + 2)), np.empty((r + 2, r + 2))
    for _, Y in weighted_blocks(x, root, np.stack([q / root, z / root], axis=1)):
        full += np.matmul(Y.T, Y, out=product)
    return GramPartials(0, -1, full[:r, :r], full[:r, r], full[:r, r + 1])


def las_rescore_step(x, state, s, label_idx, label_val, Kinv, V, eta, w0, pi, t_prev, degrees_known=False):
    """Rebuild a chunk's state from the global state: labels, degrees (unless
    ``degrees_known``: initialization's Gram pass has just computed them), J (from K^-1, a
    QuadraticForm, or kept as it is when Kinv is None), then f and the impact factor (partials).

    The third pass of initialization, and how a chunk is restored from a checkpoint
    or rebuilt after its worker was lost (with its degrees, the recipe's default).
    """
    state.apply_labels(label_idx, label_val)
    if not degrees_known:
        degrees(x, s, state.deg)
    if Kinv is not None:
        quadratic_forms(x, Kinv, state.J)
    return ChunkPartials(*update_scores(x, V, np.zeros(0), state.start, state.label, state.deg,
                                        state.J, state.f, state.im, eta, w0, pi, t_prev))


class Drift(NamedTuple):
    """How far a chunk's incrementally updated J and f were from the recomputed ones."""
    J_change: float           # max |J_old - J|
    J_max: float              # max |J|
    f_change: float           # max |f_old - f|
    f_max: float              # max |f|


class Compared(NamedTuple):
    """What ``las_refresh_step`` returns: the partials and the chunk's drift."""
    partials: ChunkPartials
    drift: Drift


def las_refresh_step(x, state, *args):
    """``las_rescore_step`` that also measures how far the chunk's incrementally updated
    J and f were from the recomputed ones. Only the chunk's old values are copied, so a
    refresh needs no extra memory per point."""
    old_J, old_f = state.J.copy(), state.f.copy()
    partials = las_rescore_step(x, state, *args)
    drift = Drift(_max_abs(old_J - state.J), _max_abs(state.J), _max_abs(old_f - state.f), _max_abs(state.f))
    return Compared(partials, drift)


def _max_abs(a):
    return float(np.abs(a).max(initial=0.0))


def las_update_step(x, state, V, c, label_idx, label_val, eta, w0, pi, t_prev):
    """Record new labels, then the fused pass: f, J, M^-1 u and the impact factor.

    V holds K^-1 xq, K^-1 xz and the g_b of the B new labels. For many labels the
    O(m r B) products x_i . g_b are one BLAS product per block of rows (matrix-multiply
    speed), and J_i -= sum_b c_b (x_i . g_b)^2 is applied before the fused pass over the
    two remaining vectors."""
    state.apply_labels(label_idx, label_val)
    V, c = lower_quadratic_form(x, state.J, V, c)
    return ChunkPartials(*update_scores(x, V, c, state.start, state.label, state.deg,
                                        state.J, state.f, state.im, eta, w0, pi, t_prev))


def las_update_over_store(chunks, arrays, on_threads, V, c, label_idx, label_val, eta, w0, pi, t_prev):
    """``las_update_step`` over every chunk at once (``ChunkStep.over_store``): one kernel
    call per thread, each taking work items of ITEM_ROWS rows from any chunk until none is
    left. The same numbers as chunk by chunk, bit for bit (kernels/las.py). None for many
    labels (their products go to BLAS chunk by chunk) or chunks other than float arrays
    of one kind."""
    if len(c) > FUSED_LABELS or (plan := item_plan(chunks)) is None:
        return None
    arrays["label"][label_idx] = label_val
    label, deg, J, f, im = (arrays[name] for name in ("label", "deg", "J", "f", "im"))
    return over_items(plan, on_threads, update_items, (pad3(V), len(V), c, label, deg, J, f, im, eta, w0, pi, t_prev),
                      f, im)


def item_plan(chunks):
    """How a kernel over every chunk at once shares these chunks out (``ItemPlan``), made
    once per ``HeldChunks``; None when they are not float arrays of one kind."""
    return chunks.derived(ItemPlan, lambda: ItemPlan.of(chunks))


def over_items(plan, on_threads, kernel, args, f, im):
    """``kernel(x0, addresses, starts, items, counter, *args, sums, vals, idx)`` on every
    thread at once, the threads taking the plan's work items in turn (kernels/items.py);
    every chunk's partials from the items' (f, im: the whole per-point arrays they rank)."""
    sums, vals, idx = new_items(len(plan.items))
    head = (plan.chunks[0], plan.addresses, plan.starts, plan.items, np.zeros(1, np.int64))
    on_threads(lambda: kernel(*head, *args, sums, vals, idx))
    return [ChunkPartials(*p) for p in zip(*items_partials(sums, vals, idx, plan.first, plan.starts, f, im))]


class ItemPlan(NamedTuple):
    """How ``update_items`` shares a store's chunks out: the chunks (kept alive here for
    the kernel, which reads them by address), their addresses, each chunk's first global
    row (then n), the work items (``work_items``) and each chunk's first item (then their
    count)."""
    chunks: list
    addresses: np.ndarray
    starts: np.ndarray
    items: np.ndarray
    first: np.ndarray

    @classmethod
    def of(cls, chunks):
        """The plan for these chunks; None when they are not float arrays of one kind."""
        if not _one_kind_of_array(chunks):
            return None
        lengths = np.array([len(x) for x in chunks], np.int64)
        items = work_items(lengths)
        first = np.searchsorted(items[:, 0], np.arange(len(chunks) + 1))
        return cls(list(chunks), addresses_of(chunks), np.concatenate([[0], np.cumsum(lengths)]), items, first)


def work_items(lengths):
    """(chunk, first row, end row) of every work item: each chunk cut every ITEM_ROWS rows
    from its first, as ``update_scores`` cuts it."""
    chunk = np.repeat(np.arange(len(lengths)), (lengths + ITEM_ROWS - 1) // ITEM_ROWS)
    first = np.concatenate([np.arange(0, m, ITEM_ROWS) for m in lengths])
    return np.stack([chunk, first, np.minimum(first + ITEM_ROWS, lengths[chunk])], axis=1).astype(np.int64)


def _one_kind_of_array(chunks):
    """Whether the chunks are float arrays of one dtype and layout (one compiled kernel
    takes them all; encoded chunks go chunk by chunk)."""
    x0 = chunks[0] if chunks else None
    return isinstance(x0, np.ndarray) and all(
        isinstance(x, np.ndarray) and x.dtype == x0.dtype and x.ndim == 2 and x.flags.c_contiguous
        and x.flags.writeable == x0.flags.writeable for x in chunks)


def lower_quadratic_form(x, J, V, c, first=2):
    """Sherman-Morrison on J_i = x_i^T M^-1 x_i for many labels at once: J_i -= sum_b
    c_b (x_i . g_b)^2 with the g_b in rows first: of V, by one BLAS product per block of
    rows (matrix-multiply speed). Returns (V, c) left for the fused kernel: unchanged for
    few labels (the kernel applies them in its own pass), else V[:first] and no c."""
    if len(c) <= FUSED_LABELS:
        return V, c
    for a, P in _products(x, np.ascontiguousarray(V[first:].T)):
        subtract_weighted_squares(P, c, J[a:a + len(P)])
    return V[:first], c[:0]


def wnas_update_step(x, state, Z, signs, label_idx, label_val, reset=False):
    """Record new labels, add their similarities to every point's numerator and
    denominator (after zeroing them if ``reset``), and return the partials of f."""
    state.apply_labels(label_idx, label_val)
    if reset:
        state.num[:] = 0.0
        state.den[:] = 0.0
    if len(Z) > FUSED_LABELS:        # many labels: their similarities by BLAS, block by block
        for a, S in _products(x, np.ascontiguousarray(Z.T)):
            add_signed_and_absolute(S, signs, state.num[a:a + len(S)], state.den[a:a + len(S)])
        Z, signs = Z[:0], signs[:0]
    return ChunkPartials(*add_similarities(x, Z, signs, state.start, state.label, state.num, state.den, state.f))


def best_in_chunk(state, t, k):
    """The k highest scores f + t * im over the chunk's unlabeled points, best first:
    (global indices, scores).

    Called only for the rare chunks whose reported candidates cannot settle the
    choice (engine/core/select.py). Ties go to the lowest index.
    """
    i, score = top_unlabeled(state.label, state.f, state.im if t else state.f, t, k)
    return Ranked(state.start + i, score)


# The declarations. Column sums and the Gram pass compute a chunk's whole state from X
# (rerun after a loss); the others update state they did not create (the engine's
# rebuild recipe replaces them). best_in_chunk reads no X: it is a map_state function.
COLSUM = ChunkStep(colsum_step, from_scratch=True)
GRAM = ChunkStep(gram_step, from_scratch=True)
PLAIN_GRAM = ChunkStep(plain_gram_step, from_scratch=True)
LAS_RESCORE = ChunkStep(las_rescore_step)
LAS_REFRESH = ChunkStep(las_refresh_step)
LAS_UPDATE = ChunkStep(las_update_step, over_store=las_update_over_store)
WNAS_UPDATE = ChunkStep(wnas_update_step)
