"""LAS: Linearized Active Search (Venkatesan et al., IJCAI 2017).

Label propagation with soft-label pseudo-nodes on the graph whose edge weights are
x_i . x_j, with the impact factor (one-step look-ahead). The n x n problem of ASG is
rewritten through K = I_r - X^T diag(rho) X (r x r), so that

- initialization costs three passes over X and O(n r^2 + r^3) work;
- each label costs a Sherman-Morrison update of K^-1 (kept as a low-rank correction:
  engine/core/rank_updates.py) and ONE pass over X (O(n r)) that updates f,
  J = diag(X K^-1 X^T) and the impact factor together.

f, the impact factor and the queries are those of the dense ASG (tests check this
against a direct solve and a brute-force impact factor). Formulas: docs/algorithm.md.
"""

from __future__ import annotations

import os
import warnings
from typing import Any, ClassVar

import numpy as np

from ... import limits
from ...backends import StepCall
from ...errors import DataError, NumericalError
from ...kernels.dense import times_columns
from ...kernels.las import degrees
from ...storage import FeatureStore
from ...storage.encoding import decode, read_only
from ..core.base import PointArray, PrunableSearch, StoreLike
from ..core.blas import blas_threads
from ..core.params import DriftCheck, LASOptions, LASParams, PruneOptions
from ..core.rank_updates import DeferredK, LowRankInverse, advance_score_vectors, batch_update
from ..core.select import PassSummary
from ..core.steps import COLSUM, FUSED_LABELS, GRAM, LAS_REFRESH, LAS_RESCORE, LAS_UPDATE, Compared, QuadraticForm
from ..pruning.las import LASPruning
from .fantasy import FantasizedBatch

DRIFT_CHECK_SHARE = 0.1  # the O(r^3) drift check costs at most this share of the updates it checks


