"""How should the screen method weigh its two ridges? Variants of the adaptive weighting
(engine/methods/screen.py, ``adapt``), run in process on the engine's Screen.

On the given set the unread ridge alone reads 0.84-0.87x ASReview's records, the adaptive
pair 0.94x: the pair's ranking losses stay within a few answers of each other there, so the
weights stay near 0.5 (docs/screening.md). The variants, each patched onto Screen for one run:

- ``default``: the engine as it is;
- ``neg=W``: an irrelevant answer counts W in the losses (0: the relevant answers alone);
- ``bandit=H``: one ridge ranks each query, picked by Thompson sampling from the hit rate
  of its own picks (counts halving every H answers; the draw seeded by the step);
- ``T=X``: the softmax's temperature; ``half=H``: the losses' half-life in answers;
  ``prior=D``: D added to the unread ridge's log-weight
  (on equal losses it leads); combined with ``+`` (``T=1+prior=1``);
- ``gate=Z0,H``: the unread ridge's weight Phi(z + Z0), z a paired test (decayed, half-life
  H answers) of whether the answers-only ridge ranks the answers better;
- ``lag=L``: each answer costs each ridge where it was put by that ridge as fitted L
  answers before (not the ridge that just chose it);
- ``tail=R,W``: the unread ridge alone while the hit rate of the last W answers is below R;
- ``recent=H`` (``first=H``): the relevant answers weighed by when they were found, the
  latest (the first) the most, halving every H relevant answers (``weighted_positives``);
- ``unread-parts=mean|scatter|mean:scatter|mean=F:scatter`` (F: the mean point's weight
  times F): the unread ridge with only the unread records'
  mean (one point, target 0) or only their scatter about it (a penalty) (``unread_parts``);
  ``first-parts=...``: that ridge in place of the answers-only one, beside the unread ridge;
- ``unread-alone``: the unread ridge alone (``adapt=False``, `--screen-no-adapt`);
- ``ridge=L``, ``balance=B``, ``unread=U``, ``explore=N``: Screen's own options (`--screen-ridge`
  ..., ``--screen-explore-after``);
- ``fuse=TAU``: not the weighted sum of the two standardized scores but their soft maximum,
  TAU * log(sum_k w_k exp(z_k / TAU)) (TAU large: the sum; small: the higher z, so a record
  either ridge puts at its very top comes next; TAU negative: their soft minimum, a record
  both put high comes next), computed in memory (X read whole: small stores only);
- ``nn-adapt=W``: the neighbour term (nn, k = 3) as a third scorer in the adaptive softmax,
  standardized over the unread records like the ridges and weighed by its own ranking loss
  (the same per-answer costs); W (0 if left out) is nn's loss at the start, a handicap that
  decays like the losses (``neighbour_scorer``);
- ``unread-per-neg=R``: the unread ridge's unread records count as R negatives per read
  negative (at least R), not a fixed count: the read negatives keep 1 / (1 + R) of the
  negatives' weight as they grow (with 1,000 they keep 9% at 100 read) (``unread_per_negative``);
- ``ridges=U1:U2:...``: more than two ridges in the softmax, the answers-only one and one
  per unread count U (``more_ridges``).

Prints one JSON line: the records read to 95% recall, the unread ridge's weight every 50
reads (bandit: its share of the recent picks; nn-adapt: nn's weight too) and the reads at
which the queries found a relevant record.

    python benchmarks/explorations/screen_weighting.py STORE 672,41 T=1+prior=1 [BUDGET] >> weighting.jsonl
"""

import collections
import json
import math
import sys
import time

import numpy as np
import scipy.linalg
import scipy.special
import zarr
from exploration_streams import records_to_target

from bigsearch.engine.methods.screen import Screen

BANDIT_SEED = 7


def relevance_weighted_losses(negative_weight):
    def rank_answers(self, rows, lab):
        weight = np.where(np.asarray(lab) >= 0.5, 1.0, negative_weight)
        self._add_losses(self.answer_costs(rows, lab) * weight)

    return rank_answers


