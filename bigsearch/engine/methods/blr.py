"""BLR: Bayesian linear regression over a feature store, with greedy, UCB or Thompson queries.

The Gaussian process with the paper's linear similarity x_i . x_j as its kernel, used as a
regression instead of a propagation, with an intercept as ridge regression fits it (a flat
prior, so it is not shrunk): y = b + x . w + noise, w ~ N(0, I / lam), noise ~ N(0, s2).
With xbar, ybar the means of the labeled rows and labels and A = lam I + X_c^T X_c / s2
(r x r; X_c the labeled rows minus xbar)

    mu_i = ybar + (x_i - xbar) . w,   w = A^-1 X_c^T y / s2,
    v_i  = (x_i - xbar)^T A^-1 (x_i - xbar) + s2 / n_L.

It needs what LAS has: an r x r inverse under rank-B updates (engine/rank_updates.py: a
label adds to X_c^T X_c the rank-one scatter update n/(n+1) (x - xbar)(x - xbar)^T, a batch
of B rank B + 1), x_i^T A^-1 x_i kept per point as J, and one pass over X per query with a
few dot products per row (kernels/blr.py). Labels may be 0/1, graded (y in [0, 1]) or any
number (a measured score, higher is better).

Queries: greedy (the highest mu), UCB (mu + beta sqrt(v)) or Thompson (x . w~ for one exact
draw w~ ~ N(w, A^-1) per query). A batch is the top B for greedy; for UCB, B sequential
choices where each chosen point joins A before the next (its fantasized answer, the mean,
leaves mu unchanged, so only v falls: exact, and the real labels then need no second update
of A); for Thompson, one draw per member.

lam and s2 come from the evidence of the labels under a uniform prior on the share of
their variance the weights explain (engine/blr_evidence.py), refitted each
time the labels grow by ``refit_share`` (a refit rebuilds A^-1 from the labeled rows and,
when v is needed, J by one O(n r^2) pass); ``refits`` records each. Given values are kept.

With ``prune``, greedy and UCB queries read only the blocks of X that could hold the answer
(engine/pruning/blr.py): the same queries as the full pass; a refit is a full pass for
UCB, none for greedy (its scores stay linear in x, so the blocks' bounds hold).
"""

from __future__ import annotations

import os
import warnings
from typing import Any, ClassVar, NamedTuple

import numpy as np

from ... import limits
from ...backends import ChunkStep, StepCall
from ...errors import DataError
from ...kernels.blr import blr_items, blr_scores, blr_vectors, sample_tops
from ...storage.encoding import decode
from ..core.base import PointArray, PrunableSearch, StoreLike
from ..core.blas import blas_threads
from ..core.params import BLROptions, BLRParams, PruneOptions
from ..core.rank_updates import LowRankInverse, RidgeFactor, base_times_rows, batch_update, ridge_inverse
from ..core.select import ChunkPartials, best_ranked
from ..core.steps import (
    COLSUM,
    FUSED_LABELS,
    QuadraticForm,
    decoded_blocks,
    item_plan,
    lower_quadratic_form,
    over_items,
    quadratic_forms,
)
from ..pruning.blr import BLRPruning
from . import blr_evidence as evidence

NO_C = np.zeros(0)
DRIFT_TOL = 1e-10  # max |A A^-1 - I| tolerated (checked when a refit would be due: fixed lam and noise) ...
DRIFT_COLUMNS = 32  # ... over this many of its columns, spread evenly: O(r^2) where all of it was O(r^3)
DEFAULT_LAM, DEFAULT_NOISE = 1.0, 1.0  # before the labels can tell (evidence.MIN_LABELS)


# -- chunk steps -------------------------------------------------------------------------
def blr_rescore_step(x, state, label_idx, label_val, Ainv, inv_lam, V, consts, beta, t):
    """A chunk's state from the global state: labels, J (x^T A^-1 x from ``Ainv``, a
    QuadraticForm; the squared norms times ``inv_lam`` when A = lam I; kept when both are
    None), then v, f and im. Initialization, a refit, a restore, and the rebuild of a lost chunk."""
    state.label[:] = -1
    state.apply_labels(label_idx, label_val)
    if Ainv is not None:
        quadratic_forms(x, Ainv, state.J)
    elif inv_lam is not None:
        for a, xb in decoded_blocks(x):
            state.J[a : a + len(xb)] = np.einsum("ij,ij->i", xb, xb) * inv_lam
    return _scores(x, state, V, NO_C, consts, beta, t)


