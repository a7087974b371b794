"""An independent dense reference for the engine, straight from the definitions.

- f by a direct solve of (I - B D^-1 A) f = (I - B) y' with A = X X^T;
- the impact factor by brute force: label each unlabeled point positive, re-solve,
  and sum the change of f over the other unlabeled points;
- WNAS from its definition with the full similarity matrix.

O(n^3) per solve and O(n^4) for the impact factor: for a few hundred points at most.
Nothing here shares code with the engine. The many small solves run with one BLAS
thread: threaded BLAS on 100 x 100 systems is slower, and on a loaded machine 60x slower.
"""

import math

import numpy as np
from threadpoolctl import threadpool_limits

one_blas_thread = threadpool_limits.wrap(limits=1, user_api="blas")


@one_blas_thread
def dense_f(X, labels, pi, eta=0.5, w0=None):
    """f for labels -1 (unknown) or y in [0, 1] (0/1, or graded soft labels)."""
    X = np.asarray(X, np.float64)
    n = len(X)
    w0 = 1.0 / n if w0 is None else w0
    lam = (1.0 - eta) / eta
    A = X @ X.T
    d = A.sum(axis=1)
    lab = labels >= 0
    b = np.where(lab, lam / (1.0 + lam), 1.0 / (1.0 + w0))
    y_prime = np.where(lab, labels, pi).astype(np.float64)
    return np.linalg.solve(np.eye(n) - (b / d)[:, None] * A, (1.0 - b) * y_prime)


def dense_K(X, labels, eta=0.5, w0=None):
    """The r x r matrix K = I - X^T B D^-1 X of the low-rank solve (f = (I - B) y' +
    B D^-1 X K^-1 X^T (I - B) y', Woodbury on dense_f's system), from X and the labels."""
    X = np.asarray(X, np.float64)
    w0 = 1.0 / len(X) if w0 is None else w0
    d = X @ X.sum(axis=0)
    b = np.where(labels >= 0, 1.0 - eta, 1.0 / (1.0 + w0))
    return np.eye(X.shape[1]) - X.T @ ((b / d)[:, None] * X)


def dense_J(X, labels, eta=0.5, w0=None):
    """J_i = x_i^T K^-1 x_i for every point (K: dense_K)."""
    X = np.asarray(X, np.float64)
    return np.einsum("ij,jk,ik->i", X, np.linalg.inv(dense_K(X, labels, eta, w0)), X)


@one_blas_thread
def brute_force_impact(X, labels, pi, eta=0.5, w0=None):
    """IM_i = f_i * sum_{j in U, j != i} (f+_j - f_j) for every unlabeled i (0 elsewhere)."""
    f = dense_f(X, labels, pi, eta, w0)
    unl = np.flatnonzero(labels < 0)
    im = np.zeros(len(X))
    for i in unl:
        plus = labels.copy()
        plus[i] = 1
        f_plus = dense_f(X, plus, pi, eta, w0)
        others = unl[unl != i]
        im[i] = f[i] * (f_plus[others] - f[others]).sum()
    return f, im


def dense_query(f, im, labels, alpha):
    """argmax over unlabeled points of f + alpha * s * IM, s = mean_U(f) / mean_U(IM)."""
    unl = labels < 0
    s = f[unl].sum() / im[unl].sum() if alpha else 0.0
    score = np.where(unl, f + alpha * s * im, -np.inf)
    return int(np.argmax(score))


def dense_wnas(X, labels):
    X = np.asarray(X, np.float64)
    lab = np.flatnonzero(labels >= 0)
    S = X @ X[lab].T
    num = S @ (2.0 * labels[lab] - 1.0)
    den = np.abs(S).sum(axis=1)
    return np.where(den > 0, num / np.where(den > 0, den, 1.0), 0.0)


@one_blas_thread
def dense_las_run(X, y, init, steps, pi, eta=0.5, w0=None, alpha=0.0):
    """The query sequence of dense Active Search with a simulated oracle y (0/1, or graded
    labels in [0, 1]: label propagation takes them as soft labels)."""
    labels = np.full(len(X), -1.0)
    for i in init:
        labels[i] = y[i]
    queries = []
    for _ in range(steps):
        f, im = brute_force_impact(X, labels, pi, eta, w0) if alpha else (dense_f(X, labels, pi, eta, w0), None)
        i = dense_query(f, im if alpha else np.zeros(len(X)), labels, alpha)
        queries.append(i)
        labels[i] = y[i]
    return queries


