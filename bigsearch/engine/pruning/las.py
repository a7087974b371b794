"""Exact pruned selection for LAS (alpha = 0): a query reads only the blocks of rows
that could hold the answer.

With alpha = 0 the query is the unlabeled point with the highest

    f_i = q_unl + b_unl (x_i . u) / d_i,        u = K^-1 X^T q,

and q_unl, b_unl, d_i do not change while i is unlabeled. X is cut into blocks of
``block_rows`` rows (runs of rows inside a chunk). Each block keeps the highest f of its
unlabeled rows at the u at which it was last read (u_s). Between u_s and now (u_t),
split the change as u_t - u_s = a s + w with s = X^T 1: since x_i . s = d_i, the shift
a s moves every unlabeled f_i by exactly b_unl a, and only w needs a bound:

    x_i . w <= c . w + sum_j max(lo_j (P^T w)_j, hi_j (P^T w)_j) + R_perp ||w - P P^T w||
    x_i . w <= c . w + R ||w||

where c is the block's centroid, P an orthonormal basis of the top eigenvectors of
X^T diag(rho) X (the directions K^-1 amplifies, hence where u moves), [lo, hi] the
block's box in that basis, R_perp the largest norm of a row's part outside it and R the
block's radius. Dividing the smaller of the two by the block's smallest degree (largest
when it is negative) bounds every unlabeled f_i of the block without reading it.

A query reads blocks best bound first in growing batches, recomputes their f exactly
(the full pass's kernel, ``update_scores``, run on the block's rows: the same
arithmetic, bit for bit), and stops when the k-th best f read so far exceeds every
remaining bound plus a rounding margin (``SAFETY`` relative to the magnitudes involved).
Unread points all score strictly below it, so the answer, ties to the lowest index
included, is the full pass's. A label lowers its block's cached maximum to the best
remaining row's f (kept in memory), so a block is re-read only when u moved enough.

The bookkeeping stays small at any n (``GroupedOrder``): blocks are grouped by
GROUP_BLOCKS, a group has summaries of a block's form (``group_summaries``, in
engine/pruning/block_summaries.py with the blocks' own), and a query
bounds every group (kernels/pruning.py, one pass, no temporaries), then the blocks of a
group only when the group's bound reaches the blocks about to be read, sorting only
those; a block's bound is the smaller of its own and its group's. Each block's version
is a row of a small table of the u's in use, counted as blocks move.

The same Pruner serves linear scores f_i = c + x_i . u (BLR's predictive mean,
engine/pruning/blr.py): built with ``s=None`` and b = 1 over summaries whose degrees are
all 1, it takes u with the constant c as its last entry, and the shift is the change of
c (it moves every f by exactly that), so the bound is the same formula; when the
cached maxima are of f alone (``rescale``), a version's u_v is also tried scaled,
u_t - alpha u_v with alpha >= 0 (f - c at alpha u_v is alpha (f_v - c_v), bounded by
alpha (best - c_v)), and the smaller bound holds. Scores that
only fall as labels arrive may be added to such f (BLR's UCB term): the cached
maximum plus the bound still bounds them (``rounding`` covers their rounding).

alpha > 0 is not pruned: the rescaling of the impact factor needs sums of IM over all
unlabeled points, so those queries keep the full pass (``status`` says which).

On the dask backend, ``chunk_top_step`` does the same inside each chunk, with the
chunk's summaries and cache in its state on the worker (set from the chunk's f right
after each full pass, ``chunk_prepare_step``), and returns the chunk's exact top k; the
driver merges them (one round trip per query). On the local backend the blocks read are
recomputed where their chunks are, by ``Backend.map_chunks``. Which of the two, and what
they do alike, is engine/pruning/placement.py's.
"""

import numpy as np

from ...backends import ChunkStep
from ...kernels.las import update_scores
from ...kernels.pruning import block_bounds, group_bounds, unlabeled_maxima
from ...storage.encoding import Encoded, decode, n_rows
from ..core.select import best_ranked
from . import summaries as saved  # the summaries saved with the store
from .block_summaries import (
    DEFAULT_BASIS,
    BlockSummaries,
    SummaryColumns,
    compute_summaries,
    gram_basis,
    summary_step,
)
from .placement import ChunkTop, PlacedPruning

