"""`bigsearch run`: simulated-oracle experiments; `bigsearch pairs`: the paper's Table 2;
`bigsearch demo`: a run on a built-in store."""

import contextlib
import math
import sys
from pathlib import Path

import click

from ..engine.core.registry import method_names  # the registry only: no numerical code
from ..errors import ParameterError
from . import main
from .options import (
    BLR_RENAMED,
    SCREEN_RENAMED,
    IndexList,
    MethodList,
    blr_options,
    cluster_backend,
    cluster_options,
    dataset_option,
    flags_for,
    las_options,
    object_store_options,
    screen_options,
)

# Parameters the library names in its errors, and the flags users give them by here.
RUN_FLAGS = ("init_index", "init_positives", "init_negatives", "batch_size", "overwrite", "start_from", "fantasy",
             "prune", "pi", "eta", "w0", "alpha", "acquisition", "beta", "stop_at_recall")
AGR_RENAMED = {"anchors": "--agr-anchors", "neighbors": "--agr-neighbors", "gamma": "--agr-gamma"}
RUN_RENAMED = {"graded scores": "--scores", "graded BEST,ZERO": "--grade",    # graded=(FILE, BEST, ZERO)
               **AGR_RENAMED, **BLR_RENAMED, **SCREEN_RENAMED}
# The parameter each of `run`'s options passes as, where the flag is spelled otherwise (the
# option --agr-anchors, agr_anchors, is anchors); the others pass by their own name.
PARAMETER_OF = {flag[2:].replace("-", "_"): name for name, flag in {**AGR_RENAMED, **BLR_RENAMED,
                                                                    **SCREEN_RENAMED}.items()}


def experiment_from_flags(store, methods, budget, **flags):
    """The Experiment `bigsearch run` runs, planned from its flags (every check, before a
    cluster starts or the store is opened): each flag passes by its parameter's name
    (``PARAMETER_OF``) to ``Experiment.of``, which keeps the experiment's own and gives
    the rest to the methods."""
    from ..experiments import Experiment
    graded = _graded(flags.pop("scores"), flags.pop("grade"), flags.pop("lower_is_better"))
    flags.update(prune=flags["prune"] or None, fantasy=_fantasy(flags["fantasy"]))   # in place: results.json's order
    with flags_for(*RUN_FLAGS, renamed=RUN_RENAMED):
        return Experiment.of(store, methods, budget, graded=graded,
                             **{PARAMETER_OF.get(k, k): v for k, v in flags.items()})


def run_and_report(exp, out, *, quiet=False, table=True, verbose=False, checkpoints=None, **where):
    """``experiments.run_experiment`` of ``exp`` into ``out`` (``where``: overwrite,
    backend, n_threads, plot) with progress bars, then a summary, the table (at ``checkpoints``
    when given: table.md is rewritten at them) and where the results are (unless
    ``quiet``); ``verbose``: how each method chose its queries too."""
    from ..experiments import run_experiment
    from ..experiments.reports import markdown_table, write_table
    with flags_for(*RUN_FLAGS, renamed=RUN_RENAMED):
        results, notes = run_experiment(exp, out, progress=None if quiet else _bars(exp.budget, exp.runs), **where)
    shown = write_table(out, results, checkpoints) if checkpoints else markdown_table(results["summary"], exp.budget)
    if not quiet:
        if exp.runs == 1:
            _print_summary(results["runs"])
            for r in results["runs"]:
                _print_remaining(r)
        if exp.stop_at_recall is not None:
            _print_stops(results["runs"], exp.stop_at_recall, results["n"])
        if table:
            click.echo(shown)
        for r in results["runs"][:len(exp.methods)] if verbose else ():
            _print_reads(r)
        for note in notes:
            click.echo(note, err=True)
        click.echo(f"results: {Path(out) / 'results.json'}", err=True)


