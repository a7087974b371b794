"""HDF5 stores (one file holding X, optionally y and ids).

Fast path: an uncompressed dataset (contiguous, or chunked along rows) has plain file
offsets, so its rows are memory-mapped directly. Contiguous datasets are read in
blocks of ``chunk_rows`` rows chosen by us. Filters, big-endian data or chunks that
were never written take the slow path (h5py ``read_direct`` into a reused buffer).
"""

import contextlib
import json
import os
from pathlib import Path

import numpy as np

from ..errors import StoreError, StoreNotFoundError
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


class HDF5Writer:
    """Writes an HDF5 file (see StoreWriter)."""

    def __init__(self, path, r, dtype, chunk_rows, labels, ids_dtype, attrs, compressors, scaled=False):
        import h5py
        self.file = h5py.File(path, "w")
        self.fd = self.file.id.get_vfd_handle()     # the sec2 driver's file descriptor
        self.discarded = False
        self.set_attrs(attrs)
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

    def write(self, start, X, scale, y, ids):
        with self._guard():
            stop = start + len(X)
            for arr, values in ((self.x, X), (self.scale, scale), (self.y, y), (self.ids, ids)):
                if arr is None:
                    continue
                if values is None:
                    raise StoreError("every block must carry the same optional columns (y, ids)")
                if stop > arr.shape[0]:     # grow only: StoreWriter.write_at fills regions in any order
                    arr.resize(stop, axis=0)
                arr[start:stop] = values

    def create_rows(self, name, tail, dtype, chunk_rows):
        import h5py
        dt = h5py.string_dtype() if dtype is str else np.dtype(dtype)
        with self._guard():
            rows = self.file.create_dataset(name, shape=(0, *tail), maxshape=(None, *tail),
                                            chunks=(chunk_rows, *tail), dtype=dt)
        return _GuardedRows(rows, self._guard)

    def set_attrs(self, attrs):
        with self._guard():
            for k, v in attrs.items():
                self.file.attrs[k] = v if isinstance(v, (int, float)) and not isinstance(v, bool) else json.dumps(v)

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
    """A per-row dataset whose failed writes are guarded as the writer's own (see _guard)."""

    def __init__(self, dataset, guard):
        self.dataset, self.guard = dataset, guard

    @property
    def shape(self):
        return self.dataset.shape

    def resize(self, shape):
        with self.guard():
            self.dataset.resize(shape)

    def __setitem__(self, rows, values):
        with self.guard():
            self.dataset[rows] = values


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
        with h5py.File(path, "a") as f:
            if name in f:
                del f[name]
            group = f.create_group(name)
            for key, values in arrays.items():
                group.create_dataset(key, data=values)
            for k, v in attrs.items():        # last: a group without them is one a crash cut short
                group.attrs[k] = v if isinstance(v, (int, float)) and not isinstance(v, bool) else json.dumps(v)

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
