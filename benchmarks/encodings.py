"""Encodings, kernel shapes, wide rows and batches (issue 12), as ratios measured in one run.

Sections (``--only dense,pages,readpath,binary,widths,batch``; readpath is not in the default):

- dense: the same 1M x 128 data (tools' clustered store) as float32, float16 and int8;
  LAS initialization from a cold cache (a new search reads X from the disk) and
  iterations (tell + ask, alpha = 1e-3), warm (the page cache as the package's own
  passes filled it) and cold (the store's pages dropped from the page cache before every
  measured pass with posix_fadvise(DONTNEED), which needs no root and leaves other
  processes' caches alone).
- pages: the dense data's LAS iteration and bare pass with and without huge-page maps
  (storage/base.py: HUGE_MAPS), rounds alternating: the store evicted, one cold
  iteration, then warm ones over the page cache as that mode filled it.
- readpath: the dense data's bare pass with the chunks mapped per pass (the package),
  kept mapped across passes, read into a buffer, or held in RAM: where a warm pass's time
  goes (wall, CPU of all threads, minor page faults).
- binary: the same 2,048-bit rows (about 4% of bits set, rows scaled to unit norm) as
  float32, float16, int8 and binary; the same measurements.
- widths: float32 stores of the same size at r = 128, 512, 2,048: a bare pass with each
  kernel shape (kernels/common.py: one row, two rows, four rows by three columns), the
  plain kernel of issue 12 (numba, parallel=True, fastmath=True, one float64 dot product
  per output column, over the memory-mapped chunk files) and a LAS iteration: ms per GB.
- batch: r = 2,048, n = 50k: a pass after one label against a pass after 500 labels told
  together (tell([...]) then sync), float32 and binary, at alpha = 0 and 1e-3; the drift
  check's time and residual.

Results: benchmarks/results/encodings.json; docs/performance.md has the tables.
"""

import argparse
import os
import sys

# The plain kernel's OpenMP threads would spin after each of its passes and take the two
# cores from whatever variant runs next (a LAS iteration measured 1.4x slower right after
# it); waiting passively does not slow the plain kernel itself (6.8 against 7.2 ms).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numba
import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bigsearch  # noqa: E402
from bigsearch.backends import ChunkStep  # noqa: E402
from bigsearch.backends.local import LocalBackend  # noqa: E402
from bigsearch.kernels import common as kc  # noqa: E402
from bigsearch.kernels.encoded import stream_dots  # noqa: E402
from bigsearch.storage import StoreWriter, open_store  # noqa: E402
from bigsearch.storage import base as storage_base  # noqa: E402
from bigsearch.storage.encoding import decode  # noqa: E402

from common import DATA, bare_pass_step, bench_store, evict, median, rng_vectors, save, table  # noqa: E402

ENC_DATA = DATA / "encodings"


