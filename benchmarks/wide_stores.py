"""Wide stores of molecules (the 10k library, ../shared): BLR's refits and LAS on packed bits.

Three stores of the Enamine 10k library, ingested by the real CLI and kept under DATA: the
raw atom-pair bits (r = 2,048, 4% set), and docs/discovery.md's MinMax recipe (r = 4,096,
half the bits set) as float32 and as packed bits. In one run:

- BLR's rebuild of A^-1 at a refit, (lam I + X_c^T X_c / s2)^-1 from L labeled rows, by
  Woodbury (``ridge_inverse``, L < r) against the inverse of the r x r matrix, interleaved;
- BLR greedy from 100 random labels, 300 queries one at a time: wall, per query median and
  p90 (refits included: lam and s2 are refitted each time the labels grow by 25%), and
  LAS (alpha 0) the same way: BLR's query over LAS's;
- LAS (alpha 0.01) initialization and per query on the MinMax store, packed bits against
  float32 (the sparse kernels take chunks with at most 1/16 of their bits set, BLAS on
  decoded rows the others), and whether the 100 queries are the same.

    python benchmarks/wide_stores.py [--repeat 3]
"""

import argparse
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

import bigsearch
from bigsearch.engine.core.rank_updates import ridge_inverse

from common import DATA, median, save, table

ENAMINE = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "molpal_enamine10k" / "Enamine10k_scores.csv.gz"
FINGERPRINTS = ["--smiles-column", "smiles", "--drop", "score", "--fingerprint", "atompair"]
MINMAX = ["--counts", "--minmax", "2048", "--minmax-buckets", "2", "--minmax-power", "2"]


def ingest(name, *flags):
    path = DATA / f"enamine10k-{name}.zarr"
    if not path.exists():
        DATA.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "bigsearch", "ingest", str(ENAMINE), str(path), "-q", *FINGERPRINTS,
                        *flags], check=True)
    return path


def top_one_percent():
    """The library's positives: the best 1% of docking scores (lower is better)."""
    import gzip

    rows = gzip.open(ENAMINE, "rt").read().splitlines()[1:]
    scores = np.array([float(r.rsplit(",", 1)[1] or "inf") for r in rows])
    return (scores <= np.quantile(scores[np.isfinite(scores)], 0.01)).astype(int)


def rebuilds(store, repeat):
    """Seconds of A^-1 from L labeled rows: Woodbury against the r x r inverse (medians)."""
    s = bigsearch.open_store(store)
    out = []
    for labels in (10, 100, 1000):
        X = s.read_rows(np.random.default_rng(labels).choice(s.n, labels, replace=False))
        rows = (X - X.mean(axis=0)) / np.sqrt(0.5)
        woodbury, inverse = [], []
        for _ in range(repeat):
            t = time.perf_counter()
            ridge_inverse(3.0, rows)
            woodbury.append(time.perf_counter() - t)
            t = time.perf_counter()
            A = rows.T @ rows
            A[np.diag_indices(s.r)] += 3.0
            np.linalg.inv(A)
            inverse.append(time.perf_counter() - t)
        out.append({"store": store.stem, "r": s.r, "labels": labels, "woodbury_s": median(woodbury),
                    "inverse_s": median(inverse), "ratio": median(woodbury) / median(inverse)})
    return out


def sequential(store, y, method="blr", steps=300):
    """BLR greedy (refits included) or LAS at alpha 0 from the same 100 random labels."""
    init = np.random.default_rng(0).choice(len(y), 100, replace=False).tolist()
    t0 = time.perf_counter()
    search = bigsearch.BLR(store) if method == "blr" else bigsearch.LAS(store, pi=0.01, alpha=0.0)
    search.tell(init, y[init].tolist())
    seconds = []
    for _ in range(steps):
        t = time.perf_counter()
        i = search.ask()
        search.tell(i, int(y[i]))
        seconds.append(time.perf_counter() - t)
    search.sync()
    return {"store": store.stem, "method": method, "wall_s": time.perf_counter() - t0,
            "query_median_ms": 1e3 * median(seconds), "query_p90_ms": 1e3 * float(np.percentile(seconds, 90)),
            "refits": len(getattr(search, "refits", []))}


def las(store, y, steps=100):
    t = time.perf_counter()
    search = bigsearch.LAS(store, pi=0.01, alpha=0.01)
    first = int(np.flatnonzero(y)[0])
    search.tell(first, 1)
    search.sync()
    init = time.perf_counter() - t
    queries, seconds = [], []
    for _ in range(steps):
        t = time.perf_counter()
        i = search.ask()
        search.tell(i, int(y[i]))
        seconds.append(time.perf_counter() - t)
        queries.append(i)
    return {"store": store.stem, "init_s": init, "query_median_ms": 1e3 * median(seconds)}, queries


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    if not ENAMINE.exists():
        sys.exit(f"needs the Enamine 10k library at {ENAMINE} (../shared/datasets)")
    bits = ingest("bits")
    minmax, packed = ingest("minmax", *MINMAX), ingest("minmax-binary", *MINMAX, "--encoding", "binary")
    y = top_one_percent()
    refit_rows = [row for store in (bits, minmax) for row in rebuilds(store, args.repeat)]
    table(refit_rows, ["store", "r", "labels", "woodbury_s", "inverse_s", "ratio"])
    blr_rows = []
    for store in (bits, minmax):
        blr, las_run = sequential(store, y), sequential(store, y, "las")
        blr["query_over_las"] = blr["query_median_ms"] / las_run["query_median_ms"]
        blr_rows += [blr, las_run]
    table(blr_rows, ["store", "method", "wall_s", "query_median_ms", "query_p90_ms", "refits", "query_over_las"])
    (f32, q32), (binary, qbin) = las(minmax, y), las(packed, y)
    binary["init_over_float32"] = binary["init_s"] / f32["init_s"]
    binary["query_over_float32"] = binary["query_median_ms"] / f32["query_median_ms"]
    binary["same_queries"] = q32 == qbin
    table([f32, binary], ["store", "init_s", "query_median_ms", "init_over_float32", "query_over_float32",
                          "same_queries"])
    save("wide_stores", {"refit_rebuilds": refit_rows, "blr_sequential": blr_rows, "las_minmax": [f32, binary]})


if __name__ == "__main__":
    main()
