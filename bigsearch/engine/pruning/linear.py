"""Exact pruned queries for scores linear in x: f_i = c + x_i . w, refitted without a pass.

BLR's greedy mean (engine/pruning/blr.py) and screen's classifier (engine/methods/screen.py)
score so, their w and c refitted between queries from small sums (no pass over X). Since
a block was last read (its version, at w_s and c_s), every f_i of the block has changed
by exactly (c_t - c_s) + x_i . (w_t - w_s): LAS's form (engine/pruning/las.py) with
degrees 1, b = 1 and the change of the constant as the shift, so the same ``Pruner``
bounds it (built with ``s=None``: u carries the constant as its last entry, and the
summaries are computed with degrees 1, over a basis of the top eigenvectors of X^T X).
A refit may scale or turn w as it likes: f stays linear in x, so the bounds hold; with
``rescale`` (the cached maxima are of f alone) the Pruner also tries each version's u
scaled and keeps the smaller bound.

:class:`LinearPruning` is the machinery both share (the contract of contract.py, placed
by placement.py). A method gives it u = [w, c] (``u()``) and a :class:`RowScorer`: its
full pass's kernel on the rows of the blocks a query reads (the same arithmetic, bit for
bit, so the queries are the full pass's), a small record that travels to the workers on
the dask backend. Scores that are not f alone (BLR's UCB) extend it through the
scorer's hooks.
"""

from typing import Any, NamedTuple

import numpy as np

from ...backends import ChunkStep
from ...storage.encoding import n_features, n_rows
from ..core.steps import decoded_blocks
from .block_summaries import DEFAULT_BASIS, BlockSummaries, block_layout, gram_basis, summary_step
from .las import Pruner, adjacent_runs, apply_labels_to_chunk, chunk_pruner, chunk_runs
from .placement import ChunkTop, PlacedPruning

NO_BLOCKS = np.zeros(0, np.int64)


def gram_step(x, state):
    """A chunk's X^T X (float64): the basis of the block summaries."""
    G = np.zeros((n_features(x),) * 2)
    for _, xb in decoded_blocks(x):
        G += xb.T @ xb
    return G


GRAM_X = ChunkStep(gram_step, from_scratch=True)


class RowScorer:
    """How a method's full pass recomputes rows of a chunk, for the blocks a pruned query
    reads: the kernel's global arguments as a small picklable record (it travels with
    each query to the workers on the dask backend). ``score``: the per-point array the
    queries rank by. The hooks after ``refresh`` serve a chunk's own cache on a worker;
    by default a chunk keeps no bookkeeping of its own."""

    score = "f"

    def rows(self, x, state, a, z, extra):
        """Rows a:z of the chunk recomputed by the full pass's kernel (``extra``: what the
        run needs besides, ``LinearPruning._extra`` or ``run_extra``)."""
        raise NotImplementedError

    def refresh(self, x, state, runs):
        """Runs (a, z, extra) of the chunk's rows recomputed."""
        for a, z, extra in runs:
            self.rows(x, state, a, z, extra)

    def prepared(self, state):
        """Right after a full pass, on each chunk."""

    def heard(self, state, pr, sent, known):
        """Before a chunk's query: the news ``sent`` with it (placement's ``Sent``);
        ``known``: the chunk had a cache (else it was rebuilt after a lost worker)."""

    def run_extra(self, state, pr, run):
        """``extra`` of a run of the chunk's blocks (rows counted from the chunk's first)."""
        return None

    def stale(self, state, pr):
        """The chunk's blocks a catch-up reads (none: a full pass brings them up to date)."""
        return NO_BLOCKS

    def after(self, state, pr):
        """After a chunk's query."""


