"""Issue 24's targets against the floor of ../shared/tools/floor.py, measured in one run.

For each size (default 1M and 4M x 128 float32) and each way the store's pages got into the
page cache ("written": the store just written; "disk": evicted with posix_fadvise(DONTNEED)
and read back by the first pass), a fresh process alternates, round after round:
- the floor's pass (X . V, 3 float64 columns, over chunk maps held open: floor.py's kernel),
- one LAS iteration (tell + ask) at alpha = 0 and one at alpha = 0.01,
each after 50 ms at rest (floor.py's OpenMP workers spin for 5-10 ms after its pass), and
reports medians and the ratios (target <= 1.25). `--back-to-back K`: each turn times K calls
one after the other, as a run's iterations follow each other, and the ratios are the calls
after the first (the first's, after the rest, beside them as `first_iter_ratio_*`): on a
virtual machine whose vCPUs were idle for more than about 60 ms, the first call after the
rest often runs in a slow mode (docs/performance.md). Initialization (construct, tell one
positive, first ask) is timed against floor.py's init floor (2 Gram passes by BLAS + 1 pass):
at alpha 0 the float32 one, at alpha > 0 the float64 one (``init_floor64_s``: the Gram passes
on rows widened to float64, as exact queries need K and J), interleaved, 3 rounds (target
<= 1.5), also at 50k x 2,048.

`--batch`: the wall clock of `bigsearch run` at alpha = 0, 50k x 2,048: a batch of 500 against
a single-label query (target <= 10x), from the per-query `elapsed_seconds` of two runs, and
the run's wall against what its results account for (nothing deferred past the last query).

Variants (issue 40 item 3; benchmarks/kernel_codegen.py shows the code each one runs):
`--codegen CPU[:TOGGLES]` compiles the worker's kernels, the engine's and floor.py's, for that
CPU's tuning with this host's features (`--codegen znver5`: the instructions an AMD Zen 5 host
runs, 512-bit vectors and `row_dots`' one-row shape, which this AVX-512 Intel CPU runs too;
`--codegen host:-prefer-256-bit`: this CPU with 512-bit vectors); `--row-shape one|two` forces
`row_dots`' shape. Both compile into an empty numba cache. For threads, run the whole script
under `taskset -c 0` (the worker inherits the affinity). `--poll-idle`: idle CPUs poll instead
of halting while measuring (root), which takes the host's vCPU wake-ups out of both sides.

    python benchmarks/floor_ratios.py --floor ../shared/tools/floor.py [--sizes 1000000 4000000] [--batch]
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from common import (
    DATA,
    ROOT,
    add_idle_arguments,
    evict,
    first_and_warm,
    las_run_command,
    median,
    poll_idle,
    preflight,
    run_fresh,
    save,
    table,
)

WORKER = r"""
import os, sys, time
import numpy as np
sys.path.insert(0, os.path.dirname(os.path.abspath(sys.argv[1])))
import bigsearch
import bigsearch.kernels.common as kernel_shapes
if sys.argv[6] != "auto":  # --row-shape: row_dots' shape as another vendor's CPU gets it (read when compiled)
    kernel_shapes.ONE_ROW_SHAPE = sys.argv[6] == "one"
import floor
from common import interleave, report
path, rounds, tiny_path, init_rounds = sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
ALPHAS = (0.0, 0.01)
tiny = bigsearch.create_store(tiny_path, np.abs(np.random.rand(64, 8)).astype("f4"), chunk_rows=8, overwrite=True)
for a in ALPHAS:  # compile the engine's kernels outside the timed rounds
    s = bigsearch.LAS(tiny, alpha=a, pi=0.1); s.tell(0, 1); s.ask(); s.tell(s.ask(), 0); s.ask(); s.close()
maps, n, r = floor.chunk_maps(path)
# V on a 64-byte cache line, as the engine's (kernels.common.pad3): floor.py's own V is wherever
# NumPy put it, and off a line its pass was up to 1.15x slower on an AMD EPYC (Zen 5) core
V = kernel_shapes.pad3(np.random.default_rng(0).normal(size=(3, r)))
out = np.empty((max(m.shape[0] for m in maps), 3))
floor._xv(maps[0][:8], V, out)

def floor_pass():
    for m in maps:
        floor._xv(m, V, out)

def floor_gram():
    G = np.zeros((r, r))
    for m in maps:
        G += m.T @ m

def seconds(fn):
    t = time.perf_counter(); fn(); return time.perf_counter() - t

first_pass = seconds(floor_pass)   # the read from disk, when evicted: not a warm figure
def start(a):
    t = time.perf_counter()
    s = bigsearch.LAS(path, alpha=a); y = s.store.labels(); s.tell(int(np.flatnonzero(y)[0]), 1); i = s.ask()
    return time.perf_counter() - t, s, y, i

