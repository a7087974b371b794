"""Do the discovery recommendations cost anything on the paper's data? (issue 18)

For Adult and MNIST (docs/replication.md settings: one random positive to start, LAS with
pi = the prevalence, eta = 0.5, w0 = 1/n, alpha = 1e-6 on Adult and 0 on MNIST, T = 200
and 56), the same ingest with and without ``--idf``, the same starts (seeds 0..R-1):
positives found at T. Stores by the real `bigsearch ingest`; runs by ``simulate``.

    python benchmarks/discovery_paper.py --runs 10 --out benchmarks/results/discovery
"""

import argparse
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bigsearch.simulate import simulate  # noqa: E402

SHARED = ROOT.parent / "shared" / "datasets"
ADULT = (
    [SHARED / "adult" / "adult.data", SHARED / "adult" / "adult.test"],
    [
        "--label-column",
        "14",
        "--positive",
        ">50K",
        "--positive",
        ">50K.",
        "--bins",
        "5",
        "--normalize",
        "--prevalence",
        "0.05",
        "--seed",
        "0",
    ],
)
MNIST = (
    [SHARED / "mnist" / "t10k-images-idx3-ubyte.gz"],
    [
        "--labels",
        str(SHARED / "mnist" / "t10k-labels-idx1-ubyte.gz"),
        "--positive",
        "1",
        "--normalize",
        "--prevalence",
        "0.01",
        "--seed",
        "0",
    ],
)
SETS = {"adult": (ADULT, 200, 1e-6), "mnist": (MNIST, 56, 0.0)}


def ingest(work, name, recipe, idf):
    out = work / f"{name}{'-idf' if idf else ''}.zarr"
    if not out.exists():
        sources, options = recipe
        subprocess.run(
            [
                sys.executable,
                "-m",
                "bigsearch",
                "ingest",
                *map(str, sources),
                str(out),
                "--quiet",
                *options,
                *(["--idf"] if idf else []),
            ],
            check=True,
        )
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "discovery")
    ap.add_argument("--work", type=Path, default=Path("/tmp/bigsearch-discovery"))
    ap.add_argument("--runs", type=int, default=10)
    args = ap.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    args.out.mkdir(parents=True, exist_ok=True)
    results = {}
    lines = [
        "| data | T | LAS, paper's recipe | LAS, + --idf | paired difference (idf - paper) |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, (ing, budget, alpha) in SETS.items():
        found = {}
        for idf in (False, True):
            store = ingest(args.work, name, ing, idf)
            found[idf] = [simulate(store, "las", budget, seed=s, alpha=alpha)["hits"][-1] for s in range(args.runs)]
            print(name, "idf" if idf else "paper", found[idf], flush=True)
        a, b = np.array(found[False]), np.array(found[True])
        d = b - a
        results[name] = {"budget": budget, "alpha": alpha, "paper": a.tolist(), "idf": b.tolist()}
        lines.append(
            f"| {name} | {budget} | {a.mean():.1f} ± {a.std(ddof=1):.1f} | {b.mean():.1f} ± {b.std(ddof=1):.1f} "
            f"| {d.mean():+.1f} ± {d.std(ddof=1) / np.sqrt(len(d)):.1f} (s.e.) |"
        )
    (args.out / "paper_check.json").write_text(json.dumps(results, indent=1))
    (args.out / "paper_check.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
