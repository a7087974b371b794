"""Screening: the records most likely relevant next, for reviewers reading documents.

The score of a record x is a linear classifier's plus, optionally, its similarity to the
nearest relevant records found so far:

    f(x) = x . v + b + t * nn(x),     nn(x) = mean of the k largest x . x_p over positives p.

v and b: weighted ridge regression of the answers (1 relevant, 0 not) on the features,
where the records not read yet count as weak negatives (target 0): the reviewer's
negatives are the near misses the search asked about, and only the unread records show
the classifier what an ordinary record looks like (without them it ranks the last
relevant records 2.6x worse, docs/screening.md). The weights are ASReview's balancing,
with the unread records counted as ``unread`` negatives between them:

    relevant: 1;  read negatives and the unread as a whole: n_pos / balance together,
    shared as n_neg : unread;  everything scaled to sum to n_labeled + unread,

    minimize  sum_i c_i (y_i - b - x_i . v)^2 + ridge |v|^2.

Its normal equations need only X^T X and X^T 1 over all records (one pass at the start)
and the labeled rows: the fit is exact, r x r, and costs no pass; one pass per query
scores every record (and updates nn from the new positives). t weighs nn as much as the
linear score: t = neighbour_weight * sd(x . v) / sd(nn) over the unread records (sd(x . v)
from X^T X exactly, sd(nn) from the previous pass's sums).
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import scipy.linalg

from ...backends import ChunkStep, StepCall
from ...kernels.screen import screen_scores
from ..core.base import ChunkedSearch, PointArray, StoreLike
from ..core.params import ScreenOptions, ScreenParams
from ..core.select import ChunkPartials
from ..core.steps import PLAIN_GRAM

POSITIVES_PER_PASS = 48  # rows of new positives a pass takes at once (a rebuild loops)


def screen_step(x, state, V, b, t, k, label_idx, label_val):
    """New labels into the chunk's state, then the scoring pass (kernels/screen.py)."""
    state.apply_labels(label_idx, label_val)
    s = state
    return ChunkPartials(*screen_scores(x, V, b, t, k, s.start, s.label, s.nn0, s.nn1, s.nn2, s.f))


def screen_reset_step(x, state, V, b, t, k, label_idx, label_val):
    """The chunk's similarities to positives forgotten, then rebuilt from the positives in V."""
    state.nn0[:] = -np.inf
    state.nn1[:] = -np.inf
    state.nn2[:] = -np.inf
    return screen_step(x, state, V, b, t, k, label_idx, label_val)


SCREEN = ChunkStep(screen_step)
SCREEN_RESET = ChunkStep(screen_reset_step)


