"""The random baseline: every unlabeled point is equally likely to be asked next."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..core.base import ActiveSearch, StoreLike
from ..core.params import RandomParams


class RandomSearch(ActiveSearch):
    """Uniform random queries among unlabeled points, reproducible from ``seed``."""

    method = "random"
    params: RandomParams

    def __init__(self, store: StoreLike, *, seed: int | None = None,
                 store_options: dict[str, Any] | None = None) -> None:
        self.params = RandomParams(seed)
        super().__init__(store, store_options)
        self._rng = np.random.default_rng(seed)

    def _sync(self) -> None:
        self._pending = []

    def _choose(self) -> int:
        # Rejection sampling is O(1) while most points are unlabeled.
        if self.n_labeled < self.n // 2:
            while True:
                i = int(self._rng.integers(self.n))
                if self._label[i] < 0:
                    return i
        return int(self._rng.choice(np.flatnonzero(self._label < 0)))
