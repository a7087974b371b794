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

import bigsearch
from bigsearch.storage import StoreWriter
from bigsearch.synthetic import clustered_points

from conftest import store_path

# Imports and first calls (JIT compile or cache load) on a tiny store: not the run's memory.
WARM_UP = r"""
import numpy as np
import bigsearch
tiny = bigsearch.create_store(tiny_path, np.abs(np.random.rand(64, 8)).astype("f4"), chunk_rows=8)
warm = bigsearch.LAS(tiny, pi=0.1, alpha=0.1)
warm.tell(0, 1); warm.ask(); warm.tell(1, 0); warm.ask()
w = bigsearch.WNAS(tiny); w.tell(0, 1); w.ask()
"""
DRIVER = r"""
import json, sys
import numpy as np
import bigsearch
from bigsearch.testing.memory import PeakMemory
tiny_path = sys.argv[2]
""" + WARM_UP + r"""
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


def repeated_block_store(path, n, r, chunk_rows, kind):
    """A store of n rows: one block of clustered points (with its positives) written again
    and again. What this module measures does not depend on X's values, and drawing 2.1
    million points took as long as both runs over them."""
    X, y = clustered_points(chunk_rows, r, prevalence=0.002, seed=1)
    with StoreWriter(path, r, dtype="float32", chunk_rows=chunk_rows, kind=kind, labels=True) as w:
        for a in range(0, n, chunk_rows):
            w.append(X[: n - a], y[: n - a])
    return path


@pytest.mark.slow
@pytest.mark.timeout(1800)  # writes 1 GiB, then two runs of up to 900 s each
@pytest.mark.parametrize("kind", ["zarr", "hdf5"])
def test_run_over_a_store_four_times_larger_than_its_memory(tmp_path, kind):
    n, r = 2_100_000, 128                                  # X: 1.0 GiB of float32
    path = repeated_block_store(store_path(tmp_path, "big", kind), n, r, 16384, kind)
    with bigsearch.open_store(path) as s:
        assert s.shape == (n, r) and s.labels().any()
    # This process compiles the kernels into numba's cache (or finds them there), so the
    # measured processes only load them: the memory they report is the run's, not the
    # compiler's. Then the store with 4x its size available (it fits in half: maps held) and
    # with less than twice its size (maps per pass).
    exec(WARM_UP, {"tiny_path": str(tmp_path / "tiny.zarr")})
    x_bytes = n * r * 4
    measured = []
    for k, env in enumerate(({"BIGSEARCH_MEMORY_BYTES": str(4 * x_bytes)},
                             {"BIGSEARCH_MEMORY_BYTES": str(2 * x_bytes - 1)})):
        out = subprocess.run([sys.executable, "-c", DRIVER, str(path), str(tmp_path / f"tiny-{k}.zarr")],
                             capture_output=True, text=True, timeout=900, env={**os.environ, **env})
        assert out.returncode == 0, out.stderr
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
