"""Helpers shared by the benchmark scripts: stores, timing, memory, reporting.

Benchmarks report ratios measured in one run (the machines are shared and noisy):
the per-iteration time of a method divided by a bare streaming pass over the same
store, with the two measured alternately so a slow spell hits both. Every benchmark
records the machine's load average while it ran (``load_record``, in ``save`` and
``stamp``) and flags its figures when it went above LOADED: they are not to be compared.
"""

import json
import os
import statistics
import sys
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent
RESULTS = ROOT / "results"
DATA = Path(os.environ.get("BIGSEARCH_BENCH_DATA", "/tmp/bigsearch-bench"))
sys.path.insert(0, str(ROOT.parent))

from bigsearch.backends import ChunkStep  # noqa: E402
from bigsearch.kernels.encoded import stream_dots  # noqa: E402
from bigsearch.storage import store_format  # noqa: E402
from bigsearch.synthetic import make_clustered_store  # noqa: E402
from bigsearch.testing.memory import PeakMemory, anonymous_rss, start_peak_measurement  # noqa: E402,F401
from bigsearch.testing.memory import peak_rss as peak_rss_bytes  # noqa: E402,F401

PEAK_INTERVAL = 0.01   # seconds between samples of anonymous memory in timed runs (PeakMemory)

LOADED = 2.0  # a one-minute load average above this: the figures were taken on a busy machine
LOAD_EVERY_S = 5.0
_loads = []  # the one-minute load average, sampled every LOAD_EVERY_S from this module's import


def _sample_load():
    while True:
        _loads.append(os.getloadavg()[0])
        time.sleep(LOAD_EVERY_S)


threading.Thread(target=_sample_load, daemon=True, name="load-average").start()


def load_record():
    """The load average while the benchmark ran (one-minute averages: first, highest, last
    sampled) and whether it went above LOADED (then its figures are flagged)."""
    loads = [*_loads, os.getloadavg()[0]]
    return {"first": loads[0], "max": max(loads), "last": loads[-1], "samples": len(loads),
            "limit": LOADED, "loaded": max(loads) > LOADED}


def load_note(load=None):
    """One line for the benchmark's output: the load, and the flag when it was above LOADED."""
    load = load or load_record()
    note = f"load average (1 min) {load['first']:.2f} at the start, {load['max']:.2f} at most"
    if load["loaded"]:
        note += f": LOADED (above {LOADED:g}), these figures are flagged and not to be compared"
    return note


def stamp(record):
    """``record`` with the load average (``load_average``) added; prints the load note.
    For the benchmarks that write their own results (``save`` stamps its records)."""
    load = load_record()
    print(load_note(load), file=sys.stderr)
    return {**record, "load_average": load}


def bench_store(n, r, kind="zarr", dtype="float32", prevalence=0.005, seed=0, chunk_rows=None):
    """A synthetic store under DATA, made once and reused by later runs."""
    suffix = store_format(kind).suffixes[0]
    path = DATA / f"clustered-{n}x{r}-{dtype}-{chunk_rows or 'default'}{suffix}"
    if not path.exists():
        DATA.mkdir(parents=True, exist_ok=True)
        t = time.perf_counter()
        make_clustered_store(path, n, r, prevalence=prevalence, seed=seed, dtype=dtype,
                             chunk_rows=chunk_rows, kind=kind, spread=0.7)
        print(f"wrote {path} in {time.perf_counter() - t:.1f} s", file=sys.stderr)
    return path


def _bare_pass(x, state, V):
    """One bare streaming pass: read the chunk, X @ V (V of 3 x r) in float64."""
    return stream_dots(x, V)


bare_pass_step = ChunkStep(_bare_pass, from_scratch=True)


def median(values):
    return statistics.median(values) if values else float("nan")


def timed(fn, *args):
    t = time.perf_counter()
    out = fn(*args)
    return time.perf_counter() - t, out


def save(name, record):
    RESULTS.mkdir(exist_ok=True)
    record = stamp({"benchmark": name, "when": time.strftime("%Y-%m-%d %H:%M:%S"), "machine": machine(), **record})
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(record, indent=2, default=float))
    print(f"saved {path}", file=sys.stderr)


def machine():
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), "?")
    mem = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    return {"cpus": os.cpu_count(), "cpu": cpu, "mem_gib": round(mem / 2**30, 1)}


def table(rows, columns):
    """Print rows (dicts) as a fixed-width table."""
    widths = [max(len(c), *(len(_fmt(r.get(c))) for r in rows)) for c in columns]
    print("  ".join(c.rjust(w) for c, w in zip(columns, widths)))
    for r in rows:
        print("  ".join(_fmt(r.get(c)).rjust(w) for c, w in zip(columns, widths)))


def _fmt(v):
    if isinstance(v, float):
        return f"{v:.3g}" if abs(v) < 1e4 else f"{v:,.0f}"
    return str(v)


def las_run_command(store, out, budget, *options):
    """``bigsearch run`` of LAS at alpha 0 on ``store`` (the real CLI, this interpreter)."""
    cmd = [sys.executable, "-m", "bigsearch", "run", str(store), "--method", "las", "--alpha", "0"]
    return cmd + ["--budget", str(budget), "--out", str(out), *map(str, options)]


def rng_vectors(r, k=3, seed=0):
    return np.random.default_rng(seed).normal(size=(k, r))
