"""Per-chunk state: the chunk's place in X and its per-point arrays (set by ``alloc``)."""


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
