"""LAS against the dense original (ASG) at n = 20,000: per-iteration speed-up (target
>= 500x) with identical queries.

    python benchmarks/bench_asg.py [--n 20000] [--r 64] [--iterations 20]
"""

import argparse
import time

import numpy as np

import bigsearch

from common import bench_store, median, save, table


def run(search, y, first, steps):
    search.tell(first, 1)
    t = time.perf_counter()
    i = search.ask()
    init = time.perf_counter() - t
    queries, times = [i], []
    for _ in range(steps):
        t = time.perf_counter()
        search.tell(i, int(y[i]))
        i = search.ask()
        times.append(time.perf_counter() - t)
        queries.append(i)
    return init, times, queries


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
    las_init, las_t, las_q = run(bigsearch.LAS(path, alpha=args.alpha), y, first, args.iterations)
    asg_init, asg_t, asg_q = run(bigsearch.ASG(path, alpha=args.alpha), y, first, args.iterations)
    rows = [{"method": "las", "init_s": las_init, "iter_ms": 1e3 * median(las_t)},
            {"method": "asg", "init_s": asg_init, "iter_ms": 1e3 * median(asg_t)}]
    table(rows, ["method", "init_s", "iter_ms"])
    speedup = median(asg_t) / median(las_t)
    print(f"per-iteration speed-up {speedup:,.0f}x (target >= 500x); identical queries: {las_q == asg_q}")
    save("asg", {"n": args.n, "r": args.r, "alpha": args.alpha, "rows": rows, "speedup": speedup,
                 "identical_queries": las_q == asg_q, "queries": len(las_q)})


if __name__ == "__main__":
    main()
