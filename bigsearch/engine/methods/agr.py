"""AGR: Anchor Graph Regularization with Local Anchor Embedding (Liu, He, Chang,
ICML 2010), the semi-supervised baseline of the paper's experiments.

A point's label score is a weighted average of scores on k anchors (k-means centres):
f = Z a, where row i of Z (n x k) holds the LAE weights of x_i on its s nearest anchors
(kernels/agr.py). The anchor graph W = Z Lambda^-1 Z^T (Lambda = diag(Z^T 1)) gives the
reduced Laplacian

    L~ = Z^T (I - W) Z = Z^T Z - (Z^T Z) Lambda^-1 (Z^T Z)          (k x k)

and, with the labeled rows Z_l and labels y_l, the positive-class scores on the anchors

    a = (Z_l^T Z_l + gamma L~ + 1e-6 I)^-1 Z_l^T y_l

(the 1e-6 ridge is in the authors' code). As the paper used it for Active Search, f is
the positive-class confidence normalized as in Liu et al.: f = Z a / (1^T Z a), and
the model is retrained after every label with all labels so far; the query is the
unlabeled point with the highest f. An anchor that no point uses (Lambda_jj = 0) drops
out of L~.

Cost: k-means once (cached beside the store, engine/methods/agr_anchors.py); one pass over X to
embed every point (O(n k r) for the distances); then per label an O(k^3) solve and a
pass over the per-point state (O(n s), no read of X). Z lives in the backend's per-chunk
state like LAS's per-point arrays.
"""

from __future__ import annotations

from os import PathLike
from typing import Any, NamedTuple

import numpy as np

from ...backends import ChunkStep, StepCall
from ...errors import ParameterError
from ...kernels.agr import anchor_gram, anchor_scores, embed_rows, nearest_anchors
from ...storage.encoding import decode, n_rows
from ..core.base import ChunkedSearch, PointArray, StoreLike
from ..core.kmeans import BLOCK_ROWS, squared_distances
from ..core.params import AGRParams
from ..core.select import ChunkPartials, PassSummary
from .agr_anchors import anchors_for

RIDGE = 1e-6


class AGR(ChunkedSearch):
    """Anchor Graph Regularization over a feature store, with the ask/tell interface.

    Parameters
    ----------
    store : path or FeatureStore
    anchors : int
        k, the number of k-means anchors (the paper: 500).
    neighbors : int
        s, the nearest anchors each point is embedded on (3).
    gamma : float
        Weight of the graph regularizer L~ (0.01).
    lae_iterations : int
        Iterations of Local Anchor Embedding per point (10, as in the authors' code).
    kmeans_iterations, kmeans_seed : int
        Lloyd iterations and the seed of k-means (anchors are cached per value).
    cache_dir : path, optional
        Where the anchors are cached (default: .bigsearch-cache beside the store).
    backend, n_threads : as for LAS.
    """

    method = "agr"
    params: AGRParams

    def __init__(self, store: StoreLike, *, anchors: int = 500, neighbors: int = 3, gamma: float = 0.01,
                 lae_iterations: int = 10, kmeans_iterations: int = 20, kmeans_seed: int = 0,
                 cache_dir: str | PathLike[str] | None = None, backend: Any = "local",
                 n_threads: int | None = None, store_options: dict[str, Any] | None = None) -> None:
        params = AGRParams(anchors, neighbors, gamma, lae_iterations, kmeans_iterations, kmeans_seed)
        super().__init__(store, params, backend=backend, n_threads=n_threads, store_options=store_options)
        if params.anchors > self.n:
            self.close()
            raise ParameterError(f"AGR needs 1 <= anchors <= n = {self.n}, got {params.anchors}")
        self.cache_dir = cache_dir
        self.coef = np.zeros(params.anchors)      # a / (1^T Z a): f = Z coef

    def point_state(self) -> tuple[PointArray, ...]:
        s = self.params.neighbors
        return (PointArray("label", np.int8, -1), PointArray("f", np.float64, 0.0),
                PointArray("nearest", np.dtype((np.int32, (s,))), 0),
                PointArray("weight", np.dtype((np.float64, (s,))), 0.0))

    # -- scores --------------------------------------------------------------------
    @property
    def f(self) -> np.ndarray:
        """Positive-class confidence per point, normalized to sum to 1 (0 before any positive)."""
        return self._point_values("f")

    @property
    def anchors(self) -> np.ndarray:
        """The k-means anchors (k x r), computed or read from the cache on first use."""
        self._sync()
        return self._anchors

    def embedding(self) -> tuple[np.ndarray, np.ndarray]:
        """Z as (nearest anchors (n x s) int32, their LAE weights (n x s))."""
        self._sync()
        return self.backend.gather("nearest"), self.backend.gather("weight")

    # -- the algorithm -------------------------------------------------------------
    def _initialize(self) -> None:
        """Anchors (cached), then one pass: every point's Z row, and Z^T Z, Z^T 1."""
        p = self.params
        self._anchors = anchors_for(self.store, p.anchors, seed=p.kmeans_seed, iterations=p.kmeans_iterations,
                                    mapper=self.backend.map, cache_dir=self.cache_dir, progress=self.init_progress)
        if self.init_progress:
            self.init_progress("anchor graph", 0, 1)
        parts = self.backend.map(EMBED, *self._embed_args())
        if self.init_progress:
            self.init_progress("anchor graph", 1, 1)
        T = np.sum([q.gram for q in parts], axis=0)
        self.colsum = np.sum([q.colsum for q in parts], axis=0)
        inv = np.divide(1.0, self.colsum, out=np.zeros_like(self.colsum), where=self.colsum > 0)
        self.laplacian = T - (T * inv) @ T
        self.laplacian = (self.laplacian + self.laplacian.T) / 2
        self._ZlZl, self._Zly = np.zeros((p.anchors, p.anchors)), np.zeros(p.anchors)
        self._ready = True

    def _update(self, idx: np.ndarray, lab: np.ndarray) -> None:
        self._learn(idx, lab)
        self._score(idx, lab)

    def _embed_args(self) -> tuple[Any, ...]:
        anchors = self._anchors
        unit = anchors / np.maximum(np.linalg.norm(anchors, axis=1, keepdims=True), 1e-300)
        return (anchors, unit, self.params.neighbors, self.params.lae_iterations, *self.history_arrays())

    def _learn(self, idx: np.ndarray, lab: np.ndarray) -> None:
        """Add the new labels' rows of Z to Z_l^T Z_l and Z_l^T y, then solve for a."""
        for nearest, weight, y in self._rows_of(idx, lab):
            self._ZlZl[np.ix_(nearest, nearest)] += np.outer(weight, weight)
            self._Zly[nearest] += weight * y
        if not self._Zly.any():            # no positive yet: a = 0
            self.coef = np.zeros_like(self._Zly)
            return
        k = len(self._Zly)
        a = np.linalg.solve(self._ZlZl + self.params.gamma * self.laplacian + RIDGE * np.eye(k), self._Zly)
        total = float(self.colsum @ a)     # 1^T Z a, without a pass: Z^T 1 is known
        self.coef = a / total if total != 0 else np.zeros_like(a)

    def _rows_of(self, idx: np.ndarray, lab: np.ndarray) -> list[tuple[np.ndarray, np.ndarray, int]]:
        """(nearest, weights, label) of each given point, from the chunks' state."""
        chunk_ids = sorted({self.store.chunk_of(i) for i in idx})
        found = {}
        for rows, nearest, weight in self.backend.map_state(rows_in_chunk, chunk_ids, idx):
            found.update({int(i): (n, w) for i, n, w in zip(rows, nearest, weight)})
        return [(*found[int(i)], int(y)) for i, y in zip(idx, lab)]

    def _score(self, idx: np.ndarray, lab: np.ndarray) -> None:
        chunk_ids = list(range(self.store.n_chunks))
        parts = self.backend.map_state(score_step, chunk_ids, self.coef, idx, lab)
        self._summary = PassSummary.from_partials(parts)

    def rebuild_recipe(self) -> StepCall:
        """The step and arguments that rebuild a chunk's state (Z rows, labels, f) from
        X, the anchors and the current coefficients: for backends that lose a chunk."""
        return StepCall(REBUILD, (*self._embed_args(), self.coef))


