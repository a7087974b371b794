"""Block summaries stored with the store, so pruned LAS queries (engine/pruning/las.py) skip
the pass that computes them at initialization.

What is stored is a property of X alone: per block of ``block_rows`` rows its centroid,
radius, largest row norm, smallest and largest degree, and its box and residual radius
in the top eigenvectors of X^T diag(1/d) X (X with no labels: any orthonormal basis
gives a valid bound, and labels change a few rows' weights only). They live in a group
``block_summaries`` beside X (docs/store-format.md), which plain zarr / h5py readers of X
ignore.

Summaries that no longer describe X would make pruning inexact, so they are used only
when everything checked at initialization, at no extra read beyond the fingerprint's,
matches: the store fingerprint (shape, dtype, chunking, featurization and a hash of
sampled chunks), the column sums s = X^T 1 of the search, bit for bit (any edit of X
that changes a column sum), and per block the smallest, largest and summed degree
(every row's degree x_i . s, computed by the search's own pass: a row changed, moved
to another block or replaced). Otherwise they are computed as before, and
``LASPruning.summaries_from`` says why.
"""

import os
import time
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace
from typing import NamedTuple

import numpy as np

from ...backends import make_backend, pass_progress
from ...errors import BigsearchError
from ...kernels.las import degrees
from ...storage import open_store
from ...storage.encoding import n_rows
from ...storage.fingerprint import store_fingerprint
from ...storage.format import SUMMARIES_GROUP
from ..core.blas import one_blas_thread
from ..core.steps import COLSUM, GRAM, colsum_step
from .block_summaries import (
    DEFAULT_BASIS,
    BlockSummaries,
    block_layout,
    check_block_rows,
    compute_summaries,
    gram_basis,
    summary_step,
)

GROUP = SUMMARIES_GROUP
VERSION = 1
FIELDS = ("basis", "centre", "lo", "hi", "radius_perp", "radius", "norm_max", "deg_min", "deg_max")


PASSES = ("column sums", "degrees and basis", "block summaries")  # what progress reports


def summaries_of_store(store, block_rows=None, basis_dim=DEFAULT_BASIS, n_threads=None, progress=None):
    """(BlockSummaries, s, per-block degree sums) of a store with no labels, in three
    passes (column sums; degrees and X^T diag(1/d) X; the summaries), by the steps a LAS
    search runs; None when some degree is <= 0 or X is not finite (LAS cannot search it).
    ``progress(what, chunks done, chunks)``, if given, is called as each pass moves."""
    block_rows = check_block_rows(block_rows)
    backend = make_backend(store, "local", n_threads)

    def run(what, step, *args):
        if progress is None:
            return backend.map(step, *args)
        with pass_progress(lambda done, total: progress(what, done, total)):
            return backend.map(step, *args)

    try:
        found = sums_and_basis(backend, store.n, basis_dim, run)
        if found is None:
            return None
        s, basis = found
        sm = compute_summaries(lambda *a: run(PASSES[2], *a), store.chunks, basis, block_rows)
        return sm, s, np.add.reduceat(backend.gather("deg"), sm.start)
    finally:
        backend.close()


def sums_and_basis(backend, n, basis_dim=DEFAULT_BASIS, run=None):
    """(s, basis): the column sums of the backend's X and the top eigenvectors of
    X^T diag(1/d) X (the degrees d left in its ``deg``), in two passes (``run(what, step,
    *args)``, default the backend's map); None when X is not finite or some d <= 0."""
    run = run or (lambda what, *a: backend.map(*a))
    backend.alloc("label", np.int8, -1)
    backend.alloc("deg", np.float64, 0.0)
    parts = run(PASSES[0], COLSUM)
    s = np.sum([q.sums for q in parts], axis=0)
    if any(q.first_bad >= 0 for q in parts) or not np.all(np.isfinite(s)):
        return None
    none = np.zeros(0, np.int64)
    grams = run(PASSES[1], GRAM, s, none, none.astype(np.int8), 0.5, 1.0 / n, 0.5)
    if any(q.n_bad for q in grams):
        return None
    return s, gram_basis(np.sum([q.G for q in grams], axis=0), basis_dim)


