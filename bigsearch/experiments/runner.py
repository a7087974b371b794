"""Batch experiments: every method, several runs, paired starts, resumable.

Run r starts from initial labels drawn with seed S + r (S = ``seed``), and every method
gets the same initial labels in a run, so comparisons are paired; a run can be
reproduced alone with ``seed=S + r, runs=1``. Each finished (method, run) is kept in the
journal (resume.py) before the next starts. At the end the directory holds:

- results.json: the experiment, every run's record (simulate.py) with its ``run``, and
  a summary (mean and standard deviation of the positives found at T/2 and T);
- runs.csv: one row per query (with the store's id); ranking.csv: each run's final top
  100 unlabeled points and their scores; table.md: the paper's Table 1 layout;
- recall.png, recall.pdf, recall.svg: the recall curves (when matplotlib is installed).
"""

import contextlib
import hashlib
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from .. import __version__
from ..engine.core.registry import method_spec
from ..engine.guidance.seeding import resolve_start
from ..errors import ParameterError
from ..storage import open_store, require_local
from ..storage.atomic import atomic_write_bytes, atomic_write_json
from ..storage.fingerprint import store_fingerprint
from .graded import is_raw, load_answers
from .reports import markdown_table, recall_curves, summarize, write_ranking_csv, write_runs_csv
from .resume import Journal
from .simulate import check_budget, initial_labels, make_search, simulate


@dataclass(frozen=True)
class Experiment:
    """What to run. ``options`` are the methods' parameters (pi, eta, w0, alpha for LAS;
    anchors, neighbors, gamma for AGR); None means the method's default."""
    store: str
    methods: tuple
    budget: int
    runs: int = 1
    seed: int = 0
    init_index: tuple | None = None
    init_positives: int = 1
    init_negatives: int = 0
    batch_size: int = 1
    options: dict = field(default_factory=dict)
    graded: tuple | None = None  # (scores file, BEST, ZERO), or (file, "raw", sign): experiments/graded.py
    start_from: str | None = None  # a cold start (engine/guidance/seeding.py) instead of the initial labels
    dataset: str | None = None   # the array of the store holding X (None: X)

    def __post_init__(self):
        if self.runs < 1:
            raise ParameterError(f"runs must be >= 1, got {self.runs}")
        if self.budget < 0:
            raise ParameterError(f"budget must be >= 0, got {self.budget}")
        if self.batch_size < 1:
            raise ParameterError(f"batch_size must be >= 1, got {self.batch_size}")
        if self.start_from is not None and self.init_index is not None:
            raise ParameterError("give init_index or start_from, not both")
        if self.start_from is not None and self.runs > 1:
            raise ParameterError("start_from gives every run the same start, so several runs would repeat "
                                 "each other; give runs=1")
        if self.init_index is not None and self.runs > 1:
            raise ParameterError("init_index gives every run the same start, so several runs would repeat "
                                 "each other; use init_positives / init_negatives for random starts")

    def run_seed(self, run):
        return self.seed + run

    def identity(self, store, y):
        """Everything a run's record depends on (resume.py compares it): the store's X
        (fingerprint) and its labels y, which answer the queries."""
        init = {"index": list(self.init_index) if self.init_index is not None else None,
                "positives": self.init_positives, "negatives": self.init_negatives}
        return {"format": 2, "store": store_fingerprint(store),
                "labels_sha256": hashlib.sha256(np.ascontiguousarray(y, np.int8).tobytes()).hexdigest(),
                "budget": self.budget, "seed": self.seed,
                "init": init, "batch_size": self.batch_size,
                **({"graded": [str(self.graded[0]), *self.graded[1:]]} if self.graded else {}),
                **({"dataset": self.dataset} if self.dataset else {}),
                **({"start_from": self.start_from} if self.start_from else {}),
                "options": {k: v for k, v in sorted(self.options.items()) if v is not None}}


def run_methods(store, methods, budget, out, *, seed=0, runs=1, init_index=None, init_positives=1,
                init_negatives=0, batch_size=1, overwrite=False, backend="local", n_threads=None, progress=None,
                plot=True, graded=None, start_from=None, dataset=None, **options):
    """Run each method from the same initial labels (per run) into directory ``out``
    (see :class:`Experiment` and :func:`run_experiment`); returns (results, notes).

    ``options`` are the methods' parameters and engine options (pi, alpha, anchors,
    prune, ...): each method takes those it has (the registry, engine/core/registry.py).
    """
    exp = Experiment(str(store), tuple(methods), budget, runs, seed,
                     tuple(init_index) if init_index is not None else None, init_positives, init_negatives,
                     batch_size, options, graded, start_from, dataset)
    return run_experiment(exp, out, overwrite=overwrite, backend=backend, n_threads=n_threads, progress=progress,
                          plot=plot)