@one_blas_thread
def dense_fantasized_batch(X, labels, k, pi, eta=0.5, w0=None, fantasy=0.0):
    """Sequential greedy by f with fantasized answers, by full dense solves: each chosen
    point is told ``fantasy`` (a soft label) or, with "f", its own current f."""
    labels = np.asarray(labels, np.float64).copy()
    chosen = []
    for _ in range(k):
        f = dense_f(X, labels, pi, eta, w0)
        i = int(np.argmax(np.where(labels < 0, f, -np.inf)))
        chosen.append(i)
        labels[i] = f[i] if fantasy == "f" else fantasy
    return chosen


@one_blas_thread
def dense_screen(X, batches, ridge=1.0, balance=9.8, unread=1000.0, adapt=True, neighbours=3, neighbour_weight=0.0,
                 temperature=2.0, half_life=30, every=False):
    """The screening scores f after labeling ``batches`` (a list of (indices, labels) told
    in turn), replayed from X and the definitions of engine/methods/screen.py: the weighted
    ridge fit from the labeled rows and the unread ones (no sufficient statistics); with
    ``adapt`` (and unread > 0) the answers-only ridge and the unread one standardized over the
    unread records and weighed by a softmax of their losses, each told record costing a ridge
    the normal share of the unread above it (relevant) or below it (not), from the ridges as
    they stood before; the similarities to the positives by brute force, and t from the
    similarities as they stood after the previous batch. ``every``: the list of f after each
    batch (one replay for a whole run)."""
    X = np.asarray(X, np.float64)
    n, r = X.shape
    labels = np.full(n, -1)
    spread, f, trace = None, None, []
    losses, ridges = np.zeros(2), []
    both = adapt and unread > 0
    for idx, lab in batches:
        for i, y in zip(idx, lab):  # the ridges before this batch rank its answers
            for k, (lin_k, mean_k, sd_k) in enumerate(ridges):
                above = 0.5 * math.erfc((lin_k[i] - mean_k) / sd_k / math.sqrt(2))
                losses[k] = 0.5 ** (1 / half_life) * losses[k] + (above if y >= 0.5 else 1 - above)
        labels[np.asarray(idx)] = lab
        unr = labels < 0
        lin = _dense_ridge(X, labels, unread if not both else 0.0, ridge, balance)
        if both:
            ridges = []
            for u in (0.0, unread):
                lin_k = _dense_ridge(X, labels, u, ridge, balance)
                sd = lin_k[unr].std()
                ridges.append((lin_k, lin_k[unr].mean(), sd if sd > 0 else 1.0))
            w = np.exp(-(losses - losses.min()) / temperature)
            w /= w.sum()
            lin = sum(wk * (lin_k - mean_k) / sd_k for wk, (lin_k, mean_k, sd_k) in zip(w, ridges))
        pos = labels == 1
        k = min(neighbours, int(pos.sum())) if neighbour_weight > 0 else 0
        near = np.zeros(n)
        if k:
            sims = np.sort(X @ X[pos].T, axis=1)[:, ::-1]
            near = sims[:, :k].mean(axis=1)
        t = 0.0
        if spread is not None and k and neighbour_weight > 0 and spread.std() > 0:
            t = neighbour_weight * lin[unr].std() / spread.std()
        f = lin + t * near
        spread = near[unr]
        trace.append(f)
    return trace if every else f


def _dense_ridge(X, labels, unread, ridge, balance):
    """The class-weighted ridge's scores x . v + b, the unread records as ``unread`` negatives."""
    pos, neg, unr = labels == 1, labels == 0, labels < 0
    n_pos, n_neg = int(pos.sum()), int(neg.sum())
    if n_neg + unread == 0 and n_pos == 0:
        return np.zeros(len(X))
    neg_each = max(n_pos, 1) / (balance * (n_neg + unread)) if n_neg + unread > 0 else 0.0
    c = np.where(pos, 1.0, np.where(neg, neg_each, unread * neg_each / max(int(unr.sum()), 1)))
    if c.sum() == 0:
        return np.zeros(len(X))
    c *= (int((labels >= 0).sum()) + unread) / c.sum()
    target = pos.astype(np.float64)
    xbar, ybar = c @ X / c.sum(), c @ target / c.sum()
    Xc = X - xbar
    v = np.linalg.solve((Xc.T * c) @ Xc + ridge * np.eye(X.shape[1]), (Xc.T * c) @ (target - ybar))
    return X @ v + (ybar - xbar @ v)
