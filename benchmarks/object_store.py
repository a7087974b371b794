"""Stores in object storage (issue 16), against a real S3-compatible server on this machine
(moto's standalone server, started here).

1. First pass: the same chunks of X read once through the engine's local backend
   (threads, a bare streaming step), from the S3 server with no chunk cache, from the S3
   server filling the chunk cache, and from the local-disk store, cold (its pages evicted
   from the page cache) and warm. Reported in GB/s of X.
2. Per query: a LAS search on the S3 store with the chunk cache warm, and the same search
   on the local-disk store, stepped in turn through the same queries (checked identical);
   median milliseconds per iteration and their ratio (target <= 1.25).

moto keeps objects in memory and is a Python (Werkzeug) server: a real S3 endpoint has
more bandwidth per connection and more latency, so the first-pass figures say what the
client side costs here, not what S3 gives.

    python benchmarks/object_store.py [--n 2000000] [--r 128] [--iterations 15]
"""

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import bigsearch
from bigsearch.backends.local import LocalBackend
from bigsearch.testing.s3_server import ACCESS, NO_METADATA, S3Server

from cluster_overhead import iterations_alternated
from common import add_idle_arguments, bare_pass_step, bench_store, evict, median, preflight, rng_vectors, save, table

WARMUP = 2


def upload(store_dir, url):
    """Copy a local Zarr store's files to ``url`` as they are (same chunks, same bytes)."""
    import obstore

    from bigsearch.storage.remote_options import object_store

    target = object_store(url)
    total = 0
    for f in sorted(Path(store_dir).rglob("*")):
        if f.is_file():
            data = f.read_bytes()
            obstore.put(target, str(f.relative_to(store_dir)), data)
            total += len(data)
    return total


def one_pass(where, options=None):
    """Seconds for one pass over X through the local backend, and the store's X bytes."""
    store = bigsearch.open_store(where, options)
    backend = LocalBackend(store)
    V = rng_vectors(store.r)
    t = time.perf_counter()
    backend.map(bare_pass_step, V)
    seconds = time.perf_counter() - t
    backend.close()
    cache = getattr(store, "_cache", None)
    store.close()
    return seconds, store.nbytes, (cache.describe() if cache else None)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=2_000_000)
    ap.add_argument("--r", type=int, default=128)
    ap.add_argument("--iterations", type=int, default=15)
    args = add_idle_arguments(ap).parse_args()
    preflight(args)
    path = bench_store(args.n, args.r)
    server = S3Server().start()
    os.environ.update({**ACCESS, **NO_METADATA, "AWS_ENDPOINT_URL": server.endpoint})
    cache_dir = tempfile.mkdtemp(prefix="bigsearch-chunk-cache-")
    try:
        server.create_bucket("bench")
        url = "s3://bench/store.zarr"
        t = time.perf_counter()
        sent = upload(path, url)
        upload_s = time.perf_counter() - t
        cached = {"cache_dir": cache_dir, "cache_size": "100G"}
        one_pass(path)  # compiles the kernel: not part of any figure
        rows = []
        for name, where, options, before in (
            ("S3 server, no cache", url, {"cache_size": 0}, None),
            ("S3 server, filling the cache", url, cached, None),
            ("local disk, cold", path, None, evict),
            ("S3 store, cache warm (cold page cache)", url, cached, lambda _: evict(cache_dir)),
            ("local disk, warm", path, None, None),
            ("S3 store, cache warm", url, cached, None),
        ):
            if before:
                before(path)
            seconds, nbytes, cache = one_pass(where, options)
            rows.append(
                {
                    "read": name,
                    "seconds": seconds,
                    "GB/s": nbytes / seconds / 1e9,
                    "cache hits": None if cache is None else cache["hits"],
                    "cache misses": None if cache is None else cache["misses"],
                }
            )
        table(rows, ["read", "seconds", "GB/s", "cache hits", "cache misses"])

        local = bigsearch.LAS(path, alpha=1e-3)
        remote = bigsearch.LAS(bigsearch.open_store(url, cached), alpha=1e-3)
        times = iterations_alternated({"local": local, "s3": remote}, local.store.labels(), args.iterations)
        for s in (local, remote):
            s.close()
        per_query = {
            "local_ms": 1e3 * median(times["local"][WARMUP:]),
            "s3_cached_ms": 1e3 * median(times["s3"][WARMUP:]),
        }
        per_query["ratio"] = per_query["s3_cached_ms"] / per_query["local_ms"]
        table([per_query], ["local_ms", "s3_cached_ms", "ratio"])
        save(
            "object_store",
            {
                "n": args.n,
                "r": args.r,
                "x_bytes": rows[0]["GB/s"] * rows[0]["seconds"] * 1e9,
                "upload_seconds": upload_s,
                "uploaded_bytes": sent,
                "first_pass": rows,
                "per_query": per_query,
                "iterations": args.iterations,
                "note": "2-core machine shared with other jobs (see idle_before and load_average); "
                "moto server on 127.0.0.1",
            },
        )
    finally:
        server.stop()
        import shutil

        shutil.rmtree(cache_dir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
