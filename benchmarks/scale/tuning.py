"""Tuning with evidence: chunk size, codec, read-ahead and threads, numba parallel vs the
thread pool, float32 vs float64 storage. n = 2M, r = 128 unless --n says otherwise.

Every study builds one LAS (alpha = 1e-3) per variant and then, round after round, runs
for each variant a bare streaming pass and a LAS iteration, so a slow spell of the shared
machine hits every variant alike. Warm: from the page cache; cold: the variant's store
evicted before each measured pass. Reported: medians, the pass in GB/s of X, and each
variant against the default (the store format's default chunk size, no codec, float32, read-ahead, one thread
per core). Variant stores are deleted at the end of their study unless --keep.

    python benchmarks/scale/tuning.py [--only chunk,codec,readahead,parallel,dtype] [--rounds 15]
"""

import argparse
import os
import resource
import shutil
import time
from concurrent.futures import ThreadPoolExecutor

import numba
import numpy as np

import bigsearch
from bigsearch.kernels.common import ROW_BLOCK
from bigsearch.kernels.encoded import stream_dots
from bigsearch.kernels.las import degrees, update_scores
from bigsearch.storage.format import DEFAULT_CHUNK_BYTES

from harness import bare_pass_step, evict, median, rng_vectors, save, scale_store, table

DEFAULT_MIB = DEFAULT_CHUNK_BYTES // 2**20      # the package default (32 MiB since these studies)


class Variant:
    """A LAS on one store, with a query to answer next; passes are timed one at a time."""

    def __init__(self, name, path, threads=None, readahead=True):
        self.name, self.path = name, path
        self.s = bigsearch.LAS(path, alpha=1e-3, n_threads=threads)
        self.s.backend.readahead = readahead
        self.y = self.s.store.labels()
        self.V = rng_vectors(self.s.store.r)
        self.s.tell(int(np.flatnonzero(self.y == 1)[0]), 1)
        self.query = self.s.ask()
        self.bare_s, self.iter_s, self.faults = [], [], []

    def bare(self):
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        self.bare_s.append(_timed(self.s.backend.map, bare_pass_step, self.V))
        self.faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults)

    def iteration(self):
        def step():
            self.s.tell(self.query, int(self.y[self.query]))
            self.query = self.s.ask()
        self.iter_s.append(_timed(step))

    def summary(self, reference=None):
        b, i = median(self.bare_s), median(self.iter_s)
        out = {"variant": self.name, "bare_ms": 1e3 * b, "iter_ms": 1e3 * i, "ratio": i / b,
               "GB/s": self.s.store.nbytes / b / 1e9, "faults/pass": median(self.faults)}
        if reference is not None:
            out["iter_vs_default"] = i / median(reference.iter_s)
        return out

    def close(self):
        self.s.close()


def _timed(fn, *args):
    t = time.perf_counter()
    fn(*args)
    return time.perf_counter() - t


def evict_variant(variants, v):
    """Drop v's store from the page cache, with the maps every variant over it holds."""
    evict(v.path, *[u.s.store for u in variants if u.path == v.path])


def interleave(variants, rounds, cold):
    for v in variants:
        v.bare_s, v.iter_s, v.faults = [], [], []
    for _ in range(rounds):
        for v in variants:
            for fn in (v.bare, v.iteration):
                if cold:
                    evict_variant(variants, v)
                fn()


def study(name, variants, rounds, cold_rounds, reference_name):
    rows = []
    for cache, n_rounds in (("warm", rounds), ("cold", cold_rounds)):
        if not n_rounds:
            continue
        for v in variants:            # the same cache history for every variant: read from the disk
            evict_variant(variants, v)
            v.bare()
        interleave(variants, n_rounds, cache == "cold")
        ref = next(v for v in variants if v.name == reference_name)
        rows += [{"cache": cache, **v.summary(ref)} for v in variants]
    print(f"\n{name}")
    table(rows, ["cache", "variant", "bare_ms", "iter_ms", "ratio", "GB/s", "iter_vs_default", "faults/pass"])
    return rows


def chunk_study(n, rounds, cold_rounds, keep, sizes=(2, 4, 8, 16, 32, 64, 128)):
    paths = {mib: scale_store(n, chunk_mib=None if mib == DEFAULT_MIB else mib) for mib in sizes}
    variants = [Variant(f"{mib} MiB", paths[mib]) for mib in sizes]
    rows = study("chunk size", variants, rounds, cold_rounds, f"{DEFAULT_MIB} MiB")
    _finish(variants, [p for mib, p in paths.items() if mib != DEFAULT_MIB], keep)
    return rows


def codec_study(n, rounds, cold_rounds, keep):
    paths = {c: scale_store(n, codec=c) for c in ("none", "lz4", "zstd")}
    variants = [Variant(c if c != "lz4" else "blosc-lz4", p) for c, p in paths.items()]
    rows = study("codec", variants, rounds, cold_rounds, "none")
    for row in rows:
        codec = "lz4" if row["variant"] == "blosc-lz4" else row["variant"]
        row["disk_MB"] = _disk(paths[codec]) / 1e6
    _finish(variants, [p for c, p in paths.items() if c != "none"], keep)
    return rows


def dtype_study(n, rounds, cold_rounds, keep):
    paths = {d: scale_store(n, dtype=d) for d in ("float32", "float64")}
    variants = [Variant(d, p) for d, p in paths.items()]
    rows = study("storage dtype", variants, rounds, cold_rounds, "float32")
    _finish(variants, [paths["float64"]], keep)
    return rows