def run_experiment(exp, out, *, overwrite=False, backend="local", n_threads=None, progress=None, plot=True):
    """Run (or continue) ``exp`` into directory ``out``; returns (results, notes).

    ``progress(method, run)`` may return a context manager yielding ``update(step, hits)``
    (e.g. a progress bar); an ``update.initializing(what, done, total)``, if it has one,
    hears of the steps before the first query (AGR's k-means). ``notes`` lists outputs that were skipped, with why.
    """
    out = require_local(out, "out")
    progress = progress or (lambda method, run: contextlib.nullcontext(None))
    with open_store(exp.store, {"dataset": exp.dataset}) as store:
        y = store.labels()
        if y is None:
            raise ParameterError(f"{store.path} has no labels (y), so no oracle can be simulated; "
                                 "use an interactive session instead")
        start = resolve_start(store, exp.start_from)
        starts = _check_experiment(exp, store, y, start)      # before anything in ``out`` is touched
        answers = load_answers(exp.graded[0], *exp.graded[1:], store.n) if exp.graded else None
        journal = Journal(out, exp.identity(store, y), overwrite)
        for run, init in enumerate(starts):
            for method in exp.methods:
                if (method, run) in journal.done:
                    continue
                with progress(method, run) as update:
                    record = simulate(store, method, exp.budget, exp.run_seed(run), init, progress=update,
                                      init_progress=getattr(update, "initializing", None),
                                      batch_size=exp.batch_size, backend=backend, n_threads=n_threads,
                                      answers=answers if _takes(method, exp.graded) else None,
                                      start_from=start, **exp.options)
                journal.append({"run": run, **record})
        records = [journal.done[(m, r)] for r in range(exp.runs) for m in exp.methods]
        results = {"bigsearch_version": __version__, "store": str(store.path), "n": store.n, "r": store.r,
                   "budget": exp.budget, "experiment": _describe(exp), "runs": records,
                   "summary": summarize(records, exp.budget, list(exp.methods))}
        curves = recall_curves(records, store.n, int((y == 1).sum()))
        return results, write_outputs(out, results, curves, plot, ids=store.ids)


def _takes(method, graded):
    """Whether ``method`` is told the answers of ``graded`` (raw scores: methods that regress
    them; graded labels: methods that take those); the others get the stored 0/1 labels."""
    cls = method_spec(method).cls
    return cls.REAL_LABELS if is_raw(graded) else cls.GRADED


def _check_experiment(exp, store, y, start=None):
    """Every run's initial labels, and each method's parameters, checked up front: a bad
    argument must fail before an --overwrite replaces anything. Returns the starts."""
    starts = [_initial(exp, y, run, start) for run in range(exp.runs)]
    _check_budget(exp, store.n, len(starts[0]))
    for method in exp.methods:
        make_search(store, method, seed=exp.seed, backend="local", n_threads=1, **exp.options).close()
    _check_fantasy(exp)                   # after the methods' own check of its value
    _check_targets(exp)
    return starts


def _check_targets(exp):
    """Raw scores are targets for the methods that regress them: another method would
    silently learn from the stored 0/1 labels alone."""
    if is_raw(exp.graded) and not any(method_spec(m).cls.REAL_LABELS for m in exp.methods):
        raise ParameterError(f"graded scores without BEST,ZERO are regression targets, which none of "
                             f"{', '.join(exp.methods)} takes (blr does); to grade them, give graded BEST,ZERO")


def _check_fantasy(exp):
    """fantasy chooses the points of a batch: without batches, or without a method that
    takes it, it would be ignored."""
    if exp.options.get("fantasy") is None:
        return
    if exp.batch_size == 1:
        raise ParameterError("fantasy chooses the points of each batch: it needs batch_size > 1")
    if not any("fantasy" in method_spec(m).options() for m in exp.methods):
        raise ParameterError(f"fantasy applies to none of the methods run ({', '.join(exp.methods)})")


def _initial(exp, y, run, start):
    """Run ``run``'s initial labels: a start's known positives (answered by y), none for a
    vector or keyword start (it chooses the first queries), else drawn or given."""
    if start is not None:
        return [] if start.positives is None else initial_labels(y, exp.run_seed(run), start.positives.tolist())
    return initial_labels(y, exp.run_seed(run), exp.init_index, exp.init_positives, exp.init_negatives)


def _check_budget(exp, n, n_initial):
    """Refuse a budget larger than the points left unlabeled after the initial labels
    (every run starts from as many): it would label everything, slowly, to no purpose."""
    check_budget(exp.budget, n - n_initial)


def _describe(exp):
    d = asdict(exp)
    d["methods"] = list(exp.methods)
    d["seeds"] = [exp.run_seed(r) for r in range(exp.runs)]
    return d


def recall_title(results):
    """The figure's title: what was searched, how big, how many runs."""
    name = Path(results["store"].rstrip("/")).stem
    runs = results["experiment"]["runs"]
    return f"Positives found vs queries on {name} ({results['n']:,} points, {runs} run{'s' * (runs != 1)})"


def write_outputs(out, results, curves, plot=True, ids=None):
    """results.json, runs.csv, ranking.csv, table.md and recall.png/.pdf/.svg; returns notes on
    skipped files. ``ids(indices)``: the store's ids of points (None if it has none)."""
    out = Path(out)
    atomic_write_json(out / "results.json", results)
    write_runs_csv(results["runs"], out / "runs.csv", ids)
    write_ranking_csv(results["runs"], out / "ranking.csv", ids)
    atomic_write_bytes(out / "table.md", markdown_table(results["summary"], results["budget"]).encode())
    notes = []
    if plot and curves["queries"]:
        from .plots import plot_recall
        try:
            plot_recall(curves, out / "recall.png", title=recall_title(results))
        except ImportError as e:
            notes.append(f"recall.png, .pdf and .svg not written: {e}")
    return notes
