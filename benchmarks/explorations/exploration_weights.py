"""Would exploration draws that favour records unlike those read find a hidden topic sooner?

On a multi-topic corpus (tools/make_abstracts.py --preset multi-topic, 3,000 records), from a
recorded `bigsearch run --method screen` (its results.json), at each start of an exploration
phase (engine/guidance/exploration.py) while an inclusion topic is still unfound: the
expected draws to the first relevant record of an unfound topic, 1 / P(a draw hits one),
for draws uniform over the unread records (the engine's) and for draws weighted
exp(-(s - min s) / tau), s a record's largest (or mean) cosine to the records read or its
largest to the relevant ones found. Each record's topic comes from replaying the generator
(the same seed and preset); the cosines from the store's features (exact, r ~ n).

    python benchmarks/explorations/exploration_weights.py RUN_DIR --seed 1 --explore-after 70
"""

import argparse
import importlib.util
import json
from pathlib import Path

import numpy as np
import zarr

from bigsearch.engine.guidance.exploration import exploring

GENERATOR = Path(__file__).resolve().parents[2] / "tools" / "make_abstracts.py"


def topics_of(n, preset, seed):
    """(label, kind, inclusion topic or -1) of each record, replayed from the generator's
    first block (kind: 0 irrelevant, 1 near miss, 2 relevant, 3 relevant outlier)."""
    spec = importlib.util.spec_from_file_location("make_abstracts", GENERATOR)
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    args = gen.parse_args(["unused.csv", "--n", str(n), "--preset", preset, "--seed", str(seed), "--overwrite"])
    keys = ("seed prevalence overlap near_miss_share outliers inclusion_topics focus vocabulary topics topic_words "
            "abstract_words title_words empty_abstracts journals format ris_label cited_refs gzip_level").split()
    p = {k: getattr(args, k) for k in keys} | {"gzip": False}
    if n > args.block_records:
        raise SystemExit("the replay covers the generator's first block only")
    model = gen.build_model(p)
    rng = np.random.default_rng(np.random.SeedSequence(p["seed"], spawn_key=(1, 0)))
    labels = np.zeros(n, dtype=np.int64)
    labels[rng.choice(n, int(np.floor(p["prevalence"] * n + rng.random())), replace=False)] = 1
    topics, _, kind = gen.mixtures(rng, model, p, labels)
    slot = np.where(kind == 2, 0, 1)  # relevant: the main topic; near misses and outliers mention it
    index = {int(t): k for k, t in enumerate(model["inclusion"])}
    which = np.array([index.get(int(topics[i, slot[i]]), -1) if kind[i] else -1 for i in range(n)])
    return labels, kind, which


def main(run_dir, seed, explore_after, preset="multi-topic"):
    record = json.loads((Path(run_dir) / "results.json").read_text())
    run = record["runs"][0]
    order = np.array([i for i, _ in run["init"]] + [i for i, _ in run["queries"]])
    answers = np.array([y for _, y in run["init"]] + [y for _, y in run["queries"]])
    X = np.asarray(zarr.open_group(record["store"], mode="r")["X"][:], np.float64)
    labels, kind, which = topics_of(len(X), preset, seed)
    assert np.array_equal(labels[order], answers), "the replayed labels differ from the run's"
    cos = X @ X.T
    rows = []
    for s in range(1, len(order)):
        if not exploring(answers[:s], explore_after) or exploring(answers[: s - 1], explore_after):
            continue
        read = order[:s]
        unread = np.setdiff1d(np.arange(len(X)), read)
        found = {int(which[i]) for i in read if kind[i] == 2}
        target = (labels[unread] == 1) & ~np.isin(which[unread], list(found))
        if not target.any():
            continue
        relevant = read[labels[read] == 1]
        scores = {"largest cosine to the read": cos[np.ix_(unread, read)].max(axis=1),
                  "mean cosine to the read": cos[np.ix_(unread, read)].mean(axis=1),
                  "largest cosine to the relevant found": cos[np.ix_(unread, relevant)].max(axis=1)}
        draws = {"uniform": 1.0 / target.mean()}
        for name, score in scores.items():
            for tau in (0.02, 0.05, 0.1):
                w = np.exp(-(score - score.min()) / tau)
                draws[f"{name}, tau {tau}"] = w.sum() / w[target].sum()
        largest = scores["largest cosine to the read"]
        rows.append(dict(read=s, unfound_relevant=int(target.sum()), unread=len(unread),
                         expected_draws={k: round(v, 1) for k, v in draws.items()},
                         median_largest_cosine={"unfound relevant": round(float(np.median(largest[target])), 3),
                                                "others": round(float(np.median(largest[~target])), 3)}))
    return rows


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir")
    ap.add_argument("--seed", type=int, default=1, help="the corpus's make_abstracts seed")
    ap.add_argument("--explore-after", type=int, default=100)
    a = ap.parse_args()
    for row in main(a.run_dir, a.seed, a.explore_after):
        print(json.dumps(row))
