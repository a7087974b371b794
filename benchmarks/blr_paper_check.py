"""BLR greedy and UCB on the paper's Adult and MNIST, the protocol of benchmarks/discovery_paper.py
(the same stores and starts: seeds 0..R-1, one random positive, one label at a time, T = 200 and 56),
to compare a change of BLR against the runs in benchmarks/results/discovery/paper_methods.json
without rerunning the other methods. Writes OUT/paper_blr.json (positives found at T per seed).

    python benchmarks/blr_paper_check.py --out benchmarks/results/discovery-blr-r2prior --runs 3
"""

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import discovery_paper as paper  # noqa: E402
from bigsearch import simulate  # noqa: E402

METHODS = {"blr": {}, "blr ucb": {"acquisition": "ucb"}}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--work", type=Path, default=Path("/tmp/bigsearch-discovery"))
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    args.out.mkdir(parents=True, exist_ok=True)
    found: dict[str, dict[str, list[int]]] = {}
    for name in ("mnist", "adult"):
        recipe, budget, _ = paper.SETS[name]
        store = paper.ingest(args.work, name, recipe, False)
        for method, options in METHODS.items():
            for seed in range(args.runs):
                record = simulate(store, "blr", budget, seed=seed, batch_size=1, **options)
                found.setdefault(name, {}).setdefault(method, []).append(int(record["hits"][-1]))
                print(name, method, seed, record["hits"][-1], flush=True)
                (args.out / "paper_blr.json").write_text(json.dumps(found, indent=1))


if __name__ == "__main__":
    main()
