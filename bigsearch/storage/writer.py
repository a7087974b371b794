"""Writing feature stores, block by block and atomically.

A store is written under a temporary sibling name and renamed into place only when
complete, so an interrupted or failed write never leaves something that looks like a
store, and an existing store is replaced only when ``overwrite=True``. The temporary
name carries the writer's host and process id, so a later write to the same path removes
what a killed writer left behind (and never what a live one is writing).
"""

import ctypes
import errno
import json
import os
import re
import shutil
import socket
import uuid
from pathlib import Path

import numpy as np

from ..errors import StoreError, StoreExistsError
from .format import (COMPLETE_ATTR, FEATURE_DTYPES, FORMAT_ATTR, FORMAT_VERSION, IDS_NAME, X_NAME, Y_NAME,
                     check_labels, default_chunk_rows, is_feature_store)
from .hdf5_store import HDF5_SUFFIXES

LABEL_CHUNK = 1 << 20


def store_kind_for(path, kind=None):
    """'hdf5' for an explicit kind or an HDF5 suffix, else 'zarr' (the default)."""
    if kind is not None:
        if kind not in ("zarr", "hdf5"):
            raise StoreError(f"unknown store format {kind!r}; use 'zarr' or 'hdf5'")
        return kind
    return "hdf5" if Path(path).suffix.lower() in HDF5_SUFFIXES else "zarr"


class StoreWriter:
    """Append rows of X (and y, ids) in blocks; ``close()`` publishes the store.

    Use it as a context manager: leaving the block with an exception removes the
    temporary store and leaves ``path`` untouched.
    """

    def __init__(self, path, n_features, *, dtype="float32", chunk_rows=None, kind=None,
                 labels=False, ids_dtype=None, attrs=None, overwrite=False, compressors=None):
        self.path = Path(path)
        self.kind = store_kind_for(self.path, kind)
        self.r = int(n_features)
        self.dtype = np.dtype(dtype)
        if self.dtype not in FEATURE_DTYPES:
            raise StoreError(f"X dtype {self.dtype} is not supported; use float32 or float64")
        self.chunk_rows = int(chunk_rows or default_chunk_rows(self.r, self.dtype.itemsize))
        restore_interrupted_replace(self.path)
        if self.path.exists() and not overwrite:
            raise StoreExistsError(f"{self.path} already exists; pass overwrite=True (--overwrite) to replace it")
        if overwrite and self.path.exists() and not is_feature_store(self.path):
            raise StoreExistsError(f"{self.path} is not a bigsearch store, so overwrite will not replace it "
                                   "(it replaces only a store); choose another output path")
        self.overwrite = overwrite
        remove_stale_leftovers(self.path)
        self.tmp = temp_sibling(self.path, "partial")
        self.n = 0                 # rows written to disk
        self.rows_appended = 0     # rows given to append (some may still be pending)
        self._pending = []
        attrs = {FORMAT_ATTR: FORMAT_VERSION, **(attrs or {})}
        self._backend = (_ZarrWriter if self.kind == "zarr" else _HDF5Writer)(
            self.tmp, self.r, self.dtype, self.chunk_rows, labels, ids_dtype, attrs, compressors)

    def append(self, X, y=None, ids=None):
        """Append rows; X is (k, r). Rows are written in whole chunks as they fill."""
        X = np.asarray(X)
        if X.ndim != 2 or X.shape[1] != self.r:
            raise StoreError(f"block of shape {X.shape} does not have {self.r} columns")
        if y is not None:
            y = check_labels(y, len(X), str(self.path))
        self._pending.append((X.astype(self.dtype, copy=False), y, ids))
        self.rows_appended += len(X)
        if sum(len(p[0]) for p in self._pending) >= self.chunk_rows:
            self._flush(final=False)

    def _flush(self, final):
        if not self._pending:
            return
        X = np.concatenate([p[0] for p in self._pending])
        y = None if self._pending[0][1] is None else np.concatenate([p[1] for p in self._pending])
        ids = None if self._pending[0][2] is None else np.concatenate([np.asarray(p[2]) for p in self._pending])
        keep = len(X) if final else len(X) - len(X) % self.chunk_rows
        self._backend.write(self.n, X[:keep], None if y is None else y[:keep],
                            None if ids is None else ids[:keep])
        self.n += keep
        self._pending = [] if keep == len(X) else [
            (X[keep:], None if y is None else y[keep:], None if ids is None else ids[keep:])]

    def set_attrs(self, **attrs):
        self._backend.set_attrs(attrs)

    def close(self):
        """Write what is pending and move the finished store to ``path``."""
        self._flush(final=True)
        if self.n == 0:
            self.abort()
            raise StoreError(f"{self.path}: no rows were written")
        self._backend.close()
        if self.path.exists():
            if not self.overwrite:
                self.abort()
                raise StoreExistsError(f"{self.path} appeared while writing; not overwriting it")
            replace_store(self.tmp, self.path)
        else:
            os.rename(self.tmp, self.path)
            fsync_dir(self.path.parent)
        return self.path

    def abort(self):
        try:
            self._backend.close()
        except Exception:
            pass
        _remove(self.tmp)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.close()
        else:
            self.abort()


