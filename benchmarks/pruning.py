#!/usr/bin/env python
"""Pruned LAS queries (engine/pruning/las.py): the share of X each query reads, and the time
per query against the full-pass engine, in one run.

For each store: the full-pass and the pruned engine start from the same labels and run
in lockstep for the first ``--compare`` queries (each query asserted identical, each
round timed for both, so a slow spell of the shared machine hits both); the pruned
engine then continues alone to ``--queries``. Reported per store: the fraction of X
read per query (mean, median, 90th percentile, over the queries after the first),
and the median time per round of each engine and their ratio.

Stores: the tools/ generator's clustered data (n x 128 float32, spread 0.7) in generated
(random) order and in cluster order (ingest/cluster_order.py, timed: the cost of the
ordering per GB), with several block sizes; and the real data sets of docs/ingest.md
(Adult, MNIST, HIGGS from ../shared/datasets), in their own order and in cluster order.

    python benchmarks/pruning.py --n 1000000 --queries 300 --compare 100
    python benchmarks/pruning.py --n 200000 --datasets adult,mnist,higgs
"""

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

import bigsearch
from bigsearch import datasets
from bigsearch.errors import DatasetError
from bigsearch.ingest.cluster_order import cluster_order
from bigsearch.synthetic import make_clustered_store

from common import DATA, ROOT, bench_store, machine, median, save, table

MIRROR = ROOT.parent.parent / "shared" / "datasets"   # the default mirror of `bigsearch datasets` here
if MIRROR.is_dir():
    os.environ.setdefault(datasets.MIRROR_ENV, str(MIRROR))
SHARED = datasets.data_dir()      # the cache: NAME/FILE, like the mirror; filled by fetch() below
RECIPES = {   # docs/ingest.md
    "adult": (["adult/adult.data", "adult/adult.test"], ["--label-column", "14", "--positive", ">50K",
              "--positive", ">50K.", "--bins", "5", "--normalize", "--prevalence", "0.05", "--seed", "0"]),
    "mnist": (["mnist/t10k-images-idx3-ubyte.gz"], ["--labels", f"{SHARED}/mnist/t10k-labels-idx1-ubyte.gz",
              "--positive", "1", "--normalize", "--prevalence", "0.01", "--seed", "0"]),
    "higgs": (["higgs/lightgbm_binary.train"], ["--label-column", "0", "--normalize", "--bias", "--rff", "290",
              "--gamma", "1", "--prevalence", "0.01", "--seed", "0"]),
}


def ordered_copy(path):
    """The store with rows in cluster order (made once); returns (path, seconds or None)."""
    out = path.with_name(path.stem + "-clustered" + path.suffix)
    if out.exists():
        return out, None
    t = time.perf_counter()
    cluster_order(path, out)
    return out, time.perf_counter() - t


def generated_store(n, prevalence):
    if prevalence == 0.005:
        return bench_store(n, 128)               # shared with the other benchmarks
    path = DATA / f"clustered-{n}x128-p{prevalence:g}.zarr"
    if not path.exists():
        make_clustered_store(path, n, 128, prevalence=prevalence, seed=0, spread=0.7)
    return path


def ingested(name):
    path = DATA / f"{name}.zarr"
    if not path.exists():
        sources, flags = RECIPES[name]
        subprocess.run([sys.executable, "-m", "bigsearch", "ingest", *[SHARED / s for s in sources], path, *flags,
                        "-q"], check=True)
    return path