SAFETY = 1e-9          # relative margin for rounding (dot products of length r err ~1e-14)
NO_LABELS = np.zeros(0)
MAX_BATCH = 64         # blocks read per round, at most (rounds grow 1, 2, 4, ...)


class Pruner:
    """Cached block maxima, and the blocks' bounds at a new u (see the module).

    Each block remembers the clock of the u at which it was last read (``version``: forks
    compare them, serve/fork.py) and the row of the version table holding that u
    (``slot``). The table counts its blocks per version, so a query finds the versions
    still in use without scanning all blocks, and a version no block holds frees its row."""

    def __init__(self, summaries, s, b_unl):
        self.sm = summaries
        self.s = s                           # None: linear scores, u's last entry is the constant c
        self.ss = float(s @ s) if s is not None else 0.0
        self.b = b_unl
        self.rounding = 0.0                  # the rounding scale of score terms outside f (linear scores)
        self.rescale = False                 # linear scores, maxima of f alone: a version's u may be scaled
        nb = summaries.n_blocks
        self.best = np.full(nb, -np.inf)     # max f of unlabeled rows, at the block's version
        self.version = np.zeros(nb, np.int64)
        self.slot = np.zeros(nb, np.int32)
        self.clock = 0
        self._every_block_at(np.zeros(len(s) if s is not None else summaries.basis.shape[0] + 1), 0)

    def _every_block_at(self, u, version):
        self.table_u = u.astype(np.float64)[None, :].copy()   # (slots, r): the u of each version in use
        self.table_version = np.array([version], np.int64)
        self.table_count = np.array([self.sm.n_blocks], np.int64)
        self.version[:] = version
        self.slot[:] = 0

    def unknown(self, u):
        """No block read yet: each must be read once (its bound is +inf)."""
        self.clock += 1
        self._every_block_at(u, self.clock)
        self.best[:] = np.inf

    def reset(self, u, f, label):
        """Every block's maximum from f computed at u (after a full pass)."""
        self.clock += 1
        self._every_block_at(u, self.clock)
        self.best = unlabeled_maxima(f, label, self.sm.start, self.sm.stop, np.empty(self.sm.n_blocks))

    def labeled(self, idx, f, label):
        """New labels: their blocks' maxima over the rows still unlabeled (f in memory is
        the f of each block's version, so the bound stays valid and gets tighter)."""
        for b in np.unique(self.block_of(idx)):
            a, e = self.sm.start[b], self.sm.stop[b]
            fu = np.where(label[a:e] < 0, f[a:e], -np.inf)
            self.best[b] = fu.max()

    def block_of(self, idx):
        return np.searchsorted(self.sm.start, np.asarray(idx), side="right") - 1

    def _slot_of_clock(self, u):
        """The table row of the current clock's u (a free row, or a new one)."""
        hit = np.flatnonzero(self.table_version == self.clock)
        if len(hit):
            return int(hit[0])
        free = np.flatnonzero(self.table_count == 0)
        if len(free):
            s = int(free[0])
        else:
            s = len(self.table_count)
            self.table_u = np.vstack([self.table_u, np.zeros((1, self.table_u.shape[1]))])
            self.table_version = np.append(self.table_version, 0)
            self.table_count = np.append(self.table_count, 0)
        self.table_u[s] = u
        self.table_version[s] = self.clock
        return s

    def _now_at(self, blocks, u):
        """These blocks were just read at u (the current clock)."""
        s = self._slot_of_clock(u)
        self.table_count -= np.bincount(self.slot[blocks], minlength=len(self.table_count))
        self.table_count[s] += len(blocks)
        self.slot[blocks] = s
        self.version[blocks] = self.clock

    def version_terms(self, u):
        """What the bound kernel needs per row of the version table (u_v) and per scale
        alpha of it (``ways`` rows per version, ``_scales``): a and alpha, with
        u - alpha u_v = a s + w (linear scores: a the change of c, w of the rest),
        ||w - P P^T w||, ||w||, alpha ||u_v|| + ||u|| and the constants' magnitudes (the
        rounding margin's scale), w and P^T w; then b, the margin and ``ways``."""
        alpha = self._scales(u)
        ways = alpha.shape[1]
        alpha = alpha.ravel()
        table_u = np.repeat(self.table_u, ways, axis=0)
        delta = u[None, :] - alpha[:, None] * table_u
        if self.s is None:
            a, W, table = delta[:, -1], delta[:, :-1], table_u[:, :-1]
            c_mags = alpha * np.abs(table_u[:, -1]) + abs(u[-1]) + self.rounding
            u = u[:-1]
        else:
            a = delta @ self.s / self.ss
            W, table, c_mags = delta - a[:, None] * self.s[None, :], table_u, np.zeros(len(delta))
        PW = W @ self.sm.basis
        w_perp = np.linalg.norm(W - PW @ self.sm.basis.T, axis=1)
        w_norm = np.linalg.norm(W, axis=1)
        u_norms = alpha * np.linalg.norm(table, axis=1) + np.linalg.norm(u)
        return (a, alpha, w_perp, w_norm, u_norms, c_mags, np.ascontiguousarray(W), np.ascontiguousarray(PW),
                self.b, SAFETY, ways)

    def _scales(self, u):
        """The scales alpha of each version's u_v that the bounds try, (versions, ways):
        1, and with ``rescale`` (linear scores whose cached maxima are of f alone) also
        the alpha >= 0 nearest u (least squares on the weights). A block's unlabeled rows
        score alpha (f_v - c_v) + c + x . (w - alpha w_v) at u, and alpha (best - c_v)
        bounds the first term: when w was scaled (a refit of BLR's lam and noise), a
        bound on x . (w - w_v) alone pays for the whole change."""
        ones = np.ones((len(self.table_u), 1))
        if not self.rescale:
            return ones
        Wv = self.table_u[:, :-1]
        sq = np.einsum("ij,ij->i", Wv, Wv)
        nearest = np.where(sq > 0, np.maximum(Wv @ u[:-1], 0.0) / np.where(sq > 0, sq, 1.0), 1.0)
        return np.hstack([ones, nearest[:, None]])

    def bounds(self, u):
        """Per block, an upper bound (rounding margin included) on f at u of its unlabeled
        rows: one pass of the kernel over every block's summaries. (Queries bound groups
        first, ``GroupedOrder``; this is for the tests and benchmarks.)"""
        sm = self.sm
        return block_bounds(np.arange(sm.n_blocks), self.best, self.slot, self.version_terms(u), sm.centre, sm.lo,
                            sm.hi, sm.radii, np.empty(sm.n_blocks))

    def reference_bounds(self, u):
        """``bounds`` in NumPy, the formula the kernel follows (kept for the tests)."""
        sm = self.sm
        a, alpha, w_perp, w_norm, u_norms, c_mags, W, PW, _, _, ways = self.version_terms(u)
        out = np.full(sm.n_blocks, np.inf)
        for k in range(ways):
            inv = self.slot * ways + k
            cw = np.einsum("ij,ij->i", sm.centre, W[inv])
            box = np.maximum(sm.lo * PW[inv], sm.hi * PW[inv]).sum(axis=1)
            spread = np.minimum(box + sm.radius_perp * w_perp[inv], sm.radius * w_norm[inv])
            ub = cw + spread
            drift = np.where(ub >= 0, ub / sm.deg_min, ub / sm.deg_max)
            with np.errstate(invalid="ignore"):
                scale = (alpha[inv] * np.abs(self.best) + self.b * (np.abs(a[inv]) + c_mags[inv])
                         + self.b * (np.abs(cw) + spread + sm.norm_max * u_norms[inv]) / sm.deg_min)
                out = np.minimum(out, alpha[inv] * self.best + self.b * (a[inv] + drift) + SAFETY * scale)
        return np.where(np.isinf(self.best), self.best, out)   # no unlabeled row: -inf; never read: +inf

    def top(self, k, u, read, f, label, floor=-np.inf):
        """The k best unlabeled points at u: (indices, scores, rows read); with ``floor``,
        only those scoring at least ``floor``.

        ``read(blocks)`` recomputes f for those blocks' rows (into ``f``)."""
        self.clock += 1

        def visit(blocks):
            read(blocks)
            idx, fu, first = rows_of(self.sm.start[blocks], self.sm.stop[blocks], f, label)
            self.best[blocks] = np.maximum.reduceat(fu, first)
            self._now_at(blocks, u)
            return idx, fu
        return best_first(GroupedOrder(self, self.version_terms(u)), k, visit, floor)


