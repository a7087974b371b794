"""Binary array inputs: NumPy .npy files and MNIST-style IDX files (either may be gzipped).

Both are a header followed by the values in row-major order, so rows are read in
blocks straight into NumPy arrays; an image of h x w pixels becomes one row of h*w
features.
"""

import numpy as np

from ...errors import InputError
from .base import Block, Column, Reader, open_binary, read_exactly

IDX_TYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


class _RowStream(Reader):
    """Rows of ``row_shape`` values of ``dtype`` read one block at a time from a stream."""

    def _setup(self, n, row_shape, dtype):
        self.n, self.dtype = int(n), np.dtype(dtype)
        self.row_shape = tuple(int(s) for s in row_shape)   # an image's shape, for ingest/records.py
        self.width = int(np.prod(row_shape, dtype=np.int64))
        if self.n == 0:
            raise InputError(f"{self.path}: empty file (no rows)")
        if self.width == 0:
            raise InputError(f"{self.path}: rows of shape {tuple(row_shape)} hold no values")
        self.columns = [Column(str(j), True) for j in range(self.width)]

    def _row_blocks(self, block_bytes):
        """(first row, rows) of each block: as many rows as fit in ``block_bytes``, at least one."""
        step = max(1, block_bytes // (self.width * self.dtype.itemsize))
        for a in range(0, self.n, step):
            yield a, min(step, self.n - a)

    def _stream_blocks(self, stream, block_bytes):
        row_bytes = self.width * self.dtype.itemsize
        for a, m in self._row_blocks(block_bytes):
            data = read_exactly(stream, m * row_bytes, self.path, f"rows {a + 1}-{a + m} of {self.n}")
            self.rows_read = a + m
            yield Block(self, a, matrix=np.frombuffer(data, self.dtype).reshape(m, self.width))


class NpyReader(_RowStream):
    formats = ("npy",)
    suffixes = {".npy": "npy"}
    format = "npy"

    @classmethod
    def format_of_head(cls, head):
        return "npy" if head.startswith(b"\x93NUMPY") else None

    def __init__(self, path):
        super().__init__(path)
        stream, raw = open_binary(path)
        try:
            shape, fortran, dtype = _npy_header(stream, self.path)
        finally:
            raw.close()
        if dtype.kind not in "biuf" or dtype.fields:
            raise InputError(f"{path}: array of dtype {dtype}; ingest reads numbers (integers, floats, booleans)")
        if len(shape) == 0:
            raise InputError(f"{path}: a scalar, not an array of rows")
        self.fortran = fortran
        self._setup(shape[0], shape[1:], dtype)

    def blocks(self, block_bytes):
        if self.fortran:  # column-major: rows are strided, read them through a memory map
            yield from self._mapped_blocks(block_bytes)
            return
        stream, self._raw = open_binary(self.path)
        try:
            _npy_header(stream, self.path)
            yield from self._stream_blocks(stream, block_bytes)
        finally:
            self.close()

    def _mapped_blocks(self, block_bytes):
        try:
            x = np.load(self.path, mmap_mode="r")
        except ValueError:
            raise InputError(f"{self.path}: a gzipped column-major (Fortran order) array cannot be "
                             "streamed by rows; decompress it or save it in C order") from None
        x = x.reshape(self.n, self.width, order="F")
        for a, m in self._row_blocks(block_bytes):
            self.rows_read = a + m
            yield Block(self, a, matrix=np.ascontiguousarray(x[a:a + m]))


def _npy_header(stream, path):
    fmt = np.lib.format
    try:
        version = fmt.read_magic(stream)
        read = fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0
        return read(stream)
    except (ValueError, EOFError, OSError) as e:
        raise InputError(f"{path}: not a NumPy .npy file ({e})") from None


class IdxReader(_RowStream):
    """IDX (the MNIST format): magic 0 0 TYPE NDIM, NDIM big-endian int32 sizes, values."""

    formats = ("idx",)
    suffixes = {".idx": "idx"}
    format = "idx"

    @classmethod
    def format_of_head(cls, head):
        is_idx = len(head) >= 4 and head[:2] == b"\0\0" and head[2] in IDX_TYPES and 1 <= head[3] <= 4
        return "idx" if is_idx else None

    @classmethod
    def format_of_name(cls, name):
        return super().format_of_name(name) or ("idx" if "-ubyte" in name else None)

    def __init__(self, path):
        super().__init__(path)
        stream, raw = open_binary(path)
        try:
            self.header_bytes, shape, dtype = _idx_header(stream, self.path)
        finally:
            raw.close()
        self._setup(shape[0], shape[1:], dtype)

    def blocks(self, block_bytes):
        stream, self._raw = open_binary(self.path)
        try:
            read_exactly(stream, self.header_bytes, self.path, "the header")
            yield from self._stream_blocks(stream, block_bytes)
        finally:
            self.close()


def _idx_header(stream, path):
    head = stream.read(4)
    if len(head) < 4:
        raise InputError(f"{path}: empty file or too short for an IDX header")
    if head[:2] != b"\0\0" or head[2] not in IDX_TYPES or head[3] == 0:
        raise InputError(f"{path}: not an IDX file (magic bytes {head.hex()})")
    ndim = head[3]
    shape = np.frombuffer(read_exactly(stream, 4 * ndim, path, "the IDX dimensions"), ">i4")
    return 4 + 4 * ndim, tuple(int(s) for s in shape), IDX_TYPES[head[2]]
