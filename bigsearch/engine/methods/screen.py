"""Screening: the records most likely relevant next, for reviewers reading documents.

The score of a record x is a linear classifier's plus, optionally, its similarity to the
nearest relevant records found so far:

    f(x) = x . v + b + t * nn(x),     nn(x) = mean of the k largest x . x_p over positives p.

v and b: weighted ridge regression of the answers (1 relevant, 0 not) on the features,
with ASReview's balancing: the negatives in all weigh 1/balance of the positives. With
``unread`` > 0 the records not read yet count as weak negatives too (target 0), as
``unread`` negatives in all: they show the classifier what an ordinary record looks like.
Alone, that ridge read 0.84-0.87x ASReview's records on the published screening set but
1.3-1.4x on synthetic corpora, where the answers-only ridge read 0.98x and 0.84x on the
published set (docs/screening.md). So by default (``adapt``) the score is both ridges'
scores, each standardized over the unread records, weighed by a softmax of minus their
recent losses: each answer costs a ridge the share of the unread records it had put above
the record when relevant (below it when not; a normal share from the score's exact mean
and spread), the older answers' costs halving every ADAPT_HALF_LIFE answers. The weights:
    relevant: 1;  read negatives and the unread as a whole: n_pos / balance together,
    shared as n_neg : unread;  everything scaled to sum to n_labeled + unread,

    minimize  sum_i c_i (y_i - b - x_i . v)^2 + ridge |v|^2.

Its normal equations need only X^T X and X^T 1 over all records (one pass at the start)
and the labeled rows: the fit is exact, r x r, and costs no pass; one pass per query
scores every record (and updates nn from the new positives). Text features of a small
corpus have r ~ n (ingest/text.py: one per document, the cosines exact), where an r x r
solve a query is the cost: while the labels are few the fit is X^T X's eigenbasis (once)
plus the labels as a low-rank update (Woodbury), checked by its residual. t weighs nn as much as the
linear score: t = neighbour_weight * sd(x . v) / sd(nn) over the unread records (sd(x . v)
from X^T X exactly, sd(nn) from the previous pass's sums).

A ranked search reads the records most like the relevant ones found: a group of relevant
records unlike any of them (a review's second topic) waits until the search stumbles on
one. After ``explore_after`` irrelevant records in a row the queries are records drawn at
random from the unread ones and ranked records, ``explore_after`` of each by turns, until one
is relevant (engine/guidance/exploration.py); the ranking then follows what it found.

With ``prune`` and neighbour_weight 0 (the default) the score is linear in x and its fit
needs no pass, so a query reads only the blocks of X that could hold the best records
(engine/pruning/screen.py): the same queries as the full pass, ties included. nn, unused
then, is not kept. With neighbour_weight > 0 every query is a full pass
(``pruning_status`` says so).
"""

from __future__ import annotations

import math
from typing import Any, ClassVar, NamedTuple

import numpy as np
import scipy.linalg
import scipy.special
from scipy.linalg.blas import daxpy, dger

from ...backends import ChunkStep, StepCall
from ...errors import NumericalError
from ...kernels.screen import screen_scores
from ..core.base import PointArray, PrunableSearch, StoreLike
from ..core.blas import blas_threads
from ..core.params import PruneOptions, ScreenOptions, ScreenParams
from ..core.select import ChunkPartials, Ranked
from ..core.steps import PLAIN_GRAM
from ..guidance.exploration import exploring, random_unread
from ..pruning.screen import ScreenPruning

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


def _add_gram(G: np.ndarray, rows: np.ndarray) -> None:
    """G += rows^T rows in place (a query's one row: a rank-1 BLAS update, no r x r temporary)."""
    if len(rows) > 8:
        G += rows.T @ rows
        return
    for x in rows:
        dger(1.0, x, x, a=G.T, overwrite_a=True)  # G.T: the Fortran-ordered view of G


class Ridge(NamedTuple):
    """One ridge's weights and the mean and spread of its score over the unread records."""

    v: np.ndarray
    b: float
    mean: float
    sd: float


SCREEN = ChunkStep(screen_step)
SCREEN_RESET = ChunkStep(screen_reset_step)


