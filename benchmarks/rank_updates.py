"""The per-label r x r work of LAS (issue 12), as ratios measured in one run.

What a label costs on K^-1 besides the pass over X, in the engine's own functions:

- in place (the engine before issue 12's low-rank change): g = K^-1 x (for sparse rows:
  the rows of K^-1 at x's nonzeros), K^-1 -= c g g^T (one read and write of K^-1), and
  V = K^-1 [xq, xz] (one read of K^-1);
- low rank, fold every m labels (engine/core/rank_updates.py: LowRankInverse): g from the base
  minus the correction, V updated in O(r), and every m labels the correction folded
  into the base by one BLAS product and V recomputed from it; m from 8 to 512 (at most
  half the labels measured, so that every m pays for its folds), and the engine's
  choice fold_rank(r).

Rows: dense (float32-like stores) and 0/1 rows with about 4% of bits set, scaled to unit
norm (fingerprints). K is I - X^T R X of random such rows (well conditioned enough; the
arithmetic, not the values, is measured). The variants run interleaved, round after round,
each label sequence the same; the result is the median ms per label.

    python benchmarks/rank_updates.py [--r 128,512,2048] [--labels 512] [--rounds 3]

Results: benchmarks/results/rank_updates.json; docs/performance.md has the table.
"""

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bigsearch.engine.core.rank_updates import LowRankInverse, advance_score_vectors, batch_update, fold_rank  # noqa: E402
from bigsearch.kernels.dense import sparse_rows_times, subtract_outer, times_columns  # noqa: E402

from common import cpu_model, save, table  # noqa: E402


def problem(r, labels, sparse, seed=0):
    """A symmetric positive definite K^-1, the labeled rows, their gammas, xq and xz."""
    rng = np.random.default_rng(seed)
    n = 4 * r
    if sparse:
        X = (rng.random((n, r)) < 0.04).astype(np.float64)
        X[np.arange(n), rng.integers(0, r, n)] = 1.0
    else:
        X = np.abs(rng.standard_normal((n, r)))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    deg = X @ X.sum(axis=0)
    K = np.eye(r) - (X.T * (0.5 / deg)) @ X
    Kinv = np.linalg.inv(K)
    Kinv = (Kinv + Kinv.T) / 2
    rows = X[rng.choice(n, labels, replace=False)]
    gamma = 0.5 / (rows @ X.sum(axis=0))
    return Kinv, rows, gamma, rng.standard_normal((2, r))


def in_place(Kinv, rows, gamma, xqz):
    """The per-label work before the low-rank change, with the kernels it used."""
    Kinv = Kinv.copy()
    sparse = np.count_nonzero(rows) < 0.25 * rows.size
    t = time.perf_counter()
    for b in range(len(rows)):
        x = rows[b : b + 1]
        g = sparse_rows_times(x, Kinv)[0] if sparse else times_columns(Kinv, x)[:, 0]
        c = gamma[b] / (1.0 + gamma[b] * (x[0] @ g))
        subtract_outer(Kinv, g[None, :], np.array([c]))
        xqz = xqz + 0.1 * x
        times_columns(Kinv, xqz)
    return (time.perf_counter() - t) / len(rows), Kinv


def low_rank(Kinv, rows, gamma, xqz, m):
    """The engine's per-label work with the correction folded every m labels."""
    inverse = LowRankInverse(Kinv.copy())
    inverse.fold_at = m
    inverse.Gt, inverse.c = np.empty((m, len(Kinv))), np.empty(m)
    V = times_columns(Kinv, xqz).T.copy()
    t = time.perf_counter()
    for b in range(len(rows)):
        x = rows[b : b + 1]
        G, c, G0, folded = batch_update(inverse, x, gamma[b : b + 1], [b])
        xqz = xqz + 0.1 * x
        V = (
            times_columns(inverse.value(), xqz).T.copy()
            if folded
            else advance_score_vectors(V, G0, G, c, np.full((2, 1), 0.1), xqz)
        )
    return (time.perf_counter() - t) / len(rows), inverse.value()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--r", default="128,512,2048")
    ap.add_argument("--labels", type=int, default=512, help="labels per round (m up to half of them: every m folds)")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    rows_out = []
    for r in (int(v) for v in args.r.split(",")):
        folds = sorted({8, 32, 128, 256, 512, fold_rank(r)} - {m for m in range(1024) if 2 * m > args.labels})
        for sparse in (False, True):
            Kinv, rows, gamma, xqz = problem(r, args.labels, sparse)
            times = {"in place": [], **{f"m={m}": [] for m in folds}}
            low_rank(Kinv, rows[:9], gamma[:9], xqz, 8)  # compile
            ref = in_place(Kinv, rows, gamma, xqz)[1]
            for _ in range(args.rounds):
                times["in place"].append(in_place(Kinv, rows, gamma, xqz)[0])
                for m in folds:
                    dt, out = low_rank(Kinv, rows, gamma, xqz, m)
                    times[f"m={m}"].append(dt)
                    err = np.abs(out - ref).max() / np.abs(ref).max()
                    assert err < 1e-10, (r, m, err)
            base = float(np.median(times["in place"]))
            for name, ts in times.items():
                med = float(np.median(ts))
                rows_out.append(
                    {
                        "r": r,
                        "rows": "sparse 4%" if sparse else "dense",
                        "variant": name,
                        "engine": name == f"m={fold_rank(r)}",
                        "ms_per_label": med * 1e3,
                        "min_ms": min(ts) * 1e3,
                        "vs_in_place": med / base,
                        "all_ms": [t * 1e3 for t in ts],
                    }
                )
            table(
                [x for x in rows_out if x["r"] == r and x["rows"] == rows_out[-1]["rows"]],
                ["r", "rows", "variant", "engine", "ms_per_label", "min_ms", "vs_in_place"],
            )
    save(
        "rank_updates",
        {"cpu": cpu_model(), "load": os.getloadavg(), "labels": args.labels, "rounds": args.rounds, "rows": rows_out},
    )


if __name__ == "__main__":
    main()