def bandit(half_life):
    def fit(self):
        self._ridges = tuple(self._standardized(*self._ridge(u)) for u in (0.0, self.params.unread))
        if not hasattr(self, "_picks"):
            self._picks = np.zeros((2, 2))  # [hits, picks] of each ridge's own queries
        rng = np.random.default_rng([BANDIT_SEED, len(self.history_arrays()[1])])
        self._chosen = int(np.argmax([rng.beta(h + 1.0, n - h + 1.0) for h, n in self._picks]))
        m = self._ridges[self._chosen]
        self.v, self.b, self.t = m.v / m.sd, (m.b - m.mean) / m.sd, 0.0

    def credit(self, rows, lab):
        if hasattr(self, "_chosen"):
            for relevant in np.asarray(lab) >= 0.5:
                self._picks *= 0.5 ** (1.0 / half_life)
                self._picks[self._chosen] += (float(relevant), 1.0)

    return fit, credit


def with_prior(prior):
    def ridge_weights(self):
        z = -(self.ridge_losses - self.ridge_losses.min()) / self.ADAPT_TEMPERATURE + np.array([0.0, prior])
        z = np.exp(z - z.max())
        return z / z.sum()

    return ridge_weights


def gated(z0, half_life):
    """The unread ridge leads unless the answers-only ridge ranked the answers significantly
    better: weight Phi(z + z0), z the paired test of the two ridges' per-answer costs
    (decayed mean over its standard error)."""

    def rank_answers(self, rows, lab):
        if not self._ridges:
            return
        if not hasattr(self, "_gate"):
            self._gate = np.zeros(3)  # decayed count, sum of d, sum of d^2
        decay = 0.5 ** (1.0 / half_life)
        costs = self.answer_costs(rows, lab)
        for d in costs[0] - costs[1]:  # > 0: the unread ridge ranked the answer better
            self._gate = decay * self._gate + (1.0, d, d * d)

    def ridge_weights(self):
        n, s1, s2 = getattr(self, "_gate", (0.0, 0.0, 0.0))
        if n < 2:
            w = scipy.special.ndtr(z0)
        else:
            mean = s1 / n
            var = max(s2 / n - mean * mean, 1e-12)
            w = scipy.special.ndtr(mean / math.sqrt(var / n) + z0)
        return np.array([1.0 - w, w])

    return rank_answers, ridge_weights


def lagged(lag, rank_answers, fit):
    """The losses from where each ridge, as fitted ``lag`` answers ago, put the records
    answered now: the ridge that saw them coming leads."""

    def fit_and_keep(self):
        fit(self)
        if self._ridges:
            if not hasattr(self, "_snapshots"):
                self._snapshots = collections.deque(maxlen=lag + 1)
            self._snapshots.append(self._ridges)

    def rank_by_snapshot(self, rows, lab):
        snapshots = getattr(self, "_snapshots", None)
        if not snapshots:
            return rank_answers(self, rows, lab)
        current, self._ridges = self._ridges, snapshots[0]
        try:
            rank_answers(self, rows, lab)
        finally:
            self._ridges = current

    return fit_and_keep, rank_by_snapshot


def in_the_tail(rate, window, weights):
    """The unread ridge alone once the hit rate of the last ``window`` answers is below
    ``rate`` (the tail, where the last relevant records are unlike those found); else
    ``weights``."""

    def ridge_weights(self):
        labels = self.history_arrays()[1]
        if len(labels) >= window and np.mean(labels[-window:] >= 1) < rate:
            return np.array([0.0, 1.0])
        return weights(self)

    return ridge_weights


def fused(tau):
    """The next records by the soft maximum of the ridges' standardized scores (``fuse=TAU``),
    from X in memory; the engine's pass is skipped, as its random draws skip it."""
    from bigsearch.engine.core.select import Ranked

    top = Screen._top

    def fused_top(self, k):
        told, labels = self.history_arrays()
        if not self._ridges or self.exploring:
            return top(self, k)
        if not hasattr(self, "_X"):
            self._X = np.asarray(zarr.open_group(self.store.path, mode="r")["X"][:], np.float64)
        z = np.array([(self._X @ m.v + m.b - m.mean) / m.sd for m in self._ridges])
        w = np.maximum(self.ridge_weights(), 1e-300)
        score = tau * scipy.special.logsumexp(z / tau + np.log(w)[:, None], axis=0)
        score[np.asarray(told, np.int64)] = -np.inf
        idx = np.argsort(-score, kind="stable")[:k]
        self._end_round()
        return Ranked(idx.astype(np.int64), score[idx])

    return fused_top


