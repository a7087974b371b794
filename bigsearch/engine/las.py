"""LAS: Linearized Active Search (Venkatesan et al., IJCAI 2017).

Label propagation with soft-label pseudo-nodes on the graph whose edge weights are
x_i . x_j, with the impact factor (one-step look-ahead). The n x n problem of ASG is
rewritten through K = I_r - X^T diag(rho) X (r x r), so that

- initialization costs three passes over X and O(n r^2 + r^3) work;
- each label costs a Sherman-Morrison update of K^-1 (O(r^2)) and ONE pass over X
  (O(n r)) that updates f, J = diag(X K^-1 X^T) and the impact factor together.

f, the impact factor and the queries are those of the dense ASG (tests check this
against a direct solve and a brute-force impact factor). Formulas: docs/algorithm.md.
"""

import os
import warnings

import numpy as np

from .. import limits
from ..backends import make_backend
from ..errors import DataError, NumericalError
from ..kernels.las import degrees
from ..storage.encoding import decode
from .base import ActiveSearch
from .params import LASParams, default_pi
from .pruning import LASPruning
from .rank_updates import batch_update
from .select import PassSummary, select
from .steps import (
    Compared,
    best_in_chunk,
    colsum_step,
    gram_step,
    las_refresh_step,
    las_rescore_step,
    las_update_step,
)


