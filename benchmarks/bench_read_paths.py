"""How fast can a pass read X? bigsearch's read paths against the libraries' own.

One pass = read every chunk and compute X @ V (V of r x 3, float64 accumulation).
Paths, on the same store:
  zarr-python   z[a:b] chunk by chunk, then the kernel
  h5py          read_direct into a reused buffer, then the kernel
  bigsearch     memory-mapped raw chunks (the fast path), 1 thread and all threads; the
                maps are held across passes when the store fits in half the memory
Warm: the store is in the page cache. Cold: its pages are evicted first
(posix_fadvise DONTNEED on its files, no root needed), with and without read-ahead.

    python benchmarks/bench_read_paths.py [--n 2000000] [--r 128] [--repeats 5]
"""

import argparse
import os
import time

import h5py
import numpy as np
import zarr

from bigsearch.backends.local import LocalBackend
from bigsearch.kernels.encoded import stream_dots
from bigsearch.storage import open_store

from common import bare_pass_step, bench_store, evict, median, rng_vectors, save, table


def zarr_pass(path, V):
    z = zarr.open_group(str(path), mode="r")["X"]
    m = z.chunks[0]
    return sum(stream_dots(z[a:a + m], V) for a in range(0, z.shape[0], m))


def h5py_pass(path, V):
    with h5py.File(path, "r") as fh:
        x = fh["X"]
        m = x.chunks[0]
        buf = np.empty((m, x.shape[1]), x.dtype)
        total = 0.0
        for a in range(0, x.shape[0], m):
            b = min(a + m, x.shape[0])
            x.read_direct(buf, np.s_[a:b], np.s_[0:b - a])
            total += stream_dots(buf[:b - a], V)
        return total


def bigsearch_pass(store, V, threads, readahead=True):
    backend = LocalBackend(store, threads, readahead=readahead)
    try:
        return sum(backend.map(bare_pass_step, V))
    finally:
        backend.close()


def measure(fn, repeats, cold_path=None, store=None):
    times = []
    for _ in range(repeats):
        if cold_path is not None:
            evict(cold_path, *([store] if store is not None else []))
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=2_000_000)
    ap.add_argument("--r", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    rows = []
    threads = os.cpu_count()
    for kind in ("zarr", "hdf5"):
        path = bench_store(args.n, args.r, kind)
        store = open_store(path)
        V = rng_vectors(args.r)
        gb = store.nbytes / 1e9
        library = (lambda: zarr_pass(path, V)) if kind == "zarr" else (lambda: h5py_pass(path, V))
        cases = [
            ("zarr-python z[a:b]" if kind == "zarr" else "h5py read_direct", "warm", library, None),
            ("bigsearch mmap, 1 thread", "warm", lambda: bigsearch_pass(store, V, 1), None),
            (f"bigsearch mmap, {threads} threads", "warm", lambda: bigsearch_pass(store, V, threads), None),
            ("zarr-python z[a:b]" if kind == "zarr" else "h5py read_direct", "cold", library, path),
            (f"bigsearch mmap, {threads} threads, no read-ahead", "cold",
             lambda: bigsearch_pass(store, V, threads, readahead=False), path),
            (f"bigsearch mmap, {threads} threads, read-ahead", "cold", lambda: bigsearch_pass(store, V, threads), path),
        ]
        library()   # JIT and first touch
        for name, cache, fn, cold in cases:
            t = measure(fn, args.repeats, cold, store)
            rows.append({"store": kind, "path": name, "cache": cache, "ms": 1e3 * t, "GB/s": gb / t})
    table(rows, ["store", "path", "cache", "ms", "GB/s"])
    save("read_paths", {"n": args.n, "r": args.r, "rows": rows})


if __name__ == "__main__":
    main()
