"""Batches that are not wasted: sequential greedy with fantasized answers (issue 18).

The top B points of one pass are often near-duplicates: what makes the first a good
query makes its neighbours good too, and the batch learns nothing the first label would
not have taught. Instead, choose the batch as B sequential greedy LAS queries, each chosen
point told a *fantasized* soft label y_f before the next is chosen (y_f = 0: "assume a
miss until measured", or "f": its own current f); the real answers replace them when the
batch is labeled. Selection is by f (alpha = 0): the impact factor is not fantasized.

Exact, in about two passes: speculate, then verify. A fantasized label changes only the
global state (K^-1 by Sherman-Morrison, xq), so for every unlabeled j

    f_j = q_unl + rho_j x_j . v,        v = K^-1 xq.

1. Candidates: the M best unlabeled points by their current f (kept by the engine: no
   pass), their rows read (M = 8B + 64).
2. Speculate: run the greedy among the candidates alone, B steps, recording each step's
   v_t and the chosen point's f*_t (the candidates' f computed from their rows).
3. Verify, one pass: every other unlabeled point's f at every v_t (X V, V = [v_1 ... v_B],
   r x B: the cost of a batched LAS update). If none reaches f*_t at any step (with a
   rounding margin, ``SAFETY`` relative to the terms), the speculated batch is the
   greedy over all points, ties to the lowest index included. Otherwise, with t* the
   first step some outside point reaches: steps before t* are exact and kept; the points
   that reached at each step from t* on (the best ``cap`` per step, their rows returned
   by the same pass) join the candidates, and speculation resumes at t*. Each pass keeps
   at least one more step, so a batch never costs more passes than today's one per
   member; on the docking library (docs/discovery.md) the first verification usually
   succeeds.

Why not bound the points outside the candidates without reading X: after t fantasized
labels f_j moves by rho_j x_j . (v_t - v_0), which is a common shift b_unl a (the part of
v_t - v_0 along s = X^T 1, since x_j . s = d_j) plus a point-specific part. On the docking
library the common shift is about 100 times the point-specific part, and the latter
(1e-5) is larger than the gaps between the top thousands of f values (1e-8 per rank):
a Cauchy-Schwarz bound on it (in the K^-1 norm, after removing the shift, even with 33
exact directions) leaves more than half the library unresolved. Reading X once to check
the speculated steps costs less than any bound that fails.
"""

from typing import NamedTuple

import numpy as np

from ...backends import ChunkStep
from ...errors import NumericalError, ParameterError
from ...kernels.dense import times_columns
from ...kernels.rows import rows_product
from ...storage.encoding import decode, take
from ..core.select import best_ranked
from ..core.steps import decoded_blocks

SAFETY = 1e-9  # relative rounding margin (dot products of length r err ~1e-13 relative)
CAP = 8  # points per step returned by a verification pass, at most, per chunk


def candidate_size(k):
    return 8 * k + 64


class Fantasized:
    """The first t fantasized labels as low-rank corrections of the engine's K^-1 and xq
    (which are not changed): K_t^-1 = K^-1 - sum_b c_b g_b g_b^T (Sherman-Morrison, with
    g_b = K_b^-1 x_b) and xq_t = xq + sum_b a_b x_b. A label costs one product with K^-1
    (O(r^2)) and v_t = K_t^-1 xq_t is O(r t), instead of updating r x r matrices; keeping
    the first t labels (after a verification) is ``truncate(t)``."""

    def __init__(self, Kinv, xq, taken, k):
        r = len(xq)
        self.Kinv, self.xq0, self.v0 = Kinv, xq, _times(Kinv, xq)
        self.taken = taken.copy()  # labeled, or chosen for this batch
        self.point = np.zeros(k, np.int64)
        self.X, self.H, self.G = np.zeros((k, r)), np.zeros((k, r)), np.zeros((k, r))  # x_b, K^-1 x_b, g_b
        self.a, self.c = np.zeros(k), np.zeros(k)
        self.t = 0

    def v(self):
        t = self.t
        xq = self.xq0 + self.a[:t] @ self.X[:t]
        return self.v0 + self.a[:t] @ self.H[:t] - (self.c[:t] * (self.G[:t] @ xq)) @ self.G[:t]

    def tell(self, i, x, gamma, a):
        t = self.t
        h = _times(self.Kinv, x)
        g = h - (self.c[:t] * (self.G[:t] @ x)) @ self.G[:t]
        den = 1.0 + gamma * (x @ g)
        if not (np.isfinite(den) and den > 0):
            raise NumericalError(f"fantasized label for point {i}: Sherman-Morrison denominator {den!r}")
        self.point[t], self.X[t], self.H[t], self.G[t] = i, x, h, g
        self.a[t], self.c[t] = a, gamma / den
        self.taken[i] = True
        self.t += 1

    def truncate(self, t):
        self.taken[self.point[t : self.t]] = False
        self.t = t


