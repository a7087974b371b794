"""Exact pruned queries for BLR's greedy and UCB acquisitions (engine/methods/blr.py), on
the local backend.

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
greedy queries are pruned where the chunks live (``chunk_top_step``: each chunk's
summaries and cache in its state on the worker, its exact top k back to the driver, as
LAS's); UCB's log of J updates stays on the driver, so UCB keeps the full pass there.
"""

import numpy as np

from ...backends import ChunkStep
from ...kernels.blr import blr_scores
from ...storage.encoding import n_features
from ..core.select import best_ranked
from ..core.steps import decoded_blocks, lower_quadratic_form
from .block_summaries import (
    DEFAULT_BASIS,
    check_block_rows,
    compute_summaries,
    gram_basis,
    summary_step,
)
from .las import NO_LABELS, ChunkTop, Pruner, adjacent_runs, apply_labels_to_chunk, chunk_pruner, row_range

ROUNDING = 1e3  # the UCB term's rounding, in units of sqrt of the scale of v (see ``_ucb_rounding``)


def gram_step(x, state):
    """A chunk's X^T X (float64): the basis of the block summaries."""
    G = np.zeros((n_features(x),) * 2)
    for _, xb in decoded_blocks(x):
        G += xb.T @ xb
    return G


GRAM_X = ChunkStep(gram_step, from_scratch=True)


def chunk_top_step(x, state, u, V, consts, beta, t, k, generation, u_reset, basis, block_rows):
    """A chunk's exact top k of greedy BLR at u = [w, mean], reading only the blocks that
    could hold it (the dask backend): the chunk's summaries and cache live in its state
    (built at the first call, when every block is read once); ``generation`` changes after
    each full pass, at ``u_reset``, and the cache is then rebuilt from the chunk's f."""
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
    )
    pr.rescale = True  # greedy (the workers prune greedy only): the maxima are of f alone

    def read(blocks):
        for run in adjacent_runs(blocks):
            score_rows(x, state, pr.sm.start[run[0]], pr.sm.stop[run[-1]], V, NO_LABELS, consts, beta, t)

    idx, sc, rows = pr.top(k, u, read, state.f, state.label)
    return ChunkTop(idx + state.start, sc, rows)


# It updates state it did not create: a lost chunk is rebuilt by the engine's recipe,
# whose partials are not a ChunkTop, and the query is asked again (BLRPruning).
CHUNK_TOP = ChunkStep(chunk_top_step, whole_chunk=False)


