"""Exact pruned queries for BLR's greedy and UCB acquisitions (engine/methods/blr.py).

BLR's predictive mean is linear in x: f_i = mean + x_i . w. Since a block was last read
(its version, at w_s and mean_s), every f_i of the block has changed by exactly
(mean_t - mean_s) + x_i . (w_t - w_s): LAS's form (engine/pruning/las.py) with degrees 1,
b = 1 and the change of the constant as the shift, so the same ``Pruner`` bounds it
(built with ``s=None``: u carries the constant as its last entry, and the summaries are
computed with degrees 1, over a basis of the top eigenvectors of X^T X).

Greedy needs no pass at a refit of lam and the noise (or a rebuild of A): f stays linear
in x, so the bounds hold; a refit scales w, so the Pruner also tries each version's u
scaled (``rescale``: the cached maxima are of f alone) and keeps the smaller bound.

UCB adds beta sqrt(v_i). Between full passes (a refit of lam and the noise, or a rebuild
of A), labels only add to A, so v_i never grows: the block's cached best score plus the
bound on the change of f bounds the score now. A block read recomputes its rows exactly
as the full passes would have: the J updates since its version (kept in a log: each
update's V and c, as the update's pass had them) are replayed on its rows by the same
functions, then f, v and im come from the full pass's kernel (bit-identical scores).

Thompson draws anew each query, so its queries keep the full pass. On the dask backend,
greedy and UCB queries are pruned where the chunks live (``chunk_top_step``: each chunk's
summaries, cache and log of J updates in its state on the worker, its exact top k back
to the driver, as LAS's): the J updates told since the last query travel with it,
numbered from the last full pass, and each chunk keeps those its blocks have not seen.
A chunk rebuilt after a lost worker has J current (the engine's recipe) and reads every
block once; its numbering starts after the updates already sent.
"""

from typing import Any, NamedTuple

import numpy as np

from ...backends import ChunkStep
from ...kernels.blr import blr_scores
from ...storage.encoding import decode, n_features, n_rows
from ..core.steps import decoded_blocks, lower_quadratic_form
from .block_summaries import (
    DEFAULT_BASIS,
    BlockSummaries,
    block_layout,
    gram_basis,
    summary_step,
)
from .las import (
    NO_LABELS,
    Pruner,
    adjacent_runs,
    apply_labels_to_chunk,
    chunk_pruner,
    chunk_runs,
    row_range,
)
from .placement import ChunkTop, PlacedPruning

ROUNDING = 1e3  # the UCB term's rounding, in units of sqrt of the scale of v (see ``_ucb_rounding``)


def gram_step(x, state):
    """A chunk's X^T X (float64): the basis of the block summaries."""
    G = np.zeros((n_features(x),) * 2)
    for _, xb in decoded_blocks(x):
        G += xb.T @ xb
    return G


GRAM_X = ChunkStep(gram_step, from_scratch=True)


