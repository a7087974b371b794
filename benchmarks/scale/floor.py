"""What is the floor of one pass over X on this machine, and how far is the kernel from it?

../shared/docs/streaming-limits.md measured about 23 ms per GB (40-47 GB/s) for a numba
pass over a warm, memory-mapped X on an AMD EPYC host. This script measures the same
kind of floor here, with X in RAM (no page faults) and one thread per core:

  sum32        every float32 value summed in float32 (the cheapest possible read)
  sum64        every value converted to float64 and summed (the conversion LAS needs)
  stream_dots  the package's bare-pass kernel: X @ V, V of 3 x r, float64 products
and the same kernels on one small chunk that stays in the L2 cache, which shows whether a
kernel is limited by memory or by its own arithmetic. Medians of --repeats passes.

    python benchmarks/scale/floor.py [--n 2000000] [--r 128] [--repeats 7]
"""

import argparse
import os
import time
from concurrent.futures import ThreadPoolExecutor

import numba
import numpy as np

from bigsearch.kernels.common import FAST
from bigsearch.kernels.encoded import stream_dots

from harness import median, save, table


@numba.njit(nogil=True, cache=True, fastmath=True)
def sum32(x):
    total = np.float32(0.0)
    for i in range(x.shape[0]):
        for j in range(x.shape[1]):
            total += x[i, j]
    return total


@numba.njit(nogil=True, cache=True, fastmath=FAST)
def sum64(x):
    total = 0.0
    for i in range(x.shape[0]):
        for j in range(x.shape[1]):
            total += np.float64(x[i, j])
    return total


def pass_seconds(pool, kernel, chunks):
    t = time.perf_counter()
    list(pool.map(kernel, chunks))
    return time.perf_counter() - t


def in_cache_gbs(kernel, x, repeats=4000):
    kernel(x)
    t = time.perf_counter()
    for _ in range(repeats):
        kernel(x)
    return x.nbytes * repeats / (time.perf_counter() - t) / 1e9


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=2_000_000)
    ap.add_argument("--r", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args()
    X = np.random.default_rng(0).random((args.n, args.r), dtype=np.float32)
    V = np.random.default_rng(1).normal(size=(3, args.r))
    rows = 65536
    chunks = [X[a:a + rows] for a in range(0, args.n, rows)]
    kernels = {"sum32": sum32, "sum64": sum64, "stream_dots": lambda x: stream_dots(x, V)}
    out = []
    for threads in sorted({1, os.cpu_count()}):
        pool = ThreadPoolExecutor(threads)
        times = {name: [] for name in kernels}
        for name, k in kernels.items():
            pass_seconds(pool, k, chunks)                       # JIT and first touch
        for _ in range(args.repeats):                           # interleaved
            for name, k in kernels.items():
                times[name].append(pass_seconds(pool, k, chunks))
        for name, t in times.items():
            s = median(t)
            out.append({"kernel": name, "threads": threads, "where": "RAM", "ms_per_GB": 1e3 * s / (X.nbytes / 1e9),
                        "GB/s": X.nbytes / s / 1e9})
        pool.shutdown()
    small = X[:512]                                             # 256 KiB: stays in L2
    for name, k in kernels.items():
        gbs = in_cache_gbs(k, small)
        out.append({"kernel": name, "threads": 1, "where": "L2 cache", "ms_per_GB": 1e3 / gbs, "GB/s": gbs})
    table(out, ["kernel", "threads", "where", "ms_per_GB", "GB/s"])
    save("scale_floor", {"n": args.n, "r": args.r, "repeats": args.repeats, "rows": out,
                         "cpu_threads": os.cpu_count(), "numba_cpu": numba.config.CPU_NAME or "host"})


if __name__ == "__main__":
    main()
