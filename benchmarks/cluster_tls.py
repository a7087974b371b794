"""What TLS (the default of `--cluster local:N`) costs a LAS iteration on a LocalCluster.

Two LocalClusters of 2 worker processes, one over plain TCP and one over TLS with
temporary credentials (what ``connect(local_workers=2)`` starts), run the same LAS search
(alpha > 0: the full pass) on a small store; iterations alternate between them, so the
ratio of the medians is measured under the same load. The queries must agree.

    python benchmarks/cluster_tls.py [--iterations 60] [--n 20000]
"""

import argparse
import logging
import time

import numpy as np
from distributed import Client, LocalCluster
from distributed.security import Security

from common import median, save

import bigsearch
from bigsearch.synthetic import clustered_points


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iterations", type=int, default=60)
    ap.add_argument("--n", type=int, default=20_000)
    args = ap.parse_args()
    import tempfile
    from pathlib import Path
    X, y = clustered_points(args.n, 32, prevalence=0.01, seed=0, spread=0.7)
    store = bigsearch.create_store(Path(tempfile.mkdtemp()) / "s.zarr", X, y, chunk_rows=2_000)
    kw = dict(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None,
              silence_logs=logging.ERROR)
    with LocalCluster(**kw) as tcp, LocalCluster(**kw, security=Security.temporary()) as tls, \
            Client(tcp, direct_to_workers=True) as c_tcp, Client(tls, direct_to_workers=True) as c_tls:
        assert tls.scheduler_address.startswith("tls://")
        searches = {name: bigsearch.LAS(store, pi=0.01, alpha=1e-3, backend=c)
                    for name, c in (("tcp", c_tcp), ("tls", c_tls))}
        times = {name: [] for name in searches}
        first = int(np.flatnonzero(y)[0])
        nxt = {}
        for name, s in searches.items():
            s.tell(first, 1)
            nxt[name] = s.ask()
        for _ in range(args.iterations):
            for name, s in searches.items():
                t = time.perf_counter()
                s.tell(nxt[name], int(y[nxt[name]]))
                nxt[name] = s.ask()
                times[name].append(time.perf_counter() - t)
            assert nxt["tcp"] == nxt["tls"], nxt
    out = {"n": args.n, "r": 32, "iterations": args.iterations,
           "median_ms": {k: 1e3 * median(v) for k, v in times.items()},
           "tls_over_tcp": median(times["tls"]) / median(times["tcp"])}
    print(out)
    save("cluster_tls", out)


if __name__ == "__main__":
    main()
