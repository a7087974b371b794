"""The stopping rule's calibration (issue 38): the rule (engine/guidance/stopping.py, run
--stop-at-recall 0.95) replayed over the label orders of saved screening runs, on the
given set and on synthetic corpora: where it would have stopped, the recall there, and
the records read there against those needed to reach the target. The rule reads only the
order of the answers, so a run's order is all a replay needs, and a change of the rule is
measured again on the same runs.

The orders are kept in results/stopping-orders.json (each: its set, corpus seed, the
priors' rows, records, relevant records, records read and the positions of the hits); add runs
from `bigsearch run --method screen` records (benchmarks/screening.py's work directory, or
your own runs on tools/make_abstracts.py corpora):

    python benchmarks/stopping.py --add '/tmp/sb/a/run-kwok-*' --set kwok --corpus 0
    python benchmarks/stopping.py --add '/tmp/stop/runs/run-easy-2' --set easy --corpus 2
    python benchmarks/stopping.py                       # replay the rule over every order
    python benchmarks/stopping.py --variant all         # and the variants docs/screening.md compares
    python benchmarks/stopping.py --orders results/stopping-orders-explore.json --name stopping-explore

Target: the recall at the stop reaches 0.95 in >= 95% of the runs, and the records read
at the stop are <= 1.5x those needed to reach 0.95.
"""

import argparse
import glob
import json
import math
from contextlib import contextmanager
from pathlib import Path

import numpy as np
from scipy.stats import hypergeom

from bigsearch.engine.core.params import ScreenParams
from bigsearch.engine.guidance import stopping

from common import RESULTS, save, table

TARGET, SHARE, OVER = 0.95, 0.95, 1.5
GIVEN = 2  # the priors: one relevant and one irrelevant record, not evidence of the pace
EXPLORE_AFTER = ScreenParams().explore_after  # the screen method's default
ORDERS = RESULTS / "stopping-orders.json"


def order_of(run_dir):
    """A `bigsearch run` record's label order (priors first), its store's size and relevant records."""
    import zarr

    record = json.loads((Path(run_dir) / "results.json").read_text())
    run = record["runs"][0]
    labels = [int(y) for _, y in run["init"]] + [int(y) for _, y in run["queries"]]
    y = np.asarray(zarr.open_array(str(Path(record["store"]) / "y"), mode="r")[:]) >= 0.5
    return {
        "n": int(record["n"]),
        "relevant": int(y.sum()),
        "priors": [int(i) for i, _ in run["init"]],
        "batch": int(run.get("batch_size", 1)),
        "read": len(labels),
        "hits": np.flatnonzero(labels).tolist(),
        "source": str(run_dir),
    }


def labels_of(order):
    labels = np.zeros(order["read"], int)
    labels[order["hits"]] = 1
    return labels


# The rules compared: the default, the previous rule (one decay over the window, the 1-df
# profile), and the literature's anchors.


@contextmanager
def rule_constants(**values):
    old = {k: getattr(stopping, k) for k in values}
    for k, v in values.items():
        setattr(stopping, k, v)
    try:
        yield
    finally:
        for k, v in old.items():
            setattr(stopping, k, v)


def model_stop(labels, n, least=0.0, level=stopping.LEVEL, misses=0, **constants):
    """Records read when the rule's lower end of the recall (at ``level``) first reaches the
    target (not before a share ``least`` of the records is read, nor before ``misses``
    irrelevant records in a row)."""
    in_a_row = misses_in_a_row_after_each(labels)
    with rule_constants(**constants):
        for k in range(max(GIVEN + stopping.MIN_WINDOW, math.ceil(least * n)), len(labels) + 1):
            if in_a_row[k - 1] < misses:
                continue
            if stopping.stop_reached(stopping.recall_estimate(labels[:k], n, level=level, given=GIVEN), TARGET):
                return k
    return None


def misses_in_a_row_after_each(labels):
    """After each record read, the irrelevant records read in a row up to it (the engine's
    exploration.misses_in_a_row gives the last of them)."""
    out, run = np.zeros(len(labels), int), 0
    for i, hit in enumerate(labels):
        run = 0 if hit else run + 1
        out[i] = run
    return out


PREVIOUS_DECAYS = np.concatenate([[0.0], np.geomspace(1e-4, 1.0, 400)])  # the previous rule's grid


def _chi2_one_cut(level):
    """The previous rule's cut: half the chi-square(1) quantile at 2 level - 1."""
    from scipy.stats import chi2

    return chi2.ppf(2 * level - 1, 1) / 2


