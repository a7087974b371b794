"""Fantasized batches (issue 18): speculate-and-verify (engine/methods/fantasy.py) against the
straightforward greedy with one pass over X per batch member
(bigsearch.testing.pass_per_member_batch), on the same searches in one run: the batches
must be equal; passes over X and seconds per batch are compared as ratios.

Tasks: MolPAL's Enamine 10k docking library (IDF atom pairs, shuffled; a random 1% start
with graded answers, batches of 1%, as benchmarks/discovery.py) and a synthetic store of
--n points (tools/make_store.py's generator). Writes OUT/fantasy.json.

    python benchmarks/fantasy.py --n 1000000 --r 32 --batch 100
"""

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import bigsearch  # noqa: E402
from bigsearch.synthetic import make_clustered_store  # noqa: E402
from bigsearch.testing import pass_per_member_batch  # noqa: E402

from common import cpu_model, stamp  # noqa: E402


def compare(store, init, answers, batch, fantasy, pi, batches):
    """Per batch: both choosers' batches, passes and seconds; the real answers told between."""
    search = bigsearch.LAS(store, pi=pi, fantasy=fantasy)
    search.tell(init.tolist(), answers[init].tolist())
    search.sync()
    rows = []
    for _ in range(batches):
        t = time.perf_counter()
        ours = search.next_batch(batch)
        t_ours = time.perf_counter() - t
        t = time.perf_counter()
        ref, ref_passes = pass_per_member_batch(search, fantasy, batch)
        t_ref = time.perf_counter() - t
        rows.append(
            {
                "equal": ours == ref,
                "passes": search.fantasy_passes[-1],
                "ref_passes": ref_passes,
                "seconds": t_ours,
                "ref_seconds": t_ref,
            }
        )
        print(json.dumps(rows[-1]), flush=True)
        search.tell(ours, answers[ours].tolist())
    search.close()
    return rows


def docking(work, batch_fraction, batches, start):
    import discovery

    csv_path, score, hit = discovery.prepare(work)
    store = discovery.ingest(csv_path, work, "idf", discovery.REPRESENTATIONS["idf"])
    n = len(hit)
    b = int(round(batch_fraction * n))
    init = np.random.default_rng([start, 18]).choice(n, b, replace=False)
    return compare(store, init, discovery.grades(score), b, 0.0, 0.01, batches)


def synthetic(work, n, r, batch, batches):
    path = work / f"gen-{n}-{r}.zarr"
    if not path.exists():
        make_clustered_store(path, n, r, prevalence=0.005, seed=0, spread=0.7)
    y = bigsearch.open_store(path).labels().astype(np.float64)
    init = np.random.default_rng(0).choice(n, 1000, replace=False)
    return compare(path, init, y, batch, 0.0, 0.005, batches)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "fantasy")
    ap.add_argument("--work", type=Path, default=Path("/tmp/bigsearch-fantasy"))
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--r", type=int, default=32)
    ap.add_argument("--batch", type=int, default=100, help="batch size on the synthetic store")
    ap.add_argument("--batches", type=int, default=2)
    ap.add_argument("--tasks", default="docking,synthetic")
    args = ap.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    args.out.mkdir(parents=True, exist_ok=True)
    out = {"cpu": cpu_model(), "note": "2 cores shared by 8 agents", "tasks": {}}
    for task in args.tasks.split(","):
        if task == "docking":
            out["tasks"]["docking, start 1, batches of 1%"] = docking(args.work, 0.01, args.batches, 1)
        elif task == "synthetic":
            out["tasks"][f"synthetic n={args.n} r={args.r}, batches of {args.batch}"] = synthetic(
                args.work, args.n, args.r, args.batch, args.batches
            )
    for name, rows in out["tasks"].items():
        print(
            f"{name}: equal {all(r['equal'] for r in rows)}, passes {[round(r['passes'], 2) for r in rows]} "
            f"vs {[r['ref_passes'] for r in rows]}, time ratio "
            f"{np.sum([r['ref_seconds'] for r in rows]) / np.sum([r['seconds'] for r in rows]):.1f}x"
        )
    (args.out / "fantasy.json").write_text(json.dumps(stamp(out), indent=1))


if __name__ == "__main__":
    main()
