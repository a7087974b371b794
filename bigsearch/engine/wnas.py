"""WNAS: weighted-neighbour Active Search (the paper's Section 3.3).

f_i = sum_{j in L} s_j (x_i . x_j) / sum_{j in L} |x_i . x_j| (s_j = +1 positive,
-1 negative): a Nadaraya-Watson estimate from the labeled points. Each point keeps
its numerator and denominator, so every batch of new labels costs one pass over X.
There is no impact factor; the query is the unlabeled point with the highest f.
"""

import numpy as np

from ..backends import make_backend
from .base import ActiveSearch
from .select import PassSummary, select
from .steps import best_in_chunk, wnas_update_step


class WNAS(ActiveSearch):
    """Weighted-neighbour Active Search over a feature store.

    Parameters
    ----------
    store : path or FeatureStore
    backend : "local" or a dask ``distributed.Client``
    n_threads : int, optional
    """

    method = "wnas"

    def __init__(self, store, *, backend="local", n_threads=None, store_options=None):
        super().__init__(store, store_options)
        self.params = {}
        self.backend = make_backend(self.store, backend, n_threads)
        self.backend.set_rebuild(self.rebuild_recipe)
        for name, dtype, fill in (("label", np.int8, -1), ("num", np.float64, 0.0),
                                  ("den", np.float64, 0.0), ("f", np.float64, 0.0)):
            self.backend.alloc(name, dtype, fill)
        self._summary = None

    @property
    def f(self):
        """Weighted-neighbour scores in [-1, 1] (0 where no labeled point is similar)."""
        self._sync()
        return self.backend.gather("f")

    def _sync(self):
        if self._summary is None or self._pending:
            idx, lab = self._take_pending()
            self._pass(wnas_update_step, self._similarity_args(idx, lab))

    def _pass(self, step, args):
        self._summary = PassSummary.from_partials(self.backend.map(step, *args))

    def _similarity_args(self, idx, lab, reset=False):
        return self.store.read_rows(idx), 2.0 * lab.astype(np.float64) - 1.0, idx, lab, reset

    def rebuild_recipe(self):
        """(step, args) that rebuild a chunk's numerators and denominators from every
        label so far: ``step(x, state, *args)``."""
        idx = np.array([i for i, _ in self.history], np.int64)
        lab = np.array([y for _, y in self.history], np.int8)
        return wnas_update_step, self._similarity_args(idx, lab, reset=True)

    def _top(self, k):
        return select(self._summary, 0.0, lambda ids, t, k: self.backend.map_state(best_in_chunk, ids, t, k), k)

    # -- saving and restoring --------------------------------------------------------
    def export_state(self):
        """Labels in order and each point's numerator and denominator."""
        self._sync()
        idx = np.array([i for i, _ in self.history], np.int64)
        lab = np.array([y for _, y in self.history], np.int8)
        return {"meta": {"method": self.method, "params": {}, "n": self.n, "r": self.store.r},
                "arrays": {"history_index": idx, "history_label": lab,
                           "num": np.array(self.backend.gather("num")), "den": np.array(self.backend.gather("den"))}}

    @classmethod
    def from_state(cls, store, state, *, backend="local", n_threads=None, store_options=None):
        meta, arrays = state["meta"], state["arrays"]
        self = cls(store, backend=backend, n_threads=n_threads, store_options=store_options)
        from .las import _check_shape
        _check_shape(self, meta)
        self.history = [(int(i), int(y)) for i, y in zip(arrays["history_index"], arrays["history_label"])]
        self._label[arrays["history_index"]] = arrays["history_label"]
        self.backend.assign("num", arrays["num"])
        self.backend.assign("den", arrays["den"])
        self._pass(wnas_update_step, (np.zeros((0, self.store.r)), np.zeros(0), arrays["history_index"],
                                      arrays["history_label"], False))
        return self

    def close(self):
        self.backend.close()
