"""`bigsearch run`: simulated-oracle runs; `bigsearch demo`: the same on a built-in store."""

import json
import os
import sys
from pathlib import Path

import click

from .. import __version__
from ..engine import METHODS
from ..errors import StoreExistsError
from ..simulate import initial_labels, simulate
from ..storage import open_store
from . import main
from .options import IndexList, MethodList, cluster_backend, cluster_options, las_options


def run_methods(store, methods, budget, seed, out, init_index=None, init_positives=1,
                quiet=False, overwrite=False, **options):
    """Run each method from the same initial labels, write OUT/results.json, print a summary."""
    out = Path(out)
    results_path = out / "results.json"
    if results_path.exists() and not overwrite:
        raise StoreExistsError(f"{results_path} already exists; choose another --out or pass --overwrite")
    with open_store(store) as s:
        y = s.labels()
        if y is None:
            from ..errors import ParameterError
            raise ParameterError(f"{store} has no labels (y), so no oracle can be simulated")
        init = initial_labels(y, seed, init_index, init_positives)
        runs = [_run_one(s, m, budget, seed, init, quiet, options) for m in methods]
        record = {"bigsearch_version": __version__, "store": str(s.path), "n": s.n, "r": s.r,
                  "budget": budget, "runs": runs}
    out.mkdir(parents=True, exist_ok=True)
    _write_json_atomic(results_path, record)
    if not quiet:
        _print_summary(runs)
        click.echo(f"results: {results_path}", err=True)
    return record


def _run_one(store, method, budget, seed, init, quiet, options):
    show = not quiet and sys.stderr.isatty()
    with click.progressbar(length=budget, label=f"{method:>6}", file=sys.stderr,
                           show_pos=True, hidden=not show) as bar:
        def progress(step, hits):
            bar.label = f"{method:>6} hits {hits}"
            bar.update(1)
        return simulate(store, method, budget, seed, init, progress=progress, **options)


def _print_summary(runs):
    click.echo(f"{'method':>8} {'hits':>6} {'queries':>8} {'init s':>8} {'ms/iter':>8}")
    for r in runs:
        its = sorted(r["timings"]["iteration_seconds"])
        med = its[len(its) // 2] * 1e3 if its else float("nan")
        click.echo(f"{r['method']:>8} {r['hits'][-1] if r['hits'] else 0:>6} {len(r['queries']):>8} "
                   f"{r['timings']['init_seconds']:>8.2f} {med:>8.1f}")


def _write_json_atomic(path, record):
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(tmp, "w") as fh:
        json.dump(record, fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


@main.command()
@click.argument("store", type=click.Path(path_type=str))
@click.option("--method", "methods", type=MethodList(list(METHODS)), default="las", show_default=True,
              help="las, wnas, asg or random; several separated by commas.")
@click.option("--budget", type=click.IntRange(0), required=True, help="Number of queries (T).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the initial labels (and of random).")
@click.option("--init-index", type=IndexList(), default=None, help="Start from these labeled points.")
@click.option("--init-positives", type=click.IntRange(0), default=1, show_default=True,
              help="Start from this many random positives (when --init-index is not given).")
@las_options
@click.option("--threads", type=click.IntRange(1), default=None,
              help="Threads of the local backend (default: one per core).")
@cluster_options
@click.option("--out", type=click.Path(file_okay=False, path_type=str), required=True,
              help="Directory for results.json.")
@click.option("--overwrite", is_flag=True, help="Replace an existing results.json in --out.")
@click.option("-q", "--quiet", is_flag=True, help="No progress bar or summary.")
def run(store, methods, budget, seed, init_index, init_positives, pi, eta, w0, alpha, threads,
        scheduler, cluster, persist, out, overwrite, quiet):
    """Simulated Active Search on STORE, answering queries from its stored labels y."""
    with cluster_backend(scheduler, cluster, persist) as backend:
        run_methods(store, methods, budget, seed, out, init_index, init_positives, quiet, overwrite,
                    pi=pi, eta=eta, w0=w0, alpha=alpha, n_threads=threads, backend=backend)


@main.command()
@click.option("--dir", "directory", type=click.Path(file_okay=False, path_type=str),
              default="bigsearch-demo", show_default=True, help="Where the demo store and results go.")
@click.option("--n", type=click.IntRange(100), default=200_000, show_default=True, help="Points in the demo store.")
@click.option("--budget", type=click.IntRange(1), default=200, show_default=True)
@click.option("-q", "--quiet", is_flag=True)
def demo(directory, n, budget, quiet):
    """Make a synthetic store (rare clustered positives) and run LAS, WNAS and random on it."""
    from ..synthetic import make_clustered_store
    directory = Path(directory)
    store = directory / f"demo-{n}.zarr"
    if not store.exists():
        directory.mkdir(parents=True, exist_ok=True)
        if not quiet:
            click.echo(f"writing {store} ({n:,} points x 32 features, 0.5% positives)", err=True)
        make_clustered_store(store, n, 32, prevalence=0.005, seed=0, spread=0.7)
    run_methods(store, ["las", "wnas", "random"], budget, 0, directory / "results", quiet=quiet,
                overwrite=True)
