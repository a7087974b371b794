"""Per-iteration time on a dask LocalCluster against the local backend, at n = 2M, r = 128.

For each cluster configuration, in one process: the same search on the local backend
(threads, one per core) and on the cluster, stepped in turn through the same queries
(checked identical), so a slow spell of the shared machine hits both. Reports median
milliseconds per iteration (tell + ask) and their ratio (target at 2 worker processes:
<= 1.5; both compete for the same cores here), then the same with 1..4 worker processes
of one thread each, and with X persisted in the workers' memory.

    BIGSEARCH_BENCH_DATA=/tmp/cluster-dev python benchmarks/cluster_iteration.py [--n 2000000] [--r 128]
"""

import argparse

from distributed import Client, LocalCluster

import bigsearch
from bigsearch.backends.distributed import Distributed

from cluster_overhead import iterations_alternated
from common import bench_store, median, save, table

WARMUP = 3   # first iterations load the kernels in each worker process


def compare(path, client, method, iterations, persist=False):
    cls, kw = (bigsearch.LAS, {"alpha": 1e-3}) if method == "las" else (bigsearch.WNAS, {})
    store = bigsearch.open_store(path)
    searches = {"local": cls(store, **kw), "cluster": cls(store, backend=Distributed(client, persist), **kw)}
    t = iterations_alternated(searches, store.labels(), iterations)
    for s in searches.values():
        s.close()
    local, remote = median(t["local"][WARMUP:]), median(t["cluster"][WARMUP:])
    return {"method": method, "local_ms": 1e3 * local, "cluster_ms": 1e3 * remote, "ratio": remote / local}


def on_cluster(workers, fn):
    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster, direct_to_workers=True) as client:
        return fn(client)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=2_000_000)
    ap.add_argument("--r", type=int, default=128)
    ap.add_argument("--iterations", type=int, default=25)
    ap.add_argument("--max-workers", type=int, default=4)
    args = ap.parse_args()
    path = bench_store(args.n, args.r, "zarr")
    its = args.iterations

    main_rows = on_cluster(2, lambda c: [{"workers": 2, **compare(path, c, m, its)} for m in ("las", "wnas")]
                           + [{"workers": 2, "persist": True, **compare(path, c, "las", its, persist=True)}])
    scaling = [{"workers": w, **on_cluster(w, lambda c: compare(path, c, "las", its))}
               for w in range(1, args.max_workers + 1)]
    table(main_rows, ["workers", "method", "persist", "local_ms", "cluster_ms", "ratio"])
    print()
    table(scaling, ["workers", "method", "local_ms", "cluster_ms", "ratio"])
    save("cluster_iteration", {"n": args.n, "r": args.r, "iterations": its, "warmup": WARMUP,
                               "target": "LAS on LocalCluster(2 processes) / local <= 1.5",
                               "two_workers": main_rows, "scaling": scaling})


if __name__ == "__main__":
    main()
