"""Pruned BLR queries against pruned LAS and the full pass (issue 40), and a BLR query against a
LAS query on the same store (issue 23: BLR greedy <= 1.25x LAS).

--one-positive (issue 40): from one positive (the one `bigsearch run --init-positives 1 --seed 0`
draws) on one store, three engines in lockstep, each round one tell + ask of each, timed (wall
and the thread's CPU time): pruned BLR greedy, pruned LAS (alpha = 0) and full-pass BLR greedy
(its first --full-queries queries; every one of pruned BLR's checked against it). Every query
counted: the first one (chosen with the start's label alone) timed apart from initialization
(``sync()``) and its share of X read apart from the initialization's passes; per engine the time
per query (mean, p50, p90, max) and the share of X read per query (mean, p90, max), the ratios
pruned BLR / pruned LAS and full pass / pruned BLR, refits and the labels they came at. The
kernels are compiled first on a copy of the store's first rows, as `bigsearch run` does.

Default: in one process, on one store, LAS (alpha = 0) and BLR (greedy, lam and noise fitted to
the labels) from 1 positive and 20 negatives, one LAS iteration (tell + ask), one BLR iteration
and one bare pass over X (read every chunk + X @ V, V of r x 3) alternated at least 20 times;
medians and their ratios. With --prune also pruned BLR greedy: the share of X each query read
(the first, with the start's labels, left out; mean, p90, each query's, the labels and refits
behind them), for a store in cluster order (`tools/make_store.py --cluster-order`). With
--share-only, only that (no timing: shares are counts, fit for a loaded machine), saved as
blr_query_share.json.

    python tools/make_store.py /tmp/blr2m.zarr --n 2000000 --cluster-order 0
    python benchmarks/blr_query.py --store /tmp/blr2m.zarr --one-positive --queries 43 --tag 2m --idle-wait 900
    python benchmarks/blr_query.py [--n 1000000] [--r 128] [--iterations 25] [--store PATH] [--prune]
    python benchmarks/blr_query.py --store PATH --share-only [--iterations 20] [--tag 10m]
"""

import argparse
import time

import numpy as np

import bigsearch

from common import add_idle_arguments, bare_pass_step, bench_store, median, preflight, rng_vectors, save, table, timed


def iterate(search, y, i):
    search.tell(i, int(y[i]))
    return search.ask()


def share_read(s, y):
    """The share of X each query of pruned search ``s`` read to be chosen (the first, with
    the start's labels, left out), their mean and p90, and what they were asked from."""
    share = np.array(s.run_details()["bytes_read"][1:]) / s.store.nbytes
    labeled = np.flatnonzero(s.labels >= 0)
    return {
        "mean": float(share.mean()),
        "p90": float(np.percentile(share, 90)),
        "queries": len(share),
        "per_query": [round(float(x), 6) for x in share],
        "labels": len(labeled),
        "positives_labeled": int((y[labeled] > 0).sum()),
        "refits": [r["labels"] for r in s.refits],
        "status": s.pruning_status,
    }


def one_positive(y, seed=0):
    """The positive `bigsearch run --init-positives 1 --seed SEED` starts from."""
    return int(np.random.default_rng(seed).choice(np.flatnonzero(y == 1), size=1, replace=False)[0])


