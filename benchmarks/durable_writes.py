"""What durable store publication costs: `create_store` of a 256 MB float32 X with every
file fsync'd before the rename (storage/atomic.py, the default) against the same write
without the fsyncs (the data then only reaches the page cache), alternated in one run.

    python benchmarks/durable_writes.py [--repeat 3]
"""

import argparse
import os
import shutil
import tempfile
import time

import numpy as np

import bigsearch.storage.writer as writer
from bigsearch import create_store

from common import save, table

CASES = (("zarr", 65536), ("zarr", 1024), ("hdf5", 65536))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    X = np.random.default_rng(0).random((1_000_000, 64), dtype=np.float32)
    durable, folder = writer.fsync_tree, tempfile.mkdtemp(dir=os.environ.get("TMPDIR", "/tmp"))
    best = {}
    try:
        for _ in range(args.repeat):
            for fsync in (True, False):
                writer.fsync_tree = durable if fsync else (lambda path: None)
                for kind, chunk_rows in CASES:
                    path = os.path.join(folder, f"s.{'zarr' if kind == 'zarr' else 'h5'}")
                    t = time.perf_counter()
                    create_store(path, X, chunk_rows=chunk_rows, kind=kind)
                    key = (kind, chunk_rows, fsync)
                    best[key] = min(best.get(key, np.inf), time.perf_counter() - t)
                    shutil.rmtree(path) if os.path.isdir(path) else os.unlink(path)
    finally:
        writer.fsync_tree = durable
        shutil.rmtree(folder, ignore_errors=True)
    rows = [{"kind": k, "chunk_rows": c, "files": 1 if k == "hdf5" else -(-1_000_000 // c),
             "durable_s": round(best[(k, c, True)], 2), "page_cache_s": round(best[(k, c, False)], 2),
             "ratio": round(best[(k, c, True)] / best[(k, c, False)], 2)} for k, c in CASES]
    table(rows, ["kind", "chunk_rows", "files", "durable_s", "page_cache_s", "ratio"])
    save("durable_writes", {"x_mb": 256, "repeat": args.repeat, "rows": rows,
                            "note": "best of REPEAT, alternated; the machine was shared with other jobs"})


if __name__ == "__main__":
    main()