class Screen(PrunableSearch):
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
    adapt : bool
        With ``unread`` > 0: score by two ridges, the answers alone and the answers with
        the unread records, each weighed by how well it ranked the latest answers (False:
        the second ridge alone).
    neighbours : int
        k, the nearest positives whose similarities nn averages (1 to 3).
    neighbour_weight : float
        The weight of nn against the linear score, in standard deviations (0: the
        classifier alone).
    explore_after : int
        After this many irrelevant records in a row, as many records drawn at random,
        then as many ranked, by turns until one is relevant (engine/guidance/exploration.py;
        0: never).
    prune : bool
        Exact pruned queries while neighbour_weight is 0 (engine/pruning/screen.py): a
        query reads only the blocks of rows that could hold the answer
        (``pruning_status`` says whether it is on, and why not).
    block_rows : int, optional
        Rows per pruning block (a multiple of 64; default 128).
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
    SAVED_GLOBALS: ClassVar[tuple[str, ...]] = ("G", "s", "GP", "sP", "GN", "sN", "nn_spread", "ridge_losses")
    SAVED_POINT_ARRAYS = ("nn0", "nn1", "nn2")

    def __init__(
        self,
        store: StoreLike,
        *,
        ridge: float = 1.0,
        balance: float = 9.8,
        unread: float = 1000.0,
        adapt: bool = True,
        neighbours: int = 3,
        neighbour_weight: float = 0.0,
        explore_after: int = 100,
        backend: Any = "local",
        n_threads: int | None = None,
        store_options: dict[str, Any] | None = None,
        prune: bool | PruneOptions = False,
        block_rows: int | None = None,
    ) -> None:
        options = ScreenOptions(
            ridge, balance, unread, adapt, neighbours, neighbour_weight, explore_after, prune, block_rows
        )
        params = ScreenParams(**{name: getattr(options, name) for name in ScreenParams.names()})  # checked
        super().__init__(store, params, backend=backend, n_threads=n_threads, store_options=store_options)
        r = self.store.r
        self.G, self.s = np.zeros((r, r)), np.zeros(r)  # X^T X, X^T 1 over every record
        self.GP, self.sP = np.zeros((r, r)), np.zeros(r)  # ... over the positives
        self.GN, self.sN = np.zeros((r, r)), np.zeros(r)  # ... over the labeled negatives
        self.n_pos = self.n_neg = 0
        self.nn_spread = np.zeros(3)  # [sum nn, sum nn^2, count] of the last pass
        self.v, self.b, self.t = np.zeros(r), 0.0, 0.0
        self._eig: tuple[np.ndarray, np.ndarray] | None = None  # G = Q diag(w) Q^T (low-rank fits)
        self._coords = np.zeros((0, r))  # Q^T x of the labeled rows, in the order told (a buffer)
        self._coords_count = 0
        self._last_rows: tuple[np.ndarray, np.ndarray] | None = None  # (indices, rows): _rows
        self._products: dict[float, tuple[np.ndarray, np.ndarray]] = {}  # unread: (d, L diag(d) L^T), last fit
        self.ridge_losses = np.zeros(2)  # the two ridges' discounted ranking losses (adapt)
        self._ridges: tuple[Ridge, ...] = ()  # the ridges of the last fit, standardized (adapt)
        self._start_pruning(ScreenPruning, options.prune, options.block_rows)

    def engine_options(self) -> dict[str, Any]:
        return self._prune_keywords()

    # -- the choice ---------------------------------------------------------------
    @property
    def exploring(self) -> bool:
        """Whether the next records are drawn at random (the search has run dry)."""
        return exploring(self.history_arrays()[1], self.params.explore_after)

    def _top(self, k: int) -> Ranked:
        """The best k by score; while exploring, k records drawn at random (with their last
        scores), so ``ask``, batches, sessions and the page all take the draws."""
        told, labels = self.history_arrays()
        if not exploring(labels, self.params.explore_after):
            return super()._top(k)
        idx = np.array(random_unread(self.n, told, k, step=len(labels)), np.int64)
        self._end_round()  # a draw reads nothing of X
        return Ranked(idx, self.backend.gather("f")[idx])

    # -- the model ----------------------------------------------------------------
    def weights(self, unread: float | None = None) -> tuple[float, float, float]:
        """(c_pos, c_neg, c_unread): each labeled positive's, labeled negative's and unread
        record's weight in the fit (``unread``: the unread records' count as negatives, the
        parameter's by default)."""
        p = self.params
        unread = p.unread if unread is None else unread
        n_labeled, n_unread = self.n_pos + self.n_neg, self.n - self.n_pos - self.n_neg
        pos = max(self.n_pos, 1)
        neg_each = pos / (p.balance * (self.n_neg + unread)) if self.n_neg + unread > 0 else 0.0
        unread_each = unread * neg_each / n_unread if n_unread else 0.0
        total = self.n_pos + self.n_neg * neg_each + n_unread * unread_each
        scale = (n_labeled + unread) / total if total > 0 else 1.0
        return scale, neg_each * scale, unread_each * scale

    # adapt: the two ridges' weights are a softmax of minus their losses over this temperature
    # (in answers ranked wrongly); an answer's part in a loss halves every ADAPT_HALF_LIFE
    # answers (measured on the given set and synthetic corpora: docs/screening.md)
    ADAPT_TEMPERATURE = 2.0
    ADAPT_HALF_LIFE = 30

    def _fit(self) -> None:
        """v and b (no pass): one ridge, or with ``adapt`` the two ridges' standardized scores
        weighed by their recent ranking of the answers. A few r x r products a query: on one
        BLAS thread while small (engine/core/blas.py; on the given screening set, r = 2,304,
        a run took 66 ms a query with BLAS on both cores against 42 ms)."""
        p = self.params
        with blas_threads(4 * self.G.size):
            if p.unread == 0 or not p.adapt:
                self.v, self.b = self._ridge(p.unread)
                self._ridges = ()
            else:
                self._ridges = tuple(self._standardized(*self._ridge(u)) for u in (0.0, p.unread))
                self.v, self.b = self._weighed_ridges()
        if not np.all(np.isfinite(self.v)):
            raise NumericalError("screen: the classifier's weights are not finite (X holds non-finite values?)")
        self.t = self._neighbour_scale()

    def _weighed_ridges(self) -> tuple[np.ndarray, float]:
        """v and b of the ridges' standardized scores weighed by ``ridge_weights``."""
        w = self.ridge_weights()
        v = sum(wi / m.sd * m.v for wi, m in zip(w, self._ridges))
        return v, float(sum(wi * (m.b - m.mean) / m.sd for wi, m in zip(w, self._ridges)))

    def ridge_weights(self) -> np.ndarray:
        """The answers-only ridge's and the unread ridge's weights (adapt), summing to 1."""
        z = -(self.ridge_losses - self.ridge_losses.min()) / self.ADAPT_TEMPERATURE
        return np.exp(z) / np.exp(z).sum()

    def _rank_answers(self, rows: np.ndarray, lab: np.ndarray) -> None:
        """Each ridge's loss: the sum of its ``answer_costs``, an answer's part halving every
        ADAPT_HALF_LIFE answers."""
        if self._ridges:
            self._add_losses(self.answer_costs(rows, lab))

    def _add_losses(self, costs: np.ndarray) -> None:
        """Each scorer's costs (scorers x records, in answer order) into its loss."""
        decay = 0.5 ** (1.0 / self.ADAPT_HALF_LIFE)
        for k, scorer_costs in enumerate(costs):
            for cost in scorer_costs:
                self.ridge_losses[k] = decay * self.ridge_losses[k] + cost

    def answer_costs(self, rows: np.ndarray, lab: np.ndarray) -> np.ndarray:
        """Each ridge's cost of each record just answered (ridges x records), from where it
        put the record among the unread (its standardized score, as a normal share of the
        unread above): a relevant record costs that share, an irrelevant one the share below."""
        above = np.array([scipy.special.ndtr(-((rows @ m.v + m.b - m.mean) / m.sd)) for m in self._ridges])
        return np.where(np.asarray(lab) >= 0.5, above, 1.0 - above)

    def _standardized(self, v: np.ndarray, b: float) -> Ridge:
        """A ridge with the mean and spread of its score over the unread records (X^T X: exact)."""
        mean, var = self._unread_moments(v)
        return Ridge(v, b, mean + b, math.sqrt(var) if var > 0 else 1.0)

    def _unread_moments(self, v: np.ndarray) -> tuple[float, float]:
        """Mean and variance of x . v over the unread records."""
        n_un = self.n - self.n_pos - self.n_neg
        if n_un == 0:
            return 0.0, 0.0
        mean = (self.s - self.sP - self.sN) @ v / n_un
        Gv = self.G @ v - self.GP @ v - self.GN @ v  # three products, no r x r temporary
        square = float(v @ Gv) / n_un
        return float(mean), max(square - float(mean) ** 2, 0.0)

    def _ridge(self, unread: float) -> tuple[np.ndarray, float]:
        """The class-weighted ridge's v and b with the unread records as ``unread`` negatives."""
        c_pos, c_neg, c_un = self.weights(unread)
        s1 = c_un * (self.s - self.sP - self.sN) + c_pos * self.sP + c_neg * self.sN
        W = c_un * (self.n - self.n_pos - self.n_neg) + c_pos * self.n_pos + c_neg * self.n_neg
        if W <= 0:  # no answers and the unread records left out: nothing to fit, every score alike
            return np.zeros(self.store.r), 0.0
        xbar, ybar = s1 / W, c_pos * self.n_pos / W
        rhs = c_pos * self.sP - W * xbar * ybar
        r, m = self.store.r, self.n_pos + self.n_neg
        v = None
        if r >= self.LOW_RANK_MIN_FEATURES and m + 1 < r:
            v = self._low_rank_solve(c_pos, c_neg, c_un, W, xbar, rhs, unread)
        if v is None:
            v = self._full_solve(c_pos, c_neg, c_un, W, xbar, rhs)
        return v, float(ybar - xbar @ v)

    # Below this many features the r x r solve is cheap; above, while the labels are fewer than
    # the features, the fit goes through G's eigendecomposition and the labels' low rank: at
    # r = 2,304 (a screening set's exact text features) the Cholesky fit took 0.25-1 s a query,
    # the low-rank one (m^2 r in one matrix product) 0.02-0.2 s up to m = 1,000.
    LOW_RANK_MIN_FEATURES = 1024
    LOW_RANK_TOLERANCE = 1e-8  # relative residual of A v = rhs above which the full solve is used

    def _full_solve(self, c_pos, c_neg, c_un, W, xbar, rhs):
        """A v = rhs by Cholesky."""
        # A = c_un (G - GP - GN) + c_pos GP + c_neg GN - W xbar xbar^T + ridge I, in one r x r
        # buffer (at r = 2,304 the temporaries of the plain expression took 0.2 s a query)
        A = np.multiply(self.G, c_un)
        flat = A.reshape(-1)  # a view: BLAS updates it in place
        daxpy(self.GP.reshape(-1), flat, a=c_pos - c_un)
        daxpy(self.GN.reshape(-1), flat, a=c_neg - c_un)
        dger(-W, xbar, xbar, a=A.T, overwrite_a=True)  # A.T: the Fortran-ordered view of A
        A[np.diag_indices_from(A)] += self.params.ridge
        # A is SPD (ridge > 0); the store's values are finite, checked at ingest and on read
        with blas_threads(len(A) ** 3 // 3):
            return scipy.linalg.solve(A, rhs, assume_a="pos", overwrite_a=True, check_finite=False)

    def _low_rank_solve(self, c_pos, c_neg, c_un, W, xbar, rhs, unread):
        """A v = rhs with A = B + U C U^T: B = c_un G + ridge I, diagonal in G's eigenbasis,
        U = [labeled rows, xbar], C = diag(c_label - c_un, -W) (Woodbury's identity in the
        form that allows zeros in C). None when the residual says it lost accuracy."""
        w, Q = self._eigen()
        d = 1.0 / (c_un * w + self.params.ridge)
        L = self._labeled_coordinates(Q)
        x = xbar @ Q
        _, lab = self.history_arrays()
        C = np.append(np.where(np.asarray(lab) >= 0.5, c_pos - c_un, c_neg - c_un), -W)
        K = np.empty((len(C), len(C)))
        K[:-1, :-1] = self._labeled_products(L, d, unread)
        K[-1, :-1] = K[:-1, -1] = L @ (d * x)
        K[-1, -1] = x @ (d * x)
        z = d * (rhs @ Q)
        y = np.linalg.solve(np.eye(len(C)) + C[:, None] * K, C * np.append(L @ z, x @ z))
        v_eig = z - d * (y[:-1] @ L + y[-1] * x)
        Uv = np.append(L @ v_eig, x @ v_eig)
        residual = (c_un * w + self.params.ridge) * v_eig + (C[:-1] * Uv[:-1]) @ L + C[-1] * Uv[-1] * x - rhs @ Q
        if np.linalg.norm(residual) > self.LOW_RANK_TOLERANCE * max(np.linalg.norm(rhs), 1e-300):
            return None
        return Q @ v_eig

    def _labeled_products(self, L: np.ndarray, d: np.ndarray, unread: float) -> np.ndarray:
        """L diag(d) L^T, the rows of earlier queries kept while d is the same (it is while
        the unread records are left out: d = 1 / ridge), so a query adds one row, m r; kept
        per ridge (``unread``), as adapt fits two."""
        m = len(L)
        cached = self._products.get(unread)
        if cached is None or not np.array_equal(cached[0], d) or len(cached[1]) > m:
            cached = (d, np.zeros((0, 0)))
        old = cached[1]
        k = len(old)
        if k == m:
            return old
        out = np.empty((m, m))
        out[:k, :k] = old
        new = (L[k:] * d) @ L.T  # (m - k) x m
        out[k:, :] = new
        out[:k, k:] = new[:, :k].T
        self._products[unread] = (d, out)
        return out

    def _eigen(self) -> tuple[np.ndarray, np.ndarray]:
        """G's eigendecomposition, once (G is fixed from the initialization's pass on)."""
        if self._eig is None:
            with blas_threads(self.G.size * len(self.G)):
                w, Q = np.linalg.eigh(self.G)
            self._eig = (np.maximum(w, 0.0), Q)
        return self._eig

    def _labeled_coordinates(self, Q: np.ndarray) -> np.ndarray:
        """Q^T x of every labeled row in the order told (rows read once: those labeled
        before the eigenbasis existed, or before a restore, are read here), in a buffer
        that doubles as it fills."""
        idx, _ = self.history_arrays()
        have = self._coords_count
        if have < len(idx):
            rows = self._rows(idx[have:]) @ Q
            if len(self._coords) < len(idx):
                grown = np.empty((max(2 * len(self._coords), len(idx), 16), Q.shape[1]))
                grown[:have] = self._coords[:have]
                self._coords = grown
            self._coords[have : len(idx)] = rows
            self._coords_count = len(idx)
        return self._coords[: len(idx)]

    def _neighbour_scale(self) -> float:
        """t = neighbour_weight * sd(x . v) / sd(nn) over the unread records."""
        w = self.params.neighbour_weight
        total, squares, count = self.nn_spread
        if w == 0 or count < 2 or self.n_pos == 0:
            return 0.0
        nn_var = max(squares / count - (total / count) ** 2, 0.0)
        return w * float(np.sqrt(self._unread_moments(self.v)[1] / nn_var)) if nn_var > 0 else 0.0

    @property
    def k_used(self) -> int:
        return min(self.params.neighbours, self.n_pos) if self.params.neighbour_weight > 0 else 0

    # -- the passes ---------------------------------------------------------------
    def _initialize(self) -> None:
        parts = self.backend.map(PLAIN_GRAM)
        self.count_read(self.store.nbytes)
        self.G = np.sum([p.G for p in parts], axis=0)
        self.s = np.sum([p.s for p in parts], axis=0)
        idx, lab = self._take_pending()
        self._count(idx, lab)
        self._score(idx, lab, SCREEN_RESET, self._neighbour_rows(idx, lab))
        self._ready = True

    def _update(self, idx: np.ndarray, lab: np.ndarray) -> None:
        self._rank_answers(self._rows(idx), lab)
        self._count(idx, lab)
        pruning = self._pruned()
        if pruning is None:
            self._score(idx, lab, SCREEN, self._positive_rows(idx, lab))
            return
        self._fit()  # no pass: the next query reads the blocks it needs
        if len(idx):
            pruning.labels_told(idx, np.asarray(lab, np.int8))

    def _pass(self, step: Any, *args: Any, t_prev: float = 0.0) -> None:
        super()._pass(step, *args, t_prev=t_prev)
        self.count_read(self.store.nbytes)

    def _sync_scores(self) -> None:
        """_sync, then every f current: pruned queries leave the blocks they did not read
        behind (f at an older fit), so one full pass at the current fit."""
        self._sync()
        pruning = self._pruned()
        if pruning is not None and pruning.stale:
            self._pass(
                SCREEN, self.v[None, :], self.b, self.t, self.k_used, np.zeros(0, np.int64), np.zeros(0, np.int8)
            )
            pruning.after_full_pass()

    def _count(self, idx: np.ndarray, lab: np.ndarray) -> None:
        """The labeled rows' sums, by class."""
        if not len(idx):
            return
        rows = self._rows(idx)
        pos = np.asarray(lab) >= 0.5
        for mask, G, s in ((pos, self.GP, self.sP), (~pos, self.GN, self.sN)):
            if mask.any():
                _add_gram(G, rows[mask])
                s += rows[mask].sum(axis=0)
        self.n_pos += int(pos.sum())
        self.n_neg += int((~pos).sum())

    def _positive_rows(self, idx: np.ndarray, lab: np.ndarray) -> np.ndarray:
        return self._rows(idx)[np.asarray(lab) >= 0.5] if len(idx) else np.zeros((0, self.store.r))

    def _neighbour_rows(self, idx: np.ndarray, lab: np.ndarray) -> np.ndarray:
        """The positives among these rows whose similarities nn takes in: none with pruned
        queries (nn is unused then, neighbour_weight 0, and not kept)."""
        return np.zeros((0, self.store.r)) if self._pruned() is not None else self._positive_rows(idx, lab)

    def _rows(self, idx: np.ndarray) -> np.ndarray:
        """The rows idx (float64), read once for the sums, the positives and the coordinates
        an update needs: the last rows read are kept until other rows are asked for."""
        idx = np.asarray(idx)
        if self._last_rows is None or not np.array_equal(self._last_rows[0], idx):
            self._last_rows = (idx.copy(), np.asarray(self.store.read_rows(idx), np.float64))
        return self._last_rows[1]

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
        if self.pruning is not None:
            self.pruning.after_full_pass()

    @property
    def f(self) -> np.ndarray:
        """The screening score of every record."""
        return self._point_values("f")

    def rebuild_recipe(self) -> StepCall:
        """A lost chunk: its labels, and its similarities from every positive (a large
        batch of positives goes in one call here: a rebuild is rare)."""
        idx, lab = self.history_arrays()
        positives = self._neighbour_rows(idx, lab)
        V = np.vstack([self.v[None, :], positives])
        return StepCall(SCREEN_RESET, (V, self.b, self.t, self.k_used, idx, np.asarray(lab, np.int8)))

    def _export_meta(self) -> dict[str, Any]:
        return self._prune_meta()

    @classmethod
    def _options_from_meta(cls, meta: dict[str, Any]) -> dict[str, Any]:
        return {**meta["params"], **cls._prune_from_meta(meta)}

    def _restore(self, meta: dict[str, Any]) -> None:
        """The sums and similarities are set: the labels, the fit and one scoring pass."""
        idx, lab = self.history_arrays()
        self.n_pos = int(np.sum(np.asarray(lab) >= 0.5))
        self.n_neg = len(idx) - self.n_pos
        self._score(idx, lab, SCREEN, np.zeros((0, self.store.r)))
