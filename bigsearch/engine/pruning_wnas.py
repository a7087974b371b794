"""Exact pruned selection for WNAS: a query reads only the blocks that could hold it.

WNAS scores f_i = num_i / den_i with num_i = sum_L s_j (x_i . x_j), den_i = sum_L
|x_i . x_j| (s_j = +1 / -1), kept per point. A block of rows last read when c labels
were applied has, for each row, num and den as of then (in memory). Each label told
since adds t = x_i . z to the row's sums: s t to num and |t| to den. With the block's
centroid c and radius R, t lies in [c . z - R ||z||, c . z + R ||z||]; per label that
gives, for every row of the block, either a term that can only raise f (at most
t_max added to both num and den) or one that can only lower it (at least t_min added to
den and taken from num). Since |num| <= den, f = (num + P - N) / (den + P + N) grows
with P and falls with N, so

    f_i <= (num_i + P_B - N_B) / (den_i + P_B + N_B)

with P_B the sum of the raising terms' t_max and N_B of the lowering terms' t_min over
the labels the block has not seen. The bound is evaluated for every row from memory
(O(n), no read of X); blocks are read best bound first (engine/pruning.py:best_first).
Reading a block applies the labels it has not seen, batch by batch, with the full
pass's kernel (``add_similarities``) on its rows, so num, den and f are bit-identical to
the full pass's. A batch of more than ``FUSED_LABELS`` labels is applied by a full pass
(the full pass computes those products by BLAS over blocks of rows, which a block read
could not reproduce bit for bit); every block is then fresh.

Local backend only; on the dask backend WNAS keeps its full pass per batch of labels.
"""

from __future__ import annotations

import numpy as np

from ..backends import ChunkStep
from ..kernels.wnas import add_similarities
from ..storage.encoding import decode, n_rows
from .pruning import (
    SAFETY,
    _apply_labels,
    _rows,
    best_first,
    block_layout,
    check_block_rows,
    rows_of,
)
from .steps import BLAS_ROWS, FUSED_LABELS


