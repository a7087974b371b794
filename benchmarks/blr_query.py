"""A BLR query against a LAS query on the same store (issue 23: BLR greedy <= 1.25x LAS).

In one process, on one store: initialize LAS (alpha = 0) and BLR (greedy, lam and noise
fitted to the labels), then alternate one LAS iteration (tell + ask), one BLR iteration and
one bare pass over X (read every chunk + X @ V, V of r x 3) at least 20 times; medians and
their ratios. With --prune also pruned BLR greedy on the same store: the share of X each of
its queries read (mean, p90, each query's, the labels and refits behind them), for a store in
cluster order (`tools/make_store.py --cluster-order`), where blocks of rows are tight. With
--share-only, only that (no timing: shares are counts, fit for a loaded machine), saved as
blr_query_share.json.

    python benchmarks/blr_query.py [--n 1000000] [--r 128] [--iterations 25] [--store PATH] [--prune]
    python benchmarks/blr_query.py --store PATH --share-only [--iterations 20] [--tag 10m]
"""

import argparse

import numpy as np

import bigsearch

from common import bare_pass_step, bench_store, median, rng_vectors, save, table, timed


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


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--r", type=int, default=128)
    ap.add_argument("--iterations", type=int, default=25)
    ap.add_argument("--store", default=None, help="a store to use instead of a synthetic one")
    ap.add_argument("--prune", action="store_true", help="also pruned BLR greedy: the share of X read per query")
    ap.add_argument("--share-only", action="store_true", help="only pruned BLR greedy's share of X read per query")
    ap.add_argument("--tag", default="", help="suffix of the results file's name")
    args = ap.parse_args()
    path = args.store or bench_store(args.n, args.r)
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
