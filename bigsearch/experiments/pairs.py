"""The paper's Table 2: how well f generalizes from one positive and one negative.

For each pair (a random positive, a random negative) every method is told the two
labels, and we count the positives among the ``top`` unlabeled points with the highest
f (f alone: no impact factor). Pairs where no method finds any positive are skipped, as
in the paper, until ``pairs`` pairs have been counted (or ``max_draws`` drawn). As in
the authors' code, each positive starts at most one pair until every positive has been
used; negatives are drawn with replacement.

LAS is initialized once without labels and restored from that state for every pair
(engine export_state/from_state), so a pair costs two passes over X, not three plus
an r x r inverse.
"""

import csv
from pathlib import Path

import numpy as np

from .. import __version__
from ..engine.core.registry import method_spec, plan_methods, saving_class
from ..errors import ParameterError
from ..storage import open_store, require_local
from ..storage.atomic import atomic_open, atomic_write_json


def run_pairs(store, out, methods=("las", "wnas"), **kwargs):
    """Run the experiment (:func:`pair_experiment`'s keywords) and write directory ``out``:
    pairs.json (the record), pairs.csv (one row per pair and method) and table2.md.
    Returns (record, the table)."""
    require_local(out, "out")                     # before the experiment, not after it
    record = pair_experiment(store, methods, **kwargs)
    return record, write_pairs(record, out)


def write_pairs(record, out):
    """pairs.json, pairs.csv and table2.md in directory ``out``, each written atomically;
    returns the table."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_json(out / "pairs.json", record)
    with atomic_open(out / "pairs.csv", "w", newline="") as fh:
        write_pairs_csv(record, fh)
    table = pairs_table(record)
    with atomic_open(out / "table2.md", "w") as fh:
        fh.write(table)
    return table


def pair_experiment(store, methods=("las", "wnas"), *, pairs=100, top=100, seed=0, max_draws=None,
                    backend="local", n_threads=None, progress=None, **options):
    """Run the experiment; returns its record (JSON-able): every draw and a summary.

    ``progress(draws, counted)`` is called after each pair, if given.
    """
    for m in methods:
        if not method_spec(m).ranks:
            raise ParameterError(f"{m} search has no scores f to rank points by; leave it out of this experiment")
    if pairs < 1 or top < 1:
        raise ParameterError(f"pairs and top must be >= 1, got {pairs} and {top}")
    planned = plan_methods(methods, options)       # checked before the store is opened
    store = open_store(store)
    y = store.labels()
    if y is None or not (y == 1).any() or not (y == 0).any():
        raise ParameterError(f"{store.path} needs stored labels with positives and negatives for this experiment")
    max_draws = max_draws or 10 * pairs
    starters = {m.name: Starter(store, m, backend=backend, n_threads=n_threads) for m in planned}
    draws = []
    for p, q in _pairs(y, seed, max_draws):
        found = {m: starters[m].positives_in_top(p, q, y, top) for m in methods}
        draws.append({"positive": p, "negative": q, "found": found, "counted": any(found.values())})
        counted = sum(d["counted"] for d in draws)
        if progress:
            progress(len(draws), counted)
        if counted == pairs:
            break
    return {"bigsearch_version": __version__, "store": str(store.path), "n": store.n, "r": store.r,
            "methods": list(methods), "pairs": pairs, "top": top, "seed": seed,
            "params": {m: s.params for m, s in starters.items()},
            "draws": draws, "summary": summarize_pairs(draws, methods)}


def _pairs(y, seed, max_draws):
    """(positive, negative) pairs: positives by successive random permutations,
    negatives uniformly with replacement."""
    rng = np.random.default_rng(seed)
    pos, neg = np.flatnonzero(y == 1), np.flatnonzero(y == 0)
    drawn = 0
    while drawn < max_draws:
        for p in rng.permutation(pos)[:max_draws - drawn]:
            yield int(p), int(rng.choice(neg))
            drawn += 1


class Starter:
    """Fresh searches of one method, each with no labels yet. A method whose
    initialization costs passes over X (``warm_start`` in the registry) is initialized
    once and restored from that state for every pair."""

    def __init__(self, store, method, *, backend="local", n_threads=None):
        self.store, self.method, self.spec = store, method, method.spec     # method: its MethodPlan
        self.backend, self.n_threads = backend, n_threads
        base = method.create(store, backend=backend, n_threads=n_threads)
        self.params = base.params.as_dict()
        self.state = None
        if self.spec.warm_start and self.spec.sessions:
            base.sync()
            self.state = base.export_state()
        base.close()

    def new(self):
        if self.state is not None:
            return saving_class(self.spec.name).from_state(self.store, self.state, backend=self.backend,
                                                           n_threads=self.n_threads)
        return self.method.create(self.store, backend=self.backend, n_threads=self.n_threads)

    def positives_in_top(self, positive, negative, y, top):
        """Label the pair, then count the positives among the ``top`` unlabeled points by f
        (ties: lowest index first)."""
        with self.new() as search:
            search.tell([positive, negative], [1, 0])
            f = np.array(search.f)
        unlabeled = np.flatnonzero(search.labels < 0)
        best = unlabeled[np.argsort(-f[unlabeled], kind="stable")[:top]]
        return int((y[best] == 1).sum())


def summarize_pairs(draws, methods):
    counted = [d for d in draws if d["counted"]]
    out = {}
    for m in methods:
        found = np.array([d["found"][m] for d in counted], float)
        out[m] = {"mean": float(found.mean()) if found.size else float("nan"),
                  "std": float(found.std()) if found.size else float("nan"), "pairs": len(counted)}
    return {"methods": out, "counted": len(counted), "skipped": len(draws) - len(counted)}


def pairs_table(record):
    """Markdown: the paper's Table 2 layout for one store."""
    s = record["summary"]
    header = "| store | " + " | ".join(record["methods"]) + " |"
    row = f"| {record['store'].rstrip('/').split('/')[-1]} | " + " | ".join(
        f"{s['methods'][m]['mean']:.2f} ± {s['methods'][m]['std']:.2f}" for m in record["methods"]) + " |"
    note = (f"Positives among the top {record['top']} unlabeled points by f after one positive and one "
            f"negative label, mean ± standard deviation over {s['counted']} pairs ({s['skipped']} pairs "
            "where no method found any positive skipped).")
    return "\n".join([header, "|---|" + "---:|" * len(record["methods"]), row, "", note]) + "\n"


def write_pairs_csv(record, fh):
    """One row per pair and method, to the open text file ``fh``."""
    w = csv.writer(fh)
    w.writerow(["pair", "positive", "negative", "method", "found", "counted"])
    for k, d in enumerate(record["draws"]):
        for m in record["methods"]:
            w.writerow([k, d["positive"], d["negative"], m, d["found"][m], int(d["counted"])])
