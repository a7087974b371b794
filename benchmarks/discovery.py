"""Search quality on a real discovery task (issue 18): MolPAL's Enamine 10k docking library.

The protocol of ../shared/datasets/molpal_enamine10k/PROVENANCE.txt: positives are the
top 1% of docking scores (the 104 lowest); each start labels a random 1% of the library,
then 5 rounds of 1% (batched: 5 batches of 104; sequential: 520 single queries); the
score is the fraction of the positives acquired, initial ones included (as MolPAL
counts). Every method of a start gets the same initial labels.

Stores are made by the real `bigsearch ingest` (subprocess) from a CSV of SMILES,
score, hit (top 1%) and grade (the graded label, see --grade); searches by
``bigsearch.simulate`` on those stores. Writes OUT/results.json and
OUT/table.md.

    python benchmarks/discovery.py --out benchmarks/results/discovery --starts 3
"""

import argparse
import csv
import gzip
import json
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.common import cpu_model, load_record, stamp  # noqa: E402
from bigsearch import simulate  # noqa: E402

DATA = ROOT.parent / "shared" / "datasets" / "molpal_enamine10k" / "Enamine10k_scores.csv.gz"

# name -> ingest options after the SMILES column (all: atom pairs, 2048 bits, as MolPAL)
REPRESENTATIONS = {
    "bits": [],  # for rf: the fingerprint as it is
    "counts": ["--counts"],  # the atom-pair counts as they are (no map)
    "cosine": ["--normalize", "--bias"],
    "idf": ["--idf", "--normalize", "--bias"],
    "minmax2": ["--counts", "--minmax", "256", "--minmax-buckets", "8", "--minmax-power", "2"],
    # the recommended recipe (docs/discovery.md): z.z' = (1 + K^2) / 2, K the MinMax kernel of the counts
    "minmax-2048x2-p2": ["--counts", "--minmax", "2048", "--minmax-buckets", "2", "--minmax-power", "2"],
    # the MinMax kernel itself (power 1), 4 buckets a draw: z.z' = K + (1 - K) / 4 (for BLR)
    "minmax-1024x4-p1": ["--counts", "--minmax", "1024", "--minmax-buckets", "4", "--minmax-power", "1"],
}


def grades(score, best_q=0.01, zero_q=0.10):
    """The graded label of each molecule: 1 at or below the top-1% score, 0 at or above
    the top-10% score, linear in the score between (lower scores bind better)."""
    best, zero = np.quantile(score, best_q), np.quantile(score, zero_q)
    return np.clip((zero - score) / (zero - best), 0.0, 1.0)


def prepare(work):
    """The CSV the stores are made from, and the scores."""
    with gzip.open(DATA, "rt") as fh:
        rows = list(csv.reader(fh))[1:]
    # The file is sorted by score: shuffle it, or every tie broken by the lowest index
    # (a forest or WNAS with equal predictions) would pick the best molecules.
    rows = [rows[i] for i in np.random.default_rng(2017).permutation(len(rows))]
    smiles = [r[0] for r in rows]
    score = np.array([float(r[1]) for r in rows])
    k = int(round(0.01 * len(score)))
    hit = np.zeros(len(score), np.int8)
    hit[np.argsort(score, kind="stable")[:k]] = 1
    path = work / "enamine10k-shuffled.csv"
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["smiles", "score", "hit"])
        w.writerows(zip(smiles, score, hit))
    return path, score, hit


def ingest(csv_path, work, name, options):
    out = work / f"{name}-shuffled.zarr"
    if not out.exists():
        cmd = [
            sys.executable,
            "-m",
            "bigsearch",
            "ingest",
            str(csv_path),
            str(out),
            "--quiet",
            "--smiles-column",
            "smiles",
            "--label-column",
            "hit",
            "--drop",
            "score",
            *options,
        ]
        subprocess.run(cmd, check=True)
    return out


def one_run(store, method, hit, init, rounds, batch, answers=None, **options):
    t = time.perf_counter()
    extra = {"answers": answers} if answers is not None else {}
    record = simulate(store, method, rounds * batch, seed=0, init=init, batch_size=batch, **extra, **options)
    found = sum(lab for _, lab in init) + (record["hits"][-1] if record["hits"] else 0)
    return {"found": found / int(hit.sum()), "seconds": time.perf_counter() - t}