class BLRPruning(PlacedPruning):
    """BLR's :class:`~bigsearch.engine.pruning.contract.Pruning`: a Pruner over blocks of
    X, placed by engine/pruning/placement.py (one for all of X here, or one per chunk
    where the chunks live).

    ``status`` says whether queries are pruned, and why not when they are not."""

    def __init__(self, engine, options=None):
        super().__init__(engine, options)
        self.basis_dim = self.options.basis_dim or DEFAULT_BASIS
        self.summaries = None  # the blocks' summaries over all of X (caches here)
        self.log = []  # UCB, caches here: (clock, V, c, consts) of each J update since the last full pass
        self.hold = None  # the weights a UCB batch keeps while its members join A
        self.basis, self.u_reset = None, None
        self.summarized = False  # the block summaries computed (a pass over X)
        acq = engine.params.acquisition
        if acq == "thompson":
            self.status = "off: Thompson: a full pass per query: a new draw each query"
        else:
            self.status = self.caches.status(f"on: exact pruning of blocks of {self.block_rows} rows ({acq})")

    @property
    def ucb(self):
        return self.engine.params.acquisition == "ucb"

    @property
    def pruner(self):
        """The Pruner over all of X (None when each chunk keeps its own)."""
        return self.caches.cache

    def after_full_pass(self):
        """Every block is fresh: build the summaries the first time, reset the caches
        (at the weights' next direction, ``ahead``, when the scores are flat)."""
        if not self.active:
            return
        e = self.engine
        if self.basis is None:
            self.basis = gram_basis(np.sum(e.backend.map(GRAM_X), axis=0), self.basis_dim)
            e.count_read(e.store.nbytes)
        if self.ucb:
            self._set_ucb_scores()
        self.log, self.hold, self.stale = [], None, False
        ahead = None if self.summarized else self.direction_ahead()  # found in the summaries' pass: none of its own
        found = []

        def build():
            self.summaries, maxima = summarize(e.backend.map, e.store.chunks, self.basis, self.block_rows, ahead)
            found.append(maxima)
            self.summaries.grouped()  # the groups' summaries now, not at the first query
            return BLRPruner(self.summaries, rescale=not self.ucb)  # greedy caches f alone (UCB: f + im)

        def reset(pr):
            if found and found[0] is not None:
                pr.reset_ahead(ahead, *found[0])
            else:
                pr.reset(self.u(), self.score(), e.labels)

        def prepare():  # the workers reset their chunks' caches now (built the first time)
            self.u_reset = self.u()
            return CHUNK_PREPARE, (self.u_reset, self.basis, self.block_rows, self.ucb, ahead)

        self.caches.after_full_pass(build, reset, prepare)
        if not self.summarized:  # the summaries were computed (here, or by the workers): a pass
            self.summarized = True
            e.count_read(e.store.nbytes)

    def direction_ahead(self):
        """Greedy, while every label is alike (the weights 0, every score the mean, so the
        query is the first unlabeled row x_q): the direction the weights take when an
        answer differs, v = x_q - xbar (xbar: the labeled rows' mean; from one label
        exactly, from several up to A^-1's tilt), with 0 as the constant; None otherwise.
        A cache reset at the flat scores would bound nothing (docs/algorithm.md)."""
        e = self.engine
        if self.ucb or not e.n_labeled:
            return None
        w, _, _ = self._now()
        q = first_unlabeled(e.labels, 1)
        if w.any() or not len(q):
            return None
        x_q = decode(e.store.read_stored_rows(q))[0]
        self.caches.count(1)
        return np.append(x_q - e.x1 / e.n_labeled, 0.0)

    def _set_ucb_scores(self):
        """UCB's score f + im per point (the backend's array ``ucb``), after a full pass."""
        e = self.engine
        if not getattr(self, "ucb_allocated", False):
            e.backend.alloc("ucb", np.float64, -np.inf)
            self.ucb_allocated = True
        e.backend.map_state(set_ucb_scores, list(range(e.store.n_chunks)))

    def score(self):
        """The selection score per point at each block's version: f itself for greedy, f +
        im for UCB (the backend's arrays, never a copy: a fork's pruning reads its own)."""
        return self.engine.backend.gather("ucb" if self.ucb else "f")

    def _now(self):
        """(w, V = [w, d, h], consts) as the full pass would score with now."""
        return self.engine.scoring_now(self.hold)

    def u(self):
        w, _, consts = self._now()
        return np.append(w, consts[0])

    def labels_told(self, idx, lab, G=None, c=()):
        """New labels (or a UCB batch's members, ``lab`` 0 in the chunks' state only): into
        the chunks' state and the block caches, and for UCB their J update (G, c), heard
        by the caches (here: logged; per chunk: sent with the next query)."""
        e = self.engine
        self.caches.tell(idx, lab, apply_labels_to_chunk, lambda pr: pr.labeled(idx, self.score(), e.labels))
        if self.ucb and len(c):
            _, V, consts = self._now()
            self.caches.hear((np.vstack([V, G]), c, consts), self._log_update)
        self.stale = True
        return True

    def _log_update(self, pr, update):
        self.log.append((pr.clock, *update))

    def top(self, k):
        _, V, consts = self._now()
        if not (self.ucb or V[0].any()):  # greedy, every label alike: every unlabeled score is the mean
            idx = first_unlabeled(self.engine.labels, k)
            return idx, np.full(len(idx), consts[0])
        idx, sc = self.caches.top(
            k, lambda pr, k: self._top_here(pr, k, V, consts), CHUNK_TOP, lambda: self._chunk_args(V, consts)
        )
        self.stale = True
        return idx, sc

    def _top_here(self, pr, k, V, consts):
        e = self.engine
        if self.ucb:
            pr.rounding = ucb_rounding(self.summaries.norm_max, e.lam, e.params.beta, V, consts)
        out = pr.top(k, self.u(), lambda blocks: self._read(blocks, V, consts), self.score(), e.labels)
        oldest = pr.version.min()
        self.log = [entry for entry in self.log if entry[0] >= oldest]
        return out

    def _chunk_args(self, V, consts):
        e = self.engine
        beta, t = e.score_weights
        return self.u(), V, consts, beta, t, self.u_reset, self.basis, self.block_rows, self.ucb, e.lam, e.params.beta

    def catch_up(self):
        """Every block's rows brought up to date (before a full pass that keeps J): the
        logged J updates replayed where a block has not seen them."""
        if not (self.ucb and self.caches.n_news):
            return
        _, V, consts = self._now()
        rows = self.caches.catch_up(
            lambda pr: self._catch_up_here(V, consts), CHUNK_TOP, lambda: self._chunk_args(V, consts)
        )
        self.caches.count(rows)

    def _catch_up_here(self, V, consts):
        if not self.log:
            return 0
        self._read(np.arange(self.summaries.n_blocks), V, consts)
        return self.engine.store.n

    def _read(self, blocks, V, consts):
        """Recompute these blocks' rows from X where their chunks are: the logged J updates
        since each block's version, then f, v and im; each chunk opened once, each run of
        adjacent blocks one kernel call."""
        e, sm = self.engine, self.summaries
        beta, t = e.score_weights
        plan = {}
        for c, a, z, run in chunk_runs(sm, blocks, e.store.chunks):
            plan.setdefault(c, []).append((a, z, missed_updates(self.log, self.pruner, run, e.store.chunks[c][0])))
        self.caches.read(READ_RUNS, plan, V, consts, beta, t, self.ucb)


