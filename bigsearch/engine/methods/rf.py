"""``rf``: a random forest retrained on every batch, greedy. A baseline, not the engine.

This is what chemists use for the same job (MolPAL's default model): scikit-learn's
``RandomForestRegressor`` with MolPAL's settings (100 trees, depth 8, min_samples_leaf 1)
fitted to the labels told so far (0/1, or graded labels in [0, 1]), then every
unlabeled point ranked by its prediction, highest first (greedy). It is here so users
can compare Active Search with it on their own data (docs/discovery.md).

Out of core like the rest: the forest is fitted on the labeled rows only (read by index)
and predicts chunk by chunk, so X is never in memory; per point it keeps one float64
prediction. Each batch of labels costs a fit (O(trees L log L r) for L labels) and one
pass over X for the predictions. There are no exactness guarantees to check: the tests
check it against scikit-learn run on the whole matrix.
"""

import numpy as np

from ...errors import ParameterError
from ...storage.encoding import decode
from ..core.base import ActiveSearch
from ..core.params import RFParams

PREDICT_ROWS = 8192  # rows converted to float64 and predicted at a time: bounded memory


class RandomForestSearch(ActiveSearch):
    """Greedy search with a random forest regressor retrained after every batch of labels.

    Parameters
    ----------
    store : path or FeatureStore
    n_trees, max_depth, min_samples_leaf : MolPAL's defaults (100, 8, 1)
    seed : int, the forest's random_state (the same seed gives the same queries)
    n_jobs : int, scikit-learn's threads for fitting and predicting (default 1)
    """

    method = "rf"
    GRADED = True

    def __init__(self, store, *, n_trees=100, max_depth=8, min_samples_leaf=1, seed=0, n_jobs=1, store_options=None):
        self.params = RFParams(n_trees, max_depth, min_samples_leaf, seed)
        if int(n_jobs) != n_jobs or n_jobs < 1:
            raise ParameterError(f"rf: n_jobs must be a positive integer, got {n_jobs!r}")
        super().__init__(store, store_options)
        self.n_jobs = int(n_jobs)
        self._prediction = np.zeros(self.n)
        self.fits = 0

    @property
    def f(self):
        """The forest's prediction for every point (0 before any label)."""
        self._sync()
        return self._prediction

    def _sync(self):
        if not self._pending:
            return
        self._pending = []
        idx = np.array([i for i, _ in self.history], np.int64)
        y = self.label_values(idx)
        forest = self._forest().fit(self.store.read_rows(idx), y)
        self.fits += 1
        for j in range(self.store.n_chunks):
            a, b = self.store.chunks[j]
            with self.store.chunk(j) as x:
                for s in range(0, b - a, PREDICT_ROWS):
                    rows = decode(x, s, s + PREDICT_ROWS)
                    self._prediction[a + s : a + s + len(rows)] = forest.predict(rows)

    def _forest(self):
        from sklearn.ensemble import RandomForestRegressor

        p = self.params
        return RandomForestRegressor(
            n_estimators=p.n_trees,
            max_depth=p.max_depth,
            min_samples_leaf=p.min_samples_leaf,
            random_state=p.seed,
            n_jobs=self.n_jobs,
        )

    def _top(self, k):
        unl = np.flatnonzero(self._label < 0)
        order = np.lexsort((unl, -self._prediction[unl]))[:k]
        return unl[order].astype(np.int64), self._prediction[unl[order]]
