#!/usr/bin/env python
"""The larger-than-RAM run as a user would do it (issue 24), each step the real command in
its own process:

1. ``tools/make_store.py STORE --n N --cluster-order 0``: the rows generated in random
   order, then cluster ordered (k-means on a sample, assignment, spill, write), the block
   summaries computed as the ordered store is written; the unordered copy is removed once
   spilled, so two copies of X at most are on disk;
2. ``bigsearch run STORE --prune --budget Q`` (LAS, alpha 0), the store evicted from the
   page cache first;
3. ``bigsearch run STORE --budget F`` (the full pass, same start), evicted again: its
   queries must be the pruned run's first F (``--full-queries``: 50 cold passes of 30 GB
   take about 20 minutes).

Recorded: every stage's seconds (make_store's own: generation, k-means, assignment, spill,
write, summaries; a run's initialization and its queries), each process's peak anonymous
memory (RssAnon, the budget's measure) and peak RSS (file-backed maps included), sampled
from outside every 50 ms, the share of X each pruned query read (mean, p90), the queries'
p50 / p90 seconds, whether the first F queries are identical, and the free disk before,
at its lowest and after (other processes on the same disk change it too: the peak
make_store states, ``peak_disk_bytes_stated``, counts only its own files). JSON to benchmarks/results/end_to_end-N.json.

    python benchmarks/end_to_end.py --n 60000000                 # the lead's run, idle machine
    python benchmarks/end_to_end.py --n 200000 --data /tmp/e2e   # a check that it works
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # this checkout's bigsearch, before an installed one

from common import DATA, add_idle_arguments, evict, las_run_command, preflight, save, status_bytes  # noqa: E402

ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE.parent), os.environ.get("PYTHONPATH", "")])}


def run_measured(cmd, disk_dir, interval=0.05):
    """Run ``cmd``; its stdout, seconds, peak RssAnon and RSS (VmHWM), and the least free disk
    under ``disk_dir`` seen meanwhile. Fails with the command's stderr if it fails."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
    peak = {"anonymous": 0, "rss": 0, "min_free_disk": shutil.disk_usage(disk_dir).free}
    done = threading.Event()

    def sample():
        while not done.wait(interval):
            peak["anonymous"] = max(peak["anonymous"], status_bytes("RssAnon", proc.pid))
            peak["rss"] = max(peak["rss"], status_bytes("VmHWM", proc.pid))
            peak["min_free_disk"] = min(peak["min_free_disk"], shutil.disk_usage(disk_dir).free)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, err = proc.communicate()
    done.set()
    sampler.join()
    if proc.returncode:
        raise SystemExit(f"{' '.join(map(str, cmd))} failed ({proc.returncode}):\n{err[-3000:]}")
    return out, time.perf_counter() - t0, peak


def make_store(args, store):
    cmd = [
        sys.executable,
        str(HERE.parent / "tools" / "make_store.py"),
        str(store),
        "--n",
        str(args.n),
        "--r",
        str(args.r),
        "--seed",
        str(args.seed),
        "--cluster-order",
        "0",
        "--quiet",
        "--overwrite",
    ]
    out, seconds, peak = run_measured(cmd, store.parent)
    made = json.loads(out.strip().splitlines()[-1])
    ordering = made["cluster_order_seconds"]
    return {
        "seconds": seconds,
        "generate_seconds": made["seconds"] - ordering,
        "cluster_order_seconds": ordering,
        "cluster_order_stages": made["cluster_order_stages"],
        "summaries_seconds": made.get("summaries_seconds"),
        "x_GB": made["x_bytes"] / 1e9,
        "cluster_order_s_per_GB": ordering / (made["x_bytes"] / 1e9),
        "peak_disk_bytes_stated": made["peak_disk_bytes"],
        "clusters": made["clusters"],
        "positives": made["positives"],
        **peak_record(peak),
    }


def peak_record(peak):
    return {
        "peak_anonymous_GiB": peak["anonymous"] / 2**30,
        "peak_rss_GiB": peak["rss"] / 2**30,
        "min_free_disk_GB": peak["min_free_disk"] / 1e9,
    }