class BLRPruner(Pruner):
    """The Pruner of BLR's linear scores (``s=None``, b = 1; ``rescale``: greedy, whose
    cached maxima are of f alone), which may also be reset at a u no pass scored with:
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


def missed_updates(log, pr, run, first=0):
    """Per block of a run that has not seen some of the logged J updates ((clock, V, c,
    consts), in order): (a, z, those updates), rows counted from ``first``."""
    out = []
    for b in run if log else ():
        missed = [entry[1:] for entry in log if entry[0] >= pr.version[b]]
        if missed:
            out.append((pr.sm.start[b] - first, pr.sm.stop[b] - first, missed))
    return out


def ucb_rounding(norm_max, lam, beta, V, consts):
    """A scale that, times the Pruner's margin, covers the rounding of beta sqrt(v):
    sqrt(v + e) - sqrt(v) <= sqrt(e), and v's terms are at most R^2 / lam (A >= lam I),
    2 R |h| and |v0| (R: the largest row norm of the blocks, ``norm_max``)."""
    R = float(norm_max.max()) if len(norm_max) else 0.0
    scale = R * R / lam + 2 * R * np.linalg.norm(V[2]) + abs(consts[1])
    return ROUNDING * beta * np.sqrt(scale)


def set_ucb_scores(state):
    """UCB's selection score f + im of every row of a chunk (after a full pass)."""
    np.add(state.f, state.im, out=state.ucb)


def refresh_runs(x, state, runs, V, consts, beta, t, ucb):
    """Rows of a chunk brought up to date, by the full pass's functions: ``runs`` are
    (a, z, blocks) with ``blocks`` [(a, z, updates missed)]: each block's missed J
    updates replayed, then f, v and im of the run (and UCB's score)."""
    for a, z, blocks in runs:
        for ba, bz, missed in blocks:
            for Vl, cl, cst in missed:
                lowered = lower_quadratic_form(row_range(x, ba, bz), state.J[ba:bz], Vl, cl, first=3)
                score_rows(x, state, ba, bz, *lowered, cst, beta, t)
        score_rows(x, state, a, z, V, NO_LABELS, consts, beta, t)
        if ucb:
            state.ucb[a:z] = state.f[a:z] + state.im[a:z]


def read_runs_step(x, state, plan, V, consts, beta, t, ucb):
    """``refresh_runs`` on this chunk's part of ``plan`` ({chunk: runs})."""
    refresh_runs(x, state, plan[state.chunk_id], V, consts, beta, t, ucb)


READ_RUNS = ChunkStep(read_runs_step, whole_chunk=False)