def replace_store(new, path):
    """Put the finished store ``new`` at ``path``, replacing the store there so that a kill
    at any moment leaves one of the two at ``path``: one atomic exchange of the two names
    (Linux renameat2), else two renames whose gap restore_interrupted_replace repairs.
    The old store is deleted only once the new one is in place, durably."""
    if _exchange(new, path):
        fsync_dir(path.parent)
        _remove(new)                      # now the old store
        return
    old = temp_sibling(path, "old")
    os.rename(path, old)
    os.rename(new, path)
    fsync_dir(path.parent)
    _remove(old)


def restore_interrupted_replace(path):
    """A writer killed between the two renames of replace_store left ``path`` missing and
    the old store under its ``.old-`` name: put it back (never delete the only copy)."""
    if path.exists() or not path.parent.is_dir():
        return None
    pattern = re.compile(rf"\.{re.escape(path.name)}\.old-{re.escape(_HOST)}-(\d+)-[0-9a-f]{{8}}$")
    for entry in sorted(path.parent.iterdir(), key=lambda e: e.stat().st_mtime, reverse=True):
        match = pattern.match(entry.name)
        if match and not _alive(int(match.group(1))):
            os.rename(entry, path)
            fsync_dir(path.parent)
            return entry.name
    return None


def _exchange(a, b):
    """Swap two paths atomically (renameat2 RENAME_EXCHANGE); False where unsupported."""
    renameat2 = getattr(_libc(), "renameat2", None)
    if renameat2 is None:
        return False
    if renameat2(AT_FDCWD, os.fsencode(a), AT_FDCWD, os.fsencode(b), RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP):
        return False
    raise OSError(err, os.strerror(err), str(b))


def _libc():
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


AT_FDCWD, RENAME_EXCHANGE = -100, 2


def fsync_dir(path):
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


_HOST = re.sub(r"[^A-Za-z0-9_]", "_", socket.gethostname())


def temp_sibling(path, tag):
    """``.NAME.TAG-HOST-PID-RANDOM`` beside ``path``: hidden, unique, and traceable to its writer."""
    return path.with_name(f".{path.name}.{tag}-{_HOST}-{os.getpid()}-{uuid.uuid4().hex[:8]}")


def remove_stale_leftovers(path):
    """Remove the temporary siblings of ``path`` left by writers on this host that died
    (killed, or the machine lost power); returns their names."""
    pattern = re.compile(rf"\.{re.escape(path.name)}\.(?:partial|old)-{re.escape(_HOST)}-(\d+)-[0-9a-f]{{8}}$")
    removed = []
    for entry in path.parent.iterdir() if path.parent.is_dir() else ():
        match = pattern.match(entry.name)
        if match and not _alive(int(match.group(1))):
            _remove(entry)
            removed.append(entry.name)
    return removed


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:      # another user's live process
        return True
    return True


def _remove(path):
    if path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
    elif path.exists():
        path.unlink()