def write_block_summaries(
    path, block_rows=None, basis_dim=DEFAULT_BASIS, n_threads=None, *, in_place=False, progress=None
):
    """Compute a store's block summaries and write them into it (replacing old ones),
    atomically and durably (``FeatureStore.publish_group``; ``in_place=True``: a store
    not yet published, e.g. in ``StoreWriter.before_publish``, written as it is).
    Returns what was written (blocks, MiB, seconds), or None when LAS cannot search the
    store (some degree <= 0), so there is nothing to write. The store must be closed.
    ``progress``: as for ``summaries_of_store``."""
    t0 = time.perf_counter()
    with open_store(path) as store:
        computed = summaries_of_store(store, block_rows, basis_dim, n_threads, progress)
        if computed is None:
            return None
        sm, s, deg_sum = computed
        fmt, fingerprint = type(store), store_fingerprint(store)
    return _write_group(path, fmt, fingerprint, sm, s, deg_sum, in_place, t0)


def _write_group(path, fmt, fingerprint, sm, s, deg_sum, in_place, t0):
    """Write the summaries' group into the store at ``path``; what was written."""
    arrays = {**{k: getattr(sm, k) for k in FIELDS}, "s": s, "deg_sum": deg_sum}
    attrs = {
        "version": VERSION,
        "block_rows": sm.block_rows,
        "basis_dim": int(sm.basis.shape[1]),
        "fingerprint": fingerprint,
    }
    (fmt.write_group if in_place else fmt.publish_group)(path, GROUP, arrays, attrs)
    return {
        "blocks": sm.n_blocks,
        "block_rows": sm.block_rows,
        "MiB": sum(a.nbytes for a in arrays.values()) / 2**20,
        "seconds": time.perf_counter() - t0,
    }


class BlockDegrees(NamedTuple):
    """One chunk's degrees d_i = x_i . s, per block: what the stored summaries keep of them."""

    n_bad: int  # rows with d_i <= 0 (or not finite)
    deg_min: np.ndarray
    deg_max: np.ndarray
    deg_sum: np.ndarray


def chunk_block_degrees(x, s, block_rows):
    """A chunk's per-block smallest, largest and summed degree, by the search's own kernel."""
    deg = np.empty(n_rows(x))
    bad, _ = degrees(x, s, deg)
    return BlockDegrees(bad, **block_degrees(deg, np.arange(0, len(deg), block_rows)))


def block_degrees_last_first(store, s, block_rows, n_threads=None):
    """``chunk_block_degrees`` of every chunk, in chunk order, read last chunk first: of a
    store just written and larger than memory, the page cache holds the last chunks, which
    a pass from the first would evict before it reached them."""

    def one(j):
        with store.chunk(j) as x:
            return chunk_block_degrees(x, s, block_rows)

    with ThreadPoolExecutor(n_threads or os.cpu_count() or 1) as pool:
        return list(pool.map(one, range(len(store.chunks) - 1, -1, -1)))[::-1]