# -- chunk steps (module level, so dask workers can run them) ---------------------------
class AnchorGram(NamedTuple):
    gram: np.ndarray          # the chunk's Z^T Z (k x k)
    colsum: np.ndarray        # its Z^T 1 (k)


def embed_step(x, state, anchors, anchors_unit, s, lae_iterations, label_idx, label_val):
    """Labels, then each row's s nearest anchors and LAE weights; returns the chunk's
    Z^T Z and Z^T 1."""
    state.apply_labels(label_idx, label_val)
    center_sq = (anchors * anchors).sum(axis=1)
    for a in range(0, n_rows(x), BLOCK_ROWS):
        xb = decode(x, a, a + BLOCK_ROWS)
        nearest = state.nearest[a:a + len(xb)]
        nearest_anchors(squared_distances(xb, anchors, center_sq), s, nearest)
        embed_rows(xb, nearest, anchors_unit, lae_iterations, state.weight[a:a + len(xb)])
    return AnchorGram(*anchor_gram(state.nearest, state.weight, len(anchors)))


def score_step(state, coef, label_idx, label_val):
    """New labels, then f = Z coef for the chunk; the selection's partials (reads no X)."""
    state.apply_labels(label_idx, label_val)
    return ChunkPartials(*anchor_scores(state.nearest, state.weight, coef, state.start, state.label, state.f))


def rebuild_step(x, state, anchors, anchors_unit, s, lae_iterations, label_idx, label_val, coef):
    embed_step(x, state, anchors, anchors_unit, s, lae_iterations, label_idx, label_val)
    return score_step(state, coef, label_idx[:0], label_val[:0])


class EmbeddedRows(NamedTuple):
    indices: np.ndarray       # global indices
    nearest: np.ndarray       # their s nearest anchors
    weight: np.ndarray        # their LAE weights


def rows_in_chunk(state, indices):
    """The chunk's rows of Z for those of ``indices`` it holds."""
    inside = indices[(indices >= state.start) & (indices < state.stop)]
    local = inside - state.start
    return EmbeddedRows(inside, state.nearest[local].copy(), state.weight[local].copy())


# Embedding computes a chunk's whole state from X (rerun after a loss); the rebuild
# recipe's step recomputes everything too.
EMBED = ChunkStep(embed_step, from_scratch=True)
REBUILD = ChunkStep(rebuild_step, from_scratch=True)
