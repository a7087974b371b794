"""Choosing the next query from the chunks' partials.

The selection score is f + t * IM with t = alpha * s, where s rescales IM to the mean
of f over the unlabeled points (the paper's rescaling). s depends on sums over every
chunk, so no chunk can rank its own points during the pass. Instead each chunk reports
its top K points by three criteria: f, IM, and f + t_prev IM, where t_prev is the weight
of the previous query (t changes little from one query to the next). Any point p left
out of all three lists satisfies f_p <= kf, IM_p <= ki and f_p + t_prev IM_p <= kp (the
lists' K-th values), so its score at t is at most

    (1 - t/t_prev) kf + (t/t_prev) kp      when t <= t_prev (a convex combination),
    kp + (t - t_prev) ki                   when t >= t_prev,

plus a relative margin of 1e-12 for rounding. Only a chunk whose bound reaches the best
candidate's score is rescanned from its per-point state (no read of X). With t close to
t_prev the bound is close to the chunk's K-th best score, so that is rare, and the
choice is exactly the argmax (lowest index among ties).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from ...kernels.common import TOP_K


class ChunkPartials(NamedTuple):
    """What a scoring pass returns for one chunk (the kernels' candidate partials)."""
    sums: np.ndarray          # [sum of f, sum of IM, count] over the chunk's unlabeled points
    candidates: np.ndarray    # (L, K) global indices of each list's top K (-1: none)
    f: np.ndarray             # (L, K) their f
    im: np.ndarray            # (L, K) their IM (empty lists when the method has none)
    kth: np.ndarray           # (L,) each list's K-th value (-inf when not full)


class Ranked(NamedTuple):
    """Points ranked by score, best first."""
    indices: np.ndarray       # int64
    scores: np.ndarray        # float64


@dataclass(frozen=True)
class PassSummary:
    """What one pass tells the driver: sums over unlabeled points and candidates.

    ``partials`` are the chunks' :class:`ChunkPartials`; ``t_prev`` is the weight the
    kernel ranked by.
    """
    sum_f: float
    sum_im: float
    n_unlabeled: int
    partials: Sequence[ChunkPartials]
    t_prev: float = 0.0

    @classmethod
    def from_partials(cls, partials: Sequence[ChunkPartials], t_prev: float = 0.0) -> PassSummary:
        sums = np.sum([p.sums for p in partials], axis=0)
        return cls(float(sums[0]), float(sums[1]), int(sums[2]), partials, t_prev)

    def impact_scale(self) -> float:
        """s such that s * mean(IM) = mean(f) over unlabeled points; 0 when IM's sum is
        not positive and finite (then the selection falls back to f alone)."""
        if not (np.isfinite(self.sum_im) and self.sum_im > 0 and np.isfinite(self.sum_f)):
            return 0.0
        return self.sum_f / self.sum_im

    def selection_weight(self, alpha: float) -> float:
        """t = alpha * s, warning when alpha > 0 but IM cannot be rescaled."""
        if alpha == 0:
            return 0.0
        s = self.impact_scale()
        if s == 0.0:
            warnings.warn(
                f"the impact factor sums to {self.sum_im:.3g} over unlabeled points, so it "
                "cannot be rescaled to the mean of f; this query uses f alone",
                RuntimeWarning, stacklevel=4)
        return alpha * s


def scores(f, im, t):
    """The selection score; one definition, so every comparison rounds the same way."""
    return f if t == 0 else f + t * im


def select(summary: PassSummary, t: float, rescan: Callable[[list[int], float, int], Sequence[Ranked]],
           k: int = 1) -> Ranked:
    """The k unlabeled points with the highest scores, best first, ties broken by the
    lowest index: (indices int64 array, scores float64 array), shorter if fewer exist.

    ``rescan(chunk_ids, t, k)`` returns, for each chunk, its own top k as
    (indices, scores); it is called for the chunks whose candidates cannot settle the
    choice.
    """
    parts = summary.partials
    idx = np.concatenate([p.candidates.ravel() for p in parts])
    keep = idx >= 0
    f = np.concatenate([p.f.ravel() for p in parts])[keep]
    im = np.concatenate([p.im.ravel() for p in parts])[keep]
    idx, first = np.unique(idx[keep], return_index=True)   # a point may be in several lists
    top_idx, top_sc = best_ranked(idx, scores(f[first], im[first], t), k)
    kth = top_sc[-1] if len(top_sc) == k else -np.inf
    bounds = _bounds(np.array([p.kth for p in parts]), t, summary.t_prev)
    counts = np.array([p.sums[2] for p in parts])
    unsettled = np.flatnonzero((counts > TOP_K) & (bounds >= kth))
    if unsettled.size:
        found = rescan(unsettled.tolist(), t, k)
        all_idx = np.concatenate([top_idx, *[i for i, _ in found]])
        all_sc = np.concatenate([top_sc, *[sc for _, sc in found]])
        all_idx, first = np.unique(all_idx, return_index=True)
        top_idx, top_sc = best_ranked(all_idx, all_sc[first], k)
    return Ranked(top_idx, top_sc)


def best_ranked(idx, sc, k):
    """The k highest scores ``sc`` of points ``idx``, best first; equal scores by index."""
    order = np.lexsort((idx, -sc))[:k]
    return Ranked(idx[order].astype(np.int64), sc[order])


def _bounds(kth, t, t_prev):
    """Per chunk, the highest score any point outside its candidate lists can have."""
    kth = np.where(np.isfinite(kth), kth, 0.0)  # lists not full: those chunks are not bounded
    if kth.shape[1] == 1:                      # one list, by f (t must be 0)
        return kth[:, 0]
    kf, ki, kp = kth.T
    if t_prev > 0 and t <= t_prev:
        lam = t / t_prev
        bound = (1.0 - lam) * kf + lam * kp
    else:
        bound = kp + (t - t_prev) * ki
    return bound + 1e-12 * (np.abs(kf) + np.abs(kp) + np.abs(t * ki)) + 1e-300


def select_dense(f: np.ndarray, im: np.ndarray, unlabeled: np.ndarray, alpha: float, k: int = 1) -> Ranked:
    """The same choice as :func:`select`, from whole arrays held in memory."""
    idx = np.flatnonzero(unlabeled)
    if idx.size == 0:
        return Ranked(idx, np.zeros(0))
    summary = PassSummary(float(f[unlabeled].sum()), float(im[unlabeled].sum()), int(unlabeled.sum()), [])
    return best_ranked(idx, scores(f[idx], im[idx], summary.selection_weight(alpha)), k)