class StreamedSummaries:
    """A store's block summaries computed as its chunks are written, in order, so that
    they cost one pass (the degrees) instead of three (ingest/cluster_order.py).

    ``basis``: any orthonormal r x p basis gives valid bounds (block_summaries.py); a
    writer that knows a sample of X passes ``sample_basis`` of it. Each chunk, as the
    store will hold it, goes to ``add`` once, in row order: its column sums (COLSUM's
    kernel) and its blocks' centre, box, radii and largest norm (SUMMARY's step), the
    very computations of ``summaries_of_store`` on the same chunk, so bit for bit theirs
    given the basis. The degrees d_i = x_i . s need the finished s, hence ``finish``'s
    one pass over the complete store (last chunk first: ``block_degrees_last_first``).
    The stored s and degrees are then exactly what a search computes, so it uses these
    summaries (``stored_summaries``)."""

    def __init__(self, basis, block_rows=None):
        self.basis, self.block_rows = basis, check_block_rows(block_rows)
        self.chunks, self.sums, self.columns = [], [], []
        self.bad = False
        self.seconds = 0.0

    def add(self, *chunks, pool=None):
        """The next chunks (each m x r, float as stored), in row order; with ``pool`` (an
        executor) their summaries are computed side by side on its threads."""
        t0 = time.perf_counter()

        def summarize(x):
            return summary_step(x, None, self.basis, self.block_rows)

        with one_blas_thread():  # it runs beside the writer
            columns = list((pool.map if pool else map)(summarize, chunks))
        for x, col in zip(chunks, columns):
            a = self.chunks[-1][1] if self.chunks else 0
            self.chunks.append((a, a + len(x)))
            sums = colsum_step(x, SimpleNamespace(start=a))
            self.bad |= sums.first_bad >= 0
            self.sums.append(sums.sums)
            self.columns.append(col)
        self.seconds += time.perf_counter() - t0

    def finish(self, path, n_threads=None):
        """Write the summaries into the complete, unpublished store at ``path`` (in place).
        Returns what was written, as ``write_block_summaries``; None when nothing is
        (LAS cannot search X). Should the store's chunks not be the ones added, its
        summaries are computed by ``write_block_summaries``'s passes instead."""
        t0 = time.perf_counter()
        s = np.sum(self.sums, axis=0)
        with open_store(path) as store:
            same = [tuple(map(int, c)) for c in store.chunks] == self.chunks
        if not same:
            return write_block_summaries(path, self.block_rows, self.basis.shape[1], n_threads, in_place=True)
        with open_store(path) as store:
            if self.bad or not np.all(np.isfinite(s)):
                return None
            parts = block_degrees_last_first(store, s, self.block_rows, n_threads)
            fmt, fingerprint = type(store), store_fingerprint(store)
        if any(q.n_bad for q in parts):
            return None
        cols = [np.concatenate(col) for col in zip(*self.columns)]
        cols[-2] = np.concatenate([q.deg_min for q in parts])
        cols[-1] = np.concatenate([q.deg_max for q in parts])
        sm = BlockSummaries(self.block_rows, *block_layout(self.chunks, self.block_rows), self.basis, *cols)
        written = _write_group(path, fmt, fingerprint, sm, s, np.concatenate([q.deg_sum for q in parts]), True, t0)
        return {**written, "seconds": written["seconds"] + self.seconds, "passes": 1}


def sample_basis(rows, basis_dim=DEFAULT_BASIS, n_threads=None):
    """The summaries' basis (top eigenvectors of X^T diag(1/d) X) of a sample of X's rows
    (an array), by the passes of ``summaries_of_store`` over the sample; when some degree
    of the sample is <= 0, the top eigenvectors of X^T X."""
    backend = make_backend(open_store(rows), "local", n_threads)
    try:
        found = sums_and_basis(backend, len(rows), basis_dim)
    finally:
        backend.close()
    if found is not None:
        return found[1]
    X = np.asarray(rows, np.float64)
    return gram_basis(X.T @ X, basis_dim)


CHANGED = "computed: X changed since the stored summaries were written"
DEGREES = ("deg_min", "deg_max", "deg_sum")
WHOLE = ("basis", "s")  # not per block


