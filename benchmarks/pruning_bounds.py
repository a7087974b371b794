#!/usr/bin/env python
"""Pruned LAS (engine/pruning/las.py): how well block bounds prune, and what a query's
bookkeeping costs.

``simulate N BLOCK_ROWS ORDER [STEPS]``: which block bound prunes best, an in-memory
simulation. Generates the tools/ generator's clustered data (n x 128, spread 0.7, 0.5%
positives), orders the rows (none, k-means with 64 clusters, or k-means then a PCA tree
down to the block size), runs exact LAS with alpha = 0 in memory, and for every query
counts the blocks each bound would read before the best exact score beats every
remaining bound:

- ball: c . w + R ||w||;
- pcaP: box of the block in the top-P principal directions of X plus the residual ball;
- box: the block's bounding box in the full rotated basis.

(u_t - u_s = a s + w, the shift along s exact, as engine/pruning/las.py does.) Prints the
mean, p90 and last-50 fractions of blocks read, and the mean per 25 queries.

``store PATH [--queries Q]``: a pruned LAS search on a store (one positive told, then
ask / tell with the stored labels), each query's time split into the bounds (the
kernel), the selection (best-first order and the top k), the reads (the blocks' f
recomputed from X) and the rest (labels, u); on the same state, per query, what the
NumPy bounds (``Pruner.reference_bounds``, the formula before the kernel, with its
distinct-versions pass) and a full sort of every bound cost, and the largest gap
between the kernel's bounds and NumPy's.

``blocks NB [--versions V]``: the same bookkeeping on synthetic summaries of NB blocks
(r = 128, 32 basis directions), without X: what a query's bookkeeping costs at 60M x 128
(468,750 blocks of 128 rows) on a machine that cannot hold that store.

    python benchmarks/pruning_bounds.py simulate 100000 256 kmeans 200
    python benchmarks/pruning_bounds.py store /tmp/gen10m.zarr --queries 100
    python benchmarks/pruning_bounds.py blocks 468750
"""
import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__) + "/..")
from bigsearch.synthetic import cluster_centres, clustered_block  # noqa: E402


def simulate(n, m, order_kind, steps):
    r = 128
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
        nonlocal Kinv, xq
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


class QueryClock:
    """Wraps a pruned LAS engine's pruner, bound kernel and reads to time each part of its
    queries; before each query, on the same state, times the one-level kernel over every
    block, the NumPy bounds with the distinct-versions pass and a full sort (the
    bookkeeping before the kernel), and checks the kernel against NumPy."""

    PARTS = ("bounds", "top", "reads", "kernel_all_blocks", "numpy_bounds", "full_sort", "bounded")

    def __init__(self, engine):
        from bigsearch.engine.pruning import las as module

        self.pruning = engine.pruning
        self.pr = engine.pruning.pruner
        self.parts = dict.fromkeys(self.PARTS, 0.0)
        self.gap = 0.0
        blocks, groups, top, read = module.block_bounds, module.group_bounds, self.pr.top, self.pruning._read
        module.block_bounds = lambda *a: self._time("bounds", blocks, *a) if self._count(len(a[0])) else None
        module.group_bounds = lambda *a: self._time("bounds", groups, *a) if self._count(len(a[0])) else None
        self.pr.top = lambda k, u, *a, **kw: self._top(top, k, u, *a, **kw)
        self.pruning._read = lambda *a: self._time("reads", read, *a)

    def _top(self, top, k, u, *args, **kw):
        out = self._time("kernel_all_blocks", self.pr.bounds, u)
        self.parts["bounds"] = self.parts["bounded"] = 0.0      # (that went through the wrapped kernel)
        ref = self._time("numpy_bounds", self._numpy_bounds, u)
        self._time("full_sort", self._full_sort, ref)
        assert np.array_equal(out == np.inf, ref == np.inf) and np.array_equal(out == -np.inf, ref == -np.inf)
        both = np.isfinite(out) & np.isfinite(ref)
        if both.any():
            rel = np.abs(out[both] - ref[both]) / np.maximum(np.abs(ref[both]), 1e-300)
            self.gap = max(self.gap, float(rel.max()))
        return self._time("top", top, k, u, *args, **kw)

    def _count(self, items):
        self.parts["bounded"] += items       # groups and blocks the kernel bounded
        return True

    def _numpy_bounds(self, u):
        np.unique(self.pr.version, return_inverse=True)   # the distinct versions, as before the slot table
        return self.pr.reference_bounds(u)

    def _full_sort(self, bound):
        order = np.argsort(-bound, kind="stable")
        np.unique(self.pr.version)                        # the versions still in use, as before
        return order[bound[order] > -np.inf]

    def _time(self, part, fn, *args, **kw):
        t = time.perf_counter()
        out = fn(*args, **kw)
        self.parts[part] += time.perf_counter() - t
        return out

    def take(self):
        out = dict(self.parts)
        out["selection"] = out["top"] - out["bounds"] - out["reads"]
        self.parts = dict.fromkeys(self.parts, 0.0)
        return out


