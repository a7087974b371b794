"""Sherman-Morrison for a batch of labels, as matrix products.

Labeling point b adds gamma_b x_b x_b^T to K. Applied one label at a time, K^-1 takes B
rank-one updates K^-1 <- K^-1 - c_b g_b g_b^T with g_b = K^-1 x_b (the K^-1 of the labels
before b) and c_b = gamma_b / (1 + gamma_b x_b . g_b); each update reads and writes the
r x r matrix, which at r = 2,048 costs more than a pass over X for every label.

Every g_b lies in the span of G0 = K^-1 X_B^T (r x B): g_b = G0 w_b, and with
H = X_B G0 (B x B)

    w_b = e_b - sum_{a<b} c_a w_a (w_a . H[:, b]),      x_b . g_b = w_b . H[:, b],

so the sequential g_b and c_b come from O(B^3) work on B x B matrices plus three BLAS
products: G0, G = G0 W, and K^-1 -= G diag(c) G^T. The J update of every point needs
exactly these g_b and c_b (the kernels subtract sum_b c_b (x_i . g_b)^2).
"""

import numpy as np

from ..errors import NumericalError


def batch_update(Kinv, K, rows, gamma, indices):
    """Apply the labels of ``rows`` (B x r, decoded) with coefficients ``gamma`` (B,) to
    K^-1 and K in place; returns (G (B x r): the g_b as rows, c (B,))."""
    G0 = Kinv @ rows.T                                   # r x B
    H = rows @ G0
    B = len(rows)
    W = np.eye(B)
    c = np.empty(B)
    for b in range(B):
        if b:
            dots = W[:b, :b].T @ H[:b, b]                 # w_a . H[:, b] for a < b (W upper triangular)
            W[:b, b] -= W[:b, :b] @ (c[:b] * dots)
        den = 1.0 + gamma[b] * (W[:b + 1, b] @ H[:b + 1, b])
        if not (np.isfinite(den) and den > 0):
            raise NumericalError(
                f"labeling point {indices[b]}: the Sherman-Morrison denominator is {den!r} (it must be finite "
                "and positive); K has lost positive definiteness; check eta, w0 and X")
        c[b] = gamma[b] / den
    G = G0 if B == 1 else G0 @ W                          # r x B
    Kinv -= (G * c) @ G.T
    K += (rows.T * gamma) @ rows
    return np.ascontiguousarray(G.T), c
