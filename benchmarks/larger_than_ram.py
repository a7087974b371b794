#!/usr/bin/env python
"""A store larger than RAM, searched cold: the full-pass LAS engine against a bare pass, and
the pruned engine against the full-pass one (issue 11's 60M x 128 float32 run, 30.7 GB).

Each engine runs in its own process (``--worker``), so its peak RSS is its own. A worker:
warms up the JIT on a tiny store, evicts the store from the page cache
(``posix_fadvise(DONTNEED)``, no root needed), opens LAS (alpha = 0, the default, which
pruning needs) with ``prune`` on or off, tells it one positive and times that first query
(the initialization: its passes over X), then runs ``--queries`` queries (ask, then tell
the stored label), timing each and counting the bytes the process read from the device
(/proc/self/io) and, for the pruned engine, the bytes of X the query read. The full-pass
worker runs a bare pass (the package's, benchmarks/common.py: X @ V in float64 over every
chunk) before every ``--bare-every``-th query, so bare passes and queries see the same
machine. Nothing is evicted after the start: a store larger than RAM cannot stay in the
page cache across full passes (the device bytes say how much was read from the disk), and
what the pruned engine keeps cached between queries is part of what it costs.

Each worker rewrites its JSON record (results/larger_than_ram-ENGINE.json) after every
query, so a run stopped by ``--until`` (a UTC time: no query starts after it) or killed
keeps what it measured. The driver runs the workers one after the other (or at once with
``--parallel``: they then share the disk, which the record says), compares the query
sequences and writes results/larger_than_ram.json.

    python tools/make_store.py /tmp/bigbench/x60m.zarr --n 60000000 --r 128 --order generated
    python benchmarks/larger_than_ram.py /tmp/bigbench/x60m.zarr --queries 200 --pruned-queries 500
"""

import argparse
import datetime
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # this checkout's bigsearch, before an installed one

import bigsearch  # noqa: E402

from common import (  # noqa: E402
    PEAK_INTERVAL,
    RESULTS,
    PeakMemory,
    add_idle_arguments,
    bare_pass_step,
    evict,
    io_bytes_read,
    machine,
    median,
    peak_rss_bytes,
    preflight,
    rng_vectors,
    save,
    status_bytes,
)

ENGINES = ("full", "pruned")


def warm_up_jit(path):
    """Compile the kernels on a tiny store, so the measured run times no compilation."""
    rng = np.random.default_rng(0)
    X = np.abs(rng.random((4096, 8))).astype("f4")
    tiny = bigsearch.create_store(path, X, chunk_rows=512, overwrite=True)
    for prune in (False, True):
        s = bigsearch.LAS(tiny, prune=prune, pi=0.1)
        s.tell(0, 1)
        for _ in range(3):
            i = s.ask()
            s.tell(i, 0)
        s.sync()
        s.backend.map(bare_pass_step, rng_vectors(8))
        s.close()


def until_passed(until):
    return until is not None and datetime.datetime.now(datetime.UTC).strftime("%H:%M") >= until


def measured(fn):
    io0, t = io_bytes_read(), time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t, io_bytes_read() - io0


def worker(args):
    out_path = RESULTS / f"larger_than_ram-{args.worker}.json"
    warm_up_jit(Path(args.tiny))
    base_rss = status_bytes("VmRSS")
    peak = PeakMemory(PEAK_INTERVAL).start()  # anonymous (the budget's) and total, from here
    evict(args.store)
    y = bigsearch.open_store(args.store).labels()
    start = int(np.random.default_rng(0).choice(np.flatnonzero(y == 1)))
    rec = {
        "engine": args.worker,
        "store": str(args.store),
        "start": start,
        "rss_before_open": base_rss,
        "until": args.until,
        "parallel": args.parallel,
        "machine": machine(),
        "load_at_start": os.getloadavg(),
    }

    def open_and_first_query():
        s = bigsearch.LAS(args.store, prune=args.worker == "pruned")
        s.tell(start, 1)
        return s, s.ask()

    (s, query), rec["init_s"], rec["init_device_bytes"] = measured(open_and_first_query)
    rec.update(n=s.n, r=s.store.r, x_bytes=s.store.nbytes, chunk_rows=s.store.chunk_rows, alpha=s.params.alpha)
    if s.pruning is not None:
        rec["block_rows"] = s.pruning.block_rows
    V = rng_vectors(s.store.r)
    rec.update(
        queries=[query],
        query_s=[],
        device_bytes=[],
        x_read_bytes=[],
        bare_s=[],
        bare_device_bytes=[],
        bare_before_query=[],
    )
    for q in range(args.queries):
        if until_passed(args.until):
            rec["stopped"] = f"--until {args.until} UTC passed after {q} queries"
            break
        if args.worker == "full" and args.bare_every and q % args.bare_every == 0:
            _, t, dev = measured(lambda: s.backend.map(bare_pass_step, V))
            rec["bare_s"].append(t), rec["bare_device_bytes"].append(dev), rec["bare_before_query"].append(q)

        def one_query():
            s.tell(query, int(y[query]))
            return s.ask()

        query, t, dev = measured(one_query)
        rec["queries"].append(int(query)), rec["query_s"].append(t), rec["device_bytes"].append(dev)
        if s.query_bytes:
            rec["x_read_bytes"].append(int(s.query_bytes[-1]))
        rec.update(
            peak_rss=peak_rss_bytes(),
            peak_anonymous_increase=peak.anonymous,
            peak_rss_increase=peak.total,
            hold_maps=s.store.hold_maps,
            rss_anon=status_bytes("RssAnon"),
            rss_file=status_bytes("RssFile"),
            load_now=os.getloadavg(),
        )
        out_path.write_text(json.dumps(rec))
        if (q + 1) % 10 == 0:
            print(
                f"{args.worker}: {q + 1} queries, median {median(rec['query_s']) * 1e3:.0f} ms, "
                f"peak RSS {rec['peak_rss'] / 2**30:.2f} GiB (anonymous +{rec['peak_anonymous_increase'] / 2**30:.2f})",
                file=sys.stderr,
                flush=True,
            )
    rec["hits"] = int(sum(y[i] == 1 for i in rec["queries"][:-1]))
    s.close()
    out_path.write_text(json.dumps(rec))
    return rec


