"""HDF5 stores (one file holding X, optionally y and ids).

Fast path: an uncompressed dataset (contiguous, or chunked along rows) has plain file
offsets, so its rows are memory-mapped directly. Contiguous datasets are read in
blocks of ``chunk_rows`` rows chosen by us. Filters, big-endian data or chunks that
were never written take the slow path (h5py ``read_direct`` into a reused buffer).
"""

import contextlib
import errno
import json
import math
import os
from pathlib import Path

import numpy as np

from ..errors import StoreError, StoreNotFoundError
from ..limits import file_size_limit
from .base import FeatureStore, advise_willneed, map_file_array, release_nothing
from .encoding import SCALE_NAME
from .format import (
    HDF5_SIGNATURE,
    IDS_NAME,
    LABEL_CHUNK,
    OPTIONAL_NAMES,
    X_NAME,
    Y_NAME,
    check_features,
    default_chunk_rows,
    missing_dataset,
)

HDF5_SUFFIXES = (".h5", ".hdf5", ".hdf", ".he5")


# Under a file size limit (ulimit -f) HDF5 must never be refused a write: a write that
# fails inside the library cannot be recovered from. Writing variable-length strings (ids,
# records), it frees pointers it never allocated and crashes at once (H5T__conv_vlen, HDF5
# 2.0), before the error reaches Python; any other failed write leaves dirty cache entries
# that it retries, and crashes on, at close (h5py #914, #2160). So ignoring SIGXFSZ and
# handling EFBIG cannot be enough; instead each call is checked before HDF5 sees it: the
# space HDF5 has allocated (``get_filesize``: its end of file, every later write lands
# below it) plus the most the call can allocate (``_Room``) must fit the limit, or the
# write stops with EFBIG while HDF5 is still whole, and closes normally. With the chunk
# cache off, a call allocates all it will ever write before it returns (nothing waits for
# the close), so the check needs no guess about what the caches hold.
class HDF5Writer:
    """Writes an HDF5 file (see StoreWriter)."""

    def __init__(self, path, r, dtype, chunk_rows, labels, ids_dtype, attrs, compressors, scaled=False):
        import h5py
        self.path = path
        self.room = _Room(file_size_limit())
        self.room.check(path, 0, _Room.CALL)            # the file's first block, before it exists
        self.file = h5py.File(path, "w", **self.room.file_options)
        self.fd = self.file.id.get_vfd_handle()     # the sec2 driver's file descriptor
        self.discarded = False
        try:
            self.set_attrs(attrs)
            self._check_room(0)
            kw = {} if compressors is None else {"compression": compressors}
            self.x = self.file.create_dataset(X_NAME, shape=(0, r), maxshape=(None, r), chunks=(chunk_rows, r),
                                              dtype=dtype, **kw)
            self.scale = self.file.create_dataset(SCALE_NAME, shape=(0,), maxshape=(None,), chunks=(chunk_rows,),
                                                  dtype="float32", **kw) if scaled else None
            self.y = self.file.create_dataset(Y_NAME, shape=(0,), maxshape=(None,), chunks=(LABEL_CHUNK,),
                                              dtype="int8", fillvalue=-1) if labels else None
            self.ids = None
            if ids_dtype is not None:
                dt = h5py.string_dtype() if np.dtype(ids_dtype).kind in "OUS" else np.dtype(ids_dtype)
                self.ids = self.file.create_dataset(IDS_NAME, shape=(0,), maxshape=(None,), chunks=(LABEL_CHUNK,),
                                                    dtype=dt)
        except BaseException:
            self.close()        # StoreWriter removes the file
            raise

    def write(self, start, X, scale, y, ids):
        stop = start + len(X)
        columns = [(arr, values) for arr, values in ((self.x, X), (self.scale, scale), (self.y, y), (self.ids, ids))
                   if arr is not None]
        if any(values is None for _, values in columns):
            raise StoreError("every block must carry the same optional columns (y, ids)")
        self._check_room(sum(self.room.rows(arr, start, stop, values) for arr, values in columns))
        with self._guard():
            for arr, values in columns:
                if stop > arr.shape[0]:     # grow only: StoreWriter.write_at fills regions in any order
                    arr.resize(stop, axis=0)
                arr[start:stop] = values

    def create_rows(self, name, tail, dtype, chunk_rows):
        import h5py
        dt = h5py.string_dtype() if dtype is str else np.dtype(dtype)
        self._check_room(0)
        with self._guard():
            rows = self.file.create_dataset(name, shape=(0, *tail), maxshape=(None, *tail),
                                            chunks=(chunk_rows, *tail), dtype=dt)
        return _GuardedRows(rows, self)

    def set_attrs(self, attrs):
        values = {k: v if isinstance(v, (int, float)) and not isinstance(v, bool) else json.dumps(v)
                  for k, v in attrs.items()}
        self._check_room(self.room.attrs(values))
        with self._guard():
            for k, v in values.items():
                self.file.attrs[k] = v

    def _check_room(self, need):
        """Stop with EFBIG, before HDF5 writes, when the call could pass the file size limit."""
        if self.room.limit is not None and not self.discarded:
            self.room.check(self.path, self.file.id.get_filesize(), need + _Room.CALL)

    @contextlib.contextmanager
    def _guard(self):
        """A write that fails (EFBIG, ENOSPC, EIO) leaves HDF5 holding unwritten data that
        any later call (a flush, a close, the library's own cleanup at exit) tries to write
        again, and crashes on (SIGSEGV). So the file's descriptor is pointed at /dev/null
        at once: the rest "succeeds" into nothing, and StoreWriter removes the file."""
        try:
            yield
        except (OSError, RuntimeError):
            self._discard()
            raise

    def _discard(self):
        if self.discarded:
            return
        self.discarded = True
        null = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(null, self.fd)
        finally:
            os.close(null)

    def close(self):
        if not self.file.id.valid:
            return
        if not self.discarded:
            with self._guard():
                self.file.flush()
        self.file.close()


