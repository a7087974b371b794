"""Pruned screen queries against the full pass on a text store (issue 38, "Scale").

The screen method (engine/methods/screen.py) with its defaults scores a record linearly,
f = x . v + b, and refits v, b each query without a pass; with ``prune`` a query reads only
the blocks of X that could hold the best record (engine/pruning/screen.py). On a store made
by `bigsearch ingest --text-column ... --cluster-order 0` and its labels, from one relevant
and one irrelevant record (drawn by --seed), Q queries (--queries, default 50) answered from
the labels: each round one tell + ask of the pruned search, timed (wall), and, for its first
--full-queries rounds (default 5: the full pass reads all of X a query), one tell + ask of
the full-pass search in lockstep, interleaved (pruned first, then full, every round; every
pruned query checked against the full pass's). Every query's share of X read is counted: the
first one's apart from the initialization's passes (X^T X, the scores, the summaries), which
are timed apart (``sync()``). Out: ms a query (mean, p50, p90) for each, the share of X read
per query (mean, p50, p90, max, each query's), whether the queries were equal, the positives
found. The kernels are compiled first on a copy of the store's first rows.

    python tools/make_abstracts.py /tmp/hp/a50k.csv --n 50000 --preset medium --prevalence 0.002
    bigsearch ingest /tmp/hp/a50k.csv /tmp/hp/a50k.zarr --text-column title,abstract \\
        --label-column label_included --cluster-order 0
    python benchmarks/screen_pruning.py /tmp/hp/a50k.zarr [--queries 50] [--full-queries 5] [--tag 50k]
"""

import argparse

import numpy as np

from common import add_idle_arguments, preflight, run_fresh, save

WORKER = r"""
import sys, tempfile, time
from pathlib import Path
import numpy as np
import bigsearch
from bigsearch.engine.core.params import PruneOptions
from bigsearch.engine.methods.screen import Screen
from bigsearch.storage.encoding import decode
from common import report

path, queries, full_queries, block_rows, seed = sys.argv[1], *map(int, sys.argv[2:6])
store = bigsearch.open_store(path)
y = store.labels()
if y is None or not (y == 1).any() or not (y == 0).any():
    raise SystemExit(f"{path}: needs labels with relevant and irrelevant records (ingest --label-column)")

# the kernels compiled on a copy of the first rows in the store's encoding, pruned and full,
# as `bigsearch run` does
rows = decode(store.read_stored_rows(np.arange(min(512, store.n))))
warm = Path(tempfile.mkdtemp()) / "warm.zarr"
bigsearch.create_store(warm, rows, chunk_rows=256, encoding=store.encoding)
for prune in (PruneOptions(64), False):
    e = Screen(warm, prune=prune)
    e.tell([0, 1], [1, 0])
    for t in range(4):
        e.tell(e.ask(), t % 2)
    e.close()

rng = np.random.default_rng(seed)
start = [int(rng.choice(np.flatnonzero(y == 1))), int(rng.choice(np.flatnonzero(y == 0)))]
pruned = Screen(path, prune=PruneOptions(block_rows))
full = Screen(path)
init = {}
for name, e in (("pruned", pruned), ("full", full)):
    e.tell(start, y[start].tolist())
    t = time.perf_counter()
    e.sync()
    init[name] = time.perf_counter() - t
init_bytes = pruned.bytes_since_query

times = {"pruned": [], "full": []}
chosen, equal = [], True
for q in range(queries):
    t = time.perf_counter()
    i = pruned.ask()
    times["pruned"].append(time.perf_counter() - t)
    if q < full_queries:
        t = time.perf_counter()
        j = full.ask()
        times["full"].append(time.perf_counter() - t)
        equal = equal and i == j
        full.tell(i, int(y[i]))
    chosen.append(i)
    pruned.tell(i, int(y[i]))  # (applied at the next ask: its fit is in the next query's time)

read = np.array(pruned.query_bytes, np.float64)
read[0] -= init_bytes
share = read / pruned.store.nbytes
report({
    "n": store.n, "r": store.r, "x_bytes": store.nbytes, "block_rows": block_rows, "start": start,
    "status": pruned.pruning_status, "init_seconds": init, "seconds": times,
    "share": [float(s) for s in share], "equal": bool(equal), "compared": min(queries, full_queries),
    "queries": chosen, "positives_found": int(y[chosen].sum()),
})
"""


def summary(values, scale=1.0):
    v = np.asarray(values, np.float64) * scale
    if not len(v):
        return None
    return {
        "mean": float(v.mean()),
        "p50": float(np.percentile(v, 50)),
        "p90": float(np.percentile(v, 90)),
        "max": float(v.max()),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("store", help="a text store with labels (ingest --text-column ... --cluster-order 0)")
    parser.add_argument("--queries", type=int, default=50, help="pruned queries (default 50)")
    parser.add_argument(
        "--full-queries",
        type=int,
        default=5,
        help="full-pass queries, in lockstep with the first pruned ones (default 5)",
    )
    parser.add_argument("--block-rows", type=int, default=128, help="rows per pruning block (default 128)")
    parser.add_argument("--seed", type=int, default=0, help="draws the relevant and irrelevant start")
    parser.add_argument("--tag", default="", help="results/screen_pruning_TAG.json")
    args = add_idle_arguments(parser).parse_args()
    preflight(args)
    raw = run_fresh(WORKER, args.store, args.queries, args.full_queries, args.block_rows, args.seed)
    ms = {name: summary(t, 1e3) for name, t in raw["seconds"].items()}
    share = summary(raw["share"])
    record = {"store": args.store, "args": vars(args), "ms_per_query": ms, "share_read": share, "raw": raw}
    print(
        f"{raw['n']:,} x {raw['r']} ({raw['status']}); start {raw['start']}, "
        f"{raw['positives_found']} positives found in {len(raw['queries'])} queries"
    )
    for name, m in ms.items():
        if m:
            print(
                f"{name}: {m['mean']:.1f} ms a query (p50 {m['p50']:.1f}, p90 {m['p90']:.1f}) over "
                f"{len(raw['seconds'][name])} queries"
            )
    print(
        f"share of X read per pruned query: mean {share['mean']:.2%}, p50 {share['p50']:.2%}, "
        f"p90 {share['p90']:.2%}, max {share['max']:.2%}"
    )
    print(f"the first {raw['compared']} queries {'equal' if raw['equal'] else 'DIFFER from'} the full pass's")
    save("screen_pruning" + (f"_{args.tag}" if args.tag else ""), record)
    if not raw["equal"]:
        raise SystemExit("the pruned queries differ from the full pass's")


if __name__ == "__main__":
    main()
