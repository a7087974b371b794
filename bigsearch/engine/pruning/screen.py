"""Exact pruned queries for screening (engine/methods/screen.py) while its score is linear.

With ``neighbour_weight`` 0 (the default) a record's score is the classifier's alone,
f_i = x_i . v + b, and v, b are refitted each query from X^T X, the labeled rows and their
sums, without a pass over X: engine/pruning/linear.py's situation, so this is its
``LinearPruning`` with u = [v, b] and screen's full pass's kernel (kernels/screen.py) on
the rows of the blocks a query reads, bit for bit the full pass's scores. The summaries'
basis is the top eigenvectors of the X^T X the method already holds (no pass of its own).

With ``neighbour_weight`` > 0 the score adds the similarity to the nearest positives,
which is not linear in x (and changes with every positive): queries keep the full pass,
and ``status`` says why.
"""

from dataclasses import dataclass

import numpy as np

from ...kernels.screen import screen_scores
from .las import row_range
from .linear import LinearPruning, RowScorer


class ScreenPruning(LinearPruning):
    """Screen's :class:`~bigsearch.engine.pruning.contract.Pruning` (see the module)."""

    def __init__(self, engine, options=None):
        super().__init__(engine, options)
        if engine.params.neighbour_weight > 0:
            self.status = (
                "off: neighbour_weight > 0: the similarity to the nearest positives is not linear in x, "
                "so every query is a full pass"
            )
        else:
            self.status = self.caches.status(f"on: exact pruning of blocks of {self.block_rows} rows (a linear score)")

    def u(self):
        e = self.engine
        return np.append(e.v, e.b)

    def scorer(self):
        e = self.engine
        return ScreenRows(np.ascontiguousarray(e.v[None, :]), float(e.b))

    def gram(self):
        """X^T X, summed by the method's first pass."""
        return self.engine.G


@dataclass(eq=False)
class ScreenRows(RowScorer):
    """Screen's full pass (kernels/screen.py) on rows of a chunk: f = x . v + b, no new
    positives (V = [v]) and no neighbour term (t = 0, k = 0), as the full pass has them
    when pruning is on."""

    V: np.ndarray  # (1, r): v
    b: float

    def rows(self, x, state, a, z, extra):
        s = state
        sl = slice(a, z)
        screen_scores(
            row_range(x, a, z),
            self.V,
            self.b,
            0.0,
            0,
            s.start + a,
            s.label[sl],
            s.nn0[sl],
            s.nn1[sl],
            s.nn2[sl],
            s.f[sl],
        )
