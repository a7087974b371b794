"""WNAS: weighted-neighbour Active Search (the paper's Section 3.3).

f_i = sum_{j in L} s_j (x_i . x_j) / sum_{j in L} |x_i . x_j| (s_j = +1 positive,
-1 negative; a graded label y in [0, 1] has s_j = 2y - 1): a Nadaraya-Watson estimate
of 2y - 1 from the labeled points. Each point keeps
its numerator and denominator, so every batch of new labels costs one pass over X.
There is no impact factor; the query is the unlabeled point with the highest f.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...backends import StepCall
from ..core.base import PointArray, PrunableSearch, StoreLike
from ..core.params import PruneOptions, WNASOptions, WNASParams
from ..core.select import PassSummary
from ..core.steps import WNAS_UPDATE
from ..pruning.wnas import WNASPruning


class WNAS(PrunableSearch):
    """Weighted-neighbour Active Search over a feature store.

    Parameters
    ----------
    store : path or FeatureStore
    backend : "local" or a dask ``distributed.Client``
    n_threads : int, optional
    prune : bool
        Exact pruned selection (engine/pruning/wnas.py; on a dask backend each worker
        prunes its own chunks): labels told one batch of at most 8 at a time cost no
        pass, and a query reads only the blocks of rows that could hold it; the queries
        are the full pass's.
    block_rows : int, optional
        Rows per pruning block (a multiple of 64; default 128).
    """

    method = "wnas"
    GRADED = True
    FULL_PASS = "a full pass per batch of labels"
    params: WNASParams
    POINT_STATE = (PointArray("label", np.int8, -1), PointArray("num", np.float64, 0.0),
                   PointArray("den", np.float64, 0.0), PointArray("f", np.float64, 0.0))
    SAVED_POINT_ARRAYS = ("num", "den")

    def __init__(self, store: StoreLike, *, backend: Any = "local", n_threads: int | None = None,
                 store_options: dict[str, Any] | None = None, prune: bool | PruneOptions = False,
                 block_rows: int | None = None) -> None:
        options = WNASOptions(prune, block_rows)             # checked before the store is opened
        super().__init__(store, WNASParams(), backend=backend, n_threads=n_threads, store_options=store_options)
        self._start_pruning(WNASPruning, options.prune, options.block_rows)

    # -- pruned queries (engine/pruning/wnas.py) --------------------------------------
    def engine_options(self) -> dict[str, Any]:
        return self._prune_keywords()

    def _sync_scores(self) -> None:
        self._sync()
        pruning = self._pruned()
        if pruning is not None:
            pruning.catch_up()

    def export_state(self) -> dict[str, Any]:
        self._sync_scores()            # numerators and denominators of every block current
        return super().export_state()

    def _export_meta(self) -> dict[str, Any]:
        return self._prune_meta()

    @classmethod
    def _options_from_meta(cls, meta: dict[str, Any]) -> dict[str, Any]:
        return {**meta["params"], **cls._prune_from_meta(meta)}

    @property
    def f(self) -> np.ndarray:
        """Weighted-neighbour scores in [-1, 1] (0 where no labeled point is similar)."""
        return self._point_values("f")

    def _update(self, idx: np.ndarray, lab: np.ndarray) -> None:
        pruning = self._pruned()
        if pruning is not None and self._summary is not None and pruning.labels_told(idx, lab):
            return                     # no pass: the next query reads what it needs
        if pruning is not None:
            pruning.catch_up()         # the blocks behind get the batches they missed first
        if self.pruning is not None:   # (its first pass also checks the summaries stored with X)
            self._summary = PassSummary.from_partials(self.pruning.full_pass(self._similarity_args(idx, lab)))
        else:
            self._pass(WNAS_UPDATE, *self._similarity_args(idx, lab))
        self.bytes_since_query += self.store.nbytes
        if self.pruning is not None:
            self.pruning.after_full_pass()

    def _similarity_args(self, idx: np.ndarray, lab: np.ndarray, reset: bool = False) -> tuple[Any, ...]:
        """Each label's row and sign 2y - 1 (graded labels: y in [0, 1]), and the 0/1 labels."""
        return self.store.read_rows(idx), 2.0 * self.label_values(idx) - 1.0, idx, lab, reset

    def rebuild_recipe(self) -> StepCall:
        """The step and arguments that rebuild a chunk's numerators and denominators
        from every label so far: ``step(x, state, *args)``."""
        idx = self.history_arrays()[0]
        return StepCall(WNAS_UPDATE, self._similarity_args(idx, self._label[idx], reset=True))

    def _restore(self, meta: dict[str, Any]) -> None:
        """Numerators and denominators are set: apply the labels and compute f (no rows)."""
        idx = self.history_arrays()[0]
        self._pass(WNAS_UPDATE, np.zeros((0, self.store.r)), np.zeros(0), idx, self._label[idx], False)
        if self.pruning is not None:
            self.pruning.after_full_pass()
