"""Pruning kernels: the bound of blocks of rows at a new u, straight from their summaries
(engine/pruning/las.py).

A block (centroid c, box [lo, hi] in the orthonormal basis P, residual radius R_perp,
radius R, largest row norm, smallest and largest degree) was last read at the u of its
version v; the version's change w_v (u_t - alpha u_v less its shift along s, a_v s;
alpha = 1, and for linear scores also a scale of u_v, engine/pruning/las.py: a bound per
alpha, the smallest holds) is prepared once per version and alpha (``W``, ``PW = P^T w``,
``||w - P P^T w||``, ``||w||``, ``alpha ||u_v|| + ||u_t||``), so a block costs one dot
product of length r and one of length p per alpha: no temporaries of blocks x r. The
formula, term by term and in the same order, is ``Pruner.reference_bounds``'s (the tests
hold them equal to rounding, which the SAFETY margin covers many times over). A group of
consecutive blocks has summaries of the same form (engine/pruning/block_summaries.py:
group_summaries), so the same kernel bounds groups.
"""

import numba
import numpy as np

from .common import FAST
from .compile_lock import lock_compiles


@numba.njit(nogil=True, cache=True, fastmath=FAST)
def bound_at(top, v, i, terms, centre, lo, hi, radii):
    """The bound of the rows of block (or group) i whose cached maximum ``top`` was taken
    at version v: -inf when there is none (top -inf), +inf when never read (top +inf);
    the smallest of the version's ``ways`` bounds (rows v * ways ... of the terms)."""
    if top == -np.inf or top == np.inf:
        return top
    ways = terms[-1]
    out = np.inf
    for k in range(v * ways, (v + 1) * ways):
        out = min(out, bound_way(top, k, i, terms, centre, lo, hi, radii))
    return out


@numba.njit(nogil=True, cache=True, fastmath=FAST)
def bound_way(top, k, i, terms, centre, lo, hi, radii):
    """One bound of block i's rows from row k of the terms (see the module)."""
    a, alpha, w_perp, w_norm, u_norms, c_mags, W, PW, b, safety, _ = terms
    radius_perp, radius, norm_max, deg_min, deg_max = radii
    cw = 0.0
    for j in range(centre.shape[1]):
        cw += centre[i, j] * W[k, j]
    box = 0.0
    for j in range(lo.shape[1]):
        box += max(lo[i, j] * PW[k, j], hi[i, j] * PW[k, j])
    spread = min(box + radius_perp[i] * w_perp[k], radius[i] * w_norm[k])
    ub = cw + spread
    drift = ub / deg_min[i] if ub >= 0.0 else ub / deg_max[i]
    scale = (
        alpha[k] * abs(top)
        + b * (abs(a[k]) + c_mags[k])
        + b * (abs(cw) + spread + norm_max[i] * u_norms[k]) / deg_min[i]
    )
    return alpha[k] * top + b * (a[k] + drift) + safety * scale


@numba.njit(nogil=True, cache=True)
def block_bounds(items, best, slot, terms, centre, lo, hi, radii, out):
    """out[t] = the bound of block items[t] (``bound_at``, at its version).

    ``terms``: per version (``ways`` rows each) a, alpha, ||w_perp||, ||w||, u_norms,
    c_mags, W, P^T w, then b, the rounding margin and ``ways`` (``Pruner.version_terms``);
    ``radii``: (radius_perp, radius, norm_max, deg_min, deg_max), one value per block each."""
    for t in range(len(items)):
        i = items[t]
        out[t] = bound_at(best[i], slot[i], i, terms, centre, lo, hi, radii)
    return out


@numba.njit(nogil=True, cache=True)
def group_bounds(first, best, slot, terms, centre, lo, hi, radii, out):
    """out[g] = the bound of group g, whose blocks are first[g] to first[g + 1] and whose
    summaries are ``centre`` ... ``radii`` (rows of groups): for each version its blocks
    are at, the group's bound with the largest cached maximum among those blocks; the
    largest of these. (A group read at one version costs one bound, as a block does.)"""
    ng, nb = len(first), len(best)
    size = 1
    for g in range(ng):
        size = max(size, (first[g + 1] if g + 1 < ng else nb) - first[g])
    versions, tops = np.empty(size, np.int64), np.empty(size)
    for g in range(ng):
        n = 0
        for i in range(first[g], first[g + 1] if g + 1 < ng else nb):
            k = 0
            while k < n and versions[k] != slot[i]:
                k += 1
            if k == n:
                versions[k], tops[k], n = slot[i], best[i], n + 1
            else:
                tops[k] = max(tops[k], best[i])
        top = -np.inf
        for k in range(n):
            top = max(top, bound_at(tops[k], versions[k], g, terms, centre, lo, hi, radii))
        out[g] = top
    return out


@numba.njit(nogil=True, cache=True)
def unlabeled_maxima(f, label, start, stop, out):
    """out[b] = the largest f of the unlabeled rows start[b]:stop[b] (-inf when none):
    without the temporaries of n floats that NumPy's masked maximum needs."""
    for b in range(len(start)):
        top = -np.inf
        for i in range(start[b], stop[b]):
            if label[i] < 0 and f[i] > top:
                top = f[i]
        out[b] = top
    return out


lock_compiles(globals())
