#!/usr/bin/env python
"""Block summaries stored with the store (engine/pruning/summaries.py): what writing them costs,
and what they save at the start of a pruned search, in one run.

A synthetic store (the tools/ generator, n x 128 float32, generated order) is written
without summaries; then, timed: ``write_block_summaries`` on it (seconds per GB of X);
the initialization of pruned LAS (``LAS(prune=True).sync()``: its passes, and the
summaries read or computed) and pruned WNAS (to its first query), alternately with the
summaries in the store and with them moved aside, ``--repeats`` times each (the shared
machine's slow spells hit both); the full-pass engines' as the reference. The page cache is warm (X fits in
memory): the ratio is of the work, not of cold reads.

    python benchmarks/stored_summaries.py --n 2000000
"""

import argparse
import os
import shutil
import time
from pathlib import Path

import bigsearch
from bigsearch.engine.pruning.summaries import GROUP, write_block_summaries
from bigsearch.synthetic import make_clustered_store

from common import machine, median, save, table


def init_seconds(path, method, prune):
    """Seconds to the first query (LAS: its initialization; WNAS: one label told, then
    its first pass and, pruned, the blocks' centres and radii), and where the summaries
    came from."""
    t = time.perf_counter()
    search = getattr(bigsearch, method)(path, prune=prune)
    if method == "WNAS":
        search.tell(0, 1)
        search.ask()
    else:
        search.sync()
    seconds = time.perf_counter() - t
    source = search.pruning.summaries_from if prune else "-"
    search.close()
    return seconds, source


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=2_000_000)
    ap.add_argument("--r", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--dir", default="/tmp/bigsearch-bench-summaries")
    args = ap.parse_args()
    folder = Path(args.dir)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"s{args.n}.zarr"
    aside = folder / "summaries-aside"
    try:
        make_clustered_store(path, args.n, args.r, prevalence=0.005, spread=0.7, overwrite=True)
        x_gb = bigsearch.open_store(path).nbytes / 1e9
        written = write_block_summaries(path)
        for method in ("LAS", "WNAS"):  # compile, and warm the page cache
            init_seconds(path, method, True)
        variants = [(m, v) for m in ("LAS", "WNAS") for v in ("stored", "computed", "full pass")]
        rows = {f"{m} {v}": [] for m, v in variants}
        sources = set()
        for _ in range(args.repeats):
            for method, variant in variants:
                if variant == "computed":
                    os.rename(path / GROUP, aside)
                seconds, source = init_seconds(path, method, variant != "full pass")
                if variant == "computed":
                    os.rename(aside, path / GROUP)
                rows[f"{method} {variant}"].append(seconds)
                sources.add((method, variant, source))
        result = {
            "n": args.n,
            "r": args.r,
            "x_gb": x_gb,
            "load_1min": os.getloadavg()[0],
            "write_seconds": written["seconds"],
            "write_seconds_per_gb": written["seconds"] / x_gb,
            "summaries_mib": written["MiB"],
            "init_seconds": {k: median(v) for k, v in rows.items()},
            "init_runs": rows,
            "sources": sorted(sources),
        }
        t = result["init_seconds"]
        result["computed_over_stored"] = {m: t[f"{m} computed"] / t[f"{m} stored"] for m in ("LAS", "WNAS")}
        table(
            [{"init": k, "median_s": median(v), "runs": len(v)} for k, v in rows.items()], ["init", "median_s", "runs"]
        )
        print(
            f"writing the summaries: {written['seconds']:.1f} s for {x_gb:.2f} GB of X "
            f"({written['seconds'] / x_gb:.1f} s/GB, {written['MiB']:.1f} MiB); pruned init computed / stored: "
            f"{result['computed_over_stored']}; {machine()['cpu']}, load {result['load_1min']:.1f}"
        )
        save("stored_summaries", result)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