class LAS(PrunableSearch):
    """Linearized Active Search over a feature store.

    Parameters
    ----------
    store : path or FeatureStore
        A Zarr directory or HDF5 file holding X (n x r).
    pi : float, optional
        Prior probability of a positive; default: the prevalence of the store's labels.
    eta : float
        Transition probability into a labeled point's pseudo-node, in (0, 1).
    w0 : float, optional
        Weight of an unlabeled point's pseudo-node; default 1 / n.
    alpha : float
        Weight of the rescaled impact factor in the selection (0: f alone).
    backend : "local" or a dask ``distributed.Client``
    n_threads : int, optional
        Threads of the local backend (default: one per core).
    check_every : int or None
        Every this many labels, check ||K K^-1 - I|| (O(r^3)) and recompute K^-1 and J
        from X when it exceeds ``drift_tol`` (None or 0: never).
    prune : bool
        Exact pruned selection (engine/pruning/las.py): with alpha = 0, a query reads only the
        blocks of rows that could hold the answer (on a dask backend, each worker prunes
        its own chunks), and the answer is the full pass's. J and the impact factor are
        then brought up to date only when asked for. ``pruning_status`` says whether it is on, and why not.
    block_rows : int, optional
        Rows per pruning block (a multiple of 64; default 128).
    """

    method = "las"
    GRADED = True
    PROBABILITY_SCORES = True
    params: LASParams
    POINT_STATE = (PointArray("label", np.int8, -1), PointArray("deg", np.float64, 0.0),
                   PointArray("J", np.float64, 0.0), PointArray("f", np.float64, 0.0),
                   PointArray("im", np.float64, 0.0))
    SAVED_GLOBALS: ClassVar[tuple[str, ...]] = ("s", "K", "Kinv", "xq", "xz")
    SAVED_POINT_ARRAYS = ("J",)   # f, the impact factor and the degrees follow in one pass

    def __init__(self, store: StoreLike, *, pi: float | None = None, eta: float = 0.5, w0: float | None = None,
                 alpha: float = 0.0, backend: Any = "local", n_threads: int | None = None,
                 check_every: int | None = 100, drift_tol: float = 1e-10,
                 store_options: dict[str, Any] | None = None, prune: bool | PruneOptions = False,
                 block_rows: int | None = None, fantasy: float | str | None = None) -> None:
        options = LASOptions(pi, eta, w0, alpha, check_every, drift_tol, prune, block_rows, fantasy)  # checked
        self.drift_check = DriftCheck(options.check_every, options.drift_tol)
        self.fantasy = options.fantasy
        self.fantasy_passes: list[float] = []   # per fantasized batch: the passes over X it took to choose
        def params(st: FeatureStore) -> LASParams:
            # K, K^-1, work arrays, and per thread an X^T R X partial, its block product and
            # a block of rows (at most r / 2 of them): r x r float64 each, 3 per thread
            limits.check_memory((3 * (n_threads or os.cpu_count() or 1) + 6) * st.r * st.r * 8,
                                f"LAS on {st.r:,} features (its r x r matrices)",
                                "use fewer features (e.g. `bigsearch ingest --rff D`), or WNAS, which keeps no "
                                "r x r state")
            return LASParams.for_store(st, pi, eta, w0, alpha)
        super().__init__(store, params, backend=backend, n_threads=n_threads, store_options=store_options)
        self.refreshes: list[dict[str, Any]] = []   # drift measured at each automatic or requested refresh
        self._t_prev = 0.0           # weight of IM in the last query: the kernels rank by it
        self._labels_since_check = 0
        self._work_since_check = 0.0  # floating-point operations of the updates since the last check
        self._J_stale = False        # a batch's J update was deferred (alpha = 0): see _update
        self._V: np.ndarray | None = None   # [K^-1 xq, K^-1 xz]: see score_vectors
        self._start_pruning(LASPruning, options.prune, options.block_rows)

    def engine_options(self) -> dict[str, Any]:
        prune = self._prune_keywords()
        fantasy = {"fantasy": self.fantasy} if self.fantasy is not None else {}
        return {**self.drift_check.as_dict(), **prune, **fantasy}

    @property
    def check_every(self) -> int | None:
        return self.drift_check.check_every

    @property
    def drift_tol(self) -> float:
        return self.drift_check.drift_tol

    # -- scores --------------------------------------------------------------------
    @property
    def f(self) -> np.ndarray:
        """Label-propagation scores, one per point (float64, read-only). Reading them
        rebuilds no J (f does not depend on it): at most a pass for f itself, after pruned
        queries."""
        self._sync_f()
        f = self.backend.gather("f")
        if not self._grade:
            return f
        # The chunks' state keeps labels as int8, so a graded point's own f has
        # q_i = eta * (0 or 1) where the model has eta * y_i; only that term differs.
        f = np.array(f)
        idx = np.fromiter(self._grade, np.int64)
        f[idx] += self.params.eta * (self.label_values(idx) - self._label[idx])
        return f

    @property
    def impact(self) -> np.ndarray:
        """Impact factor IM_i = f_i * sum_{j in U, j != i} (f+_j - f_j); 0 for labeled points."""
        return self._point_values("im")

    @property
    def J(self) -> np.ndarray:
        """J_i = x_i^T K^-1 x_i (float64, read-only)."""
        return self._point_values("J")

    @property
    def impact_scale(self) -> float:
        """s, the factor that rescales IM to the mean of f (the query uses alpha * s * IM)."""
        self._sync_scores()
        assert self._summary is not None
        return self._summary.impact_scale()

    # -- the algorithm -------------------------------------------------------------
    def _sync_scores(self) -> None:
        """_sync, then every per-point value current (pruned queries leave J, the impact
        factor and unread blocks' f behind, and batches at alpha = 0 leave J and the impact
        factor: one pass recomputes them, J from K^-1, an n r^2 pass)."""
        self._sync()
        pruning = self._pruned()
        behind = pruning is not None and pruning.stale
        if behind or self._J_stale:
            self._rescore(J_from_Kinv=True)
        if behind:
            pruning.after_full_pass()

    def _sync_f(self) -> None:
        """_sync, then f current everywhere, J left as it is: f reads no J, and at alpha = 0
        only the impact factor does (the positives-left estimate, a session's status and
        an export read f, never J). After pruned queries that is one O(n r) pass, which
        leaves J behind for ``_sync_scores``."""
        self._sync()
        pruning = self._pruned()
        if pruning is not None and pruning.stale:
            self._J_stale = True          # the pruned labels never updated J
            self._rescore(J_from_Kinv=False)
            pruning.after_full_pass()

    def _J_unused(self) -> bool:
        """Whether the queries never read J: at alpha = 0 they choose by f alone (only the
        impact factor reads J), unless fantasized batches update the search as they choose."""
        return self.params.alpha == 0 and self.fantasy is None

    def _selection_weight(self) -> float:
        assert self._summary is not None
        self._t_prev = self._summary.selection_weight(self.params.alpha)
        return self._t_prev

    def _initialize(self) -> None:
        self._initial_passes()

    def _initial_passes(self, refresh: bool = False) -> dict[str, float] | None:
        """Three chunked passes: column sums; degrees and X^T diag(rho) X; J and scores.
        Every label told so far is applied (none is left pending). When no query reads J
        (``_J_unused``), the last pass leaves it behind, as a batch at alpha = 0 does: J, an
        n r^2 pass as long as the Gram pass, is then computed when J or the impact factor is
        read. A refresh recomputes J when it was current.

        A refresh overwrites the per-point arrays in place (no second copy of the state)
        and returns the drift of J and f that the last pass measured."""
        p, b = self.params, self.backend
        self._pending = []
        parts = b.map(COLSUM)
        bad_rows = [q.first_bad for q in parts if q.first_bad >= 0]
        if bad_rows:
            raise DataError(f"{self.store.path}: X has a non-finite value (NaN or inf) in row {min(bad_rows)} "
                            "(the first such row); fix or drop those rows")
        self.s = np.sum([q.sums for q in parts], axis=0)
        if not np.all(np.isfinite(self.s)):
            raise DataError(f"{self.store.path}: the column sums of X overflow; rescale X (e.g. unit-normalize rows)")
        labeled = np.flatnonzero(self._label >= 0)
        grams = b.map(GRAM, self.s, labeled, self._label[labeled], p.eta, p.w0, p.pi)
        n_bad = sum(q.n_bad for q in grams)
        if n_bad:
            first = min(q.first_bad for q in grams if q.n_bad)
            raise DataError(
                f"{self.store.path}: {n_bad} of {self.n} points have a degree x_i . sum_j x_j <= 0 "
                f"(the first is row {first}); LAS needs positive degrees: unit-normalize the rows and "
                "append a constant 1 feature (`bigsearch ingest --normalize --bias` for files; "
                "bigsearch.prepare(X, normalize=True, bias=True) for an array), which makes every "
                "similarity cos + 1 >= 0")
        G = grams[0].G.copy()
        for q in grams[1:]:           # in place: stacking the chunks' r x r partials first took
            G += q.G                  # 13 x 32 MiB more at r = 2,048
        self.K = np.eye(self.store.r) - (G + G.T) / 2
        self.Kinv = self._invert(self.K)
        self.xq = np.sum([q.xq for q in grams], axis=0) + self._graded_xq()
        self.xz = np.sum([q.xz for q in grams], axis=0)
        self._V = None                # computed from K^-1, xq and xz by the pass below
        with_J = not self._J_unused() or (refresh and not self._J_stale)   # a current J stays current
        drift = self._rescore(J_from_Kinv=with_J, compare=refresh, degrees_known=True)
        self._J_stale = not with_J
        if self.pruning is not None:
            self.pruning.after_full_pass(G)
        self._ready = True
        self._labels_since_check, self._work_since_check = 0, 0.0
        self.bytes_since_query = 0
        return drift

    def _rescore(self, J_from_Kinv: bool, compare: bool = False,
                 degrees_known: bool = False) -> dict[str, float] | None:
        """One pass: every chunk's state from the global state (see las_rescore_step).
        With ``compare``, also returns {"J": ..., "f": ...}: the largest change of each,
        relative to its largest value. ``degrees_known``: right after the Gram pass, which
        left every chunk's degrees current (a chunk rebuilt meanwhile gets them from the
        recipe's default)."""
        step, args = self.rebuild_recipe(J_from_Kinv, degrees_known)
        parts = self.backend.map(LAS_REFRESH if compare else step, *args)
        self.bytes_since_query += self.store.nbytes
        if J_from_Kinv:
            self._J_stale = False
        # A chunk rebuilt after a lost worker returns plain partials: its old values are gone.
        drifts = [p.drift for p in parts if isinstance(p, Compared)]
        parts = [p.partials if isinstance(p, Compared) else p for p in parts]
        self._summary = PassSummary.from_partials(parts, self._t_prev)
        if not compare:
            return None
        dJ, J, df, f = np.max(drifts, axis=0) if drifts else (0.0, 0.0, 0.0, 0.0)
        return {"J": dJ / J if J else dJ, "f": df / f if f else df}

    def _graded_xq(self) -> np.ndarray | float:
        """What graded labels add to X^T q beyond the int8 labels the chunk steps see:
        sum over graded points of x_i eta (y_i - label_i)."""
        if not self._grade:
            return 0.0
        idx = np.fromiter(self._grade, np.int64)
        return (self.params.eta * (self.label_values(idx) - self._label[idx])) @ self.store.read_rows(idx)

    def next_batch(self, k: int) -> list[int]:
        """The next k points to label together: with ``fantasy`` (a soft label in [0, 1],
        or "f"), sequential greedy with each chosen point told that fantasized label
        (engine/methods/fantasy.py); else the top k."""
        if self.fantasy is None or k <= 1:
            return super().next_batch(k)
        self._sync_scores()
        chooser = FantasizedBatch(self, self.fantasy)
        batch = chooser.choose(int(k))
        self.fantasy_passes.append(chooser.cost)
        return batch

    def rebuild_recipe(self, J_from_Kinv: bool = True, degrees_known: bool = False) -> StepCall:
        """The step and arguments that rebuild a chunk's per-point state from the
        current global state: ``step(x, state, *args)``. Backends use it to restore a
        lost chunk (with the defaults: J and the degrees recomputed)."""
        p = self.params
        labeled = np.flatnonzero(self._label >= 0)
        V = self.score_vectors()
        form = QuadraticForm.of(self.Kinv) if J_from_Kinv else None
        return StepCall(LAS_RESCORE, (self.s, labeled, self._label[labeled], form, V, p.eta, p.w0, p.pi,
                                      self._t_prev, degrees_known))

    def _invert(self, K: np.ndarray) -> np.ndarray:
        try:
            Kinv = np.linalg.inv(K)
        except np.linalg.LinAlgError as e:
            raise NumericalError(f"K = I - X^T R X is singular ({e}); check w0 > 0 and the data") from e
        if not np.all(np.isfinite(Kinv)):
            raise NumericalError("K^-1 has non-finite entries; check w0 > 0 and the data")
        return (Kinv + Kinv.T) / 2

    def _update(self, idx: np.ndarray, lab: np.ndarray) -> None:
        """Sherman-Morrison for the new labels (as matrix products: engine/core/rank_updates.py),
        then one fused pass.

        A batch (more than FUSED_LABELS labels) at alpha = 0 without fantasized batches
        leaves J behind: the query is chosen by f alone, which needs one dot product per
        point, while J's update needs one per label (O(n r B), most of a batch's pass).
        J and the impact factor are then recomputed from K^-1 when read (``_sync_scores``);
        f, which reads no J, is current after the pass."""
        p = self.params
        stored = self.store.read_stored_rows(idx)
        rows = decode(stored)
        deg = np.empty(len(idx))
        degrees(read_only(stored), self.s, deg)  # the kernel the passes use (as they call it): bit-identical degrees
        b_unl = 1.0 / (1.0 + p.w0)
        gamma = (b_unl - (1.0 - p.eta)) / deg
        V = self.score_vectors()
        G, cs, G0, folded = batch_update(self._inverse, rows, gamma, idx)
        self._K.add(rows, gamma)
        a = p.eta * self.label_values(idx) - p.pi * p.w0 / (1.0 + p.w0)
        self.xq += a @ rows
        self.xz -= (b_unl / deg) @ rows
        # V follows the labels in O(r B); after a fold it is recomputed from K^-1, so it
        # never carries the rounding of more than one fold's labels.
        self._V = None if folded else advance_score_vectors(V, G0, G, cs, np.stack([a, -b_unl / deg]),
                                                            np.stack([self.xq, self.xz]))
        pruning = self._pruned()
        products = 0                                  # dot products per row in this update's pass
        if pruning is not None:
            pruning.labels_told(idx, lab)             # no pass: the next query reads what it needs
        else:
            if self._J_unused() and (self._J_stale or len(idx) > FUSED_LABELS):   # J behind stays behind
                self._J_stale = True
                G, cs = G[:0], cs[:0]
            V = np.vstack([self.score_vectors(), G])
            products = -(-len(V) // 3) * 3      # what the kernel computes: V padded to 3k rows (pad3)
            self._pass(LAS_UPDATE, V, cs, idx, lab, p.eta, p.w0, p.pi, self._t_prev, t_prev=self._t_prev)
            self.bytes_since_query += self.store.nbytes
        if self._drift_check_due(len(idx), products):
            if (residual := self.inverse_residual()) > self.drift_tol:
                warnings.warn(f"K^-1 drifted (||K K^-1 - I|| = {residual:.2e}); recomputing it from X",
                              RuntimeWarning, stacklevel=4)
                self.refresh()

    def _drift_check_due(self, n_labels: int, products: int) -> bool:
        """Whether to check ||K K^-1 - I|| now: every ``check_every`` labels, but no more
        often than keeps the check's 2 r^3 operations under DRIFT_CHECK_SHARE of those
        of the updates since the last check (2 n r per dot product of the passes, and
        6 r^2 per label on K^-1, what updating K^-1 in place cost: the low-rank update
        costs less, so this counts generously). While n is large against r^2 nothing changes (r = 128);
        at r = 2,048 and n = 50,000, where the check takes 2-3.5 s on a busy machine, it
        runs every ~270 single labels instead of 100, after every second batch of 500 at
        alpha > 0 and every 13th at alpha = 0 (whose batches cost no O(n r B) products)."""
        r = self.store.r
        self._labels_since_check += n_labels
        self._work_since_check += 2.0 * self.n * r * products + 6.0 * r * r * n_labels
        if not self.check_every or self._labels_since_check < self.check_every \
                or DRIFT_CHECK_SHARE * self._work_since_check < 2.0 * r ** 3:
            return False
        self._labels_since_check, self._work_since_check = 0, 0.0
        return True

    def score_vectors(self):
        """V = [K^-1 xq, K^-1 xz] (2 x r), which every pass reads: rebuilt and incrementally
        updated state use this one array, so they agree to the bit. Labels update it in
        O(r B) (``_update``); it is computed from K^-1 after initialization, a fold of the
        correction of K^-1, or a new K^-1: one pass over K^-1 in one thread (a threaded
        BLAS on a busy machine took 8x longer at r = 2,048)."""
        if self._V is None:
            self._V = times_columns(self.Kinv, np.vstack([self.xq, self.xz])).T.copy()
        return self._V

    @property
    def Kinv(self):
        """K^-1 (float64, r x r). The labels since the last fold are kept as a low-rank
        correction of a base matrix (engine/core/rank_updates.py); then this is a new matrix,
        and changing it changes nothing until it is assigned back (``las.Kinv = ...``)."""
        return self._inverse.value()

    @Kinv.setter
    def Kinv(self, value):
        self._inverse = LowRankInverse(value)
        self._V = None

    def inverse_times(self, rows: np.ndarray) -> np.ndarray:
        """K^-1 x for each row x of ``rows`` (B x r, float64), as rows: from the base and
        its correction, without forming K^-1 (``Kinv`` does, at r^2 k operations)."""
        return self._inverse.times_rows(np.ascontiguousarray(rows, dtype=np.float64))

    @property
    def K(self):
        """K = I_r - X^T diag(rho) X (float64, r x r)."""
        return self._K.value()

    @K.setter
    def K(self, value):
        self._K = DeferredK(value)

    # -- numerical health ----------------------------------------------------------
    def inverse_residual(self) -> float:
        """max |K K^-1 - I|: a cheap (O(r^3)) check of the incrementally updated inverse."""
        with blas_threads(self.store.r ** 3):
            return float(np.abs(self.K @ self.Kinv - np.eye(self.store.r)).max())

    def refresh(self) -> dict[str, float]:
        """Recompute K^-1, J, f and the impact factor from X; return the drift it removed.

        The drift is the largest difference, relative to the largest value, between the
        incremental and the recomputed K^-1, J and f.
        """
        if self._J_unused():
            self._sync_f()                # a J left behind is not rebuilt only to be compared
        else:
            self._sync_scores()           # J is compared with its recomputed value
        old_Kinv = self.Kinv.copy()
        measured = self._initial_passes(refresh=True) or {}
        drift = {"labels": self.n_labeled, "Kinv": _rel(old_Kinv, self.Kinv), **measured}
        self.refreshes.append(drift)
        return drift

    # -- saving and restoring --------------------------------------------------------
    # With pruned queries, or after batches at alpha = 0, J may lag behind; the state then
    # says so (``J_stale``) and the restored engine recomputes J from K^-1 when J or the
    # impact factor is read (only the impact factor uses it).
    def _export_meta(self) -> dict[str, Any]:
        meta = {"t_prev": self._t_prev, "labels_since_check": self._labels_since_check,
                "work_since_check": self._work_since_check, "fantasy": self.fantasy,
                **self.drift_check.as_dict(),
                "J_stale": self._J_stale or bool((pruning := self._pruned()) and pruning.stale)}
        return {**meta, **self._prune_meta()}

    def _saved_globals(self) -> dict[str, np.ndarray]:
        """SAVED_GLOBALS, but K^-1 as it is kept: the base "Kinv_base" and the labels since
        the last fold as its correction, "Kinv_G" and "Kinv_c" (K^-1 = Kinv_base -
        Kinv_G^T diag(Kinv_c) Kinv_G), and V = [K^-1 xq, K^-1 xz] as the labels left it.
        Saving folds and recomputes nothing, so a restored search continues to the bit as
        the saved one; and an older bigsearch, which reads "Kinv" as K^-1, finds none and
        takes the state as damaged instead of reading the base as K^-1."""
        inverse = self._inverse
        arrays = {name: getattr(self, name) for name in self.SAVED_GLOBALS if name != "Kinv"}
        arrays.update(Kinv_base=inverse.base, Kinv_G=inverse.Gt[:inverse.k], Kinv_c=inverse.c[:inverse.k],
                      V=self.score_vectors())
        return {name: np.array(value, copy=True) for name, value in arrays.items()}

    def _load_globals(self, arrays: dict[str, np.ndarray]) -> None:
        """A state saved by ``_saved_globals``, or one saved before the correction existed
        (K^-1 as "Kinv"; V is then computed from it)."""
        for name in self.SAVED_GLOBALS:
            value = arrays["Kinv_base" if name == "Kinv" and "Kinv_base" in arrays else name]
            setattr(self, name, np.array(value, dtype=np.float64))
        if "Kinv_base" in arrays:
            self._inverse.add(np.array(arrays["Kinv_G"], dtype=np.float64),
                              np.array(arrays["Kinv_c"], dtype=np.float64))
            self._V = np.array(arrays["V"], dtype=np.float64)

    @classmethod
    def _options_from_meta(cls, meta: dict[str, Any]) -> dict[str, Any]:
        return {**meta["params"], **{name: meta[name] for name in DriftCheck.names()},
                **cls._prune_from_meta(meta), "fantasy": meta.get("fantasy")}

    def _restore(self, meta: dict[str, Any]) -> None:
        """One O(n r) pass for f and the degrees; a J saved stale stays so until J or the
        impact factor is read, as in the saved search (so both continue to the bit)."""
        self._t_prev, self._labels_since_check = meta["t_prev"], meta["labels_since_check"]
        self._work_since_check = float(meta.get("work_since_check", 0.0))
        self._J_stale = bool(meta.get("J_stale", False))
        self._rescore(J_from_Kinv=False)
        if self.pruning is not None:
            self.pruning.after_full_pass()
        self.bytes_since_query = 0


def _rel(a: np.ndarray, b: np.ndarray) -> float:
    scale = np.abs(b).max()
    return float(np.abs(a - b).max() / scale) if scale else float(np.abs(a - b).max())