class Screen(ChunkedSearch):
    """Screening search over a feature store of documents (or any features).

    Parameters
    ----------
    store : path or FeatureStore
    ridge : float
        The penalty on v.
    balance : float
        How many times less the negatives weigh, in all, than the positives (ASReview's 9.8).
    unread : float
        How many negatives the unread records count for, in all (0: they are left out).
    neighbours : int
        k, the nearest positives whose similarities nn averages (1 to 3).
    neighbour_weight : float
        The weight of nn against the linear score, in standard deviations (0: the
        classifier alone).
    backend, n_threads : as for LAS.
    """

    method = "screen"
    params: ScreenParams
    POINT_STATE = (
        PointArray("label", np.int8, -1),
        PointArray("nn0", np.float64, -np.inf),
        PointArray("nn1", np.float64, -np.inf),
        PointArray("nn2", np.float64, -np.inf),
        PointArray("f", np.float64, 0.0),
    )
    SAVED_GLOBALS: ClassVar[tuple[str, ...]] = ("G", "s", "GP", "sP", "GN", "sN", "nn_spread")
    SAVED_POINT_ARRAYS = ("nn0", "nn1", "nn2")

    def __init__(
        self,
        store: StoreLike,
        *,
        ridge: float = 1.0,
        balance: float = 9.8,
        unread: float = 300.0,
        neighbours: int = 3,
        neighbour_weight: float = 1.0,
        backend: Any = "local",
        n_threads: int | None = None,
        store_options: dict[str, Any] | None = None,
    ) -> None:
        options = ScreenOptions(ridge, balance, unread, neighbours, neighbour_weight)  # checked
        super().__init__(
            store, ScreenParams(**options.as_dict()), backend=backend, n_threads=n_threads, store_options=store_options
        )
        r = self.store.r
        self.G, self.s = np.zeros((r, r)), np.zeros(r)  # X^T X, X^T 1 over every record
        self.GP, self.sP = np.zeros((r, r)), np.zeros(r)  # ... over the positives
        self.GN, self.sN = np.zeros((r, r)), np.zeros(r)  # ... over the labeled negatives
        self.n_pos = self.n_neg = 0
        self.nn_spread = np.zeros(3)  # [sum nn, sum nn^2, count] of the last pass
        self.v, self.b, self.t = np.zeros(r), 0.0, 0.0

    # -- the model ----------------------------------------------------------------
    def weights(self) -> tuple[float, float, float]:
        """(c_pos, c_neg, c_unread): each labeled positive's, labeled negative's and unread
        record's weight in the fit."""
        p = self.params
        n_labeled, n_unread = self.n_pos + self.n_neg, self.n - self.n_pos - self.n_neg
        pos = max(self.n_pos, 1)
        neg_each = pos / (p.balance * (self.n_neg + p.unread)) if self.n_neg + p.unread > 0 else 0.0
        unread_each = p.unread * neg_each / n_unread if n_unread else 0.0
        total = self.n_pos + self.n_neg * neg_each + n_unread * unread_each
        scale = (n_labeled + p.unread) / total if total > 0 else 1.0
        return scale, neg_each * scale, unread_each * scale

    def _fit(self) -> None:
        """v and b from the normal equations (labeled rows and X^T X only: no pass)."""
        c_pos, c_neg, c_un = self.weights()
        S2 = c_un * (self.G - self.GP - self.GN) + c_pos * self.GP + c_neg * self.GN
        s1 = c_un * (self.s - self.sP - self.sN) + c_pos * self.sP + c_neg * self.sN
        W = c_un * (self.n - self.n_pos - self.n_neg) + c_pos * self.n_pos + c_neg * self.n_neg
        xbar, ybar = s1 / W, c_pos * self.n_pos / W
        A = S2 - W * np.outer(xbar, xbar)
        A[np.diag_indices_from(A)] += self.params.ridge
        self.v = scipy.linalg.solve(A, c_pos * self.sP - W * xbar * ybar, assume_a="pos")  # A: SPD
        self.b = float(ybar - xbar @ self.v)
        self.t = self._neighbour_scale()

    def _neighbour_scale(self) -> float:
        """t = neighbour_weight * sd(x . v) / sd(nn) over the unread records."""
        w = self.params.neighbour_weight
        total, squares, count = self.nn_spread
        if w == 0 or count < 2 or self.n_pos == 0:
            return 0.0
        nn_var = max(squares / count - (total / count) ** 2, 0.0)
        n_un = self.n - self.n_pos - self.n_neg
        mean = (self.s - self.sP - self.sN) / n_un
        G_un = (self.G - self.GP - self.GN) / n_un
        lin_var = max(float(self.v @ G_un @ self.v - (mean @ self.v) ** 2), 0.0)
        return w * float(np.sqrt(lin_var / nn_var)) if nn_var > 0 else 0.0

    @property
    def k_used(self) -> int:
        return min(self.params.neighbours, self.n_pos) if self.params.neighbour_weight > 0 else 0

    # -- the passes ---------------------------------------------------------------
    def _initialize(self) -> None:
        parts = self.backend.map(PLAIN_GRAM)
        self.G = np.sum([p.G for p in parts], axis=0)
        self.s = np.sum([p.s for p in parts], axis=0)
        idx, lab = self._take_pending()
        self._count(idx, lab)
        self._score(idx, lab, SCREEN_RESET, self._positive_rows(idx, lab))
        self._ready = True

    def _update(self, idx: np.ndarray, lab: np.ndarray) -> None:
        self._count(idx, lab)
        self._score(idx, lab, SCREEN, self._positive_rows(idx, lab))

    def _count(self, idx: np.ndarray, lab: np.ndarray) -> None:
        """The labeled rows' sums, by class."""
        if not len(idx):
            return
        rows = self.store.read_rows(idx).astype(np.float64)
        pos = np.asarray(lab) >= 0.5
        for mask, G, s in ((pos, self.GP, self.sP), (~pos, self.GN, self.sN)):
            if mask.any():
                G += rows[mask].T @ rows[mask]
                s += rows[mask].sum(axis=0)
        self.n_pos += int(pos.sum())
        self.n_neg += int((~pos).sum())

    def _positive_rows(self, idx: np.ndarray, lab: np.ndarray) -> np.ndarray:
        rows = self.store.read_rows(idx[np.asarray(lab) >= 0.5]) if len(idx) else np.zeros((0, self.store.r))
        return np.asarray(rows, np.float64)

    def _score(self, idx: np.ndarray, lab: np.ndarray, step: ChunkStep, positives: np.ndarray) -> None:
        """Fit, then the pass(es): the new positives' similarities go in a few at a time."""
        self._fit()
        batches = [positives[a : a + POSITIVES_PER_PASS] for a in range(0, len(positives), POSITIVES_PER_PASS)]
        for i, rows in enumerate(batches or [positives]):
            first = i == 0
            self._summary = None
            V = np.vstack([self.v[None, :], rows])
            self._pass(
                step if first else SCREEN,
                V,
                self.b,
                self.t,
                self.k_used,
                idx if first else idx[:0],
                np.asarray(lab, np.int8) if first else np.zeros(0, np.int8),
            )
        summary = self._summary
        assert summary is not None
        self.nn_spread = np.array([summary.sum_f, summary.sum_im, summary.n_unlabeled], float)

    @property
    def f(self) -> np.ndarray:
        """The screening score of every record."""
        return self._point_values("f")

    def rebuild_recipe(self) -> StepCall:
        """A lost chunk: its labels, and its similarities from every positive (a large
        batch of positives goes in one call here: a rebuild is rare)."""
        idx, lab = self.history_arrays()
        positives = self._positive_rows(idx, lab)
        V = np.vstack([self.v[None, :], positives])
        return StepCall(SCREEN_RESET, (V, self.b, self.t, self.k_used, idx, np.asarray(lab, np.int8)))

    def _restore(self, meta: dict[str, Any]) -> None:
        """The sums and similarities are set: the labels, the fit and one scoring pass."""
        idx, lab = self.history_arrays()
        self.n_pos = int(np.sum(np.asarray(lab) >= 0.5))
        self.n_neg = len(idx) - self.n_pos
        self._score(idx, lab, SCREEN, np.zeros((0, self.store.r)))
