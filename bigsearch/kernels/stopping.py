"""The stopping rule's profile likelihood over its grid of change points and decays
(engine/guidance/stopping.py).

For each (change point, decay) of the grid: the window's likelihood at the best rate; for
those the deviance bound admits, the ends of the rates it admits (two roots of
e^s - 1 - s = t by Newton's method, as a scalar loop: the NumPy form's bisection took 1 ms
a query, a batch of 500 labels' records 0.6 s) and the hits those rates expect among the
records not read.
"""

import math

import numba
import numpy as np

from .compile_lock import lock_compiles

NEWTON_STEPS = 8  # from the starts below: within 1e-14 of the roots for every t


@numba.njit(nogil=True, cache=True)
def _future(b, M):
    """sum_{k=1}^{M} e^{-b k}: the weight of the M records not read."""
    return float(M) if b < 1e-12 else math.exp(-b) * -math.expm1(-b * M) / -math.expm1(-b)


@numba.njit(nogil=True, cache=True)
def _root(t, upper):
    """The root of e^s - 1 - s = t (t >= 0) above 0 (``upper``) or below. The function is
    convex, so Newton from outside the root approaches it monotonically; the start is the
    series +-sqrt(2 t) + 2t/3 near 0, the bracket's outer end beyond."""
    if t <= 0.0:
        return 0.0
    r = math.sqrt(2.0 * t)
    if t < 1.0:
        s = r + t * 2.0 / 3.0 + 1e-300 if upper else -r + t * 2.0 / 3.0 - 1e-300
    else:
        s = 1.0 + 2.0 * math.log1p(t) + r if upper else -(1.0 + t)
    for _ in range(NEWTON_STEPS):
        slope = math.expm1(s)
        if slope == 0.0:
            break
        s -= (slope - s - t) / slope
    return s


@numba.njit(nogil=True, cache=True)
def _clipped_sums(hits, knots):
    """sum_h min(u_h, uc) for each change point uc of ``knots`` (ascending), from the hits'
    distances ``hits`` (ascending): one merge pass."""
    out = np.empty(len(knots))
    below, j = 0.0, 0
    for i in range(len(knots)):
        uc = knots[i]
        while j < len(hits) and hits[j] < uc:
            below += hits[j]
            j += 1
        out[i] = below + uc * (len(hits) - j)
    return out


@numba.njit(nogil=True, cache=True)
def remaining_hits(hits, W, M, cut, decays, b_max, knots):
    """(low, fitted, high) expected hits among the next M records, from the hits of a window
    of W records (``hits``: their distances from the last record read, ascending), over the
    rates lam e^{b min(u, uc)}: a decay over the last uc records, a plateau before them;
    b in ``decays * b_max``, the change point uc in ``knots`` (ascending, at most W; uc = W
    is one decay over the whole window), lam profiled. ``cut``: half the chi-square quantile
    of the interval's level; the interval spans every (uc, b, lam) whose log-likelihood is
    within ``cut`` of the best.

    The window's weight at (uc, b) is sum_u e^{b min(u, uc)} = (e^{b uc} - 1) / (e^b - 1)
    + (W - uc) e^{b uc}, the log-likelihood at the best rate H / weight is
    b sum_h min(u_h, uc) - H log(weight / H) - H."""
    H = len(hits)
    nk, nd = len(knots), len(decays)
    clipped = _clipped_sums(hits, knots)
    future = np.empty(nd)
    for j in range(nd):
        future[j] = _future(decays[j] * b_max, M)
    weight = np.empty((nk, nd))
    loglik = np.empty((nk, nd))
    best, bi, bj = -np.inf, 0, 0
    for j in range(nd):
        b = decays[j] * b_max
        step = math.expm1(b)
        for i in range(nk):
            uc = knots[i]
            rise = math.expm1(b * uc)
            head = float(uc) if b * uc < 1e-8 else rise / step  # sum_{u<uc} e^{b u}
            weight[i, j] = head + (W - uc) * (rise + 1.0)
            loglik[i, j] = b * clipped[i] - (H * math.log(max(weight[i, j], 1e-300) / H) + H if H > 0 else 0.0)
            if loglik[i, j] > best:
                best, bi, bj = loglik[i, j], i, j
    floor = best - cut
    fitted = H / weight[bi, bj] * future[bj]
    high, low = fitted, np.inf
    for i in range(nk):
        for j in range(nd):
            if loglik[i, j] < floor:
                continue  # not admitted
            if H == 0:
                # lam E <= loglik - floor: rates from 0 up to that
                high = max(high, (loglik[i, j] - floor) / weight[i, j] * future[j])
                low = 0.0
                continue
            rate = H / weight[i, j]
            t = (loglik[i, j] - floor) / H  # the slack at the best rate, per hit
            # the roots s of e^s - 1 - s = t (rates rate e^s): the upper one is at most
            # sqrt(2t), the lower one above -(1 + t); the Newton steps only where they can
            # move an end
            if rate * math.exp(math.sqrt(2.0 * t)) * future[j] > high:
                high = max(high, rate * math.exp(_root(t, True)) * future[j])
            if rate * math.exp(-1.0 - t) * future[j] < low:
                low = min(low, rate * math.exp(_root(t, False)) * future[j])
    return min(low, fitted), fitted, high


lock_compiles(globals())
