"""ASG: the original dense Active Search on Graphs (Wang et al., KDD 2013), as the
paper describes it, with A = X X^T.

It keeps W^-1 = (I - B D^-1 A)^-1 (n x n) and updates it with a rank-one
Sherman-Morrison step per label: O(n^3) set-up, O(n^2) time and memory per step. It
is the baseline LAS is measured against and must match (same f, impact factor and
queries); it refuses stores too large for this machine's memory.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...errors import DataError, ResourceError
from ...limits import available_memory
from ..core.base import ActiveSearch, StoreLike
from ..core.params import LASParams
from ..core.select import Ranked, select_dense

BYTES_PER_ENTRY = 8 * 3  # W^-1, the matrix it is inverted from, and a temporary


class ASG(ActiveSearch):
    """Dense Active Search on Graphs; same parameters and results as :class:`LAS`."""

    method = "asg"
    GRADED = True
    PROBABILITY_SCORES = True
    params: LASParams

    def __init__(self, store: StoreLike, *, pi: float | None = None, eta: float = 0.5, w0: float | None = None,
                 alpha: float = 0.0, store_options: dict[str, Any] | None = None) -> None:
        super().__init__(store, store_options)
        need, have = BYTES_PER_ENTRY * self.n ** 2, available_memory()
        if need > 0.9 * have:
            raise ResourceError(
                f"ASG keeps dense n x n matrices: n = {self.n} needs about {need / 2**30:.1f} GiB and "
                f"{have / 2**30:.1f} GiB is available; use LAS, which gives the same queries in O(n r) memory")
        self.params = LASParams.for_store(self.store, pi, eta, w0, alpha)
        self._Winv: np.ndarray | None = None

    def _load(self):
        X = self.store.read_rows(np.arange(self.n))
        self.X = X
        self.d = X @ X.sum(axis=0)
        return X

    def _b(self):
        p = self.params
        return np.where(self._label >= 0, 1.0 - p.eta, 1.0 / (1.0 + p.w0))

    def _sync(self):
        p = self.params
        if self._Winv is None:
            X = self._load()
            self._pending = []
            if not np.all(self.d > 0):
                raise DataError(f"{int((self.d <= 0).sum())} points have a degree <= 0; "
                                "unit-normalize the rows and append a constant 1 feature")
            W = np.eye(self.n) - (self._b() / self.d)[:, None] * (X @ X.T)
            self._Winv = np.linalg.inv(W)
            del W
        for i, y in self._pending:
            # Labeling i changes row i of W by -(delta b / d_i) A[i, :].
            delta = ((1.0 - p.eta) - 1.0 / (1.0 + p.w0)) / self.d[i]
            a_i = self.X @ self.X[i]
            u = -delta * self._Winv[:, i]
            vW = a_i @ self._Winv
            self._Winv -= np.outer(u / (1.0 + vW[i] * -delta), vW)
        self._pending = []
        self._scores()

    def _soft_labels(self):
        """The labels as float64, graded ones included."""
        y = self._label.astype(np.float64)
        y[list(self._grade)] = list(self._grade.values())
        return y

    def _scores(self):
        p = self.params
        unl = self._label < 0
        b = self._b()
        q = np.where(unl, p.pi * p.w0 / (1.0 + p.w0), p.eta * self._soft_labels())
        z = np.where(unl, b / self.d, 0.0)
        f, mu = (self._Winv @ np.stack([q, z], axis=1)).T
        m = np.diag(self._Winv) * b / self.d            # diag(M^-1) = diag(W^-1) B D^-1
        lam = (1.0 - p.eta) / p.eta
        Lv, Uv = self.d / lam, p.w0 * self.d
        c = (Lv - p.pi * Uv - (Lv - Uv) * f) / (1.0 + (Lv - Uv) * m)
        self._f = f
        self._im = np.where(unl, f * c * (mu - m), 0.0)

    @property
    def f(self) -> np.ndarray:
        self._sync()
        return self._f

    @property
    def impact(self) -> np.ndarray:
        self._sync()
        return self._im

    def _top(self, k: int) -> Ranked:
        return select_dense(self._f, self._im, self._label < 0, self.params.alpha, k)