def _times(Kinv, x):
    """K^-1 x by one numba pass over K^-1 in one thread (see LAS.score_vectors)."""
    return times_columns(Kinv, x[None, :])[:, 0]


class FantasizedBatch:
    """Chooses one batch for a synced LAS ``las`` (its state is not changed).

    ``passes``: verification passes over X; ``chunks_read``: chunks read for the first
    candidates' rows (whole chunks are read); ``cost``: both, in passes over X."""

    def __init__(self, las, fantasy, candidates=None, cap=CAP):
        p = las.params
        if p.alpha != 0:
            raise ParameterError("fantasized batches select by f: use alpha = 0 (or no fantasy)")
        self.las, self.fantasy, self.cap = las, fantasy, cap
        self.eta, self.b_unl, self.b_lab = p.eta, 1.0 / (1.0 + p.w0), 1.0 - p.eta
        self.q_unl = p.pi * p.w0 / (1.0 + p.w0)
        self.deg = np.asarray(las.backend.gather("deg"))
        self.labeled = las._label >= 0
        self.passes = self.chunks_read = 0
        self.candidates = candidates  # M; default candidate_size(B)

    @property
    def cost(self):
        return self.passes + self.chunks_read / self.las.store.n_chunks

    def choose(self, k):
        k = min(int(k), int((~self.labeled).sum()))
        self._first_candidates(self.candidates or candidate_size(k))
        st = Fantasized(self.las.Kinv, self.las.xq, self.labeled, k + 1)
        horizon = k  # steps speculated per pass: halved to what the last pass kept when it failed
        while st.t < k:
            kept = st.t
            want = min(horizon, k - kept)
            steps = self._speculate(st, want)
            exact = self._verify(steps, refill=steps[-1][0] < 0)
            st.truncate(kept + exact)
            horizon = 2 * horizon if exact == len(steps) else max(2, 2 * exact)
        return st.point[:k].tolist()

    # -- candidates: the best points by the engine's f, with their rows ----------------
    def _first_candidates(self, m):
        f = np.where(self.labeled, -np.inf, self.las.backend.gather("f"))
        free = np.flatnonzero(~self.labeled)
        idx = best_ranked(free, f[free], m)[0]
        self.C, self.XC = np.zeros(0, np.int64), np.zeros((0, self.las.store.r))
        self._add(idx, self.las.store.read_rows(idx))
        self.chunks_read += len(np.unique([self.las.store.chunk_of(i) for i in idx]))

    def _add(self, idx, rows):
        new = ~np.isin(idx, self.C)
        self.C = np.concatenate([self.C, idx[new]])
        self.XC = np.vstack([self.XC, rows[new]])
        self.rhoC = self.b_unl / self.deg[self.C]

    # -- speculation among the candidates: (point, its f, v) per step --------------------
    def _speculate(self, st, k):
        steps = []
        for _ in range(k):
            v = st.v()
            free = ~st.taken[self.C]
            if not free.any():
                steps.append((-1, -np.inf, v))  # the candidates ran out: v for the refill
                break
            f = np.where(free, self.q_unl + self.rhoC * rows_product(self.XC, v), -np.inf)  # ties alike
            j = int(np.lexsort((self.C, -f))[0])
            i, fi = int(self.C[j]), float(f[j])
            steps.append((i, fi, v))
            self._tell(st, i, fi)
        return steps

    # -- verification: one pass over X ----------------------------------------------------
    def _verify(self, steps, refill):
        """The number of speculated steps that are exact; adds the points that reached
        the later steps (or, with ``refill``, the best ones at the last v) as candidates."""
        V = np.column_stack([v for _, _, v in steps])
        fstar = np.array([fi for _, fi, _ in steps])
        caps = np.full(len(steps), self.cap)
        if refill:
            caps[-1] = self.candidates or candidate_size(len(steps))
        args = (V, fstar, caps, np.sort(self.C), self.q_unl, self.b_unl)
        parts = self.las.backend.map(FANTASY_CHECK, *args)
        if not all(isinstance(q, Reached) for q in parts):  # a lost worker's chunks were rebuilt: again
            parts = self.las.backend.map(FANTASY_CHECK, *args)
        self.passes += 1
        step = np.concatenate([q.step for q in parts])
        exact = int(step.min()) if len(step) else len(steps)
        if refill:
            exact = min(exact, len(steps) - 1)
        if exact < len(steps):
            self._take_reached(parts, exact, caps)
        return exact

    def _take_reached(self, parts, first, caps):
        idx = np.concatenate([q.point for q in parts])
        step = np.concatenate([q.step for q in parts])
        score = np.concatenate([q.score for q in parts])
        keep = []
        for t in np.unique(step[step >= first]):  # the best cap per step over all chunks
            at = np.flatnonzero(step == t)
            keep.append(best_ranked(idx[at], score[at], int(caps[t]))[0])
        new = np.unique(np.concatenate(keep))
        rows = {int(i): r for q in parts for i, r in zip(q.row_index, q.rows)}
        self._add(new, np.array([rows[int(i)] for i in new]).reshape(len(new), -1))

    def _tell(self, st, i, fi):
        """A fantasized label, as a real label would change K^-1 and xq."""
        x = self.XC[np.flatnonzero(self.C == i)[0]]
        y = fi if self.fantasy == "f" else self.fantasy
        st.tell(i, x, (self.b_unl - self.b_lab) / self.deg[i], self.eta * y - self.q_unl)


