"""The stopping rule's profile likelihood over its grid of decays (engine/guidance/stopping.py).

For each decay b of the grid: the window's likelihood at the best rate, the ends of the
rates the deviance bound admits (two roots of e^s - 1 - s = t by Newton's method, as a
scalar loop: the NumPy form's bisection took 1 ms a query, a batch of 500 labels' records
0.6 s), and the hits those rates expect among the records not read.
"""

import math

import numba
import numpy as np

NEWTON_STEPS = 8  # from the starts below: within 1e-14 of the roots for every t


@numba.njit(nogil=True, cache=True)
def _geometric_sum(b, W):
    """sum_{u=0}^{W-1} e^{b u}, also at b = 0."""
    return float(W) if b * W < 1e-8 else math.expm1(b * W) / math.expm1(b)


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
def remaining_hits(H, S, W, M, cut, decays, b_max):
    """(low, fitted, high) expected hits among the next M records, from H hits at summed
    distance S from the last record in a window of W, over the decays ``decays * b_max``;
    ``cut``: half the chi-square quantile of the interval's level."""
    n = len(decays)
    loglik = np.empty(n)
    E = np.empty(n)
    for i in range(n):
        b = decays[i] * b_max
        E[i] = _geometric_sum(b, W)
        loglik[i] = b * S - (H * math.log(max(E[i], 1e-300) / H) + H if H > 0 else 0.0)
    best = int(np.argmax(loglik))
    floor = loglik[best] - cut
    fitted = H / E[best] * _future(decays[best] * b_max, M)
    high, low, any_ok = 0.0, np.inf, False
    for i in range(n):
        b = decays[i] * b_max
        c = b * S - floor  # H log(lam) - lam E >= -c: the rates admitted at this decay
        if H == 0:
            hi, lo = (c / E[i] if c >= 0 else 0.0), 0.0
        else:
            rate = H / E[i]
            t = (H * math.log(rate) - H + c) / H  # the slack at the best rate, per hit
            if t < 0:
                continue
            hi, lo = rate * math.exp(_root(t, True)), rate * math.exp(_root(t, False))
        if hi <= 0:
            continue
        future = _future(b, M)
        any_ok = True
        high = max(high, hi * future)
        low = min(low, lo * future)
    if not any_ok:
        return 0.0, fitted, max(0.0, fitted)
    return low, fitted, max(high, fitted)