class LinearPruning(PlacedPruning):
    """The :class:`~bigsearch.engine.pruning.contract.Pruning` of a score linear in x (see
    the module): a :class:`LinearPruner` over blocks of X, placed by placement.py. A
    method subclasses it with ``u()``, ``scorer()`` and ``status``; ``gram()`` and
    ``direction_ahead()`` when it has better than the defaults."""

    f_alone = True  # the queries rank by f alone: cached maxima may be rescaled; zero weights rank by index
    score_name = "f"  # the per-point array the queries rank by

    def __init__(self, engine, options=None):
        super().__init__(engine, options)
        self.basis_dim = self.options.basis_dim or DEFAULT_BASIS
        self.summaries = None  # the blocks' summaries over all of X (caches here)
        self.basis, self.u_reset = None, None
        self.summarized = False  # the block summaries computed (a pass over X)

    @property
    def pruner(self):
        """The Pruner over all of X (None when each chunk keeps its own)."""
        return self.caches.cache

    # -- what a method supplies --------------------------------------------------------
    def u(self):
        """[w, c]: the weights and the constant the full pass would score with now."""
        raise NotImplementedError

    def scorer(self):
        """The method's :class:`RowScorer` at u."""
        raise NotImplementedError

    def gram(self):
        """X^T X (the summaries' basis): one pass over X, counted."""
        e = self.engine
        G = np.sum(e.backend.map(GRAM_X), axis=0)
        e.count_read(e.store.nbytes)
        return G

    def direction_ahead(self):
        """u = [v, 0] where the weights will go when they are 0 now (``LinearPruner.reset_ahead``), or None."""
        return None

    def _extra(self, run, first):
        """``extra`` of a run of blocks read here (rows counted from ``first``)."""
        return None

    # -- the contract ------------------------------------------------------------------
    def score(self):
        """The selection score per point at each block's version (the backend's array,
        never a copy: a fork's pruning reads its own)."""
        return self.engine.backend.gather(self.score_name)

    def after_full_pass(self):
        """Every block is fresh: build the summaries the first time, reset the caches
        (at the weights' next direction, ``ahead``, when the scores are flat)."""
        if not self.active:
            return
        e = self.engine
        if self.basis is None:
            self.basis = gram_basis(self.gram(), self.basis_dim)
        self.stale = False
        ahead = None if self.summarized else self.direction_ahead()  # found in the summaries' pass: none of its own
        found = []

        def build():
            self.summaries, maxima = summarize(e.backend.map, e.store.chunks, self.basis, self.block_rows, ahead)
            found.append(maxima)
            self.summaries.grouped()  # the groups' summaries now, not at the first query
            return LinearPruner(self.summaries, rescale=self.f_alone)

        def reset(pr):
            if found and found[0] is not None:
                pr.reset_ahead(ahead, *found[0])
            else:
                pr.reset(self.u(), self.score(), e.labels)

        def prepare():  # the workers reset their chunks' caches now (built the first time)
            self.u_reset = self.u()
            args = (self.u_reset, self.basis, self.block_rows, self.scorer(), self.f_alone, ahead)
            return CHUNK_PREPARE, args

        self.caches.after_full_pass(build, reset, prepare)
        if not self.summarized:  # the summaries were computed (here, or by the workers): a pass
            self.summarized = True
            e.count_read(e.store.nbytes)

    def labels_told(self, idx, lab):
        """New labels into the chunks' state and the block caches (no pass over X)."""
        e = self.engine
        self.caches.tell(idx, lab, apply_labels_to_chunk, lambda pr: pr.labeled(idx, self.score(), e.labels))
        self.stale = True
        return True

    def top(self, k):
        u = self.u()
        if self.f_alone and not u[:-1].any():  # every unlabeled score is the constant: the first ones
            idx = first_unlabeled(self.engine.labels, k)
            return idx, np.full(len(idx), u[-1])
        scorer = self.scorer()
        idx, sc = self.caches.top(
            k,
            lambda pr, k: self._top_here(pr, k, u, scorer),
            CHUNK_TOP,
            lambda: (scorer, u, self.u_reset, self.basis, self.block_rows, self.f_alone),
        )
        self.stale = True
        return idx, sc

    def _top_here(self, pr, k, u, scorer):
        return pr.top(k, u, lambda blocks: self._read(blocks, scorer), self.score(), self.engine.labels)

    def catch_up(self):
        """Nothing to replay: f at u depends on no history, so the search's next full
        pass brings every block up to date."""

    def _read(self, blocks, scorer):
        """Recompute these blocks' rows where their chunks are: each chunk opened once,
        each run of adjacent blocks one kernel call."""
        e = self.engine
        plan = {}
        for c, a, z, run in chunk_runs(self.summaries, blocks, e.store.chunks):
            plan.setdefault(c, []).append((a, z, self._extra(run, e.store.chunks[c][0])))
        self.caches.read(READ_RUNS, plan, scorer)


