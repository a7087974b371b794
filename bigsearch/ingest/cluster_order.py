"""Rewrite a feature store with its rows in cluster order (for pruned queries).

Pruned LAS queries (engine/pruning/las.py) bound each block of consecutive rows by its
centroid and spread, so they read least when neighbouring rows are alike. This module
writes a copy of a store whose rows are grouped by k-means cluster, in a few passes:

1. k-means on a sample (engine/core/kmeans.py, the AGR baseline's k-means: k-means++ seeds,
   then Lloyd iterations) of at most ``SAMPLE_ROWS`` rows read with ``read_rows``, held
   in memory (the whole store when it is that small);
2. one assignment pass over X through the engine's backend: every row's nearest centre
   (BLAS in the store's precision, blocks of 4,096 rows), kept as one int32 per row;
3. one bucketed write: a pass over X in order puts each chunk's rows of cluster c, with
   their labels and ids, at cluster c's next free place in a spill file (a temporary
   directory beside the output) laid out cluster after cluster, since the sizes are
   known, by write blocks last first (``_spilled_at``); what a person sees of a row (the
   ``records`` or ``pixels`` array of ``display``, ingest/records.py) goes to one spill
   file per cluster. The spill files are then read block by block from their tail, which
   is cut off once read, through the store writer (atomic: the output appears only when
   complete). A temporary source (``discard_source``) loses its chunk files as they are
   spilled, so the disk holds about one copy of X in all at any time;
4. the pruning block summaries of the new order are computed as each chunk is written
   (engine/pruning/summaries.py's StreamedSummaries, on a thread beside the writer; their
   basis from the k-means sample), then one pass over the new store gives the degrees,
   which need its column sums; they are stored with it before it appears, so pruned
   searches on it skip their pass (not for object-store URLs, which publish as they write,
   nor for an encoded output: there the summaries' three passes run on the stored X).

Rows of a cluster keep their original order. X is never held whole: memory is the
sample, the n int32 assignments, a chunk and two write blocks (``WRITE_BYTES``), and
DISPLAY_BLOCK_ROWS display values when the store has them (a whole cluster's were read at
once before: at 10M abstracts in 256 clusters, gigabytes of text). The output keeps ``y`` and
the display array in the new row order, and ``ids`` holds each row's original id (the
source's ``ids`` when it has them, else its original row number), so answers still name
the original points. Cost: X read three times (assignment, spill, spill file) and written
twice (spill, output), and the degree pass (docs/performance.md).
"""

import contextlib
import itertools
import json
import os
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple

import numpy as np

from ..backends import ChunkStep, make_backend
from ..engine.core.kmeans import BLOCK_ROWS, kmeans
from ..engine.pruning.summaries import StreamedSummaries, sample_basis, write_block_summaries
from ..errors import ParameterError, StoreExistsError
from ..storage import StoreWriter, is_url, open_store, store_kind_for, store_location
from ..storage.atomic import remove, remove_stale_leftovers, temp_sibling
from ..storage.base import disk_bytes
from ..storage.encoding import ENCODING_ATTR, decode, n_rows
from ..storage.format import DISPLAY_ATTR, FORMAT_ATTR, PIXELS_NAME
from ..storage.remote import store_exists
from ..storage.remote_options import check_writable

ROWS_PER_CLUSTER = 8192        # the default k: about this many rows per cluster (at least 16)
MAX_CLUSTERS = 256
SAMPLE_PER_CLUSTER = 256       # k-means runs on a sample of this many rows per cluster,
MIN_SAMPLE = 65_536            # at least this many,
SAMPLE_BYTES = 256 << 20       # and at most this much float64 data,
SAMPLE_RUN = 64                # read in runs of this many rows
WRITE_BYTES = 64 << 20         # rows read back from the spill files at a time
DISPLAY_BLOCK_ROWS = 16384     # display values (a record's text, an image) read back at a time