def configurations(batch):
    """name: (store, method, batch size, graded answers?, options); the most telling first."""
    return {
        "random": ("bits", "random", batch, False, {}),
        "rf": ("bits", "rf", batch, False, {}),
        "las cosine": ("cosine", "las", batch, False, {"pi": 0.01}),
        "las idf": ("idf", "las", batch, False, {"pi": 0.01}),
        "las idf, graded": ("idf", "las", batch, True, {"pi": 0.01}),
        "las cosine, graded": ("cosine", "las", batch, True, {"pi": 0.01}),
        "las idf, graded, fantasy 0": ("idf", "las", batch, True, {"pi": 0.01, "fantasy": 0.0}),
        "rf, graded": ("bits", "rf", batch, True, {}),
        "rf, scores": ("bits", "rf", batch, "scores", {}),
        "wnas cosine": ("cosine", "wnas", batch, False, {}),
        "wnas idf": ("idf", "wnas", batch, False, {}),
        "agr idf": ("idf", "agr", batch, False, {}),
        "las idf, graded, sequential": ("idf", "las", 1, True, {"pi": 0.01}),
        "las cosine, sequential": ("cosine", "las", 1, False, {"pi": 0.01}),
        "wnas idf, sequential": ("idf", "wnas", 1, False, {}),
        "las minmax2, graded": ("minmax2", "las", batch, True, {"pi": 0.01}),
        "las minmax-2048x2-p2, graded": ("minmax-2048x2-p2", "las", batch, True, {"pi": 0.01}),
        "las minmax-2048x2-p2": ("minmax-2048x2-p2", "las", batch, False, {"pi": 0.01}),
        "las minmax-2048x2-p2, graded, fantasy 0": (
            "minmax-2048x2-p2",
            "las",
            batch,
            True,
            {"pi": 0.01, "fantasy": 0.0},
        ),
        "las minmax-2048x2-p2, sequential": ("minmax-2048x2-p2", "las", 1, False, {"pi": 0.01}),
        "las minmax-2048x2-p2, graded, sequential": ("minmax-2048x2-p2", "las", 1, True, {"pi": 0.01}),
        "rf, sequential": ("bits", "rf", 1, False, {}),
        "rf, graded, sequential": ("bits", "rf", 1, True, {}),
        "blr greedy": ("bits", "blr", batch, False, {}),
        "blr greedy, graded": ("bits", "blr", batch, True, {}),
        "blr greedy, scores": ("bits", "blr", batch, "raw", {}),
        "blr ucb": ("bits", "blr", batch, False, {"acquisition": "ucb"}),
        "blr ucb, graded": ("bits", "blr", batch, True, {"acquisition": "ucb"}),
        "blr thompson": ("bits", "blr", batch, False, {"acquisition": "thompson"}),
        "blr thompson, graded": ("bits", "blr", batch, True, {"acquisition": "thompson"}),
        "blr thompson, scores": ("bits", "blr", batch, "raw", {"acquisition": "thompson"}),
        "blr ucb, scores": ("bits", "blr", batch, "raw", {"acquisition": "ucb"}),
        "blr greedy, sequential": ("bits", "blr", 1, False, {}),
        "blr greedy, graded, sequential": ("bits", "blr", 1, True, {}),
        "blr counts": ("counts", "blr", batch, False, {}),
        "blr counts, graded": ("counts", "blr", batch, True, {}),
        "blr counts, scores": ("counts", "blr", batch, "raw", {}),
        "blr counts, sequential": ("counts", "blr", 1, False, {}),
        "blr counts, graded, sequential": ("counts", "blr", 1, True, {}),
        "blr ucb counts, graded": ("counts", "blr", batch, True, {"acquisition": "ucb"}),
        "rf counts": ("counts", "rf", batch, False, {}),
        "rf counts, scores": ("counts", "rf", batch, "scores", {}),
        "blr minmax-2048x2-p2": ("minmax-2048x2-p2", "blr", batch, False, {}),
        "blr minmax-2048x2-p2, graded": ("minmax-2048x2-p2", "blr", batch, True, {}),
        "blr minmax-2048x2-p2, scores": ("minmax-2048x2-p2", "blr", batch, "raw", {}),
        "blr minmax-1024x4-p1": ("minmax-1024x4-p1", "blr", batch, False, {}),
        "blr minmax-1024x4-p1, graded": ("minmax-1024x4-p1", "blr", batch, True, {}),
        "blr minmax-1024x4-p1, scores": ("minmax-1024x4-p1", "blr", batch, "raw", {}),
        "wnas minmax-2048x2-p2": ("minmax-2048x2-p2", "wnas", batch, False, {}),
        "wnas minmax-2048x2-p2, graded": ("minmax-2048x2-p2", "wnas", batch, True, {}),
        "wnas minmax-2048x2-p2, sequential": ("minmax-2048x2-p2", "wnas", 1, False, {}),
        "wnas minmax-2048x2-p2, graded, sequential": ("minmax-2048x2-p2", "wnas", 1, True, {}),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "discovery")
    ap.add_argument("--work", type=Path, default=Path("/tmp/bigsearch-discovery"))
    ap.add_argument("--starts", type=int, default=3)
    ap.add_argument("--first-start", type=int, default=0, help="skip the starts before this one")
    ap.add_argument(
        "--configs", default="all", help="names of configurations to run, separated by semicolons (default all)"
    )
    args = ap.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    args.out.mkdir(parents=True, exist_ok=True)
    csv_path, score, hit = prepare(args.work)
    n = len(hit)
    batch = int(round(0.01 * n))
    graded = grades(score)
    # MolPAL's forest regresses the scores; a linear map into [0, 1] (1 = best) gives the same forest ranking.
    linear = (score.max() - score) / (score.max() - score.min())
    configs = configurations(batch)
    chosen = list(configs) if args.configs == "all" else [c.strip() for c in args.configs.split(";")]
    needed = {configs[name][0] for name in chosen}
    stores = {name: ingest(csv_path, args.work, name, opts) for name, opts in REPRESENTATIONS.items() if name in needed}
    results_path = args.out / "results.json"
    results = json.loads(results_path.read_text()) if results_path.exists() else {"runs": []}
    done = {(r["config"], r["start"]) for r in results["runs"]}
    for start in range(args.first_start, args.starts):
        rng = np.random.default_rng([start, 18])
        init_idx = rng.choice(n, batch, replace=False)
        init = [(int(i), int(hit[i])) for i in init_idx]
        for name in chosen:
            if (name, start) in done:
                continue
            store, method, b, use_grades, options = configs[name]
            r = one_run(
                stores[store],
                method,
                hit,
                init,
                5 * batch // b,
                b,
                answers={True: graded, "scores": linear, "raw": -score}.get(use_grades),  # raw: lower is better
                **options,
            )
            r.update(config=name, start=start, init_positives=int(hit[init_idx].sum()), load_average=load_record())
            print(f"start {start} {name:32s} found {r['found']:.3f} ({r['seconds']:.0f} s)", flush=True)
            results["runs"].append(r)
            results_path.write_text(json.dumps(results, indent=1))
    results["machine"] = {"cpu": cpu_model(), "python": platform.python_version(), "note": "2 cores shared by 8 agents"}
    results_path.write_text(json.dumps(stamp(results), indent=1))
    (args.out / "table.md").write_text(table(results, configs))
    print(table(results, configs))


def table(results, configs):
    lines = [
        "| configuration | store | method | batch | found (mean ± s.e.) | s.d. | per start | s/run |",
        "|---|---|---|---:|---:|---:|---|---:|",
    ]
    for name, (store, method, b, use_grades, _) in configs.items():
        runs = sorted((r for r in results["runs"] if r["config"] == name), key=lambda r: r["start"])
        if not runs:
            continue
        f = np.array([r["found"] for r in runs])
        sd = f.std(ddof=1) if len(f) > 1 else 0.0
        lines.append(
            f"| {name} | {store} | {method} | {b} | {f.mean():.3f} ± {sd / np.sqrt(len(f)):.3f} ({len(f)}) | {sd:.3f} "
            f"| {' '.join(f'{x:.3f}' for x in f)} | {np.mean([r['seconds'] for r in runs]):.0f} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
