"""What an experiment's runs add up to: recall at checkpoints, recall curves, tables, CSV.

Recall here is the paper's: the number of positives found, counted among the queries
(the initial labels are not counted; docs/replication.md discusses the paper's count).
Spreads are population standard deviations over runs (numpy.std), as the paper's
"mean +- standard deviation" most likely was.
"""

import csv

import numpy as np


def checkpoints(budget):
    """The query counts the tables report: half the budget and the whole budget."""
    return sorted({t for t in (budget // 2, budget) if t > 0})


def hits_after(record, t):
    """Positives found within the first t queries of a run."""
    hits = record["hits"]
    return hits[min(t, len(hits)) - 1] if hits and t > 0 else 0


def summarize(records, budget, methods=None):
    """{method: {str(t): {"mean", "std", "runs"}}} at each checkpoint t."""
    methods = methods or list(dict.fromkeys(r["method"] for r in records))
    out = {}
    for m in methods:
        mine = [r for r in records if r["method"] == m]
        out[m] = {}
        for t in checkpoints(budget):
            found = np.array([hits_after(r, t) for r in mine], float)
            out[m][str(t)] = {"mean": float(found.mean()) if found.size else float("nan"),
                              "std": float(found.std()) if found.size else float("nan"), "runs": len(mine)}
    return out


def markdown_table(summary, budget, caption=None):
    """The paper's Table 1 layout: a row per method, 'mean ± std' at T/2 and T."""
    ts = checkpoints(budget)
    lines = ["| method | " + " | ".join(f"{t} queries" for t in ts) + " |",
             "|---|" + "---:|" * len(ts)]
    for m, cells in summary.items():
        lines.append(f"| {m} | " + " | ".join(f"{cells[str(t)]['mean']:.1f} ± {cells[str(t)]['std']:.1f}"
                                             for t in ts) + " |")
    runs = max((c[str(ts[-1])]["runs"] for c in summary.values()), default=0) if ts else 0
    lines.append("")
    lines.append(caption or f"Positives found by the queries (initial labels not counted), mean ± standard "
                            f"deviation over {runs} run{'s' * (runs != 1)}.")
    return "\n".join(lines) + "\n"


def recall_curves(records, n, n_positive):
    """The data behind the recall plot (the paper's Figure 2).

    Per method: the mean and standard deviation over runs of the positives found after
    each query. ``ideal``: every query a positive while any is left (min(t, P_u));
    ``random``: the expected positives of t uniform draws among the unlabeled points
    (t P_u / N_u). P_u and N_u, the positives and points left after the initial labels,
    are averaged over runs.
    """
    steps = max((len(r["hits"]) for r in records), default=0)
    t = np.arange(1, steps + 1)
    methods = {}
    for m in dict.fromkeys(r["method"] for r in records):
        hits = np.array([_padded(r["hits"], steps) for r in records if r["method"] == m], float)
        methods[m] = {"mean": hits.mean(axis=0).tolist(), "std": hits.std(axis=0).tolist(), "runs": len(hits)}
    by_run = {r.get("run", 0): r["init"] for r in records}
    left = np.array([n_positive - sum(label for _, label in init) for init in by_run.values()], float)
    points = np.array([n - len(init) for init in by_run.values()], float)
    ideal = np.mean([np.minimum(t, p) for p in left], axis=0) if steps else np.zeros(0)
    random = np.mean([t * p / u for p, u in zip(left, points)], axis=0) if steps else np.zeros(0)
    return {"queries": t.tolist(), "methods": methods, "ideal": ideal.tolist(), "random": random.tolist()}


def _padded(hits, steps):
    """A run stopped early (no points left) keeps its last count."""
    return list(hits) + [hits[-1] if hits else 0] * (steps - len(hits))


def write_runs_csv(records, path):
    """One row per query: method, run, step, index, label, hits, seconds (elapsed since
    the run began, initialization included, when the label was told)."""
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["method", "run", "step", "index", "label", "hits", "seconds"])
        for r in records:
            elapsed = r["timings"].get("elapsed_seconds") or [float("nan")] * len(r["queries"])
            for step, ((i, label), h, s) in enumerate(zip(r["queries"], r["hits"], elapsed), start=1):
                w.writerow([r["method"], r.get("run", 0), step, i, label, h, f"{s:.6f}"])
