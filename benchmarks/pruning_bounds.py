#!/usr/bin/env python
"""Which block bound prunes best: an in-memory simulation of pruned LAS selection.

Generates the tools/ generator's clustered data (n x 128, spread 0.7, 0.5% positives),
orders the rows (none, k-means with 64 clusters, or k-means then a PCA tree down to the
block size), runs exact LAS with alpha = 0 in memory, and for every query counts the
blocks each bound would read before the best exact score beats every remaining bound:

- ball: c . w + R ||w||;
- pcaP: box of the block in the top-P principal directions of X plus the residual ball;
- box: the block's bounding box in the full rotated basis.

(u_t - u_s = a s + w, the shift along s exact, as engine/pruning.py does.) Prints the
mean, p90 and last-50 fractions of blocks read, and the mean per 25 queries.

    python benchmarks/pruning_bounds.py 100000 256 kmeans 200
"""
import sys

import numpy as np

sys.path.insert(0, __import__("os").path.dirname(__file__) + "/..")
from bigsearch.synthetic import cluster_centres, clustered_block

n, r, m = int(sys.argv[1]), 128, int(sys.argv[2])
order_kind = sys.argv[3]
steps = int(sys.argv[4]) if len(sys.argv) > 4 else 200
rng = np.random.default_rng(0)
X, y = clustered_block(rng, cluster_centres(r, 0), n, 0.005, 0.7)

def pca_tree(idx, X, leaf):
    out = []
    stack = [idx]
    while stack:
        ii = stack.pop()
        if len(ii) <= leaf:
            out.append(ii)
            continue
        Z = X[ii] - X[ii].mean(0)
        # top direction via power iteration
        v = np.random.default_rng(1).normal(size=X.shape[1])
        for _ in range(8):
            v = Z.T @ (Z @ v); v /= np.linalg.norm(v)
        p = Z @ v
        o = np.argsort(p, kind="stable")
        h = len(ii) // 2
        h = (h + leaf - 1) // leaf * leaf if len(ii) > 2 * leaf else h
        stack.append(ii[o[h:]]); stack.append(ii[o[:h]])
    return np.concatenate(out[::-1])

if order_kind == "kmeans":
    from sklearn.cluster import MiniBatchKMeans
    lab = MiniBatchKMeans(64, random_state=0, n_init=1).fit_predict(X)
    perm = np.argsort(lab, kind="stable")
elif order_kind == "tree":
    perm = pca_tree(np.arange(n), X, m)
elif order_kind == "kmtree":
    from sklearn.cluster import MiniBatchKMeans
    lab = MiniBatchKMeans(64, random_state=0, n_init=1).fit_predict(X)
    perm = np.concatenate([pca_tree(np.flatnonzero(lab == c), X, m) for c in range(64)])
else:
    perm = np.arange(n)
X, y = X[perm], y[perm]
eta, w0 = 0.5, 1.0 / n
pi = 0.005
s = X.sum(0); d = X @ s
lab = np.full(n, -1)
b_unl = 1 / (1 + w0); q_unl = pi * w0 / (1 + w0)
rho = b_unl / d
G = X.T @ (X * rho[:, None]); K = np.eye(r) - G; Kinv = np.linalg.inv(K)
q = np.full(n, q_unl); xq = X.T @ q
# blocks
nb = (n + m - 1) // m
starts = np.arange(0, n, m)
C = np.add.reduceat(X, starts) / np.diff(np.append(starts, n))[:, None]
dmin = np.minimum.reduceat(d, starts); dmax = np.maximum.reduceat(d, starts)
blk = np.arange(n) // m
R = np.sqrt(np.maximum.reduceat(((X - C[blk]) ** 2).sum(1), starts))
# global PCA basis
Xc = X - X.mean(0)
evals, evecs = np.linalg.eigh(Xc.T @ Xc)
P = evecs[:, ::-1]
Z = (X - C[blk]) @ P            # all r coords rotated
lo = np.minimum.reduceat(Z, starts); hi = np.maximum.reduceat(Z, starts)
res = {}
for p in (8, 32):
    resid = np.sqrt(np.maximum(((X - C[blk]) ** 2).sum(1) - (Z[:, :p] ** 2).sum(1), 0))
    res[p] = np.maximum.reduceat(resid, starts)
def bound_of(kind, w, bl):
    cw = C[bl] @ w
    if kind == "ball":
        return cw + R[bl] * np.linalg.norm(w)
    pw = P.T @ w
    if kind == "box":
        return cw + np.maximum(lo[bl] * pw, hi[bl] * pw).sum(1)
    p = int(kind[3:])
    wp = np.linalg.norm(w - P[:, :p] @ pw[:p])
    return cw + np.maximum(lo[bl, :p] * pw[:p], hi[bl, :p] * pw[:p]).sum(1) + res[p][bl] * wp
kinds = ["ball", "pca8", "pca32", "box"]
state = {k: {"M": np.full(nb, np.inf), "ver": np.zeros(nb, int), "reads": []} for k in kinds}
us = []
first = int(np.flatnonzero(y == 1)[0])
def label(i, yi):
    global Kinv, xq
    gamma = (b_unl - (1 - eta)) / d[i]
    x = X[i]; g = Kinv @ x; c = gamma / (1 + gamma * x @ g)
    Kinv -= c * np.outer(g, g)
    xq += x * (eta * yi - q_unl)
    lab[i] = yi
label(first, 1)
found = 0
for t in range(steps):
    u = Kinv @ xq
    us.append(u.copy())
    f = q_unl + b_unl / d * (X @ u)
    fu = np.where(lab < 0, f, -np.inf)
    best = int(np.argmax(fu))
    for k in kinds:
        st = state[k]
        ss = s @ s
        bnd = np.full(nb, np.inf)
        for v in np.unique(st["ver"]):
            bl = np.flatnonzero(st["ver"] == v)
            if t == 0: break
            delta = u - us[v]
            a = (delta @ s) / ss
            w = delta - a * s
            ub = bound_of(k, w, bl)
            bnd[bl] = st["M"][bl] + b_unl * a + b_unl * np.where(ub >= 0, ub / dmin[bl], ub / dmax[bl])
        order = np.argsort(-bnd)
        bestv = -np.inf; nread = 0
        for j in order:
            if bnd[j] < bestv: break
            sl = slice(j * m, min(n, j * m + m))
            mx = fu[sl].max()
            st["M"][j] = mx; st["ver"][j] = t
            bestv = max(bestv, mx); nread += 1
        st["reads"].append(nread / nb)
    label(best, int(y[best]))
    found += int(y[best])
print(order_kind, "n", n, "m", m, "found", found)
for k in kinds:
    rd = np.array(state[k]["reads"][1:])
    print(f"{k:6s} mean {rd.mean():.3f} p90 {np.quantile(rd, .9):.3f} last50 {rd[-50:].mean():.3f}",
          np.round([rd[i:i+25].mean() for i in range(0, len(rd), 25)], 3))