def ball_step(x, state, block_rows):
    """Centroid and radius of each block of a chunk."""
    parts = []
    group = block_rows * max(1, BLAS_ROWS // block_rows)
    for g0 in range(0, n_rows(x), group):
        xb = decode(x, g0, g0 + group)
        local = np.arange(0, len(xb), block_rows)
        sizes = np.diff(np.append(local, len(xb)))
        centre = np.add.reduceat(xb, local, axis=0) / sizes[:, None]
        D = xb - np.repeat(centre, sizes, axis=0)
        parts.append((centre, np.sqrt(np.maximum.reduceat(np.einsum("ij,ij->i", D, D), local))))
    return tuple(np.concatenate(col) for col in zip(*parts))


BALLS = ChunkStep(ball_step, from_scratch=True)


class WNASPruning:
    """Pruned queries for a WNAS engine on the local backend (see the module)."""

    def __init__(self, engine, block_rows=None):
        self.engine = engine
        self.block_rows = check_block_rows(block_rows)
        self.stale = False
        if getattr(engine.backend, "name", "") == "local":
            self.status = f"on: exact pruning of blocks of {self.block_rows} rows"
        else:
            self.status = "off: WNAS prunes on the local backend only; the cluster does a full pass per batch"
        self.centre = None

    @property
    def active(self):
        return self.status.startswith("on")

    def after_full_pass(self):
        """Every block has seen every label: no pending raise or fall."""
        if not self.active:
            return
        e = self.engine
        if self.centre is None:
            self.chunk, self.start, self.stop = block_layout(e.store.chunks, self.block_rows)
            self.centre, self.radius = (np.concatenate(c) for c in zip(*e.backend.map(BALLS, self.block_rows)))
            self.lens = self.stop - self.start
        self.count = e.n_labeled
        self.version = np.full(len(self.start), self.count, np.int64)
        self.batches = []                              # (labels before it, Z, signs), in order
        self.raise_now, self.fall_now = np.zeros(len(self.start)), np.zeros(len(self.start))
        self.snapshots = {self.count: (self.raise_now.copy(), self.fall_now.copy())}
        self.stale = False

    def labels_told(self, idx, lab):
        """Record new labels without a pass; False when the batch needs a full pass."""
        if len(idx) > FUSED_LABELS:
            return False
        e = self.engine
        Z, signs = e.store.read_rows(idx), 2.0 * lab.astype(np.float64) - 1.0
        e.backend.map_state(_apply_labels, np.unique([e.store.chunk_of(i) for i in idx]).tolist(), idx, lab)
        for z, sign in zip(Z, signs):
            cz, spread = self.centre @ z, self.radius * np.linalg.norm(z)
            lo, hi = cz - spread, cz + spread
            slack = SAFETY * (np.abs(cz) + spread)          # rounding of the products above
            positive, negative = lo >= 0, hi <= 0           # the sign of every similarity known
            sigma = np.where(positive, sign, np.where(negative, -sign, 1.0))
            t_max = np.where(positive, hi, np.where(negative, -lo, np.maximum(-lo, hi))) + slack
            t_min = np.maximum(np.where(positive, lo, np.where(negative, -hi, 0.0)) - slack, 0.0)
            self.raise_now += np.where(sigma > 0, t_max, 0.0)
            self.fall_now += np.where(sigma < 0, t_min, 0.0)
        self.batches.append((self.count, Z, signs))
        self.count += len(idx)
        self.stale = True
        return True

    def bounds(self):
        e = self.engine
        num, den, label = e.backend.gather("num"), e.backend.gather("den"), e._label
        versions, inv = np.unique(self.version, return_inverse=True)
        P = self.raise_now - np.stack([self.snapshots[int(v)][0] for v in versions])[inv, np.arange(len(inv))]
        N = self.fall_now - np.stack([self.snapshots[int(v)][1] for v in versions])[inv, np.arange(len(inv))]
        P, N = np.maximum(P, 0.0) * (1 + SAFETY), np.maximum(N, 0.0) * (1 - SAFETY)
        P_row, N_row = np.repeat(P, self.lens), np.repeat(N, self.lens)
        total = den + P_row + N_row
        with np.errstate(divide="ignore", invalid="ignore"):
            f_max = np.where(total > 0, (num + P_row - N_row) / total, 0.0)
        f_max = np.where(label < 0, f_max, -np.inf)
        return np.maximum.reduceat(f_max, self.start) + SAFETY

    def top(self, k):
        e = self.engine
        f, label = e.backend.gather("f"), e._label

        def visit(blocks):
            self._read(blocks)
            idx, fu, _ = rows_of(self.start[blocks], self.stop[blocks], f, label)
            return idx, fu
        idx, sc, rows = best_first(self.bounds(), k, visit)
        self._forget()
        e.bytes_since_query += int(rows) * e.store.bytes_per_point
        return idx, sc

    def catch_up(self):
        """Every block brought up to date (what ``f`` and saving need): reads all of X."""
        if self.active and self.stale:
            self._read(np.flatnonzero(self.version < self.count))
            self.engine.bytes_since_query += self.engine.store.nbytes
            self._forget()
            self.stale = False

    def _read(self, blocks):
        """Apply to these blocks' rows the batches of labels they have not seen, batch by
        batch as the full pass did (one call per batch: the kernel may reorder the sum over
        a batch's labels, so merging batches would change the last bits)."""
        e = self.engine
        for c in np.unique(self.chunk[blocks]).tolist():
            st = e.backend.states[c]
            with e.store.chunk(c) as x:
                for b in blocks[self.chunk[blocks] == c]:
                    a, z = self.start[b] - st.start, self.stop[b] - st.start
                    rows = _rows(x, a, z)
                    for before, Z, signs in self.batches:
                        if before >= self.version[b]:
                            add_similarities(rows, Z, signs, 0, st.label[a:z], st.num[a:z], st.den[a:z],
                                             st.f[a:z])
        self.version[blocks] = self.count
        self.snapshots.setdefault(self.count, (self.raise_now.copy(), self.fall_now.copy()))

    def _forget(self):
        """Drop the snapshots and labels no block still needs."""
        live = set(np.unique(self.version).tolist())
        self.snapshots = {v: s for v, s in self.snapshots.items() if v in live}
        oldest = min(live)
        self.batches = [b for b in self.batches if b[0] >= oldest]