def store_queries(path, queries):
    import bigsearch

    y = bigsearch.open_store(path).labels()
    start = int(np.random.default_rng(0).choice(np.flatnonzero(y == 1)))
    engine = bigsearch.LAS(path, prune=True)
    t = time.perf_counter()
    engine.tell(start, 1)
    engine.sync()
    first = engine.ask()                      # the first pruned query reads every block once... or
    print(f"initialization and first query: {time.perf_counter() - t:.1f} s "
          f"(summaries: {engine.pruning.summaries_from})", file=sys.stderr)
    clock = QueryClock(engine)
    engine.tell(first, int(y[first]))
    rows = []
    for q in range(queries):
        t = time.perf_counter()
        i = engine.ask()
        engine.tell(i, int(y[i]))
        total = time.perf_counter() - t
        rows.append({"query": total, **clock.take(), "rows": engine.query_bytes[-1] / engine.store.bytes_per_point})
    engine.close()
    for r in rows:           # the engine's query, without what was timed beside it
        r["query"] -= r["kernel_all_blocks"] + r["numpy_bounds"] + r["full_sort"]
        r["rest"] = r["query"] - r["top"]
    ms = {k: float(np.median([r[k] for r in rows])) * 1e3 for k in rows[0] if k not in ("rows", "bounded")}
    print(f"{path}: {engine.n:,} points, {engine.pruning.summaries.n_blocks:,} blocks, {queries} queries; "
          f"per query: rows read (median) {np.median([r['rows'] for r in rows]):.0f}, groups and blocks "
          f"bounded {np.median([r['bounded'] for r in rows]):.0f}; medians in ms:")
    print("  query {query:.1f}: bounds {bounds:.2f} (groups, then blocks of the groups that can win), selection "
          "{selection:.2f}, reads {reads:.1f}, rest (labels, u) {rest:.1f}".format(**ms))
    print("  on the same state: one kernel pass over every block {:.1f}; before the kernel: NumPy bounds {:.1f}, "
          "full sort {:.1f}; kernel vs NumPy bounds: largest relative gap {:.1e}".format(
              ms["kernel_all_blocks"], ms["numpy_bounds"], ms["full_sort"], clock.gap))
    return rows


