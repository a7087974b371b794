"""Batches that are not wasted: sequential greedy with fantasized answers (issue 18).

The top B points of one pass are often near-duplicates: what makes the first a good
query makes its neighbours good too, and the batch learns nothing the first label would
not have taught. Instead, choose the batch as B sequential greedy LAS queries, each chosen
point told a *fantasized* soft label y_f before the next is chosen (y_f = 0: "assume a
miss until measured", or "f": its own current f); the real answers replace them when the
batch is labeled.

Exact, with a candidate set. The fantasized labels change only the global state (K^-1
by Sherman-Morrison, xq), so f_j = q_j + rho_j x_j . v with v = K^-1 xq for every
unlabeled j. One pass over X computes f everywhere and keeps the M best (the candidate
set C, its rows held in memory, M = 4B + 16), tau = the smallest f in C (no point
outside C is above it at the start) and R = max_j rho_j sqrt(J_j) over unlabeled points.
After fantasized labels moved v from v0, every point outside C has

    f_j <= tau + min(R sqrt((v - v0)^T K0 (v - v0)), [0 when monotone])

(Cauchy-Schwarz in the K0^-1 inner product, J_j = x_j^T K0^-1 x_j). "Monotone": with
X >= 0 (so every similarity is >= 0) and 1 - eta <= 1 / (1 + w0), a fantasized 0 can
only lower every other f (in the random-walk view, the chosen point absorbs more walks,
at value 0), so the growth term is 0. When C's best point is above the bound (relative
margin 1e-12) it is the exact argmax over all unlabeled points, computed from M rows;
otherwise another pass rebuilds C (``passes`` counts them). Tests check the batches
against the naive fantasized greedy by full dense solves.

Measured limit (docs/discovery.md): on the docking library's graph (dense, all
similarities > 0) each fantasized 0 lowers nearly every f by about 1%, C's own points
included, more than the gap between C and the rest, so the bound fails at almost every
step and a batch of B costs about B passes (the cost of B sequential queries), not 2.

The selection is by f (alpha = 0): the impact factor is not fantasized.
"""

import numpy as np

from ..errors import NumericalError, ParameterError
from ..kernels.dense import times_columns
from ..storage.encoding import decode

MARGIN = 1e-12


def check_fantasy(value):
    """None (top-B batches), "f", or a soft label in [0, 1]."""
    if value is None or value == "f":
        return value
    try:
        y = float(value)
    except (TypeError, ValueError):
        raise ParameterError(f"fantasy must be 'f' or a label in [0, 1], got {value!r}") from None
    if not 0.0 <= y <= 1.0:
        raise ParameterError(f"fantasy must be 'f' or a label in [0, 1], got {value!r}")
    return y


def candidate_size(k):
    return 4 * k + 16


