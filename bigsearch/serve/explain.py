"""Why a point is proposed: its score as an exact sum over the labeled points.

LAS's f is linear in the labels. With G = (I - R X X^T)^-1 = I + R X K^-1 X^T (the
matrix inversion lemma of docs/algorithm.md),

    f_i = sum_j G_ij q_j,   q_j = eta y_j (j labeled),  pi w0 / (1 + w0) (j unlabeled)

and a_ij = eta G_ij = eta rho_i (x_i . K^-1 x_j) (j labeled, j != i) is the probability
that a random walk from i ends at j's label: a positive adds a_ij to f_i, a negative
adds nothing (it lowers f_i only by absorbing walks that would have ended elsewhere).
The rest of f_i is the prior's share, q_i + rho_i x_i . K^-1 (xq - sum_L q_j x_j).
Cost: one r x r product and |L| dot products; X itself is not read.

WNAS's f is a weighted vote, f_i = sum_j s_j (x_i . x_j) / sum_j |x_i . x_j| over the
labeled j (s_j = +1 / -1), so its weights are (x_i . x_j) / sum_j |x_i . x_j|.
"""

import numpy as np


def explain(engine, index, history, top=5, f=None, near=3):
    """{"f": f_i, "prior": the prior's share (LAS), "labeled": the labeled points' total
    share, "points": the ``top`` labeled points that add most to f_i, then those with the
    largest weight: [{"index", "label", "weight", "contribution"}], "rest": the other
    labeled points, {"count", "contribution"}, so that prior + points + rest = f_i
    (LAS; WNAS: points + rest), "negatives": the ``near`` points answered negative (below
    0.5) with the largest weight, the ones this point is most like (a negative adds
    nothing to LAS's f, and lowers it by absorbing the walks that end there)}; None for a
    method whose scores this module cannot explain (only LAS's and WNAS's: EXPLAINED).
    ``history``: [(index, label)] in force, the engine's. ``f``: f_i when the caller has
    it (a query's score with alpha = 0): ``engine.f`` of a pruned search costs a pass."""
    terms = EXPLAINED.get(engine.method)
    if terms is None:
        return None
    f = float(engine.f[index]) if f is None else float(f)
    if not history:
        return {"f": f, "prior": f, "labeled": 0.0, "points": [], "rest": {"count": 0, "contribution": 0.0},
                "negatives": []}
    idx = np.array([i for i, _ in history], np.int64)
    lab = np.array([y for _, y in history], np.float64)
    rows = engine.store.read_rows(np.append(idx, index))
    X_L, x = rows[:-1], rows[-1]
    weight, contribution, prior = terms(engine, x, X_L, lab)
    order = np.lexsort((-np.abs(weight), -contribution))[:top]

    def term(k):
        return {"index": int(idx[k]), "label": int(lab[k]) if lab[k] in (0, 1) else float(lab[k]),   # a grade as given
                "weight": float(weight[k]), "contribution": float(contribution[k])}
    others = np.setdiff1d(np.arange(len(idx)), order)
    rest = {"count": int(len(others)), "contribution": float(contribution[others].sum())}
    negative = np.flatnonzero(lab < 0.5)
    alike = negative[np.argsort(-np.abs(weight[negative]), kind="stable")][:near]
    return {"f": f, "prior": prior, "labeled": float(contribution.sum()), "points": [term(k) for k in order],
            "rest": rest, "negatives": [term(k) for k in alike]}


def las_absorption(engine, x, X_L):
    """a_ij for an unlabeled point with row x and the labeled rows X_L; rho_i; K^-1 x
    (``LAS.inverse_times``: one thread, and K^-1 is not formed from its low-rank parts)."""
    p = engine.params
    rho = (1.0 / (1.0 + p.w0)) / float(x @ engine.s)
    g = engine.inverse_times(x[None, :])[0]
    return p.eta * rho * (X_L @ g), rho, g


def _las_terms(engine, x, X_L, lab):
    p = engine.params
    weight, rho, g = las_absorption(engine, x, X_L)
    q_unlabeled = p.pi * p.w0 / (1.0 + p.w0)
    xq_prior = engine.xq - p.eta * (lab @ X_L)
    prior = q_unlabeled + rho * float(g @ xq_prior)       # x . K^-1 xq_prior: K^-1 is symmetric
    return weight, weight * lab, prior


def _wnas_terms(engine, x, X_L, lab):
    sim = X_L @ x
    den = np.abs(sim).sum()
    weight = sim / den if den > 0 else np.zeros_like(sim)
    return weight, weight * (2.0 * lab - 1.0), None


# The methods whose f this module writes as a sum over the labeled points: a method's
# (weight, contribution, prior) from its row x, the labeled rows and their labels.
EXPLAINED = {"las": _las_terms, "wnas": _wnas_terms}