# -- stores -------------------------------------------------------------------------------
def encoded_copy(src, encoding, chunks=None):
    """The data of store ``src`` written in ``encoding`` (made once, reused)."""
    src = Path(src)
    out = ENC_DATA / f"{src.stem}-{encoding}.zarr"
    if out.exists():
        return out
    ENC_DATA.mkdir(parents=True, exist_ok=True)
    s = open_store(src)
    y = s.labels()
    chunk_rows = -(-s.n // chunks) if chunks else None
    with StoreWriter(out, s.r, encoding=encoding, labels=y is not None, chunk_rows=chunk_rows) as w:
        for j, (a, b) in enumerate(s.chunks):
            with s.chunk(j) as x:
                w.append(decode(x), None if y is None else y[a:b])
    return out


def binary_rows_store(n, r, density=0.04, prevalence=0.005, seed=0, chunks=8):
    """0/1 rows (positives share a block of likely bits) scaled to unit norm, as float32."""
    path = ENC_DATA / f"bits-{n}x{r}-float32.zarr"
    if path.exists():
        return path
    ENC_DATA.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    block = 4096
    with StoreWriter(path, r, encoding="float32", labels=True, chunk_rows=-(-n // chunks)) as w:
        for a in range(0, n, block):
            m = min(block, n - a)
            y = (rng.random(m) < prevalence).astype(np.int8)
            bits = rng.random((m, r)) < density
            bits[y == 1, :64] |= rng.random(((y == 1).sum(), 64)) < 0.5
            bits[:, 0] = True
            w.append(bits / np.sqrt(bits.sum(axis=1, keepdims=True)), y)
    return path


# -- measurements -------------------------------------------------------------------------
def new_las(path, threads=None):
    return bigsearch.LAS(path, alpha=1e-3, n_threads=threads)


def minor_faults():
    """This process's minor page faults so far (/proc/self/stat): mapping page-cache pages."""
    with open("/proc/self/stat") as fh:
        return int(fh.read().rsplit(")", 1)[1].split()[7])


def measured(fn, *args):
    """(wall s, CPU s of every thread of this process, minor faults, result) of fn(*args).
    On a shared machine the CPU time is the steadier figure: the wall time also counts
    the time other processes held the cores."""
    f0, c0, t0 = minor_faults(), time.process_time(), time.perf_counter()
    out = fn(*args)
    return time.perf_counter() - t0, time.process_time() - c0, minor_faults() - f0, out


def init_time(path):
    """(wall s, CPU s, {pass: CPU s}, search) of LAS's initialization: the CPU time of each
    pass over X (column sums, the Gram pass, the rescoring pass) tells reads from products."""
    las = new_las(path)
    backend, passes = las.backend, {}
    plain_map = backend.map

    def timed_map(step, *args):
        c0 = time.process_time()
        out = plain_map(step, *args)
        name = step.run.__name__.removesuffix("_step")
        passes[name] = passes.get(name, 0.0) + time.process_time() - c0
        return out
    backend.map = timed_map
    wall, cpu, _, _ = measured(las.sync)
    backend.map = plain_map
    return wall, cpu, passes, las


def start(las):
    """Two initial labels, so that the iterations measured are ordinary ones."""
    y = las.store.labels()
    las.tell([int(np.flatnonzero(y == 1)[0]), int(np.flatnonzero(y == 0)[0])], [1, 0])
    return las.ask()


def iteration(las, i, y):
    """tell the label of the last query, ask the next one: one pass over X."""
    t = time.perf_counter()
    las.tell(int(i), int(y[i]))
    nxt = las.ask()
    return time.perf_counter() - t, nxt


def _tell_ask(las, i, y):
    las.tell(int(i), int(y[i]))
    return las.ask()


def compare_encodings(paths, rounds_warm, rounds_cold, init_rounds=1):
    """Per encoding: init, iteration and bare pass medians (warm and cold; wall and CPU
    time, minor faults of the bare pass), interleaved round by round."""
    inits = {e: [] for e in paths}
    for _ in range(init_rounds):
        for e, p in paths.items():
            evict(p)
            inits[e].append(init_time(p)[:3])
    searches = {e: new_las(p) for e, p in paths.items()}
    backends = {e: LocalBackend(s.store) for e, s in searches.items()}
    V = rng_vectors(searches["float32"].store.r)
    labels = {e: s.store.labels() for e, s in searches.items()}
    nxt = {e: start(s) for e, s in searches.items()}
    for e, s in searches.items():                          # compile and settle: not kept
        _, nxt[e] = iteration(s, nxt[e], labels[e])
        backends[e].map(bare_pass_step, V)
    times = {(e, c, what): [] for e in paths for c in ("warm", "cold") for what in ("iter", "bare")}
    for cache, rounds in (("warm", rounds_warm), ("cold", rounds_cold)):
        for _ in range(rounds):
            for e, s in searches.items():
                if cache == "cold":
                    evict(paths[e], s.store)            # the backend reads the same store object
                *m, nxt[e] = measured(_tell_ask, s, nxt[e], labels[e])
                times[(e, cache, "iter")].append(m)
                if cache == "cold":
                    evict(paths[e], s.store)
                times[(e, cache, "bare")].append(measured(backends[e].map, bare_pass_step, V)[:3])
    rows = []

    def med(e, c, what, k):
        return median([t[k] for t in times[(e, c, what)]])
    for e, s in searches.items():
        st = s.store
        row = {"encoding": e, "bytes_per_point": st.bytes_per_point, "X_MB": st.nbytes / 1e6,
               "init_s": median([t[0] for t in inits[e]]),
               "init_vs_float32": median([t[0] for t in inits[e]]) / median([t[0] for t in inits["float32"]]),
               "init_cpu_s": median([t[1] for t in inits[e]]),
               "init_cpu_vs_float32": median([t[1] for t in inits[e]]) / median([t[1] for t in inits["float32"]]),
               "init_pass_cpu_s": {k: median([t[2].get(k, 0.0) for t in inits[e]]) for k in inits[e][0][2]}}
        for c in ("warm", "cold"):
            ms = med(e, c, "iter", 0) * 1e3
            row[f"{c}_ms"] = ms
            row[f"{c}_vs_float32"] = med(e, c, "iter", 0) / med("float32", c, "iter", 0)
            row[f"{c}_GBps"] = st.nbytes / 1e9 / (ms / 1e3)
            row[f"{c}_cpu_ms"] = med(e, c, "iter", 1) * 1e3
            row[f"{c}_cpu_vs_float32"] = med(e, c, "iter", 1) / med("float32", c, "iter", 1)
            row[f"{c}_bare_ms"] = med(e, c, "bare", 0) * 1e3
            row[f"{c}_bare_vs_float32"] = med(e, c, "bare", 0) / med("float32", c, "bare", 0)
            row[f"{c}_bare_cpu_vs_float32"] = med(e, c, "bare", 1) / med("float32", c, "bare", 1)
            row[f"{c}_bare_faults"] = med(e, c, "bare", 2)
        row["rounds"] = {f"{c}_{w}": times[(e, c, w)] for c in ("warm", "cold") for w in ("iter", "bare")}
        rows.append(row)
        s.close()
        backends[e].close()
    return rows


# -- huge-page maps against 4 KiB maps ------------------------------------------------------
def page_modes(paths, rounds, warm=5):
    """Per encoding and map mode (huge pages or not: ``store.huge_maps``), rounds
    alternating: evict the store, one cold iteration (tell + ask), then ``warm``
    iterations and a bare pass over the page cache as that mode filled it; medians of
    wall, CPU and minor faults."""
    searches = {e: new_las(p) for e, p in paths.items()}
    backends = {e: LocalBackend(s.store) for e, s in searches.items()}
    labels = {e: s.store.labels() for e, s in searches.items()}
    nxt = {e: start(s) for e, s in searches.items()}
    V = rng_vectors(searches["float32"].store.r)
    modes = {"huge": True, "4k": False}
    times = {(e, m, w): [] for e in paths for m in modes for w in ("cold", "warm", "bare")}
    offered = storage_base.HUGE_MAPS
    for k in range(rounds + 1):                           # round 0 compiles: not kept
        for m, huge in modes.items():
            for e, s in searches.items():
                s.store.huge_maps = huge                  # the backend's store too: the same object
                evict(paths[e], s.store)                  # held maps too: the next ones take this mode
                *cold, nxt[e] = measured(_tell_ask, s, nxt[e], labels[e])
                ws = []
                for _ in range(warm):
                    *w, nxt[e] = measured(_tell_ask, s, nxt[e], labels[e])
                    ws.append(w)
                bare = measured(backends[e].map, bare_pass_step, V)[:3]
                if k:
                    times[(e, m, "cold")].append(cold)
                    times[(e, m, "warm")].append([median([w[i] for w in ws]) for i in range(3)])
                    times[(e, m, "bare")].append(bare)
    rows = []
    for e in paths:
        row = {"encoding": e, "huge_pages_offered": offered}
        for m in modes:
            for w in ("cold", "warm", "bare"):
                ts = times[(e, m, w)]
                row[f"{m}_{w}_ms"] = median([t[0] for t in ts]) * 1e3
                row[f"{m}_{w}_cpu_ms"] = median([t[1] for t in ts]) * 1e3
                row[f"{m}_{w}_faults"] = median([t[2] for t in ts])
        for w in ("cold", "warm", "bare"):
            row[f"huge_vs_4k_{w}"] = row[f"huge_{w}_ms"] / row[f"4k_{w}_ms"]
            row[f"{w}_vs_float32_huge"] = median([t[0] for t in times[(e, "huge", w)]]) / \
                median([t[0] for t in times[("float32", "huge", w)]])
        row["rounds"] = {f"{m}_{w}": times[(e, m, w)] for m in modes for w in ("cold", "warm", "bare")}
        rows.append(row)
    for e, s in searches.items():
        s.close()
        backends[e].close()
    return rows


# -- where a warm pass's time goes: mapping the chunks or computing ---------------------------
def _chunk_of(store, j, raw):
    a, b = store.chunks[j]
    return store._as_chunk(raw[: b - a], a, b)


def _read_into(store, j, local):
    """Chunk j's stored rows read (pread) into this thread's reused buffer (Zarr chunk files)."""
    shape = (store.chunk_rows, store.columns)
    buf = getattr(local, "buf", None)
    if buf is None or buf.shape != shape or buf.dtype != store.dtype:
        buf = local.buf = np.empty(shape, store.dtype)
    with open(store._chunk_file(j), "rb", buffering=0) as fh:
        fh.readinto(memoryview(buf).cast("B"))
    return _chunk_of(store, j, buf)


def read_paths(paths, rounds, threads=2):
    """The bare pass (X @ V, V of 3 x r) over each encoding's store with the chunks read
    four ways, interleaved round by round, wall and CPU time and minor faults:
    ``mapped`` maps each chunk and unmaps it after (the package's fast path for a store
    larger than half the memory), ``kept`` maps every chunk once and keeps the maps across
    passes (no page faults after the first pass; X's file-backed pages then count in the
    process's RSS, not in its anonymous memory: the package's path for a store that fits),
    ``pread`` copies each chunk into a
    reused buffer, ``ram`` reads copies held in memory (the kernel alone)."""
    stores = {e: open_store(p) for e, p in paths.items()}
    for st in stores.values():
        st.hold_maps = False                              # "mapped": a map per chunk per pass
    kept = {e: [st._map_chunk(j) for j in range(st.n_chunks)] for e, st in stores.items()}
    ram = {e: [np.array(raw) for raw, _ in kept[e]] for e in stores}
    local = threading.local()
    V = rng_vectors(stores["float32"].r)

    def one(e, how, j):
        st = stores[e]
        if how == "mapped":
            with st.chunk(j) as x:
                return stream_dots(x, V)
        if how == "pread":
            return stream_dots(_read_into(st, j, local), V)
        raw = kept[e][j][0] if how == "kept" else ram[e][j]
        return stream_dots(_chunk_of(st, j, raw), V)

    ways = ("mapped", "kept", "pread", "ram")
    times = {(e, w): [] for e in stores for w in ways}
    with ThreadPoolExecutor(threads) as pool:
        for k in range(rounds + 1):                       # round 0 compiles and settles: not kept
            for w in ways:
                for e, st in stores.items():
                    m = measured(lambda: list(pool.map(lambda j: one(e, w, j), range(st.n_chunks))))[:3]
                    if k:
                        times[(e, w)].append(m)
    rows = []
    for e, st in stores.items():
        row = {"encoding": e, "X_MB": st.nbytes / 1e6}
        for w in ways:
            wall, cpu = (median([t[i] for t in times[(e, w)]]) for i in (0, 1))
            base_wall, base_cpu = (median([t[i] for t in times[("float32", w)]]) for i in (0, 1))
            row[f"{w}_ms"] = wall * 1e3
            row[f"{w}_cpu_ms"] = cpu * 1e3
            row[f"{w}_cpu_vs_float32"] = cpu / base_cpu
            row[f"{w}_vs_float32"] = wall / base_wall
            row[f"{w}_faults"] = median([t[2] for t in times[(e, w)]])
        row["rounds"] = {w: times[(e, w)] for w in ways}
        rows.append(row)
    for e in stores:
        for _, release in kept[e]:
            release()
    return rows


# -- kernel shapes and widths ---------------------------------------------------------------
@numba.njit(parallel=True, fastmath=True, nogil=True)
def plain_xv(x, V, out):
    """Issue 12's reference: X @ V (V of 3 x r), one float64 dot product per output
    column, rows split over threads by numba."""
    k, r = V.shape
    for i in numba.prange(x.shape[0]):
        for c in range(k):
            s = 0.0
            for j in range(r):
                s += np.float64(x[i, j]) * V[c, j]
            out[i, c] = s


def plain_pass(store, V, out):
    for j, (a, b) in enumerate(store.chunks):
        with store.chunk(j) as x:
            plain_xv(x, V, out[a:b])


def _shape_pass(dots):
    """A bare pass over one chunk with one kernel shape, the block loop compiled too (a
    Python loop over 64-row blocks would cost more than the kernels it compares)."""
    @numba.njit(nogil=True, fastmath=kc.FAST)
    def run(x, V):
        P = np.empty((kc.ROW_BLOCK, 3))
        total = 0.0
        for i0 in range(0, x.shape[0], kc.ROW_BLOCK):
            dots(x, i0, min(i0 + kc.ROW_BLOCK, x.shape[0]), V, P)
            total += P[0, 0]
        return total
    return run


SHAPE_PASSES = {"row1": _shape_pass(kc.row1_dots), "rows2": _shape_pass(kc.rows2_dots),
                "rows4": _shape_pass(kc.rows4_dots)}


def shape_step(shape):
    run = SHAPE_PASSES[shape]
    return ChunkStep(lambda x, state, V: run(x, V), from_scratch=True)


def widths(mb, rounds):
    rows = []
    variants = ["package", "row1", "rows2", "rows4", "plain", "las"]
    setups = {}
    for r in (128, 512, 2048):
        n = int(mb * 1e6 // (4 * r))
        path = bench_store(n, r, chunk_rows=max(1, n // 8))
        store = open_store(path)
        V = rng_vectors(r)
        backend = LocalBackend(store)
        las = new_las(path)
        nxt = start(las)
        setups[r] = (store, V, backend, las, [nxt], np.empty((store.n, 3)), las.store.labels())
    times = {(r, v): [] for r in setups for v in variants}
    for k in range(rounds + 1):          # round 0 compiles for the mapped (read-only) chunks: not kept
        for r, (store, V, backend, las, nxt, out, y) in setups.items():
            for v in variants:
                t = time.perf_counter()
                if v == "package":
                    backend.map(bare_pass_step, V)
                elif v == "plain":
                    plain_pass(store, V, out)
                elif v == "las":
                    nxt[0] = iteration(las, nxt[0], y)[1]
                else:
                    backend.map(shape_step(v), V)
                if k:
                    times[(r, v)].append(time.perf_counter() - t)
    for r, (store, *_rest) in setups.items():
        gb = store.nbytes / 1e9
        row = {"r": r, "n": store.n, "X_GB": gb}
        for v in variants:
            row[f"{v}_ms_per_GB"] = median(times[(r, v)]) * 1e3 / gb
        row["las_vs_plain"] = row["las_ms_per_GB"] / row["plain_ms_per_GB"]
        rows.append(row)
    base = rows[0]["las_ms_per_GB"]
    for row in rows:
        row["las_per_GB_vs_r128"] = row["las_ms_per_GB"] / base
    return rows


# -- batches ---------------------------------------------------------------------------------
def batches(n, r, batch, rounds):
    """A pass after one label against a pass after ``batch`` labels, at alpha = 0 (J left
    behind, recomputed when read) and alpha = 1e-3 (J updated: O(n r B) products), one
    initialization per encoding (the alpha = 1e-3 search restored from the other's state)."""
    f32 = binary_rows_store(n, r)
    out = []
    for encoding, path in (("float32", f32), ("binary", encoded_copy(f32, "binary", chunks=8))):
        # The drift check (O(r^3) every 100 labels) would fall after every batch but only
        # every 100th single label; it is measured on its own instead.
        las0 = bigsearch.LAS(path, alpha=0.0, check_every=None)
        t0 = time.perf_counter()
        las0.sync()
        init = time.perf_counter() - t0
        state = las0.export_state()
        state["meta"]["params"]["alpha"] = 1e-3
        engines = {0.0: las0, 1e-3: bigsearch.LAS.from_state(path, state)}
        y = las0.store.labels()
        order = np.random.default_rng(1).permutation(las0.n)
        used = 0
        times = {(a, size): [] for a in engines for size in (1, batch)}
        for k in range(rounds):
            for size in (1, batch):
                pick = order[used:used + size]
                used += size
                for alpha, las in sorted(engines.items(), reverse=k % 2 == 1):   # each goes first in turn
                    t = time.perf_counter()
                    las.tell(pick.tolist(), y[pick].tolist())
                    las.sync()
                    times[(alpha, size)].append(time.perf_counter() - t)
        las = engines[1e-3]
        t0 = time.perf_counter()
        residual = las.inverse_residual()
        check = time.perf_counter() - t0
        for alpha, las in engines.items():
            single, multi = median(times[(alpha, 1)]), median(times[(alpha, batch)])
            out.append({"encoding": encoding, "alpha": alpha, "n": n, "r": r, "B": batch, "init_s": init,
                        "single_ms": single * 1e3, "batch_ms": multi * 1e3, "batch_vs_single": multi / single,
                        "per_label_in_batch_ms": multi * 1e3 / batch, "drift_check_ms": check * 1e3,
                        "residual": residual, "single_s": times[(alpha, 1)], "batch_s": times[(alpha, batch)]})
            las.close()
    return out


def _rounded(times):
    return {k: round(v, 3) for k, v in times.items()}


def dense_paths(n):
    """The same n x 128 data as float32, float16 and int8 stores."""
    f32 = bench_store(n, 128)
    return {"float32": f32, **{e: encoded_copy(f32, e) for e in ("float16", "int8")}}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default="dense,pages,binary,widths,batch")
    ap.add_argument("--n", type=int, default=1_000_000, help="rows of the dense r = 128 data")
    ap.add_argument("--n-bits", type=int, default=20_000, help="rows of the 2,048-bit data")
    ap.add_argument("--widths-mb", type=float, default=256, help="MB of X per width")
    ap.add_argument("--batch-n", type=int, default=50_000, help="rows of the batch data (r = 2,048)")
    ap.add_argument("--batch-rounds", type=int, default=4, help="rounds of the batch section")
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--cold-rounds", type=int, default=3)
    args = ap.parse_args()
    only = set(args.only.split(","))
    record = {"args": vars(args), "loaded": os.getloadavg()}
    if "dense" in only:
        paths = dense_paths(args.n)
        record["dense"] = compare_encodings(paths, args.rounds, args.cold_rounds)
        print("dense data, r = 128:")
        table(record["dense"], [c for c in record["dense"][0] if c not in ("rounds", "init_pass_cpu_s")])
        for row in record["dense"]:
            print(f"  {row['encoding']} init, CPU s per pass:", _rounded(row["init_pass_cpu_s"]))
    if "pages" in only:
        paths = dense_paths(args.n)
        record["pages"] = page_modes(paths, args.cold_rounds)
        print("huge-page maps against 4 KiB maps (ms; the page cache as each mode fills it):")
        table(record["pages"], [c for c in record["pages"][0] if c != "rounds" and "cpu" not in c])
    if "readpath" in only:
        paths = dense_paths(args.n)
        record["readpath"] = read_paths(paths, args.rounds)
        print("bare pass, r = 128, chunks mapped / kept mapped / read into a buffer / in RAM:")
        table(record["readpath"], [c for c in record["readpath"][0] if c != "rounds" and "faults" not in c])
    if "binary" in only:
        f32 = binary_rows_store(args.n_bits, 2048)
        paths = {"float32": f32, **{e: encoded_copy(f32, e, chunks=8) for e in ("float16", "int8", "binary")}}
        record["binary"] = compare_encodings(paths, args.rounds, args.cold_rounds)
        print("0/1 data, r = 2,048, 4% of bits set:")
        table(record["binary"], [c for c in record["binary"][0] if c not in ("rounds", "init_pass_cpu_s")])
        for row in record["binary"]:
            print(f"  {row['encoding']} init, CPU s per pass:", _rounded(row["init_pass_cpu_s"]))
    if "widths" in only:
        record["widths"] = widths(args.widths_mb, args.rounds)
        print("float32, ms per GB of X (warm):")
        table(record["widths"], list(record["widths"][0]))
    if "batch" in only:
        record["batch"] = batches(args.batch_n, 2048, 500, args.batch_rounds)
        print("a pass after 1 label and after 500 labels told together:")
        table(record["batch"], list(record["batch"][0]))
    record["loaded_after"] = os.getloadavg()
    default = set(ap.get_default("only").split(","))
    save("encodings" if only == default else "encodings_" + "_".join(sorted(only)), record)


if __name__ == "__main__":
    main()
