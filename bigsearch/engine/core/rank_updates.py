"""K^-1 under labels: Sherman-Morrison for one label or a batch, kept as a low-rank
correction of a base inverse (Woodbury), folded in every few labels.

Labeling point b adds gamma_b x_b x_b^T to K. Applied one label at a time, K^-1 takes
rank-one updates K^-1 <- K^-1 - c_b g_b g_b^T with g_b = K^-1 x_b (the K^-1 of the labels
before b) and c_b = gamma_b / (1 + gamma_b x_b . g_b). At r = 2,048 K^-1 is 32 MiB, and
updating it in place costs a read and a write of all of it per label, more than a pass
over a 50,000-row binary store. So ``LowRankInverse`` keeps

    K^-1 = K0^-1 - sum_{a<k} c_a g_a g_a^T          (the g_a as the rows of Gt, k x r)

and a label costs K0^-1 x_b (for the sparse rows of fingerprints: the rows of K0^-1 at
their nonzeros) minus the correction, O(r k), with no pass over K0^-1 at all; every
``fold_rank(r)`` labels the correction is folded into K0^-1 by one BLAS product (rank k,
r^2 k multiply-adds at matrix-multiply speed, against k memory-bound passes).

For a batch of B labels, every g_b lies in the span of G0 = K^-1 X_B^T (r x B): g_b = G0
w_b, and with H = X_B G0 (B x B)

    w_b = e_b - sum_{a<b} c_a w_a (w_a . H[:, b]),      x_b . g_b = w_b . H[:, b],

so the sequential g_b and c_b come from O(B^3) work on B x B matrices plus products with
K^-1. The J update of every point needs exactly these g_b and c_b (the kernels subtract
sum_b c_b (x_i . g_b)^2), and K^-1 [xq, xz], the score vectors, follow in O(r B)
(``advance_score_vectors``). K itself is only read by the drift check and saved state,
so its updates wait until then (DeferredK).

For many labels the products are BLAS calls, on every core the process may use when they
are large (``blas_threads``; they run between passes, when the chunk pool is idle: a batch
of 500 at r = 2,048 is mostly these products), on one thread when small (r = 128's folds
and drift checks: OpenBLAS's threads would spin on the cores of the next passes), and the
fold is a symmetric product S S^T (S = G sqrt|c|, syrk: half the multiplications).
"""

import numpy as np
from scipy.linalg import solve_triangular

from ...errors import NumericalError
from ...kernels.dense import sparse_rows_times, subtract_low_rank, subtract_outer, times_columns
from .blas import blas_threads

FEW_LABELS = 8       # up to this many: the numba kernels (one thread); more: BLAS
SPARSE_ROWS = 0.25   # labeled rows with fewer nonzeros than this share: K^-1 x_b from the rows of K^-1 at them


