#!/usr/bin/env python
"""Write a realistic synthetic feature store: rare positives in a few clusters among many
negative clusters, unit-norm rows plus a bias feature (every similarity (cos + 1) / 2),
as bigsearch's benchmarks use them. Generation streams in blocks of 65,536 rows, so any
n fits in bounded memory, and is reproducible from --seed.

    python tools/make_store.py /tmp/x10m.zarr --n 10000000 --r 128
    python tools/make_store.py x.h5 --n 1000000 --r 512 --prevalence 0.001 --chunk-mib 32
    python tools/make_store.py x.zarr --n 2000000 --codec lz4 --dtype float64
    python tools/make_store.py c.zarr --n 1000000 --cluster-order 0   # rows grouped by k-means cluster
    python tools/make_store.py g.zarr --n 60000000 --order generated  # rows grouped by generating cluster

Every store is written with its pruning block summaries (docs/store-format.md), computed
on the complete store before it appears (three passes over it; --no-summaries: none); with
--cluster-order, as the ordered store is written (one pass, for the degrees). With
--cluster-order the unordered store's chunk files are removed as their rows are spilled,
and the spill file shrinks as the ordered store grows, so about one copy of X is on disk
at any time (``peak_disk_bytes`` in the JSON line).

Prints one JSON line: the store, its size, and the time and rate of writing it; progress
(rows written, rate, time left) goes to stderr every few seconds (--quiet: none).
"""

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bigsearch.ingest.cluster_order import cluster_order  # noqa: E402
from bigsearch.ingest.pipeline import compressors_for  # noqa: E402
from bigsearch.storage import default_chunk_rows, is_url, open_store, store_kind_for  # noqa: E402
from bigsearch.storage.atomic import remove, temp_sibling  # noqa: E402
from bigsearch.storage.base import disk_bytes  # noqa: E402
from bigsearch.synthetic import make_clustered_store  # noqa: E402

CODECS = ("none", "lz4", "zstd", "gzip", "lzf")   # lz4 is blosc-lz4; gzip, lzf: HDF5 only


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", help="store to write: a Zarr directory, or an HDF5 file (.h5)")
    ap.add_argument("--n", type=int, required=True, help="points")
    ap.add_argument("--r", type=int, default=128, help="features, the bias included (default 128)")
    ap.add_argument("--prevalence", type=float, default=0.005, help="fraction of positives (default 0.005)")
    ap.add_argument("--spread", type=float, default=0.7,
                    help="noise around the cluster centres, relative to their norm (default 0.7)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dtype", choices=("float32", "float64"), default="float32")
    ap.add_argument("--format", choices=("zarr", "hdf5"), default=None,
                    help="default: hdf5 for a .h5/.hdf5 name, else zarr")
    size = ap.add_mutually_exclusive_group()
    size.add_argument("--chunk-mib", type=float, default=None, help="MiB of X per chunk (default 32)")
    size.add_argument("--chunk-rows", type=int, default=None, help="rows per chunk")
    ap.add_argument("--codec", choices=CODECS, default="none",
                    help="compression of X (default none: chunks are memory-mapped with no decoding)")
    order = ap.add_mutually_exclusive_group()
    order.add_argument("--cluster-order", type=int, default=None, metavar="K",
                       help="write rows grouped by k-means cluster (K clusters; 0: about n / 8,192, 16 to 256), "
                            "for pruned queries; ids keep the generated row numbers")
    order.add_argument("--order", choices=("rows", "generated"), default="rows",
                       help="generated: the same rows grouped by their generating cluster, written in one "
                            "streaming pass (no k-means, no second copy), ids keeping the row numbers of the "
                            "default order (rows)")
    ap.add_argument("--no-summaries", action="store_true",
                    help="do not store the pruning block summaries (by default they are computed on the "
                         "complete store before it appears: three more passes over it; --cluster-order always "
                         "writes them)")
    ap.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    ap.add_argument("--overwrite", action="store_true")
    args = ap.parse_args(argv)
    if args.n < 1 or args.r < 2:
        ap.error("--n must be >= 1 and --r >= 2 (features plus the bias)")
    if not 0 < args.prevalence < 1:
        ap.error("--prevalence must be in (0, 1), e.g. 0.005")
    if is_url(args.out):   # as a Path, s3://b/x.zarr would become a local directory s3:
        ap.error(f"{args.out}: make_store writes local stores; write it to a local path, then copy the "
                 "directory to object storage as it is (e.g. aws s3 sync)")
    if Path(args.out).exists() and not args.overwrite:
        ap.error(f"{args.out} exists; pass --overwrite to replace it")
    return args


