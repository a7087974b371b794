"""LAS against the dense original (ASG) at n = 20,000: per-iteration speed-up (target
>= 500x) with identical queries.

Like with like: the two searches run interleaved (one LAS iteration, then one ASG
iteration, so a slow spell of the shared machine hits both), and ASG updates its n x n
inverse in place (a BLAS rank-one update, as a careful dense implementation would; the
engine's ASG builds an n x n temporary per label).

    python benchmarks/bench_asg.py [--n 20000] [--r 64] [--iterations 20]
"""

import argparse
import time

import numpy as np
from scipy.linalg.blas import dger

import bigsearch

from common import bench_store, median, save, table


class InPlaceASG(bigsearch.ASG):
    """ASG whose Sherman-Morrison update of W^-1 is a rank-one update in place (no n x n
    temporary): W^-1 -= s vW^T, done as dger on the Fortran-ordered transpose."""

    def _sync(self):
        if self._Winv is None:  # the first solve (the labels so far are in W)
            return super()._sync()
        p = self.params
        for i, _ in self._pending:
            delta = ((1.0 - p.eta) - 1.0 / (1.0 + p.w0)) / self.d[i]
            vW = (self.X @ self.X[i]) @ self._Winv
            s = (-delta * self._Winv[:, i]) / (1.0 + vW[i] * -delta)
            out = dger(-1.0, vW, s, a=self._Winv.T, overwrite_a=True)
            assert np.shares_memory(out, self._Winv)  # updated in place
        self._pending = []
        self._scores()


def timed_step(search, y, i):
    """Tell i its label and ask the next query: (seconds, next query)."""
    t = time.perf_counter()
    search.tell(i, int(y[i]))
    nxt = search.ask()
    return time.perf_counter() - t, nxt


def run_interleaved(searches, y, first, steps):
    """Each search told the same first positive, then ``steps`` iterations, one of each
    search in turn. Per search: (initialization seconds, iteration seconds, queries)."""
    inits, queries, times = [], [], [[] for _ in searches]
    for search in searches:
        search.tell(first, 1)
        t = time.perf_counter()
        queries.append([search.ask()])
        inits.append(time.perf_counter() - t)
    for _ in range(steps):
        for search, q, ts in zip(searches, queries, times):
            seconds, i = timed_step(search, y, q[-1])
            ts.append(seconds)
            q.append(i)
    return list(zip(inits, times, queries))


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--n", type=int, default=20_000)
    ap.add_argument("--r", type=int, default=64)
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--alpha", type=float, default=1e-3)
    args = ap.parse_args()
    path = bench_store(args.n, args.r, "zarr", prevalence=0.01)
    y = bigsearch.open_store(path).labels()
    first = int(np.flatnonzero(y)[0])
    searches = [bigsearch.LAS(path, alpha=args.alpha), InPlaceASG(path, alpha=args.alpha)]
    (las_init, las_t, las_q), (asg_init, asg_t, asg_q) = run_interleaved(searches, y, first, args.iterations)
    rows = [{"method": "las", "init_s": las_init, "iter_ms": 1e3 * median(las_t)},
            {"method": "asg (in place)", "init_s": asg_init, "iter_ms": 1e3 * median(asg_t)}]
    table(rows, ["method", "init_s", "iter_ms"])
    speedup = median(asg_t) / median(las_t)
    print(f"per-iteration speed-up {speedup:,.0f}x (target >= 500x); identical queries: {las_q == asg_q}")
    save("asg", {"n": args.n, "r": args.r, "alpha": args.alpha, "rows": rows, "speedup": speedup,
                 "identical_queries": las_q == asg_q, "queries": len(las_q), "interleaved": True,
                 "asg_update": "in place (BLAS dger)"})


if __name__ == "__main__":
    main()