class Descending:
    """Blocks in decreasing order of their bound (ties: the lower index first), without
    the blocks whose bound is -inf, sorted lazily: a query visits a few blocks from the
    top, so only the blocks above a cut are sorted, and the cut moves down (4x as many
    blocks each time) only when the visits get there."""

    FIRST = 64

    def __init__(self, bound):
        if np.isnan(bound).any():            # no block to visit (as argsort puts NaN last)
            bound = np.where(np.isnan(bound), -np.inf, bound)
        self.bound = bound
        self.order = np.zeros(0, np.int64)   # every block with bound >= cut, sorted
        self.cut = np.inf
        self.p = 0                           # blocks already taken by ``next``

    def head(self, stop, floor):
        """order[:stop], or fewer when all blocks with bound >= floor are in it."""
        while len(self.order) < stop and self.cut > floor:
            self._extend(max(self.FIRST, 4 * len(self.order), stop), floor)
        return self.order[:stop]

    def _extend(self, count, floor):
        b = self.bound
        cut = floor
        if count < len(b):
            cut = max(cut, np.partition(b, len(b) - count)[len(b) - count])
        sel = np.flatnonzero(b >= cut) if cut > -np.inf else np.flatnonzero(b > -np.inf)
        self.order = sel[np.argsort(-b[sel], kind="stable")]
        self.cut = cut

    def next(self, count, floor):
        """The next (at most) ``count`` blocks in order whose bound is >= floor, and their bounds."""
        take = self.head(self.p + count, floor)[self.p:]
        take = take[self.bound[take] >= floor]
        self.p += len(take)
        return take, self.bound[take]