def stored_summaries(store):
    """What ``bigsearch info`` says of the store's block summaries (the pruned run reads
    them when complete and their fingerprint matches X)."""
    cmd = [sys.executable, "-m", "bigsearch", "info", str(store), "--json"]
    done = subprocess.run(cmd, capture_output=True, text=True, env=ENV, check=True)
    return json.loads(done.stdout).get("block_summaries")


def search(args, store, out, budget, prune):
    """``bigsearch run`` on the evicted store; what its results.json says, per query."""
    evict(store)
    cmd = las_run_command(store, out, budget, "--seed", args.seed, "--overwrite", "-q")
    _, seconds, peak = run_measured(cmd + ["--prune"] * prune, store.parent)
    run = json.loads((out / "results.json").read_text())["runs"][0]
    times = np.array(run["timings"]["iteration_seconds"])
    rec = {
        "seconds": seconds,
        "queries": len(run["queries"]),
        "hits": run["hits"][-1],
        "init_seconds": run["timings"]["init_seconds"],
        "query_s_p50": float(np.median(times)),
        "query_s_p90": float(np.quantile(times, 0.9)),
        "query_s_mean": float(times.mean()),
        "pruning": run.get("pruning"),
        **peak_record(peak),
    }
    if prune and run.get("bytes_read"):
        share = np.array(run["bytes_read"]) / run["x_bytes"]
        rec.update(
            x_read_mean=float(share.mean()),
            x_read_p90=float(np.quantile(share, 0.9)),
            x_read_p50=float(np.median(share)),
        )
    return rec, [q[0] for q in run["queries"]]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=60_000_000, help="rows (default 60,000,000: 30.7 GB at r = 128)")
    ap.add_argument("--r", type=int, default=128)
    ap.add_argument("--seed", type=int, default=0, help="of the generator and of the runs' first positive")
    ap.add_argument("--queries", type=int, default=200, help="pruned queries (default 200)")
    ap.add_argument(
        "--full-queries",
        type=int,
        default=50,
        help="full-pass queries compared with the pruned run's first (default 50; 0: none)",
    )
    ap.add_argument("--data", type=Path, default=DATA, help=f"where the store is written (default {DATA})")
    ap.add_argument("--keep", action="store_true", help="keep the store afterwards (default: removed)")
    args = add_idle_arguments(ap).parse_args(argv)
    preflight(args)
    args.data.mkdir(parents=True, exist_ok=True)
    store = args.data / f"end_to_end-{args.n}.zarr"
    runs = args.data / f"end_to_end-{args.n}-runs"
    rec = {
        "n": args.n,
        "r": args.r,
        "queries": args.queries,
        "full_queries": args.full_queries,
        "free_disk_before_GB": shutil.disk_usage(args.data).free / 1e9,
    }
    try:
        rec["make_store"] = make_store(args, store)
        rec["stored_summaries"] = stored_summaries(store)
        print(f"make_store: {json.dumps(rec['make_store'])}", file=sys.stderr, flush=True)
        rec["pruned"], pruned = search(args, store, runs / "pruned", args.queries, prune=True)
        print(f"pruned run: {json.dumps(rec['pruned'])}", file=sys.stderr, flush=True)
        if args.full_queries:
            rec["full"], full = search(args, store, runs / "full", args.full_queries, prune=False)
            k = min(len(full), len(pruned))
            rec["compared_queries"] = k
            rec["identical"] = full[:k] == pruned[:k]
            rec["first_difference"] = next((i for i in range(k) if full[i] != pruned[i]), None)
            rec["full_over_pruned_query_p50"] = rec["full"]["query_s_p50"] / rec["pruned"]["query_s_p50"]
        rec["peak_disk_used_GB"] = rec["free_disk_before_GB"] - rec["make_store"]["min_free_disk_GB"]
    finally:
        shutil.rmtree(runs, ignore_errors=True)
        if not args.keep:
            shutil.rmtree(store, ignore_errors=True)
        rec["free_disk_after_GB"] = shutil.disk_usage(args.data).free / 1e9
        rec["store_kept"] = str(store) if args.keep else None
    print(json.dumps(rec, indent=2))
    save(f"end_to_end-{args.n}", rec)
    return rec


if __name__ == "__main__":
    main()
