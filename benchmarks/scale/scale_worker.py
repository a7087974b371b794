"""One end-to-end measurement on one store, in a fresh process (run by run_scale.py and
growth_r.py; prints one JSON line).

JIT and imports first, on a tiny store, so the peak memory reported is the run's (its
increase: anonymous, what the budget counts, and total RSS, which also counts the chunk
maps a store that fits in memory holds across passes). Then:
initialize LAS (alpha > 0) with one positive; warm: one bare pass to fill the page
cache, then --iterations rounds of [bare pass, LAS iteration] alternately; cold (unless
--no-cold): the same rounds with the store's pages evicted before every measured pass.
A LAS iteration is tell(the oracle's label of the last query) + ask(). Bytes per
iteration: X bytes the kernels received (counted at store.chunk) and bytes the process
read from the device (/proc/self/io).

    python scale_worker.py STORE [--iterations 25] [--no-cold] [--alpha 1e-3] [--threads N]
"""

import argparse
import contextlib
import json
import sys
import time

import numpy as np

import bigsearch

from harness import (  # it puts benchmarks/ (common.py) on sys.path: import from it, not from common
    PEAK_INTERVAL,
    PeakMemory,
    bare_pass_step,
    cached_fraction,
    evict,
    io_bytes_read,
    median,
    rng_vectors,
    status_bytes,
)


def warm_up_jit(tiny_path):
    tiny = bigsearch.create_store(tiny_path, np.abs(np.random.default_rng(0).random((64, 8))).astype("f4"),
                                  chunk_rows=8, overwrite=True)
    s = bigsearch.LAS(tiny, alpha=0.1, pi=0.1)
    s.tell(0, 1), s.ask(), s.tell(1, 0), s.ask()
    s.backend.map(bare_pass_step, rng_vectors(8))
    s.close()


def count_chunk_bytes(store):
    """Wrap store.chunk so that every chunk handed to a kernel adds its bytes to a counter."""
    counter = [0]
    chunk = store.chunk

    @contextlib.contextmanager
    def counting(j, whole=True):
        with chunk(j, whole) as x:
            counter[0] += x.nbytes       # a single += under the GIL: safe across the pool's threads
            yield x
    store.chunk = counting
    return counter


class Run:
    def __init__(self, search, labels, V):
        self.s, self.y, self.V = search, labels, V
        self.query = None
        self.chunk_bytes = count_chunk_bytes(search.store)

    def bare(self):
        return self._measure(lambda: self.s.backend.map(bare_pass_step, self.V))

    def iteration(self):
        def step():
            self.s.tell(self.query, int(self.y[self.query]))
            self.query = self.s.ask()
        return self._measure(step)

    def _measure(self, fn):
        c0, io0 = self.chunk_bytes[0], io_bytes_read()
        t = time.perf_counter()
        fn()
        return {"s": time.perf_counter() - t, "chunk_bytes": self.chunk_bytes[0] - c0,
                "device_bytes": io_bytes_read() - io0}


def rounds(run, iterations, cold_path=None):
    bare, its = [], []
    for _ in range(iterations):
        for out, fn in ((bare, run.bare), (its, run.iteration)):
            if cold_path is not None:
                evict(cold_path, run.s.store)
            out.append(fn())
    return summarize(bare, its)


def summarize(bare, its):
    b, i = median([m["s"] for m in bare]), median([m["s"] for m in its])
    return {"bare_ms": 1e3 * b, "iter_ms": 1e3 * i, "ratio": i / b,
            "paired_ratio": median([y["s"] / x["s"] for x, y in zip(bare, its)]),
            "iter_chunk_bytes": median([m["chunk_bytes"] for m in its]),
            "iter_device_bytes": median([m["device_bytes"] for m in its]),
            "bare_device_bytes": median([m["device_bytes"] for m in bare]),
            "bare_s": [m["s"] for m in bare], "iter_s": [m["s"] for m in its]}


def timed(fn):
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("store")
    ap.add_argument("--iterations", type=int, default=25)
    ap.add_argument("--no-cold", action="store_true")
    ap.add_argument("--alpha", type=float, default=1e-3)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--tiny", default="/tmp/scale-dev/tiny.zarr")
    args = ap.parse_args()
    warm_up_jit(args.tiny)
    peak = PeakMemory(PEAK_INTERVAL).start()
    search = bigsearch.LAS(args.store, alpha=args.alpha, n_threads=args.threads)
    y = search.store.labels()
    run = Run(search, y, rng_vectors(search.store.r))
    search.tell(int(np.flatnonzero(y == 1)[0]), 1)
    run.bare()                                          # fill the page cache: a warm initialization
    out = {"n": search.n, "r": search.store.r, "x_bytes": search.store.nbytes, "n_chunks": search.store.n_chunks,
           "threads": search.backend.n_threads, "alpha": args.alpha, "cached_at_init": cached_fraction(args.store)}
    t = time.perf_counter()
    run.query = search.ask()
    out["init_s"] = time.perf_counter() - t
    out["warm"] = rounds(run, args.iterations)
    if not args.no_cold:
        out["cold"] = rounds(run, args.iterations, cold_path=args.store)
    out["peak_rss_increase_before_refresh"] = peak.total
    out["peak_anonymous_increase_before_refresh"] = peak.anonymous
    # A refresh recomputes K^-1, J, f and the impact factor from X: an initialization
    # with every label so far, here from the page cache and from the disk.
    out["refresh_warm_s"] = timed(search.refresh)
    evict(args.store, search.store)
    out["refresh_cold_s"] = timed(search.refresh)
    out["labels"] = search.n_labeled
    out["automatic_refreshes"] = len(search.refreshes) - 2
    peak.stop()
    out["peak_rss_increase"], out["peak_anonymous_increase"] = peak.total, peak.anonymous
    out["hold_maps"] = search.store.hold_maps
    out["rss_anon_end"] = status_bytes("RssAnon")
    out["rss_file_end"] = status_bytes("RssFile")
    search.close()
    print(json.dumps(out))


if __name__ == "__main__":
    sys.exit(main())
