"""Store layout for ingest: the codec and the chunk size, measured on real data.

For Adult (one-hot, 124 features), MNIST (784 pixels, normalized) and HIGGS (28 dense
features) from ../shared/datasets, and a larger HIGGS-like dense store, writes the store
with each codec and reports bytes on disk, ingest time and the speed of one pass over X
(every chunk read through the store and multiplied by an r x 3 matrix, as a LAS
iteration does; warm page cache). Then the same pass and the ingest time for several
--chunk-rows on the dense store.

    python benchmarks/ingest_layout.py --dir /tmp/ingest-layout
"""

import argparse
import json
import os
import shutil
import time
from pathlib import Path

import numpy as np

from bigsearch.datasets import MIRROR_ENV, data_file
from bigsearch.ingest import FeatureOptions, LabelOptions, OutputOptions, ingest
from bigsearch.storage import open_store
from bigsearch.storage.base import disk_bytes

from common import stamp

SHARED = Path(__file__).resolve().parents[2] / "shared" / "datasets"
if SHARED.is_dir():
    os.environ.setdefault(MIRROR_ENV, str(SHARED))


def datasets():
    """The real sets measured: their files are fetched (or found in the mirror) when called,
    not at import (tests import every script without the data)."""
    return {
        "adult (one-hot)": dict(sources=[data_file("adult", "adult.data"), data_file("adult", "adult.test")],
                                labels=LabelOptions(column=14, positive=[">50K", ">50K."]),
                                features=FeatureOptions(bins=5, normalize=True)),
        "mnist (pixels)": dict(sources=[data_file("mnist", "t10k-images-idx3-ubyte.gz")],
                               labels=LabelOptions(files=[data_file("mnist", "t10k-labels-idx1-ubyte.gz")],
                                                   positive=["1"]),
                               features=FeatureOptions(normalize=True)),
        "higgs (dense)": dict(sources=[data_file("higgs", "lightgbm_binary.train")], labels=LabelOptions(column=0)),
    }


CODECS = ["none", "lz4", "zstd", "gzip"]


def one_pass(path, repeat=5):
    """GB/s of X for one pass (best of ``repeat``), reading chunks through the store."""
    with open_store(path) as s:
        V = np.ones((s.r, 3), s.dtype)
        best = np.inf
        for _ in range(repeat):
            t = time.perf_counter()
            for j in range(s.n_chunks):
                with s.chunk(j) as x:
                    x @ V
            best = min(best, time.perf_counter() - t)
        return s.nbytes / best / 1e9


def codecs(d):
    rows = []
    for name, spec in datasets().items():
        spec = dict(spec)
        sources = spec.pop("sources")
        for codec in CODECS:
            out = d / f"{name.split()[0]}-{codec}.zarr"
            t = time.perf_counter()
            ingest(sources, out, output=OutputOptions(codec=codec, overwrite=True), **spec)
            seconds = time.perf_counter() - t
            with open_store(out) as s:
                raw = s.nbytes
            rows.append({"data": name, "codec": codec, "x_mb": round(raw / 1e6, 1),
                         "disk_mb": round(disk_bytes(out) / 1e6, 1),
                         "ratio": round(raw / disk_bytes(out), 2), "ingest_s": round(seconds, 2),
                         "pass_gb_s": round(one_pass(out), 2)})
            print(rows[-1], flush=True)
            shutil.rmtree(out)
    return rows


def dense_npy(d, n, r=28):
    path = d / "dense.npy"
    if not path.exists():
        X = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(n, r))
        rng = np.random.default_rng(0)
        for a in range(0, n, 1 << 18):
            X[a:a + (1 << 18)] = np.round(rng.normal(size=(min(1 << 18, n - a), r)), 3)
        X.flush()
    return path


def chunk_sizes(d, n):
    src = dense_npy(d, n)
    rows = []
    for name, codec in (("dense npy", "none"), ("dense npy", "lz4"), ("dense npy", "zstd")):
        out = d / f"dense-{codec}.zarr"
        t = time.perf_counter()
        ingest([src], out, output=OutputOptions(codec=codec, overwrite=True))
        rows.append({"data": f"{n:,} x 28 dense", "codec": codec, "x_mb": round(n * 28 * 4 / 1e6),
                     "disk_mb": round(disk_bytes(out) / 1e6), "ingest_s": round(time.perf_counter() - t, 2),
                     "pass_gb_s": round(one_pass(out), 2)})
        print(rows[-1], flush=True)
        shutil.rmtree(out)
    sizes = []
    for mib in (1, 4, 16, 64):
        chunk_rows = (mib << 20) // (28 * 4)
        out = d / f"chunks-{mib}.zarr"
        t = time.perf_counter()
        ingest([src], out, output=OutputOptions(chunk_rows=chunk_rows, overwrite=True))
        sizes.append({"chunk_mib": mib, "chunk_rows": chunk_rows, "ingest_s": round(time.perf_counter() - t, 2),
                      "pass_gb_s": round(one_pass(out), 2)})
        print(sizes[-1], flush=True)
        shutil.rmtree(out)
    return rows, sizes


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dir", default="/tmp/ingest-layout")
    p.add_argument("--n", type=int, default=4_000_000, help="rows of the dense store (28 features)")
    args = p.parse_args()
    d = Path(args.dir)
    d.mkdir(parents=True, exist_ok=True)
    result = {"codecs": codecs(d)}
    result["dense"], result["chunk_sizes"] = chunk_sizes(d, args.n)
    print(json.dumps(stamp(result)))


if __name__ == "__main__":
    main()