class Reached(NamedTuple):
    """A chunk's part of a verification: the (index, step, score) of its points that
    reach a speculated step's f* (at most ``cap`` per step), and their rows."""

    point: np.ndarray
    step: np.ndarray
    score: np.ndarray
    row_index: np.ndarray
    rows: np.ndarray


def fantasy_check_step(x, state, V, fstar, caps, candidates, q_unl, b_unl):
    """f at every column of V for the chunk's unlabeled rows outside ``candidates``;
    per column t, the best ``caps[t]`` of those with f >= fstar[t] (rounding margin
    included)."""
    lo, hi = np.searchsorted(candidates, [state.start, state.stop])
    outside = state.label < 0
    outside[candidates[lo:hi] - state.start] = False
    v_norm = np.linalg.norm(V, axis=0)
    found = []
    for a, xb in decoded_blocks(x):
        local = np.flatnonzero(outside[a : a + len(xb)])
        if not len(local):
            continue
        rho = b_unl / state.deg[a + local]
        f = q_unl + rho[:, None] * (xb[local] @ V)
        margin = SAFETY * (np.abs(fstar) + np.abs(q_unl) + (rho * np.linalg.norm(xb[local], axis=1))[:, None] * v_norm)
        rows, cols = np.nonzero(f >= fstar - margin)
        found.append((a + local[rows], cols, f[rows, cols]))
    idx, step, score = (np.concatenate(c) for c in zip(*found)) if found else (np.zeros(0, np.int64),) * 3
    if not len(idx):
        return Reached(*(np.zeros(0, np.int64),) * 4, np.zeros((0, V.shape[0])))
    keep = np.concatenate(
        [
            at[np.lexsort((idx[at], -score[at]))[: int(caps[t])]]
            for t in np.unique(step)
            for at in [np.flatnonzero(step == t)]
        ]
    )
    row_index = np.unique(idx[keep])
    return Reached(
        idx[keep] + state.start, step[keep], score[keep], row_index + state.start, decode(take(x, row_index))
    )


# It reads the chunk's labels and degrees, state it did not create: a lost chunk is rebuilt
# by the engine's recipe, whose partials are not Reached, and the pass is run again.
FANTASY_CHECK = ChunkStep(fantasy_check_step)
