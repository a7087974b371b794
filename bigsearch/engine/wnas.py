"""WNAS: weighted-neighbour Active Search (the paper's Section 3.3).

f_i = sum_{j in L} s_j (x_i . x_j) / sum_{j in L} |x_i . x_j| (s_j = +1 positive,
-1 negative): a Nadaraya-Watson estimate from the labeled points. Each point keeps
its numerator and denominator, so every batch of new labels costs one pass over X.
There is no impact factor; the query is the unlabeled point with the highest f.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..backends import StepCall
from .base import ChunkedSearch, PointArray, StoreLike
from .params import WNASParams
from .steps import WNAS_UPDATE


class WNAS(ChunkedSearch):
    """Weighted-neighbour Active Search over a feature store.

    Parameters
    ----------
    store : path or FeatureStore
    backend : "local" or a dask ``distributed.Client``
    n_threads : int, optional
    """

    method = "wnas"
    params: WNASParams
    POINT_STATE = (PointArray("label", np.int8, -1), PointArray("num", np.float64, 0.0),
                   PointArray("den", np.float64, 0.0), PointArray("f", np.float64, 0.0))
    SAVED_POINT_ARRAYS = ("num", "den")

    def __init__(self, store: StoreLike, *, backend: Any = "local", n_threads: int | None = None,
                 store_options: dict[str, Any] | None = None) -> None:
        super().__init__(store, WNASParams(), backend=backend, n_threads=n_threads, store_options=store_options)

    @property
    def f(self) -> np.ndarray:
        """Weighted-neighbour scores in [-1, 1] (0 where no labeled point is similar)."""
        return self._point_values("f")

    def _update(self, idx: np.ndarray, lab: np.ndarray) -> None:
        self._pass(WNAS_UPDATE, *self._similarity_args(idx, lab))

    def _similarity_args(self, idx: np.ndarray, lab: np.ndarray, reset: bool = False) -> tuple[Any, ...]:
        return self.store.read_rows(idx), 2.0 * lab.astype(np.float64) - 1.0, idx, lab, reset

    def rebuild_recipe(self) -> StepCall:
        """The step and arguments that rebuild a chunk's numerators and denominators
        from every label so far: ``step(x, state, *args)``."""
        return StepCall(WNAS_UPDATE, self._similarity_args(*self.history_arrays(), reset=True))

    def _restore(self, meta: dict[str, Any]) -> None:
        """Numerators and denominators are set: apply the labels and compute f (no rows)."""
        idx, lab = self.history_arrays()
        self._pass(WNAS_UPDATE, np.zeros((0, self.store.r)), np.zeros(0), idx, lab, False)
