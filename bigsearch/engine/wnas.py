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
            Z = self.store.read_rows(idx)
            signs = 2.0 * lab.astype(np.float64) - 1.0
            parts = self.backend.map(wnas_update_step, Z, signs, idx, lab)
            self._summary = PassSummary.from_partials(parts)

    def _choose(self):
        return select(self._summary, 0.0, lambda ids, t: self.backend.map_state(best_in_chunk, ids, t))

    def close(self):
        self.backend.close()
