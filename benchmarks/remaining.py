"""How far off are the estimates of positives remaining? LAS on Adult and MNIST (the paper's
stores, benchmarks/paper), compared with the truth at 50, 100 and 200 labels.

    python benchmarks/remaining.py          # about 3 minutes on 2 cores

Each run starts from one random positive (as `bigsearch run` does) and queries with LAS
(alpha = 0). At each checkpoint t it records the truth (positives still unlabeled) and:

- score_sum: sum of f over the unlabeled points, with its (calibrated-f) interval;
- recent_hit_rate: positives among the last 20 labels, against the rate of the next 20
  queries (what it predicts);
- uniform_50, uniform_200: m = 50 or 200 uniform draws labeled by the oracle, the estimate and its
  95% (Wilson) interval, repeated over DRAWS independent samples (the labels are not told
  to the search: the question is what m labels spent on an estimate would say); mixed_50:
  50 draws, half of them f-proportional (Hansen-Hurwitz, normal interval).

Writes benchmarks/results/remaining.json: per data set, per t, the mean error and the
coverage of the intervals over runs (and samples).
"""

import importlib.util
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import save  # noqa: E402  (benchmarks/common.py)

_spec = importlib.util.spec_from_file_location("paper_common", Path(__file__).resolve().parent / "paper" / "common.py")
paper = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(paper)  # the paper scripts' stores (benchmarks/paper/common.py)
prepare, replication_ingest = paper.prepare, paper.replication_ingest

from bigsearch import LAS, open_store  # noqa: E402
from bigsearch.engine.guidance.remaining import draw_sample, recent_hit_rate, sampled_estimate, score_sum  # noqa: E402

CHECKPOINTS = (50, 100, 200)
RUNS = 5
SAMPLERS = (("uniform_50", 1.0, 50), ("uniform_200", 1.0, 200), ("mixed_50", 0.5, 50))  # name, mix, draws
DRAWS = 40
WINDOW = 20


def stores():
    return {name: prepare(name, *replication_ingest(name)) for name in ("adult", "mnist")}


def one_run(store, y, seed):
    """LAS from one random positive; the estimates at each checkpoint."""
    rng = np.random.default_rng(seed)
    start = int(rng.choice(np.flatnonzero(y == 1)))
    out = []
    with LAS(store, alpha=0.0) as search:
        search.tell(start, 1)
        answers = []
        for t in range(1, max(CHECKPOINTS) + WINDOW + 1):
            i = search.ask()
            answers.append(int(y[i]))
            if t in CHECKPOINTS:
                out.append(estimates_at(search, y, answers, t, rng))
            search.tell(i, int(y[i]))
    for row in out:  # what recent_hit_rate predicts: the rate of the next WINDOW queries
        t = row["t"]
        row["next_rate"] = float(np.mean(answers[t : t + WINDOW]))
    return out


def estimates_at(search, y, answers, t, rng):
    labels = search.labels
    f = search.f
    truth = int(np.sum((labels < 0) & (y == 1)))
    row = {
        "t": t,
        "truth": truth,
        "unlabeled": int(np.sum(labels < 0)),
        "score_sum": score_sum(f, labels).as_dict(),
        "recent_hit_rate": recent_hit_rate(np.array(answers), WINDOW).as_dict(),
    }
    for name, mix, m in SAMPLERS:
        draws = []
        for _ in range(DRAWS):
            idx, p = draw_sample(f, labels, m, rng, mix)
            draws.append(sampled_estimate((y[idx] == 1).astype(np.float64), p).as_dict())
        row[name] = draws
    return row


def summarize(rows):
    """Per t: mean truth, mean signed and absolute error, interval coverage."""
    out = []
    for t in CHECKPOINTS:
        at = [r for r in rows if r["t"] == t]
        truth = np.array([r["truth"] for r in at], np.float64)
        entry = {"t": t, "truth_mean": truth.mean(), "unlabeled": at[0]["unlabeled"]}
        s = np.array([r["score_sum"]["value"] for r in at])
        entry["score_sum"] = {
            "mean": s.mean(),
            "mean_error": (s - truth).mean(),
            "mean_abs_error": np.abs(s - truth).mean(),
            "coverage": np.mean([r["score_sum"]["low"] <= r["truth"] <= r["score_sum"]["high"] for r in at]),
        }
        rate = np.array([r["recent_hit_rate"]["value"] for r in at])
        nxt = np.array([r["next_rate"] for r in at])
        entry["recent_hit_rate"] = {
            "mean": rate.mean(),
            "next_rate_mean": nxt.mean(),
            "mean_abs_error": np.abs(rate - nxt).mean(),
        }
        for name, _, _ in SAMPLERS:
            vals = [(d, r["truth"]) for r in at for d in r[name]]
            v = np.array([d["value"] for d, _ in vals])
            tr = np.array([x for _, x in vals], np.float64)
            entry[name] = {
                "mean": v.mean(),
                "mean_error": (v - tr).mean(),
                "mean_abs_error": np.abs(v - tr).mean(),
                "mean_width": np.mean([d["high"] - d["low"] for d, _ in vals]),
                "coverage": np.mean([d["low"] <= x <= d["high"] for d, x in vals]),
            }
        out.append(entry)
    return out


def main():
    record = {"runs": RUNS, "samplers": SAMPLERS, "draws": DRAWS, "window": WINDOW, "sets": {}}
    for name, path in stores().items():
        with open_store(path) as store:
            y, n = store.labels(), store.n
        rows = [row for seed in range(RUNS) for row in one_run(path, y, seed)]
        summary = summarize(rows)
        record["sets"][name] = {"n": int(n), "positives": int((y == 1).sum()), "summary": summary}
        for e in summary:
            print(
                f"{name} t={e['t']}: truth {e['truth_mean']:.1f}; score_sum {e['score_sum']['mean']:.1f} "
                f"(abs err {e['score_sum']['mean_abs_error']:.1f}, covers {e['score_sum']['coverage']:.0%}); "
                + "; ".join(
                    f"{k} {e[k]['mean']:.1f} (abs err {e[k]['mean_abs_error']:.1f}, width "
                    f"{e[k]['mean_width']:.0f}, covers {e[k]['coverage']:.0%})"
                    for k, _, _ in SAMPLERS
                )
                + "; recent rate "
                f"{e['recent_hit_rate']['mean']:.2f} vs next {e['recent_hit_rate']['next_rate_mean']:.2f}"
            )
    save("remaining", record)


if __name__ == "__main__":
    main()