class GroupedOrder:
    """Blocks in decreasing order of their bound, ties to the lower index, where a block's
    bound is the smaller of its own and its group's (both hold for its rows): every
    group is bounded (GROUP_BLOCKS times fewer than blocks; a group whose blocks are at
    several versions once per version, with the largest cached maximum at each), and a
    group's blocks only once the group's bound reaches the blocks about to be visited,
    so a query that visits a few blocks bounds a few groups' blocks."""

    def __init__(self, pruner, terms):
        self.pr, self.terms = pruner, terms
        gs = self.gs = pruner.sm.grouped()
        self.group_bound = group_bounds(gs.start, pruner.best, pruner.slot, terms, gs.centre, gs.lo, gs.hi,
                                        gs.radii, np.empty(gs.n_blocks))
        self.groups = Descending(self.group_bound)
        self.pending, self.pending_bound = np.zeros(0, np.int64), np.zeros(0)  # bounded, not visited, in order

    def next(self, count, floor):
        """The next (at most) ``count`` blocks in order whose bound is >= floor, and their bounds."""
        wave = 1
        while True:      # bound the blocks of every group that could reach the next ``count``
            cut = floor if len(self.pending) < count else max(floor, self.pending_bound[count - 1])
            groups, _ = self.groups.next(wave, cut)
            if not len(groups):
                break
            self._bound_blocks(groups)
            wave *= 2
        n = int(np.count_nonzero(self.pending_bound[:count] >= floor))
        take, bound = self.pending[:n], self.pending_bound[:n]
        self.pending, self.pending_bound = self.pending[n:], self.pending_bound[n:]
        return take, bound

    def _bound_blocks(self, groups):
        first, stop = self.gs.start[groups], self.gs.stop[groups]
        blocks, _ = ranges(first, stop)
        pr = self.pr
        bound = block_bounds(blocks, pr.best, pr.slot, self.terms, pr.sm.centre, pr.sm.lo, pr.sm.hi, pr.sm.radii,
                             np.empty(len(blocks)))
        bound = np.minimum(bound, np.repeat(self.group_bound[groups], stop - first))
        keep = bound > -np.inf
        blocks = np.concatenate([self.pending, blocks[keep]])
        bound = np.concatenate([self.pending_bound, bound[keep]])
        order = np.lexsort((blocks, -bound))
        self.pending, self.pending_bound = blocks[order], bound[order]


