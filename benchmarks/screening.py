"""Screening against ASReview (issue 38): records read to find 95% of the relevant ones.

For each seed, ASReview's `asreview simulate` with its default model (elas_u4) from 1
inclusion + 1 exclusion drawn with that seed, then bigsearch from the same two records:
`bigsearch ingest FILE --text-column title,abstract` (the defaults a user gets) and
`bigsearch run --method screen` to the end. Reported per seed and on average: records
read to find 95% of the inclusions (the priors count as read, as ASReview counts them),
recall after 10% and 20% of the records, where the stopping rule (engine/guidance/
stopping.py, target 0.95) would stop and the recall there, and wall times.

ASReview runs in its own environment (`python -m venv V && V/bin/pip install asreview`):
give its `asreview` with --asreview (or the ASREVIEW environment variable). Its runs are
kept under results/screening/TAG/ and reused.

    python benchmarks/screening.py --data ../shared/datasets/screening_kwok2020/kwok2020_virus.csv \\
        --asreview /path/to/venv/bin/asreview --seeds 0-9 --tag kwok
    python benchmarks/screening.py --synthetic medium --asreview ... --seeds 0-4    # tools/make_abstracts.py
"""

import argparse
import csv
import json
import math
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import numpy as np

from common import RESULTS, ROOT, preflight, save, table

TARGET = 0.95


def records_read(order, relevant, n):
    """Records read to reach 95% of the relevant ones, recall after 10% and 20% read."""
    hits = np.cumsum(order)
    need = math.ceil(TARGET * relevant)
    read95 = int(np.argmax(hits >= need)) + 1 if hits[-1] >= need else None

    def recall_after(share):
        k = min(len(hits), round(share * n))
        return float(hits[k - 1] / relevant)

    return {"read95": read95, "recall10": round(recall_after(0.1), 4), "recall20": round(recall_after(0.2), 4)}


def asreview_run(asreview, data, seed, folder):
    """One `asreview simulate` (kept in ``folder``): its label order (as row numbers of the
    file), the two priors and its wall seconds."""
    project, done = folder / f"asreview-{seed}.asreview", folder / f"asreview-{seed}.json"
    if done.exists():
        return json.loads(done.read_text())
    t0 = time.perf_counter()
    subprocess.run(
        [
            asreview,
            "simulate",
            str(data),
            "--n-prior-included",
            "1",
            "--n-prior-excluded",
            "1",
            "--prior-seed",
            str(seed),
            "--seed",
            str(seed),
            "-o",
            str(project),
        ],
        check=True,
        capture_output=True,
    )
    seconds = time.perf_counter() - t0
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "results.db"
        db.write_bytes(zipfile.ZipFile(project).read("results.db"))
        con = sqlite3.connect(db)
        rows = con.execute(
            "select record.dataset_row, results.label from results join record "
            "on results.record_id = record.record_id order by results.rowid"
        ).fetchall()
        con.close()
    out = {"rows": [int(r) for r, _ in rows], "labels": [int(y) for _, y in rows], "seconds": seconds}
    done.write_text(json.dumps(out))
    project.unlink()
    return out


def bigsearch_ingest(data, store, extra):
    t0 = time.perf_counter()
    subprocess.run(
        [
            sys.executable,
            "-m",
            "bigsearch",
            "ingest",
            str(data),
            str(store),
            "--label-column",
            "label_included",
            "--text-column",
            "title,abstract",
            "--overwrite",
            "-q",
            *extra,
        ],
        check=True,
        cwd=ROOT.parent,
    )
    return time.perf_counter() - t0


def bigsearch_run(store, priors, budget, out, extra):
    """A run of the screen method from ``priors`` until every record is read: (the labels
    in reading order, priors first; the recall estimates per query; wall seconds to each query)."""
    subprocess.run(
        [
            sys.executable,
            "-m",
            "bigsearch",
            "run",
            str(store),
            "--method",
            "screen",
            "--init-index",
            ",".join(map(str, priors)),
            "--budget",
            str(budget),
            "--out",
            str(out),
            "--overwrite",
            "--quiet",
            *extra,
        ],
        check=True,
        cwd=ROOT.parent,
    )
    run = json.loads((out / "results.json").read_text())["runs"][0]
    labels = [int(y) for _, y in run["init"]] + [int(y) for _, y in run["queries"]]
    return labels, run["recall_estimate"], run["timings"]["elapsed_seconds"]


def mean_or_none(values):
    """The mean, or None when a run did not reach the target within its budget."""
    return None if any(v is None for v in values) else float(np.mean(values))


