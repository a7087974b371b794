"""X is never held in memory: a run over a store at least 4x larger than the process's
peak RSS increase (measured with resource.getrusage in a subprocess)."""

import json
import subprocess
import sys

import pytest

from bigsearch.synthetic import make_clustered_store

DRIVER = r"""
import json, resource, sys
import numpy as np
import bigsearch
import bigsearch.kernels.las, bigsearch.engine.steps  # imports and JIT first: not data
store = bigsearch.open_store(sys.argv[1])
y = store.labels()
warm = bigsearch.LAS(bigsearch.create_store(sys.argv[2], np.abs(np.random.rand(64, store.r)).astype("f4"),
                                            chunk_rows=8), pi=0.1, alpha=0.1)
warm.tell(0, 1); warm.ask(); warm.tell(1, 0); warm.ask()
w = bigsearch.WNAS(sys.argv[2]); w.tell(0, 1); w.ask()
# The increase is measured from the current RSS (not the earlier peak), so it is an
# upper bound of what the run itself needs.
base = int(open("/proc/self/statm").read().split()[1]) * resource.getpagesize()
s = bigsearch.LAS(store, alpha=1e-3)
s.tell(int(np.flatnonzero(y)[0]), 1)
for _ in range(5):
    i = s.ask(); s.tell(i, int(y[i]))
w = bigsearch.WNAS(store)
w.tell(int(np.flatnonzero(y)[0]), 1)
for _ in range(3):
    i = w.ask(); w.tell(i, int(y[i]))
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"increase": peak - base, "x_bytes": store.nbytes, "n": store.n}))
"""


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["zarr", "hdf5"])
def test_run_over_a_store_four_times_larger_than_its_memory(tmp_path, kind):
    n, r = 2_100_000, 128                                  # X: 1.0 GiB of float32
    path = tmp_path / ("big.zarr" if kind == "zarr" else "big.h5")
    make_clustered_store(path, n, r, prevalence=0.002, seed=1, chunk_rows=16384, kind=kind)
    out = subprocess.run([sys.executable, "-c", DRIVER, str(path), str(tmp_path / "warm.zarr")],
                         capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr
    m = json.loads(out.stdout)
    per_point_state = m["n"] * (1 + 8 * 4)                 # label, deg, J, f, im
    assert m["x_bytes"] >= 2**30
    assert m["increase"] * 4 <= m["x_bytes"], m
    assert m["increase"] <= per_point_state + 256 * 2**20, m
