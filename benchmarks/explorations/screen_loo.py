"""Would leave-one-out tell which of the screen method's two ridges to follow?

The engine's Screen (the default) in process from a start; at reads 100, 200, 300 and 400,
each ridge (the answers alone, and the unread records as 1,000 negatives) refitted densely
on the answers so far (X in memory: small stores only), and each relevant record found
scored by that ridge fitted without it (the hat matrix's closed form for a weighted ridge
with an intercept). Its cost: the share of the unread records the ridge scores above it
(mean over the relevant records found). A ridge that ranks held-out relevant records higher
should find the next ones sooner, if this signal told the corpora apart.

    python benchmarks/explorations/screen_loo.py STORE 672,41
"""

import json
import math
import sys

import numpy as np
import zarr
from exploration_streams import records_to_target

from bigsearch.engine.methods.screen import Screen

READS = (100, 200, 300, 400)
UNREAD = (0.0, 1000.0)  # the answers-only ridge, the unread ridge


def loo_cost(X, told, lab, weights, ridge):
    """Mean share of the unread records scored above each relevant answer by the ridge
    fitted without it."""
    n, r = X.shape
    c_pos, c_neg, c_un = weights
    w = np.full(n, c_un)
    w[told[lab >= 0.5]], w[told[lab < 0.5]] = c_pos, c_neg
    y = np.zeros(n)
    y[told[lab >= 0.5]] = 1.0
    fitted = w > 0
    Z = np.hstack([np.ones((n, 1)), X])
    M = (Z[fitted] * w[fitted, None]).T @ Z[fitted]
    M[np.arange(1, r + 1), np.arange(1, r + 1)] += ridge  # the intercept is not penalized
    M_inv_Zt = np.linalg.solve(M, Z.T)
    score = Z @ (M_inv_Zt[:, fitted] @ (w[fitted] * y[fitted]))
    leverage = w * np.einsum("ij,ji->i", Z, M_inv_Zt)
    pos = told[lab >= 0.5]
    held_out = y[pos] - (y[pos] - score[pos]) / (1 - leverage[pos])
    unread = np.ones(n, bool)
    unread[told] = False
    ranked = np.sort(score[unread])
    return float(np.mean(1 - np.searchsorted(ranked, held_out, side="right") / len(ranked)))


def main(store, priors):
    group = zarr.open_group(store, mode="r")
    X, y = np.asarray(group["X"][:], np.float64), np.asarray(group["y"][:]) >= 0.5
    with Screen(store) as search:
        records_to_target(search, y, priors, math.ceil(0.95 * y.sum()), max(READS))
        told, lab = (np.asarray(a) for a in search.history_arrays())
        rows = []
        for read in (t for t in READS if t <= len(told)):
            search.n_pos, search.n_neg = int((lab[:read] >= 0.5).sum()), int((lab[:read] < 0.5).sum())
            costs = [loo_cost(X, told[:read], lab[:read], search.weights(u), search.params.ridge) for u in UNREAD]
            rows.append(dict(read=read, relevant=search.n_pos, answers_only=costs[0], unread_ridge=costs[1]))
    return dict(store=store, priors=priors, loo=rows)


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], [int(v) for v in sys.argv[2].split(",")])))
