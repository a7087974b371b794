"""X is never held in memory: a run over a store at least 4x larger than the process's
peak RSS increase, measured in a subprocess from the kernel's high-water mark (see
bigsearch/testing/memory.py for why not getrusage's ru_maxrss)."""

import json
import subprocess
import sys

import pytest

from bigsearch.synthetic import make_clustered_store

from conftest import store_path

DRIVER = r"""
import json, sys
import numpy as np
import bigsearch
from bigsearch.testing.memory import peak_rss, start_peak_measurement
# Imports and first calls (JIT compile or cache load) on a tiny store: not the run's memory.
tiny = bigsearch.create_store(sys.argv[2], np.abs(np.random.rand(64, 8)).astype("f4"), chunk_rows=8)
warm = bigsearch.LAS(tiny, pi=0.1, alpha=0.1)
warm.tell(0, 1); warm.ask(); warm.tell(1, 0); warm.ask()
w = bigsearch.WNAS(tiny); w.tell(0, 1); w.ask()
if sys.argv[1] == "--warm-only":
    sys.exit(0)
store = bigsearch.open_store(sys.argv[1])
y = store.labels()
base = start_peak_measurement()
s = bigsearch.LAS(store, alpha=1e-3)
s.tell(int(np.flatnonzero(y)[0]), 1)
for _ in range(5):
    i = s.ask(); s.tell(i, int(y[i]))
w = bigsearch.WNAS(store)
w.tell(int(np.flatnonzero(y)[0]), 1)
for _ in range(3):
    i = w.ask(); w.tell(i, int(y[i]))
print(json.dumps({"increase": peak_rss() - base, "x_bytes": store.nbytes, "n": store.n}))
"""


@pytest.mark.slow
@pytest.mark.timeout(1800)  # writes 1 GiB, then two runs of up to 900 s each
@pytest.mark.parametrize("kind", ["zarr", "hdf5"])
def test_run_over_a_store_four_times_larger_than_its_memory(tmp_path, kind):
    n, r = 2_100_000, 128                                  # X: 1.0 GiB of float32
    path = store_path(tmp_path, "big", kind)
    make_clustered_store(path, n, r, prevalence=0.002, seed=1, chunk_rows=16384, kind=kind)
    # A first process compiles the kernels into numba's cache, so the measured process
    # only loads them: the RSS it reports is the run's, not the compiler's.
    for first in ("--warm-only", str(path)):
        tiny = tmp_path / f"tiny-{len(list(tmp_path.iterdir()))}.zarr"
        out = subprocess.run([sys.executable, "-c", DRIVER, first, str(tiny)],
                             capture_output=True, text=True, timeout=900)
        assert out.returncode == 0, out.stderr
    m = json.loads(out.stdout)
    per_point_state = m["n"] * (1 + 8 * 4)                 # label, deg, J, f, im
    assert m["x_bytes"] >= 2**30
    assert m["increase"] * 4 <= m["x_bytes"], m
    assert m["increase"] <= per_point_state + 256 * 2**20, m
