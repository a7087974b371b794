"""Helpers shared by the scale benchmarks: stores made by tools/make_store.py, page-cache
eviction, I/O counters, and running a measurement in a fresh subprocess.

Every script here reports ratios measured in one run, with the measured variants
interleaved, because the machines are shared and have slow spells.
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(HERE.parent))      # benchmarks/common.py
sys.path.insert(0, str(REPO))

from bigsearch.storage import store_format  # noqa: E402

from common import DATA, median, save, table  # noqa: E402,F401

SCALE_DATA = DATA / "scale"
GENERATION_LOG = SCALE_DATA / "generation.jsonl"


def store_path(n, r=128, dtype="float32", chunk_mib=None, codec="none", kind="zarr"):
    parts = [f"clustered-{n}x{r}-{dtype}"]
    if chunk_mib:
        parts.append(f"{chunk_mib:g}MiB")
    if codec != "none":
        parts.append(codec)
    return SCALE_DATA / ("-".join(parts) + store_format(kind).suffixes[0])


def scale_store(n, r=128, dtype="float32", chunk_mib=None, codec="none", kind="zarr"):
    """The store for these settings, written by tools/make_store.py if missing; its
    generation record (time, rate) is kept in GENERATION_LOG."""
    path = store_path(n, r, dtype, chunk_mib, codec, kind)
    if not path.exists():
        SCALE_DATA.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, str(REPO / "tools" / "make_store.py"), str(path), "--n", str(n), "--r", str(r),
               "--dtype", dtype, "--codec", codec] + (["--chunk-mib", str(chunk_mib)] if chunk_mib else [])
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip()
        with open(GENERATION_LOG, "a") as fh:
            fh.write(out + "\n")
        print(f"generated {out}", file=sys.stderr)
    return path


def generation_record(path):
    """What tools/make_store.py printed when it wrote ``path`` (None if not logged)."""
    if not GENERATION_LOG.exists():
        return None
    records = [json.loads(line) for line in GENERATION_LOG.read_text().splitlines() if line.strip()]
    return next((r for r in reversed(records) if Path(r["path"]) == Path(path)), None)


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


def status_bytes(field="VmRSS"):
    """A memory field of /proc/self/status in bytes (VmRSS, RssFile, RssAnon, VmHWM)."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


def run_worker(script, *args, timeout=3600):
    """Run ``python script args...`` and return the JSON object on its last stdout line."""
    t = time.perf_counter()
    res = subprocess.run([sys.executable, str(script), *map(str, args)], capture_output=True, text=True,
                         timeout=timeout)
    if res.returncode != 0:
        sys.stderr.write(res.stderr)
        raise RuntimeError(f"{script} {args} failed with status {res.returncode}")
    sys.stderr.write(res.stderr)
    out = json.loads(res.stdout.strip().splitlines()[-1])
    out.setdefault("worker_seconds", time.perf_counter() - t)
    return out


def fit_exponent(xs, ys):
    """The slope of log y against log x (least squares): y ~ x^slope."""
    import numpy as np
    return float(np.polyfit(np.log(xs), np.log(ys), 1)[0])