def run_workers(args):
    cmd = [sys.executable, __file__, str(args.store), "--tiny", args.tiny, "--bare-every", str(args.bare_every)]
    if args.until:
        cmd += ["--until", args.until]
    if args.parallel:
        cmd += ["--parallel"]
    jobs = {
        e: cmd + ["--worker", e, "--queries", str(args.queries if e == "full" else args.pruned_queries)]
        for e in args.engines.split(",")
    }
    if args.parallel:
        procs = [subprocess.Popen(c) for c in jobs.values()]
        codes = [p.wait() for p in procs]
    else:
        codes = [subprocess.run(c).returncode for c in jobs.values()]
    if any(codes):
        raise SystemExit(f"a worker failed: {dict(zip(jobs, codes))}")


def summary(args):
    recs = {
        e: json.loads((RESULTS / f"larger_than_ram-{e}.json").read_text())
        for e in ENGINES
        if (RESULTS / f"larger_than_ram-{e}.json").exists()
    }
    out = {"store": str(args.store), "parallel": any(r["parallel"] for r in recs.values()), "engines": {}}
    for e, rec in recs.items():
        qs = rec["query_s"]
        row = {
            "n": rec["n"],
            "x_GB": rec["x_bytes"] / 1e9,
            "queries": len(qs),
            "hits": rec.get("hits"),
            "init_s": rec["init_s"],
            "init_device_GB": rec["init_device_bytes"] / 1e9,
            "query_ms_median": median(qs) * 1e3,
            "query_ms_mean": float(np.mean(qs)) * 1e3,
            "query_ms_p90": float(np.quantile(qs, 0.9)) * 1e3 if qs else None,
            "query_device_GB_median": median(rec["device_bytes"]) / 1e9,
            "peak_rss_GiB": rec["peak_rss"] / 2**30,
            "peak_anon_increase_GiB": rec.get("peak_anonymous_increase", float("nan")) / 2**30,
            "rss_anon_end_GiB": rec["rss_anon"] / 2**30,
            "rss_target_GiB": (80 * rec["n"] + 512 * 2**20) / 2**30,
            "stopped": rec.get("stopped"),
        }
        if rec["bare_s"]:
            row.update(
                bare_ms_median=median(rec["bare_s"]) * 1e3,
                bare_passes=len(rec["bare_s"]),
                bare_device_GB_median=median(rec["bare_device_bytes"]) / 1e9,
            )
            row["full_over_bare"] = row["query_ms_median"] / row["bare_ms_median"]
            pairs = [qs[q] / b for q, b in zip(rec["bare_before_query"], rec["bare_s"]) if q < len(qs)]
            row["full_over_bare_paired_median"] = median(pairs)
        if rec["x_read_bytes"]:
            frac = np.array(rec["x_read_bytes"]) / rec["x_bytes"]
            row.update(
                x_read_mean=float(frac.mean()),
                x_read_median=float(np.median(frac)),
                x_read_p90=float(np.quantile(frac, 0.9)),
            )
        out["engines"][e] = row
    if len(recs) == 2:
        a, b = recs["full"]["queries"], recs["pruned"]["queries"]
        k = min(len(a), len(b))
        first_diff = next((i for i in range(k) if a[i] != b[i]), None)
        out["compared_queries"] = k
        out["identical"] = first_diff is None
        out["first_difference"] = first_diff
        full, pruned = out["engines"]["full"], out["engines"]["pruned"]
        m = min(full["queries"], pruned["queries"])
        out["speedup_median"] = median(recs["full"]["query_s"][:m]) / median(recs["pruned"]["query_s"][:m])
        out["speedup_mean"] = float(np.mean(recs["full"]["query_s"][:m]) / np.mean(recs["pruned"]["query_s"][:m]))
    return out, recs


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("store")
    ap.add_argument("--queries", type=int, default=200, help="full-pass engine queries (default 200)")
    ap.add_argument("--pruned-queries", type=int, default=500, help="pruned engine queries (default 500)")
    ap.add_argument("--bare-every", type=int, default=20, help="a bare pass before every k-th full-pass query")
    ap.add_argument("--engines", default="pruned,full", help="which workers, in this order (default pruned,full)")
    ap.add_argument("--parallel", action="store_true", help="run the workers at once (they share the disk)")
    ap.add_argument("--until", default=None, metavar="HH:MM", help="UTC time after which no query starts")
    ap.add_argument("--summary-only", action="store_true", help="summarize the workers' records, run nothing")
    ap.add_argument("--tiny", default="/tmp/bigbench-tiny.zarr")
    ap.add_argument("--worker", choices=ENGINES, help=argparse.SUPPRESS)
    args = add_idle_arguments(ap).parse_args()
    if args.worker:
        worker(args)
        return
    if not args.summary_only:
        preflight(args)
        run_workers(args)
    out, recs = summary(args)
    print(json.dumps(out, indent=2))
    save("larger_than_ram", {**out, "runs": recs})


if __name__ == "__main__":
    main()