def default_clusters(n):
    return int(min(MAX_CLUSTERS, n, max(16, n // ROWS_PER_CLUSTER)))


def cluster_order(source, out, *, clusters=None, iterations=5, seed=0, chunk_rows=None, kind=None,
                  encoding=None, compressors=None, overwrite=False, n_threads=None, backend="local",
                  discard_source=False):
    """Write ``source``'s rows to a new store ``out`` grouped by k-means cluster.

    The source holds float32 or float64 X; the output has its dtype, or ``encoding``
    (storage/encoding.py: the rows are encoded as they are written).

    ``clusters``: k (default about n / 8,192, at least 16, at most 256). ``backend``: where
    the assignment pass runs (backends.make_backend). ``discard_source``: the source is a
    temporary copy (make_store's, ingest's unordered store), removed as the spill takes its
    rows (a Zarr store's chunk files one by one; else whole once spilled); never pass it
    for a user's store. The spill file shrinks as the output grows, so the disk holds
    about one copy of X besides a kept source (a discarded one: about one copy in all;
    two with an HDF5 source).
    Returns a summary dict: the clusters, their sizes, the seconds of each stage, the
    bytes on disk of each copy and the most that was on disk at once (``peak_disk_bytes``).
    """
    t0 = time.perf_counter()
    out = out if is_url(str(out)) else Path(out)      # a URL is never a local path (s3:// is not ./s3:)
    if _store_exists(out, kind) and not overwrite:
        raise StoreExistsError(f"{out} already exists; pass overwrite=True to replace it")
    if store_location(out, resolve=True) == store_location(getattr(source, "path", source), resolve=True):
        raise ParameterError("cluster order writes a new store: give an output path other than the source")
    stages, written = {}, {}
    spill = None
    try:
        with open_store(source) as store:
            if store.encoding not in ("float32", "float64"):
                raise ParameterError(f"{store.path} is {store.encoding}-encoded; cluster order rewrites float "
                                     "stores: ingest again with cluster_order (and output.encoding), which "
                                     "orders before encoding")
            k = default_clusters(store.n) if clusters is None else int(clusters)
            if not 1 <= k <= store.n:
                raise ParameterError(f"clusters must be between 1 and n = {store.n}, got {clusters}")
            ids_dtype = _ids_dtype(store)
            encoding = encoding or store.encoding
            stream = not isinstance(out, str) and encoding == store.encoding   # summaries as it is written
            centres, basis = _sample_kmeans(store, k, seed, iterations, n_threads, basis=stream)
            stages["kmeans"] = time.perf_counter() - t0
            nearest = _assign(store, centres, backend, n_threads)
            stages["assign"] = time.perf_counter() - t0 - sum(stages.values())
            sizes = np.bincount(nearest, minlength=k)
            spill = _spill_dir(out)
            display = DisplaySpill.of(store)
            layout = {"r": store.r, "dtype": store.dtype, "chunk_rows": chunk_rows or store.chunk_rows}
            source_path, source_bytes = store.path, _disk_bytes(store.path)
            peak_spilling = _spill(store, nearest, sizes, spill, ids_dtype, display, _write_rows(**layout),
                                   source_bytes, consume=discard_source)
            stages["spill"] = time.perf_counter() - t0 - sum(stages.values())
            attrs = {**_kept_attrs(store.attrs, display), "cluster_order": {
                "clusters": k, "iterations": iterations, "seed": seed, "source": str(store.path)}}
        disk = {"source": source_bytes, "spill": _disk_bytes(spill)}
        if discard_source:
            remove(source_path)
        kept = 0 if discard_source else source_bytes
        summaries = StreamedSummaries(basis) if stream else None

        def publish_summaries(tmp):
            if summaries is not None:
                written["block_summaries"] = summaries.finish(tmp, n_threads)
            else:
                written["block_summaries"] = write_block_summaries(tmp, n_threads=n_threads, in_place=True)
        peak_writing = _write(spill, sizes, ids_dtype, out, display, summaries, n_threads, **layout,
                              kind=store_kind_for(out, kind), encoding=encoding, compressors=compressors,
                              overwrite=overwrite, attrs=attrs, before_publish=publish_summaries)
        stages["write"] = time.perf_counter() - t0 - sum(stages.values())
    finally:
        if spill is not None:
            remove(spill)
    disk["out"] = _disk_bytes(out)
    peak = max(peak_spilling, kept + peak_writing, kept + disk["out"])
    return {"out": str(out), "clusters": k, "sizes": sizes.tolist(), "kmeans_seconds": stages["kmeans"],
            "assign_seconds": stages["assign"], "stage_seconds": stages, "seconds": time.perf_counter() - t0,
            "disk_bytes": disk, "peak_disk_bytes": peak, **written}


def _disk_bytes(path):
    """Bytes a local store or spill takes on disk (0 for an object-store URL)."""
    return 0 if is_url(str(path)) else disk_bytes(path)


def _sample_kmeans(store, k, seed, iterations, n_threads, basis=False):
    """k-means centres from a sample of the store's rows (the whole store when it is
    small), and with ``basis`` the block summaries' basis of the same sample."""
    size = min(store.n, max(SAMPLE_PER_CLUSTER * k, MIN_SAMPLE), max(k, SAMPLE_BYTES // (8 * store.r)))
    rng = np.random.default_rng([seed, 3])
    rows = None if size == store.n else store.read_rows(_sample_rows(store.n, size, rng))
    sample = store if rows is None else open_store(rows)
    backend = make_backend(sample, "local", n_threads)
    try:
        centres = kmeans(sample, k, seed=seed, iterations=iterations, mapper=backend.map)
    finally:
        backend.close()
    if not basis:
        return centres, None
    return centres, sample_basis(store.read_rows(np.arange(store.n)) if rows is None else rows, n_threads=n_threads)


def _sample_rows(n, size, rng):
    """``size`` distinct rows, sorted: runs of SAMPLE_RUN consecutive rows at random places
    (a cold store larger than RAM is read with 64x fewer seeks; k-means' centres need
    rows from all over the store, not independent ones)."""
    runs, wanted = n // SAMPLE_RUN, -(-size // SAMPLE_RUN)
    if wanted > runs:                      # a small store: rows one by one
        return np.sort(rng.choice(n, size=size, replace=False))
    starts = rng.choice(runs, size=wanted, replace=False) * SAMPLE_RUN
    rows = (starts[:, None] + np.arange(SAMPLE_RUN)).ravel()
    return np.sort(rng.choice(rows, size=size, replace=False) if len(rows) > size else rows)


class Nearest(NamedTuple):
    centre: np.ndarray        # per row of the chunk, its nearest centre (int32)


def nearest_step(x, state, centres):
    """A chunk's rows' nearest centres: argmin_c ||c||^2 - 2 x . c (||x||^2 changes no
    row's choice), by BLAS in the chunk's own precision (float32: single-precision
    products, twice the speed; a near tie may go either way, and either is a valid order)."""
    dtype = np.float32 if x.dtype == np.float32 else np.float64
    minus_2ct = np.ascontiguousarray(-2.0 * centres.T, dtype)
    centre_sq = (centres * centres).sum(axis=1).astype(dtype)
    out = np.empty(n_rows(x), np.int32)
    for a in range(0, len(out), BLOCK_ROWS):
        xb = x[a:a + BLOCK_ROWS] if isinstance(x, np.ndarray) else decode(x, a, a + BLOCK_ROWS)
        out[a:a + BLOCK_ROWS] = (np.asarray(xb, dtype) @ minus_2ct + centre_sq).argmin(axis=1)
    return Nearest(out)


NEAREST = ChunkStep(nearest_step, from_scratch=True)    # reads only X: a lost chunk's part is recomputed


def _assign(store, centres, backend, n_threads):
    """The assignment pass: every row's nearest centre (n int32), chunks in parallel."""
    runner = make_backend(store, backend, n_threads)
    try:
        parts = runner.map(NEAREST, centres)
    finally:
        runner.close()
    return np.concatenate([p.centre for p in parts])


def _ids_dtype(store):
    ids = store.read_per_row("ids", np.array([0], np.int64))
    ids_dtype = np.dtype(np.int64) if ids is None else ids.dtype
    if ids_dtype.kind in "OUS":
        raise ParameterError(f"{store.path}: cluster order keeps ids of integer type only; "
                             f"this store's ids are {ids_dtype}")
    return ids_dtype


def _store_exists(out, kind):
    if isinstance(out, str):
        check_writable(out, store_kind_for(out, kind))
        return store_exists(out)
    return out.exists()


def _spill_dir(out):
    """Where the clusters are spilled: beside a local output (removing what killed runs
    left there); for an object-store URL, in a local temporary directory."""
    if isinstance(out, str):
        return Path(tempfile.mkdtemp(prefix="bigsearch-clusters-"))
    out.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_leftovers(out, tags=("clusters", "unordered"))
    spill = temp_sibling(out, "clusters")
    spill.mkdir()
    return spill


def _kept_attrs(attrs, display):
    """The source's attributes, but the encoding and format, which the writer sets, and
    ``display`` when its array is missing (the new store must not point to nothing)."""
    drop = (ENCODING_ATTR, FORMAT_ATTR) + (() if display else (DISPLAY_ATTR,))
    return {k: v for k, v in attrs.items() if k not in drop}


class DisplaySpill:
    """The display array (``records``: one JSON string per row; ``pixels``: n x h*w
    numbers) spilled by cluster with its rows and written back in the new order."""

    def __init__(self, store, name, tail, dtype):
        self.store, self.name, self.tail, self.dtype = store, name, tail, dtype

    @classmethod
    def of(cls, store):
        """The spill for ``store``'s display array, or None when it keeps none."""
        spec = store.attrs.get(DISPLAY_ATTR)
        spec = json.loads(spec) if isinstance(spec, str) else spec
        first = store.read_per_row(spec["array"], np.array([0], np.int64)) if spec else None
        if first is None:
            return None
        strings = spec["array"] != PIXELS_NAME
        return cls(store, spec["array"], first.shape[1:], None if strings else first.dtype)

    def read(self, a, b):
        return self.store.read_per_row(self.name, slice(a, b))

    def write(self, fh, values):
        if self.dtype is None:       # strings, one JSON string literal per line (any text survives)
            fh.write("".join(json.dumps(str(v)) + "\n" for v in values).encode())
        else:
            fh.write(np.ascontiguousarray(values, self.dtype).tobytes())

    def blocks(self, path, rows=None):
        """A cluster's spilled values, ``rows`` at a time: a cluster of text features can hold
        a tenth of the corpus (k-means on text is lopsided), too much to load at once."""
        rows = rows or DISPLAY_BLOCK_ROWS
        with open(path, "rb") as fh:
            if self.dtype is None:
                while lines := list(itertools.islice(fh, rows)):
                    yield np.array([json.loads(line) for line in lines], dtype=object)
                return
            width = int(np.prod(self.tail)) * self.dtype.itemsize
            while chunk := fh.read(rows * width):
                yield np.frombuffer(chunk, dtype=self.dtype).reshape(-1, *self.tail)

    def rows_array(self, writer):
        width = int(np.prod(self.tail)) * (8 if self.dtype is None else self.dtype.itemsize)
        rows = 4096 if self.dtype is None else max(1, (4 << 20) // max(1, width))
        return writer.add_rows_array(self.name, self.tail, str if self.dtype is None else self.dtype, rows)


def _spill(store, nearest, sizes, spill, ids_dtype, display, block, source_bytes, consume=False):
    """One pass in row order: each chunk's rows of cluster c (and their labels, ids and
    display values) written at cluster c's next free places in the spill files ``x``, ``y``
    and ``ids``, laid out cluster after cluster by blocks of ``block`` rows, last block
    first (``_spilled_at``); display values appended to ``c.d``. ``consume``: each chunk
    file of the source is removed once spilled, when the format keeps one per chunk.
    Returns the most disk the source (``source_bytes`` at first) and the spill took together."""
    has_y = store.read_per_row("y", np.array([0], np.int64)) is not None
    itemsizes = {"x": store.r * store.dtype.itemsize, "y": 1, "ids": ids_dtype.itemsize}
    cursor = np.concatenate([[0], np.cumsum(sizes)[:-1]])     # the next free row of each cluster
    n = int(sizes.sum())
    on_disk = peak = source_bytes
    with contextlib.ExitStack() as stack:
        files = {part: stack.enter_context(open(spill / part, "wb")) for part in itemsizes if has_y or part != "y"}
        shown_files = {}
        for j, (a, b) in enumerate(store.chunks):
            rows = slice(a, b)
            order = np.argsort(nearest[a:b], kind="stable")   # the chunk's rows, by cluster, in row order
            present, starts, counts = np.unique(nearest[a:b][order], return_index=True, return_counts=True)
            with store.chunk(j) as x:
                parts = {"x": np.asarray(x)[order], "ids": _ids(store, a, b, ids_dtype)[order]}
            if has_y:
                parts["y"] = store.read_per_row("y", rows)[order].astype(np.int8)
            shown = display.read(a, b)[order] if display else None
            for c, start, count in zip(present, starts, counts):
                for first, at, m in _spilled_at(int(cursor[c]), int(count), n, block):
                    for part, fh in files.items():
                        size = itemsizes[part]
                        piece = parts[part][start + first:start + first + m]
                        on_disk += os.pwrite(fh.fileno(), piece.tobytes(), at * size)
                if display:
                    if c not in shown_files:
                        shown_files[c] = stack.enter_context(open(spill / f"{c}.d", "wb"))
                    display.write(shown_files[c], shown[start:start + count])
                cursor[c] += count
            peak = max(peak, on_disk)
            if consume and store.chunk_file(j) is not None:
                on_disk -= _disk_bytes(store.chunk_file(j))
                remove(store.chunk_file(j))
    return peak


def _spilled_at(p, count, n, block):
    """Where output rows p .. p + count - 1 go in a spill file: (first of them, file row,
    rows) per block of ``block`` output rows they touch. The blocks are laid out last first
    (block b at n - its end), so the write, taking block 0 first, reads the file's tail and
    truncates it: spill and output never hold more than X and a block together."""
    first = 0
    while first < count:
        q = p + first
        b0 = q // block * block
        m = min(count - first, b0 + block - q)
        yield first, n - min(n, b0 + block) + (q - b0), m
        first += m


def _ids(store, a, b, ids_dtype):
    """The ids of rows a to b - 1: the stored ones, else the row numbers."""
    ids = store.read_per_row("ids", slice(a, b))
    return (np.arange(a, b) if ids is None else ids).astype(ids_dtype)


def _write_rows(r, dtype, chunk_rows):
    """Rows the write takes from the spill at a time: whole chunks, about WRITE_BYTES."""
    return max(1, WRITE_BYTES // (r * dtype.itemsize * chunk_rows)) * chunk_rows


def _write(spill, sizes, ids_dtype, out, display, summaries, n_threads, *, r, dtype, chunk_rows, kind, encoding,
           compressors, overwrite, attrs, before_publish):
    """The spill files, block by block (``_spilled_at``: each block is the files' tail,
    cut off once read), through the store writer; each chunk also to ``summaries``
    (StreamedSummaries), when given, on ``n_threads`` threads beside the writer. Returns
    the most disk the spill and the output took together (the display's spill files not
    counted)."""
    has_y = (spill / "y").exists()
    n = int(sizes.sum())
    block = _write_rows(r, dtype, chunk_rows)
    parts = {"x": (dtype, r), "ids": (np.dtype(ids_dtype), 1)} | ({"y": (np.dtype(np.int8), 1)} if has_y else {})

    def take(a, b):
        """Output rows a .. b - 1: read from the spill files' tails, which are then cut off."""
        got = {}
        for part, (dt, width) in parts.items():
            at = (n - b) * width * dt.itemsize
            got[part] = np.fromfile(spill / part, dt, (b - a) * width, offset=at).reshape(b - a, -1)
            os.truncate(spill / part, at)
        return got["x"], got["y"][:, 0] if has_y else None, got["ids"][:, 0]

    def summarize(rows):      # the block's chunks side by side: the writer mostly waits on the disk
        if summaries is not None:
            summaries.add(*(rows[c:c + chunk_rows] for c in range(0, len(rows), chunk_rows)), pool=steps)

    with StoreWriter(out, r, encoding=encoding, chunk_rows=chunk_rows, kind=kind, labels=has_y,
                     ids_dtype=ids_dtype, attrs=attrs, overwrite=overwrite, compressors=compressors) as w, \
            ThreadPoolExecutor(1) as beside, ThreadPoolExecutor(n_threads or os.cpu_count() or 1) as steps:
        w.before_publish = before_publish      # (object-store writers publish as they write: not there)
        summarized = beside.submit(lambda: None)
        peak = 0
        for a in range(0, n, block):
            rows, y, ids = take(a, min(n, a + block))
            summarized.result()              # one block summarized while the next is written: two in memory
            summarized = beside.submit(summarize, rows)
            w.append(rows, y, ids)
            written = 0 if isinstance(out, str) else _disk_bytes(w.tmp)     # (a URL: not on this disk)
            peak = max(peak, sum(_disk_bytes(spill / part) for part in parts) + written)
        summarized.result()
        if display:
            shown = display.rows_array(w)
            for c in np.flatnonzero(sizes):
                for values in display.blocks(spill / f"{c}.d"):
                    shown.append(values)
    return peak