res = {"first_floor_pass_s": first_pass, "init": {a: [] for a in ALPHAS}, "init_floor": [], "init_floor64": []}
for _ in range(init_rounds):
    res["init_floor"].append(2 * seconds(floor_gram) + seconds(floor_pass))
    res["init_floor64"].append(2 * seconds(lambda: floor.gram64_pass(maps, r)) + seconds(floor_pass))
    for a in ALPHAS:
        t, s, y, i = start(a); s.close(); res["init"][a].append(t)
state = {a: start(a)[1:] for a in ALPHAS}

def iteration(a):
    def step():
        s, y, i = state[a]
        s.tell(i, int(y[i])); state[a] = (s, y, s.ask())
    return step

# 50 ms at rest before every timed step: floor.py's OpenMP workers spin for 5-10 ms after its
# pass, on the cores the next step needs; every variant starts from cores at rest
times = interleave({"pass": floor_pass, **{a: iteration(a) for a in ALPHAS}}, rounds, rest=0.05,
                   back_to_back=int(sys.argv[7]))
res["pass"], res["iter"] = times.pop("pass"), times
res["hold_maps"] = state[0.0][0].store.hold_maps
import numba
res["codegen"] = {"cpu": numba.config.CPU_NAME, "features": numba.config.CPU_FEATURES,
                  "one_row_shape": kernel_shapes.ONE_ROW_SHAPE}
