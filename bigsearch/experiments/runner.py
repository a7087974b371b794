"""Batch experiments: every method, several runs, paired starts, resumable.

Run r starts from initial labels drawn with seed S + r (S = ``seed``), and every method
gets the same initial labels in a run, so comparisons are paired; a run can be
reproduced alone with ``seed=S + r, runs=1``. What runs is an experiment's plan
(plan.py), checked before anything here starts. Each finished (method, run) is kept in
the journal (resume.py) before the next starts. At the end the directory holds:

- results.json: the experiment, every run's record (simulate.py) with its ``run``, and
  a summary (mean and standard deviation of the positives found at T/2 and T);
- runs.csv: one row per query (with the store's id); ranking.csv: each run's final top
  100 unlabeled points and their scores; table.md: the paper's Table 1 layout;
- recall.png, recall.pdf, recall.svg: the recall curves (when matplotlib is installed).
"""

import contextlib
from pathlib import Path

from .. import __version__
from ..storage.atomic import atomic_write_bytes, atomic_write_json
from .plan import Experiment, ExperimentPlan, Output
from .reports import markdown_table, recall_curves, summarize, write_ranking_csv, write_runs_csv
from .resume import Journal
from .simulate import run_planned


def run_methods(store, methods, budget, out, *, overwrite=False, backend="local", n_threads=None, progress=None,
                plot=True, **settings):
    """Run each method from the same initial labels (per run) into directory ``out``
    (see :class:`Experiment` and :func:`run_experiment`); returns (results, notes).

    ``settings``: the experiment's (seed, runs, init_index, init_positives,
    init_negatives, batch_size, graded, start_from, dataset: :class:`Experiment`) and
    the methods' parameters and engine options (pi, alpha, anchors, prune, ...), each
    method taking those it has (the registry, engine/core/registry.py).
    """
    exp = Experiment.of(store, methods, budget, **settings)
    return run_experiment(exp, out, overwrite=overwrite, backend=backend, n_threads=n_threads, progress=progress,
                          plot=plot)


def run_experiment(exp, out, *, overwrite=False, backend="local", n_threads=None, progress=None, plot=True):
    """Run (or continue) ``exp`` into directory ``out``; returns (results, notes).

    ``progress(method, run)`` may return a context manager yielding ``update(step, hits)``
    (e.g. a progress bar); an ``update.initializing(what, done, total)``, if it has one,
    hears of the steps before the first query (AGR's k-means). ``notes`` lists outputs that were skipped, with why.
    """
    return execute(exp.plan.run_on(backend, n_threads, Output(out, overwrite, plot)), progress)


def execute(plan: ExperimentPlan, progress=None):
    """Run (or continue) the runs of ``plan`` (an Experiment's, with its output) that its
    directory does not hold yet; returns (results, notes). ``progress``: as for
    :func:`run_experiment`."""
    output, exp = plan.output, plan.experiment
    if output is None or exp is None:
        raise ValueError("execute() runs the plan of an Experiment with its output: see run_experiment")
    with plan.open_store() as store:
        on_store = plan.on_store(store)  # before anything in the output directory is touched
        journal = Journal(output.out, exp.identity(store, on_store.y), output.overwrite)
        _run_missing(on_store, journal, progress or (lambda method, run: contextlib.nullcontext(None)))
        records = [journal.done[(m.name, r)] for r in range(plan.runs) for m in plan.methods]
        results = {"bigsearch_version": __version__, "store": str(store.path), "n": store.n, "r": store.r,
                   "budget": plan.budget, "experiment": exp.describe(), "runs": records,
                   "summary": summarize(records, plan.budget, [m.name for m in plan.methods])}
        curves = recall_curves(records, store.n, int((on_store.y == 1).sum()))
        return results, write_outputs(output.out, results, curves, output.plot, ids=store.ids)


def _run_missing(on_store, journal, progress):
    """Each (method, run) the journal does not hold, run by run, each kept when done."""
    for run in range(on_store.plan.runs):
        for method in on_store.methods:
            if (method.name, run) in journal.done:
                continue
            with progress(method.name, run) as update:
                record = run_planned(on_store, method, run, update, getattr(update, "initializing", None))
            journal.append({"run": run, **record})


def recall_title(results):
    """The figure's title: what was searched, how big, how many runs."""
    name = Path(results["store"].rstrip("/")).stem
    runs = results["experiment"]["runs"]
    return f"Positives found vs queries on {name} ({results['n']:,} points, {runs} run{'s' * (runs != 1)})"


def write_outputs(out, results, curves, plot=True, ids=None):
    """results.json, runs.csv, ranking.csv, table.md and recall.png/.pdf/.svg (none unless
    ``plot``); returns notes on skipped files. ``ids(indices)``: the store's ids of points
    (None if it has none)."""
    out = Path(out)
    atomic_write_json(out / "results.json", results)
    write_runs_csv(results["runs"], out / "runs.csv", ids)
    write_ranking_csv(results["runs"], out / "ranking.csv", ids)
    atomic_write_bytes(out / "table.md", markdown_table(results["summary"], results["budget"]).encode())
    notes = []
    if not plot:  # asked for none (run --no-plots): an earlier command's figures would show other results
        for fmt in ("png", "pdf", "svg"):
            (out / f"recall.{fmt}").unlink(missing_ok=True)
    elif curves["queries"]:
        from .plots import plot_recall
        try:
            plot_recall(curves, out / "recall.png", title=recall_title(results))
        except ImportError as e:
            notes.append(f"recall.png, .pdf and .svg not written: {e}")
    return notes
