"""The straightforward fantasized greedy, one pass over X per batch member: the
reference that engine/methods/fantasy.py's speculate-and-verify batches must equal, on stores
too large for the dense solves of dense.py (and the baseline of benchmarks/fantasy.py).

It starts from a synced LAS's K^-1, xq and degrees (not from X alone), and shares no
code with engine/methods/fantasy.py.
"""

import numpy as np


def pass_per_member_batch(las, fantasy, k):
    """The batch of k: per member, f of every unlabeled point from X (a pass), the best
    (ties: lowest index) told ``fantasy`` (a soft label, or "f": its own f) by
    Sherman-Morrison on copies of K^-1 and xq. (batch, passes)."""
    p, store = las.params, las.store
    b_unl, q_unl = 1.0 / (1.0 + p.w0), p.pi * p.w0 / (1.0 + p.w0)
    Kinv, xq, deg = las.Kinv.copy(), las.xq.copy(), np.asarray(las.backend.gather("deg"))
    taken = las.labels >= 0
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