def knee_stop(labels, n, ratio=6.0, least=150):
    """The knee method (Cormack and Grossman 2016): the knee of the gain curve is the point
    farthest above the chord from the start; stop once the hit rate before it is ``ratio``
    times the rate after it (one hit added after), from ``least`` records read on."""
    hits = np.cumsum(labels)
    for s in range(least, len(labels) + 1):
        h = hits[:s]
        k = int(np.argmax(h - np.arange(1, s + 1) * h[-1] / s)) + 1
        if k < s and (h[k - 1] / k) / ((h[-1] - h[k - 1] + 1) / (s - k)) >= ratio:
            return s
    return None


def hypergeometric_stop(labels, n, alpha=0.05, every=5):
    """Callaghan and Mueller-Hansen (2020): the last k records read taken as a random sample
    of the records left before them; stop once, for some k, as few hits among them would
    have probability < alpha if the recall were below the target (checked every ``every``
    records: each check is a sum over every k)."""
    hits = np.concatenate([[0], np.cumsum(labels)])
    for s in range(GIVEN + stopping.MIN_WINDOW, len(labels) + 1, every):
        k = np.arange(1, s - GIVEN + 1)
        before = hits[s - k]
        urn = n - (s - k)
        missing = np.minimum(np.floor(hits[s] / TARGET - before) + 1, urn)  # fewest left for recall < target
        if hypergeom.cdf(hits[s] - before, urn, missing, k).min() < alpha:
            return s
    return None


def misses_worth_stop(labels, n, worth):
    """The simplest rule of the screening alone, a run of misses weighed by the hits it would
    have held at the search's pace before it: stop once the irrelevant records read since the last
    hit are worth ``worth`` hits at the hit rate up to that hit (past the priors and 50
    records read, so the priors' own pace does not count)."""
    read_at_hit = None
    for k, hit in enumerate(labels, start=1):
        if hit:
            read_at_hit, found = k, int(labels[:k].sum())
        elif read_at_hit and read_at_hit > GIVEN + 50 and (k - read_at_hit) * found / read_at_hit >= worth:
            return k
    return None


FRONTIER = (4, 8, 16, 32, 64, 128, 256)


VARIANTS = {
    "change point (default)": model_stop,
    "one decay, 1-df profile (previous)": lambda labels, n: model_stop(
        labels, n, CHANGE_POINTS=np.array([1.0]), _cut=_chi2_one_cut, DECAYS=PREVIOUS_DECAYS
    ),
    "one decay, 2-df cut": lambda labels, n: model_stop(labels, n, CHANGE_POINTS=np.array([1.0])),
    "change point, 1-df profile": lambda labels, n: model_stop(labels, n, _cut=_chi2_one_cut),
    "change point, decays up to e every 0.22 x read": lambda labels, n: model_stop(labels, n, SLOWEST=0.22),
    "change point, decays up to e every 0.28 x read": lambda labels, n: model_stop(labels, n, SLOWEST=0.28),
    "change point, not before 10% read": lambda labels, n: model_stop(labels, n, least=0.1),
    "change point, interval at 90%": lambda labels, n: model_stop(labels, n, level=0.9),
    "change point, interval at 80%": lambda labels, n: model_stop(labels, n, level=0.8),
    # The screen method draws records at random from EXPLORE_AFTER misses in a row on: a stop
    # after its first draws has seen a small random sample of the records left.
    "change point, after 100 misses in a row": lambda labels, n: model_stop(labels, n, misses=EXPLORE_AFTER),
    "change point, after 100 misses and 50 draws": lambda labels, n: model_stop(labels, n, misses=EXPLORE_AFTER + 50),
    "change point, after 100 misses and 100 draws": lambda labels, n: model_stop(labels, n, misses=2 * EXPLORE_AFTER),
    "knee method": knee_stop,
    "hypergeometric, last k read": hypergeometric_stop,
}


def replay(orders, rule):
    runs = []
    for o in orders:
        labels = labels_of(o)
        hits = np.cumsum(labels)
        need = math.ceil(TARGET * o["relevant"])
        needed = int(np.argmax(hits >= need)) + 1 if hits[-1] >= need else None
        stop = rule(labels, o["n"])
        recall = hits[stop - 1] / o["relevant"] if stop else None
        runs.append(
            {
                "set": o["set"],
                "corpus": o["corpus"],
                "priors": o["priors"],
                "batch": o["batch"],
                "read": o["read"],
                "needed": needed,
                "stop": stop,
                "recall": recall,
                "over": round(stop / needed, 3) if stop and needed else None,
            }
        )
    return runs


