"""Rewrite a feature store with its rows in cluster order (for pruned queries).

Pruned LAS queries (engine/pruning/las.py) bound each block of consecutive rows by its
centroid and spread, so they read least when neighbouring rows are alike. This module
writes a copy of a store whose rows are grouped by k-means cluster:

1. k-means over the store by streaming passes (engine/core/kmeans.py, the AGR baseline's
   k-means: k-means++ seeds from a sample, then one pass per Lloyd iteration);
2. one pass assigns every row to its nearest centre and appends it to that cluster's
   spill file (a temporary directory beside the output), with its label, its id and
   what a person sees of it (the ``records`` or ``pixels`` array of ``display``,
   ingest/records.py);
3. the clusters are written one after another through the store writer (atomic: the
   output appears only when complete);
4. before it appears, the pruning block summaries of the new order are computed and
   stored with it (engine/pruning/summaries.py: three more passes), so pruned searches on it
   skip that pass (not for object-store URLs, which publish as they write).

X is never held whole: memory is one chunk plus the largest cluster. The output keeps
``y`` and the display array in the new row order, and ``ids`` holds each row's original
id (the source's ``ids`` when it has them, else its original row number), so answers
still name the original points. Cost: the k-means passes, then X read twice and written
twice (docs/performance.md).
"""

import contextlib
import json
import tempfile
import time
from pathlib import Path

import numpy as np

from ..backends import make_backend
from ..engine.core.kmeans import kmeans, squared_distances
from ..engine.pruning.summaries import write_block_summaries
from ..errors import ParameterError, StoreExistsError
from ..storage import StoreWriter, is_url, open_store, store_kind_for, store_location
from ..storage.atomic import remove, remove_stale_leftovers, temp_sibling
from ..storage.encoding import ENCODING_ATTR
from ..storage.format import DISPLAY_ATTR, FORMAT_ATTR, PIXELS_NAME
from ..storage.remote import store_exists
from ..storage.remote_options import check_writable

ROWS_PER_CLUSTER = 8192        # the default k: about this many rows per cluster (at least 16)
MAX_CLUSTERS = 256


