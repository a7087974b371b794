"""The fixed per-iteration cost of the dask.distributed backend, and the alternatives.

On a tiny store (the pass itself costs almost nothing), in one process and one
LocalCluster of 2 worker processes:

- one LAS (alpha > 0) and one WNAS iteration (tell + ask) on the local backend and on
  the cluster, alternated; the difference of the medians is the backend's fixed cost;
- bare round trips, the ways one iteration could be mapped: one actor call per worker
  (what the backend does), one task per worker (client.submit), and one task per chunk;
  each with the client talking to the workers directly and through the scheduler.

    python benchmarks/cluster_overhead.py [--iterations 200]
"""

import argparse
import time

import numpy as np
from distributed import Client, LocalCluster

import bigsearch
from bigsearch.synthetic import clustered_points

from common import median, save, table


class Idle:
    """An actor that does nothing: the floor of an actor round trip."""

    def ping(self, payload):
        return None


def idle(payload):
    return None


def iterations_alternated(searches, y, iterations):
    """{name: [seconds per iteration]}, the searches stepped in turn (same queries)."""
    times = {name: [] for name in searches}
    index = {}
    for name, s in searches.items():
        s.tell(int(np.flatnonzero(y)[0]), 1)
        index[name] = s.ask()
    for _ in range(iterations):
        for name, s in searches.items():
            t = time.perf_counter()
            s.tell(index[name], int(y[index[name]]))
            index[name] = s.ask()
            times[name].append(time.perf_counter() - t)
        assert len(set(index.values())) == 1, f"the backends disagree on the next query: {index}"
    return times


def round_trips(client, n_chunks, repeats):
    """Median seconds of one round of each way of reaching the workers."""
    workers = sorted(client.scheduler_info()["workers"])
    actors = [client.submit(Idle, actor=True, workers=[w], pure=False).result() for w in workers]
    payload = np.zeros((3, 128))               # the size of an iteration's arguments (r = 128)
    ways = {
        "actor call per worker": lambda: [f.result() for f in [a.ping(payload) for a in actors]],
        "task per worker": lambda: client.gather([client.submit(idle, payload, workers=[w], pure=False)
                                                  for w in workers]),
        f"task per chunk ({n_chunks})": lambda: client.gather(client.map(idle, [payload] * n_chunks, pure=False)),
    }
    out = {}
    for name, way in ways.items():
        way()
        out[name] = median([_seconds(way) for _ in range(repeats)])
    return out


def _seconds(fn):
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--iterations", type=int, default=200)
    ap.add_argument("--n", type=int, default=4000)
    ap.add_argument("--chunk-rows", type=int, default=500)
    ap.add_argument("--dir", default="/tmp/cluster-dev")
    args = ap.parse_args()
    X, y = clustered_points(args.n, 16, prevalence=0.02, seed=1)
    path = bigsearch.create_store(f"{args.dir}/overhead-{args.n}.zarr", X, y, chunk_rows=args.chunk_rows,
                                  overwrite=True)
    rows, trips = [], []
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        for direct in (True, False):
            with Client(cluster, direct_to_workers=direct) as client:
                via = "direct" if direct else "via scheduler"
                for method, cls, kw in (("las", bigsearch.LAS, {"alpha": 1e-3}), ("wnas", bigsearch.WNAS, {})):
                    searches = {"local": cls(path, **kw), "cluster": cls(path, backend=client, **kw)}
                    t = iterations_alternated(searches, y, args.iterations)
                    local, remote = median(t["local"][5:]), median(t["cluster"][5:])
                    rows.append({"client": via, "method": method, "local_ms": 1e3 * local,
                                 "cluster_ms": 1e3 * remote, "overhead_ms": 1e3 * (remote - local)})
                    for s in searches.values():
                        s.close()
                n_chunks = -(-args.n // args.chunk_rows)
                for way, seconds in round_trips(client, n_chunks, args.iterations).items():
                    trips.append({"client": via, "way": way, "round_trip_ms": 1e3 * seconds})
    table(rows, ["client", "method", "local_ms", "cluster_ms", "overhead_ms"])
    print()
    table(trips, ["client", "way", "round_trip_ms"])
    save("cluster_overhead", {"n": args.n, "r": 16, "chunk_rows": args.chunk_rows, "workers": 2,
                              "iterations": args.iterations, "iteration": rows, "round_trips": trips})


if __name__ == "__main__":
    main()