def weighted_positives(half, first=False):
    """Each ridge fitted with the relevant answers weighed by when they were found: the
    j-th of P weighs 2^-((P - j) / half) (``first``: 2^-(j / half)), scaled to mean 1 so
    the classes keep their balance. The later relevant records are the ones least like
    the first: do they point to those still unread? The fit as the engine's low-rank one
    (G's eigenbasis, the labels as a Woodbury update), with a weight per labeled row."""

    def ridge(self, unread):
        c_pos, c_neg, c_un = self.weights(unread)
        w, Q = self._eigen()
        L = self._labeled_coordinates(Q)
        _, lab = self.history_arrays()
        pos = np.asarray(lab) >= 0.5
        P = int(pos.sum())
        cl = np.full(len(lab), c_neg)
        if P:
            j = np.arange(1, P + 1)
            g = 0.5 ** (j / half) if first else 0.5 ** ((P - j) / half)
            cl[pos] = c_pos * g / g.mean()
        n_un = self.n - len(lab)
        sQ = self.s @ Q
        s1 = c_un * (sQ - L.sum(axis=0)) + cl @ L
        W = c_un * n_un + cl.sum()
        if W <= 0:
            return np.zeros(self.store.r), 0.0
        x, ybar = s1 / W, cl[pos].sum() / W
        rhs = cl[pos] @ L[pos] - W * x * ybar
        d = 1.0 / (c_un * w + self.params.ridge)
        U = np.vstack([L, x])
        C = np.append(cl - c_un, -W)
        K = (U * d) @ U.T
        z = d * rhs
        y = np.linalg.solve(np.eye(len(C)) + C[:, None] * K, C * (U @ z))
        v_eig = z - d * (y @ U)
        return Q @ v_eig, float(ybar - x @ v_eig)

    return ridge


def unread_parts(parts, first=False):
    """The unread ridge with only some of what the unread records bring. Their squared
    loss splits exactly in two: c_un sum_j (b + x_j . v)^2 = c_un n_U (b + mu_U . v)^2 (one
    point at their mean, target 0: ``mean``) + c_un v^T S_U v (their scatter about that mean,
    a penalty that shrinks v along the corpus's common directions: ``scatter``). Both is the
    unread ridge. An r x r solve from G (small stores). ``first``: the pair's first ridge
    (the answers alone) is the one with these parts, the second the unread ridge as it is."""

    ridge = Screen._ridge

    def part_ridge(self, unread):
        if (unread == 0) != first:  # the pair's other ridge, as the engine fits it
            return ridge(self, unread)
        unread = self.params.unread
        c_pos, c_neg, c_un = self.weights(unread)
        n_un = self.n - self.n_pos - self.n_neg
        GU, sU = self.G - self.GP - self.GN, self.s - self.sP - self.sN
        mu = sU / max(n_un, 1)
        gram = c_pos * self.GP + c_neg * self.GN
        s1 = c_pos * self.sP + c_neg * self.sN
        W = c_pos * self.n_pos + c_neg * self.n_neg
        mean_share = [float(p.partition("=")[2] or 1) for p in parts if p.startswith("mean")]
        if mean_share:  # mean=F: the point at F times its weight
            m = c_un * n_un * mean_share[0]
            gram, s1, W = gram + m * np.outer(mu, mu), s1 + m * mu, W + m
        if W <= 0:
            return np.zeros(self.store.r), 0.0
        xbar, ybar = s1 / W, c_pos * self.n_pos / W
        A = gram - W * np.outer(xbar, xbar)
        if "scatter" in parts:
            A += c_un * (GU - n_un * np.outer(mu, mu))
        A[np.diag_indices_from(A)] += self.params.ridge
        v = scipy.linalg.solve(A, c_pos * self.sP - W * xbar * ybar, assume_a="pos")
        return v, float(ybar - xbar @ v)

    return part_ridge