def read_runs_step(x, state, plan, scorer):
    """The scorer's ``refresh`` on this chunk's part of ``plan`` ({chunk: runs})."""
    scorer.refresh(x, state, plan[state.chunk_id])


READ_RUNS = ChunkStep(read_runs_step, whole_chunk=False)


class LinearPruner(Pruner):
    """The Pruner of linear scores (``s=None``, b = 1; ``rescale``: the cached maxima are
    of f alone), which may also be reset at a u no pass scored with:
    ``reset_ahead(u, best, best_opposite)``, the maxima of x . v and x . (-v) over each
    block's unlabeled rows (u = [v, 0]). That version is ``ahead``: the f in memory is not
    at its u, so a label leaves its blocks' maxima as they are (still bounds: a row fewer),
    and the first query whose weights point against v takes the opposite maxima."""

    def __init__(self, summaries, rescale=True):
        super().__init__(summaries, None, 1.0)
        self.rescale = rescale
        self.ahead = -1  # the clock of a version reset by reset_ahead (-1: none)
        self.opposite = None  # its u and maxima for -v, until a query's weights choose

    def reset(self, u, f, label):
        super().reset(u, f, label)
        self.ahead, self.opposite = -1, None

    def reset_ahead(self, u, best, best_opposite):
        """Every block at the version u = [v, 0], its maximum ``best`` of x . v (the
        opposite's ``best_opposite``, of x . (-v))."""
        self.clock += 1
        self._every_block_at(u, self.clock)
        self.best = np.array(best, np.float64)
        self.ahead = self.clock
        self.opposite = (np.append(-u[:-1], u[-1]), np.array(best_opposite, np.float64))

    def labeled(self, idx, f, label):
        idx = np.asarray(idx)
        if self.ahead >= 0 and len(idx):
            idx = idx[self.version[self.block_of(idx)] != self.ahead]
        super().labeled(idx, f, label)

    def top(self, k, u, read, f, label, floor=-np.inf):
        self._choose_direction(u)
        return super().top(k, u, read, f, label, floor)

    def _choose_direction(self, u):
        """The first weights not orthogonal to v choose between v and -v."""
        if self.opposite is None:
            return
        slot = np.flatnonzero((self.table_version == self.ahead) & (self.table_count > 0))
        if not len(slot):
            self.opposite = None
            return
        toward = float(u[:-1] @ self.table_u[slot[0], :-1])
        if toward < 0:
            blocks = np.flatnonzero(self.version == self.ahead)
            self.best[blocks] = self.opposite[1][blocks]
            self.table_u[slot[0]] = self.opposite[0]
        if toward != 0:
            self.opposite = None


def first_unlabeled(label, k):
    """The first k unlabeled points (fewer when there are fewer), without a scan of all n
    labels when they come early."""
    n, size = len(label), max(4 * k, 1024)
    a, out = 0, []
    while a < n and sum(map(len, out)) < k:
        b = min(n, a + size)
        out.append(a + np.flatnonzero(label[a:b] < 0))
        a, size = b, 4 * size
    return np.concatenate(out)[:k] if out else np.zeros(0, np.int64)


def direction_maxima(x, label, u, block_rows):
    """Per block of ``block_rows`` rows of a chunk: the largest x . v and x . (-v) over its
    unlabeled rows (-inf when none), v = u[:-1]."""
    v = u[:-1]
    xv = np.empty(n_rows(x))
    for a, xb in decoded_blocks(x):
        xv[a : a + len(xb)] = xb @ v
    starts = np.arange(0, len(xv), block_rows)
    free = label < 0
    plus = np.maximum.reduceat(np.where(free, xv, -np.inf), starts)
    minus = np.maximum.reduceat(np.where(free, -xv, -np.inf), starts)
    return plus, minus


class ChunkSummaries(NamedTuple):
    columns: Any  # summary_step's columns of the chunk's blocks
    maxima: Any  # (max x . v, max x . (-v)) per block, or None without ``ahead``


