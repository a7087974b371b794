"""Sherman-Morrison for a batch of labels, as matrix products.

Labeling point b adds gamma_b x_b x_b^T to K. Applied one label at a time, K^-1 takes B
rank-one updates K^-1 <- K^-1 - c_b g_b g_b^T with g_b = K^-1 x_b (the K^-1 of the labels
before b) and c_b = gamma_b / (1 + gamma_b x_b . g_b); each update reads and writes the
r x r matrix, which at r = 2,048 costs more than a pass over X for every label.

Every g_b lies in the span of G0 = K^-1 X_B^T (r x B): g_b = G0 w_b, and with
H = X_B G0 (B x B)

    w_b = e_b - sum_{a<b} c_a w_a (w_a . H[:, b]),      x_b . g_b = w_b . H[:, b],

so the sequential g_b and c_b come from O(B^3) work on B x B matrices plus products
with K^-1: G0 (one pass over K^-1), G = G0 W, and K^-1 -= G diag(c) G^T (one pass, in
place). The J update of every point needs exactly these g_b and c_b (the kernels
subtract sum_b c_b (x_i . g_b)^2). K itself is only read by the drift check and saved
state, so its updates wait until then (DeferredK).

For many labels the products are BLAS calls in one thread (on a busy machine a second
BLAS thread made them 2-2.5x slower), and the rank-B update is a symmetric product
S S^T (S = G sqrt|c|, syrk: half the multiplications, and K^-1 stays exactly symmetric).
"""

import functools

import numpy as np
from threadpoolctl import ThreadpoolController

from ..errors import NumericalError
from ..kernels.dense import sparse_rows_times, subtract_outer, times_columns

FEW_LABELS = 8       # up to this many: the numba kernels (one thread); more: BLAS
SPARSE_ROWS = 0.25   # labeled rows with fewer nonzeros than this share: K^-1 x_b from the rows of K^-1 at them


def batch_update(Kinv, rows, gamma, indices):
    """Apply labels to K^-1 in place: ``rows`` (B x r, decoded), ``gamma`` (B,) their
    coefficients. Returns (G, c): the g_b as rows (B x r) and c (B,)."""
    B = len(rows)
    if B <= FEW_LABELS:
        G0 = _times_rows(Kinv, rows)
        W, c = _coefficients(rows @ G0, gamma, indices)
        G = G0 if B == 1 else G0 @ W
        subtract_outer(Kinv, np.ascontiguousarray(G.T), c)
        return np.ascontiguousarray(G.T), c
    with _blas().limit(limits=1, user_api="blas"):
        G0 = _times_rows(Kinv, rows)
        W, c = _coefficients(rows @ G0, gamma, indices)
        G = G0 @ W
        for sign in (1.0, -1.0):                     # c_b < 0 only when 1 - eta > 1 / (1 + w0)
            part = sign * c > 0
            if part.any():
                S = G[:, part] * np.sqrt(sign * c[part])
                if sign > 0:
                    Kinv -= S @ S.T                  # NumPy computes S S^T by syrk
                else:
                    Kinv += S @ S.T
    return np.ascontiguousarray(G.T), c


def _times_rows(Kinv, rows):
    """G0 = K^-1 X_B^T (r x B): for sparse rows (fingerprints) the rows of K^-1 at their
    nonzeros added up (K^-1 is symmetric); else one pass over K^-1 (few labels) or BLAS."""
    if np.count_nonzero(rows) < SPARSE_ROWS * rows.size:
        return sparse_rows_times(rows, Kinv).T
    return times_columns(Kinv, rows) if len(rows) <= FEW_LABELS else Kinv @ rows.T


@functools.cache
def _blas():
    return ThreadpoolController()


def _coefficients(H, gamma, indices):
    """W (B x B, upper triangular) and c (B,) of the recurrence in the module docstring."""
    B = len(gamma)
    W = np.eye(B)
    c = np.empty(B)
    for b in range(B):
        if b:
            dots = W[:b, :b].T @ H[:b, b]                 # w_a . H[:, b] for a < b
            W[:b, b] -= W[:b, :b] @ (c[:b] * dots)
        den = 1.0 + gamma[b] * (W[:b + 1, b] @ H[:b + 1, b])
        if not (np.isfinite(den) and den > 0):
            raise NumericalError(
                f"labeling point {indices[b]}: the Sherman-Morrison denominator is {den!r} (it must be finite "
                "and positive); K has lost positive definiteness; check eta, w0 and X")
        c[b] = gamma[b] / den
    return W, c


class DeferredK:
    """K = I - X^T R X, updated by the labels' gamma_b x_b x_b^T only when read (the
    drift check, saving state): one BLAS product for all labels since the last read,
    instead of one pass over the r x r matrix per label."""

    def __init__(self, K):
        self.K = K
        self.pending = []

    def add(self, rows, gamma):
        self.pending.append((rows, gamma))

    def value(self):
        if self.pending:
            rows = np.vstack([p[0] for p in self.pending])
            gamma = np.concatenate([p[1] for p in self.pending])
            self.K += (rows.T * gamma) @ rows
            self.pending = []
        return self.K