def nearest(rows, positives, k):
    """nn of each row: the mean of its k largest dot products with the positives (fewer
    positives: over those there are), as the kernel takes it (kernels/screen.py)."""
    S = rows @ np.asarray(positives).T
    return -np.sort(-S, axis=1)[:, : min(k, S.shape[1])].mean(axis=1)


def neighbour_scorer(handicap):
    """nn as a third scorer beside the two ridges (``nn-adapt=W``): z2 = (nn - mean) / sd
    over the unread records (from ``nn_spread``, the last pass's sums), weighed by the
    3-way softmax of minus the losses, the ridges keeping their weights unrenormalized:
    v, b as the engine sets them from w0, w1 and t = w2 / sd (the constant -w2 mean / sd
    leaves the ranking as it is). An answer costs nn as it costs a ridge (``answer_costs``),
    its nn from the relevant rows found before it (kept as they are found). Before the
    spread is known (count < 2, no positives or no spread) nn weighs 0 and costs 0, the
    ridges' weights the engine's. With the fixed weight nn helped the given set a little
    and cost 'medium' (docs/screening.md): does it help where it ranks the answers well?"""
    init, count = Screen.__init__, Screen._count

    def __init__(self, *args, **kwargs):
        init(self, *args, **kwargs)
        self.ridge_losses = np.array([0.0, 0.0, handicap])  # the ridges', nn's
        self._positive_list = []  # float64 rows of the relevant records, in the order found

    def count_positives(self, idx, lab):
        if len(idx):
            self._positive_list.extend(self._rows(idx)[np.asarray(lab) >= 0.5])
        count(self, idx, lab)

    def nn_moments(self):
        """nn's mean and sd over the unread records of the last pass; None while unknown."""
        total, squares, n = self.nn_spread
        if n < 2 or not self._positive_list:
            return None
        var = squares / n - (total / n) ** 2
        return (total / n, math.sqrt(var)) if var > 0 else None

    def ridge_weights(self):
        known = nn_moments(self) is not None
        losses = self.ridge_losses if known else self.ridge_losses[:2]
        z = np.exp(-(losses - losses.min()) / self.ADAPT_TEMPERATURE)
        w = z / z.sum()
        return w if known else np.append(w, 0.0)

    def neighbour_scale(self):
        moments = nn_moments(self)
        return 0.0 if moments is None or not self._ridges else float(self.ridge_weights()[2] / moments[1])

    def rank_answers(self, rows, lab):
        if not self._ridges:
            return
        costs = np.vstack([self.answer_costs(rows, lab), np.zeros(len(rows))])
        moments = nn_moments(self)  # the positives and spread the answered rows were ranked by
        if moments is not None:
            nn = nearest(rows, self._positive_list, self.params.neighbours)
            above = scipy.special.ndtr(-(nn - moments[0]) / moments[1])
            costs[2] = np.where(np.asarray(lab) >= 0.5, above, 1.0 - above)
        self._add_losses(costs)

    Screen.__init__, Screen._count = __init__, count_positives
    Screen.ridge_weights, Screen._neighbour_scale, Screen._rank_answers = ridge_weights, neighbour_scale, rank_answers


def unread_per_negative(ratio):
    """The unread ridge with the unread records as ``ratio`` negatives per read negative."""
    weights = Screen.weights

    def scaled(self, unread=None):
        unread = self.params.unread if unread is None else unread
        return weights(self, ratio * max(self.n_neg, 1) if unread else 0.0)

    return scaled


def more_ridges(counts):
    """The answers-only ridge and one ridge per unread count in ``counts``, weighed by the
    softmax of their ranking losses as the engine weighs its two."""
    init = Screen.__init__

    def __init__(self, *args, **kwargs):
        init(self, *args, **kwargs)
        self.ridge_losses = np.zeros(1 + len(counts))

    def fit(self):
        self._ridges = tuple(self._standardized(*self._ridge(u)) for u in (0.0, *counts))
        self.v, self.b = self._weighed_ridges()
        self.t = 0.0

    Screen.__init__, Screen._fit = __init__, fit