def best_first(order, k, visit, floor=-np.inf):
    """Visit blocks in decreasing order of their bound, in batches of 1, 2, 4, ... 64,
    until the k-th best score seen exceeds every remaining bound: (indices, scores of
    the k best, ties to the lowest index; rows visited). ``order``: every block's bound,
    or an object giving blocks in that order (``Descending``, ``GroupedOrder``).
    ``visit(blocks)`` brings those blocks up to date and returns their rows and scores
    (-inf for labeled rows). ``floor``: a score known to be at most the k-th best overall
    (blocks below it are not visited, and fewer than k points may come back)."""
    if isinstance(order, np.ndarray):
        order = Descending(order)
    top_idx, top_f = np.zeros(0, np.int64), np.zeros(0)
    kth, batch, rows = floor, 1, 0
    while True:
        take, _ = order.next(batch, kth)
        if not len(take):
            break
        idx, fu = visit(take)
        rows += len(idx)
        keep = (fu >= kth) & (fu > -np.inf)       # unlabeled rows that can still make the top k
        top_idx, top_f = best_ranked(np.concatenate([top_idx, idx[keep]]), np.concatenate([top_f, fu[keep]]), k)
        if len(top_f) == k:
            kth = top_f[-1]
        batch = min(2 * batch, MAX_BATCH)
    return top_idx, top_f, rows


def ranges(start, stop):
    """The integers of the ranges [start, stop), one after the other, and where each
    range begins among them."""
    lens = stop - start
    first = np.concatenate([[0], np.cumsum(lens)[:-1]]).astype(np.int64)
    return np.arange(lens.sum()) + np.repeat(start - first, lens), first


def rows_of(start, stop, f, label):
    """The rows of blocks [start, stop), their f (-inf when labeled), and where each
    block's rows begin."""
    idx, first = ranges(start, stop)
    return idx, np.where(label[idx] < 0, f[idx], -np.inf), first


