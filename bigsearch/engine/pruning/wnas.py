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
(O(n), no read of X); blocks are read best bound first (engine/pruning/las.py:best_first).
Reading a block applies the labels it has not seen, batch by batch, with the full
pass's kernel (``add_similarities``) on its rows, so num, den and f are bit-identical to
the full pass's. A batch of more than ``FUSED_LABELS`` labels is applied by a full pass
(the full pass computes those products by BLAS over blocks of rows, which a block read
could not reproduce bit for bit); every block is then fresh.

On the dask backend each chunk keeps its blocks' bounds in its state on the worker
(``chunk_top_step``: built at its first pruned query, which reads the chunk once); the
labels told since the last query travel with the query, and each chunk returns its exact
top k: one round trip per query, as for a full pass. A worker lost mid-query has its
chunks rebuilt from every label by the engine's recipe; the engine then recomputes every
chunk's sums the same way (one pass) and asks again.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ...backends import ChunkStep
from ...kernels.las import degrees
from ...kernels.wnas import add_similarities
from ...storage.encoding import decode, n_rows
from ..core.select import ChunkPartials
from ..core.steps import BLAS_ROWS, FUSED_LABELS, WNAS_UPDATE, colsum_step, wnas_update_step
from .block_summaries import block_centres, block_layout
from .las import (
    SAFETY,
    apply_labels_to_chunk,
    best_first,
    row_range,
    rows_of,
)
from .placement import ChunkTop, PlacedPruning, labels_into_chunks
from .summaries import (
    CHANGED,
    block_degrees,
    matches,
    read_chunk_summaries,
    read_stored,
    stored_header,
)


class Balls(NamedTuple):
    """Each block of a chunk: its centroid, and the largest distance of a row from it."""
    centre: np.ndarray
    radius: np.ndarray