def fold_rank(r):
    """Labels kept as a correction before it is folded into K0^-1. A label costs about
    4 r k operations on the correction (k labels so far, in cache); a fold costs r^2 k
    multiply-adds at BLAS speed plus a few memory-bound passes over the r x r base, which
    dominate until k is large: benchmarks/rank_updates.py (AMD EPYC, r = 128 to 2,048,
    m = 8 to 512) found the per-label time falling up to m ~ r / 2 and flat beyond 256."""
    return max(FEW_LABELS, min(256, r // 2))


class LowRankInverse:
    """K^-1 = base - Gt[:k]^T diag(c[:k]) Gt[:k]. ``value()`` is K^-1 as one matrix (the
    base itself when there is no correction, else a new matrix): reading it changes
    nothing, so the numbers that follow do not depend on who read it."""

    def __init__(self, base):
        self.base = base
        r = len(base)
        self.fold_at = fold_rank(r)
        self.Gt = np.empty((self.fold_at, r))
        self.c = np.empty(self.fold_at)
        self.k = 0
        self.folds = 0  # how many times the base has changed: products with it are stale after

    def value(self):
        if not self.k:
            return self.base
        out = self.base.copy()
        _subtract(out, self.Gt[:self.k], self.c[:self.k])
        return out

    def times_rows(self, rows, base_products=None):
        """K^-1 x_b for each row x_b of ``rows`` (B x r, decoded), as rows (B x r).
        ``base_products``: base @ x_b as rows when the caller has them (BLR keeps its
        vectors' products with the base up to date), so the base is not read again."""
        out = base_times_rows(self.base, rows) if base_products is None else np.array(base_products, np.float64)
        k = self.k
        if k and len(rows) <= FEW_LABELS:
            subtract_low_rank(out, self.Gt, self.c, k, rows)
        elif k:
            with blas_threads(2 * len(rows) * k * len(self.base)):
                out -= ((rows @ self.Gt[:k].T) * self.c[:k]) @ self.Gt[:k]
        return out

    def add(self, G, c):
        """K^-1 <- K^-1 - G^T diag(c) G (G: B x r); True when that folded the correction."""
        B, k = len(G), self.k
        if k + B <= self.fold_at:
            self.Gt[k:k + B], self.c[k:k + B] = G, c
            self.k += B
            return False
        if k:
            G, c = np.vstack([self.Gt[:k], G]), np.concatenate([self.c[:k], c])
        self.k = 0
        self.folds += 1
        _subtract(self.base, G, c)
        return True


def batch_update(inverse, rows, gamma, indices, base_products=None):
    """Apply labels to ``inverse`` (a LowRankInverse): ``rows`` (B x r, decoded), ``gamma``
    (B,) their coefficients (``base_products``: the base times the rows, when known).
    Returns (G, c, G0, folded): the g_b as rows (B x r), c (B,), the K^-1 x_b before these
    labels as rows (B x r), and whether the correction was folded into the base."""
    B = len(rows)
    G0 = inverse.times_rows(rows, base_products)
    if B <= FEW_LABELS:
        W, c = _coefficients(rows @ G0.T, gamma, indices)
        G = G0 if B == 1 else W.T @ G0
    else:
        with blas_threads(B * B * rows.shape[1]):
            W, c = _coefficients(rows @ G0.T, gamma, indices)
            G = W.T @ G0
    folded = inverse.add(G, c)
    return G, c, G0, folded


def advance_score_vectors(V, G0, G, c, A, xqz):
    """[K^-1 xq, K^-1 xz] after labels, from the V before them, in O(r B): with xq' = xq +
    X_B^T a and K'^-1 = K^-1 - G^T C G, K'^-1 xq' = K^-1 xq + G0^T a - G^T C (G xq').
    ``A`` holds the coefficients (a for xq, those of xz) as rows (2 x B), ``xqz`` the new
    [xq, xz] (2 x r)."""
    return V + A @ G0 - ((G @ xqz.T) * c[:, None]).T @ G


def base_times_rows(base, rows):
    """base @ x_b as rows: for sparse rows (fingerprints) the rows of the base at their
    nonzeros added up (it is symmetric); else one pass over it (few labels) or BLAS."""
    if _sparse(rows):
        return sparse_rows_times(rows, base)
    if len(rows) <= FEW_LABELS:
        return np.ascontiguousarray(times_columns(base, rows).T)
    with blas_threads(len(rows) * base.size):
        return rows @ base


def _sparse(rows):
    return np.count_nonzero(rows) < SPARSE_ROWS * rows.size


def _subtract(base, G, c):
    """base -= G^T diag(c) G in place: one numba pass for few rows, else BLAS syrk."""
    if len(G) <= FEW_LABELS:
        subtract_outer(base, np.ascontiguousarray(G), c)
        return
    with blas_threads(len(G) * base.size):
        for sign in (1.0, -1.0):                     # c_b < 0 only when 1 - eta > 1 / (1 + w0)
            part = sign * c > 0
            if part.any():
                S = G[part].T * np.sqrt(sign * c[part])
                if sign > 0:
                    base -= S @ S.T                  # NumPy computes S S^T by syrk
                else:
                    base += S @ S.T


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
    instead of one pass over the r x r matrix per label (LAS; BLR keeps its A as a factor,
    ``RidgeFactor``)."""

    def __init__(self, K):
        self.K = K
        self.pending = []

    def add(self, rows, gamma):
        self.pending.append((rows, gamma))

    def value(self):
        if self.pending:
            rows = np.vstack([p[0] for p in self.pending])
            gamma = np.concatenate([p[1] for p in self.pending])
            with blas_threads(len(rows) * self.K.size):
                self.K += (rows.T * gamma) @ rows
            self.pending = []
        return self.K


class RidgeFactor:
    """BLR's A = lam I + F^T F (r x r), kept as the rows of F: each label's update rows
    times sqrt(gamma) are appended, and once F has more than 2 r rows a QR step makes it r x r
    again (R^T R = F^T F). What A is read for needs no r x r matrix and no O(r^3) step:

    - ``times(V)``, A v for rows v: lam v + F^T (F v), O(m r) a row;
    - ``root(e1, e2)``, sqrt(lam) e1 + F^T e2 for standard normal e1 (r) and e2 (m): a
      vector whose covariance is A, so A^-1 times it is an exact draw from N(0, A^-1)
      (Thompson's), O(m r) plus one product with A^-1;
    - ``value()``, A itself (for tests: nothing in the engine reads it).

    Saved states keep F (m x r, for m labels below r much less than A's r x r)."""

    def __init__(self, lam, r, F=None):
        self.lam = float(lam)
        self.F = np.zeros((0, r)) if F is None else np.asarray(F, np.float64)

    def add(self, rows, gamma):
        """A <- A + rows^T diag(gamma) rows (gamma >= 0)."""
        self.F = np.vstack([self.F, rows * np.sqrt(gamma)[:, None]])
        if len(self.F) > 2 * self.F.shape[1]:
            self.F = np.linalg.qr(self.F, mode="r")

    def times(self, V):
        return self.lam * V + (V @ self.F.T) @ self.F

    def root(self, e1, e2):
        """sqrt(lam) e1 + F^T e2 as rows, for rows e1 (k x r) and e2 (k x m)."""
        return np.sqrt(self.lam) * e1 + e2 @ self.F

    def value(self):
        A = self.F.T @ self.F
        A[np.diag_indices(len(A))] += self.lam
        return A


def ridge_inverse(lam, rows):
    """(lam I + rows^T rows)^-1 (r x r), exactly symmetric. For fewer rows than features
    (m < r), by Woodbury: (I - W^T W) / lam with W = C^-1 rows, C C^T = lam I + rows rows^T
    (m x m), O(r^2 m) against the inverse's O(r^3): at r = 4,096 with 10 to 100 labels,
    0.10-0.15 s against 3.0-3.4 s. Raises NumericalError when the matrix is singular."""
    m, r = rows.shape
    try:
        with blas_threads(m * r * min(m, r) + min(m, r) ** 3):
            if m >= r:
                A = rows.T @ rows
                A[np.diag_indices(r)] += lam
                out = np.linalg.inv(A)
                return (out + out.T) / 2
            M = rows @ rows.T
            M[np.diag_indices(m)] += lam
            W = solve_triangular(np.linalg.cholesky(M), rows, lower=True)
            out = W.T @ W                                 # syrk: exactly symmetric
    except np.linalg.LinAlgError as e:
        raise NumericalError(f"lam I + X_c^T X_c / noise is singular ({e}); check lam and the data's scale") from e
    out *= -1.0 / lam
    out[np.diag_indices(r)] += 1.0 / lam
    return out