def _bars(budget, runs):
    """Progress bars per (method, run), when stderr is a terminal: the steps of a long
    initialization (AGR's k-means), then the queries with the hits so far. The query bar
    starts once the initialization is done, so its ETA is that of the queries alone."""
    show = sys.stderr.isatty()

    @contextlib.contextmanager
    def bar(method, run):
        label = f"run {run + 1}/{runs} {method:>6}" if runs > 1 else f"{method:>6}"
        bars = {}

        def move(name, length, done, text):
            if name not in bars:
                for other in list(bars):          # one bar at a time: finish the one before
                    bars.pop(other).__exit__(None, None, None)
                bars[name] = click.progressbar(length=length, label=text, file=sys.stderr, show_pos=True,
                                               hidden=not show)
                bars[name].__enter__()
            b = bars[name]
            b.label = text
            b.update(done - b.pos)

        def initializing(what, done, total):
            move(what, total, done, f"{label} {what}")

        def update(step, hits):
            move("queries", budget, step, f"{label} hits {hits}")

        update.initializing = initializing
        try:
            yield update
        finally:
            for b in bars.values():
                b.__exit__(None, None, None)
    return bar


def _print_summary(runs):
    # compile s: numba compiling the kernels before the run (from its disk cache after the first)
    click.echo(f"{'method':>8} {'hits':>6} {'queries':>8} {'init s':>8} {'ms/iter':>8} {'compile s':>9}")
    for r in runs:
        its = sorted(r["timings"]["iteration_seconds"])
        med = its[len(its) // 2] * 1e3 if its else float("nan")
        click.echo(f"{r['method']:>8} {r['hits'][-1] if r['hits'] else 0:>6} {len(r['queries']):>8} "
                   f"{r['timings']['init_seconds']:>8.2f} {med:>8.1f} "
                   f"{r['timings'].get('compile_seconds', 0.0):>9.2f}")


def _print_remaining(record):
    """What is left after the run: the estimate of positives remaining and the recent hit
    rate (engine/guidance/remaining.py; docs/sessions.md, "How many are left")."""
    rem = record.get("remaining")
    if not rem:
        return
    parts = []
    if rem["recent_hit_rate"] is not None:
        r = rem["recent_hit_rate"]
        parts.append(f"last {r['basis']} labels {r['value']:.0%} positive ({r['level']:.0%} interval "
                     f"{r['low']:.0%}-{r['high']:.0%})")
    if rem["score_sum"] is not None:
        parts.append(f"sum of f over the unlabeled {rem['score_sum']['value']:,.0f} (not calibrated: no count)")
    if parts:
        click.echo(f"{record['method']}: " + "; ".join(parts), err=True)


def _print_stops(runs, target, n):
    """Where the stopping rule stopped each method's runs, and the recall estimated there
    (engine/guidance/stopping.py): the budget columns of the table keep a stopped run's
    last count, so this is where a run's end is said."""
    for method in dict.fromkeys(r["method"] for r in runs):
        mine = [r for r in runs if r["method"] == method]
        stopped = [r for r in mine if r.get("stopped") is not None]
        if len(mine) == 1:
            click.echo(f"{method}: {_stop_line(mine[0], target, n)}", err=True)
        elif stopped:
            at = sorted(r["stopped"] for r in stopped)
            click.echo(f"{method}: the rule stopped {len(stopped)} of {len(mine)} runs, after "
                       f"{at[0]:,}-{at[-1]:,} queries (a recall of {target:.0%} reached with 95% confidence)",
                       err=True)
        else:
            click.echo(f"{method}: the rule stopped none of {len(mine)} runs within the budget", err=True)


def _stop_line(record, target, n):
    read = len(record["init"]) + len(record["queries"])
    value, low, high = (record["recall_estimate"] or [[None] * 3])[-1]
    estimate = ("recall not estimated yet" if value is None else
                f"recall {value:.1%} estimated ({low:.1%}-{high:.1%}, 95% interval)")
    if record.get("stopped") is not None:
        return (f"stopped by the rule after {len(record['queries']):,} queries ({read:,} of {n:,} records read): "
                f"{estimate}, a recall of {target:.0%} reached with 95% confidence")
    return f"not stopped by the rule within the budget ({read:,} of {n:,} records read): {estimate}"


def _print_reads(record):
    """How LAS chose its queries (pruned or full passes) and the share of X each read."""
    if "pruning" not in record:
        return
    read = record["bytes_read"][1:]          # the first round's reads are the initialization
    share = f"; X read per round: mean {sum(read) / len(read) / record['x_bytes']:.1%}" if read else ""
    click.echo(f"{record['method']}: pruning {record['pruning']}{share}", err=True)


def agr_options(f):
    """--agr-anchors, --agr-neighbors, --agr-gamma: the parameters of AGR."""
    for decorator in reversed([
        click.option("--agr-anchors", type=click.IntRange(1), default=None,
                     help="AGR: number of k-means anchors (cached beside the store); default 500, or one per "
                          "10 points when that is fewer (at least --agr-neighbors)."),
        click.option("--agr-neighbors", type=click.IntRange(1), default=3, show_default=True,
                     help="AGR: nearest anchors each point is embedded on (LAE)."),
        click.option("--agr-gamma", type=click.FloatRange(0), default=0.01, show_default=True,
                     help="AGR: weight of the anchor-graph Laplacian regularizer."),
    ]):
        f = decorator(f)
    return f


def search_options(f):
    """What run and pairs share: the LAS and AGR parameters, --threads, and the cluster."""
    f = dataset_option(object_store_options(cluster_options(f)))
    f = click.option("--threads", type=click.IntRange(1), default=None,
                     help="Threads of the local backend (default: one per core).")(f)
    return las_options(agr_options(f))


@main.command()
@click.argument("store", type=click.Path(path_type=str))
@click.option("--method", "methods", type=MethodList(method_names()), default="las", show_default=True,
              help=f"{', '.join(method_names())}; several separated by commas.")
@click.option("--budget", type=int, required=True, help="Number of queries (T), at least 1.")
@click.option("--runs", type=click.IntRange(1), default=1, show_default=True,
              help="Runs per method; run r starts from labels drawn with seed S + r.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the initial labels (and of random).")
@click.option("--init-index", type=IndexList(), default=None, help="Start from these labeled points.")
@click.option("--init-positives", type=click.IntRange(0), default=1, show_default=True,
              help="Start from this many random positives (when --init-index is not given).")
@click.option("--init-negatives", type=click.IntRange(0), default=0, show_default=True,
              help="... and this many random negatives.")
@click.option("--start-from", default=None, metavar="SPEC",
              help="Start from what you know instead of a random positive: ids:ID,ID,... (known positives), "
                   "vector:FILE.npy (ask the most similar first) or keyword:COLUMN=WORDS (ask matching "
                   "records first); docs/sessions.md.")
@click.option("--batch-size", type=click.IntRange(1), default=1, show_default=True,
              help="Label the top B points of each pass before updating (1: sequential).")
@click.option("--stop-at-recall", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=None,
              metavar="R", help="Stop a run before the budget once the recall reached is R with 95% confidence "
                                "(a stopping rule for screening, docs/screening.md); every run records the "
                                "estimated recall per query either way.")
@search_options
@blr_options
@screen_options
@click.option("--prune", is_flag=True,
              help="LAS (alpha = 0), WNAS, BLR (greedy, UCB) and screen (neighbour weight 0): exact pruned queries: "
                   "read only the blocks of rows that could hold the answer; the queries are those of the full pass.")
@click.option("--fantasy", default=None, metavar="Y|f",
              help="LAS batches: sequential greedy, each chosen point told the fantasized label Y in [0, 1] "
                   "(or its own f) until answered (docs/discovery.md).")
@click.option("--scores", default=None, metavar="FILE|FILE:COLUMN",
              help="Answers from scores: one per point (.npy or one number per line), or a column of a "
                   "CSV/TSV/Parquet file (a name or a 0-based index). With --grade, mapped to graded labels; "
                   "without, the scores themselves are the targets of methods that regress them (blr).")
@click.option("--lower-is-better", is_flag=True,
              help="--scores without --grade: lower scores are better (e.g. docking energies).")
@click.option("--grade", default=None, metavar="BEST,ZERO",
              help="--scores mapping: BEST or beyond answers 1, ZERO or beyond 0, linear between.")
@click.option("--out", type=click.Path(file_okay=False, path_type=str), required=True,
              help="Directory for results.json, runs.csv, ranking.csv, table.md and recall.png/.pdf/.svg.")
@click.option("--overwrite", is_flag=True, help="Replace the results of another experiment in --out.")
@click.option("--checkpoints", type=IndexList(), default=None, metavar="T1,T2,...",
              help="Query counts the results table reports (default: half the budget and the budget).")
@click.option("--no-plots", is_flag=True,
              help="Leave out recall.png/.pdf/.svg: matplotlib is not imported (about 1 s less a command).")
@click.option("-q", "--quiet", is_flag=True, help="No progress bar or summary.")
@click.option("-v", "--verbose", is_flag=True, help="Also say how each method chose its queries (pruning, X read).")
def run(store, methods, budget, out, overwrite, checkpoints, no_plots, quiet, verbose, threads, scheduler, cluster,
        persist, **flags):
    """Simulated Active Search on STORE, answering queries from its stored labels y.

    Rerunning the same command on the same --out continues an interrupted experiment.
    """
    if budget < 1:
        raise ParameterError(f"--budget {budget}: a run asks at least one query; give the number of queries, "
                             "e.g. --budget 100")
    if checkpoints is not None and (not checkpoints or min(checkpoints) < 1 or max(checkpoints) > budget):
        raise ParameterError(f"--checkpoints {','.join(map(str, checkpoints))}: give query counts from 1 to the "
                             f"budget ({budget})")
    if out == "-":
        raise click.BadParameter("results are several files (results.json, runs.csv, table.md, ...), so they "
                                 "cannot go to stdout; give a directory", param_hint="'--out'")
    exp = experiment_from_flags(store, methods, budget, **flags)
    with cluster_backend(scheduler, cluster, persist) as backend:
        run_and_report(exp, out, quiet=quiet, overwrite=overwrite, backend=backend, n_threads=threads,
                       verbose=verbose, checkpoints=checkpoints, plot=not no_plots)


def _fantasy(value):
    return value if value in (None, "f") else _number(value, "--fantasy")


def _graded(scores, grade, lower_is_better=False):
    """(scores file, BEST, ZERO) from --scores and --grade; (scores file, "raw", sign) for
    scores as regression targets (--scores alone, sign -1 with --lower-is-better)."""
    if grade is not None and scores is None:
        raise ParameterError("--grade maps the answers of --scores: give --scores FILE[:COLUMN] too")
    if lower_is_better and (scores is None or grade is not None):
        raise ParameterError("--lower-is-better goes with --scores and no --grade (with --grade, BEST < ZERO "
                             "already says lower is better)")
    if scores is None:
        return None
    if grade is None:
        return (scores, "raw", -1.0 if lower_is_better else 1.0)
    best, sep, zero = grade.partition(",")
    if not sep:
        raise ParameterError(f"--grade {grade!r}: give BEST,ZERO, e.g. --grade -9.5,-8.7")
    return (scores, _number(best, "--grade BEST", finite=True), _number(zero, "--grade ZERO", finite=True))


def _number(text, option, finite=False):
    try:
        value = float(text)
    except ValueError:
        raise ParameterError(f"{option} {text!r} is not a number") from None
    if finite and not math.isfinite(value):
        raise ParameterError(f"{option} {text!r} is not a finite number")
    return value


@main.command()
@click.argument("store", type=click.Path(path_type=str))
@click.option("--method", "methods", type=MethodList(method_names("ranks")), default="las,wnas",
              show_default=True, help=f"Methods to compare: {', '.join(method_names('ranks'))}.")
@click.option("--pairs", type=click.IntRange(1), default=100, show_default=True,
              help="Pairs to count (pairs where no method finds a positive are skipped).")
@click.option("--top", type=click.IntRange(1), default=100, show_default=True,
              help="Unlabeled points with the highest f to look at.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the pairs.")
@search_options
@click.option("--out", type=click.Path(file_okay=False, path_type=str), required=True,
              help="Directory for pairs.json, pairs.csv and table2.md.")
@click.option("-q", "--quiet", is_flag=True, help="No progress bar or table.")
def pairs(store, methods, pairs, top, seed, pi, eta, w0, alpha, agr_anchors, agr_neighbors, agr_gamma,
          threads, scheduler, cluster, persist, dataset, out, quiet):
    """The paper's Table 2 on STORE: positives among the top K unlabeled points by f after
    one random positive and one random negative label, over many pairs."""
    from ..experiments import run_pairs
    from ..storage import open_store
    show = not quiet and sys.stderr.isatty()
    with flags_for("pi", "eta", "w0", "alpha", renamed=AGR_RENAMED), open_store(store, {"dataset": dataset}) as store, \
            cluster_backend(scheduler, cluster, persist) as backend, \
            click.progressbar(length=pairs, label="pairs", file=sys.stderr, hidden=not show) as bar:
        _, table = run_pairs(store, out, methods, pairs=pairs, top=top, seed=seed, backend=backend,
                             n_threads=threads, progress=lambda drawn, counted: bar.update(counted - bar.pos),
                             pi=pi, eta=eta, w0=w0, alpha=alpha, anchors=agr_anchors, neighbors=agr_neighbors,
                             gamma=agr_gamma)
    if not quiet:
        click.echo(table)
        click.echo(f"results: {Path(out) / 'pairs.json'}", err=True)


@main.command()
@click.option("--dir", "directory", type=click.Path(file_okay=False, path_type=str),
              default="bigsearch-demo", show_default=True, help="Where the demo store and results go.")
@click.option("--n", type=click.IntRange(100), default=200_000, show_default=True, help="Points in the demo store.")
@click.option("--budget", type=click.IntRange(1), default=200, show_default=True)
@click.option("-q", "--quiet", is_flag=True)
@click.option("-v", "--verbose", is_flag=True, help="Also say how each method chose its queries.")
def demo(directory, n, budget, quiet, verbose):
    """Make a synthetic store (rare clustered positives) and run LAS, WNAS and random on it."""
    from ..synthetic import make_clustered_store
    directory = Path(directory)
    store = directory / f"demo-{n}.zarr"
    if not store.exists():
        directory.mkdir(parents=True, exist_ok=True)
        label = f"writing {store} ({n:,} points x 32 features, 0.5% positives)"
        if not quiet and not sys.stderr.isatty():
            click.echo(label, err=True)
        with click.progressbar(length=n, label=label, file=sys.stderr, show_pos=True,
                               hidden=quiet or not sys.stderr.isatty()) as bar:
            make_clustered_store(store, n, 32, prevalence=0.005, seed=0, spread=0.7,
                                 progress=lambda rows: bar.update(rows - bar.pos))
    if not quiet and not kernels_cached():
        click.echo("compiling kernels (first run only, ~25 s)...", err=True)
    from ..experiments import Experiment
    run_and_report(Experiment(str(store), ("las", "wnas", "random"), budget), directory / "results", quiet=quiet,
                   overwrite=True, table=False, verbose=verbose)


def kernels_cached():
    """True when numba's disk cache holds the LAS kernels (a run then compiles nothing):
    beside the kernels, or under NUMBA_CACHE_DIR."""
    import os
    kernels = Path(__file__).resolve().parents[1] / "kernels"
    cache = Path(os.environ["NUMBA_CACHE_DIR"]) if os.environ.get("NUMBA_CACHE_DIR") else kernels / "__pycache__"
    return cache.is_dir() and any(cache.rglob("las.*.nbi"))