def ball_step(x, state, block_rows):
    """Centroid and radius of each block of a chunk."""
    parts = []
    group = block_rows * max(1, BLAS_ROWS // block_rows)
    for g0 in range(0, n_rows(x), group):
        xb = decode(x, g0, g0 + group)
        local, sizes, centre = block_centres(xb, block_rows)
        D = xb - np.repeat(centre, sizes, axis=0)
        parts.append((centre, np.sqrt(np.maximum.reduceat(np.einsum("ij,ij->i", D, D), local))))
    return Balls(*(np.concatenate(col) for col in zip(*parts)))


BALLS = ChunkStep(ball_step, from_scratch=True)


class Checked(NamedTuple):
    """What ``checked_update_step`` returns: the full pass's partials, and what the
    stored block summaries are checked with (engine/pruning/summaries.py)."""
    partials: ChunkPartials
    sums: np.ndarray          # the chunk's column sums (COLSUM's kernel)
    degrees: dict             # per block: smallest, largest, summed x_i . s_stored


def checked_update_step(x, state, s_stored, block_rows, *update):
    """``wnas_update_step``, and, from the chunk it has in hand, its column sums and its
    blocks' degrees against the stored column sums, computed as a LAS search computes
    them (bit for bit, when X is what the summaries describe)."""
    partials = wnas_update_step(x, state, *update)
    deg = np.empty(n_rows(x))
    degrees(x, s_stored, deg)
    return Checked(partials, colsum_step(x, state).sums, block_degrees(deg, np.arange(0, n_rows(x), block_rows)))


# It updates state it did not create: a lost chunk is rebuilt by the engine's recipe,
# whose partials are a ChunkPartials: then the stored summaries are not used.
CHECKED_UPDATE = ChunkStep(checked_update_step)


class BlockBounds:
    """Blocks [start, stop) of rows with their balls; per block, the labels it has not
    seen, and the bound on f they allow (see the module). ``count``: labels applied."""

    def __init__(self, centre, radius, start, stop, count):
        self.centre, self.radius, self.start, self.stop = centre, radius, start, stop
        self.lens = stop - start
        self.reset(count)

    def reset(self, count):
        """Every block has seen the first ``count`` labels, and no others are known."""
        nb = len(self.start)
        self.count = count
        self.version = np.full(nb, count, np.int64)
        self.batches = []                              # (labels before it, Z, signs), in order
        self.raise_now, self.fall_now = np.zeros(nb), np.zeros(nb)
        self.snapshots = {count: (self.raise_now.copy(), self.fall_now.copy())}

    def record(self, Z, signs):
        """A batch of labels (rows Z, signs 2y - 1 in [-1, 1]) that no block has seen yet."""
        for z, sign in zip(Z, signs):
            cz, spread = self.centre @ z, self.radius * np.linalg.norm(z)
            lo, hi = cz - spread, cz + spread
            slack = SAFETY * (np.abs(cz) + spread)          # rounding of the products above
            positive, negative = lo >= 0, hi <= 0           # the sign of every similarity known
            sigma = np.where(positive, sign, np.where(negative, -sign, 1.0))
            t_max = np.where(positive, hi, np.where(negative, -lo, np.maximum(-lo, hi))) + slack
            t_min = np.maximum(np.where(positive, lo, np.where(negative, -hi, 0.0)) - slack, 0.0)
            # A graded label's sign 2y - 1 is in (-1, 1): it adds sigma |t| to num with
            # |sigma| < 1, at most what a raising term adds, so it is bounded as one.
            self.raise_now += np.where(sigma > -1, t_max, 0.0)
            self.fall_now += np.where(sigma <= -1, t_min, 0.0)
        self.batches.append((self.count, Z, signs))
        self.count += len(Z)

    def bounds(self, num, den, label):
        """Per block, an upper bound on f of its unlabeled rows (num, den, label: per row)."""
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

    def missed(self, b):
        """The batches block b has not seen, in order: (Z, signs)."""
        return [(Z, signs) for before, Z, signs in self.batches if before >= self.version[b]]

    def mark_read(self, blocks):
        self.version[blocks] = self.count
        self.snapshots.setdefault(self.count, (self.raise_now.copy(), self.fall_now.copy()))

    def forget(self):
        """Drop the snapshots and labels no block still needs."""
        live = set(np.unique(self.version).tolist())
        self.snapshots = {v: s for v, s in self.snapshots.items() if v in live}
        oldest = min(live)
        self.batches = [b for b in self.batches if b[0] >= oldest]


def _catch_up_rows(x, state, a, z, missed):
    """Apply to rows a:z of a chunk the batches they missed, batch by batch as the full
    pass did (one call per batch: the kernel may reorder the sum over a batch's labels,
    so merging batches would change the last bits)."""
    rows = row_range(x, a, z)
    for Z, signs in missed:
        add_similarities(rows, Z, signs, 0, state.label[a:z], state.num[a:z], state.den[a:z], state.f[a:z])


class WNASPruning(PlacedPruning):
    """WNAS's :class:`~bigsearch.engine.pruning.contract.Pruning` (see the module): a
    BlockBounds over blocks of X, placed by engine/pruning/placement.py (one over all of
    X here, or one per chunk where the chunks live)."""

    def __init__(self, engine, options=None):
        super().__init__(engine, options)
        self.status = self.caches.status(f"on: exact pruning of blocks of {self.block_rows} rows")
        self.base, self.told = 0, 0  # labels at the last full pass, and told since
        self.summaries_from = None   # "store", or "computed: why not from the store"
        self.stored = None           # for the workers: where their slices of the stored summaries are

    @property
    def blocks(self):
        """The BlockBounds over all of X (None when each chunk keeps its own)."""
        return self.caches.cache

    def full_pass(self, args):
        """The full pass that applies a batch of labels (``WNAS_UPDATE``'s partials). The
        first one also checks the block summaries stored with the store against X
        (engine/pruning/summaries.py: column sums and every block's degrees, from the chunks it
        reads anyway), so that their centres and radii replace the pass that computes them."""
        e = self.engine
        if self.summaries_from is not None:
            return e.backend.map(WNAS_UPDATE, *args)
        header, self.summaries_from = stored_header(e.store, self.block_rows)
        if header is None:
            return e.backend.map(WNAS_UPDATE, *args)
        parts = e.backend.map(CHECKED_UPDATE, header["s"], self.block_rows, *args)
        if not all(isinstance(p, Checked) for p in parts):
            self.summaries_from = "computed: a worker was lost while the stored summaries were checked"
            return [p.partials if isinstance(p, Checked) else p for p in parts]
        found = {"s": np.sum([p.sums for p in parts], axis=0),
                 **{k: np.concatenate([p.degrees[k] for p in parts]) for k in parts[0].degrees}}
        self.summaries_from = "store" if matches(header, found) else CHANGED
        if self.summaries_from == "store":
            self.stored = self.caches.stored_slices(self.block_rows)
        return [p.partials for p in parts]

    def after_full_pass(self):
        """Every block has seen every label: no pending raise or fall (per chunk, each
        chunk's bounds reset at its next query)."""
        e = self.engine
        if self.summaries_from is None:    # (a restored state: its pass checked nothing)
            self.summaries_from = "computed: a restored search does not check stored summaries"
        self.base, self.told, self.stale = e.n_labeled, 0, False
        self.caches.after_full_pass(self._bounds_over_x, lambda bb: bb.reset(e.n_labeled))

    def _bounds_over_x(self):
        """The BlockBounds of every block of X, from the stored summaries when they hold."""
        e = self.engine
        self.chunk, start, stop = block_layout(e.store.chunks, self.block_rows)
        stored = read_stored(e.store, ("centre", "radius"), self.block_rows) \
            if self.summaries_from == "store" else None
        if stored is not None:
            centre, radius = stored["centre"], stored["radius"]
        else:
            if self.summaries_from == "store":
                self.summaries_from = "computed: the stored summaries were replaced meanwhile"
            centre, radius = (np.concatenate(c) for c in zip(*e.backend.map(BALLS, self.block_rows)))
        return BlockBounds(centre, radius, start, stop, e.n_labeled)

    def labels_told(self, idx, lab):
        """Record new labels without a pass; False when the batch needs a full pass.
        Here they reach the chunks and the bounds now; per chunk, with the next query."""
        if len(idx) > FUSED_LABELS:
            return False
        e = self.engine
        Z, signs = e.store.read_rows(idx), 2.0 * e.label_values(idx) - 1.0
        self.caches.hear((self.base + self.told, Z, signs, idx, lab), self._heard)
        self.told += len(idx)
        self.stale = True
        return True

    def _heard(self, bb, batch):
        _, Z, signs, idx, lab = batch
        labels_into_chunks(self.engine, idx, lab, apply_labels_to_chunk)
        bb.record(Z, signs)

    def top(self, k):
        return self.caches.top(k, self._top_here, CHUNK_TOP, self._chunk_args, self._lost)

    def _top_here(self, bb, k):
        e = self.engine
        f, label = e.backend.gather("f"), e.labels

        def visit(blocks):
            self._read(blocks)
            idx, fu, _ = rows_of(bb.start[blocks], bb.stop[blocks], f, label)
            return idx, fu
        out = best_first(bb.bounds(e.backend.gather("num"), e.backend.gather("den"), label), k, visit)
        bb.forget()
        return out

    def catch_up(self):
        """Every block brought up to date (what ``f`` and saving need): reads all of X."""
        if self.active and self.stale:
            self.caches.catch_up(self._catch_up_here, CHUNK_TOP, self._chunk_args, self._lost)
            self.engine.count_read(self.engine.store.nbytes)
            self.stale = False

    def _catch_up_here(self, bb):
        stale = np.flatnonzero(bb.version < bb.count)
        self._read(stale)
        bb.forget()
        return int((bb.stop[stale] - bb.start[stale]).sum())

    def _chunk_args(self):
        return self.base, self.block_rows, self.stored

    def _lost(self):
        """A lost worker's chunks were rebuilt from every label by the recipe: every
        chunk's sums recomputed the same way (one pass), its bounds then reset."""
        e = self.engine
        e.rebuild_everywhere()
        e.count_read(e.store.nbytes)
        self.after_full_pass()

    def _read(self, blocks):
        """Bring these blocks' rows up to date, where their chunks are (caches here)."""
        e, bb = self.engine, self.blocks
        missed = {}
        for b in np.sort(blocks):
            c = int(self.chunk[b])
            first = e.store.chunks[c][0]
            missed.setdefault(c, []).append((bb.start[b] - first, bb.stop[b] - first, bb.missed(b)))
        self.caches.read(CATCH_UP, missed)
        bb.mark_read(blocks)


def catch_up_step(x, state, missed):
    """The chunk's blocks of ``missed`` ({chunk: [(a, z, batches missed), ...]}) brought up to date."""
    for a, z, batches in missed[state.chunk_id]:
        _catch_up_rows(x, state, a, z, batches)


CATCH_UP = ChunkStep(catch_up_step, whole_chunk=False)


def chunk_top_step(x, state, k, sent, base, block_rows, stored=None):
    """A chunk's exact top k (k = 0: every block brought up to date), reading only the
    blocks that could hold it. Its bounds live in its state: built at the first call
    (reading the chunk once, or, with ``stored``, its blocks' centres and radii from the
    stored summaries, which the engine checked: (store source, each chunk's first
    block)), reset when the generation changes (a full pass applied the first ``base``
    labels everywhere); ``sent.news`` are the batches of labels told since the last
    call, (number, labels before it, Z, signs, indices, labels)."""
    bb = getattr(state, "wnas_blocks", None)
    built = False                                # built by reading the chunk
    if bb is None:
        start = np.arange(0, n_rows(x), block_rows)
        got = None if stored is None else read_chunk_summaries(
            stored[0], int(stored[1][state.chunk_id]), len(start), ("centre", "radius"), block_rows)
        if got is None:
            centre, radius = ball_step(x, state, block_rows)
            built = True
        else:
            centre, radius = got["centre"], got["radius"]
        bb = state.wnas_blocks = BlockBounds(centre, radius, start, np.minimum(start + block_rows, n_rows(x)), base)
    elif state.wnas_generation != sent.generation:
        bb.reset(base)
    state.wnas_generation = sent.generation
    for _, before, Z, signs, idx, lab in sent.news:
        assert before == bb.count, "a batch of labels went missing"
        state.apply_labels(idx, lab)
        bb.record(Z, signs)

    def visit(blocks):
        for b in np.sort(blocks):
            _catch_up_rows(x, state, bb.start[b], bb.stop[b], bb.missed(b))
        bb.mark_read(blocks)
        idx, fu, _ = rows_of(bb.start[blocks], bb.stop[blocks], state.f, state.label)
        return idx, fu
    if k == 0:
        stale = np.flatnonzero(bb.version < bb.count)
        idx, sc, rows = np.zeros(0, np.int64), np.zeros(0), len(visit(stale)[0]) if len(stale) else 0
    else:
        idx, sc, rows = best_first(bb.bounds(state.num, state.den, state.label), k, visit)
    bb.forget()
    return ChunkTop(idx + state.start, sc, n_rows(x) if built else rows)     # built: the chunk was read


# It updates state it did not create: a lost chunk is rebuilt by the engine's recipe,
# whose partials are not a ChunkTop, and the engine recomputes and asks again (WNASPruning._lost).
CHUNK_TOP = ChunkStep(chunk_top_step, whole_chunk=False)
