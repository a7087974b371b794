"""Where does a bare pass lose time against the physical limit? Read paths and kernel shapes.

One pass = every chunk of X through a kernel computing X @ V (V of 3 x r, float64
accumulation), chunks mapped over a thread pool of ``--threads`` like the local backend.
Read paths (same kernel, stream_dots):
  package          store.chunk(j): mmap each chunk file, unmap after use (X never resident),
                   with and without the backend's read-ahead hint (posix_fadvise WILLNEED)
  map+populate     the same with MAP_POPULATE: the kernel fills the page table in one call
                   instead of one page fault per 64 KiB (fault-around)
  persistent       every chunk mapped once and kept: no faults after the first pass, but X
                   counts in the process's RSS
  persistent+dontneed  kept mappings, MADV_DONTNEED after each chunk: X out of RSS again
  persistent+populate+dontneed  the same, with MADV_POPULATE_READ before the kernel
  readinto         chunk files read into a reused per-thread buffer (a copy)
  RAM              X copied into process memory first (the ceiling of the kernel)
Kernel shapes over X in RAM: stream_dots (the package's row_dots: 2 rows x 3 columns per
loop), one dot product per column, and a plain sum (a memory-read reference).
Warm cache; variants interleaved, medians of --repeats rounds.

    python benchmarks/scale/read_path.py [--n 2000000] [--repeats 15] [--threads 2]
"""

import argparse
import contextlib
import mmap
import os
import time
from concurrent.futures import ThreadPoolExecutor

import numba
import numpy as np

from bigsearch.kernels.common import FAST
from bigsearch.kernels.encoded import stream_dots
from bigsearch.storage import open_store

from harness import median, save, scale_store, table


@numba.njit(nogil=True, cache=True, fastmath=FAST)
def column_dots(x, V):
    """X @ V with one dot product per (row, column): contiguous row, contiguous V row."""
    total = 0.0
    for i in range(x.shape[0]):
        for c in range(V.shape[0]):
            acc = 0.0
            for j in range(x.shape[1]):
                acc += np.float64(x[i, j]) * V[c, j]
            total += acc
    return total


@numba.njit(nogil=True, cache=True, fastmath=FAST)
def plain_sum(x, V):
    """Every value read once, summed in float64: what reading X costs without the products."""
    total = 0.0
    for i in range(x.shape[0]):
        for j in range(x.shape[1]):
            total += np.float64(x[i, j])
    return total


MADV_POPULATE_READ = 22   # Linux >= 5.14: fill the page table for a range in one call


def map_file(path, populate):
    fd = os.open(path, os.O_RDONLY)
    try:
        flags = mmap.MAP_SHARED | (mmap.MAP_POPULATE if populate else 0)
        return mmap.mmap(fd, 0, flags=flags, prot=mmap.PROT_READ)
    finally:
        os.close(fd)


