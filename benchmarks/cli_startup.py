"""CLI start-up: `bigsearch --version` and `--help` against a bare `python -c pass`.

Each command runs REPEAT times in a subprocess; the best wall time and the best CPU time
(user + system, from the child's rusage) are reported, with the ratio to `python -c pass`
measured in the same run (the machines are shared: ratios, not absolute times, compare).
``--tree DIR`` runs another checkout's package (e.g. an older commit unpacked with
``git archive REV bigsearch | tar -x -C DIR``) beside this one.

    python benchmarks/cli_startup.py [--repeat 7] [--tree DIR]
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

from common import save

REPO = Path(__file__).resolve().parents[1]


def measure(argv, tree, repeat):
    env = {**os.environ, "PYTHONPATH": str(tree)}  # and cwd=tree: `python -m` looks there first
    walls, cpus = [], []
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.perf_counter()
        subprocess.run(argv, env=env, cwd=tree, stdout=subprocess.DEVNULL, check=True)
        walls.append(time.perf_counter() - t)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return min(walls), min(cpus)


def describe(tree):
    """This checkout as "this checkout (COMMIT)"; another tree by its path."""
    if tree != REPO:
        return str(tree)
    rev = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return f"this checkout ({rev.stdout.strip() or 'not a git checkout'})"


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--tree", action="append", default=[], help="another checkout to compare (repeatable)")
    args = p.parse_args()
    rows = []
    base_wall, base_cpu = measure([sys.executable, "-c", "pass"], REPO, args.repeat)
    for tree in [REPO, *map(Path, args.tree)]:
        for flag in ("--version", "--help"):
            wall, cpu = measure([sys.executable, "-m", "bigsearch", flag], tree, args.repeat)
            rows.append(
                {
                    "tree": describe(tree),
                    "command": f"bigsearch {flag}",
                    "wall_s": round(wall, 3),
                    "cpu_s": round(cpu, 3),
                    "wall_over_bare_python": round(wall / base_wall, 2),
                    "cpu_over_bare_python": round(cpu / base_cpu, 2),
                }
            )
            print(json.dumps(rows[-1]), flush=True)
    bare = {"bare_python_wall_s": round(base_wall, 3), "bare_python_cpu_s": round(base_cpu, 3)}
    print(json.dumps(bare))
    save(
        "cli_startup",
        {"repeat": args.repeat, "rows": rows, **bare, "note": "best of REPEAT; the machine was shared with other jobs"},
    )


if __name__ == "__main__":
    main()