def blr_update_step(x, state, V, c, label_idx, label_val, consts, beta, t):
    """New labels into the chunk's state, then the fused pass (kernels/blr.py): f, J
    lowered by the new rows' g_b (rows 3: of V), v and im."""
    state.apply_labels(label_idx, label_val)
    V, c = lower_quadratic_form(x, state.J, V, c, first=3)
    return _scores(x, state, V, c, consts, beta, t)


def blr_update_over_store(chunks, arrays, on_threads, V, c, label_idx, label_val, consts, beta, t):
    """``blr_update_step`` over every chunk at once (``ChunkStep.over_store``), as LAS's
    (engine/core/steps.py ``las_update_over_store``): the same numbers, bit for bit, with
    every thread busy to the end of the pass. None for many labels or chunks of several kinds."""
    if len(c) > FUSED_LABELS or (plan := item_plan(chunks)) is None:
        return None
    arrays["label"][label_idx] = label_val
    U, g0, with_d = blr_vectors(V)
    points = tuple(arrays[name] for name in ("label", "J", "v", "f", "im"))
    args = (U, g0, with_d, len(V) - 3, c, points, (*consts, beta, t))
    return over_items(plan, on_threads, blr_items, args, points[3], points[4])


def _scores(x, state, V, c, consts, beta, t):
    s = state
    return ChunkPartials(*blr_scores(x, V, c, s.start, s.label, s.J, s.v, s.f, s.im, *consts, beta, t))


class SampleTops(NamedTuple):
    """A chunk's best unlabeled points for each Thompson draw of a batch."""

    indices: np.ndarray  # (B, k) global indices, -1 where none
    values: np.ndarray  # (B, k) their x . w~_b


def sample_tops_step(x, state, W, k):
    return SampleTops(*sample_tops(x, W, state.start, state.label, k))


BLR_RESCORE = ChunkStep(blr_rescore_step)
BLR_UPDATE = ChunkStep(blr_update_step, over_store=blr_update_over_store)
SAMPLE_TOPS = ChunkStep(sample_tops_step)  # reads the labels it did not write: redone after a loss