def apply(variant):
    """Patch the variant onto Screen; returns Screen's keyword arguments."""
    options, lag, tail = {}, None, None
    for part in variant.split("+"):
        key, _, value = part.partition("=")  # unread-parts=mean=0.3:scatter: value "mean=0.3:scatter"
        if key == "neg":
            Screen._rank_answers = relevance_weighted_losses(float(value))
        elif key == "bandit":
            Screen._fit, Screen._rank_answers = bandit(float(value))
        elif key == "T":
            Screen.ADAPT_TEMPERATURE = float(value)
        elif key == "half":
            Screen.ADAPT_HALF_LIFE = float(value)
        elif key == "prior":
            Screen.ridge_weights = with_prior(float(value))
        elif key == "gate":
            z0, _, h = value.partition(",")
            Screen._rank_answers, Screen.ridge_weights = gated(float(z0), float(h or 30))
        elif key == "tail":
            rate, _, window = value.partition(",")
            tail = float(rate), int(window or 50)
        elif key == "lag":
            lag = int(value)
        elif key == "fuse":
            Screen._top = fused(float(value))
        elif key in ("recent", "first"):
            Screen._ridge = weighted_positives(float(value), first=key == "first")
        elif key == "unread-alone":
            options["adapt"] = False
        elif key == "unread-parts":  # unread-parts=mean, =scatter, =mean:scatter, =mean=0.3:scatter
            Screen._ridge = unread_parts(value.split(":"))
        elif key == "first-parts":  # the pair: this ridge and the unread ridge as it is
            Screen._ridge = unread_parts(value.split(":"), first=True)
        elif key == "nn-adapt":  # nn computed by the passes (its weight: the softmax's)
            neighbour_scorer(float(value or 0))
            options["neighbour_weight"] = 1.0
        elif key == "unread-per-neg":
            Screen.weights = unread_per_negative(float(value))
        elif key == "ridges":  # ridges=100:1000: the answers-only ridge and one per count
            more_ridges([float(u) for u in value.split(":")])
        elif key in ("ridge", "balance", "unread"):  # Screen's own options
            options[key] = float(value)
        elif key == "explore":  # --screen-explore-after (0: never)
            options["explore_after"] = int(value)
        elif key != "default":
            raise SystemExit(f"unknown variant {part!r}")
    if tail:  # after T and prior: it falls back on the weights they chose
        Screen.ridge_weights = in_the_tail(*tail, Screen.ridge_weights)
    if lag:  # last: it wraps the losses and the fit the other parts chose
        Screen._fit, Screen._rank_answers = lagged(lag, Screen._rank_answers, Screen._fit)
    return options


def unread_weight(search):
    if not search._ridges:  # one ridge: the unread one (adapt off)
        return 1.0
    if hasattr(search, "_picks"):
        return float(search._picks[1, 1] / max(search._picks[:, 1].sum(), 1e-12))
    return float(search.ridge_weights()[1])


def main(store, priors, variant, budget=1200):
    options = apply(variant)
    y = np.asarray(zarr.open_group(store, mode="r")["y"][:]) >= 0.5
    need = math.ceil(0.95 * y.sum())
    t, weights, nn_weights, hits = time.perf_counter(), [], [], []

    def every_50(search, read):
        if search.history_arrays()[1][-1] >= 1:
            hits.append(read)
        if read % 50 == 0:
            weights.append(round(unread_weight(search), 2))
            if search._ridges and len(search.ridge_weights()) == 3:  # nn-adapt
                nn_weights.append(round(float(search.ridge_weights()[2]), 2))

    with Screen(store, **options) as search:
        read95 = records_to_target(search, y, priors, need, budget, every_50)
    nn = dict(nn_weight_every_50=nn_weights) if nn_weights else {}
    return dict(store=store, priors=priors, variant=variant, read95=read95,
                unread_weight_every_50=weights, **nn, hit_reads=hits, seconds=round(time.perf_counter() - t))


if __name__ == "__main__":
    store, priors, variant = sys.argv[1], [int(v) for v in sys.argv[2].split(",")], sys.argv[3]
    budget = int(sys.argv[4]) if len(sys.argv) > 4 else 1200
    print(json.dumps(main(store, priors, variant, budget)), flush=True)
