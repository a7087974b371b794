"""LAS initialization stage by stage, in CPU seconds with one thread, against floor.py's.

Everything runs on one thread (LAS with ``n_threads=1``, one BLAS and one numba thread;
floor.py's Gram and pass likewise), and CPU time is counted rather than wall time, so
the shares hold roughly on a loaded machine too. They give a direction, not figures for
issue 24's targets: those are wall-clock ratios on an idle machine (floor_ratios.py).
Prints one JSON line per alpha: the best of --reps of each stage (the chunk steps by name,
K's inverse) and of floor.py's Gram and pass, and init / floor (2 Gram passes + 1 pass); the
lines go to benchmarks/results/NAME.json (--name, default init_stages) with the idle check.

    python benchmarks/init_stages.py STORE --floor ../shared/tools/floor.py [--alpha 0 0.01] [--reps 3]
"""

import argparse
import importlib
import json
import os
import sys
import tempfile
import time

import numba
import numpy as np
from threadpoolctl import threadpool_limits

import bigsearch
from bigsearch.backends import local
from bigsearch.engine.methods import las

from common import add_idle_arguments, preflight, save

clock = time.process_time
stages: dict[str, float] = {}


def counted(fn, name):
    """fn, adding its CPU seconds to stages[name(*args)]."""

    def run(*args, **kwargs):
        t = clock()
        out = fn(*args, **kwargs)
        key = name(*args)
        stages[key] = stages.get(key, 0.0) + clock() - t
        return out

    return run


def floor_times(floor, path):
    """floor.py's Gram (X^T X by BLAS) and pass (X . V) over its chunk maps: CPU seconds, best of a few."""
    maps, _, r = floor.chunk_maps(path)
    V = np.ascontiguousarray(np.random.default_rng(0).normal(size=(3, r)))
    out = np.empty((max(m.shape[0] for m in maps), 3))
    floor._xv(maps[0][:8], V, out)

    def one(step):
        t = clock()
        for m in maps:
            step(m)
        return clock() - t

    gram = min(one(lambda m: m.T @ m) for _ in range(2))
    return gram, min(one(lambda m: floor._xv(m, V, out)) for _ in range(3))


def init_once(path, alpha):
    """CPU seconds of construct, tell one positive, first ask; stages[] holds its parts."""
    stages.clear()
    t = clock()
    search = bigsearch.LAS(path, alpha=alpha, n_threads=1)
    search.tell(int(np.flatnonzero(search.store.labels())[0]), 1)
    search.ask()
    total = clock() - t
    search.close()
    return {"init": total, **stages}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("store")
    ap.add_argument("--floor", required=True, help="path of ../shared/tools/floor.py")
    ap.add_argument("--alpha", type=float, nargs="*", default=[0.0, 0.01])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--name", default="init_stages", help="results/NAME.json (default init_stages)")
    args = add_idle_arguments(ap).parse_args()
    preflight(args)
    sys.path.insert(0, os.path.dirname(os.path.abspath(args.floor)))  # numba's cache imports it by name
    floor = importlib.import_module("floor")
    threadpool_limits(1, "blas")
    numba.set_num_threads(1)
    local.LocalBackend.map = counted(local.LocalBackend.map, lambda backend, step, *a: step.run.__name__)
    las.LAS._invert = counted(las.LAS._invert, lambda *a: "invert")
    with tempfile.TemporaryDirectory() as tmp:  # compile the kernels outside the counted runs
        tiny = np.abs(np.random.default_rng(0).random((64, 8))).astype("f4")
        for alpha in args.alpha:
            warm = bigsearch.LAS(
                bigsearch.create_store(os.path.join(tmp, "t.zarr"), tiny, chunk_rows=8, overwrite=True),
                pi=0.1,
                alpha=alpha,
                n_threads=1,
            )
            warm.tell(0, 1)
            warm.ask()
            warm.close()
    lines = []
    for alpha in args.alpha:
        rows = []
        for _ in range(args.reps):
            gram, bare = floor_times(floor, args.store)
            rows.append({**init_once(args.store, alpha), "floor_gram": gram, "floor_pass": bare})
        best = {key: min(row[key] for row in rows) for key in rows[0]}
        floor_s = 2 * best["floor_gram"] + best["floor_pass"]
        lines.append(
            {
                "alpha": alpha,
                "init_over_floor": round(best["init"] / floor_s, 2),
                **{k: round(v, 3) for k, v in best.items()},
                "load": os.getloadavg()[0],
            }
        )
        print(json.dumps(lines[-1]))
    save(
        args.name, {"store": str(args.store), "floor": os.path.abspath(args.floor), "reps": args.reps, "alphas": lines}
    )


if __name__ == "__main__":
    main()
