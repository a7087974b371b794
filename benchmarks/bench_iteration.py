"""Per-iteration cost of LAS (alpha > 0) and WNAS against one bare streaming pass.

For each store kind, in one process: initialize LAS, then alternate a bare pass
(read every chunk + X @ V, V of r x 3) with one LAS iteration (tell + ask), at least
20 times; the same for WNAS. Reports medians and their ratios (target for LAS: <= 1.25),
initialization time (also as a multiple of one bare pass), and the peak increase of the
whole run's memory in a fresh subprocess: anonymous (the budget: X must never be in it)
and total RSS (which also counts X's chunk maps, held across passes when X fits in memory).

    python benchmarks/bench_iteration.py [--n 2000000] [--r 128] [--iterations 25]
"""

import argparse

from common import add_idle_arguments, bench_store, preflight, run_fresh, save, table

WORKER = r"""
import sys
from common import *
import numpy as np, bigsearch
path, iterations = sys.argv[1], int(sys.argv[2])
# JIT and imports first, on a tiny store: the RSS we report is the run's, not numba's.
tiny = bigsearch.create_store(sys.argv[3], np.abs(np.random.rand(64, 8)).astype("f4"), chunk_rows=8, overwrite=True)
for cls, kw in ((bigsearch.LAS, {"alpha": 0.1, "pi": 0.1}), (bigsearch.WNAS, {})):
    s = cls(tiny, **kw); s.tell(0, 1); s.ask(); s.tell(1, 0); s.ask()  # noqa: E702
    s.backend.map(bare_pass_step, rng_vectors(8)); s.close()  # noqa: E702
out = {}
peak = PeakMemory(PEAK_INTERVAL).start()
for method in ("las", "wnas"):
    s = bigsearch.LAS(path, alpha=1e-3) if method == "las" else bigsearch.WNAS(path)
    y = s.store.labels()
    V = rng_vectors(s.store.r)
    s.tell(int(np.flatnonzero(y)[0]), 1)
    init, i = timed(s.ask)
    def step():
        global i
        s.tell(i, int(y[i])); i = s.ask()
    times = interleave({"bare": lambda: s.backend.map(bare_pass_step, V), "iteration": step}, iterations)
    bare, its = times["bare"], times["iteration"]
    out[method] = {"init_s": init, "bare_ms": 1e3 * median(bare), "iter_ms": 1e3 * median(its),
                   "ratio": median(its) / median(bare), "init_in_passes": init / median(bare),
                   "bare_gb_s": s.store.nbytes / median(bare) / 1e9, "hold_maps": s.store.hold_maps}
    s.close()
peak.stop()
out["peak_anonymous_increase"], out["peak_rss_increase"] = peak.anonymous, peak.total
report(out)
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=2_000_000)
    ap.add_argument("--r", type=int, default=128)
    ap.add_argument("--iterations", type=int, default=25)
    ap.add_argument("--kinds", default="zarr,hdf5")
    args = add_idle_arguments(ap).parse_args()
    preflight(args)
    rows = []
    for kind in args.kinds.split(","):
        path = bench_store(args.n, args.r, kind)
        m = run_fresh(WORKER, path, args.iterations, f"/tmp/bigsearch-bench/tiny-{kind}.zarr")
        x_bytes = args.n * args.r * 4
        per_point = 33  # LAS: label (1) + deg, J, f, im (4 x 8) bytes per point
        for method in ("las", "wnas"):
            rows.append({"kind": kind, "method": method, **m[method],
                         "peak_anon_MiB": m["peak_anonymous_increase"] / 2**20,
                         "peak_rss_MiB": m["peak_rss_increase"] / 2**20,
                         "X_MiB": x_bytes / 2**20, "state_MiB": args.n * per_point / 2**20})
    table(rows, ["kind", "method", "bare_ms", "iter_ms", "ratio", "bare_gb_s", "init_s", "init_in_passes",
                 "peak_anon_MiB", "peak_rss_MiB", "X_MiB"])
    save("iteration", {"n": args.n, "r": args.r, "iterations": args.iterations, "rows": rows,
                       "target": "LAS iteration / bare pass <= 1.25"})


if __name__ == "__main__":
    main()