class _ZarrWriter:
    def __init__(self, path, r, dtype, chunk_rows, labels, ids_dtype, attrs, compressors):
        import zarr
        self.zarr = zarr
        self.group = zarr.open_group(str(path), mode="w", zarr_format=3)
        self.group.attrs.update(attrs)
        self.x = self.group.create_array(X_NAME, shape=(0, r), chunks=(chunk_rows, r), dtype=dtype,
                                         compressors=compressors, fill_value=0,
                                         config={"write_empty_chunks": True})
        self.group.attrs[COMPLETE_ATTR] = True
        self.y = self.group.create_array(Y_NAME, shape=(0,), chunks=(LABEL_CHUNK,), dtype="int8",
                                         fill_value=-1) if labels else None
        self.ids = None
        if ids_dtype is not None:
            dt = str if np.dtype(ids_dtype).kind in "OUS" else np.dtype(ids_dtype)
            self.ids = self.group.create_array(IDS_NAME, shape=(0,), chunks=(LABEL_CHUNK,), dtype=dt)

    def write(self, start, X, y, ids):
        stop = start + len(X)
        self.x.resize((stop, self.x.shape[1]))
        self.x[start:stop] = X
        for arr, values in ((self.y, y), (self.ids, ids)):
            if arr is not None:
                if values is None:
                    raise StoreError("every block must carry the same optional columns (y, ids)")
                arr.resize((stop,))
                arr[start:stop] = values

    def set_attrs(self, attrs):
        self.group.attrs.update(attrs)

    def close(self):
        pass


class _HDF5Writer:
    def __init__(self, path, r, dtype, chunk_rows, labels, ids_dtype, attrs, compressors):
        import h5py
        self.file = h5py.File(path, "w")
        self.set_attrs(attrs)
        kw = {} if compressors is None else {"compression": compressors}
        self.x = self.file.create_dataset(X_NAME, shape=(0, r), maxshape=(None, r), chunks=(chunk_rows, r),
                                          dtype=dtype, **kw)
        self.y = self.file.create_dataset(Y_NAME, shape=(0,), maxshape=(None,), chunks=(LABEL_CHUNK,),
                                          dtype="int8", fillvalue=-1) if labels else None
        self.ids = None
        if ids_dtype is not None:
            dt = h5py.string_dtype() if np.dtype(ids_dtype).kind in "OUS" else np.dtype(ids_dtype)
            self.ids = self.file.create_dataset(IDS_NAME, shape=(0,), maxshape=(None,), chunks=(LABEL_CHUNK,),
                                                dtype=dt)

    def write(self, start, X, y, ids):
        stop = start + len(X)
        for arr, values in ((self.x, X), (self.y, y), (self.ids, ids)):
            if arr is None:
                continue
            if values is None:
                raise StoreError("every block must carry the same optional columns (y, ids)")
            arr.resize(stop, axis=0)
            arr[start:stop] = values

    def set_attrs(self, attrs):
        for k, v in attrs.items():
            self.file.attrs[k] = v if isinstance(v, (int, float)) and not isinstance(v, bool) else json.dumps(v)

    def close(self):
        if self.file.id.valid:
            self.file.close()


def create_store(path, X, y=None, ids=None, *, dtype=None, chunk_rows=None, kind=None,
                 attrs=None, overwrite=False, compressors=None):
    """Write arrays held in memory as a feature store; returns the path."""
    X = np.asarray(X)
    if X.ndim != 2:
        raise StoreError(f"X must be 2-D (n x r), got shape {X.shape}")
    dtype = dtype or (X.dtype if X.dtype in FEATURE_DTYPES else "float32")
    with StoreWriter(path, X.shape[1], dtype=dtype, chunk_rows=chunk_rows, kind=kind,
                     labels=y is not None, ids_dtype=None if ids is None else np.asarray(ids).dtype,
                     attrs=attrs, overwrite=overwrite, compressors=compressors) as w:
        step = w.chunk_rows * max(1, (1 << 26) // max(1, w.chunk_rows * X.shape[1] * 8))
        for a in range(0, len(X), step):
            w.append(X[a:a + step], None if y is None else np.asarray(y)[a:a + step],
                     None if ids is None else np.asarray(ids)[a:a + step])
    return Path(path)
