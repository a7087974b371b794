"""Per-chunk state: the chunk's place in X and its per-point arrays (set by ``alloc``)."""

import numpy as np

from ..kernels.common import CACHE_LINE


def point_array(n, fill, dtype):
    """A per-point array of n values, all ``fill``, whose data starts on a 64-byte cache line.

    NumPy aligns to 16 bytes; the kernels' per-point loops move 64 bytes a vector on CPUs
    with 512-bit vectors, and arrays off a line made each of those accesses span two lines
    (on an AMD EPYC host, V, the block buffers and these arrays aligned together took a
    warm LAS iteration at 1M x 128 from 16.5-17 ms to 13.0-13.3: docs/performance.md)."""
    dtype = np.dtype(dtype)              # may have a shape of its own: (n,) + dtype.shape
    buf = np.empty(n * dtype.itemsize + CACHE_LINE, np.uint8)
    start = -buf.ctypes.data % CACHE_LINE
    out = buf[start:start + n * dtype.itemsize].view(dtype.base).reshape((n,) + dtype.shape)
    out[...] = fill
    return out


class ChunkState:
    """One chunk's per-point state. Arrays are attributes named by the engine
    (``label``, ``deg``, ``J``, ``f``, ``im`` for LAS), each of length ``stop - start``."""

    def __init__(self, chunk_id, start, stop):
        self.chunk_id, self.start, self.stop = chunk_id, start, stop

    def apply_labels(self, indices, labels):
        """Write the labels of the given global indices that fall in this chunk."""
        inside = (indices >= self.start) & (indices < self.stop)
        if inside.any():
            self.label[indices[inside] - self.start] = labels[inside]