class BLRPruning:
    """Glue between a BLR engine and the Pruner: one for all of X on the local backend,
    one per chunk on the workers of the dask backend (greedy).

    ``status`` says whether queries are pruned, and why not when they are not."""

    def __init__(self, engine, block_rows=None, basis_dim=DEFAULT_BASIS):
        self.engine = engine
        self.block_rows = check_block_rows(block_rows)
        self.basis_dim = int(basis_dim)
        self.summaries = None
        self.pruner = None
        self.stale = False  # f (and J, v, im) of unread blocks lag behind the labels
        self.log = []  # UCB: (clock, V, c, consts) of each J update since the last full pass
        self.hold = None  # the weights a UCB batch keeps while its members join A
        self.ucb_score = None  # UCB: f + im per point, at each block's version
        self.local = getattr(engine.backend, "name", "") == "local"
        self.basis, self.generation, self.u_reset = None, 0, None  # for the workers' pruners (dask)
        acq = engine.params.acquisition
        if acq == "thompson":
            self.status = "off: Thompson: a full pass per query: a new draw each query"
        elif not self.local and acq == "ucb":
            self.status = "off: pruned UCB queries need the local backend for now: a full pass per query"
        elif not self.local:
            self.status = (
                f"on: exact pruning of blocks of {self.block_rows} rows ({acq}), each worker pruning its chunks"
            )
        else:
            self.status = f"on: exact pruning of blocks of {self.block_rows} rows ({acq})"

    @property
    def active(self):
        return self.status.startswith("on")

    @property
    def ucb(self):
        return self.engine.params.acquisition == "ucb"

    def after_full_pass(self):
        """Every block is fresh: build the summaries the first time, reset the cache."""
        if not self.active:
            return
        e = self.engine
        if self.basis is None:
            self.basis = gram_basis(np.sum(e.backend.map(GRAM_X), axis=0), self.basis_dim)
            e.bytes_since_query += e.store.nbytes
        if not self.local:  # the workers reset their chunks' caches at the next query
            self.generation += 1
            self.u_reset, self.hold, self.stale = self.u(), None, False
            return
        if self.summaries is None:
            self.summaries = compute_summaries(e.backend.map, e.store.chunks, self.basis, self.block_rows)
            self.pruner = Pruner(self.summaries, None, 1.0)
            self.pruner.rescale = not self.ucb  # greedy caches f alone (UCB: f + im)
            e.bytes_since_query += e.store.nbytes
        if self.ucb:
            self.ucb_score = e.backend.gather("f") + e.backend.gather("im")
        self.pruner.reset(self.u(), self.score(), e.backend.gather("label"))
        self.log, self.hold, self.stale = [], None, False

    def score(self):
        """The selection score per point at each block's version: f itself for greedy
        (the backend's array, never a copy: a fork's pruning reads its own)."""
        return self.ucb_score if self.ucb else self.engine.backend.gather("f")

    def _now(self):
        """(w, V = [w, d, h], consts) as the full pass would score with now."""
        e = self.engine
        w = e._weights() if self.hold is None else self.hold
        mean, v0, d0, h = e._consts(w)
        return w, np.vstack([w, e.d, h]), (mean, v0, d0)

    def u(self):
        w, _, consts = self._now()
        return np.append(w, consts[0])

    def labels_told(self, idx, lab, G, c):
        """New labels (or a UCB batch's members, ``lab`` 0 in the chunks' state only): into
        the chunks' state and the block cache, and for UCB their J update into the log."""
        e = self.engine
        chunks = np.unique([e.store.chunk_of(i) for i in idx]).tolist()
        e.backend.map_state(apply_labels_to_chunk, chunks, idx, lab)
        if self.ucb and len(c):
            _, V, consts = self._now()
            self.log.append((self.pruner.clock, np.vstack([V, G]), c, consts))
        if self.local:
            self.pruner.labeled(idx, self.score(), e.backend.gather("label"))
        self.stale = True

    def top(self, k):
        e = self.engine
        _, V, consts = self._now()
        if not self.local:
            return self._top_on_workers(k, V, consts)
        if self.ucb:
            self.pruner.rounding = self._ucb_rounding(V, consts)
        label = e.backend.gather("label")
        idx, sc, rows = self.pruner.top(k, self.u(), lambda blocks: self._read(blocks, V, consts), self.score(), label)
        e.bytes_since_query += int(rows) * e.store.bytes_per_point
        oldest = self.pruner.version.min()
        self.log = [entry for entry in self.log if entry[0] >= oldest]
        self.stale = True
        return idx, sc

    def _top_on_workers(self, k, V, consts):
        """Each chunk's exact top k, pruned where the chunk lives: one round trip."""
        e = self.engine
        args = (self.u(), V, consts, e._beta, e._t, k, self.generation, self.u_reset, self.basis, self.block_rows)
        parts = e.backend.map(CHUNK_TOP, *args)
        if not all(isinstance(part, ChunkTop) for part in parts):
            parts = e.backend.map(CHUNK_TOP, *args)  # a lost worker's chunks were rebuilt: again
        idx, sc = best_ranked(np.concatenate([q[0] for q in parts]), np.concatenate([q[1] for q in parts]), k)
        e.bytes_since_query += int(sum(q[2] for q in parts)) * e.store.bytes_per_point
        self.stale = True
        return idx, sc

    def _ucb_rounding(self, V, consts):
        """A scale that, times the Pruner's margin, covers the rounding of beta sqrt(v):
        sqrt(v + e) - sqrt(v) <= sqrt(e), and v's terms are at most R^2 / lam (A >= lam I),
        2 R |h| and |v0| (R: the largest row norm)."""
        e = self.engine
        R = float(self.summaries.norm_max.max())
        scale = R * R / e.lam + 2 * R * np.linalg.norm(V[2]) + abs(consts[1])
        return ROUNDING * e.params.beta * np.sqrt(scale)

    def catch_up(self):
        """Every block's rows brought up to date (before a full pass that keeps J)."""
        if self.log:
            _, V, consts = self._now()
            self._read(np.arange(self.summaries.n_blocks), V, consts)

    def _read(self, blocks, V, consts):
        """Recompute these blocks' rows from X: the logged J updates since each block's
        version, then f, v and im; each chunk opened once, each run of adjacent blocks one
        kernel call."""
        e, sm = self.engine, self.summaries
        blocks = np.sort(blocks)
        breaks = np.flatnonzero((sm.chunk[blocks[1:]] != sm.chunk[blocks[:-1]]) | (blocks[1:] != blocks[:-1] + 1)) + 1
        runs = np.split(blocks, breaks)
        for c in np.unique(sm.chunk[blocks]):
            st = e.backend.states[c]
            with e.store.chunk(int(c), whole=False) as x:
                for run in (r for r in runs if sm.chunk[r[0]] == c):
                    for b in run if self.log else ():
                        a, z = sm.start[b] - st.start, sm.stop[b] - st.start
                        for clock, Vl, cl, cst in self.log:
                            if clock >= self.pruner.version[b]:
                                self._score(
                                    x,
                                    st,
                                    a,
                                    z,
                                    *lower_quadratic_form(row_range(x, a, z), st.J[a:z], Vl, cl, first=3),
                                    cst,
                                )
                    a, z = sm.start[run[0]] - st.start, sm.stop[run[-1]] - st.start
                    self._score(x, st, a, z, V, NO_LABELS, consts)
                    if self.ucb:
                        self.ucb_score[st.start + a : st.start + z] = st.f[a:z] + st.im[a:z]

    def _score(self, x, st, a, z, V, c, consts):
        """The full pass's kernel on a chunk's rows a:z (J lowered by the rows 3: of V)."""
        e = self.engine
        score_rows(x, st, a, z, V, c, consts, e._beta, e._t)


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
