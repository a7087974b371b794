"""X is never held in the process's own memory: a run over a store at least 4x larger than
the peak increase of its anonymous memory, measured in a subprocess (bigsearch/testing/
memory.py: RssAnon sampled; the total RSS from the kernel's high-water mark). A store that
fits in half the memory available keeps its chunk maps across passes, whose file-backed
pages (the page cache) count in the total RSS only; a larger one maps them per pass, so
its total RSS stays small too."""

import json
import os
import subprocess
import sys

import pytest

from bigsearch.synthetic import make_clustered_store

from conftest import store_path

DRIVER = r"""
import json, sys
import numpy as np
import bigsearch
from bigsearch.testing.memory import PeakMemory
# Imports and first calls (JIT compile or cache load) on a tiny store: not the run's memory.
tiny = bigsearch.create_store(sys.argv[2], np.abs(np.random.rand(64, 8)).astype("f4"), chunk_rows=8)
warm = bigsearch.LAS(tiny, pi=0.1, alpha=0.1)
warm.tell(0, 1); warm.ask(); warm.tell(1, 0); warm.ask()
w = bigsearch.WNAS(tiny); w.tell(0, 1); w.ask()
if sys.argv[1] == "--warm-only":
    sys.exit(0)
store = bigsearch.open_store(sys.argv[1])
y = store.labels()
with PeakMemory() as peak:
    s = bigsearch.LAS(store, alpha=1e-3)
    s.tell(int(np.flatnonzero(y)[0]), 1)
    for _ in range(5):
        i = s.ask(); s.tell(i, int(y[i]))
    w = bigsearch.WNAS(store)
    w.tell(int(np.flatnonzero(y)[0]), 1)
    for _ in range(3):
        i = w.ask(); w.tell(i, int(y[i]))
print(json.dumps({**peak.as_dict(), "x_bytes": store.nbytes, "n": store.n, "hold_maps": store.hold_maps}))
"""


@pytest.mark.slow
@pytest.mark.timeout(1800)  # writes 1 GiB, then two runs of up to 900 s each
@pytest.mark.parametrize("kind", ["zarr", "hdf5"])
def test_run_over_a_store_four_times_larger_than_its_memory(tmp_path, kind):
    n, r = 2_100_000, 128                                  # X: 1.0 GiB of float32
    path = store_path(tmp_path, "big", kind)
    make_clustered_store(path, n, r, prevalence=0.002, seed=1, chunk_rows=16384, kind=kind)
    # A first process compiles the kernels into numba's cache, so the measured processes
    # only load them: the memory they report is the run's, not the compiler's. Then the
    # store with 4x its size available (it fits in half: maps held) and with less than
    # twice its size (maps per pass).
    x_bytes = n * r * 4
    runs = [("--warm-only", {}), (str(path), {"BIGSEARCH_MEMORY_BYTES": str(4 * x_bytes)}),
            (str(path), {"BIGSEARCH_MEMORY_BYTES": str(2 * x_bytes - 1)})]
    measured = []
    for first, env in runs:
        tiny = tmp_path / f"tiny-{len(list(tmp_path.iterdir()))}.zarr"
        out = subprocess.run([sys.executable, "-c", DRIVER, first, str(tiny)], capture_output=True, text=True,
                             timeout=900, env={**os.environ, **env})
        assert out.returncode == 0, out.stderr
        if first != "--warm-only":
            measured.append(json.loads(out.stdout))
    held, per_pass = measured
    per_point_state = held["n"] * (1 + 8 * 4)                 # label, deg, J, f, im
    assert held["x_bytes"] >= 2**30
    assert held["hold_maps"] and not per_pass["hold_maps"], measured
    for m in measured:                                        # the budget counts anonymous memory
        assert m["anonymous"] * 4 <= m["x_bytes"], m
        assert m["anonymous"] <= per_point_state + 256 * 2**20, m
    assert per_pass["total"] * 4 <= per_pass["x_bytes"], per_pass   # maps per pass: X's pages never stay
    assert per_pass["total"] <= per_point_state + 256 * 2**20, per_pass