class LAS(ActiveSearch):
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
        from X when it exceeds ``drift_tol``.
    prune : bool
        Exact pruned selection (engine/pruning.py): with alpha = 0 on the local backend, a
        query reads only the blocks of rows that could hold the answer, and the answer is
        the full pass's. J and the impact factor are then brought up to date only when
        asked for. ``pruning_status`` says whether it is on, and why not.
    block_rows : int, optional
        Rows per pruning block (even; default 128).
    """

    method = "las"

    def __init__(self, store, *, pi=None, eta=0.5, w0=None, alpha=0.0, backend="local",
                 n_threads=None, check_every=100, drift_tol=1e-10, store_options=None, prune=False,
                 block_rows=None):
        super().__init__(store, store_options)
        r = self.store.r     # K, K^-1 and work arrays, and an X^T R X partial per thread: r x r float64 each
        limits.check_memory(((n_threads or os.cpu_count() or 1) + 6) * r * r * 8,
                            f"LAS on {r:,} features (its r x r matrices)",
                            "use fewer features (e.g. --rff D at ingest), or WNAS, which keeps no r x r state")
        self.params = LASParams(pi=default_pi(self.store, pi), w0=1.0 / self.n if w0 is None else w0,
                                eta=eta, alpha=alpha)
        self.backend = make_backend(self.store, backend, n_threads)
        self.backend.set_rebuild(self.rebuild_recipe)
        self.check_every, self.drift_tol = check_every, drift_tol
        self.refreshes = []          # drift measured at each automatic or requested refresh
        self._ready = False
        self._summary = None
        self._t_prev = 0.0           # weight of IM in the last query: the kernels rank by it
        self._labels_since_check = 0
        self.pruning = LASPruning(self, block_rows) if prune else None
        self.bytes_since_query = 0   # bytes of X read since the last query was chosen
        self.query_bytes = []        # per query (ask or top): bytes of X read to choose it

    @property
    def pruning_status(self):
        """How queries are chosen: a full pass each, or pruned (and why not)."""
        return "off: a full pass per query" if self.pruning is None else self.pruning.status

    def _pruned(self):
        return self.pruning is not None and self.pruning.active

    # -- scores --------------------------------------------------------------------
    @property
    def f(self):
        """Label-propagation scores, one per point (float64, read-only)."""
        self._sync_all()
        return self.backend.gather("f")

    @property
    def impact(self):
        """Impact factor IM_i = f_i * sum_{j in U, j != i} (f+_j - f_j); 0 for labeled points."""
        self._sync_all()
        return self.backend.gather("im")

    @property
    def J(self):
        """J_i = x_i^T K^-1 x_i (float64, read-only)."""
        self._sync_all()
        return self.backend.gather("J")

    @property
    def impact_scale(self):
        """s, the factor that rescales IM to the mean of f (the query uses alpha * s * IM)."""
        self._sync_all()
        return self._summary.impact_scale()

    # -- the algorithm -------------------------------------------------------------
    def _sync(self):
        if not self._ready:
            self._pending = []
            self._initialize()
        elif self._pending:
            self._update(*self._take_pending())

    def _sync_all(self):
        """_sync, then every per-point value current (pruned queries leave J, the impact
        factor and unread blocks' f behind: one pass recomputes them, J from K^-1)."""
        self._sync()
        if self._pruned() and self.pruning.stale:
            self._rescore(J_from_Kinv=True)
            self.pruning.after_full_pass()

    def _top(self, k):
        if self._pruned():
            out = self.pruning.top(k)
        else:
            t = self._t_prev = self._summary.selection_weight(self.params.alpha)
            out = select(self._summary, t, self._rescan, k)
        self.query_bytes.append(self.bytes_since_query)
        self.bytes_since_query = 0
        return out

    def _rescan(self, chunk_ids, t, k):
        return self.backend.map_state(best_in_chunk, chunk_ids, t, k)

    def _alloc(self):
        for name, dtype, fill in (("label", np.int8, -1), ("deg", np.float64, 0.0), ("J", np.float64, 0.0),
                                  ("f", np.float64, 0.0), ("im", np.float64, 0.0)):
            self.backend.alloc(name, dtype, fill)

    def _initialize(self, refresh=False):
        """Three chunked passes: column sums; degrees and X^T diag(rho) X; J and scores.

        A refresh overwrites the per-point arrays in place (no second copy of the state)
        and returns the drift of J and f that the last pass measured."""
        p, b = self.params, self.backend
        if not refresh:
            self._alloc()
        parts = b.map(colsum_step)
        bad_rows = [row for _, row in parts if row >= 0]
        if bad_rows:
            raise DataError(f"{self.store.path}: X has a non-finite value (NaN or inf) in row {min(bad_rows)} "
                            "(the first such row); fix or drop those rows")
        self.s = np.sum([s for s, _ in parts], axis=0)
        if not np.all(np.isfinite(self.s)):
            raise DataError(f"{self.store.path}: the column sums of X overflow; rescale X (e.g. unit-normalize rows)")
        labeled = np.flatnonzero(self._label >= 0)
        parts = b.map(gram_step, self.s, labeled, self._label[labeled], p.eta, p.w0, p.pi)
        n_bad = sum(q[0] for q in parts)
        if n_bad:
            first = min(q[1] for q in parts if q[0])
            raise DataError(
                f"{self.store.path}: {n_bad} of {self.n} points have a degree x_i . sum_j x_j <= 0 "
                f"(the first is row {first}); LAS needs positive degrees: unit-normalize the rows and "
                "append a constant 1 feature (bigsearch ingest --normalize --bias), which makes every "
                "similarity cos + 1 >= 0")
        G = np.sum([q[2] for q in parts], axis=0)
        self.K = np.eye(self.store.r) - (G + G.T) / 2
        self.Kinv = self._invert(self.K)
        self.xq = np.sum([q[3] for q in parts], axis=0)
        self.xz = np.sum([q[4] for q in parts], axis=0)
        drift = self._rescore(J_from_Kinv=True, compare=refresh)
        if self.pruning is not None:
            self.pruning.after_full_pass(G)
        self._ready = True
        self._labels_since_check = 0
        self.bytes_since_query = 0
        return drift

    def _rescore(self, J_from_Kinv, compare=False):
        """One pass: every chunk's state from the global state (see las_rescore_step).
        With ``compare``, also returns {"J": ..., "f": ...}: the largest change of each,
        relative to its largest value."""
        step, args = self.rebuild_recipe(J_from_Kinv)
        parts = self.backend.map(las_refresh_step if compare else step, *args)
        self.bytes_since_query += self.store.nbytes
        # A chunk rebuilt after a lost worker returns plain partials: its old values are gone.
        drifts = [p[1] for p in parts if isinstance(p, Compared)]
        parts = [p[0] if isinstance(p, Compared) else p for p in parts]
        self._summary = PassSummary.from_partials(parts, self._t_prev)
        if compare:
            dJ, J, df, f = np.max(drifts, axis=0) if drifts else (0.0, 0.0, 0.0, 0.0)
            return {"J": dJ / J if J else dJ, "f": df / f if f else df}

    def rebuild_recipe(self, J_from_Kinv=True):
        """(step, args) that rebuild a chunk's per-point state from the current global
        state: ``step(x, state, *args)``. Backends use it to restore a lost chunk."""
        p = self.params
        labeled = np.flatnonzero(self._label >= 0)
        V = np.stack([self.Kinv @ self.xq, self.Kinv @ self.xz])
        return las_rescore_step, (self.s, labeled, self._label[labeled], self.Kinv if J_from_Kinv else None,
                                  V, p.eta, p.w0, p.pi, self._t_prev)

    def _invert(self, K):
        try:
            Kinv = np.linalg.inv(K)
        except np.linalg.LinAlgError as e:
            raise NumericalError(f"K = I - X^T R X is singular ({e}); check w0 > 0 and the data") from e
        if not np.all(np.isfinite(Kinv)):
            raise NumericalError("K^-1 has non-finite entries; check w0 > 0 and the data")
        return (Kinv + Kinv.T) / 2

    def _update(self, idx, lab):
        """Sherman-Morrison for the new labels (as matrix products: engine/rank_updates.py),
        then one fused pass."""
        p = self.params
        stored = self.store.read_stored_rows(idx)
        rows = decode(stored)
        deg = np.empty(len(idx))
        degrees(stored, self.s, deg)  # the kernel the passes use: bit-identical degrees
        b_unl = 1.0 / (1.0 + p.w0)
        G, cs = batch_update(self.Kinv, self.K, rows, (b_unl - (1.0 - p.eta)) / deg, idx)
        self.xq += (p.eta * np.asarray(lab, np.float64) - p.pi * p.w0 / (1.0 + p.w0)) @ rows
        self.xz -= (b_unl / deg) @ rows
        if self._pruned():
            self.pruning.labels_told(idx, lab)        # no pass: the next query reads what it needs
        else:
            V = np.vstack([self.Kinv @ self.xq, self.Kinv @ self.xz, G])
            parts = self.backend.map(las_update_step, V, cs, idx, lab, p.eta, p.w0, p.pi, self._t_prev)
            self._summary = PassSummary.from_partials(parts, self._t_prev)
            self.bytes_since_query += self.store.nbytes
        self._labels_since_check += len(idx)
        if self.check_every and self._labels_since_check >= self.check_every:
            self._labels_since_check = 0
            residual = self.inverse_residual()
            if residual > self.drift_tol:
                warnings.warn(f"K^-1 drifted (||K K^-1 - I|| = {residual:.2e}); recomputing it from X",
                              RuntimeWarning, stacklevel=4)
                self.refresh()

    # -- numerical health ----------------------------------------------------------
    def inverse_residual(self):
        """max |K K^-1 - I|: a cheap (O(r^3)) check of the incrementally updated inverse."""
        return float(np.abs(self.K @ self.Kinv - np.eye(self.store.r)).max())

    def refresh(self):
        """Recompute K^-1, J, f and the impact factor from X; return the drift it removed.

        The drift is the largest difference, relative to the largest value, between the
        incremental and the recomputed K^-1, J and f.
        """
        self._sync_all()               # J is compared with its recomputed value
        old_Kinv = self.Kinv.copy()
        drift = self._initialize(refresh=True)
        drift = {"labels": self.n_labeled, "Kinv": _rel(old_Kinv, self.Kinv), **drift}
        self.refreshes.append(drift)
        return drift

    # -- saving and restoring --------------------------------------------------------
    GLOBALS = ("s", "K", "Kinv", "xq", "xz")

    def export_state(self):
        """Everything needed to continue exactly: parameters, labels in order, the
        global state and J. (f, the impact factor and the degrees follow from these in
        one pass.) Returns {"meta": JSON-able dict, "arrays": {name: ndarray}}.

        With pruned queries J may lag behind; the state then says so (``J_stale``) and
        the restored engine recomputes J from K^-1 (only the impact factor uses it)."""
        self._sync()
        idx = np.array([i for i, _ in self.history], np.int64)
        lab = np.array([y for _, y in self.history], np.int8)
        arrays = {name: getattr(self, name).copy() for name in self.GLOBALS}
        arrays.update(history_index=idx, history_label=lab, J=np.array(self.backend.gather("J")))
        meta = {"method": self.method, "params": self.params.as_dict(), "n": self.n, "r": self.store.r,
                "t_prev": self._t_prev, "labels_since_check": self._labels_since_check,
                "check_every": self.check_every, "drift_tol": self.drift_tol,
                "J_stale": bool(self._pruned() and self.pruning.stale)}
        if self.pruning is not None:
            meta["prune"] = {"block_rows": self.pruning.block_rows}
        return {"meta": meta, "arrays": arrays}

    @classmethod
    def from_state(cls, store, state, *, backend="local", n_threads=None, store_options=None):
        """A LAS continuing from ``export_state()`` output, with the same next query."""
        meta, arrays = state["meta"], state["arrays"]
        prune = meta.get("prune")
        self = cls(store, backend=backend, n_threads=n_threads, store_options=store_options,
                   check_every=meta["check_every"], drift_tol=meta["drift_tol"], prune=prune is not None,
                   block_rows=(prune or {}).get("block_rows"), **meta["params"])
        _check_shape(self, meta)
        self.history = [(int(i), int(y)) for i, y in zip(arrays["history_index"], arrays["history_label"])]
        self._label[arrays["history_index"]] = arrays["history_label"]
        for name in self.GLOBALS:
            setattr(self, name, np.array(arrays[name], dtype=np.float64))
        self._t_prev, self._labels_since_check = meta["t_prev"], meta["labels_since_check"]
        self._alloc()
        self.backend.assign("J", arrays["J"])
        self._rescore(J_from_Kinv=bool(meta.get("J_stale", False)))
        if self.pruning is not None:
            self.pruning.after_full_pass()
        self._ready = True
        self.bytes_since_query = 0
        return self

    def close(self):
        self.backend.close()


def _check_shape(search, meta):
    from ..errors import StoreError
    if (meta["n"], meta["r"]) != (search.n, search.store.r):
        raise StoreError(f"the saved state is for a store of {meta['n']} x {meta['r']}, "
                         f"but {search.store.path} is {search.n} x {search.store.r}")


def _rel(a, b):
    scale = np.abs(b).max()
    return float(np.abs(a - b).max() / scale) if scale else float(np.abs(a - b).max())