def stop_point(estimates, given):
    """Records read (priors included) when the rule's lower end first reaches the target."""
    for k, (_, low, _) in enumerate(estimates):
        if low is not None and low >= TARGET:
            return given + k + 1
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, help="CSV: record_id,title,abstract,label_included")
    ap.add_argument("--synthetic", metavar="PRESET", help="instead of --data: a corpus of tools/make_abstracts.py")
    ap.add_argument("--records", type=int, default=3000, help="--synthetic: its records")
    ap.add_argument("--data-seed", type=int, default=1, help="--synthetic: its seed")
    ap.add_argument("--asreview", default=os.environ.get("ASREVIEW"), help="ASReview's asreview command")
    ap.add_argument("--seeds", default="0-9")
    ap.add_argument("--tag", default="kwok")
    ap.add_argument("--ingest", nargs="*", default=[], help="extra flags for bigsearch ingest")
    ap.add_argument("--run", nargs="*", default=[], help="extra flags for bigsearch run")
    ap.add_argument(
        "--budget-share", type=float, default=1.0, help="bigsearch reads this share of the records (1: all of them)"
    )
    ap.add_argument("--name", help="the results file's name (default: screening-TAG)")
    ap.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "bigsearch-screening")
    args = ap.parse_args()
    if not args.asreview:
        ap.error("give ASReview's asreview command with --asreview (or ASREVIEW=...)")
    a, _, b = args.seeds.partition("-")
    seeds = list(range(int(a), int(b or a) + 1))
    check = preflight()
    args.work.mkdir(parents=True, exist_ok=True)
    if args.synthetic:
        # a corpus other than the default's (3,000 records, seed 1) has its own tag, so its
        # ASReview runs (kept per tag and seed) are never another corpus's
        args.tag = f"synthetic-{args.synthetic}" + (f"-d{args.data_seed}" if args.data_seed != 1 else "")
        args.tag += f"-n{args.records}" if args.records != 3000 else ""
        args.data = args.work / f"{args.synthetic}-{args.records}-{args.data_seed}.csv"
        subprocess.run(
            [
                sys.executable,
                str(ROOT.parent / "tools" / "make_abstracts.py"),
                str(args.data),
                "--n",
                str(args.records),
                "--preset",
                args.synthetic,
                "--seed",
                str(args.data_seed),
                "--overwrite",
                "--quiet",
            ],
            check=True,
            capture_output=True,
        )
    if args.data is None:
        ap.error("give --data FILE or --synthetic PRESET")
    with open(args.data, encoding="utf-8") as fh:
        y = np.array([int(r["label_included"]) for r in csv.DictReader(fh)])
    n, relevant = len(y), int(y.sum())
    folder = RESULTS / "screening" / args.tag
    folder.mkdir(parents=True, exist_ok=True)
    store = args.work / f"{args.tag}.zarr"
    ingest_seconds = bigsearch_ingest(args.data, store, args.ingest)
    rows = []
    for seed in seeds:
        asr = asreview_run(args.asreview, args.data, seed, folder)
        priors = asr["rows"][:2]
        budget = min(n, math.ceil(args.budget_share * n)) - len(priors)
        ours, estimates, elapsed = bigsearch_run(store, priors, budget, args.work / f"run-{args.tag}-{seed}", args.run)
        m_asr = records_read(asr["labels"], relevant, n)
        m_ours = records_read(ours, relevant, n)
        stop = stop_point(estimates, len(priors))
        at_stop = sum(ours[:stop]) / relevant if stop else None
        reached = m_ours["read95"] is not None  # (None: not within the budget)
        rows.append(
            {
                "seed": seed,
                "priors": priors,
                "asreview": m_asr,
                "bigsearch": m_ours,
                "ratio": m_ours["read95"] / m_asr["read95"] if reached else None,
                "asreview_seconds": round(asr["seconds"], 1),
                "bigsearch_seconds_to_95": round(elapsed[m_ours["read95"] - len(priors) - 1], 2) if reached else None,
                "stop": stop,
                "recall_at_stop": at_stop,
                "stop_over_needed": None if stop is None or not reached else round(stop / m_ours["read95"], 3),
            }
        )
        print(json.dumps(rows[-1]), flush=True)
    summary = {
        "asreview_read95": np.mean([r["asreview"]["read95"] for r in rows]),
        "bigsearch_read95": mean_or_none([r["bigsearch"]["read95"] for r in rows]),
        "ratio_of_means": None
        if any(r["ratio"] is None for r in rows)
        else np.mean([r["bigsearch"]["read95"] for r in rows]) / np.mean([r["asreview"]["read95"] for r in rows]),
        "asreview_recall10": np.mean([r["asreview"]["recall10"] for r in rows]),
        "bigsearch_recall10": np.mean([r["bigsearch"]["recall10"] for r in rows]),
        "asreview_recall20": np.mean([r["asreview"]["recall20"] for r in rows]),
        "bigsearch_recall20": np.mean([r["bigsearch"]["recall20"] for r in rows]),
        "stops_reaching_target": sum(r["recall_at_stop"] is not None and r["recall_at_stop"] >= TARGET for r in rows),
        "stop_over_needed_max": max((r["stop_over_needed"] or math.inf) for r in rows),
        "ingest_seconds": round(ingest_seconds, 1),
    }
    print(
        table(
            [
                {
                    "seed": r["seed"],
                    "ASReview": r["asreview"]["read95"],
                    "bigsearch": r["bigsearch"]["read95"],
                    "ratio": None if r["ratio"] is None else round(r["ratio"], 3),
                    "stop": r["stop"],
                    "recall at stop": r["recall_at_stop"],
                }
                for r in rows
            ],
            ["seed", "ASReview", "bigsearch", "ratio", "stop", "recall at stop"],
        )
    )
    print(json.dumps(summary, default=float))
    save(
        args.name or f"screening-{args.tag}",
        {
            "data": str(args.data),
            "n": n,
            "relevant": relevant,
            "seeds": seeds,
            "budget_share": args.budget_share,
            "ingest": args.ingest,
            "run": args.run,
            "runs": rows,
            "summary": summary,
            "idle_check": check,
        },
    )


if __name__ == "__main__":
    main()