def synthetic_pruner(nb, versions, scattered, r=128, p=32, seed=0):
    """A Pruner over random summaries of nb blocks. After the last full pass, ``versions``
    - 1 queries each read nb / 600 blocks (783 at 60M x 128, as the 60M run did): one run
    of blocks among the first 2% (a search staying in a cluster of positives), or
    ``scattered`` blocks anywhere (the worst case for groups: every group mixed)."""
    from bigsearch.engine.pruning.block_summaries import BlockSummaries, gram_basis
    from bigsearch.engine.pruning.las import Pruner

    rng = np.random.default_rng(seed)
    start = np.arange(nb, dtype=np.int64) * 128
    basis = gram_basis(np.cov(rng.normal(size=(4 * r, r)), rowvar=False), p)
    lo = -rng.random((nb, p))
    deg = 1e6 * (1 + rng.random(nb))
    sm = BlockSummaries(128, np.zeros(nb, np.int64), start, start + 128, basis, rng.normal(size=(nb, r)), lo,
                        -lo, rng.random(nb), rng.random(nb) + 1, rng.random(nb) + 2, deg, deg * 1.01)
    s = rng.normal(size=r) + 10
    pr = Pruner(sm, s, 1.0)
    u = rng.normal(size=r)
    pr.clock += 1
    pr._every_block_at(u, pr.clock)
    pr.best = rng.random(nb) * 0.01
    read = max(1, nb // 600)
    for v in range(1, versions):
        pr.clock += 1
        if scattered:
            blocks = rng.choice(nb, size=read, replace=False)
        else:
            blocks = rng.integers(0, max(1, nb // 50 - read)) + np.arange(read)
        pr._now_at(blocks, u + 1e-3 * v * rng.normal(size=r))
    return pr, u + 1e-3 * rng.normal(size=r)


def synthetic_blocks(nb, versions, repeats, expanded, scattered):
    """Per query, the parts of the bookkeeping that grow with the number of blocks, on
    random summaries of nb blocks (the bounds' values do not matter for their cost):
    before (NumPy bounds, a full sort), the one-level kernel, and the grouped order
    (every group's bound, the blocks of ``expanded`` groups)."""
    from bigsearch.engine.pruning.las import GroupedOrder

    pr, u = synthetic_pruner(nb, versions, scattered)
    terms = pr.version_terms(u)

    def grouped():
        GroupedOrder(pr, terms).groups.head(16, -np.inf)

    def expand():
        order = GroupedOrder(pr, terms)
        order._bound_blocks(order.groups.head(expanded, -np.inf))

    def full_sort():
        bound = pr.reference_bounds(u)
        t = time.perf_counter()
        order = np.argsort(-bound, kind="stable")
        order = order[bound[order] > -np.inf]
        np.unique(pr.version)
        return time.perf_counter() - t

    pr.bounds(u)
    expand()                                  # compile
    out = {"before: NumPy bounds and distinct versions":
           lambda: (np.unique(pr.version, return_inverse=True), pr.reference_bounds(u)),
           "before: full sort and distinct versions": full_sort,
           "one kernel pass over every block": lambda: pr.bounds(u),
           "version terms": lambda: pr.version_terms(u),
           "grouped: every group's bound and the order of the first 16": grouped,
           f"grouped: the same and the blocks of {expanded} groups": expand}
    gb = pr.sm.nbytes() / 1e9
    print(f"{nb:,} synthetic blocks (summaries {gb:.2f} GB), {len(pr.table_count)} versions"
          f"{' scattered' if scattered else ''}; "
          f"ms per query (best of {repeats}):")
    for name, fn in out.items():
        times = []
        for _ in range(repeats):
            t = time.perf_counter()
            took = fn()
            times.append(took if isinstance(took, float) else time.perf_counter() - t)
        out[name] = min(times)
        print(f"  {name}: {out[name] * 1e3:.2f}")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="what", required=True)
    s = sub.add_parser("simulate")
    s.add_argument("n", type=int)
    s.add_argument("block_rows", type=int)
    s.add_argument("order", choices=["none", "kmeans", "tree", "kmtree"])
    s.add_argument("steps", type=int, nargs="?", default=200)
    s = sub.add_parser("store")
    s.add_argument("path")
    s.add_argument("--queries", type=int, default=100)
    s = sub.add_parser("blocks")
    s.add_argument("nb", type=int)
    s.add_argument("--versions", type=int, default=20)
    s.add_argument("--repeats", type=int, default=5)
    s.add_argument("--expanded", type=int, default=32, help="groups whose blocks a query bounds")
    s.add_argument("--scattered", action="store_true", help="the blocks read since the full pass anywhere")
    args = ap.parse_args()
    from common import machine, save

    if args.what == "simulate":
        simulate(args.n, args.block_rows, args.order, args.steps)
    elif args.what == "store":
        rows = store_queries(args.path, args.queries)
        save("pruning_bookkeeping-store", {"args": vars(args), "load": os.getloadavg(), "queries": rows})
    else:
        out = synthetic_blocks(args.nb, args.versions, args.repeats, args.expanded, args.scattered)
        tag = "-scattered" if args.scattered else ""
        save(f"pruning_bookkeeping-blocks{tag}", {"args": vars(args), "load": os.getloadavg(), "seconds": out})
    print(machine(), "load", os.getloadavg())


if __name__ == "__main__":
    main()