class FantasizedBatch:
    """Chooses one batch for a synced LAS ``las`` (its state is not changed)."""

    def __init__(self, las, fantasy, candidates=None):
        p = las.params
        if p.alpha != 0:
            raise ParameterError("fantasized batches select by f: use alpha = 0 (or no --fantasy)")
        self.las, self.fantasy = las, fantasy
        self.eta, self.b_unl, self.b_lab = p.eta, 1.0 / (1.0 + p.w0), 1.0 - p.eta
        self.q_unl = p.pi * p.w0 / (1.0 + p.w0)
        self.Kinv, self.K, self.xq = las.Kinv.copy(), las.K.copy(), las.xq.copy()
        self.J = np.asarray(las.backend.gather("J"))
        self.deg = np.asarray(las.backend.gather("deg"))
        self.taken = np.zeros(las.n, bool)  # labeled, or chosen for this batch
        self.taken[las._label >= 0] = True
        self.passes = 0
        self.candidates = candidates  # M; default candidate_size(B)

    def choose(self, k):
        chosen = []
        k = min(k, int((~self.taken).sum()))
        have_candidates = False
        while len(chosen) < k:
            v = times_columns(self.Kinv, self.xq[None, :])[:, 0]  # one thread: see LAS.score_vectors
            if not have_candidates:
                self._scan(v, k - len(chosen))
            i, fi = self._best(v, scanned=not have_candidates)
            have_candidates = i >= 0  # else the bound failed: scan again
            if have_candidates:
                chosen.append(i)
                self._tell(i, fi)
        return chosen

    # -- one pass: f everywhere, the candidate set and the bound --------------------------
    def _scan(self, v, k):
        store, m = self.las.store, self.candidates or candidate_size(k)
        best_f, best_i, R, self.x_min = np.zeros(0), np.zeros(0, np.int64), 0.0, np.inf
        for j in range(store.n_chunks):
            a, b = store.chunks[j]
            with store.chunk(j) as x:
                rows = decode(x)
            free = ~self.taken[a:b]
            self.x_min = min(self.x_min, float(rows.min()))
            rho = self.b_unl / self.deg[a:b]
            f = self.q_unl + rho * (rows @ v)
            R = max(R, float(np.max(np.where(free, rho * np.sqrt(np.maximum(self.J[a:b], 0.0)), 0.0))))
            idx = a + np.flatnonzero(free)
            best_f, best_i = _keep_best(np.concatenate([best_f, f[free]]), np.concatenate([best_i, idx]), m)
        self.passes += 1
        self.C, self.v0, self.R, self.K0 = best_i, v.copy(), R, self.K.copy()
        self.tau = best_f.min() if len(best_i) == m else -np.inf  # C holds every free point otherwise
        self.XC = self.las.store.read_rows(self.C)

    def _best(self, v, scanned):
        """C's best free point, when right after a scan (C holds the top M) or when the
        bound proves nothing outside C beats it; else (-1, 0)."""
        free = ~self.taken[self.C]
        if not free.any():
            return -1, 0.0
        rho = self.b_unl / self.deg[self.C]
        f = np.where(free, self.q_unl + rho * (self.XC @ v), -np.inf)
        i = int(np.lexsort((self.C, -f))[0])
        if not scanned and np.isfinite(self.tau):
            bound = self.tau + self._growth(v - self.v0)
            if f[i] <= bound + MARGIN * (abs(bound) + abs(f[i])):
                return -1, 0.0
        return int(self.C[i]), float(f[i])

    def _growth(self, dv):
        """An upper bound on rho_j x_j . dv over free points outside C: the K-norm
        bound R sqrt(dv^T K0 dv), and 0 when fantasized zeros can only lower f."""
        k_norm = self.R * np.sqrt(max(dv @ self.K0 @ dv, 0.0))
        return min(k_norm, 0.0) if self._monotone() else k_norm

    def _monotone(self):
        """Whether fantasized 0 labels can only lower every other f (see the module doc)."""
        return self.fantasy == 0.0 and self.x_min >= 0 and self.b_lab <= self.b_unl

    # -- a fantasized label: Sherman-Morrison on K^-1 and xq, as a real label would ---------
    def _tell(self, i, fi):
        x = self.XC[np.flatnonzero(self.C == i)[0]]
        y = fi if self.fantasy == "f" else self.fantasy
        gamma = (self.b_unl - self.b_lab) / self.deg[i]
        g = times_columns(self.Kinv, x[None, :])[:, 0]
        den = 1.0 + gamma * (x @ g)
        if not (np.isfinite(den) and den > 0):
            raise NumericalError(f"fantasized label for point {i}: Sherman-Morrison denominator {den!r}")
        self.Kinv -= (gamma / den) * np.outer(g, g)
        self.K += gamma * np.outer(x, x)
        self.xq += x * (self.eta * y - self.q_unl)
        self.taken[i] = True


def _keep_best(f, idx, m):
    """The m highest f (ties: lowest index), as (f, idx)."""
    if len(f) <= m:
        return f, idx
    order = np.lexsort((idx, -f))[:m]
    return f[order], idx[order]