def chunk_rows(args):
    if args.chunk_rows:
        return args.chunk_rows
    itemsize = 4 if args.dtype == "float32" else 8
    if args.chunk_mib:
        return default_chunk_rows(args.r, itemsize, args.chunk_mib * 2**20)
    return default_chunk_rows(args.r, itemsize)


class Progress:
    """Rows written, rate and time left, on stderr every ``every`` seconds."""

    def __init__(self, n, every=5.0):
        self.n, self.every = n, every
        self.start = self.last = time.perf_counter()

    def __call__(self, rows):
        now = time.perf_counter()
        if now - self.last < self.every and rows < self.n:
            return
        self.last = now
        rate = rows / max(now - self.start, 1e-9)
        left = (self.n - rows) / rate if rate > 0 else float("inf")
        print(f"make_store: {rows:,} / {self.n:,} rows ({rows / self.n:.0%}), {rate:,.0f} rows/s, "
              f"{now - self.start:.0f} s elapsed, about {left:.0f} s left", file=sys.stderr, flush=True)


def main(argv=None):
    args = parse_args(argv)
    kind = store_kind_for(args.out, args.format)
    t = time.perf_counter()
    target = Path(args.out) if args.cluster_order is None else temp_sibling(Path(args.out), "unordered")
    ordering, summaries = None, None if args.no_summaries or args.cluster_order is not None else {}
    try:
        make_clustered_store(target, args.n, args.r, prevalence=args.prevalence, seed=args.seed,
                             spread=args.spread, dtype=args.dtype, chunk_rows=chunk_rows(args), kind=kind,
                             overwrite=args.overwrite, compressors=compressors_for(kind, args.codec),
                             order=args.order, progress=None if args.quiet else Progress(args.n),
                             summaries=summaries)
        if args.cluster_order is not None:
            ordering = cluster_order(target, args.out, clusters=args.cluster_order or None, kind=kind,
                                     compressors=compressors_for(kind, args.codec), overwrite=args.overwrite,
                                     discard_source=True)
    finally:
        if args.cluster_order is not None:
            remove(target)
    seconds = time.perf_counter() - t
    with open_store(args.out) as store:
        y = store.labels()
        out = {"path": str(args.out), "kind": kind, "n": store.n, "r": store.r, "dtype": str(store.dtype),
               "chunk_rows": store.chunk_rows, "codec": store.codec(), "positives": int((y == 1).sum()),
               "x_bytes": store.nbytes, "bytes_on_disk": disk_bytes(args.out), "seconds": round(seconds, 2),
               "MB_per_s": round(store.nbytes / seconds / 1e6, 1), "order": args.order}
        if ordering:
            out.update(clusters=ordering["clusters"], cluster_order_seconds=round(ordering["seconds"], 2),
                       cluster_order_stages={k: round(v, 2) for k, v in ordering["stage_seconds"].items()},
                       peak_disk_bytes=ordering["peak_disk_bytes"])
            summaries = ordering.get("block_summaries")
        if summaries:
            out.update(summaries_seconds=round(summaries["seconds"], 2), summaries_MiB=round(summaries["MiB"], 2))
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()