class LASPruning(PlacedPruning):
    """LAS's :class:`~bigsearch.engine.pruning.contract.Pruning` (contract.py): a Pruner
    over blocks of X, placed by engine/pruning/placement.py (one for all of X here, or
    one per chunk where the chunks live).

    ``status`` says whether queries are pruned, and why not when they are not.
    """

    def __init__(self, engine, options=None):
        super().__init__(engine, options)
        self.basis_dim = self.options.basis_dim or DEFAULT_BASIS
        self.summaries = None        # the blocks' summaries over all of X (caches here)
        self.summaries_from = None   # "store", or "computed: why not from the store"
        self.basis, self.u_reset = None, None
        self.stored = None           # for the workers: where their slices of the stored summaries are
        self.candidates = np.zeros(0, np.int64)  # the chunks' top k of the last query (per chunk)
        if engine.params.alpha != 0:
            self.status = ("off: alpha > 0 needs sums of the impact factor over all unlabeled points "
                           "(its rescaling), so every query is a full pass")
        else:
            self.status = self.caches.status(f"on: exact pruning of blocks of {self.block_rows} rows (alpha = 0)")

    @property
    def pruner(self):
        """The Pruner over all of X (None when each chunk keeps its own)."""
        return self.caches.cache

    def after_full_pass(self, G=None):
        """Every block is fresh: (re)build the summaries if needed, reset the caches."""
        if not self.active:
            return
        e = self.engine

        def basis():
            if self.basis is None:
                self.basis = gram_basis(G if G is not None else np.eye(e.store.r) - e.K, self.basis_dim)
            return self.basis

        def build():
            if self.summaries is None:
                self.summaries, self.summaries_from = saved.stored_summaries(e.store, self.block_rows, e.s,
                                                                             e.backend.gather("deg"))
            if self.summaries is None:
                self.summaries = compute_summaries(e.backend.map, e.store.chunks, basis(), self.block_rows)
            self.basis = self.summaries.basis
            return Pruner(self.summaries, e.s, 1.0 / (1.0 + e.params.w0))

        def prepare():          # the workers reset their chunks' caches now, from f at u
            if self.summaries_from is None:
                self._find_stored_for_workers()
            self.u_reset = self.u()
            return CHUNK_PREPARE, (self.u_reset, basis(), self.block_rows, e.s, e.params.w0, self.stored)

        self.caches.after_full_pass(build, lambda pr: pr.reset(self.u(), e.backend.gather("f"), e.labels), prepare)
        self.stale = False

    def _find_stored_for_workers(self):
        """Per chunk: when the store's summaries fit X as far as the driver can tell
        (fingerprint, column sums), their basis is used and each worker reads its chunks'
        slice, which it uses only if its chunks' degrees match (``chunk_summaries``)."""
        e = self.engine
        header, self.summaries_from = saved.stored_header(e.store, self.block_rows)
        if header is None:
            return
        if not np.array_equal(header["s"], e.s):
            self.summaries_from = saved.CHANGED
            return
        got = saved.read_stored(e.store, ("basis",), self.block_rows)
        if got is None:
            self.summaries_from = saved.CHANGED
            return
        self.basis = got["basis"]
        self.stored = self.caches.stored_slices(self.block_rows)
        self.summaries_from = "store, where each worker's chunks' degrees match (chunk_summaries_from())"

    def chunk_summaries_from(self):
        """Per chunk: where its summaries came from ("store", or "computed: why"), None
        before its first pruned query."""
        e = self.engine
        return e.backend.map_state(_summaries_from, list(range(e.store.n_chunks)))

    def u(self):
        e = self.engine
        return e.score_vectors()[0]   # exactly the first row of the full pass's V

    def labels_told(self, idx, lab):
        """Apply new labels to the per-point state without a pass over X."""
        e = self.engine
        self.caches.tell(idx, lab, apply_labels_to_chunk, lambda pr: pr.labeled(idx, e.backend.gather("f"), e.labels))
        self.stale = True
        return True

    def catch_up(self):
        """Nothing to replay: f at u depends on no history, so the search's next full
        pass brings every block up to date."""

    def top(self, k):
        e, p = self.engine, self.engine.params
        u = self.u()

        def here(pr, k):
            return pr.top(k, u, lambda blocks: self._read(blocks, u), e.backend.gather("f"), e.labels)

        def args():             # per chunk: a floor from the last query's candidates
            V = np.stack([u, e.score_vectors()[1]])
            return (u, V, self.u_reset, self.basis, self.block_rows, e.s, p.eta, p.w0, p.pi, self._floor(k, u),
                    self.stored)

        idx, sc = self.caches.top(k, here, CHUNK_TOP, args)
        self.candidates = self.caches.found
        self.stale = True
        return idx, sc

    def _floor(self, k, u):
        """A score at most the k-th best at u, from the points the chunks returned last
        time that are still unlabeled (their rows read here: a few, counted), with a
        rounding margin; -inf when there are fewer than k. Chunks skip blocks whose bound
        is below it, so a chunk far from the best reads nothing."""
        e = self.engine
        cand = self.candidates[e.labels[self.candidates] < 0]
        if len(cand) < k:
            return -np.inf
        x = decode(e.store.read_stored_rows(cand))
        deg = x @ e.s                 # the degrees as NumPy rounds them: the margin covers it
        b = 1.0 / (1.0 + e.params.w0)
        f = e.params.pi * e.params.w0 / (1.0 + e.params.w0) + b * (x @ u) / deg
        kth = np.sort(f)[-k]
        margin = SAFETY * (abs(kth) + b * (np.linalg.norm(x, axis=1) * np.linalg.norm(u) / np.abs(deg)).max())
        self.caches.count(len(cand))
        return kth - margin

    def _read(self, blocks, u):
        """Recompute f at u for these blocks from X, where their chunks are: each chunk
        opened once, each run of adjacent blocks one kernel call."""
        e, p = self.engine, self.engine.params
        V = np.stack([u, e.score_vectors()[1]])
        runs = {}
        for c, a, z, _ in chunk_runs(self.summaries, blocks, e.store.chunks):
            runs.setdefault(c, []).append((a, z))
        self.caches.read(SCORE_RUNS, runs, V, p.eta, p.w0, p.pi)


