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

Cost: k-means once (cached beside the store, engine/anchors.py); one pass over X to
embed every point (O(n k r) for the distances); then per label an O(k^3) solve and a
pass over the per-point state (O(n s), no read of X). Z lives in the backend's per-chunk
state like LAS's per-point arrays.
"""

import numpy as np

from ..backends import make_backend
from ..errors import ParameterError
from ..kernels.agr import anchor_gram, anchor_scores, embed_rows, nearest_anchors
from ..storage.encoding import decode, n_rows
from .anchors import BLOCK_ROWS, anchors_for, squared_distances
from .base import ActiveSearch
from .select import PassSummary, select
from .steps import best_in_chunk

RIDGE = 1e-6


class AGR(ActiveSearch):
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

    def __init__(self, store, *, anchors=500, neighbors=3, gamma=0.01, lae_iterations=10,
                 kmeans_iterations=20, kmeans_seed=0, cache_dir=None, backend="local",
                 n_threads=None, store_options=None):
        super().__init__(store, store_options)
        if not 1 <= anchors <= self.n:
            raise ParameterError(f"AGR needs 1 <= anchors <= n = {self.n}, got {anchors}")
        if not 1 <= neighbors <= anchors:
            raise ParameterError(f"AGR needs 1 <= neighbors <= anchors, got {neighbors} and {anchors}")
        if not gamma >= 0:
            raise ParameterError(f"AGR's gamma must be >= 0, got {gamma}")
        self.params = {"anchors": int(anchors), "neighbors": int(neighbors), "gamma": float(gamma),
                       "lae_iterations": int(lae_iterations), "kmeans_iterations": int(kmeans_iterations),
                       "kmeans_seed": int(kmeans_seed)}
        self.cache_dir = cache_dir
        self.backend = make_backend(self.store, backend, n_threads)
        self.backend.set_rebuild(self.rebuild_recipe)
        self._ready = False
        self._summary = None
        self.coef = np.zeros(anchors)      # a / (1^T Z a): f = Z coef

    # -- scores --------------------------------------------------------------------
    @property
    def f(self):
        """Positive-class confidence per point, normalized to sum to 1 (0 before any positive)."""
        self._sync()
        return self.backend.gather("f")

    @property
    def anchors(self):
        """The k-means anchors (k x r), computed or read from the cache on first use."""
        self._sync()
        return self._anchors

    def embedding(self):
        """Z as (nearest anchors (n x s) int32, their LAE weights (n x s))."""
        self._sync()
        return self.backend.gather("nearest"), self.backend.gather("weight")

    # -- the algorithm -------------------------------------------------------------
    def _sync(self):
        if not self._ready:
            self._initialize()
        if self._pending or self._summary is None:
            idx, lab = self._take_pending()
            self._learn(idx, lab)
            self._score(idx, lab)

    def _initialize(self):
        """Anchors (cached), then one pass: every point's Z row, and Z^T Z, Z^T 1."""
        p, s = self.params, self.params["neighbors"]
        self._anchors = anchors_for(self.store, p["anchors"], seed=p["kmeans_seed"],
                                   iterations=p["kmeans_iterations"], mapper=self.backend.map,
                                   cache_dir=self.cache_dir)
        self._alloc(s)
        parts = self.backend.map(embed_step, *self._embed_args())
        T = np.sum([q[0] for q in parts], axis=0)
        self.colsum = np.sum([q[1] for q in parts], axis=0)
        inv = np.divide(1.0, self.colsum, out=np.zeros_like(self.colsum), where=self.colsum > 0)
        self.laplacian = T - (T * inv) @ T
        self.laplacian = (self.laplacian + self.laplacian.T) / 2
        k = p["anchors"]
        self._ZlZl, self._Zly = np.zeros((k, k)), np.zeros(k)
        self._ready = True

    def _alloc(self, s):
        for name, dtype, fill in (("label", np.int8, -1), ("f", np.float64, 0.0),
                                  ("nearest", np.dtype((np.int32, (s,))), 0),
                                  ("weight", np.dtype((np.float64, (s,))), 0.0)):
            self.backend.alloc(name, dtype, fill)

    def _embed_args(self):
        anchors = self._anchors
        unit = anchors / np.maximum(np.linalg.norm(anchors, axis=1, keepdims=True), 1e-300)
        idx = np.array([i for i, _ in self.history], np.int64)
        lab = np.array([y for _, y in self.history], np.int8)
        return anchors, unit, self.params["neighbors"], self.params["lae_iterations"], idx, lab

    def _learn(self, idx, lab):
        """Add the new labels' rows of Z to Z_l^T Z_l and Z_l^T y, then solve for a."""
        for nearest, weight, y in self._rows_of(idx, lab):
            self._ZlZl[np.ix_(nearest, nearest)] += np.outer(weight, weight)
            self._Zly[nearest] += weight * y
        if not self._Zly.any():            # no positive yet: a = 0
            self.coef = np.zeros_like(self._Zly)
            return
        k = len(self._Zly)
        a = np.linalg.solve(self._ZlZl + self.params["gamma"] * self.laplacian + RIDGE * np.eye(k), self._Zly)
        total = float(self.colsum @ a)     # 1^T Z a, without a pass: Z^T 1 is known
        self.coef = a / total if total != 0 else np.zeros_like(a)

    def _rows_of(self, idx, lab):
        """(nearest, weights, label) of each given point, from the chunks' state."""
        chunk_ids = sorted({self.store.chunk_of(i) for i in idx})
        found = {}
        for rows, nearest, weight in self.backend.map_state(rows_in_chunk, chunk_ids, idx):
            found.update({int(i): (n, w) for i, n, w in zip(rows, nearest, weight)})
        return [(*found[int(i)], int(y)) for i, y in zip(idx, lab)]

    def _score(self, idx, lab):
        chunk_ids = list(range(self.store.n_chunks))
        parts = self.backend.map_state(score_step, chunk_ids, self.coef, idx, lab)
        self._summary = PassSummary.from_partials(parts)

    def _top(self, k):
        return select(self._summary, 0.0, lambda ids, t, k: self.backend.map_state(best_in_chunk, ids, t, k), k)

    def rebuild_recipe(self):
        """(step, args) that rebuild a chunk's state (Z rows, labels, f) from X, the
        anchors and the current coefficients: for backends that lose a chunk."""
        return rebuild_step, (*self._embed_args(), self.coef)

    def close(self):
        self.backend.close()


# -- chunk steps (module level, so dask workers can run them) ---------------------------
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
    return anchor_gram(state.nearest, state.weight, len(anchors))


embed_step.from_scratch = True


def score_step(state, coef, label_idx, label_val):
    """New labels, then f = Z coef for the chunk; the selection's partials."""
    state.apply_labels(label_idx, label_val)
    return anchor_scores(state.nearest, state.weight, coef, state.start, state.label, state.f)


def rebuild_step(x, state, anchors, anchors_unit, s, lae_iterations, label_idx, label_val, coef):
    embed_step(x, state, anchors, anchors_unit, s, lae_iterations, label_idx, label_val)
    return score_step(state, coef, label_idx[:0], label_val[:0])


def rows_in_chunk(state, indices):
    """The chunk's rows of Z for those of ``indices`` it holds: (indices, nearest, weights)."""
    inside = indices[(indices >= state.start) & (indices < state.stop)]
    local = inside - state.start
    return inside, state.nearest[local].copy(), state.weight[local].copy()
