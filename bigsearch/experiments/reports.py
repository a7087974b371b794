"""What an experiment's runs add up to: recall at checkpoints, recall curves, tables, CSV.

Recall here is the paper's: the number of positives found, counted among the queries
(the initial labels are not counted; docs/replication.md discusses the paper's count).
Spreads over runs are sample standard deviations (ddof=1; None for a single run) with
the standard error of the mean, SD / sqrt(runs). (The paper's "mean +- standard
deviation" does not say which; the tables under benchmarks/paper/results were recorded
with population SDs, before this change.)
"""

import csv
from pathlib import Path

import numpy as np

from ..storage.atomic import atomic_open, atomic_write_bytes


def checkpoints(budget, at=None):
    """The query counts the tables report: ``at`` (those within the budget), else half the
    budget and the whole budget."""
    return sorted({t for t in (at or (budget // 2, budget)) if 0 < t <= budget})


def hits_after(record, t):
    """Positives found within the first t queries of a run."""
    hits = record["hits"]
    return hits[min(t, len(hits)) - 1] if hits and t > 0 else 0


def summarize(records, budget, methods=None, at=None):
    """{method: {str(t): {"mean", "std", "se", "runs"}}} at each checkpoint t: ``std`` the
    sample standard deviation over runs, ``se`` the standard error of the mean (both None
    for fewer than two runs)."""
    methods = methods or list(dict.fromkeys(r["method"] for r in records))
    out = {}
    for m in methods:
        mine = [r for r in records if r["method"] == m]
        out[m] = {}
        for t in checkpoints(budget, at):
            found = np.array([hits_after(r, t) for r in mine], float)
            out[m][str(t)] = {"mean": float(found.mean()) if found.size else float("nan"),
                              **_spread(found), "runs": len(mine)}
    return out


def _spread(found):
    if found.size < 2:
        return {"std": None, "se": None}
    std = float(found.std(ddof=1))
    return {"std": std, "se": std / float(np.sqrt(found.size))}


def _cell(c):
    """'mean ± SD (SE x)', or the mean alone for a single run."""
    if c.get("std") is None:
        return f"{c['mean']:.1f}"
    return f"{c['mean']:.1f} ± {c['std']:.1f} (SE {c['se']:.1f})"


def markdown_table(summary, budget, caption=None, at=None):
    """The paper's Table 1 layout: a row per method, 'mean ± SD (SE x)' at T/2 and T (or
    at the query counts ``at``)."""
    ts = checkpoints(budget, at)
    lines = ["| method | " + " | ".join(f"{t} queries" for t in ts) + " |",
             "|---|" + "---:|" * len(ts)]
    for m, cells in summary.items():
        lines.append(f"| {m} | " + " | ".join(_cell(cells[str(t)]) for t in ts) + " |")
    runs = max((c[str(ts[-1])]["runs"] for c in summary.values()), default=0) if ts else 0
    lines.append("")
    spread = (f" ± sample standard deviation (ddof=1) over {runs} runs, with the standard error of the mean "
              f"(SD/√{runs}) in brackets" if runs > 1 else f" of {runs} run")
    lines.append(caption or f"Positives found by the queries (initial labels not counted), mean{spread}.")
    return "\n".join(lines) + "\n"


def recall_curves(records, n, n_positive):
    """The data behind the recall plot (the paper's Figure 2).

    Per method: the mean and sample standard deviation (zeros for one run) over runs of
    the positives found after each query. ``ideal``: every query a positive while any is left (min(t, P_u));
    ``random``: the expected positives of t uniform draws among the unlabeled points
    (t P_u / N_u). P_u and N_u, the positives and points left after the initial labels,
    are averaged over runs.
    """
    steps = max((len(r["hits"]) for r in records), default=0)
    t = np.arange(1, steps + 1)
    methods = {}
    for m in dict.fromkeys(r["method"] for r in records):
        hits = np.array([_padded(r["hits"], steps) for r in records if r["method"] == m], float)
        std = hits.std(axis=0, ddof=1) if len(hits) > 1 else np.zeros(steps)    # sample SD, as the table's
        methods[m] = {"mean": hits.mean(axis=0).tolist(), "std": std.tolist(), "runs": len(hits)}
    by_run = {r.get("run", 0): r["init"] for r in records}
    left = np.array([n_positive - sum(label for _, label in init) for init in by_run.values()], float)
    points = np.array([n - len(init) for init in by_run.values()], float)
    ideal = np.mean([np.minimum(t, p) for p in left], axis=0) if steps else np.zeros(0)
    random = np.mean([t * p / u for p, u in zip(left, points)], axis=0) if steps else np.zeros(0)
    return {"queries": t.tolist(), "methods": methods, "ideal": ideal.tolist(), "random": random.tolist()}


def _padded(hits, steps):
    """A run stopped early (no points left) keeps its last count."""
    return list(hits) + [hits[-1] if hits else 0] * (steps - len(hits))


def write_runs_csv(records, path, ids=None):
    """One row per query: method, run, step, index, id (the store's, empty if it has
    none), label, hits, seconds (elapsed since the run began, initialization included,
    when the label was told). ``ids(indices)``: the store's ids of those points, or None."""
    with atomic_open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["method", "run", "step", "index", "id", "label", "hits", "seconds"])
        for r in records:
            elapsed = r["timings"].get("elapsed_seconds") or [float("nan")] * len(r["queries"])
            names = _names(ids, [i for i, _ in r["queries"]])
            for step, ((i, label), name, h, s) in enumerate(zip(r["queries"], names, r["hits"], elapsed), start=1):
                w.writerow([r["method"], r.get("run", 0), step, i, name, label, h, f"{s:.6f}"])


def write_ranking_csv(records, path, ids=None):
    """The final ranking of each run: the unlabeled points with the highest selection
    scores once the budget is spent, best first (method, run, rank, index, id, score).
    Methods with no scores (random) have none."""
    with atomic_open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["method", "run", "rank", "index", "id", "score"])
        for r in records:
            ranking = r.get("ranking") or {"index": [], "score": []}
            names = _names(ids, ranking["index"])
            for rank, (i, name, score) in enumerate(zip(ranking["index"], names, ranking["score"]), start=1):
                w.writerow([r["method"], r.get("run", 0), rank, i, name, repr(float(score))])


def _names(ids, indices):
    values = ids(indices) if ids is not None and len(indices) else None
    if values is None:
        return [""] * len(indices)
    return [v.decode() if isinstance(v, bytes) else str(v) for v in values]


def write_table(out, results, at):
    """Rewrite ``out``/table.md (and the summary shown) at the query counts ``at``;
    returns the table."""
    summary = summarize(results["runs"], results["budget"], list(results["summary"]), at)
    table = markdown_table(summary, results["budget"], at=at)
    atomic_write_bytes(Path(out) / "table.md", table.encode())
    return table