def stored_header(store, block_rows, fields=()):
    """The stored summaries' column sums ``s`` and per-block degrees (``DEGREES``), and
    the arrays ``fields``, when the store holds whole summaries of blocks of ``block_rows``
    rows whose fingerprint is X's: (arrays, None); else (None, why not). What remains to
    check is the search's own column sums and degrees against these (``matches``). One
    read of the group: what it returns belongs together, even if the summaries are being
    replaced meanwhile (``bigsearch summarize``)."""
    select = {**{k: slice(0, 0) for k in FIELDS}, **dict.fromkeys(("s", *DEGREES, *fields))}
    try:
        found = store.read_group(GROUP, select)
    except BigsearchError as e:
        return None, f"computed: the stored summaries cannot be read ({e})"
    if found is None:
        return None, "computed: the store has none"
    attrs, arrays = found
    if attrs.get("version") != VERSION or not set(FIELDS) | {"s", "deg_sum"} <= set(arrays):
        return None, "computed: the stored summaries are incomplete or of another version"
    if attrs.get("block_rows") != block_rows:
        return None, f"computed: the store has summaries of blocks of {attrs.get('block_rows')} rows"
    n_blocks = len(block_layout(store.chunks, block_rows)[0])
    if attrs.get("fingerprint") != store_fingerprint(store) or not all(
        len(arrays[k]) == n_blocks for k in (*DEGREES, *fields) if k not in WHOLE
    ):
        return None, CHANGED
    return {k: arrays[k] for k in ("s", *DEGREES, *fields)}, None


def block_degrees(deg, start):
    """Per block (first rows ``start``): the smallest, largest and summed degree, as stored."""
    return {
        "deg_min": np.minimum.reduceat(deg, start),
        "deg_max": np.maximum.reduceat(deg, start),
        "deg_sum": np.add.reduceat(deg, start),
    }


def matches(stored, computed):
    """Whether stored and computed per-block degrees (and ``s``, when both have it) are equal, bit for bit."""
    return all(np.array_equal(stored[k], computed[k]) for k in computed)


def stored_summaries(store, block_rows, s, deg):
    """(BlockSummaries, "store") when the store holds summaries of blocks of ``block_rows``
    rows that still describe X (see the module), else (None, why not). ``s`` and ``deg``
    are the search's column sums and degrees."""
    stored, why = stored_header(store, block_rows, FIELDS)
    if stored is None:
        return None, why
    chunk, start, stop = block_layout(store.chunks, block_rows)
    if not matches(stored, {"s": s, **block_degrees(deg, start)}):
        return None, CHANGED
    return BlockSummaries(block_rows, chunk, start, stop, *(stored[k] for k in FIELDS)), "store"


def read_stored(store, fields, block_rows, blocks=None):
    """Arrays ``fields`` of the stored summaries; with ``blocks`` (a slice), only those
    blocks' rows (``basis`` and ``s`` whole). None when they are no longer summaries of
    blocks of ``block_rows`` rows with those blocks (replaced meanwhile)."""
    attrs, arrays = store.read_group(GROUP, {k: None if k in WHOLE else blocks for k in fields}) or ({}, {})
    n_blocks = len(block_layout(store.chunks, block_rows)[0]) if blocks is None else blocks.stop - blocks.start
    if attrs.get("block_rows") != block_rows or not all(
        k in arrays and (k in WHOLE or len(arrays[k]) == n_blocks) for k in fields
    ):
        return None
    return arrays


def store_source(store):
    """How a dask worker reopens the store to read its chunks' slice of the summaries."""
    return {"path": store.reopen_path(), "options": store.reopen_options()}


def read_chunk_summaries(source, first_block, n_blocks, fields, block_rows):
    """A chunk's slice of the stored summaries (``fields``), read where the chunk is (a
    dask worker), from the store at ``source`` (``store_source``); None as for ``read_stored``."""
    with open_store(source["path"], source["options"]) as store:
        return read_stored(store, fields, block_rows, slice(first_block, first_block + n_blocks))


def first_blocks(chunks, block_rows):
    """The global index of each chunk's first block."""
    return np.concatenate([[0], np.cumsum([-(-(b - a) // block_rows) for a, b in chunks])[:-1]]).astype(np.int64)