class BLR(PrunableSearch):
    """Bayesian linear regression search over a feature store.

    Parameters
    ----------
    store : path or FeatureStore
        A Zarr directory or HDF5 file holding X (n x r): raw bits, counts or embeddings,
        no transform needed (the intercept is fitted, not shrunk).
    acquisition : "greedy", "ucb" or "thompson"
    beta : float
        UCB's weight of the predictive standard deviation.
    lam, noise : float, optional
        The prior precision of the weights and the labels' noise variance; default: fitted
        to the labels by the evidence, refitted as they grow.
    refit_share : float
        Refit lam and noise each time the labels grow by this share.
    seed : int, optional
        Seed of Thompson's draws.
    prune : bool
        Exact pruned greedy and UCB queries (engine/pruning/blr.py): a query reads only the
        blocks of rows that could hold the answer (UCB: on the local backend;
        ``pruning_status`` says whether it is on, and why not).
    block_rows : int, optional
        Rows per pruning block (a multiple of 64; default 128).
    backend, n_threads : as for LAS.
    """

    method = "blr"
    GRADED = True
    REAL_LABELS = True
    params: BLRParams
    POINT_STATE = (
        PointArray("label", np.int8, -1),
        PointArray("J", np.float64, 0.0),
        PointArray("v", np.float64, 0.0),
        PointArray("f", np.float64, 0.0),
        PointArray("im", np.float64, 0.0),
    )
    SAVED_GLOBALS: ClassVar[tuple[str, ...]] = ("xy", "x1", "xA", "d")
    SAVED_POINT_ARRAYS = ("J",)

    def __init__(
        self,
        store: StoreLike,
        *,
        acquisition: str = "greedy",
        beta: float = 2.0,
        lam: float | None = None,
        noise: float | None = None,
        refit_share: float = 0.25,
        seed: int | None = 0,
        backend: Any = "local",
        n_threads: int | None = None,
        store_options: dict[str, Any] | None = None,
        prune: bool | PruneOptions = False,
        block_rows: int | None = None,
    ) -> None:
        options = BLROptions(acquisition, beta, lam, noise, refit_share, seed, prune, block_rows)  # checked
        params = BLRParams(acquisition, beta, lam, noise, refit_share, seed)

        def checked(st):
            limits.check_memory(
                ((n_threads or os.cpu_count() or 1) + 5) * st.r * st.r * 8,
                f"BLR on {st.r:,} features (its r x r matrices)",
                "use fewer features (e.g. `bigsearch ingest --rff D`)",
            )
            return params

        super().__init__(store, checked, backend=backend, n_threads=n_threads, store_options=store_options)
        r = self.store.r
        self.lam = params.lam or DEFAULT_LAM
        self.noise = params.noise or DEFAULT_NOISE
        self.refits: list[dict[str, float]] = []  # per refit: labels, lam, noise, log evidence
        self.xy, self.x1, self.sum_y = np.zeros(r), np.zeros(r), 0.0  # over the labels: X^T y, X^T 1, sum y
        self._in_A: set[int] = set()  # the rows in A: the labeled ones, and a UCB batch's chosen ones
        self.xA = np.zeros(r)  # their sum
        self.d = np.zeros(r)  # the current Thompson draw minus w (zeros otherwise)
        self._set_inverse(np.eye(r) / self.lam, RidgeFactor(self.lam, r))
        self._rng = np.random.default_rng(params.seed)
        self._J_stale = False  # J lags behind A: recomputed when read
        self._labels_at_refit = 0
        self._start_pruning(BLRPruning, options.prune, options.block_rows)

    def engine_options(self) -> dict[str, Any]:
        return self._prune_keywords()

    # -- scores --------------------------------------------------------------------
    @property
    def w(self) -> np.ndarray:
        """The posterior mean of the weights, A^-1 X_c^T y / s2 (r,)."""
        self._sync()
        return self._weights()

    @property
    def intercept(self) -> float:
        """The posterior mean of the intercept, ybar - xbar . w."""
        self._sync()
        return self._consts(self._weights())[0]

    @property
    def variance(self) -> np.ndarray:
        """v_i, the predictive variance of b + x_i . w (float64, read-only)."""
        self._fresh_J()
        return self.backend.gather("v")

    @property
    def J(self) -> np.ndarray:
        """J_i = x_i^T A^-1 x_i (float64, read-only)."""
        self._fresh_J()
        return self.backend.gather("J")

    @property
    def Ainv(self) -> np.ndarray:
        """A^-1 (r x r, a new matrix)."""
        return self._inverse.value()

    def _fresh_J(self) -> None:
        self._sync_scores()
        if self._J_stale:
            self._rescore("Ainv")

    def _sync_scores(self) -> None:
        """_sync, then every block current (pruned queries leave the blocks they did not
        read behind: for UCB their J updates are replayed first, so J stays the full
        pass's to the bit)."""
        self._sync()
        pruning = self._pruned()
        if pruning is not None and pruning.stale:
            pruning.catch_up()
            self._rescore("keep")

    def _set_inverse(self, Ainv: np.ndarray, A: RidgeFactor) -> None:
        self._inverse, self._A = LowRankInverse(Ainv), A
        self._products_at: int | None = None  # the base's folds when _products was made

    def _base_products(self) -> np.ndarray:
        """A^-1's base times [X^T y, X^T 1, the sum of the rows in A] (3 x r): what the
        weights and h read. Kept up to date label by label from the base times the new rows
        (for fingerprints a few of the base's rows: ``_absorb``), and made again by one pass
        over the base only when it changes (a fold, a refit): a label then reads the base at
        its rows, not the whole r x r base for the dense vectors (at r = 2,048, 32 MiB)."""
        if self._products_at != self._inverse.folds:
            self._products = base_times_rows(self._inverse.base, np.vstack([self.xy, self.x1, self.xA]))
            self._products_at = self._inverse.folds
        return self._products

    def _n_labels(self) -> int:
        return self.n_labeled  # every label told is in the history: no O(n) count per query

    def _labeled(self) -> np.ndarray:
        """The labeled points in index order, from the history (each told once): no O(n)
        scan of the labels at each refit (0.5 ms at 2M rows, 15 ms at 60M)."""
        return np.sort(self.history_arrays()[0])

    def _weights(self) -> np.ndarray:
        """A^-1 X_c^T y / s2, X_c^T y = X^T y - ybar X^T 1."""
        n = self._n_labels()
        ybar = self.sum_y / n if n else 0.0
        rhs = ((self.xy - ybar * self.x1) / self.noise)[None, :]
        P = self._base_products()
        return self._inverse.times_rows(rhs, ((P[0] - ybar * P[1]) / self.noise)[None, :])[0]

    def _consts(self, w: np.ndarray) -> tuple[float, float, float, np.ndarray]:
        """(mean, v0, d0, h) of kernels/blr.py for weights w: mean = ybar - xbar . w,
        h = A^-1 xbar_A, v0 = xbar_A . h + s2 / n_A, d0 = -xbar . d (xbar_A: the mean of the
        rows in A, the labeled ones but in a UCB batch)."""
        n, nA = self._n_labels(), len(self._in_A)
        xbar = self.x1 / n if n else self.x1
        mean = (self.sum_y / n if n else 0.0) - float(xbar @ w)
        if not nA:
            return mean, 0.0, 0.0, np.zeros_like(w)
        xbar_A = (self.xA / nA)[None, :]
        h = self._inverse.times_rows(xbar_A, self._base_products()[2:] / nA)[0]
        return mean, float(xbar_A[0] @ h) + self.noise / nA, -float(xbar @ self.d), h

    # -- what its pruning reads (engine/pruning/contract.py) ------------------------
    def scoring_now(self, w: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, tuple[float, float, float]]:
        """(w, V = [w, d, h], (mean, v0, d0)): what a full pass would score with now, for
        the weights ``w`` (default: the posterior mean)."""
        w = self._weights() if w is None else w
        mean, v0, d0, h = self._consts(w)
        return w, np.vstack([w, self.d, h]), (mean, v0, d0)

    @property
    def score_weights(self) -> tuple[float, float]:
        """(beta, t) of kernels/blr.py: the weight of sqrt(v) in the score and of v in ``im``."""
        return self._beta, self._t

    # -- the algorithm -------------------------------------------------------------
    @property
    def _t(self) -> float:
        return 0.0 if self.params.acquisition == "greedy" else 1.0

    @property
    def _beta(self) -> float:
        return self.params.beta if self.params.acquisition == "ucb" else 0.0

    def _selection_weight(self) -> float:
        return self._t

    def _initialize(self) -> None:
        parts = self.backend.map(COLSUM)
        bad = [q.first_bad for q in parts if q.first_bad >= 0]
        if bad:
            raise DataError(
                f"{self.store.path}: X has a non-finite value (NaN or inf) in row {min(bad)} "
                "(the first such row); fix or drop those rows"
            )
        idx, _ = self._take_pending()
        self._absorb(idx)
        self._maybe_refit()
        self._draw()
        needs_J = self._beta > 0 or not self._in_A
        self._rescore("norms" if not self._in_A else "Ainv" if needs_J else "keep")
        self._J_stale = not needs_J
        self._ready = True

    def _update(self, idx: np.ndarray, lab: np.ndarray) -> None:
        G, c = self._absorb(idx)
        rebuilt = self._maybe_refit() or self._members_left_out()
        # Pruned greedy scores stay linear in x whatever lam and the noise: the blocks'
        # bounds still hold after a refit, so it needs no pass (UCB's v may grow: it does).
        if rebuilt and (self._beta > 0 or self._pruned() is None):
            self._draw()
            self._rescore("Ainv" if self._beta > 0 else "keep")
            self._J_stale = self._beta == 0
            return
        if rebuilt or (self._beta == 0 and (len(c) > FUSED_LABELS or self._pruned())) or self._J_stale:  # no J
            G, c, self._J_stale = G[:0], c[:0], True
        self._draw()
        pruning = self._pruned()
        if pruning is not None:
            pruning.hold = None  # a UCB batch's weights give way to the labels'
            pruning.labels_told(idx, lab, G, c)  # no pass: the next query reads what it needs
            return
        self._score_pass(self._weights(), G, c, idx, lab)

    def _pass(self, step: Any, *args: Any, t_prev: float = 0.0) -> None:
        super()._pass(step, *args, t_prev=t_prev)
        self.bytes_since_query += self.store.nbytes

    def _score_pass(self, w, G, c, idx, lab) -> None:
        mean, v0, d0, h = self._consts(w)
        V = np.vstack([w, self.d, h, G])
        self._pass(BLR_UPDATE, V, c, idx, lab, (mean, v0, d0), self._beta, self._t, t_prev=self._t)

    def _absorb(self, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Labels into the sums and, for rows not yet in A, into A and A^-1 (Sherman-
        Morrison): returns the g_b and c_b that lower J."""
        if not len(idx):
            return np.zeros((0, self.store.r)), NO_C
        rows = decode(self.store.read_stored_rows(idx))
        y = self.label_values(idx)
        P, Bx = self._base_products(), self._base_times(rows)
        self.xy += y @ rows
        self.x1 += rows.sum(axis=0)
        P[0] += y @ Bx
        P[1] += Bx.sum(axis=0)
        self.sum_y += float(y.sum())
        new = np.array([int(i) not in self._in_A for i in idx], bool)
        return self._into_A(idx[new], rows[new], Bx[new])

    def _base_times(self, rows: np.ndarray) -> np.ndarray:
        return base_times_rows(self._inverse.base, rows)

    def _into_A(self, idx: np.ndarray, rows: np.ndarray, Bx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Rows into A (``Bx``: A^-1's base times them): X_c^T X_c grows by the scatter of
        the new rows about their mean, plus n B / (n + B) (their mean - the old mean) in
        outer product (B + 1 rows z_b; one for a single row), whose products with the base
        follow from Bx and the base times the old sum of the rows in A."""
        r, n, B = self.store.r, len(self._in_A), len(idx)
        if not B:
            return np.zeros((0, r)), NO_C
        P = self._base_products()
        mean_new, Bmean_new = rows.mean(axis=0), Bx.mean(axis=0)
        parts, products = ([rows - mean_new], [Bx - Bmean_new]) if B > 1 else ([], [])
        if n:
            scale = np.sqrt(n * B / (n + B))
            parts.append(scale * (mean_new - self.xA / n)[None, :])
            products.append(scale * (Bmean_new - P[2] / n)[None, :])
        self.xA += rows.sum(axis=0)
        P[2] += Bx.sum(axis=0)
        self._in_A.update(int(i) for i in idx)
        if not parts:
            return np.zeros((0, r)), NO_C
        Z = np.vstack(parts)
        gamma = np.full(len(Z), 1.0 / self.noise)
        G, c, _, _ = batch_update(self._inverse, Z, gamma, np.resize(idx, len(Z)), np.vstack(products))
        self._A.add(Z, gamma)
        return G, c

    def _members_left_out(self) -> bool:
        """Whether points chosen for a UCB batch are in A without a label (the batch was
        not labelled in full): A is then rebuilt from the labels."""
        if len(self._in_A) == self._n_labels():
            return False
        self._rebuild_A()
        return True

    def _maybe_refit(self) -> bool:
        """Refit lam and noise by the evidence when the labels grew by refit_share; True
        when A was rebuilt."""
        p, n_L = self.params, self._n_labels()
        if n_L < evidence.MIN_LABELS or n_L < self._labels_at_refit * (1.0 + p.refit_share):
            return False
        if p.lam is not None and p.noise is not None:  # nothing to fit: check the inverse instead
            self._labels_at_refit = n_L
            return self._drifted()
        idx = self._labeled()
        y = self.label_values(idx)
        if np.ptp(y) == 0:  # all labels alike (no positive yet): nothing to fit
            return False
        XL = decode(self.store.read_stored_rows(idx))
        with blas_threads(XL.size * min(XL.shape)):  # the spectrum's eigh: one thread while small
            sp = evidence.spectrum(XL, y)  # once: the fit and the record's evidence both read it
        fitted = evidence.fit(XL, y, p.lam, p.noise, sp=sp)
        self._labels_at_refit = n_L
        if fitted is None:
            return False
        self.lam, self.noise = fitted
        log_ev = evidence.log_evidence(sp, self.lam, self.noise)
        self.refits.append({"labels": n_L, "lam": self.lam, "noise": self.noise, "log_evidence": log_ev})
        self._rebuild_A(XL)
        return True

    def _drifted(self) -> bool:
        """Whether A^-1, updated label by label, drifted from the inverse of A (max |A A^-1 -
        I| over DRIFT_COLUMNS of its columns above DRIFT_TOL; rounding that piles up spreads
        over all of them): then both are rebuilt from the labeled rows."""
        r = self.store.r
        columns = np.unique(np.linspace(0, r - 1, min(r, DRIFT_COLUMNS)).astype(np.int64))
        E = np.zeros((len(columns), r))
        E[np.arange(len(columns)), columns] = 1.0
        residual = float(np.abs(self._A.times(self._inverse.times_rows(E)) - E).max())
        if residual <= DRIFT_TOL:
            return False
        warnings.warn(
            f"A^-1 drifted (||A A^-1 - I|| = {residual:.2e}); recomputing it from X", RuntimeWarning, stacklevel=5
        )
        self.refits.append({"labels": self._n_labels(), "lam": self.lam, "noise": self.noise, "drift": residual})
        self._rebuild_A()
        return True

    def _rebuild_A(self, XL: np.ndarray | None = None) -> None:
        """A = lam I + X_c^T X_c / noise (as its factor) and its inverse, from the labeled rows."""
        idx = self._labeled()
        XL = decode(self.store.read_stored_rows(idx)) if XL is None else XL
        A = self._factor_of(XL)
        self._set_inverse(ridge_inverse(self.lam, A.F), A)
        self._in_A = {int(i) for i in idx}
        self.xA = XL.sum(axis=0) if len(XL) else np.zeros(self.store.r)

    def _factor_of(self, rows: np.ndarray) -> RidgeFactor:
        """A's factor for the rows in A: F = the rows about their mean / sqrt(noise)."""
        A = RidgeFactor(self.lam, self.store.r)
        if len(rows):
            A.add(rows - rows.mean(axis=0), np.full(len(rows), 1.0 / self.noise))
        return A

    def _draw(self, size: int | None = None) -> np.ndarray:
        """Thompson: d = w~ - w for a new exact draw w~ ~ N(w, A^-1) (``size`` draws as rows
        when given, else one, kept as ``self.d``); zeros for the other acquisitions."""
        r = self.store.r
        if self.params.acquisition != "thompson":
            self.d = np.zeros(r)
            return self.d
        # u = sqrt(lam) e1 + F^T e2 has covariance lam I + F^T F = A, so A^-1 u ~ N(0, A^-1):
        # O(r^2) a draw, where a Cholesky factor of A cost O(r^3) a query (0.14 s at r = 2,048)
        k = 1 if size is None else size
        e1 = self._rng.standard_normal((k, r))
        e2 = self._rng.standard_normal((k, len(self._A.F)))
        D = self._inverse.times_rows(self._A.root(e1, e2))
        if size is None:
            self.d = D[0]
        return D

    def _rescore(self, J_from: str) -> None:
        """One pass rebuilding every chunk's state ("Ainv": J from A^-1, O(n r^2); "norms":
        J = |x|^2 / lam while A = lam I; "keep": J as it is)."""
        step, args = self.rebuild_recipe(J_from)
        self._pass(step, *args, t_prev=self._t)
        if J_from != "keep":
            self._J_stale = False
        if self.pruning is not None:
            self.pruning.after_full_pass()

    def rebuild_recipe(self, J_from: str = "Ainv") -> StepCall:
        labeled = np.flatnonzero(self._label >= 0)
        Ainv = QuadraticForm.of(self.Ainv) if J_from == "Ainv" else None
        inv_lam = 1.0 / self.lam if J_from == "norms" else None
        w = self._weights()
        mean, v0, d0, h = self._consts(w)
        V = np.vstack([w, self.d, h])
        args = (labeled, self._label[labeled], Ainv, inv_lam, V, (mean, v0, d0), self._beta, self._t)
        return StepCall(BLR_RESCORE, args)

    # -- batches -------------------------------------------------------------------
    def next_batch(self, k: int) -> list[int]:
        """The next k points to label together (see the module docstring)."""
        self._sync()
        k = min(int(k), self.n - self.n_labeled)
        if k <= 1 or self.params.acquisition == "greedy":
            return super().next_batch(k)
        if self.params.acquisition == "thompson":
            return self._thompson_batch(k)
        return self._ucb_batch(k)

    def _thompson_batch(self, k: int) -> list[int]:
        W = self._weights()[None, :] + self._draw(k)
        parts = self.backend.map(SAMPLE_TOPS, W, k)
        if not all(isinstance(q, SampleTops) for q in parts):
            parts = self.backend.map(SAMPLE_TOPS, W, k)  # a lost worker's chunks were rebuilt: again
        chosen: list[int] = []
        for b in range(k):
            idx = np.concatenate([q.indices[b] for q in parts])
            val = np.concatenate([q.values[b] for q in parts])
            keep = (idx >= 0) & ~np.isin(idx, chosen)
            chosen.append(int(best_ranked(idx[keep], val[keep], 1)[0][0]))
        return chosen

    def _ucb_batch(self, k: int) -> list[int]:
        """Each member joins A before the next is chosen; mu stays (its weights are kept)."""
        if self._J_stale:
            self._rescore("Ainv")
        chosen: list[int] = []
        w = self._weights()
        pruning = self._pruned()
        for _ in range(k):
            i = int(self._top(1)[0][0])
            chosen.append(i)
            if len(chosen) == k:
                break
            idx = np.array([i])
            rows = decode(self.store.read_stored_rows(idx))
            G, c = self._into_A(idx, rows, self._base_times(rows))
            if pruning is not None:
                pruning.hold = w
                pruning.labels_told(idx, np.zeros(1, np.int8), G, c)
            else:
                self._score_pass(w, G, c, idx, np.zeros(1, np.int8))
        return chosen

    def run_details(self) -> dict[str, Any]:
        return {**super().run_details(), "refits": self.refits}

    def export_state(self) -> dict[str, Any]:
        if self._beta > 0:
            self._sync_scores()  # J of the blocks pruned queries did not read (greedy saves J as stale)
        return super().export_state()

    # -- saving and restoring ------------------------------------------------------
    def _export_meta(self) -> dict[str, Any]:
        return {
            "lam_now": self.lam,
            "noise_now": self.noise,
            "sum_y": self.sum_y,
            "refits": self.refits,
            "labels_at_refit": self._labels_at_refit,
            "in_A": sorted(self._in_A),
            "J_stale": self._J_stale,
            "rng": self._rng.bit_generator.state,
            **self._prune_meta(),
        }

    @classmethod
    def _options_from_meta(cls, meta: dict[str, Any]) -> dict[str, Any]:
        return {**meta["params"], **cls._prune_from_meta(meta)}

    def _saved_globals(self) -> dict[str, np.ndarray]:
        inverse = self._inverse
        arrays = super()._saved_globals()
        arrays.update(
            Ainv_base=inverse.base.copy(),
            Ainv_G=inverse.Gt[: inverse.k].copy(),
            Ainv_c=inverse.c[: inverse.k].copy(),
            A_factor=self._A.F.copy(),
        )
        return arrays

    def _load_globals(self, arrays: dict[str, np.ndarray]) -> None:
        super()._load_globals(arrays)
        # A's factor needs lam, which _restore reads; a state of an older bigsearch saved A
        # itself (r x r), and its factor is made from the rows in A there
        self._saved_factor = np.array(arrays["A_factor"], np.float64) if "A_factor" in arrays else None
        self._set_inverse(np.array(arrays["Ainv_base"], np.float64), RidgeFactor(self.lam, self.store.r))
        self._inverse.add(np.array(arrays["Ainv_G"], np.float64), np.array(arrays["Ainv_c"], np.float64))

    def _restore(self, meta: dict[str, Any]) -> None:
        self.lam, self.noise, self.sum_y = meta["lam_now"], meta["noise_now"], meta["sum_y"]
        self.refits, self._labels_at_refit = list(meta["refits"]), meta["labels_at_refit"]
        self._in_A = set(meta["in_A"])
        if self._saved_factor is None:
            in_A = np.array(sorted(self._in_A), np.int64)
            self._A = self._factor_of(decode(self.store.read_stored_rows(in_A)) if len(in_A) else np.zeros((0, 0)))
        else:
            self._A = RidgeFactor(self.lam, self.store.r, self._saved_factor)
        self._rng.bit_generator.state = meta["rng"]
        self._rescore("keep")
        self._J_stale = bool(meta["J_stale"])
