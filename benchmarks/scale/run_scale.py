"""End-to-end scale runs: LAS at n = 1M, 4M, 10M (r = 128, float32, default 32 MiB chunks).

For each n: the store from tools/make_store.py (its generation time is logged when it
is written), `bigsearch ingest` of that store into a new one (the ingest path at this
size), then a fresh process (scale_worker.py) that measures initialization, per-iteration
time against a bare streaming pass (interleaved, warm and cold), bytes per iteration,
the cost of a refresh, and the peak RSS, which is compared with the per-point state
(LAS keeps label 1 + degree, J, f, impact 8 each = 33 B per point in the backend, plus
the engine's own copy of the labels, 1 B: 34 B per point).
Targets (issue 7): iteration / bare pass <= 1.25 warm and cold at every n; peak RSS at
10M <= per-point state + 512 MiB; per-iteration time linear in n.

    python benchmarks/scale/run_scale.py [--ns 1000000,4000000,10000000] [--iterations 25]
"""

import argparse
import shutil
import subprocess
import sys
import time

from harness import (
    HERE,
    add_idle_arguments,
    fit_exponent,
    generation_record,
    preflight,
    run_worker,
    save,
    scale_store,
    table,
)

STATE_BYTES_PER_POINT = 34      # 33 in the backend's arrays + the engine's label copy
RSS_ALLOWANCE = 512 * 2**20


def ingest_seconds(path):
    """Time `bigsearch ingest STORE COPY` (read, check, write a new store), then delete COPY."""
    copy = path.with_name(path.stem + "-ingested.zarr")
    t = time.perf_counter()
    subprocess.run(["bigsearch", "ingest", str(path), str(copy), "--overwrite"], check=True,
                   capture_output=True, text=True)
    seconds = time.perf_counter() - t
    shutil.rmtree(copy)
    return seconds


def row(n, m, gen, ingest_s):
    state = n * STATE_BYTES_PER_POINT
    out = {"n": n, "GiB": m["x_bytes"] / 2**30, "gen_s": gen["seconds"] if gen else None, "ingest_s": ingest_s,
           "init_s": m["init_s"], "init_in_passes": m["init_s"] / (m["warm"]["bare_ms"] / 1e3),
           "refresh_warm_s": m["refresh_warm_s"], "refresh_cold_s": m["refresh_cold_s"],
           "peak_anon_MiB": m["peak_anonymous_increase"] / 2**20, "peak_increase_MiB": m["peak_rss_increase"] / 2**20,
           "peak_anon_before_refresh_MiB": m["peak_anonymous_increase_before_refresh"] / 2**20,
           "peak_before_refresh_MiB": m["peak_rss_increase_before_refresh"] / 2**20,
           "state_MiB": state / 2**20, "rss_target_MiB": (state + RSS_ALLOWANCE) / 2**20}
    for cache in ("warm", "cold"):
        c = m.get(cache)
        if c:
            out.update({f"{cache}_bare_ms": c["bare_ms"], f"{cache}_iter_ms": c["iter_ms"],
                        f"{cache}_ratio": c["ratio"], f"{cache}_GB/s": m["x_bytes"] / c["bare_ms"] / 1e6,
                        f"{cache}_iter_MB": c["iter_chunk_bytes"] / 1e6,
                        f"{cache}_disk_MB": c["iter_device_bytes"] / 1e6})
    return out


def growth(rows):
    ns = [r["n"] for r in rows]
    fits = {}
    for key in ("warm_iter_ms", "warm_bare_ms", "cold_iter_ms", "cold_bare_ms", "init_s"):
        if len(rows) >= 2 and all(r.get(key) for r in rows):
            fits[key] = fit_exponent(ns, [r[key] for r in rows])
    return fits


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ns", default="1000000,4000000,10000000")
    ap.add_argument("--r", type=int, default=128)
    ap.add_argument("--iterations", type=int, default=25)
    ap.add_argument("--no-cold", action="store_true")
    ap.add_argument("--no-ingest", action="store_true")
    args = add_idle_arguments(ap).parse_args()
    preflight(args)
    rows, raw = [], {}
    for n in map(int, args.ns.split(",")):
        path = scale_store(n, args.r)
        ingest_s = None if args.no_ingest else ingest_seconds(path)
        m = run_worker(HERE / "scale_worker.py", path, "--iterations", args.iterations,
                       *(["--no-cold"] if args.no_cold else []))
        raw[n] = m
        rows.append(row(n, m, generation_record(path), ingest_s))
        print(f"n = {n:,} done", file=sys.stderr)
    table(rows, ["n", "GiB", "gen_s", "ingest_s", "init_s", "init_in_passes", "warm_bare_ms", "warm_iter_ms",
                 "warm_ratio", "warm_GB/s", "cold_bare_ms", "cold_iter_ms", "cold_ratio", "cold_GB/s"])
    table(rows, ["n", "warm_iter_MB", "cold_iter_MB", "cold_disk_MB", "refresh_warm_s", "refresh_cold_s", "state_MiB",
                 "peak_anon_MiB", "peak_anon_before_refresh_MiB", "peak_increase_MiB", "peak_before_refresh_MiB",
                 "rss_target_MiB"])
    fits = growth(rows)
    print("exponents in n:", {k: round(v, 3) for k, v in fits.items()})
    save("scale", {"r": args.r, "iterations": args.iterations, "rows": rows, "exponents_in_n": fits,
                   "state_bytes_per_point": STATE_BYTES_PER_POINT, "raw": {str(k): v for k, v in raw.items()},
                   "targets": {"ratio": 1.25, "peak_anonymous": "per-point state + 512 MiB at 10M"}})


if __name__ == "__main__":
    main()
