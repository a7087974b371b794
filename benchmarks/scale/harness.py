"""Helpers shared by the scale benchmarks: stores made by tools/make_store.py, and (from
benchmarks/common.py, the harness) page-cache eviction, I/O counters, and running a
measurement in a fresh subprocess.

Every script here reports ratios measured in one run, with the measured variants
interleaved, because the machines are shared and have slow spells.
"""

import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(HERE.parent))      # benchmarks/common.py
sys.path.insert(0, str(REPO))

from bigsearch.storage import store_format  # noqa: E402

from common import (  # noqa: E402,F401
    DATA,
    PEAK_INTERVAL,
    RESULTS,
    PeakMemory,
    add_idle_arguments,
    bare_pass_step,
    cached_fraction,
    evict,
    io_bytes_read,
    median,
    preflight,
    rng_vectors,
    run_fresh,
    save,
    status_bytes,
    store_files,
    table,
)

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


def run_worker(script, *args, timeout=3600):
    """Run ``python script args...`` in a fresh process (common.run_fresh) and return the JSON
    object on its last stdout line, with ``worker_seconds``."""
    return run_fresh(Path(script), *args, timeout=timeout)


def fit_exponent(xs, ys):
    """The slope of log y against log x (least squares): y ~ x^slope."""
    import numpy as np
    return float(np.polyfit(np.log(xs), np.log(ys), 1)[0])
