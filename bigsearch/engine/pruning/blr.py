"""Exact pruned queries for BLR's greedy and UCB acquisitions (engine/methods/blr.py).

BLR's predictive mean is linear in x: f_i = mean + x_i . w, so greedy is
engine/pruning/linear.py's ``LinearPruning`` with u = [w, mean] and BLR's full pass's
kernel on the blocks read. Greedy needs no pass at a refit of lam and the noise (or a
rebuild of A): f stays linear in x, so the bounds hold (a refit scales w: the cached
maxima are of f alone, so the Pruner also tries each version's u scaled).

UCB adds beta sqrt(v_i). Between full passes (a refit of lam and the noise, or a rebuild
of A), labels only add to A, so v_i never grows: the block's cached best score plus the
bound on the change of f bounds the score now. A block read recomputes its rows exactly
as the full passes would have: the J updates since its version (kept in a log: each
update's V and c, as the update's pass had them) are replayed on its rows by the same
functions, then f, v and im come from the full pass's kernel (bit-identical scores).

Thompson draws anew each query, so its queries keep the full pass. On the dask backend,
greedy and UCB queries are pruned where the chunks live (linear.py's ``chunk_top_step``:
each chunk's summaries, cache and log of J updates in its state on the worker, its exact
top k back to the driver, as LAS's): the J updates told since the last query travel with
it, numbered from the last full pass, and each chunk keeps those its blocks have not seen
(``BLRRows``' hooks). A chunk rebuilt after a lost worker has J current (the engine's
recipe) and reads every block once; its numbering starts after the updates already sent.
"""

from dataclasses import dataclass

import numpy as np

from ...kernels.blr import blr_scores
from ...storage.encoding import decode
from ..core.steps import lower_quadratic_form
from .las import NO_LABELS, row_range
from .linear import CHUNK_TOP, LinearPruning, RowScorer, first_unlabeled

ROUNDING = 1e3  # the UCB term's rounding, in units of sqrt of the scale of v (see ``_ucb_rounding``)


class BLRPruning(LinearPruning):
    """BLR's :class:`~bigsearch.engine.pruning.contract.Pruning`: linear.py's, with
    u = [w, mean] and, for UCB, the log of J updates its blocks replay when read.

    ``status`` says whether queries are pruned, and why not when they are not."""

    def __init__(self, engine, options=None):
        super().__init__(engine, options)
        self.log = []  # UCB, caches here: (clock, V, c, consts) of each J update since the last full pass
        self.hold = None  # the weights a UCB batch keeps while its members join A
        acq = engine.params.acquisition
        if acq == "thompson":
            self.status = "off: Thompson: a full pass per query: a new draw each query"
        else:
            self.status = self.caches.status(f"on: exact pruning of blocks of {self.block_rows} rows ({acq})")

    @property
    def ucb(self):
        return self.engine.params.acquisition == "ucb"

    @property
    def f_alone(self):  # greedy caches f alone (UCB: f + im)
        return not self.ucb

    @property
    def score_name(self):
        return "ucb" if self.ucb else "f"

    def after_full_pass(self):
        if self.active and self.ucb:
            self._set_ucb_scores()
        self.log, self.hold = [], None
        super().after_full_pass()

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

    def _now(self):
        """(w, V = [w, d, h], consts) as the full pass would score with now."""
        return self.engine.scoring_now(self.hold)

    def u(self):
        w, _, consts = self._now()
        return np.append(w, consts[0])

    def scorer(self):
        e = self.engine
        _, V, consts = self._now()
        return BLRRows(V, consts, *e.score_weights, self.ucb, e.lam, e.params.beta)

    def labels_told(self, idx, lab, G=None, c=()):
        """New labels (or a UCB batch's members, ``lab`` 0 in the chunks' state only): into
        the chunks' state and the block caches, and for UCB their J update (G, c), heard
        by the caches (here: logged; per chunk: sent with the next query)."""
        super().labels_told(idx, lab)
        if self.ucb and len(c):
            _, V, consts = self._now()
            self.caches.hear((np.vstack([V, G]), c, consts), self._log_update)
        return True

    def _log_update(self, pr, update):
        self.log.append((pr.clock, *update))

    def _top_here(self, pr, k, u, scorer):
        if self.ucb:
            pr.rounding = ucb_rounding(self.summaries.norm_max, scorer.lam, scorer.ucb_beta, scorer.V, scorer.consts)
        out = super()._top_here(pr, k, u, scorer)
        oldest = pr.version.min()
        self.log = [entry for entry in self.log if entry[0] >= oldest]
        return out

    def _extra(self, run, first):
        return missed_updates(self.log, self.pruner, run, first)

    def catch_up(self):
        """Every block's rows brought up to date (before a full pass that keeps J): the
        logged J updates replayed where a block has not seen them."""
        if not (self.ucb and self.caches.n_news):
            return
        scorer, u = self.scorer(), self.u()
        rows = self.caches.catch_up(
            lambda pr: self._catch_up_here(scorer),
            CHUNK_TOP,
            lambda: (scorer, u, self.u_reset, self.basis, self.block_rows, self.f_alone),
        )
        self.caches.count(rows)

    def _catch_up_here(self, scorer):
        if not self.log:
            return 0
        self._read(np.arange(self.summaries.n_blocks), scorer)
        return self.engine.store.n


@dataclass(eq=False)
class BLRRows(RowScorer):
    """BLR's full pass on the rows of blocks read (``rows``: a run's blocks' missed J
    updates replayed, then f, v and im), and, per chunk, the chunk's log of J updates:
    ``heard`` keeps the updates told since the last query (``sent.news``: (number, V, c,
    consts), numbered from the last full pass) that the chunk has not seen; one without a
    Pruner (rebuilt after a lost worker: J current) keeps none."""

    V: np.ndarray
    consts: tuple
    beta: float
    t: float
    ucb: bool
    lam: float
    ucb_beta: float

    @property
    def score(self):
        return "ucb" if self.ucb else "f"

    def rows(self, x, state, a, z, extra):
        refresh_runs(x, state, [(a, z, extra)], self.V, self.consts, self.beta, self.t, self.ucb)

    def prepared(self, state):
        state.blr_log, state.blr_logged = [], 0

    def heard(self, state, pr, sent, known):
        if not known:
            state.blr_log, state.blr_logged = [], sent.n_news
        for number, Vl, cl, cst in sent.news:
            if number >= state.blr_logged:
                state.blr_log.append((pr.clock, Vl, cl, cst))
                state.blr_logged = number + 1
        if self.ucb:
            pr.rounding = ucb_rounding(pr.sm.norm_max, self.lam, self.ucb_beta, self.V, self.consts)

    def run_extra(self, state, pr, run):
        return missed_updates(state.blr_log, pr, run)

    def stale(self, state, pr):
        latest = max((entry[0] for entry in state.blr_log), default=-1)
        return np.flatnonzero(pr.version <= latest)

    def after(self, state, pr):
        state.blr_log = [entry for entry in state.blr_log if entry[0] >= pr.version.min()]


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
