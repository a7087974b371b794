"""The straightforward fantasized greedy, one pass over X per batch member: the
reference that engine/methods/fantasy.py's speculate-and-verify batches must equal, on stores
too large for the dense solves of dense.py (and the baseline of benchmarks/fantasy.py).

It builds its state from X and the labels alone (two passes, in float64: the degrees,
then K and xq from their definitions), never from the engine's K^-1, xq or degrees, and
shares no code with engine/methods/fantasy.py.
"""

import numpy as np


def rows(store):
    """Each chunk of X as float64 rows, read through the store."""
    for a, b in store.chunks:
        yield store.read_rows(np.arange(a, b))


def las_state(store, labels, pi, eta, w0):
    """K^-1, xq and the degrees of LAS for ``labels`` (-1: unknown), from X: with A = X X^T,
    d = A 1, b_i = 1 - eta (labeled) or 1 / (1 + w0), K = I - X^T diag(b / d) X and
    xq = X^T c, c_i = eta y_i (labeled) or pi w0 / (1 + w0); then f = c + diag(b / d) X K^-1 xq
    solves (I - B D^-1 A) f = (I - B) y' (Woodbury)."""
    total = sum(x.sum(axis=0) for x in rows(store))
    deg = np.concatenate([x @ total for x in rows(store)])
    lab = labels >= 0
    b = np.where(lab, 1.0 - eta, 1.0 / (1.0 + w0))
    c = np.where(lab, eta * labels, pi * w0 / (1.0 + w0))
    K, xq = np.eye(store.shape[1]), np.zeros(store.shape[1])
    for (a, e), x in zip(store.chunks, rows(store)):
        K -= x.T @ ((b[a:e] / deg[a:e])[:, None] * x)
        xq += x.T @ c[a:e]
    return np.linalg.inv(K), xq, deg


def pass_per_member_batch(las, fantasy, k):
    """The batch of k: per member, f of every unlabeled point from X (a pass), the best
    (ties: lowest index) told ``fantasy`` (a soft label, or "f": its own f) by
    Sherman-Morrison on K^-1 and xq. (batch, passes)."""
    p, store = las.params, las.store
    b_unl, q_unl = 1.0 / (1.0 + p.w0), p.pi * p.w0 / (1.0 + p.w0)
    labels = np.asarray(las.labels, np.float64)
    Kinv, xq, deg = las_state(store, labels, p.pi, p.eta, p.w0)
    taken = labels >= 0
    batch = []
    for _ in range(k):
        v = Kinv @ xq
        f = np.concatenate([q_unl + b_unl / deg[a:b] * (store.read_rows(np.arange(a, b)) @ v) for a, b in store.chunks])
        f[taken] = -np.inf
        i = int(np.argmax(f))  # argmax: the first of equal maxima
        x = store.read_rows([i])[0]
        gamma = (b_unl - (1.0 - p.eta)) / deg[i]
        g = Kinv @ x
        Kinv -= (gamma / (1.0 + gamma * (x @ g))) * np.outer(g, g)
        xq += x * (p.eta * (f[i] if fantasy == "f" else fantasy) - q_unl)
        taken[i] = True
        batch.append(i)
    return batch, k