def chunk_prepare_step(x, state, generation, u_reset, basis, block_rows, ucb, ahead=None):
    """Right after a full pass (the chunk's scores at ``u_reset``): the chunk's Pruner
    built (its summaries computed the first time, and with ``ahead`` its blocks' maxima
    at u = ``ahead``, ``BLRPruner.reset_ahead``) or reset, and its log of J updates
    emptied, so that even its first query reads only the blocks its bounds require."""
    new = getattr(state, "pruner", None) is None
    pr = _chunk_pruner(x, state, basis, block_rows, u_reset, generation, u_reset, ucb, fresh=True)
    if new and ahead is not None:
        pr.reset_ahead(ahead, *direction_maxima(x, state.label, ahead, block_rows))
    state.blr_log, state.blr_logged = [], 0


# It updates state it did not create: a lost chunk is rebuilt by the engine's recipe
# instead, and its Pruner is built at its next query (every block unknown).
CHUNK_PREPARE = ChunkStep(chunk_prepare_step, whole_chunk=False)


def _chunk_pruner(x, state, basis, block_rows, u, generation, u_reset, ucb, fresh=False):
    pr = chunk_pruner(
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
        score="ucb" if ucb else "f",
        make=lambda sm, s, b: BLRPruner(sm, rescale=not ucb),  # greedy caches f alone (UCB: f + im)
    )
    return pr


def chunk_top_step(
    x, state, k, sent, u, V, consts, beta, t, u_reset, basis, block_rows, ucb=False, lam=1.0, ucb_beta=0.0
):
    """A chunk's exact top k of greedy or UCB BLR at u = [w, mean], reading only the blocks
    that could hold it (caches per chunk; k = 0: every block brought up to date): the
    chunk's summaries, cache and log of J updates live in its state. ``sent.news`` are
    the J updates (number, V, c, consts) told since the last query, ``sent.n_news`` how
    many were numbered since the last full pass: a chunk keeps those it has not seen; one
    without a Pruner (rebuilt after a lost worker: J current) keeps none and reads every
    block once."""
    known = getattr(state, "pruner", None) is not None  # else: rebuilt after a lost worker, J current
    pr = _chunk_pruner(x, state, basis, block_rows, u, sent.generation, u_reset, ucb)
    if not known:
        state.blr_log, state.blr_logged = [], sent.n_news
    for number, Vl, cl, cst in sent.news:
        if number >= state.blr_logged:
            state.blr_log.append((pr.clock, Vl, cl, cst))
            state.blr_logged = number + 1
    if ucb:
        pr.rounding = ucb_rounding(pr.sm.norm_max, lam, ucb_beta, V, consts)

    def read(blocks):
        runs = []
        for run in adjacent_runs(blocks):
            runs.append((pr.sm.start[run[0]], pr.sm.stop[run[-1]], missed_updates(state.blr_log, pr, run)))
        refresh_runs(x, state, runs, V, consts, beta, t, ucb)

    if k == 0:  # (a full pass follows, which resets the cache)
        latest = max((entry[0] for entry in state.blr_log), default=-1)
        stale = np.flatnonzero(pr.version <= latest)
        if len(stale):
            read(stale)
        idx, sc, rows = np.zeros(0, np.int64), np.zeros(0), int((pr.sm.stop[stale] - pr.sm.start[stale]).sum())
    else:
        idx, sc, rows = pr.top(k, u, read, getattr(state, "ucb" if ucb else "f"), state.label)
    state.blr_log = [entry for entry in state.blr_log if entry[0] >= pr.version.min()]
    return ChunkTop(idx + state.start, sc, rows)


# It updates state it did not create: a lost chunk is rebuilt by the engine's recipe,
# whose partials are not a ChunkTop, and the query is asked again (placement.py).
CHUNK_TOP = ChunkStep(chunk_top_step, whole_chunk=False)


def score_rows(x, st, a, z, V, c, consts, beta, t):
    """The full pass's kernel (kernels/blr.py) on a chunk's rows a:z: the same arithmetic,
    bit for bit (J lowered by the rows 3: of V with coefficients c)."""
    blr_scores(
        row_range(x, a, z),
        V,
        c,
        st.start + a,
        st.label[a:z],
        st.J[a:z],
        st.v[a:z],
        st.f[a:z],
        st.im[a:z],
        *consts,
        beta,
        t,
    )
