"""The hyperparameters of Bayesian linear regression from the labels: type-II maximum
likelihood (the evidence), so that nobody has to tune them.

Model: y = m + X w + noise, w ~ N(0, I / lam), noise ~ N(0, s2), with m the labels' mean.
The centred labels y_c = y - m then have the marginal distribution N(0, C) with

    C = X_L X_L^T / lam + s2 I = s2 (rho K + I),      K = X_L X_L^T,  rho = 1 / (lam s2).

With K = U diag(k) U^T and z = U^T y_c the log evidence is

    -1/2 sum_j [ z_j^2 / (s2 (rho k_j + 1)) + log(s2 (rho k_j + 1)) ] - n/2 log(2 pi),

and for a given rho the best s2 is sum_j z_j^2 / (rho k_j + 1) / n: one 1-D search over
log rho (a grid, then golden-section refinement). The eigenvalues come from the smaller
of the two Grams, X_L X_L^T (n_L x n_L) or X_L^T X_L (r x r), O(min(n_L, r)^3); with the
r x r one, the part of y_c outside the span of X_L's columns counts as eigenvalue 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

GRID = 81  # points of the first search, log-spaced over RANGE decades each side
RANGE = 8.0
GOLDEN_STEPS = 40
MIN_LABELS = 3  # fewer labels than this: the evidence says nothing yet


@dataclass(frozen=True)
class Spectrum:
    """What the evidence needs of the labels: the Gram's eigenvalues k, the squared
    projections z2 of the centred labels, and how many labels each stands for (1, or the
    dimension of the null space for the single k = 0 entry)."""

    k: np.ndarray
    z2: np.ndarray
    count: np.ndarray

    @property
    def n(self) -> float:
        return float(self.count.sum())


def spectrum(XL: np.ndarray, y: np.ndarray) -> Spectrum:
    """The spectrum of the labeled rows ``XL`` (n_L x r, float64) and their labels ``y``."""
    yc = y - y.mean()
    n, r = XL.shape
    if n <= r:
        k, U = np.linalg.eigh(XL @ XL.T)
        return Spectrum(np.maximum(k, 0.0), (U.T @ yc) ** 2, np.ones(n))
    e, Q = np.linalg.eigh(XL.T @ XL)
    keep = e > e.max() * 1e-12 if e.max() > 0 else np.zeros(r, bool)
    z2 = (Q[:, keep].T @ (XL.T @ yc)) ** 2 / e[keep]
    rest = max(float(yc @ yc) - float(z2.sum()), 0.0)
    return Spectrum(np.append(e[keep], 0.0), np.append(z2, rest), np.append(np.ones(keep.sum()), n - keep.sum()))


def log_evidence(sp: Spectrum, lam: float, noise: float) -> float:
    """The log evidence of the labels at (lam, noise), constants included."""
    c = sp.k / lam + noise
    return float(-0.5 * np.sum(sp.z2 / c + sp.count * np.log(c)) - 0.5 * sp.n * math.log(2 * math.pi))


def fit(
    XL: np.ndarray, y: np.ndarray, lam: float | None = None, noise: float | None = None
) -> tuple[float, float] | None:
    """(lam, noise) maximizing the evidence; a value given is kept fixed. None when the
    labels cannot tell (fewer than MIN_LABELS, or all equal)."""
    y = np.asarray(y, np.float64)
    if len(y) < MIN_LABELS or np.ptp(y) == 0 or (lam is not None and noise is not None):
        return None
    sp = spectrum(np.asarray(XL, np.float64), y)
    scale = float(sp.k[sp.count == 1].mean()) if np.any(sp.count == 1) and sp.k.max() > 0 else 1.0
    var = float(np.sum(sp.z2) / sp.n) or 1.0
    if lam is None and noise is None:

        def best(log_rho):  # profile: the best noise for this rho
            rho = math.exp(log_rho)
            s2 = max(float(np.sum(sp.z2 / (rho * sp.k + 1.0)) / sp.n), var * 1e-12)
            return s2, 1.0 / (rho * s2)

        log_rho = _maximize(lambda t: log_evidence(sp, *reversed(best(t))), -math.log(scale))
        s2, lam_ = best(log_rho)
        return lam_, s2
    if noise is not None:
        t = _maximize(lambda t: log_evidence(sp, math.exp(t), noise), math.log(scale / var))
        return math.exp(t), noise
    t = _maximize(lambda t: log_evidence(sp, lam, math.exp(t)), math.log(var))
    return lam, math.exp(t)


def _maximize(fn, centre: float) -> float:
    """The argmax of ``fn`` over [centre - RANGE ln 10, centre + RANGE ln 10]: a log grid,
    then golden sections between the best grid point's neighbours."""
    span = RANGE * math.log(10.0)
    grid = np.linspace(centre - span, centre + span, GRID)
    values = [fn(t) for t in grid]
    i = int(np.nanargmax(values))
    a, b = grid[max(i - 1, 0)], grid[min(i + 1, GRID - 1)]
    g = (math.sqrt(5.0) - 1.0) / 2.0
    c, d = b - g * (b - a), a + g * (b - a)
    fc, fd = fn(c), fn(d)
    for _ in range(GOLDEN_STEPS):
        if fc >= fd:
            b, d, fd = d, c, fc
            c = b - g * (b - a)
            fc = fn(c)
        else:
            a, c, fc = c, d, fd
            d = a + g * (b - a)
            fd = fn(d)
    return (a + b) / 2.0