def warm_up(path, m=256):
    """Compile the engines' kernels (pruned paths included) on a copy of the store's first m
    rows, from one label, as `bigsearch run` does before it times anything."""
    from bigsearch.storage.arrays import NumpyArrayStore

    store = bigsearch.open_store(path)
    rows = np.ascontiguousarray(store.read_stored_rows(np.arange(min(m, store.n))))
    for make in ENGINES.values():
        e = make(NumpyArrayStore(rows, chunk_rows=max(64, len(rows) // 2)), pi=0.5)  # (LAS: no labels to tell pi)
        e.tell([0], [1])
        for t in range(4):
            i = e.ask()
            e.tell(i, t % 2)
        e.close()


ENGINES = {
    "blr pruned": lambda path, pi=None: bigsearch.BLR(path, prune=True),
    "las pruned": lambda path, pi=None: bigsearch.LAS(path, alpha=0.0, prune=True, pi=pi),
    "blr full pass": lambda path, pi=None: bigsearch.BLR(path),
}


def spread(values):
    v = np.asarray(values, np.float64)
    if not len(v):
        return {}
    return {"mean": float(v.mean()), "p50": float(np.median(v)), "p90": float(np.percentile(v, 90)),
            "max": float(v.max())}


def one_positive_run(path, queries, full_queries):
    """Issue 40's protocol (see the module): the engines in lockstep from one positive; every
    query's wall and CPU time and share of X read, per engine."""
    y = bigsearch.open_store(path).labels()
    start = one_positive(y)
    warm_up(path)
    engines, rec = {}, {}
    for name, make in ENGINES.items():
        e = engines[name] = make(path)
        e.tell([start], [int(y[start])])
        wall, cpu = time.perf_counter(), time.thread_time()
        e.sync()  # initialization: its passes apart from the first query's reads
        rec[name] = {"init_s": time.perf_counter() - wall, "init_cpu_s": time.thread_time() - cpu,
                     "init_bytes": e.bytes_since_query, "wall": [], "cpu": [], "queries": [], "next": None}
    for t in range(queries):
        for name, e in engines.items():
            r = rec[name]
            if name == "blr full pass" and t >= full_queries:
                continue
            wall, cpu = time.perf_counter(), time.thread_time()
            if r["next"] is not None:
                e.tell(r["next"], int(y[r["next"]]))
            r["next"] = e.ask()
            r["wall"].append(time.perf_counter() - wall)
            r["cpu"].append(time.thread_time() - cpu)
            r["queries"].append(r["next"])
    full = rec["blr full pass"]["queries"]
    assert rec["blr pruned"]["queries"][: len(full)] == full, "pruned BLR's queries differ from the full pass's"
    out = {}
    for name, e in engines.items():
        r = rec[name]
        read = np.array(e.run_details()["bytes_read"], np.float64)
        read[0] -= r["init_bytes"]  # the first query's own reads
        share = read / e.store.nbytes
        out[name] = {
            "queries": len(r["queries"]),
            "ms_per_query": {k: 1e3 * v for k, v in spread(r["wall"]).items()},
            "cpu_ms_per_query": {k: 1e3 * v for k, v in spread(r["cpu"]).items()},
            "share_read": {**spread(share), "first": float(share[0])},
            "init_s": r["init_s"],
            "init_passes": r["init_bytes"] / e.store.nbytes,
            "positives_found": int(sum(y[i] > 0 for i in r["queries"])),
            "refits": [f["labels"] for f in getattr(e, "refits", [])],
            "pruning": e.pruning_status,
            "per_query_ms": [round(1e3 * v, 3) for v in r["wall"]],
            "per_query_share": [round(float(v), 7) for v in share],
        }
        e.close()
    blr, las, fp = (out[k]["ms_per_query"] for k in ENGINES)
    ratios = {
        "blr pruned / las pruned (mean)": blr["mean"] / las["mean"],
        "blr pruned / las pruned (p50)": blr["p50"] / las["p50"],
        "full pass / blr pruned (mean)": fp["mean"] / blr["mean"],
    }
    return {"store": str(path), "n": len(y), "start": start, "identical_queries": len(full), "engines": out,
            "ratios": ratios}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--r", type=int, default=128)
    ap.add_argument("--iterations", type=int, default=25)
    ap.add_argument("--store", default=None, help="a store to use instead of a synthetic one")
    ap.add_argument("--prune", action="store_true", help="also pruned BLR greedy: the share of X read per query")
    ap.add_argument("--share-only", action="store_true", help="only pruned BLR greedy's share of X read per query")
    ap.add_argument("--one-positive", action="store_true",
                    help="issue 40: pruned BLR, pruned LAS and the full pass from one positive, every query counted")
    ap.add_argument("--queries", type=int, default=43, help="--one-positive: queries per engine (default 43)")
    ap.add_argument("--full-queries", type=int, default=None,
                    help="--one-positive: queries of the full pass, each checked (default: all)")
    ap.add_argument("--tag", default="", help="suffix of the results file's name")
    add_idle_arguments(ap)
    args = ap.parse_args()
    path = args.store or bench_store(args.n, args.r)
    if args.one_positive:
        preflight(args)
        record = one_positive_run(path, args.queries, args.queries if args.full_queries is None else args.full_queries)
        rows = [{"what": name, **{f"ms {k}": v for k, v in e["ms_per_query"].items()},
                 "X read mean %": 100 * e["share_read"]["mean"], "p90 %": 100 * e["share_read"]["p90"],
                 "max %": 100 * e["share_read"]["max"]} for name, e in record["engines"].items()]
        table(rows, ["what", "ms mean", "ms p50", "ms p90", "ms max", "X read mean %", "p90 %", "max %"])
        print(record["ratios"])
        save("blr_query_one_positive" + (f"_{args.tag}" if args.tag else ""), record)
        return
    y = bigsearch.open_store(path).labels()
    start = [int(np.flatnonzero(y)[0])] + [int(i) for i in np.flatnonzero(y == 0)[:20]]
    if args.share_only:
        s = bigsearch.BLR(path, prune=True)
        s.tell(start, y[start].tolist())
        i = s.ask()
        for _ in range(args.iterations):
            i = iterate(s, y, i)
        record = {"store": str(path), "n": s.n, "r": s.store.r, "pruned_share_read": share_read(s, y)}
        s.close()
        print("pruned BLR greedy, share of X read per query:", record["pruned_share_read"])
        save("blr_query_share" + (f"_{args.tag}" if args.tag else ""), record)
        return
    searches = {"las": bigsearch.LAS(path, alpha=0.0), "blr": bigsearch.BLR(path)}
    if args.prune:
        searches["blr pruned"] = bigsearch.BLR(path, prune=True)
    nxt, init = {}, {}
    for name, s in searches.items():
        s.tell(start, y[start].tolist())
        init[name], nxt[name] = timed(s.ask)
    V = rng_vectors(searches["las"].store.r)
    times = {name: [] for name in [*searches, "bare pass"]}
    for _ in range(args.iterations):
        times["bare pass"].append(timed(searches["las"].backend.map, bare_pass_step, V)[0])
        for name, s in searches.items():
            t, nxt[name] = timed(iterate, s, y, nxt[name])
            times[name].append(t)
    bare = median(times["bare pass"])
    rows = [
        {
            "what": name,
            "ms": 1e3 * median(ts),
            "x bare pass": median(ts) / bare,
            "x LAS": median(ts) / median(times["las"]),
            "init s": init.get(name, float("nan")),
        }
        for name, ts in times.items()
    ]
    record = {"store": str(path), "n": searches["las"].n, "r": searches["las"].store.r, "rows": rows}
    if args.prune:
        record["pruned_share_read"] = share_read(searches["blr pruned"], y)
    for s in searches.values():
        s.close()
    table(rows, ["what", "ms", "x bare pass", "x LAS", "init s"])
    if args.prune:
        print("pruned BLR greedy, share of X read per query:", record["pruned_share_read"])
    save("blr_query", record)


if __name__ == "__main__":
    main()
