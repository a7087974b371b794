"""Arrays as feature stores: a NumPy array, a ``zarr.Array``, an ``h5py.Dataset`` or a dask array.

``bigsearch.LAS(x)``, ``simulate(x, ...)`` and every other place that takes a store take
these too (``open_store`` asks each class registered with ``register_array_type``
whether it ``wraps`` the object). X is read as a store reads it, one block of rows at a
time: a NumPy array is used in place (its row blocks are views, no copy); a zarr or
h5py array, or a dask array, is read block by block through its library into a reused
buffer, so it is never whole in memory. The blocks follow the array's own row chunks
(``chunk_rows`` chooses others). Labels and ids are not part of an array: pass them as
``y=`` and ``ids=`` (each n values, read whole: n bytes of labels, not X).

A zarr or h5py array read this way takes the libraries' decoding path; the memory-mapped
fast path is for stores bigsearch wrote (``bigsearch ingest``, ``create_store``), or
opened by path with ``dataset=`` (docs/store-format.md, "X as an array, or not named X").
"""

import sys

import numpy as np

from ..errors import StoreError
from .base import FeatureStore, release_nothing
from .format import check_features, check_labels, default_chunk_rows

FLOAT_DTYPES = (np.dtype("float16"), np.dtype("float32"), np.dtype("float64"))


class ArrayStore(FeatureStore):
    """An array-like X held by the caller, read by blocks of rows. Subclasses say which
    objects they wrap (``array_type``), the array's own row chunking (``_native_rows``)
    and how a block of rows is read (``_read_block``, or ``_map_chunk`` in memory)."""

    kind = "array"
    description = "an array"
    label = "array"
    library = "?"  # the array's library, in messages and `describe`
    array_type = ("?", "?")  # (module, class) of the arrays it reads, e.g. ("h5py", "Dataset")
    on_disk = False
    maps_holdable = False  # its rows are in memory, or read anew: no map to keep

    @classmethod
    def wraps(cls, obj):
        """True when ``obj`` is an array this class reads (a library the caller has not
        imported cannot have made it, so none is imported here)."""
        module = sys.modules.get(cls.array_type[0])
        return module is not None and isinstance(obj, getattr(module, cls.array_type[1]))

    def __init__(self, x, y=None, ids=None, chunk_rows=None):
        where = self._where(x)
        self._check_array(x, where)
        rows = int(chunk_rows) if chunk_rows is not None else self._native_rows(x)
        n, r = check_features(x.shape, np.dtype(x.dtype).newbyteorder("="), rows, where)
        super().__init__(where, n, r, np.dtype(x.dtype).newbyteorder("="), rows, {})
        self._x = x
        self._y = None if y is None else as_labels(y, n, where)
        self._ids = None if ids is None else _ids(ids, n, where)
        self._chunk_rows_given = chunk_rows

    # -- what subclasses provide --------------------------------------------------
    def _native_rows(self, x):
        """Rows per block when ``chunk_rows`` is not given: the array's row chunk."""
        return default_chunk_rows(x.shape[1] if len(x.shape) == 2 else 1, np.dtype(x.dtype).itemsize)

    def _where(self, x):
        return f"{self.library} array of shape {tuple(x.shape)}"

    def location(self):
        """(path, dataset) of a file that holds this array, for what must reopen it later
        (sessions); None for an array that lives only in this process."""
        return None

    # -- the FeatureStore hooks -----------------------------------------------------
    def _check_array(self, x, where):
        dtype = np.dtype(x.dtype)
        if len(x.shape) == 2 and dtype.newbyteorder("=") not in FLOAT_DTYPES:
            raise StoreError(
                f"{where}: X has dtype {dtype}; bigsearch reads floating-point features "
                "(float32 or float64): convert it, e.g. x.astype('float32')"
            )

    def _decode_chunk(self, j, out):
        a, b = self.chunks[j]
        try:
            self._read_block(a, b, out)
        except Exception as e:  # codecs, files and graphs raise many kinds
            raise StoreError(f"{self.path}: rows {a}..{b - 1} cannot be read: {type(e).__name__}: {e}") from e

    def _read_block(self, a, b, out):
        """Rows a..b-1 of X into ``out`` (the slow path: one block in a reused buffer)."""
        out[...] = self._x[a:b]

    def _read_optional(self, name, rows=None):
        values = {"y": self._y, "ids": self._ids}.get(name)
        return values if values is None or rows is None else values[rows]

    def _read_scale(self):
        return None

    def _disk_bytes(self):
        return None

    def codec(self):
        return None

    def describe(self):
        return {**super().describe(), "library": self.library}

    def reopen_path(self):
        return self

    def __reduce__(self):
        # dask workers get the array itself (NumPy data, a dask graph, a zarr handle)
        return (type(self), (self._x, self._y, self._ids, self._chunk_rows_given))

    def __repr__(self):
        return f"<{type(self).__name__} {self.path} chunk_rows={self.chunk_rows}>"