def summarize(runs):
    stopped = [r for r in runs if r["stop"] is not None]
    reached = [r for r in stopped if r["recall"] >= TARGET]
    overs = [r["over"] for r in reached if r["over"] is not None]
    return {
        "runs": len(runs),
        "stopped_within_budget": len(stopped),
        "recall_at_stop_reached_target": len(reached),
        "share_reaching_target": len(reached) / len(runs),
        "recall_at_stop_min": min((r["recall"] for r in stopped), default=math.nan),
        "stop_over_needed_min": min(overs, default=math.nan),
        "stop_over_needed_mean": float(np.mean(overs)) if overs else math.nan,
        "stop_over_needed_max": max(overs, default=math.nan),
        "target_met": len(reached) >= SHARE * len(runs) and max(overs, default=math.inf) <= OVER,
    }


def add(pattern, name, corpus, path=ORDERS):
    orders = json.loads(path.read_text()) if path.exists() else []
    known = {o["source"] for o in orders}
    for d in sorted(glob.glob(pattern)):
        if d not in known and (Path(d) / "results.json").exists():
            orders.append({"set": name, "corpus": corpus, **order_of(d)})
            print("added", d)
    path.write_text(json.dumps(orders, indent=0))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--add", metavar="GLOB", help="add the label orders of these run directories")
    ap.add_argument("--set", help="--add: the runs' set (kwok, easy, medium, multi-topic, hard)")
    ap.add_argument("--corpus", type=int, default=0, help="--add: the corpus seed (tools/make_abstracts.py --seed)")
    ap.add_argument(
        "--variant", default="change point (default)", help=f"one of {list(VARIANTS)}, or all".replace("%", "%%")
    )
    ap.add_argument(
        "--frontier",
        action="store_true",
        help=f"replay the rules that stop once the misses in a row are worth N hits at the pace before them, N in "
        f"{FRONTIER}",
    )
    ap.add_argument("--orders", type=Path, default=ORDERS, help=f"the file of label orders (default {ORDERS.name})")
    ap.add_argument("--name", default="stopping", help="the results file's name (results/NAME.json)")
    args = ap.parse_args()
    if args.add:
        if not args.set:
            ap.error("--add needs --set NAME (the runs' set)")
        add(args.add, args.set, args.corpus, args.orders)
        return
    if not args.orders.exists():
        raise SystemExit(f"no label orders in {args.orders}: add runs with --add first")
    orders = json.loads(args.orders.read_text())
    if args.frontier:
        return frontier(orders, args.name)
    names = list(VARIANTS) if args.variant == "all" else [args.variant]
    record = {"target": TARGET, "orders": len(orders), "variants": {}}
    for name in names:
        if name not in VARIANTS:
            ap.error(f"--variant must be one of {list(VARIANTS)} or all, got {name!r}")
        runs = replay(orders, VARIANTS[name])
        sets = {s: summarize([r for r in runs if r["set"] == s]) for s in dict.fromkeys(r["set"] for r in runs)}
        record["variants"][name] = {"summary": summarize(runs), "sets": sets, "runs": runs}
        print(f"\n{name}")
        if len(names) == 1:
            table(runs, ["set", "corpus", "priors", "batch", "read", "needed", "stop", "recall", "over"])
        rows = [{"set": s, **v} for s, v in {**sets, "all": summarize(runs)}.items()]
        table(
            rows,
            ["set", "runs", "stopped_within_budget", "recall_at_stop_reached_target", "recall_at_stop_min"]
            + ["stop_over_needed_min", "stop_over_needed_mean", "stop_over_needed_max"],
        )
    save(args.name, record)


def frontier(orders, name):
    """Per N, the rule that stops once the misses in a row are worth N hits at the pace
    before them: the runs reaching the target at the stop (all, and those not easy) and the
    worst stop / needed on easy, where the 1.5x bound is tightest."""
    rows = []
    for worth in FRONTIER:
        runs = replay(orders, lambda labels, n: misses_worth_stop(labels, n, worth))
        easy, others = (
            summarize([r for r in runs if r["set"] == "easy"]),
            summarize([r for r in runs if r["set"] != "easy"]),
        )
        rows.append(
            {
                "worth_hits": worth,
                **summarize(runs),
                "not_easy_reaching": others["recall_at_stop_reached_target"],
                "not_easy_runs": others["runs"],
                "easy_over_max": easy["stop_over_needed_max"],
            }
        )
    table(
        rows,
        [
            "worth_hits",
            "runs",
            "recall_at_stop_reached_target",
            "not_easy_reaching",
            "not_easy_runs",
            "easy_over_max",
            "target_met",
        ],
    )
    save(name, {"target": TARGET, "orders": len(orders), "frontier": rows})


if __name__ == "__main__":
    main()
