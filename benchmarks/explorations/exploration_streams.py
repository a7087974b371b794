"""How much of the multi-topic figure is the draws' luck? The exploration of issue 38's
exploration (engine/guidance/exploration.py).

The engine's Screen, one record at a time as `bigsearch run` asks, on the store that
benchmarks/screening.py ingests for `--synthetic multi-topic` (3,000 records, 90 relevant),
from that benchmark's priors (start 0, 1 or 2: its results files), with ``explore_after`` L
and the draws' stream EXPLORE_SEED + s (s = 0: the engine's own, which gives the benchmark's
records read exactly: 836 from start 0 at L = 100). Prints one JSON line: the records read
to 95% recall (None: not within 1,350 reads, the benchmark's budget). A run is 9-14 minutes.

    python benchmarks/explorations/exploration_streams.py STORE START L S >> results.jsonl
"""

import json
import math
import sys
import time
from pathlib import Path

import numpy as np
import zarr

import bigsearch.engine.guidance.exploration as exploration
from bigsearch.engine.methods.screen import Screen

RESULTS = Path(__file__).resolve().parents[1] / "results"
BUDGET = 1350


def main(store, start, explore_after, stream):
    benchmark = RESULTS / f"screening-synthetic-multi-topic-explore-{start}.json"
    priors = json.loads(benchmark.read_text())["runs"][0]["priors"]
    exploration.EXPLORE_SEED += stream
    y = np.asarray(zarr.open_group(store, mode="r")["y"][:])
    need = math.ceil(0.95 * y.sum())
    t = time.perf_counter()
    with Screen(store, explore_after=explore_after) as search:
        read95 = records_to_target(search, y, priors, need, BUDGET)
    return dict(start=start, explore_after=explore_after, stream=stream,
                read95=read95, seconds=round(time.perf_counter() - t))


def records_to_target(search, y, priors, need, budget, after_each=None):
    """Tell the priors, then ask and tell one record at a time (the answers from y) until
    ``need`` relevant records are found: the records read then, None past ``budget``.
    ``after_each(search, read)`` runs after every answer."""
    search.tell(priors, [int(y[i]) for i in priors])
    found, read = int(y[priors].sum()), len(priors)
    while found < need and read < budget:
        i = search.ask()
        search.tell(i, int(y[i]))
        found, read = found + int(y[i]), read + 1
        if after_each is not None:
            after_each(search, read)
    return read if found >= need else None


if __name__ == "__main__":
    store, start, explore_after, stream = sys.argv[1], *map(int, sys.argv[2:5])
    print(json.dumps(main(store, start, explore_after, stream)), flush=True)