class _GuardedRows:
    """A per-row dataset whose writes are checked and guarded as the writer's own (see
    _check_room, _guard)."""

    def __init__(self, dataset, writer):
        self.dataset, self.writer = dataset, writer

    @property
    def shape(self):
        return self.dataset.shape

    def resize(self, shape):
        with self.writer._guard():
            self.dataset.resize(shape)

    def __setitem__(self, rows, values):
        start, stop, _ = rows.indices(self.dataset.shape[0])
        self.writer._check_room(self.writer.room.rows(self.dataset, start, stop, values))
        with self.writer._guard():
            self.dataset[rows] = values


class _Room:
    """The most file space an HDF5 call can allocate, and the check of it against the file
    size limit (see the note above HDF5Writer). The bounds are generous where HDF5's own
    sizes are small and exact where they are large (a chunk is its bytes), so a store is
    refused a little before it would reach the limit: 16 KiB a call, 64 KiB more for each
    chunk of strings, 0.2% of compressed chunks; tests/test_file_size_limit.py checks them
    against the space HDF5 allocates."""

    CALL = 16 << 10             # metadata any call may allocate: chunk index nodes (a v1 B-tree
                                # node is 2.6 KiB), object header continuations, and the 2 KiB
                                # blocks the metadata and small-data aggregators take at a time
    PER_CHUNK = 256             # index entries per chunk written (at least 32 to a node)
    HEAP_OBJECT = 16            # a variable-length value's header in a global heap collection
    HEAP_COLLECTION = 64 << 10  # the largest collection HDF5 makes for small values (H5HG_MAXSIZE)

    def __init__(self, limit):
        self.limit = limit
        self.file_options = {} if limit is None else {"rdcc_nbytes": 0}   # no chunk cache
        self.ends = {}      # per dataset, the chunks at the ends of the rows written so far (they exist)

    def check(self, path, allocated, need):
        if self.limit is not None and allocated + need > self.limit:
            raise OSError(errno.EFBIG, os.strerror(errno.EFBIG), str(path))

    def rows(self, dataset, start, stop, values):
        """Bytes that writing ``values`` at rows start..stop-1 of ``dataset`` can allocate."""
        if self.limit is None or stop <= start:
            return 0
        import h5py
        vlen = h5py.check_vlen_dtype(dataset.dtype) is not None   # on disk: a 16-byte reference to the heap
        rows = dataset.chunks[0]
        chunk = math.prod(dataset.chunks) * (self.HEAP_OBJECT if vlen else dataset.dtype.itemsize)
        first, last = start // rows, (stop - 1) // rows
        chunks = last - first + 1
        if dataset.id.get_create_plist().get_nfilters():
            chunk += chunk // 512 + 1024    # deflate may add 0.1% and 12 bytes (lzf stores the chunk raw)
        else:       # a chunk that exists is written again in place: y's and ids' chunks hold many blocks
            ends = self.ends.setdefault(dataset.name, set())
            chunks -= len(ends & {first, last})
            ends.update((first, last))
        need = chunks * (chunk + self.PER_CHUNK)
        if vlen:
            need += self.heap(np.asarray(values, dtype=object).ravel(), chunks)
        return need

    def heap(self, values, chunks):
        """Bytes the global heap can take for these variable-length values. A collection
        grows (doubling, up to HEAP_COLLECTION) while it ends the file, and is left for a
        new one only when a value does not fit what it has left: each full one leaves less
        than the largest value unused (and never more than it holds); one left behind when
        a chunk is allocated after it, and the last one, may be nearly empty."""
        sizes = [-(-len(v if isinstance(v, bytes) else str(v).encode()) // 8) * 8 + self.HEAP_OBJECT for v in values]
        held, largest = sum(sizes), max(sizes, default=0)
        full = -(-held // max(largest, self.HEAP_COLLECTION - largest))
        return held + min(held, full * (largest + self.HEAP_OBJECT)) + (chunks + 1) * self.HEAP_COLLECTION

    def attrs(self, values):
        """Bytes that setting these attributes can allocate (in the object header, or a
        continuation of it: each as large as its name and value, twice for the old copy)."""
        if self.limit is None:
            return 0
        return sum(2 * (len(k.encode()) + (len(v.encode()) if isinstance(v, str) else 8) + 64)
                   for k, v in values.items())


class HDF5Store(FeatureStore):
    kind = "hdf5"
    description = "an HDF5 file"
    label = "HDF5"
    suffixes = HDF5_SUFFIXES
    codecs = ("none", "gzip", "lzf")
    writer = HDF5Writer

    @classmethod
    def recognizes(cls, path, head):
        return head == HDF5_SIGNATURE

    @classmethod
    def replaceable(cls, path, head):
        """An HDF5 file with a dataset X."""
        if head != HDF5_SIGNATURE:
            return False
        import h5py
        try:
            with h5py.File(path, "r") as f:
                return X_NAME in f
        except OSError:
            return False

    @classmethod
    def open(cls, path, options):
        return cls(path, **options)

    @classmethod
    def _compressor(cls, codec):
        return codec

    def __init__(self, path, chunk_rows=None, dataset=None):
        import h5py
        path = Path(path)
        self.dataset = name = dataset or X_NAME        # the dataset holding X (--dataset)
        if not path.exists():
            raise StoreNotFoundError(f"no HDF5 file at {path}")
        try:
            fh = h5py.File(path, "r")
        except OSError as e:
            raise StoreError(f"{path} is not a readable HDF5 file: {e}") from e
        if name not in fh or not isinstance(fh[name], h5py.Dataset):
            found = [k for k, v in fh.items() if isinstance(v, h5py.Dataset) and len(v.shape) == 2]
            fh.close()
            raise StoreError(missing_dataset(path, "the HDF5 file", "dataset", name, found))
        x = fh[name]
        try:
            rows = self._row_block(x, path, chunk_rows)
            check_features(x.shape, x.dtype, rows, str(path))
        except StoreError:
            fh.close()
            raise
        attrs = {k: attribute_value(v) for k, v in fh.attrs.items()}
        super().__init__(path, x.shape[0], x.shape[1], x.dtype.newbyteorder("="), rows, attrs)
        self._file, self._x = fh, x
        self._requested_rows = chunk_rows
        self._offsets = self._raw_offsets(x)
        self.fast_path = self._offsets is not None
        self._file_bytes = path.stat().st_size

    @staticmethod
    def _row_block(x, path, chunk_rows):
        if x.chunks is None:  # contiguous: any block of rows is contiguous in the file
            if chunk_rows is not None:
                return int(chunk_rows)
            r = x.shape[1] if len(x.shape) == 2 else 1
            return default_chunk_rows(r, x.dtype.itemsize)
        if len(x.shape) == 2 and x.chunks[1] != x.shape[1]:
            raise StoreError(
                f"{path}: X is chunked along columns (chunks {x.chunks} for shape {x.shape}); "
                f"bigsearch reads whole rows, so rewrite X with chunks=(rows, {x.shape[1]}), "
                f"e.g. with `bigsearch ingest {path} OUT --format hdf5`"
            )
        return x.chunks[0]

    def _raw_offsets(self, x):
        """File offset of each of our chunks when they can be mapped raw, else None."""
        reasons = []
        if x.id.get_create_plist().get_nfilters():
            reasons.append(f"filters ({x.compression or 'other'})")
        if x.dtype.byteorder == ">":
            reasons.append("not little-endian")
        if x.is_virtual or x.external:
            reasons.append("virtual or external storage")
        if reasons:
            self.slow_reason = "; ".join(reasons)
            return None
        row_bytes = self.columns * self.dtype.itemsize
        if x.chunks is None:
            base = x.id.get_offset()
            if base is None:
                self.slow_reason = "X was never written"
                return None
            return [base + a * row_bytes for a, _ in self.chunks]
        offsets = []
        for a, _ in self.chunks:
            info = x.id.get_chunk_info_by_coord((a, 0))
            offsets.append(info.byte_offset)  # None: chunk never written (fill value)
        return offsets

    def _map_chunk(self, j, huge=False):
        a, b = self.chunks[j]
        offset = self._offsets[j]
        if offset is None:
            out = np.empty((b - a, self.columns), self.dtype)
            self._decode_chunk(j, out)
            return out, release_nothing
        end = offset + (b - a) * self.columns * self.dtype.itemsize
        if end > self._file_bytes:     # mapping past the end would kill the process (SIGBUS)
            raise StoreError(f"{self.path}: rows {a}..{b - 1} of X lie at bytes up to {end:,}, past the end of "
                             f"the file ({self._file_bytes:,} bytes): the file is truncated; write it again")
        return map_file_array(self.path, offset, self.dtype, (b - a, self.columns), huge=huge)

    def _decode_chunk(self, j, out):
        a, b = self.chunks[j]
        try:
            self._x.read_direct(out, np.s_[a:b], np.s_[0:b - a])
        except (OSError, ValueError, RuntimeError) as e:
            raise StoreError(f"{self.path}: rows {a}..{b - 1} of X cannot be read ({e}); the file is "
                             "damaged, write it again") from e

    def _advise_willneed(self, j):
        if self._offsets is not None and self._offsets[j] is not None:
            a, b = self.chunks[j]
            advise_willneed(self.path, self._offsets[j], (b - a) * self.columns * self.dtype.itemsize)

    def _read_scale(self):
        return self._file[SCALE_NAME][()] if SCALE_NAME in self._file else None

    def _read_optional(self, name, rows=None):
        if name not in OPTIONAL_NAMES or name not in self._file or name == self.dataset:
            return None
        dataset = self._file[name]
        # h5py's fancy indexing wants increasing indices, and at least one
        if rows is None:
            values = dataset[()]
        else:
            values = dataset[rows] if isinstance(rows, slice) or len(rows) else dataset[0:0]
        if values.dtype.kind in "OS":  # h5py strings arrive as bytes
            values = np.array([v.decode() if isinstance(v, bytes) else v for v in values], dtype=object)
        return values

    def _read_group(self, name, select=None):
        import h5py
        group = self._file.get(name)
        if not isinstance(group, h5py.Group):
            return None
        try:
            datasets = {k: d for k, d in group.items() if isinstance(d, h5py.Dataset)
                        and (select is None or k in select)}
            return ({k: attribute_value(v) for k, v in group.attrs.items()},
                    {k: d[()] if select is None or select[k] is None else d[select[k]] for k, d in datasets.items()})
        except (OSError, ValueError, RuntimeError) as e:
            raise StoreError(f"{self.path}: the group {name} cannot be read ({e})") from e

    @classmethod
    def write_group(cls, path, name, arrays, attrs):
        import h5py
        room = _Room(file_size_limit())         # checked first, as HDF5Writer's writes are
        values = {k: v if isinstance(v, (int, float)) and not isinstance(v, bool) else json.dumps(v)
                  for k, v in attrs.items()}
        with h5py.File(path, "a", **room.file_options) as f:
            room.check(path, f.id.get_filesize(), (len(arrays) + 2) * _Room.CALL + room.attrs(values)
                       + sum(np.asarray(a).nbytes for a in arrays.values()))
            if name in f:
                del f[name]
            group = f.create_group(name)
            for key, array in arrays.items():
                group.create_dataset(key, data=array)
            for k, v in values.items():        # last: a group without them is one a crash cut short
                group.attrs[k] = v

    def reopen_options(self):
        return {"chunk_rows": self._requested_rows, **({"dataset": self.dataset} if self.dataset != X_NAME else {})}

    def codec(self):
        x = self._x
        if not x.compression:
            return "none"
        return f"{x.compression}-{x.compression_opts}" if x.compression_opts is not None else x.compression

    def close(self):
        super().close()
        self._file.close()


def attribute_value(value):
    """An HDF5 (or Zarr) attribute as a JSON-able Python value (dicts and lists are
    stored as JSON strings in HDF5)."""
    if isinstance(value, bytes):
        value = value.decode()
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return value
