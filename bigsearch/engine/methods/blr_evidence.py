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
over log rho (a grid, then finer grids around its best point). The search maximizes the evidence
times a uniform prior on R2, the share of the labels' variance the weights explain
(``log_prior``; the R2-D2 prior's idea, Zhang, Reich & Bondell 2020): the MAP of type-II
maximum likelihood, the same fit when the labels are many, an interior one when they are
too few to tell signal from noise. The search evaluates whole grids at once (``objective``).
The eigenvalues come from the smaller of the two Grams, X_c X_c^T (n_L x n_L) or X_c^T X_c
(r x r), O(min(n_L, r)^3).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

GRID = 81  # points of the first search, log-spaced over RANGE decades each side
RANGE = 8.0
ZOOM = 33  # points of each finer search, between the best point's neighbours ...
ZOOMS = 7  # ... this many times: 16 ** -7 of the grid's step, 2e-9
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


def objective(sp: Spectrum, lam: np.ndarray | float, noise: np.ndarray | float, r2_prior: bool = True) -> np.ndarray:
    """``log_posterior`` (``log_evidence`` when not ``r2_prior``) at many (lam, noise) at once,
    arrays of one shape: the fit's search evaluates a whole grid in one call."""
    lam, noise = np.broadcast_arrays(np.asarray(lam, np.float64), np.asarray(noise, np.float64))
    c = sp.k / lam[..., None] + noise[..., None]
    out = -0.5 * np.sum(sp.z2 / c + sp.count * np.log(c), axis=-1) - 0.5 * sp.n * math.log(2 * math.pi)
    kbar = float(np.sum(sp.k * sp.count)) / sp.n
    if r2_prior and kbar > 0:
        snr = np.abs(math.log(kbar) - np.log(lam) - np.log(noise))
        out = out - snr - 2.0 * np.log1p(np.exp(-snr))
    return out


def fit(
    XL: np.ndarray,
    y: np.ndarray,
    lam: float | None = None,
    noise: float | None = None,
    r2_prior: bool = True,
    sp: Spectrum | None = None,
) -> tuple[float, float] | None:
    """(lam, noise) maximizing ``log_posterior`` (the evidence under the R2 prior; the
    evidence alone when not ``r2_prior``); a value given is kept fixed. None when the
    labels cannot tell (fewer than MIN_LABELS, or all equal). ``sp``: the labels'
    ``spectrum`` when the caller has it already."""
    y = np.asarray(y, np.float64)
    if len(y) < MIN_LABELS or np.ptp(y) == 0 or (lam is not None and noise is not None):
        return None
    sp = spectrum(np.asarray(XL, np.float64), y) if sp is None else sp
    scale = float(sp.k[:-1].mean()) if len(sp.k) > 1 else 1.0  # the last entry is the null space's 0
    var = float(np.sum(sp.z2) / sp.n) or 1.0
    if lam is None and noise is None:

        def best(log_rho: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            """(lam, noise) with the best noise for each rho, by the evidence (the prior
            depends on rho only)."""
            rho = np.exp(log_rho)
            noises = np.maximum(np.sum(sp.z2 / (rho[:, None] * sp.k + 1.0), axis=1) / sp.n, var * 1e-12)
            return 1.0 / (rho * noises), noises

        def at(log_rho: np.ndarray) -> np.ndarray:
            return objective(sp, *best(log_rho), r2_prior=r2_prior)

        lams, noises = best(np.array([_maximize(at, -math.log(scale))]))
        return float(lams[0]), float(noises[0])
    if noise is not None:
        noise_fixed = noise
        t = _maximize(lambda t: objective(sp, np.exp(t), noise_fixed, r2_prior), math.log(scale / var))
        return math.exp(t), noise_fixed
    assert lam is not None
    lam_fixed = lam
    t = _maximize(lambda t: objective(sp, lam_fixed, np.exp(t), r2_prior), math.log(var))
    return lam_fixed, math.exp(t)


def _maximize(fn, centre: float) -> float:
    """The argmax of ``fn`` (evaluated on an array of points at once) over [centre - RANGE
    ln 10, centre + RANGE ln 10]: a log grid of GRID points, then ZOOMS grids of ZOOM points
    between the best point's neighbours, each 16 times finer than the last (to 4e-9 of the
    first grid's step: as fine as the 40 golden sections it replaced, in 8 NumPy calls
    instead of 120 Python ones, which cost a refit 3-5 ms at 40 labels)."""
    span = RANGE * math.log(10.0)
    grid = np.linspace(centre - span, centre + span, GRID)
    for zoom in range(ZOOMS + 1):
        i = int(np.nanargmax(fn(grid)))
        if zoom == ZOOMS:
            return float(grid[i])
        grid = np.linspace(grid[max(i - 1, 0)], grid[min(i + 1, len(grid) - 1)], ZOOM)
    raise AssertionError("unreachable")