def default_clusters(n):
    return int(min(MAX_CLUSTERS, n, max(16, n // ROWS_PER_CLUSTER)))


def cluster_order(source, out, *, clusters=None, iterations=5, seed=0, chunk_rows=None, kind=None,
                  encoding=None, compressors=None, overwrite=False, n_threads=None):
    """Write ``source``'s rows to a new store ``out`` grouped by k-means cluster.

    The source holds float32 or float64 X; the output has its dtype, or ``encoding``
    (storage/encoding.py: the rows are encoded as they are written).

    ``clusters``: k (default about n / 8,192, at least 16, at most 256). Returns a summary dict:
    the clusters, their sizes, and the seconds spent clustering and rewriting.
    """
    t0 = time.perf_counter()
    out = out if is_url(str(out)) else Path(out)      # a URL is never a local path (s3:// is not ./s3:)
    if _store_exists(out, kind) and not overwrite:
        raise StoreExistsError(f"{out} already exists; pass overwrite=True to replace it")
    if store_location(out, resolve=True) == store_location(getattr(source, "path", source), resolve=True):
        raise ParameterError("cluster order writes a new store: give an output path other than the source")
    with open_store(source) as store:
        if store.encoding not in ("float32", "float64"):
            raise ParameterError(f"{store.path} is {store.encoding}-encoded; cluster order rewrites float stores: "
                                 "ingest again with cluster_order (and output.encoding), which orders before encoding")
        k = default_clusters(store.n) if clusters is None else int(clusters)
        if not 1 <= k <= store.n:
            raise ParameterError(f"clusters must be between 1 and n = {store.n}, got {clusters}")
        backend = make_backend(store, "local", n_threads)
        try:
            centres = kmeans(store, k, seed=seed, iterations=iterations, mapper=backend.map)
        finally:
            backend.close()
        t_kmeans = time.perf_counter() - t0
        spill = _spill_dir(out)
        written = {}
        try:
            display = DisplaySpill.of(store)
            sizes, ids_dtype = _spill(store, centres, spill, display)
            _write(store, spill, sizes, ids_dtype, out, display, chunk_rows=chunk_rows or store.chunk_rows,
                   kind=store_kind_for(out, kind), encoding=encoding or store.encoding, compressors=compressors,
                   overwrite=overwrite, attrs={**_kept_attrs(store.attrs, display), "cluster_order": {
                       "clusters": k, "iterations": iterations, "seed": seed, "source": str(store.path)}},
                   summaries=lambda tmp: written.update(block_summaries=write_block_summaries(
                       tmp, n_threads=n_threads, in_place=True)))
        finally:
            remove(spill)
    return {"out": str(out), "clusters": k, "sizes": sizes.tolist(), "kmeans_seconds": t_kmeans,
            "seconds": time.perf_counter() - t0, **written}


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
        return self.store.read_per_row(self.name, np.arange(a, b, dtype=np.int64))

    def write(self, fh, values):
        if self.dtype is None:       # strings, one JSON string literal per line (any text survives)
            fh.write("".join(json.dumps(str(v)) + "\n" for v in values).encode())
        else:
            fh.write(np.ascontiguousarray(values, self.dtype).tobytes())

    def load(self, path):
        if self.dtype is None:
            lines = path.read_text().splitlines()
            return np.array([json.loads(line) for line in lines], dtype=object)
        return np.fromfile(path, dtype=self.dtype).reshape(-1, *self.tail)

    def rows_array(self, writer):
        width = int(np.prod(self.tail)) * (8 if self.dtype is None else self.dtype.itemsize)
        rows = 4096 if self.dtype is None else max(1, (4 << 20) // max(1, width))
        return writer.add_rows_array(self.name, self.tail, str if self.dtype is None else self.dtype, rows)


def _spill(store, centres, spill, display):
    """One pass: each row (and its label, id and display value) appended to its nearest
    centre's files."""
    k = len(centres)
    y = store.labels()
    ids = store.ids()
    ids_dtype = np.dtype(np.int64) if ids is None else ids.dtype
    if ids_dtype.kind in "OUS":
        raise ParameterError(f"{store.path}: cluster order keeps ids of integer type only; "
                             f"this store's ids are {ids_dtype}")
    centre_sq = (centres * centres).sum(axis=1)
    sizes = np.zeros(k, np.int64)
    with contextlib.ExitStack() as stack:
        parts = ("x", "y", "ids") + (("d",) if display else ())
        files = [[stack.enter_context(open(spill / f"{c}.{part}", "wb")) for part in parts] for c in range(k)]
        for j, (a, b) in enumerate(store.chunks):
            with store.chunk(j) as x:
                for a0 in range(0, b - a, 4096):
                    xb = np.asarray(x[a0:a0 + 4096])
                    nearest = squared_distances(xb.astype(np.float64), centres, centre_sq).argmin(axis=1)
                    rows = np.arange(a + a0, a + a0 + len(xb))
                    shown = display.read(rows[0], rows[-1] + 1) if display else None
                    for c in np.unique(nearest):
                        pick = nearest == c
                        files[c][0].write(np.ascontiguousarray(xb[pick]).tobytes())
                        if y is not None:
                            files[c][1].write(y[rows[pick]].tobytes())
                        files[c][2].write((rows[pick] if ids is None else ids[rows[pick]]).astype(ids_dtype).tobytes())
                        if display:
                            display.write(files[c][3], shown[pick])
                        sizes[c] += pick.sum()
    return sizes, ids_dtype


def _write(store, spill, sizes, ids_dtype, out, display, *, chunk_rows, kind, encoding, compressors, overwrite,
           attrs, summaries):
    has_y = store.labels() is not None
    with StoreWriter(out, store.r, encoding=encoding, chunk_rows=chunk_rows, kind=kind, labels=has_y,
                     ids_dtype=ids_dtype, attrs=attrs, overwrite=overwrite, compressors=compressors) as w:
        w.before_publish = summaries      # (object-store writers publish as they write: not there)
        shown = display.rows_array(w) if display else None
        for c in np.flatnonzero(sizes):
            X = np.fromfile(spill / f"{c}.x", dtype=store.dtype).reshape(-1, store.r)
            y = np.fromfile(spill / f"{c}.y", dtype=np.int8) if has_y else None
            w.append(X, y, np.fromfile(spill / f"{c}.ids", dtype=ids_dtype))
            if display:
                shown.append(display.load(spill / f"{c}.d"))
