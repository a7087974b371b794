"""The hyperparameters of Bayesian linear regression from the labels: type-II maximum
likelihood (the evidence), so that nobody has to tune them.

Model: y = b + X w + noise, w ~ N(0, I / lam), a flat prior on the intercept b, noise ~
N(0, s2). The evidence of the labels is then that of the centred labels y_c = y - ybar in
the n - 1 directions orthogonal to the constant (the intercept takes the last):

    y_c ~ N(0, C),    C = X_c X_c^T / lam + s2 I = s2 (rho K + I),   K = X_c X_c^T,  rho = 1 / (lam s2),

with X_c the labeled rows minus their mean. With the nonzero eigenvalues k_j of K, z_j the
projections of y_c on their eigenvectors, and the rest of y_c (eigenvalue 0),

    log evidence = -1/2 sum_j [ z_j^2 / (s2 (rho k_j + 1)) + log(s2 (rho k_j + 1)) ] - (n - 1)/2 log(2 pi),

and for a given rho the best s2 is sum_j z_j^2 / (rho k_j + 1) / (n - 1): one 1-D search
over log rho (a grid, then golden-section refinement). The search maximizes the evidence
times a uniform prior on R2, the share of the labels' variance the weights explain
(``log_prior``; the R2-D2 prior's idea, Zhang, Reich & Bondell 2020): the MAP of type-II
maximum likelihood, the same fit when the labels are many, an interior one when they are
too few to tell signal from noise. The eigenvalues come from the
smaller of the two Grams, X_c X_c^T (n_L x n_L) or X_c^T X_c (r x r), O(min(n_L, r)^3).
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
    """The spectrum of the labeled rows ``XL`` (n_L x r, float64) and their labels ``y``,
    both centred (the intercept's direction left out)."""
    yc = y - y.mean()
    Xc = XL - XL.mean(axis=0)
    n, r = Xc.shape
    if n <= r:
        k, U = np.linalg.eigh(Xc @ Xc.T)
        keep = k > k.max() * 1e-12 if k.max() > 0 else np.zeros(n, bool)
        z2 = (U[:, keep].T @ yc) ** 2
    else:
        k, Q = np.linalg.eigh(Xc.T @ Xc)
        keep = k > k.max() * 1e-12 if k.max() > 0 else np.zeros(r, bool)
        z2 = (Q[:, keep].T @ (Xc.T @ yc)) ** 2 / k[keep]
    rest = max(float(yc @ yc) - float(z2.sum()), 0.0)
    null = n - 1 - int(keep.sum())  # the constant direction is the intercept's
    return Spectrum(np.append(k[keep], 0.0), np.append(z2, rest), np.append(np.ones(keep.sum()), max(null, 0)))


def log_evidence(sp: Spectrum, lam: float, noise: float) -> float:
    """The log evidence of the labels at (lam, noise), constants included."""
    c = sp.k / lam + noise
    return float(-0.5 * np.sum(sp.z2 / c + sp.count * np.log(c)) - 0.5 * sp.n * math.log(2 * math.pi))


def log_prior(sp: Spectrum, lam: float, noise: float) -> float:
    """log R2 + log (1 - R2): a uniform prior on R2 = (kbar / lam) / (kbar / lam + s2), the
    share of a label's variance the weights' prior explains (kbar = tr K / (n - 1), the mean
    prior variance of x_c . w times lam), in the coordinates log lam and log s2 searched
    over (its density there is R2 (1 - R2)). It weighs nothing against many labels, and
    keeps the fit off the edges when the evidence alone is flat towards one: with one
    positive among a hundred 0/1 labels "all noise" (lam -> infinity) explains them as
    well as any weights, and a batch then ranks by the raw similarity to that positive."""
    kbar = float(np.sum(sp.k * sp.count)) / sp.n
    if kbar <= 0:
        return 0.0
    log_snr = math.log(kbar) - math.log(lam) - math.log(noise)  # log (R2 / (1 - R2))
    return -abs(log_snr) - 2.0 * math.log1p(math.exp(-abs(log_snr)))  # log R2 (1 - R2), stable


def log_posterior(sp: Spectrum, lam: float, noise: float) -> float:
    """What the fit maximizes: the log evidence plus ``log_prior``."""
    return log_evidence(sp, lam, noise) + log_prior(sp, lam, noise)


def fit(
    XL: np.ndarray, y: np.ndarray, lam: float | None = None, noise: float | None = None, r2_prior: bool = True
) -> tuple[float, float] | None:
    """(lam, noise) maximizing ``log_posterior`` (the evidence under the R2 prior; the
    evidence alone when not ``r2_prior``); a value given is kept fixed. None when the
    labels cannot tell (fewer than MIN_LABELS, or all equal)."""
    y = np.asarray(y, np.float64)
    if len(y) < MIN_LABELS or np.ptp(y) == 0 or (lam is not None and noise is not None):
        return None
    sp = spectrum(np.asarray(XL, np.float64), y)
    scale = float(sp.k[:-1].mean()) if len(sp.k) > 1 else 1.0  # the last entry is the null space's 0
    var = float(np.sum(sp.z2) / sp.n) or 1.0
    objective = log_posterior if r2_prior else log_evidence
    if lam is None and noise is None:

        def best(log_rho):  # the best noise for this rho, by the evidence (the prior depends on rho only)
            rho = math.exp(log_rho)
            s2 = max(float(np.sum(sp.z2 / (rho * sp.k + 1.0)) / sp.n), var * 1e-12)
            return s2, 1.0 / (rho * s2)

        log_rho = _maximize(lambda t: objective(sp, *reversed(best(t))), -math.log(scale))
        s2, lam_ = best(log_rho)
        return lam_, s2
    if noise is not None:
        s2 = noise
        t = _maximize(lambda t: objective(sp, math.exp(t), s2), math.log(scale / var))
        return math.exp(t), s2
    assert lam is not None
    lam_fixed = lam
    t = _maximize(lambda t: objective(sp, lam_fixed, math.exp(t)), math.log(var))
    return lam_fixed, math.exp(t)


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
