"""Pruning kernels: the bound of blocks of rows at a new u, straight from their summaries
(engine/pruning/las.py).

A block (centroid c, box [lo, hi] in the orthonormal basis P, residual radius R_perp,
radius R, largest row norm, smallest and largest degree) was last read at the u of its
version v; the version's change w_v (u_t - u_v less its shift along s, a_v s) is
prepared once per version (``W``, ``PW = P^T w``, ``||w - P P^T w||``, ``||w||``,
``||u_v|| + ||u_t||``), so a block costs one dot product of length r and one of length
p: no temporaries of blocks x r. The formula, term by term and in the same order, is
``Pruner.reference_bounds``'s (the tests hold them equal to rounding, which the SAFETY
margin covers many times over). A group of consecutive blocks has summaries of the same
form (engine/pruning/las.py:group_summaries), so the same kernel bounds groups.
"""

import numba
import numpy as np

from .common import FAST


@numba.njit(nogil=True, cache=True, fastmath=FAST)
def bound_at(top, v, i, terms, centre, lo, hi, radii):
    """The bound of the rows of block (or group) i whose cached maximum ``top`` was taken
    at version v: -inf when there is none (top -inf), +inf when never read (top +inf)."""
    if top == -np.inf:
        return -np.inf
    a, w_perp, w_norm, u_norms, c_mags, W, PW, b, safety = terms
    radius_perp, radius, norm_max, deg_min, deg_max = radii
    cw = 0.0
    for j in range(centre.shape[1]):
        cw += centre[i, j] * W[v, j]
    box = 0.0
    for j in range(lo.shape[1]):
        box += max(lo[i, j] * PW[v, j], hi[i, j] * PW[v, j])
    spread = min(box + radius_perp[i] * w_perp[v], radius[i] * w_norm[v])
    ub = cw + spread
    drift = ub / deg_min[i] if ub >= 0.0 else ub / deg_max[i]
    scale = abs(top) + b * (abs(a[v]) + c_mags[v]) + b * (abs(cw) + spread + norm_max[i] * u_norms[v]) / deg_min[i]
    return top + b * (a[v] + drift) + safety * scale


@numba.njit(nogil=True, cache=True)
def block_bounds(items, best, slot, terms, centre, lo, hi, radii, out):
    """out[t] = the bound of block items[t] (``bound_at``, at its version).

    ``terms``: per version a, ||w_perp||, ||w||, u_norms, c_mags, W, P^T w, then b and the
    rounding margin (``Pruner.version_terms``); ``radii``: (radius_perp, radius,
    norm_max, deg_min, deg_max), one value per block each."""
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
