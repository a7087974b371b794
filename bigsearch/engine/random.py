"""The random baseline: every unlabeled point is equally likely to be asked next."""

import numpy as np

from .base import ActiveSearch


class RandomSearch(ActiveSearch):
    """Uniform random queries among unlabeled points, reproducible from ``seed``."""

    method = "random"

    def __init__(self, store, *, seed=None, store_options=None):
        super().__init__(store, store_options)
        self.params = {"seed": seed}
        self._rng = np.random.default_rng(seed)

    def _sync(self):
        self._pending = []

    def _choose(self):
        # Rejection sampling is O(1) while most points are unlabeled.
        if self.n_labeled < self.n // 2:
            while True:
                i = int(self._rng.integers(self.n))
                if self._label[i] < 0:
                    return i
        return int(self._rng.choice(np.flatnonzero(self._label < 0)))
