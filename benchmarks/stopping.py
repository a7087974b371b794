"""The stopping rule's calibration (issue 38): over every screening run benchmarks/screening.py
saved (the given set and the synthetic ones), where the rule (engine/guidance/stopping.py,
run --stop-at-recall 0.95) would have stopped, the recall there, and the records read
there against those needed to reach the target.

The rule's estimate is each run's own (the run record's recall_estimate per query): this
script reads the saved results, it runs nothing.

    python benchmarks/screening.py --data ... --tag kwok      # and --synthetic PRESET ...
    python benchmarks/stopping.py

Target: the recall at the stop reaches 0.95 in >= 95% of the runs, and the records read
at the stop are <= 1.5x those needed to reach 0.95.
"""

import json
import math

import numpy as np

from common import RESULTS, save, table

TARGET, SHARE, OVER = 0.95, 0.95, 1.5


def runs_of(path):
    record = json.loads(path.read_text())
    return [
        {
            "set": record.get("benchmark", path.stem).removeprefix("screening-"),
            "seed": r["seed"],
            "needed": r["bigsearch"]["read95"],
            "stop": r["stop"],
            "recall": r["recall_at_stop"],
            "over": r["stop_over_needed"],
        }
        for r in record["runs"]
    ]


def main():
    runs = [run for path in sorted(RESULTS.glob("screening-*.json")) for run in runs_of(path)]
    if not runs:
        raise SystemExit(f"no screening results in {RESULTS}: run benchmarks/screening.py first")
    table(runs, ["set", "seed", "needed", "stop", "recall", "over"])
    stopped = [r for r in runs if r["stop"] is not None]
    reached = sum(r["recall"] >= TARGET for r in stopped)
    overs = [r["over"] for r in stopped]
    summary = {
        "runs": len(runs),
        "stopped_within_budget": len(stopped),
        "recall_at_stop_reached_target": reached,
        "share_reaching_target": reached / len(runs),
        "recall_at_stop_min": min((r["recall"] for r in stopped), default=math.nan),
        "stop_over_needed_mean": float(np.mean(overs)) if overs else math.nan,
        "stop_over_needed_max": max(overs, default=math.nan),
        "target_met": len(stopped) == len(runs)
        and reached >= SHARE * len(runs)
        and max(overs, default=math.inf) <= OVER,
    }
    print(json.dumps(summary))
    save("stopping", {"target": TARGET, "runs": runs, "summary": summary})


if __name__ == "__main__":
    main()
