"""What BLAS's threads cost the passes that follow them: LAS or BLR iterations with every
product between passes on all cores (as before ``blas_threads``) against the default (one
thread below ``PARALLEL_WORK`` multiply-adds); for BLR also its update chunk by chunk (as
before ``blr_update_over_store``: the pool's threads one chunk at a time, this one waiting).

After a call on several threads OpenBLAS's threads spin for about 0.1 s, on the cores the
next passes need. At r = 128 the products between passes are small (K^-1's fold every 64
labels, the drift check every 100), so all-cores BLAS bought nothing and cost the iterations
after each of them. Fresh processes, the variants in turns (``--rounds`` each), each a run
of ``--iterations`` iterations (tell + ask; LAS at alpha 0.01, BLR greedy) from the store's
first positive, in the machine's own BLAS settings. Reports each variant's mean, median and 90th
percentile iteration, the iterations over 1.5x the run's median, and the ratio of the means.

    python benchmarks/blas_threads.py [--method las|blr] [--n 1000000] [--r 128] [--iterations 300] [--rounds 2]
"""

import argparse

import numpy as np

from common import add_idle_arguments, bench_store, preflight, run_fresh, save, table

WORKER = r"""
import sys, time
import numpy as np
import bigsearch
from bigsearch.engine.core import blas
from common import report
path, iterations, variant, method = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
if variant.startswith("all cores"):
    blas.PARALLEL_WORK = 0   # every product between passes on all cores, as before
if variant.endswith("chunk by chunk"):
    from bigsearch.engine.methods import blr
    object.__setattr__(blr.BLR_UPDATE, "over_store", None)   # the update chunk by chunk, as before
with (bigsearch.LAS(path, alpha=0.01) if method == "las" else bigsearch.BLR(path)) as s:
    y = s.store.labels()
    s.tell(int(np.flatnonzero(y)[0]), 1)
    i = s.ask()
    times = []
    for _ in range(iterations):
        t = time.perf_counter()
        s.tell(i, int(y[i]))
        i = s.ask()
        times.append(time.perf_counter() - t)
report({"times": times})
"""

VARIANTS = {
    "las": ("all cores", "default"),
    "blr": ("all cores, chunk by chunk", "all cores", "chunk by chunk", "default"),
}


def summary(times):
    ms = 1e3 * np.asarray(times)
    med = float(np.median(ms))
    return {
        "mean_ms": float(ms.mean()),
        "median_ms": med,
        "p90_ms": float(np.percentile(ms, 90)),
        "slow": int((ms > 1.5 * med).sum()),
        "iterations": len(ms),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--method", choices=VARIANTS, default="las")
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--r", type=int, default=128)
    ap.add_argument("--iterations", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--name", default="blas_threads")
    args = add_idle_arguments(ap).parse_args()
    preflight(args)
    path = bench_store(args.n, args.r)
    variants = VARIANTS[args.method]
    runs = {v: [] for v in variants}
    for _ in range(args.rounds):
        for v in variants:
            runs[v].append(run_fresh(WORKER, path, args.iterations, v, args.method)["times"])
    rows = [{"variant": v, "run": k, **summary(t)} for v in variants for k, t in enumerate(runs[v])]
    table(rows, ["variant", "run", "mean_ms", "median_ms", "p90_ms", "slow", "iterations"])
    mean = {v: float(np.mean([summary(t)["mean_ms"] for t in runs[v]])) for v in variants}
    ratios = {v: mean[v] / mean["default"] for v in variants}
    print("mean iteration: " + ", ".join(f"{v} {mean[v]:.2f} ms ({ratios[v]:.2f}x)" for v in variants))
    record = {"method": args.method, "n": args.n, "r": args.r, "iterations": args.iterations, "rows": rows}
    save(args.name, {**record, "mean_ms": mean, "ratio_to_default": ratios})


if __name__ == "__main__":
    main()
