"""The float64 bound of initialization at alpha > 0 (issue 24): the engine's two O(n r^2)
products in float64 (X^T diag(rho) X by syrk, J's x L by trmm, as the engine computed it when
docs/performance.md's figure was taken; kernels/rows.py computes x L since) against floor.py's
two Gram passes in float32 (X^T X by sgemm), BLAS alone on blocks of rows, one thread, CPU time.

With float64 accumulation (the brief's rule) init at alpha > 0 cannot come closer to
floor.py's init floor than this ratio, before any other work.

    python benchmarks/float64_bound.py [--r 128 2048] [--rows 4096]
"""

import argparse
import time

import numpy as np
from scipy.linalg.blas import dtrmm
from threadpoolctl import threadpool_limits

from common import add_idle_arguments, preflight, save, table


def cpu_seconds(f, blocks, reps=3):
    """The best of ``reps`` CPU times of ``blocks`` calls of f (a pass over that many blocks)."""
    best = np.inf
    for _ in range(reps):
        t = time.process_time()
        for _ in range(blocks):
            f()
        best = min(best, time.process_time() - t)
    return best / blocks


def bound(r, rows):
    rng = np.random.default_rng(0)
    X32 = rng.random((rows, r)).astype(np.float32)
    X64 = X32.astype(np.float64)
    A = rng.random((r, r))
    L = np.asfortranarray(np.linalg.cholesky(A @ A.T / r + np.eye(r)))
    Y = X64.copy()
    blocks = max(4, (1 << 30) // (rows * r * 4))  # about 1 GiB of float32 rows each time

    def trmm_of_a_copy():
        np.copyto(Y, X64)  # the engine multiplied rows it had just converted, not its last product
        # Y <- Y L in place: in Fortran's terms Y^T <- L^T Y^T (SciPy's BLAS, which the engine called)
        dtrmm(1.0, L, Y.T, side=0, lower=1, trans_a=1, overwrite_b=1)

    with threadpool_limits(1):
        sgemm = cpu_seconds(lambda: X32.T @ X32, blocks)
        syrk = cpu_seconds(lambda: X64.T @ X64, blocks)
        trmm = cpu_seconds(trmm_of_a_copy, blocks)
    per_million = 1e6 / rows
    return {"r": r, "float32_gram_s_per_M_rows": sgemm * per_million, "float64_syrk_s_per_M_rows": syrk * per_million,
            "float64_trmm_s_per_M_rows": trmm * per_million, "bound": (syrk + trmm) / (2 * sgemm)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--r", type=int, nargs="*", default=[128, 2048])
    ap.add_argument("--rows", type=int, default=4096)
    args = add_idle_arguments(ap).parse_args()
    preflight(args)
    rows = [bound(r, args.rows) for r in args.r]
    table(rows, list(rows[0]))
    save("float64_bound", {"rows_per_block": args.rows, "results": rows})


if __name__ == "__main__":
    main()