def compare(path, queries, compare_first, block_rows, backend="local", method="las"):
    """Lockstep full vs pruned for ``compare_first`` queries, then pruned alone."""
    y = bigsearch.open_store(path).labels()
    start = int(np.random.default_rng(0).choice(np.flatnonzero(y == 1)))
    cls = bigsearch.LAS if method == "las" else bigsearch.WNAS
    full = cls(path, backend=backend) if compare_first else None
    pruned = cls(path, prune=True, block_rows=block_rows, backend=backend)
    t_full, t_pruned, t_init = [], [], {}
    for name, s in (("full", full), ("pruned", pruned)):
        if s is not None:
            t = time.perf_counter()
            s.tell(start, 1)
            s.sync()
            t_init[name] = time.perf_counter() - t
    hits = 0
    for q in range(min(queries, pruned.n - 1)):
        t = time.perf_counter()
        i = pruned.ask()
        pruned.tell(i, int(y[i]))
        pruned.sync()
        t_pruned.append(time.perf_counter() - t)
        if full is not None and q < compare_first:
            t = time.perf_counter()
            j = full.ask()
            full.tell(j, int(y[j]))
            full.sync()
            t_full.append(time.perf_counter() - t)
            assert i == j, f"query {q}: pruned {i}, full pass {j}"
        hits += int(y[i] == 1)
        if q % 50 == 49:
            print(f"{path.name}: {q + 1} queries, {hits} hits, last {t_pruned[-1] * 1e3:.0f} ms pruned"
                  + (f", {t_full[-1] * 1e3:.0f} ms full" if q < len(t_full) else ""), file=sys.stderr, flush=True)
    frac = np.array(pruned.query_bytes[1:]) / pruned.store.nbytes
    name = path.name + ("" if backend == "local" else " (dask, 2 workers)") + ("" if method == "las" else " WNAS")
    out = {"store": name, "n": pruned.n, "r": pruned.store.r, "block_rows": block_rows, "queries": len(t_pruned),
           "hits": hits, "read_mean": float(frac.mean()), "read_median": float(np.median(frac)),
           "read_p90": float(np.quantile(frac, 0.9)), "read_last100": float(frac[-100:].mean()),
           "identical_first": len(t_full)}
    if getattr(pruned.pruning, "summaries", None) is not None:    # LAS, local (the workers keep theirs)
        out["summary_MiB"] = pruned.pruning.summaries.nbytes() / 2**20
        out["summaries_from"] = pruned.pruning.summaries_from
    out.update({f"init_s_{k}": v for k, v in t_init.items()})
    out["ms_pruned_all"] = median(t_pruned) * 1e3
    out["ms_pruned_p90"] = float(np.quantile(t_pruned, 0.9)) * 1e3
    if t_full:
        out.update(ms_full=median(t_full) * 1e3, ms_pruned=median(t_pruned[:len(t_full)]) * 1e3)
        out["speedup"] = out["ms_full"] / out["ms_pruned"]
    for s in (full, pruned):
        if s is not None:
            s.close()
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--prevalence", type=float, default=0.005,
                    help="positives in the generated store (lower: the search must move between clusters)")
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--compare", type=int, default=100, help="queries run in lockstep with the full pass")
    ap.add_argument("--block-rows", default="64,128,256")
    ap.add_argument("--datasets", default="adult,mnist,higgs")
    ap.add_argument("--no-random-order", action="store_true", help="skip the generated (random) order")
    ap.add_argument("--tag", default="", help="results go to results/pruning-TAG.json")
    ap.add_argument("--wnas", action="store_true", help="only WNAS on the cluster-ordered generated store")
    ap.add_argument("--cluster", action="store_true",
                    help="only the cluster-ordered generated store, on a LocalCluster of 2 worker processes")
    ap.add_argument("--store", help="only this (cluster-ordered) store, e.g. one tools/make_store.py wrote")
    args = ap.parse_args()
    blocks = [int(b) for b in args.block_rows.split(",")]
    rows, notes = [], {}
    if args.store:
        rows.append(compare(Path(args.store), args.queries, args.compare, blocks[0]))
        table(rows, ["store", "n", "queries", "hits", "read_mean", "read_median", "read_p90", "read_last100",
                     "ms_full", "ms_pruned", "speedup", "ms_pruned_all", "init_s_full", "init_s_pruned"])
        print(machine(), os.getloadavg())
        save("pruning" + (f"-{args.tag}" if args.tag else ""), {"args": vars(args), "rows": rows,
                                                                 "load": os.getloadavg()})
        return
    base = generated_store(args.n, args.prevalence)
    ordered, seconds = ordered_copy(base)
    if seconds is not None:
        gb = bigsearch.open_store(base).nbytes / 1e9
        notes["cluster_order"] = {"store": base.name, "seconds": seconds, "seconds_per_GB": seconds / gb}
    if args.wnas:
        rows.append(compare(ordered, args.queries, args.compare, blocks[0], method="wnas"))
        blocks, args.no_random_order, args.datasets = [], True, ""
    if args.cluster:
        from distributed import Client, LocalCluster
        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cl, \
                Client(cl) as client:
            rows.append(compare(ordered, args.queries, args.compare, blocks[0], client))
        blocks, args.no_random_order, args.datasets = [], True, ""
    for b in blocks:
        rows.append(compare(ordered, args.queries, args.compare if b == blocks[0] else 0, b))
        print(rows[-1], file=sys.stderr)
    if not args.no_random_order:
        rows.append(compare(base, args.queries, args.compare, blocks[0]))
    for name in filter(None, args.datasets.split(",")):
        try:
            datasets.fetch(name)
        except DatasetError as e:
            notes[name] = f"skipped: {e}"
            continue
        path = ingested(name)
        rows.append(compare(path, args.queries, args.compare, blocks[0]))
        rows.append(compare(ordered_copy(path)[0], args.queries, args.compare, blocks[0]))
    table(rows, ["store", "n", "r", "block_rows", "queries", "hits", "read_mean", "read_median", "read_p90",
                 "read_last100", "ms_full", "ms_pruned", "speedup"])
    print(machine(), notes)
    save("pruning" + (f"-{args.tag}" if args.tag else ""), {"args": vars(args), "rows": rows, "notes": notes})


if __name__ == "__main__":
    main()
