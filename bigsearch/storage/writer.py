"""Writing feature stores, block by block and atomically.

A store is written under a temporary sibling name and renamed into place only when
complete, so an interrupted or failed write never leaves something that looks like a
store, and an existing store is replaced only when ``overwrite=True``. The temporary
name carries the writer's host and process id, so a later write to the same path removes
what a killed writer left behind (and never what a live one is writing); every file of
the store is fsync'd before the rename (storage/atomic.py).
"""

import errno
import os
import re
from concurrent.futures import ThreadPoolExecutor
from os import PathLike
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import StoreError, StoreExistsError
from ..limits import file_size_limit
from .atomic import (
    fsync_tree,
    fsync_written,
    publish,
    publish_over,
    remove,
    remove_stale_leftovers,
    restore_interrupted_replace,
    temp_sibling,
)
from .encoding import (
    SCALED,
    binary_nonzeros,
    check_encoding,
    encode_rows,
    encoding_attrs,
    small_integers,
    stored_columns,
    stored_dtype,
)
from .format import FEATURE_DTYPES, FORMAT_ATTR, check_labels, default_chunk_rows
from .location import is_url, local_path
from .registry import is_feature_store, store_format, store_kind_for


class StoreWriter:
    """Append rows of X (and y, ids) in blocks; ``close()`` publishes the store.

    The format's own writer (``FeatureStore.writer``: ZarrWriter, HDF5Writer) creates
    the arrays and writes whole chunks; this class encodes, buffers, checks and publishes.

    Use it as a context manager: leaving the block with an exception removes the
    temporary store and leaves ``path`` untouched.
    """

    # The subclass that writes object-store URLs (remote_writer.py's ObjectStoreWriter,
    # imported with the package): it names itself by ``class W(StoreWriter, for_urls=True)``,
    # so this module needs no import of it (it imports this one).
    url_writer: "type[StoreWriter] | None" = None
    tmp: "Path | None" = None      # where a local store is written until it is published

    def __init_subclass__(cls, for_urls=False, **kwargs):
        super().__init_subclass__(**kwargs)
        if for_urls:
            StoreWriter.url_writer = cls

    def __new__(cls, path, *args, **kwargs):
        if cls is StoreWriter and is_url(path):   # s3://, gs://, az://: written in place, published last
            if StoreWriter.url_writer is None:
                raise StoreError(f"{path}: no writer for object-store URLs is loaded (import bigsearch.storage)")
            cls = StoreWriter.url_writer
        return super().__new__(cls)

    def __init__(self, path, n_features, *, dtype="float32", chunk_rows=None, kind=None,
                 labels=False, ids_dtype=None, attrs=None, overwrite=False, compressors=None,
                 encoding=None):
        self.path = self._location(path)
        self.kind = store_kind_for(self.path, kind)
        self.r = int(n_features)
        if encoding is None:
            if np.dtype(dtype) not in FEATURE_DTYPES:
                raise StoreError(f"X dtype {np.dtype(dtype)} is not supported; use float32 or float64")
            encoding = np.dtype(dtype).name
        self.encoding = check_encoding(encoding)
        self.dtype = stored_dtype(self.encoding)
        columns = stored_columns(self.encoding, self.r)
        self.chunk_rows = int(chunk_rows or default_chunk_rows(columns, self.dtype.itemsize))
        self.overwrite = overwrite
        target = self._prepare()
        self.binary_possible = True    # every row so far is 0/1 times one number (see encoding.py)
        self.nonzeros = 0              # their non-zero values (while binary_possible)
        self.int8_exact = True         # every value so far an integer within +-127 (int8 holds it)
        self.n = 0                 # rows written to disk
        self.rows_appended = 0     # rows given to append (some may still be pending)
        self._pending = []
        self._rows_arrays = []         # add_rows_array's, flushed at close
        self._buffers = [None, None]   # where _flush joins pending blocks, in turn (reused)
        self._behind = None            # the thread syncing written chunks to disk (_sync_behind)
        self._synced, self._synced_files = None, set()   # its last sync, and the files it synced
        self._turn = 0
        encoded = self.encoding not in ("float32", "float64")
        attrs = {FORMAT_ATTR: 2 if encoded else 1, **encoding_attrs(self.encoding, self.r), **(attrs or {})}
        try:
            self._backend = store_format(self.kind).writer(
                target, columns, self.dtype, self.chunk_rows, labels, ids_dtype, attrs, compressors,
                scaled=self.encoding in SCALED)
        except BaseException as e:
            if self.tmp is not None:
                remove(self.tmp)
            raise _translated(self.path, self.tmp, e) from None

    @staticmethod
    def _location(path):
        return Path(local_path(path))

    def _prepare(self):
        """Check the output and make the temporary sibling the backend writes to."""
        restore_interrupted_replace(self.path)   # an old copy a killed replace left is put back first
        if self.path.exists() and not self.overwrite:
            raise StoreExistsError(f"{self.path} already exists; pass overwrite=True to replace it")
        if self.overwrite and self.path.exists() and not is_feature_store(self.path):
            raise StoreExistsError(f"{self.path} is not a bigsearch store, so overwrite will not replace it "
                                   "(it replaces only a store); choose another output path")
        remove_stale_leftovers(self.path)
        self.tmp = temp_sibling(self.path, "partial")
        return self.tmp

    def append(self, X, y=None, ids=None):
        """Append rows; X is (k, r). Rows are encoded (a DataError names the first value
        the encoding cannot hold) and written in whole chunks as they fill. The writer may
        hold X (float rows are written as they are) until its chunk is written: do not
        change it after."""
        X = np.asarray(X)
        if X.ndim != 2 or X.shape[1] != self.r:
            raise StoreError(f"block of shape {X.shape} does not have {self.r} columns")
        if y is not None:
            y = check_labels(y, len(X), str(self.path))
        codes, scale = encode_rows(X, self.encoding, self.rows_appended)
        if self.encoding in ("float32", "float64"):   # float codes: checked without another copy
            if self.binary_possible:
                self._count_bits(codes)
            self.int8_exact = self.int8_exact and small_integers(codes)
        self._pending.append((codes, scale, y, ids))
        self.rows_appended += len(X)
        if sum(len(p[0]) for p in self._pending) >= self.chunk_rows:
            self._flush(final=False)

    def write_at(self, start, X, y=None, ids=None):
        """Write rows at positions start.. of a float store, in any order (a generator that
        groups rows, tools/make_store.py --order generated). The store grows to cover them;
        every row up to the largest must be written before ``close``. Not mixed with ``append``."""
        if self._pending or self.encoding not in ("float32", "float64"):
            raise StoreError("write_at writes float stores only, and is not mixed with append")
        X = np.asarray(X)
        if X.ndim != 2 or X.shape[1] != self.r:
            raise StoreError(f"block of shape {X.shape} does not have {self.r} columns")
        if y is not None:
            y = check_labels(y, len(X), str(self.path))
        if self.binary_possible:
            self._count_bits(X)
        self.int8_exact = self.int8_exact and small_integers(X)
        self._backend.write(int(start), X.astype(self.dtype, copy=False), None, y, ids)
        self.n = max(self.n, int(start) + len(X))
        self.rows_appended = self.n

    def _count_bits(self, X):
        count = binary_nonzeros(X)
        self.binary_possible = count is not None
        self.nonzeros += count or 0

    def bits_set(self):
        """The share of X's values that are non-zero, counted while every row was 0/1 times
        one number (the share of bits a binary store would set)."""
        return self.nonzeros / max(1, self.rows_appended * self.r)

    def _flush(self, final):
        if not self._pending:
            return
        columns = [None if self._pending[0][c] is None else np.concatenate([np.asarray(p[c]) for p in self._pending])
                   for c in (1, 2, 3)]
        codes = self._joined_codes()
        n_rows = len(codes)
        keep = n_rows if final else n_rows - n_rows % self.chunk_rows
        self._backend.write(self.n, codes[:keep], *(None if a is None else a[:keep] for a in columns))
        self.n += keep
        if not final:
            self._sync_behind()
        # the rows left over stay where they are (a view), until the next flush joins them
        self._pending = [] if keep == n_rows else [(codes[keep:], *(None if a is None else a[keep:]
                                                                   for a in columns))]

    def _sync_behind(self):
        """Send the chunks written so far to the disk beside the writing (one thread), unless
        the last such sync is still running: publishing then fsyncs clean files, instead of
        waiting for all of them at the end (0.6 s for 856 MB here)."""
        if self._behind is None:
            self._behind = ThreadPoolExecutor(1, thread_name_prefix="sync-behind")
        if self._synced is None or self._synced.done():
            self._synced = self._behind.submit(fsync_written, self.tmp, self._synced_files)

    def _stop_sync_behind(self):
        if self._behind is not None:
            self._behind.shutdown(wait=True)
            self._behind = None

    def _joined_codes(self):
        """The pending rows of X as one array: several blocks are joined in one of two buffers
        kept for the next chunks, in turn (a fresh chunk-sized array each time costs its pages'
        zeroing; the rows a flush leaves over are a view of the buffer it joined, which the
        next flush reads while joining into the other)."""
        parts = [np.asarray(p[0]) for p in self._pending]
        if len(parts) == 1:
            return parts[0]
        n_rows = sum(len(p) for p in parts)
        self._turn = 1 - self._turn
        if self._buffers[self._turn] is None or len(self._buffers[self._turn]) < n_rows:
            self._buffers[self._turn] = np.empty((n_rows, *parts[0].shape[1:]), parts[0].dtype)
        return np.concatenate(parts, out=self._buffers[self._turn][:n_rows])

    def set_attrs(self, **attrs):
        self._backend.set_attrs(attrs)

    def add_rows_array(self, name, tail_shape, dtype, chunk_rows):
        """Another array with one entry per row of X (``str`` for strings), filled by
        its own ``append`` in row order; published with the store (ingest/records.py)."""
        rows = _RowsArray(self._backend.create_rows(name, tuple(tail_shape), dtype, int(chunk_rows)), int(chunk_rows))
        self._rows_arrays.append(rows)
        return rows

    before_publish = None   # callable(temporary path): runs on the complete store before it is published

    def close(self):
        """Write what is pending and publish the finished store at ``path``."""
        try:
            self._flush(final=True)
            for rows in self._rows_arrays:
                rows.flush()
            self._stop_sync_behind()
            if self.n == 0:
                self.abort()
                raise StoreError(f"{self.path}: no rows were written")
            self._backend.close()
        except BaseException as e:      # anything: the temporary store goes
            self.abort()
            raise _translated(self.path, self.tmp, e) from None
        self._publish_written()
        return self.path

    def _publish_written(self):
        """Move the complete temporary store to ``path``."""
        if self.before_publish is not None:
            try:
                self.before_publish(self.tmp)
            except BaseException as e:
                self.abort()
                raise _translated(self.path, self.tmp, e) from None
        fsync_tree(self.tmp)
        if self.path.exists():
            if not self.overwrite:
                self.abort()
                raise StoreExistsError(f"{self.path} appeared while writing; not overwriting it")
            publish_over(self.tmp, self.path)
        else:
            publish(self.tmp, self.path)

    def abort(self):
        self._stop_sync_behind()
        try:
            self._backend.close()
        except Exception:
            pass
        remove(self.tmp)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.close()
        else:
            self.abort()
            failure = _translated(self.path, self.tmp, exc)
            if failure is not exc:
                raise failure from None


