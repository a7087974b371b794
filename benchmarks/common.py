"""Helpers shared by the benchmark scripts: stores, timing, memory, reporting, and the harness.

Benchmarks report ratios measured in one run (the machines are shared and noisy):
the per-iteration time of a method divided by a bare streaming pass over the same
store, with the two measured alternately so a slow spell hits both. Every benchmark
records the machine's load average while it ran (``load_record``, in ``save`` and
``stamp``) and flags its figures when it went above LOADED: they are not to be compared.

The harness (benchmarks/README.md, "The harness"): ``preflight`` checks that the machine is
idle before measuring (``idle_check``: load average below LOADED, no other process busy on a
core), ``run_fresh`` runs a measurement in a fresh Python process and returns the JSON it
``report``s, ``interleave`` times variants round by round, and ``save`` writes the JSON with
the host (``machine``: lscpu's model name), the idle check and the load while it ran.
"""

import contextlib
import functools
import json
import os
import platform
import statistics
import struct
import subprocess
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
    """Write RESULTS/NAME.json: ``record`` with the benchmark's name, the time, the host
    (``machine``), the commit, the idle check before measuring (``preflight``, when the
    script made one) and the load average while it ran (``stamp``)."""
    RESULTS.mkdir(exist_ok=True)
    head = {"benchmark": name, "when": time.strftime("%Y-%m-%d %H:%M:%S"), "machine": machine(), "commit": commit()}
    if _idle_before:
        head["idle_before"] = _idle_before[0]
    record = stamp({**head, **record})
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(record, indent=2, default=float))
    print(f"saved {path}", file=sys.stderr)


def machine():
    """The host the figures were taken on: lscpu's model name, cores, memory, kernel, Python."""
    mem = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    return {"cpu": cpu_model(), "cpus": os.cpu_count(), "mem_gib": round(mem / 2**30, 1),
            "kernel": platform.release(), "python": platform.python_version(), "numpy": np.__version__}


@functools.cache
def cpu_model():
    """lscpu's "Model name" (/proc/cpuinfo's "model name" where lscpu is missing)."""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        out = ""
    try:
        with open("/proc/cpuinfo") as fh:
            out += fh.read().replace("model name", "Model name")
    except OSError:
        pass
    return next((line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("Model name")),
                platform.processor() or "?")


@functools.cache
def commit():
    """This checkout's commit (None outside a git checkout)."""
    try:
        done = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() or None


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


# Pages and counters of this process (moved here from scale/harness.py, which re-exports them).


def store_files(path):
    path = Path(path)
    return [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]


def evict(path, *stores):
    """Drop one store's pages from the page cache (other processes' caches are untouched).
    ``stores``: this process's open stores of ``path``, whose maps held across passes are
    released first: a mapped page is not dropped, so a "cold" pass over them would be warm."""
    for store in stores:
        store.release_maps()
    for f in store_files(path):
        fd = os.open(f, os.O_RDONLY)
        try:
            os.fsync(fd)                 # dirty pages (a store just written) cannot be dropped
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def cached_fraction(path):
    """Fraction of the store's bytes in the page cache (util-linux ``fincore``)."""
    files = [str(f) for f in store_files(path)]
    out = subprocess.run(["fincore", "--bytes", "--noheadings", "--raw", "--output", "RES,SIZE", *files],
                         capture_output=True, text=True, check=True).stdout.split()
    res, size = sum(map(int, out[0::2])), sum(map(int, out[1::2]))
    return res / size if size else float("nan")


def io_bytes_read():
    """Bytes this process has caused to be read from storage (/proc/self/io read_bytes):
    page-cache hits do not count, read-ahead and page faults that go to the disk do."""
    with open("/proc/self/io") as fh:
        for line in fh:
            if line.startswith("read_bytes:"):
                return int(line.split()[1])
    return 0