def chunk_runs(sm, blocks, chunks):
    """The blocks as runs of adjacent blocks inside a chunk: (chunk, a, z, the run's
    blocks) with its rows a:z counted from the chunk's first (``chunks``: each chunk's
    (start, stop) in X)."""
    blocks = np.sort(blocks)
    breaks = np.flatnonzero((sm.chunk[blocks[1:]] != sm.chunk[blocks[:-1]]) | (blocks[1:] != blocks[:-1] + 1)) + 1
    for run in np.split(blocks, breaks):
        c = int(sm.chunk[run[0]])
        first = chunks[c][0]
        yield c, int(sm.start[run[0]] - first), int(sm.stop[run[-1]] - first), run


def score_runs_step(x, state, runs, V, eta, w0, pi):
    """f at V's u of the chunk's runs of rows (``chunk_runs``), by the full pass's kernel."""
    for a, z in runs[state.chunk_id]:
        _score_rows(x, state, a, z, V, eta, w0, pi)


SCORE_RUNS = ChunkStep(score_runs_step, whole_chunk=False)


def _score_rows(x, st, a, z, V, eta, w0, pi):
    """f (and, as a by-product, IM from the stale J) of a chunk's rows a:z, by the full
    pass's kernel."""
    update_scores(row_range(x, a, z), V, NO_LABELS, 0, st.label[a:z], st.deg[a:z], st.J[a:z], st.f[a:z], st.im[a:z],
                  eta, w0, pi, 0.0)


def chunk_top_step(x, state, k, sent, u, V, u_reset, basis, block_rows, s, eta, w0, pi, floor=-np.inf,
                   stored=None):
    """A chunk's exact top k at u, reading only the blocks that could hold it; the
    chunk's summaries and cache live in its state (built by ``chunk_prepare_step`` after
    each full pass; here only for a chunk rebuilt after a lost worker, every block then
    read once). Blocks whose bound is below ``floor`` (at most the k-th best score over
    all chunks) are not read. ``sent``: engine/pruning/placement.py's ``Sent``."""
    pr = chunk_pruner(x, state, lambda: chunk_summaries(x, state, basis, block_rows, stored), basis, block_rows,
                      s, 1.0 / (1.0 + w0), u, sent.generation, u_reset)

    def read(blocks):
        for run in adjacent_runs(blocks):
            _score_rows(x, state, pr.sm.start[run[0]], pr.sm.stop[run[-1]], V, eta, w0, pi)
    idx, sc, rows = pr.top(k, u, read, state.f, state.label, floor)
    return ChunkTop(idx + state.start, sc, rows)


