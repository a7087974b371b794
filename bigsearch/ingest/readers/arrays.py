"""Array containers as inputs: HDF5 files, Zarr groups or arrays, Parquet tables.

An HDF5 file or Zarr group that is a feature store gives X, and its y and ids come
along; any other 2-D dataset is chosen with --dataset. Parquet is read by row groups
with pyarrow and handled like a CSV table.
"""


import numpy as np

from ...errors import InputError
from ...storage.format import IDS_NAME, X_NAME, Y_NAME
from ...storage.hdf5_store import HDF5_SIGNATURE, attribute_value
from .base import Block, Column, Reader

MAX_SPAN_BYTES = 128 * 2**20     # source chunks larger than this are read by blocks


class ArrayReader(Reader):
    """A 2-D array in a container of named arrays, read by slices of rows; subclasses
    open the container (HDF5Reader, ZarrReader)."""

    labels_are_stored = True

    @classmethod
    def open(cls, path, fmt, options):
        return cls(path, None if options is None else options.dataset)

    def __init__(self, path, dataset=None):
        super().__init__(path)
        try:
            self._root = self._open_root()
        except Exception as e:  # the libraries raise several kinds for "not this format"
            raise InputError(f"{self.path}: cannot be read as {self.format} ({e})") from None
        self.attrs = {k: attribute_value(v) for k, v in self._root.attrs.items()}
        if not hasattr(self._root, "keys"):  # a bare Zarr array
            self.x, self.dataset = self._root, None
        else:
            self.dataset = dataset or self._default_dataset()
            if self.dataset not in self._datasets():
                raise InputError(f"{path}: no dataset {self.dataset!r} "
                                 f"(found: {', '.join(self._datasets()) or 'none'})")
            self.x = self._root[self.dataset]
        name = self.dataset
        if len(self.x.shape) < 1 or self.x.shape[0] == 0:
            raise InputError(f"{path}: dataset {name!r} of shape {self.x.shape} has no rows")
        if np.dtype(self.x.dtype).kind not in "biuf":
            raise InputError(f"{path}: dataset {name!r} has dtype {self.x.dtype}; ingest reads numbers")
        self.n = self.x.shape[0]
        self.width = int(np.prod(self.x.shape[1:], dtype=np.int64))
        self.row_shape, self.dtype = tuple(self.x.shape[1:]), np.dtype(self.x.dtype)   # for ingest/records.py
        self.columns = [Column(str(j), True) for j in range(self.width)]
        self.y = self._optional(Y_NAME)
        self.ids = self._optional(IDS_NAME)
        self.has_labels = self.y is not None

    def _open_root(self):
        """The container: a group of named arrays, or one array."""
        raise NotImplementedError

    def _datasets(self):
        return [k for k in self._root.keys() if hasattr(self._root[k], "shape")]

    def _default_dataset(self):
        names = self._datasets()
        if X_NAME in names:
            return X_NAME
        two_d = [k for k in names if len(self._root[k].shape) == 2]
        if len(two_d) == 1:
            return two_d[0]
        raise InputError(f"{self.path}: choose the feature matrix with source.dataset "
                         f"(2-D datasets: {', '.join(two_d) or 'none'})")

    def _optional(self, name):
        if self.dataset is None or name == self.dataset or name not in self._datasets():
            return None
        values = self._root[name]
        if values.shape != (self.n,):
            return None
        return values

    def blocks(self, block_bytes):
        row_bytes = max(1, self.width * np.dtype(self.x.dtype).itemsize)
        step = max(1, block_bytes // row_bytes)
        span = self._span(step, row_bytes)
        for a0 in range(0, self.n, span):
            b0 = min(self.n, a0 + span)
            x, y, ids = self._read(a0, b0)
            for a in range(a0, b0, step):
                b = min(b0, a + step)
                self.rows_read = b
                yield Block(self, a, matrix=x[a - a0:b - a0], labels=None if y is None else y[a - a0:b - a0],
                            ids=None if ids is None else ids[a - a0:b - a0])

    def _span(self, step, row_bytes):
        """Rows to read at a time: whole chunks of the source, so that no chunk is decoded
        once per block (zarr-python and h5py decode a whole chunk for any slice of it),
        unless a chunk is too large to hold (then blocks of ``step`` rows)."""
        chunk_rows = (getattr(self.x, "chunks", None) or (None,))[0]
        if not chunk_rows or chunk_rows * row_bytes > MAX_SPAN_BYTES:
            return step
        return chunk_rows * -(-step // chunk_rows)

    def _read(self, a, b):
        try:
            x = np.asarray(self.x[a:b]).reshape(b - a, self.width)
            y = None if self.y is None else np.asarray(self.y[a:b])
            ids = None if self.ids is None else _decode(np.asarray(self.ids[a:b]))
        except (OSError, ValueError, RuntimeError) as e:
            raise InputError(f"{self.path}, rows {a + 1}-{b}: cannot be read ({e})") from None
        return x, y, ids

    def position(self):
        return int(self.size * self.rows_read / max(1, self.n))

    def describe(self):
        d = super().describe()
        for key in ("provenance", "featurization"):
            if key in self.attrs:
                d[key] = self.attrs[key]
        return d

    def close(self):
        if hasattr(self._root, "close"):
            self._root.close()


class HDF5Reader(ArrayReader):
    formats = ("hdf5",)
    suffixes = {".h5": "hdf5", ".hdf5": "hdf5", ".hdf": "hdf5"}
    format = "hdf5"

    @classmethod
    def format_of_head(cls, head):
        return "hdf5" if head.startswith(HDF5_SIGNATURE) else None

    def _open_root(self):
        import h5py
        return h5py.File(self.path, "r")


class ZarrReader(ArrayReader):
    formats = ("zarr",)
    suffixes = {".zarr": "zarr"}
    format = "zarr"

    def _open_root(self):
        import zarr
        return zarr.open(self.path, mode="r")


def _decode(values):
    if values.dtype.kind in "OS":
        return np.array([v.decode() if isinstance(v, bytes) else v for v in values], dtype=object)
    return values


class ParquetReader(Reader):
    formats = ("parquet",)
    suffixes = {".parquet": "parquet", ".pq": "parquet"}
    format = "parquet"

    @classmethod
    def format_of_head(cls, head):
        return "parquet" if head.startswith(b"PAR1") else None

    def __init__(self, path):
        super().__init__(path)
        try:
            import pyarrow.parquet as pq
        except ImportError:
            raise InputError("reading Parquet needs pyarrow: pip install 'bigsearch[ingest]'") from None
        try:
            self._file = pq.ParquetFile(path)
        except Exception as e:  # pyarrow raises ArrowInvalid or OSError for non-Parquet bytes
            raise InputError(f"{path}: not a readable Parquet file ({e})") from None
        if self._file.metadata.num_rows == 0:
            raise InputError(f"{path}: empty table (no rows)")
        import pyarrow as pa
        self.columns = [Column(f.name, pa.types.is_integer(f.type) or pa.types.is_floating(f.type))
                        for f in self._file.schema_arrow]
        self.n = self._file.metadata.num_rows

    def blocks(self, block_bytes):
        row_bytes = max(1, self.size // max(1, self.n)) * 4   # decoded rows are larger than stored ones
        start = 0
        try:
            for batch in self._file.iter_batches(batch_size=max(1, block_bytes // row_bytes)):
                yield Block(self, start, table=batch)
                start += batch.num_rows
                self.rows_read = start
        except OSError as e:
            raise InputError(f"{self.path}, after row {start}: cannot be read ({e})") from None

    def position(self):
        return int(self.size * self.rows_read / max(1, self.n))