# What a failed write of the store means, and what to do about it.
WRITE_FAILURES = {errno.EFBIG: "the file would be larger than the file system allows: write to another file system",
                  errno.ENOSPC: "the disk is full: free space, or write to another disk",
                  errno.EDQUOT: "the disk quota is exhausted: free space, or write to another disk",
                  errno.EIO: "the device reported an I/O error: check the disk, or write to another disk"}
PAST_THE_LIMIT = ("the file would pass the file size limit (ulimit -f {blocks}: {limit:,} bytes) or the largest file "
                  "the file system allows: raise the limit (ulimit -f unlimited), or write to another file system")
HDF5_ERRNO = re.compile(r"errno = (\d+)")


def write_failure(path, tmp, error):
    """A StoreError naming ``path`` and the fix, for an error of writing the store (its
    temporary ``tmp``): EFBIG, ENOSPC, EDQUOT or EIO, from the OS (Zarr) or in HDF5's
    message (h5py raises RuntimeError or OSError with the C library's errno in its text);
    None for any other error. An EIO names our file; the others cannot come from reading."""
    code = getattr(error, "errno", None)
    if code not in WRITE_FAILURES:
        m = HDF5_ERRNO.search(str(error))
        code = int(m.group(1)) if m else None
    if code not in WRITE_FAILURES:
        return None
    if code == errno.EIO and (tmp is None or Path(tmp).name not in f"{getattr(error, 'filename', '')} {error}"):
        return None
    limit = file_size_limit() if code == errno.EFBIG else None
    why = WRITE_FAILURES[code] if limit is None else PAST_THE_LIMIT.format(blocks=limit // 1024, limit=limit)
    return StoreError(f"{path}: writing the store failed ({os.strerror(code)}); {why}. Nothing was written")


def _translated(path, tmp, error):
    """What to raise for ``error``, raised while writing the store: its ``write_failure``
    for a failed write, else the error itself."""
    if isinstance(error, (OSError, RuntimeError)):
        return write_failure(path, tmp, error) or error
    return error


class _RowsArray:
    """An array of one entry per row of X, appended in row order and written a whole chunk
    at a time (the rest at close): a write ending inside a chunk has the next one read it
    back, decode and re-encode it (the records' JSON: zstd and VLenUTF8 twice a block)."""

    def __init__(self, array, chunk_rows):
        self.array, self.chunk_rows, self.n = array, chunk_rows, 0
        self._pending = []

    def append(self, values):
        self._pending.append(values)
        if self._held() >= self.chunk_rows:
            self._write(self._held() // self.chunk_rows * self.chunk_rows)

    def flush(self):
        if self._held():
            self._write(self._held())

    def _held(self):
        """Rows appended and not yet written."""
        return sum(len(v) for v in self._pending)

    def _write(self, rows):
        values = self._pending[0] if len(self._pending) == 1 else np.concatenate(self._pending)
        self._pending = [values[rows:]] if rows < len(values) else []
        stop = self.n + rows
        self.array.resize((stop, *self.array.shape[1:]))
        self.array[self.n:stop] = values[:rows]
        self.n = stop


def create_store(path: str | PathLike[str], X: Any, y: Any = None, ids: Any = None, *, dtype: Any = None,
                 chunk_rows: int | None = None, kind: str | None = None, attrs: dict[str, Any] | None = None,
                 overwrite: bool = False, compressors: Any = None, encoding: str | None = None) -> Path:
    """Write arrays held in memory as a feature store; returns the path.

    ``encoding`` (float32, float64, float16, int8, binary; docs/store-format.md)
    overrides ``dtype``."""
    X = np.asarray(X)
    if X.ndim != 2:
        raise StoreError(f"X must be 2-D (n x r), got shape {X.shape}")
    dtype = dtype or (X.dtype if X.dtype in FEATURE_DTYPES else "float32")
    with StoreWriter(path, X.shape[1], dtype=dtype, chunk_rows=chunk_rows, kind=kind,
                     labels=y is not None, ids_dtype=None if ids is None else np.asarray(ids).dtype,
                     attrs=attrs, overwrite=overwrite, compressors=compressors, encoding=encoding) as w:
        step = w.chunk_rows * max(1, (1 << 26) // max(1, w.chunk_rows * X.shape[1] * 8))
        for a in range(0, len(X), step):
            w.append(X[a:a + step], None if y is None else np.asarray(y)[a:a + step],
                     None if ids is None else np.asarray(ids)[a:a + step])
    return Path(path)
