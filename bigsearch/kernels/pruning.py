"""Pruning kernel: the bound of every block of rows at a new u, in one pass (engine/pruning.py).

A block (centroid c, box [lo, hi] in the orthonormal basis P, residual radius R_perp,
radius R, largest row norm, smallest and largest degree) was last read at the u of its
version v; the version's change w_v (u_t - u_v less its shift along s, a_v s) is
prepared once per version (``W``, ``PW = P^T w``, ``||w - P P^T w||``, ``||w||``,
``||u_v|| + ||u_t||``), so a block costs one dot product of length r and one of length
p, read straight from the summaries: no temporaries of blocks x r. The formula, term by
term and in the same order, is ``Pruner.reference_bounds``'s (the tests hold them equal
to rounding, which the SAFETY margin covers many times over).
"""

import numba
import numpy as np

from .common import FAST


@numba.njit(nogil=True, cache=True, fastmath=FAST)
def block_bounds(best, slot, a, W, PW, w_perp, w_norm, u_norms, centre, lo, hi, radius_perp, radius, norm_max,
                 deg_min, deg_max, b, safety, out):
    """out[i] = an upper bound on f at u_t of every unlabeled row of block i: -inf for a
    block with none (best -inf), +inf for one never read (best +inf)."""
    r, p = centre.shape[1], lo.shape[1]
    for i in range(len(best)):
        top = best[i]
        if top == -np.inf:
            out[i] = -np.inf
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
        out[i] = top + b * (a[v] + drift) + safety * scale
    return out