def status_bytes(field="VmRSS", pid="self"):
    """A memory field of /proc/PID/status in bytes (VmRSS, RssFile, RssAnon, VmHWM); 0 once
    the process is gone."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


# The harness: idle check before, a fresh process, variants interleaved, JSON out (with save).

HEAVY_CPU = 0.25  # another process using more than this share of one core while sampled: the machine is busy
_idle_before = []  # the preflight check of this run, for save()


def _cpu_ticks():
    """{pid: (name, user + system clock ticks)} of every process this one can see."""
    ticks = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as fh:
                stat = fh.read()
        except OSError:
            continue
        end = stat.rindex(")")
        fields = stat[end + 2:].split()  # from field 3 (state) on: utime and stime are fields 14 and 15
        ticks[int(entry.name)] = (stat[stat.index("(") + 1:end], int(fields[11]) + int(fields[12]))
    return ticks


def busy_processes(interval=1.0, limit=HEAVY_CPU):
    """The other processes that used more than ``limit`` of a core over ``interval`` seconds,
    busiest first: [{"pid", "name", "cpu"}] (processes of other containers are not visible;
    the load average counts them)."""
    before = _cpu_ticks()
    time.sleep(interval)
    after = _cpu_ticks()
    hz = os.sysconf("SC_CLK_TCK")
    busy = []
    for pid, (name, ticks) in after.items():
        share = (ticks - before.get(pid, (name, 0))[1]) / hz / interval
        if pid != os.getpid() and share > limit:
            busy.append({"pid": pid, "name": name, "cpu": round(share, 2)})
    return sorted(busy, key=lambda p: -p["cpu"])


def idle_check(wait=0.0, limit=LOADED, heavy=HEAVY_CPU, interval=1.0, poll=15.0):
    """Is the machine idle: a one-minute load average below ``limit`` and no other process
    above ``heavy`` of a core? Waits up to ``wait`` seconds for it (checking every ``poll``).
    Returns {"idle", "load" (1, 5, 15 minutes), "busy_processes", "waited_s", ...}."""
    start = time.monotonic()
    while True:
        busy = busy_processes(interval, heavy)
        load = os.getloadavg()
        idle = load[0] < limit and not busy
        waited = time.monotonic() - start
        if idle or waited >= wait:
            break
        time.sleep(min(poll, wait - waited))
    return {"idle": idle, "load": [round(v, 2) for v in load], "load_limit": limit,
            "busy_processes": busy[:10], "heavy_cpu": heavy, "waited_s": round(waited, 1),
            "when": time.strftime("%Y-%m-%d %H:%M:%S")}


def idle_note(check):
    busy = ", ".join(f"{p['name']} ({p['pid']}) {p['cpu']:.0%}" for p in check["busy_processes"])
    state = "idle" if check["idle"] else "NOT IDLE: figures flagged, not to be compared"
    return (f"{cpu_model()}: load average {check['load'][0]:.2f} (limit {check['load_limit']:g})"
            + (f", busy: {busy}" if busy else "") + f"; {state}")


def add_idle_arguments(parser):
    """--idle-wait and --require-idle, read by ``preflight(args)``."""
    group = parser.add_argument_group("idle check (benchmarks/common.py: preflight)")
    group.add_argument("--idle-wait", type=float, default=0.0, metavar="S",
                       help="wait up to S seconds for an idle machine before measuring (default 0)")
    group.add_argument("--require-idle", action="store_true",
                       help="stop (exit status 3) when the machine is not idle; default: measure and flag")
    return parser


@contextlib.contextmanager
def poll_idle(enabled=True):
    """While open, idle CPUs poll instead of halting (a PM QoS request of 0 us on
    /dev/cpu_dma_latency, root only). On a virtual machine a halted vCPU gives its core back
    to the host, and waking it again for the next pass's threads cost ms at random: on the
    AMD EPYC host of issue 40 the same iteration measured 13-21 ms by it (docs/performance.md,
    "What differs on AMD"). It holds for the floor and the engine alike."""
    if not enabled:
        yield
        return
    try:
        fd = os.open("/dev/cpu_dma_latency", os.O_WRONLY)
    except OSError as e:
        raise SystemExit(f"--poll-idle needs write access to /dev/cpu_dma_latency (root): {e}") from None
    try:
        os.write(fd, struct.pack("i", 0))
        yield
    finally:
        os.close(fd)


def preflight(args=None, *, wait=0.0, require=False):
    """The idle check before measuring: prints it, keeps it for ``save`` (``idle_before``) and
    returns it. ``args`` from a parser given ``add_idle_arguments`` sets wait and require;
    with ``require`` a busy machine stops the script (exit status 3)."""
    if args is not None:
        wait, require = getattr(args, "idle_wait", wait), getattr(args, "require_idle", require)
    check = idle_check(wait)
    print(idle_note(check), file=sys.stderr, flush=True)
    if require and not check["idle"]:
        print("--require-idle: not measuring on a busy machine", file=sys.stderr)
        raise SystemExit(3)
    _idle_before[:] = [check]
    return check


def run_fresh(worker, *args, timeout=None, env=None):
    """Run a measurement in a fresh Python process; the JSON object it reports.

    ``worker``: a script (a ``Path``) or Python source (a ``str``, run with ``-c`` after a line
    that puts benchmarks/ first on sys.path: ``from common import ...`` works); ``args`` follow
    as its sys.argv[1:]. This checkout comes first on the child's PYTHONPATH (benchmarks/ cannot:
    encodings.py would shadow the standard library's at start-up). The child prints its result
    as one JSON object on its last line of stdout (``report``); the lines before it and its
    stderr pass through. A failure raises RuntimeError (the child's stderr is above it)."""
    if isinstance(worker, Path):
        command = [sys.executable, str(worker)]
    else:
        command = [sys.executable, "-c", f"import sys; sys.path.insert(0, {str(ROOT)!r})\n{worker}"]
    command += [str(a) for a in args]
    path = os.pathsep.join(p for p in (str(ROOT.parent), os.environ.get("PYTHONPATH")) if p)
    t = time.perf_counter()
    done = subprocess.run(command, stdout=subprocess.PIPE, text=True, timeout=timeout,
                          env={**os.environ, "PYTHONPATH": path, **(env or {})})
    what = worker.name if isinstance(worker, Path) else "the measuring process"
    if done.returncode:
        raise RuntimeError(f"{what} failed with status {done.returncode}")
    *before, last = done.stdout.strip().splitlines() or ["null"]
    if before:
        print("\n".join(before))
    try:
        out = json.loads(last)
    except json.JSONDecodeError:
        out = None
    if not isinstance(out, dict):
        raise RuntimeError(f"{what} reported no JSON object on its last line of stdout: {last[:200]!r}")
    out.setdefault("worker_seconds", time.perf_counter() - t)
    return out


def report(result):
    """In a worker of ``run_fresh``: print ``result`` as the JSON line it returns."""
    print(json.dumps(result, default=float), flush=True)


def interleave(variants, rounds, *, rest=0.0, clock=time.perf_counter, back_to_back=1):
    """Time each variant once per round, round after round, so that a slow spell of the shared
    machine hits every variant alike: {name: [seconds, one per round]}.

    ``variants``: {name: a callable without arguments}, timed in this order every round.
    ``rest``: seconds of sleep before each variant's turn (cores at rest: floor.py's OpenMP
    workers spin for 5-10 ms after its pass). ``back_to_back``: calls of a variant timed one
    after the other in its turn, each its own entry (a round then gives ``back_to_back``
    entries, the first the one after the rest: ``first_and_warm`` splits them).
    ``clock``: time.perf_counter (wall) or time.process_time."""
    times = {name: [] for name in variants}
    for _ in range(rounds):
        for name, fn in variants.items():
            if rest:
                time.sleep(rest)
            for _ in range(back_to_back):
                t = clock()
                fn()
                times[name].append(clock() - t)
    return times


def first_and_warm(times, back_to_back):
    """``interleave``'s entries of one variant split into the first call of each turn (after
    the rest) and the calls that followed it back to back."""
    return times[::back_to_back], [t for i, t in enumerate(times) if i % back_to_back]
