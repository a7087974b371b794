"""What TLS (the default of `--cluster local:N`) costs a LAS iteration on a LocalCluster.

LocalClusters of 2 worker processes, over plain TCP and over TLS with temporary
credentials (what ``connect(local_workers=2)`` starts), run the same LAS search (alpha >
0: the full pass) on a small store, in alternating phases (TCP, TLS, TCP, TLS, ...: one
client per process at a time, as in the CLI), so the ratio of the medians is measured
under the same load. The queries must agree.

    python benchmarks/cluster_tls.py [--iterations 30] [--phases 4] [--n 20000]
"""

import argparse
import logging
import tempfile
import time
from pathlib import Path

import numpy as np
from distributed import Client, LocalCluster
from distributed.security import Security

import bigsearch
from bigsearch.synthetic import clustered_points

from common import median, save


def phase(store, y, security, iterations):
    """Seconds per iteration and the queries, on a new LocalCluster."""
    kw = dict(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None,
              silence_logs=logging.ERROR, security=security)
    with LocalCluster(**kw) as cluster, Client(cluster, direct_to_workers=True) as client:
        assert cluster.scheduler_address.startswith("tls://" if security else "tcp://")
        search = bigsearch.LAS(store, pi=0.01, alpha=1e-3, backend=client)
        search.tell(int(np.flatnonzero(y)[0]), 1)
        i, times, queries = search.ask(), [], []
        for _ in range(iterations):
            t = time.perf_counter()
            search.tell(i, int(y[i]))
            i = search.ask()
            times.append(time.perf_counter() - t)
            queries.append(i)
        search.close()
    return times, queries


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iterations", type=int, default=30)
    ap.add_argument("--phases", type=int, default=4)
    ap.add_argument("--n", type=int, default=20_000)
    args = ap.parse_args()
    X, y = clustered_points(args.n, 32, prevalence=0.01, seed=0, spread=0.7)
    store = bigsearch.create_store(Path(tempfile.mkdtemp()) / "s.zarr", X, y, chunk_rows=2_000)
    times, queries = {"tcp": [], "tls": []}, {}
    for k in range(args.phases):
        name = "tls" if k % 2 else "tcp"
        t, q = phase(store, y, Security.temporary() if name == "tls" else None, args.iterations)
        times[name] += t[2:]                      # the first iterations warm the workers
        assert queries.setdefault(name, q) == q and queries.get("tcp", q) == q, "the queries differ"
    out = {"n": args.n, "r": 32, "iterations_per_phase": args.iterations, "phases": args.phases,
           "median_ms": {k: 1e3 * median(v) for k, v in times.items()},
           "tls_over_tcp": median(times["tls"]) / median(times["tcp"])}
    print(out)
    save("cluster_tls", out)


if __name__ == "__main__":
    main()
