"""Recall of LAS with float16 and int8 stores against float32 (issue 12), on Adult, MNIST
and HIGGS prepared as in docs/replication.md.

    python benchmarks/encodings_recall.py [--runs 20]     # about 10 minutes on 2 busy cores

Each data set is ingested three times with the same arguments but ``--encoding``; LAS
then runs with the replication settings (Adult: T = 200, alpha = 1e-6; MNIST: T = 56,
alpha = 0; HIGGS: T = 100, alpha = 1e-6) from the same starts (seeds 0..runs-1), through
the real `bigsearch ingest` and `bigsearch run` commands. Reported per encoding: the mean
and standard deviation of the positives found at T/2 and T, the mean of the per-run
differences from float32 (paired: the same start) with its standard error, and how many
runs made exactly float32's queries.

Results: benchmarks/results/encodings_recall.json; docs/performance.md has the table.
Stores and runs go to $BIGSEARCH_BENCH_DATA/recall (default /tmp/bigsearch-bench/recall).
"""

import argparse
import json
import math
import os
import platform
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATA = Path(os.environ.get("BIGSEARCH_BENCH_DATA", "/tmp/bigsearch-bench")) / "recall"
os.environ["BIGSEARCH_PAPER_DATA"] = str(DATA)  # benchmarks/paper/common.py's stores and runs
sys.path.insert(0, str(HERE / "paper"))
sys.path.insert(0, str(HERE.parent))

from benchmarks.common import cpu_model, stamp  # noqa: E402

from common import cli, replication_ingest  # noqa: E402  (benchmarks/paper/common.py)

ENCODINGS = ("float32", "float16", "int8")

# name: (budget, alpha), docs/replication.md
DATASETS = {"adult": (200, 1e-6), "mnist": (56, 0.0), "higgs": (100, 1e-6)}


def store(name, encoding):
    path = DATA / f"{name}-{encoding}.zarr"
    if not path.exists():
        DATA.mkdir(parents=True, exist_ok=True)
        cli("ingest", *replication_ingest(name), "--encoding", encoding, path, "-q")
    return path


def las_runs(name, encoding, runs):
    """`bigsearch run --method las` (resumed if there): {seed: (hits, queries)}."""
    budget, alpha = DATASETS[name]
    out = DATA / "runs" / f"{name}-{encoding}"
    t = time.perf_counter()
    cli(
        "run",
        store(name, encoding),
        "--method",
        "las",
        "--budget",
        budget,
        "--runs",
        runs,
        "--seed",
        0,
        "--alpha",
        alpha,
        "--out",
        out,
        "-q",
    )
    res = json.loads((out / "results.json").read_text())
    by_seed = {r["seed"]: (r["hits"], r["queries"]) for r in res["runs"] if r["method"] == "las"}
    return by_seed, time.perf_counter() - t


def mean_std(values):
    m = sum(values) / len(values)
    return m, math.sqrt(sum((v - m) ** 2 for v in values) / (len(values) - 1)) if len(values) > 1 else 0.0


def compare(name, runs):
    budget, alpha = DATASETS[name]
    results = {e: las_runs(name, e, runs) for e in ENCODINGS}
    base = results["float32"][0]
    seeds = sorted(base)
    rows = {}
    for enc, (by_seed, seconds) in results.items():
        row = {"seconds": round(seconds, 1), "identical_queries": sum(by_seed[s][1] == base[s][1] for s in seeds)}
        for t in (budget // 2, budget):
            found = [by_seed[s][0][t - 1] for s in seeds]
            diff = [by_seed[s][0][t - 1] - base[s][0][t - 1] for s in seeds]
            m, sd = mean_std(found)
            dm, dsd = mean_std(diff)
            row[str(t)] = {
                "mean": m,
                "std": sd,
                "diff_mean": dm,
                "diff_se": dsd / math.sqrt(len(seeds)),
                "se_of_mean": sd / math.sqrt(len(seeds)),
            }
        rows[enc] = row
    return {"budget": budget, "alpha": alpha, "runs": len(seeds), "encodings": rows}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--only", default=",".join(DATASETS))
    args = ap.parse_args()
    out = {
        "machine": platform.processor() or platform.machine(),
        "lscpu": cpu_model(),
        "load_before": os.getloadavg(),
        "datasets": {},
    }
    for name in args.only.split(","):
        out["datasets"][name] = res = compare(name, args.runs)
        print(f"\n{name}: T = {res['budget']}, alpha = {res['alpha']:g}, {res['runs']} runs")
        for enc, row in res["encodings"].items():
            cells = "  ".join(
                f"at {t}: {row[t]['mean']:.1f} ± {row[t]['std']:.1f} (vs float32 "
                f"{row[t]['diff_mean']:+.2f} ± {row[t]['diff_se']:.2f})"
                for t in row
                if t.isdigit()
            )
            print(f"  {enc:8s} {cells}  identical queries {row['identical_queries']}/{res['runs']}")
    out["load_after"] = os.getloadavg()
    path = HERE / "results" / "encodings_recall.json"
    path.write_text(json.dumps(stamp(out), indent=1))
    print(f"saved {path}")


if __name__ == "__main__":
    main()