class Paths:
    """Chunk providers: ``with provider(j) as x`` gives chunk j's rows."""

    def __init__(self, store):
        self.store = store
        self.files = [store._chunk_file(j) for j in range(store.n_chunks)]
        self.kept = {}         # per variant: its own mappings
        self.ram = None
        self.local = __import__("threading").local()

    def _rows(self, j, buf):
        a, b = self.store.chunks[j]
        return np.frombuffer(buf, self.store.dtype, (b - a) * self.store.r).reshape(b - a, self.store.r)

    @contextlib.contextmanager
    def package(self, j):
        with self.store.chunk(j) as x:
            yield x

    @contextlib.contextmanager
    def populate(self, j):
        mm = map_file(self.files[j], True)
        x = self._rows(j, mm)
        try:
            yield x
        finally:
            del x
            try:
                mm.close()
            except BufferError:   # the caller still holds x: unmapped when it drops it
                pass

    def _kept(self, name, j):
        if name not in self.kept:
            self.kept[name] = [map_file(f, False) for f in self.files]
        return self.kept[name][j]

    @contextlib.contextmanager
    def persistent(self, j):
        yield self._rows(j, self._kept("persistent", j))

    @contextlib.contextmanager
    def persistent_dontneed(self, j):
        mm = self._kept("dontneed", j)
        try:
            yield self._rows(j, mm)
        finally:
            mm.madvise(mmap.MADV_DONTNEED)

    @contextlib.contextmanager
    def persistent_populate_dontneed(self, j):
        mm = self._kept("populate", j)
        mm.madvise(MADV_POPULATE_READ)
        try:
            yield self._rows(j, mm)
        finally:
            mm.madvise(mmap.MADV_DONTNEED)

    @contextlib.contextmanager
    def readinto(self, j):
        buf = getattr(self.local, "buf", None)
        if buf is None:
            buf = self.local.buf = bytearray(self.store.chunk_rows * self.store.r * self.store.dtype.itemsize)
        a, b = self.store.chunks[j]
        n = (b - a) * self.store.r * self.store.dtype.itemsize
        with open(self.files[j], "rb", buffering=0) as fh:
            fh.readinto(memoryview(buf)[:n])
        yield self._rows(j, buf)

    @contextlib.contextmanager
    def in_ram(self, j):
        if self.ram is None:
            self.ram = [np.array(self._rows(i, map_file(f, False))) for i, f in enumerate(self.files)]
        yield self.ram[j]


def one_pass(pool, provider, kernel, V, n_chunks, prefetch=None):
    def task(j):
        if prefetch is not None:
            prefetch(j + pool._max_workers)
        with provider(j) as x:
            return kernel(x, V)
    t = time.perf_counter()
    sum(pool.map(task, range(n_chunks)))
    return time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=2_000_000)
    ap.add_argument("--r", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    args = ap.parse_args()
    store = open_store(scale_store(args.n, args.r))
    V = np.random.default_rng(0).normal(size=(3, args.r))
    paths = Paths(store)
    pool = ThreadPoolExecutor(args.threads)
    # (name, chunk provider, kernel, read-ahead hint)
    variants = [
        ("package, read-ahead", paths.package, stream_dots, store.prefetch),
        ("package, no read-ahead", paths.package, stream_dots, None),
        ("map+populate", paths.populate, stream_dots, None),
        ("persistent+dontneed", paths.persistent_dontneed, stream_dots, None),
        ("persistent+populate+dontneed", paths.persistent_populate_dontneed, stream_dots, None),
        ("readinto buffer", paths.readinto, stream_dots, None),
        ("persistent", paths.persistent, stream_dots, None),
        ("RAM: stream_dots", paths.in_ram, stream_dots, None),
        ("RAM: column_dots", paths.in_ram, column_dots, None),
        ("RAM: plain sum", paths.in_ram, plain_sum, None),
        ("package: column_dots", paths.package, column_dots, None),
    ]
    for name, provider, kernel, pre in variants:       # JIT, first touch, RAM copy
        one_pass(pool, provider, kernel, V, store.n_chunks, pre)
    times = {name: [] for name, *_ in variants}
    for _ in range(args.repeats):
        for name, provider, kernel, pre in variants:
            times[name].append(one_pass(pool, provider, kernel, V, store.n_chunks, pre))
    gb = store.nbytes / 1e9
    base = median(times["package, no read-ahead"])
    rows = [{"path": name, "ms": 1e3 * median(t), "GB/s": gb / median(t), "vs package": median(t) / base,
             "X resident": name == "persistent" or name.startswith("RAM")} for name, t in times.items()]
    table(rows, ["path", "ms", "GB/s", "vs package", "X resident"])
    save("scale_read_path", {"n": args.n, "r": args.r, "threads": args.threads, "repeats": args.repeats,
                             "x_bytes": store.nbytes, "chunk_rows": store.chunk_rows, "rows": rows,
                             "times_s": times})


if __name__ == "__main__":
    main()
