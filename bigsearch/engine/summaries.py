"""Block summaries stored with the store, so pruned LAS queries (engine/pruning.py) skip
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

import time

import numpy as np

from ..backends.local import LocalBackend
from ..errors import BigsearchError
from ..storage import open_store
from ..storage.fingerprint import store_fingerprint
from .pruning import (
    DEFAULT_BASIS,
    BlockSummaries,
    block_layout,
    check_block_rows,
    compute_summaries,
    gram_basis,
)
from .steps import COLSUM, GRAM

GROUP = "block_summaries"
VERSION = 1
FIELDS = ("basis", "centre", "lo", "hi", "radius_perp", "radius", "norm_max", "deg_min", "deg_max")


def summaries_of_store(store, block_rows=None, basis_dim=DEFAULT_BASIS, n_threads=None):
    """(BlockSummaries, s, per-block degree sums) of a store with no labels, in three
    passes (column sums; degrees and X^T diag(1/d) X; the summaries), by the steps a LAS
    search runs; None when some degree is <= 0 or X is not finite (LAS cannot search it)."""
    block_rows = check_block_rows(block_rows)
    backend = LocalBackend(store, n_threads)
    try:
        backend.alloc("label", np.int8, -1)
        backend.alloc("deg", np.float64, 0.0)
        parts = backend.map(COLSUM)
        s = np.sum([q.sums for q in parts], axis=0)
        if any(q.first_bad >= 0 for q in parts) or not np.all(np.isfinite(s)):
            return None
        none = np.zeros(0, np.int64)
        grams = backend.map(GRAM, s, none, none.astype(np.int8), 0.5, 1.0 / store.n, 0.5)
        if any(q.n_bad for q in grams):
            return None
        basis = gram_basis(np.sum([q.G for q in grams], axis=0), basis_dim)
        sm = compute_summaries(backend.map, store.chunks, basis, block_rows)
        return sm, s, np.add.reduceat(backend.gather("deg"), sm.start)
    finally:
        backend.close()


def write_block_summaries(path, block_rows=None, basis_dim=DEFAULT_BASIS, n_threads=None):
    """Compute a store's block summaries and write them into it (replacing old ones).
    Returns what was written (blocks, MiB, seconds), or None when LAS cannot search the
    store (some degree <= 0), so there is nothing to write. The store must be closed."""
    t0 = time.perf_counter()
    with open_store(path) as store:
        computed = summaries_of_store(store, block_rows, basis_dim, n_threads)
        if computed is None:
            return None
        sm, s, deg_sum = computed
        fmt, fingerprint = type(store), store_fingerprint(store)
    arrays = {**{k: getattr(sm, k) for k in FIELDS}, "s": s, "deg_sum": deg_sum}
    fmt.write_group(
        path,
        GROUP,
        arrays,
        {
            "version": VERSION,
            "block_rows": sm.block_rows,
            "basis_dim": int(sm.basis.shape[1]),
            "fingerprint": fingerprint,
        },
    )
    return {
        "blocks": sm.n_blocks,
        "block_rows": sm.block_rows,
        "MiB": sum(a.nbytes for a in arrays.values()) / 2**20,
        "seconds": time.perf_counter() - t0,
    }


def stored_summaries(store, block_rows, s, deg):
    """(BlockSummaries, "store") when the store holds summaries of blocks of ``block_rows``
    rows that still describe X (see the module), else (None, why not). ``s`` and ``deg``
    are the search's column sums and degrees."""
    try:
        found = store.read_group(GROUP)
    except BigsearchError as e:
        return None, f"computed: the stored summaries cannot be read ({e})"
    if found is None:
        return None, "computed: the store has none"
    attrs, arrays = found
    if attrs.get("version") != VERSION or not set(FIELDS) | {"s", "deg_sum"} <= set(arrays):
        return None, "computed: the stored summaries are incomplete or of another version"
    if attrs.get("block_rows") != block_rows:
        return None, f"computed: the store has summaries of blocks of {attrs.get('block_rows')} rows"
    chunk, start, stop = block_layout(store.chunks, block_rows)
    changed = (
        attrs.get("fingerprint") != store_fingerprint(store)
        or not np.array_equal(arrays["s"], s)
        or len(arrays["deg_sum"]) != len(start)
        or not np.array_equal(arrays["deg_sum"], np.add.reduceat(deg, start))
        or not np.array_equal(arrays["deg_min"], np.minimum.reduceat(deg, start))
        or not np.array_equal(arrays["deg_max"], np.maximum.reduceat(deg, start))
    )
    if changed:
        return None, "computed: X changed since the stored summaries were written"
    return BlockSummaries(block_rows, chunk, start, stop, *(arrays[k] for k in FIELDS)), "store"
