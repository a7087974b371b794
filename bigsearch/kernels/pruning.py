"""Pruning kernels: the bound of blocks of rows at a new u, straight from their summaries
(engine/pruning.py).

A block (centroid c, box [lo, hi] in the orthonormal basis P, residual radius R_perp,
radius R, largest row norm, smallest and largest degree) was last read at the u of its
version v; the version's change w_v (u_t - u_v less its shift along s, a_v s) is
prepared once per version (``W``, ``PW = P^T w``, ``||w - P P^T w||``, ``||w||``,
``||u_v|| + ||u_t||``), so a block costs one dot product of length r and one of length
p: no temporaries of blocks x r. The formula, term by term and in the same order, is
``Pruner.reference_bounds``'s (the tests hold them equal to rounding, which the SAFETY
margin covers many times over). A group of consecutive blocks has summaries of the same
form (engine/pruning.py:group_summaries), so the same kernel bounds groups.
"""

import numba
import numpy as np

from .common import FAST


@numba.njit(nogil=True, cache=True, fastmath=FAST)
def block_bounds(items, best, slot, terms, centre, lo, hi, radii, out):
    """out[t] = an upper bound on f at u_t of every unlabeled row of block i = items[t]:
    -inf for a block with none (best -inf), +inf for one never read (best +inf).

    ``terms``: per version a, ||w_perp||, ||w||, u_norms, W, P^T w, then b_unl and the
    rounding margin (``Pruner.version_terms``); ``radii``: (radius_perp, radius,
    norm_max, deg_min, deg_max), one value per block each."""
    a, w_perp, w_norm, u_norms, W, PW, b, safety = terms
    radius_perp, radius, norm_max, deg_min, deg_max = radii
    r, p = centre.shape[1], lo.shape[1]
    for t in range(len(items)):
        i = items[t]
        top = best[i]
        if top == -np.inf:
            out[t] = -np.inf
            continue
        v = slot[i]
        cw = 0.0
        for j in range(r):
            cw += centre[i, j] * W[v, j]
        box = 0.0
        for j in range(p):
            box += max(lo[i, j] * PW[v, j], hi[i, j] * PW[v, j])
        spread = min(box + radius_perp[i] * w_perp[v], radius[i] * w_norm[v])
        ub = cw + spread
        drift = ub / deg_min[i] if ub >= 0.0 else ub / deg_max[i]
        scale = abs(top) + b * abs(a[v]) + b * (abs(cw) + spread + norm_max[i] * u_norms[v]) / deg_min[i]
        out[t] = top + b * (a[v] + drift) + safety * scale
    return out


@numba.njit(nogil=True, cache=True)
def group_state(best, slot, first, group_best, group_slot):
    """Per group of blocks (first[g] to first[g + 1]): the largest cached maximum, and the
    version its blocks share (-1 when they are at several)."""
    ng, nb = len(first), len(best)
    for g in range(ng):
        a, z = first[g], first[g + 1] if g + 1 < ng else nb
        top, v = best[a], slot[a]
        for i in range(a + 1, z):
            top = max(top, best[i])
            if slot[i] != v:
                v = -1
        group_best[g] = top
        group_slot[g] = v