def summaries_step(x, state, basis, block_rows, ahead):
    """A chunk's block summaries and, given ``ahead`` (u = [v, 0]), its blocks' maxima of
    x . v and x . (-v): one read of the chunk."""
    cols = summary_step(x, state, basis, block_rows)
    return ChunkSummaries(cols, None if ahead is None else direction_maxima(x, state.label, ahead, block_rows))


# It reads the chunk's labels, state it did not create.
SUMMARIES = ChunkStep(summaries_step)


def summarize(mapper, chunks, basis, block_rows, ahead=None):
    """(BlockSummaries of every block, and with ``ahead`` the blocks' maxima of x . v and
    x . (-v), else None) in one pass (``mapper``: a backend's ``map``)."""
    chunk, start, stop = block_layout(chunks, block_rows)
    parts = mapper(SUMMARIES, basis, block_rows, ahead)
    sm = BlockSummaries(
        block_rows, chunk, start, stop, basis, *(np.concatenate(c) for c in zip(*(p.columns for p in parts)))
    )
    if ahead is None:
        return sm, None
    return sm, tuple(np.concatenate(m) for m in zip(*(p.maxima for p in parts)))


# -- per chunk (the dask backend): each chunk's cache in its state on its worker ----------
def _chunk_pruner(x, state, basis, block_rows, u, generation, u_reset, score, f_alone, fresh=False):
    return chunk_pruner(
        x,
        state,
        lambda: summary_step(x, state, basis, block_rows),
        basis,
        block_rows,
        None,
        1.0,
        u,
        generation,
        u_reset,
        fresh=fresh,
        score=score,
        make=lambda sm, s, b: LinearPruner(sm, rescale=f_alone),
    )


def chunk_prepare_step(x, state, generation, u_reset, basis, block_rows, scorer, f_alone, ahead=None):
    """Right after a full pass (the chunk's scores at ``u_reset``): the chunk's Pruner
    built (its summaries computed the first time, and with ``ahead`` its blocks' maxima
    at u = ``ahead``, ``LinearPruner.reset_ahead``) or reset, so that even its first
    query reads only the blocks its bounds require."""
    new = getattr(state, "pruner", None) is None
    pr = _chunk_pruner(x, state, basis, block_rows, u_reset, generation, u_reset, scorer.score, f_alone, fresh=True)
    if new and ahead is not None:
        pr.reset_ahead(ahead, *direction_maxima(x, state.label, ahead, block_rows))
    scorer.prepared(state)


# It updates state it did not create: a lost chunk is rebuilt by the engine's recipe
# instead, and its Pruner is built at its next query (every block unknown).
CHUNK_PREPARE = ChunkStep(chunk_prepare_step, whole_chunk=False)


def chunk_top_step(x, state, k, sent, scorer, u, u_reset, basis, block_rows, f_alone):
    """A chunk's exact top k at u = [w, c], reading only the blocks that could hold it
    (k = 0: the blocks the scorer says are stale brought up to date): the chunk's
    summaries and cache live in its state; one without a Pruner (rebuilt after a lost
    worker) reads every block once. ``sent``: placement.py's ``Sent``."""
    known = getattr(state, "pruner", None) is not None
    pr = _chunk_pruner(x, state, basis, block_rows, u, sent.generation, u_reset, scorer.score, f_alone)
    scorer.heard(state, pr, sent, known)

    def read(blocks):
        runs = []
        for run in adjacent_runs(blocks):
            runs.append((pr.sm.start[run[0]], pr.sm.stop[run[-1]], scorer.run_extra(state, pr, run)))
        scorer.refresh(x, state, runs)

    if k == 0:  # (a full pass follows, which resets the cache)
        stale = scorer.stale(state, pr)
        if len(stale):
            read(stale)
        idx, sc, rows = NO_BLOCKS, np.zeros(0), int((pr.sm.stop[stale] - pr.sm.start[stale]).sum())
    else:
        idx, sc, rows = pr.top(k, u, read, getattr(state, scorer.score), state.label)
    scorer.after(state, pr)
    return ChunkTop(idx + state.start, sc, rows)


# It updates state it did not create: a lost chunk is rebuilt by the engine's recipe,
# whose partials are not a ChunkTop, and the query is asked again (placement.py).
CHUNK_TOP = ChunkStep(chunk_top_step, whole_chunk=False)