report(res)
"""


def make(path, n, r, chunk_rows=None):
    """A store in random row order from tools/make_store.py (what the floor reads: float32, no codec)."""
    shutil.rmtree(path, ignore_errors=True)
    cmd = [
        sys.executable,
        str(ROOT.parent / "tools" / "make_store.py"),
        str(path),
        "--n",
        str(n),
        "--r",
        str(r),
        "--no-summaries",
    ]
    subprocess.run(cmd + (["--chunk-rows", str(chunk_rows)] if chunk_rows else []), check=True, capture_output=True)


def measure(floor, path, rounds, init_rounds, shape="auto", env=None, back_to_back=1):
    with tempfile.TemporaryDirectory() as tmp:
        raw = run_fresh(
            WORKER, floor, path, rounds, os.path.join(tmp, "tiny.zarr"), init_rounds, shape, back_to_back, env=env
        )
    first_passes, warm_passes = first_and_warm(raw["pass"], back_to_back)
    floor_pass, init_floor = median(warm_passes or first_passes), median(raw["init_floor"])
    init_floor64 = median(raw["init_floor64"])
    row = {
        "floor_pass_ms": 1e3 * floor_pass,
        "first_pass_ms": 1e3 * raw["first_floor_pass_s"],
        "init_floor_s": init_floor,
        "init_floor64_s": init_floor64,
        "hold_maps": raw["hold_maps"],
    }
    for a, its in raw["iter"].items():
        first, warm = first_and_warm(its, back_to_back)
        row[f"iter_ms_alpha_{a}"] = 1e3 * median(warm or first)
        row[f"iter_ratio_alpha_{a}"] = median(warm or first) / floor_pass
        if warm:  # --back-to-back: the first of each turn, after the rest, against the floor's first
            row[f"first_iter_ratio_alpha_{a}"] = median(first) / median(first_passes)
        row[f"init_s_alpha_{a}"] = median(raw["init"][a])
        # issue 40: alpha 0 against the float32 floor, alpha > 0 (K and J in float64) the float64 one
        row[f"init_ratio_alpha_{a}"] = median(raw["init"][a]) / (init_floor if float(a) == 0 else init_floor64)
    return row, raw


def floors(args):
    rows = []
    for n, r in [(n, 128) for n in args.sizes] + ([(50_000, 2048)] if args.wide else []):
        path = DATA / f"floor-{n}x{r}.zarr"
        for how in ("written", "disk"):
            if how == "written" or not path.exists():
                make(path, n, r)
            if how == "disk":
                evict(path)
            print(f"{n} x {r}, {how} ...", file=sys.stderr)
            row, raw = measure(
                args.floor, path, args.rounds, args.init_rounds, args.row_shape, args.env, args.back_to_back
            )
            rows.append({"n": n, "r": r, "store": how, **row, "raw": raw})
        shutil.rmtree(path, ignore_errors=True)
    table(
        rows,
        [
            "n",
            "r",
            "store",
            "floor_pass_ms",
            "iter_ratio_alpha_0.0",
            "iter_ratio_alpha_0.01",
            "init_floor_s",
            "init_floor64_s",
            "init_ratio_alpha_0.0",
            "init_ratio_alpha_0.01",
            "hold_maps",
        ]
        + (["first_iter_ratio_alpha_0.0", "first_iter_ratio_alpha_0.01"] if args.back_to_back > 1 else []),
    )
    return rows


def run_cli(path, out, budget, batch):
    shutil.rmtree(out, ignore_errors=True)
    t = time.perf_counter()
    subprocess.run(las_run_command(path, out, budget, "--batch-size", batch), check=True, capture_output=True)
    wall = time.perf_counter() - t
    run = json.loads((out / "results.json").read_text())["runs"][0]["timings"]
    return wall, run


def per_step(elapsed, batch):
    """Seconds between the ends of consecutive batches (the first batch holds initialization)."""
    ends = np.asarray(elapsed)[batch - 1 :: batch]
    return np.diff(ends)


def batch(args):
    path = DATA / "floor-50000x2048.zarr"
    make(path, 50_000, 2048)
    out = DATA / "floor-batch-run"
    rows = []
    for rnd in range(args.batch_rounds):
        for b, budget in ((1, 41), (500, 2000)):
            wall, timing = run_cli(path, out, budget, b)
            steps = per_step(timing["elapsed_seconds"], b)
            rows.append(
                {
                    "round": rnd,
                    "batch": b,
                    "step_s": median(steps.tolist()),
                    "steps": len(steps),
                    "run_wall_s": wall,
                    "accounted_s": timing["total_seconds"],
                    "init_s": timing["init_seconds"],
                    "compile_s": timing.get("compile_seconds"),
                }
            )
    shutil.rmtree(out, ignore_errors=True)
    shutil.rmtree(path, ignore_errors=True)
    single = median([r["step_s"] for r in rows if r["batch"] == 1])
    batched = median([r["step_s"] for r in rows if r["batch"] == 500])
    table(rows, ["round", "batch", "step_s", "steps", "init_s", "run_wall_s", "accounted_s", "compile_s"])
    print(f"batch of 500 / single-label query: {batched / single:.2f} (target <= 10)")
    return {"rows": rows, "single_s": single, "batch_s": batched, "ratio": batched / single}


def variant(args, cache):
    """args.env: the worker's environment for --codegen / --row-shape (None without them), in an
    empty numba cache (a cached kernel keeps the shape and code it was compiled with)."""
    args.env = None
    if args.codegen:
        from kernel_codegen import target_env

        name, _, toggles = args.codegen.partition(":")
        here = name if name == "host" or name.endswith("/host") else f"{name}/host"  # code that runs here
        args.env, vendor = target_env(f"{here}:{toggles}" if toggles else here, cache)
        if args.row_shape == "auto" and vendor != "auto":
            args.row_shape = "one" if vendor == "amd" else "two"
    if args.row_shape != "auto":
        args.env = args.env or {"NUMBA_CACHE_DIR": cache}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--floor", required=True, help="path of ../shared/tools/floor.py")
    ap.add_argument("--sizes", type=int, nargs="*", default=[1_000_000, 4_000_000])
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument(
        "--back-to-back",
        type=int,
        default=1,
        metavar="K",
        help="each turn times K calls one after the other (as a run's iterations follow each other), "
        "the ratios from the calls after the first; the first's (after the rest) beside them",
    )
    ap.add_argument("--init-rounds", type=int, default=3)
    ap.add_argument("--wide", action="store_true", help="also 50k x 2,048 (initialization's third size)")
    ap.add_argument("--batch", action="store_true", help="the batch-of-500 figure of `run`")
    ap.add_argument("--batch-rounds", type=int, default=2)
    ap.add_argument("--name", default="floor_ratios")
    ap.add_argument("--codegen", help="CPU[:TOGGLES]: compile for that CPU's tuning, this host's features (above)")
    ap.add_argument(
        "--row-shape",
        choices=["auto", "one", "two"],
        default="auto",
        help="row_dots' shape (auto: the --codegen CPU vendor's, else this host's)",
    )
    ap.add_argument(
        "--poll-idle",
        action="store_true",
        help="idle CPUs poll instead of halting while measuring (common.poll_idle; root)",
    )
    args = add_idle_arguments(ap).parse_args()
    preflight(args)
    record = {"floor": str(Path(args.floor).resolve())}
    with tempfile.TemporaryDirectory() as cache:
        variant(args, cache)
        if args.env:
            env = args.env | {"NUMBA_CACHE_DIR": "(empty, temporary)"}
            record["variant"] = {"codegen": args.codegen, "row_shape": args.row_shape, "env": env}
        record["poll_idle"] = args.poll_idle
        if args.sizes or args.wide:
            with poll_idle(args.poll_idle):
                record["floors"] = floors(args)
    if args.batch:
        record["batch"] = batch(args)
    save(args.name, record)


if __name__ == "__main__":
    main()
