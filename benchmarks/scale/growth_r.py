"""Growth in r: LAS at n = 1M with r = 32, 128, 512 (float32, default 32 MiB chunks), warm.

Each store is measured in a fresh process by scale_worker.py (per-iteration time against
a bare pass, interleaved; initialization). Fits the exponents of per-iteration time, bare
pass and initialization in r; the initialization is also split into its streaming part
(3 passes) and the rest, the O(n r^2) products (X^T R X and x_i^T K^-1 x_i), whose
exponent should approach 2.

    python benchmarks/scale/growth_r.py [--n 1000000] [--rs 32,128,512] [--iterations 25]
"""

import argparse

from harness import HERE, add_idle_arguments, fit_exponent, preflight, run_worker, save, scale_store, table

INIT_PASSES = 3      # column sums; degrees + X^T R X; J + scores


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--rs", default="32,128,512")
    ap.add_argument("--iterations", type=int, default=25)
    args = add_idle_arguments(ap).parse_args()
    preflight(args)
    rows, raw = [], {}
    for r in map(int, args.rs.split(",")):
        m = run_worker(HERE / "scale_worker.py", scale_store(args.n, r), "--iterations", args.iterations, "--no-cold")
        raw[r] = m
        w = m["warm"]
        rows.append({"r": r, "bare_ms": w["bare_ms"], "iter_ms": w["iter_ms"], "ratio": w["ratio"],
                     "GB/s": m["x_bytes"] / w["bare_ms"] / 1e6, "init_s": m["init_s"],
                     "init_beyond_passes_s": m["init_s"] - INIT_PASSES * w["bare_ms"] / 1e3})
    rs = [row["r"] for row in rows]
    fits = {key: fit_exponent(rs, [row[key] for row in rows])
            for key in ("iter_ms", "bare_ms", "init_s", "init_beyond_passes_s") if all(row[key] > 0 for row in rows)}
    table(rows, ["r", "bare_ms", "iter_ms", "ratio", "GB/s", "init_s", "init_beyond_passes_s"])
    print("exponents in r:", {k: round(v, 3) for k, v in fits.items()})
    if len(rows) >= 3:   # the exponent between the two largest r: less per-point overhead
        fits["iter_ms_top2"] = fit_exponent(rs[-2:], [row["iter_ms"] for row in rows[-2:]])
        fits["init_s_top2"] = fit_exponent(rs[-2:], [row["init_s"] for row in rows[-2:]])
    save("scale_growth_r", {"n": args.n, "iterations": args.iterations, "rows": rows, "exponents_in_r": fits,
                            "raw": {str(k): v for k, v in raw.items()}})


if __name__ == "__main__":
    main()