class NumpyArrayStore(ArrayStore):
    """A NumPy array: each block of rows is a view of it (no copy), unless it is not
    C-ordered native-endian values, which the kernels need (then each block is copied
    into a reused buffer, as stores that need decoding do)."""

    library = "NumPy"
    array_type = ("numpy", "ndarray")
    slow_reason = "not a C-contiguous native-endian array: each block is copied"

    def __init__(self, x, y=None, ids=None, chunk_rows=None):
        super().__init__(x, y, ids, chunk_rows)
        self.fast_path = bool(x.flags.c_contiguous and x.dtype.isnative)

    def _map_chunk(self, j, huge=False):
        a, b = self.chunks[j]
        return self._x[a:b], release_nothing


class ZarrArrayStore(ArrayStore):
    """A ``zarr.Array`` (v2 or v3, any codecs, local or remote), read a block of its row
    chunks at a time."""

    library = "zarr"
    array_type = ("zarr", "Array")

    def _native_rows(self, x):
        return int((getattr(x, "shards", None) or x.chunks)[0])

    def _where(self, x):
        return f"zarr array {x.store}/{x.path}".rstrip("/")

    def location(self):
        from zarr.storage import LocalStore

        if not isinstance(self._x.store, LocalStore) or not self._x.path:
            return None
        return str(self._x.store.root), self._x.path


class HDF5DatasetStore(ArrayStore):
    """An ``h5py.Dataset``, read a block of its row chunks at a time (``read_direct``
    into a reused buffer). It travels to dask workers as its file and name."""

    library = "h5py"
    array_type = ("h5py", "Dataset")

    def _native_rows(self, x):
        return int(x.chunks[0]) if x.chunks is not None else super()._native_rows(x)

    def _where(self, x):
        return f"HDF5 dataset {x.file.filename}:{x.name}"

    def _read_block(self, a, b, out):
        self._x.read_direct(out, np.s_[a:b], np.s_[0 : b - a])

    def location(self):
        return self._x.file.filename, self._x.name.lstrip("/")

    def __reduce__(self):
        path, name = self.location()
        return (_reopen_hdf5, (path, name, self._y, self._ids, self._chunk_rows_given))


class DaskArrayStore(ArrayStore):
    """A dask array: each block of rows is computed alone (synchronously, in the thread
    that reads it: the backend's threads are the parallelism), so the array is never
    computed whole."""

    library = "dask"
    array_type = ("dask.array", "Array")

    def _check_array(self, x, where):
        if any(np.isnan(c) for dim in x.chunks for c in dim):
            raise StoreError(f"{where}: the dask array's chunk sizes are unknown; call x.compute_chunk_sizes() first")
        super()._check_array(x, where)

    def _native_rows(self, x):
        return int(max(x.chunks[0])) if x.chunks[0] else 1

    def _read_block(self, a, b, out):
        out[...] = self._x[a:b].compute(scheduler="synchronous")


def _reopen_hdf5(path, name, y, ids, chunk_rows):
    import h5py

    return HDF5DatasetStore(h5py.File(path, "r")[name], y, ids, chunk_rows)


def as_labels(y, n, where):
    """y as int8 labels (1, 0, -1 unknown): integers, booleans, or floats holding those values."""
    y = _small_array(y)
    if y.dtype == bool:
        y = y.astype(np.int8)
    elif y.dtype.kind == "f":
        if not np.all(np.isfinite(y)):
            raise StoreError(f"{where}: y has non-finite values; labels are 1 (positive), 0 (negative) or -1 (unknown)")
        if np.any(y != np.round(y)):
            raise StoreError(
                f"{where}: y has fractional values; labels are 1 (positive), 0 (negative) "
                "or -1 (unknown); graded answers go to simulate(..., answers=)"
            )
        y = y.astype(np.int64)
    return check_labels(y, n, where)


def _ids(ids, n, where):
    ids = _small_array(ids)
    if ids.shape != (n,):
        raise StoreError(f"{where}: ids has shape {ids.shape}, expected ({n},), one per row of X")
    return ids


def _small_array(values):
    """A 1-D array-like (NumPy, list, zarr, h5py, dask) as a NumPy array."""
    compute = getattr(values, "compute", None)
    return np.asarray(compute() if callable(compute) else values[:] if np.ndim(values) else values)


def unsupported(obj):
    """The message for an object that is neither a store location nor a known array."""
    kind = f"{type(obj).__module__}.{type(obj).__qualname__}".removeprefix("builtins.")
    return (
        f"cannot read a feature store from a {kind}: give a path or URL of a store, or X as a NumPy "
        "array, a zarr.Array, an h5py.Dataset or a dask array (np.asarray(x) for other in-memory "
        "arrays)"
    )


ARRAY_TYPES = (NumpyArrayStore, ZarrArrayStore, HDF5DatasetStore, DaskArrayStore)