def chunk_pruner(x, state, summaries, basis, block_rows, s, b, u, generation, u_reset, fresh=False, score="f",
                 make=Pruner):
    """The Pruner of a chunk on a worker (the dask backend), kept in its state: built at the
    first call, ``make(summaries, s, b)``, from ``summaries()`` (the chunk's block summary
    columns, computed only then);
    ``fresh`` (right after a full pass: the chunk's scores, its array ``score``, are all at
    ``u_reset``) its cache is then set from them, else (a chunk rebuilt after a lost worker)
    every block is unknown at u; when ``generation`` changed (a full pass since), its cache
    is rebuilt from the chunk's scores at ``u_reset``."""
    pr = getattr(state, "pruner", None)
    if pr is None:
        start = np.arange(0, n_rows(x), block_rows)
        sm = BlockSummaries(block_rows, np.zeros(len(start), np.int64), start,
                            np.minimum(start + block_rows, n_rows(x)), basis, *summaries())
        pr = state.pruner = make(sm, s, b)
        if fresh:
            pr.reset(u_reset, getattr(state, score), state.label)
        else:
            pr.unknown(u)
    elif state.pruner_generation != generation:
        pr.reset(u_reset, getattr(state, score), state.label)
    state.pruner_generation, state.pruner_score = generation, score
    return pr


def chunk_prepare_step(x, state, generation, u_reset, basis, block_rows, s, w0, stored=None):
    """Right after a full pass (the chunk's f at ``u_reset``): the chunk's Pruner built (its
    summaries read or computed the first time) or reset, so that even its first pruned
    query reads only the blocks its bounds require (as the local backend's)."""
    chunk_pruner(x, state, lambda: chunk_summaries(x, state, basis, block_rows, stored), basis, block_rows, s,
                 1.0 / (1.0 + w0), u_reset, generation, u_reset, fresh=True)


# It updates state it did not create: a lost chunk is rebuilt by the engine's recipe
# instead, and its Pruner is built at its next query (every block unknown).
CHUNK_PREPARE = ChunkStep(chunk_prepare_step, whole_chunk=False)


def adjacent_runs(blocks):
    """``blocks`` sorted and split into runs of consecutive block numbers (each run is
    read by one kernel call)."""
    blocks = np.sort(blocks)
    return np.split(blocks, np.flatnonzero(blocks[1:] != blocks[:-1] + 1) + 1)


# It updates state it did not create: a lost chunk is rebuilt by the engine's recipe,
# whose partials are not a ChunkTop, and the query is asked again (placement.py).
CHUNK_TOP = ChunkStep(chunk_top_step, whole_chunk=False)


def chunk_summaries(x, state, basis, block_rows, stored):
    """A chunk's block summaries (``summary_step``'s columns): with ``stored`` (the store's
    source, each chunk's first block), its slice of the stored ones when they were made
    with ``basis`` and its blocks' degrees are the stored ones (engine/pruning/summaries.py), read
    where the chunk is; else computed from x. ``state.summaries_from`` says which."""
    if stored is not None:
        start = np.arange(0, n_rows(x), block_rows)
        got = saved.read_chunk_summaries(stored[0], int(stored[1][state.chunk_id]), len(start),
                                         (*saved.FIELDS, "deg_sum"), block_rows)
        degrees = saved.block_degrees(state.deg, start)
        if got is not None and np.array_equal(got["basis"], basis) and saved.matches(got, degrees):
            state.summaries_from = "store"
            return SummaryColumns(*(got[k] for k in saved.FIELDS if k != "basis"))
        state.summaries_from = saved.CHANGED
    else:
        state.summaries_from = "computed"
    return summary_step(x, state, basis, block_rows)


def _summaries_from(state):
    return getattr(state, "summaries_from", None)


def row_range(x, a, z):
    """Rows a:z of a chunk, as a view (a copy of every block read cost more than the kernel)."""
    if isinstance(x, Encoded):
        return Encoded(x.codes[a:z], x.scale[a:z] if len(x.scale) else x.scale, x.n_features)
    return x[a:z]


def apply_labels_to_chunk(state, idx, lab):
    """Labels into a chunk's state, and into its pruner's block cache when it has one."""
    state.apply_labels(idx, lab)
    pr = getattr(state, "pruner", None)        # a worker's chunk (dask backend)
    if pr is not None:
        inside = (idx >= state.start) & (idx < state.stop)
        pr.labeled(idx[inside] - state.start, getattr(state, state.pruner_score), state.label)