def readahead_study(n, rounds, cold_rounds, keep):
    path = scale_store(n)
    cpus = os.cpu_count()
    variants = [Variant(f"{t} threads, read-ahead {'on' if ra else 'off'}", path, threads=t, readahead=ra)
                for t in sorted({1, cpus, 2 * cpus}) for ra in (True, False)]
    rows = study("read-ahead and threads", variants, rounds, cold_rounds, f"{cpus} threads, read-ahead on")
    _finish(variants, [], keep)
    return rows


# -- numba parallel (prange inside a chunk) against the thread pool (chunks in parallel) --
@numba.njit(nogil=True, parallel=True, cache=True)
def stream_dots_prange(x, V):
    blocks = (x.shape[0] + ROW_BLOCK * 16 - 1) // (ROW_BLOCK * 16)
    parts = np.zeros(blocks)
    for k in numba.prange(blocks):
        a = k * ROW_BLOCK * 16
        parts[k] = stream_dots(x[a:min(a + ROW_BLOCK * 16, x.shape[0])], V)
    return parts.sum()


@numba.njit(nogil=True, parallel=True, cache=True)
def update_scores_prange(x, V, c, offset, label, deg, J, f, im, eta, w0, pi, t_prev, parts):
    """The LAS kernel with the chunk split in ``parts`` slices computed in parallel."""
    m = x.shape[0]
    step = (m + parts - 1) // parts
    sums = np.zeros((parts, 3))
    for k in numba.prange(parts):
        a, b = k * step, min(m, (k + 1) * step)
        res = update_scores(x[a:b], V, c, offset + a, label[a:b], deg[a:b], J[a:b], f[a:b], im[a:b],
                            eta, w0, pi, t_prev)
        sums[k] = res[0]
    return sums.sum(axis=0)


def parallel_study(n, rounds, cold_rounds, keep):
    """Kernels alone over the store's chunks (the engine is not involved): serial kernels
    on a pool of one thread per core, against parallel kernels called chunk after chunk."""
    store = bigsearch.open_store(scale_store(n))
    cpus = os.cpu_count()
    r = store.r
    V = np.random.default_rng(0).normal(size=(3, r)) * 1e-3
    c = np.array([1e-6])
    label = np.full(store.n, -1, np.int8)
    deg, J, f, im = (np.zeros(store.n) for _ in range(4))
    s = np.ones(r)
    for j, (a, b) in enumerate(store.chunks):
        with store.chunk(j) as x:
            degrees(x, s, deg[a:b])
    J[:] = 1e-3

    def las(kernel_parallel):
        def step(j):
            a, b = store.chunks[j]
            with store.chunk(j) as x:
                args = (x, V, c, a, label[a:b], deg[a:b], J[a:b], f[a:b], im[a:b], 0.5, 1 / store.n, 0.005, 0.0)
                return update_scores_prange(*args, cpus) if kernel_parallel else update_scores(*args)
        return step

    def bare(kernel_parallel):
        def step(j):
            with store.chunk(j) as x:
                return stream_dots_prange(x, V) if kernel_parallel else stream_dots(x, V)
        return step

    pools = {"pool": ThreadPoolExecutor(cpus), "serial": ThreadPoolExecutor(1)}
    threads = numba.config.NUMBA_NUM_THREADS
    cases = {f"bare: serial kernel, pool of {cpus}": (pools["pool"], bare(False)),
             f"bare: prange kernel ({threads} threads), chunks in turn": (pools["serial"], bare(True)),
             f"LAS kernel: serial, pool of {cpus}": (pools["pool"], las(False)),
             f"LAS kernel: prange ({threads} threads), chunks in turn": (pools["serial"], las(True))}
    times = {k: [] for k in cases}
    for _ in range(2):
        for pool, step in cases.values():
            list(pool.map(step, range(store.n_chunks)))
    for _ in range(rounds):
        for k, (pool, step) in cases.items():
            times[k].append(_timed(lambda: list(pool.map(step, range(store.n_chunks)))))
    rows = [{"cache": "warm", "variant": k, "ms": 1e3 * median(t), "GB/s": store.nbytes / median(t) / 1e9,
             "threading_layer": numba.threading_layer()} for k, t in times.items()]
    print("\nnumba parallel vs thread pool")
    table(rows, ["variant", "ms", "GB/s", "threading_layer"])
    for p in pools.values():
        p.shutdown()
    return rows


def _disk(path):
    from bigsearch.storage.base import disk_bytes
    return disk_bytes(path)


def _finish(variants, made_paths, keep):
    for v in variants:
        v.close()
    if not keep:
        for p in made_paths:
            shutil.rmtree(p) if p.is_dir() else p.unlink()


STUDIES = {"chunk": chunk_study, "codec": codec_study, "readahead": readahead_study,
           "parallel": parallel_study, "dtype": dtype_study}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=2_000_000)
    ap.add_argument("--only", default=",".join(STUDIES))
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--cold-rounds", type=int, default=5)
    ap.add_argument("--keep", action="store_true", help="keep the variant stores")
    ap.add_argument("--chunk-mib", default=None, help="chunk sizes to compare, e.g. 8,16,32,64")
    args = ap.parse_args()
    results = {}
    for name in args.only.split(","):
        extra = {"sizes": [int(m) for m in args.chunk_mib.split(",")]} if name == "chunk" and args.chunk_mib else {}
        results[name] = STUDIES[name](args.n, args.rounds, args.cold_rounds, args.keep, **extra)
        save(f"scale_tuning_{name}", {"n": args.n, "r": 128, "rounds": args.rounds,
                                      "cold_rounds": args.cold_rounds, "rows": results[name]})


if __name__ == "__main__":
    main()
