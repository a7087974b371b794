"""How many positives remain unlabeled, and when to stop: estimates with their uncertainty.

Pure functions of arrays (scores, labels, a sample's answers); the session, ``run`` and
benchmarks/remaining.py call them. docs/sessions.md ("How many are left") says which to
trust when, with the measurements on Adult and MNIST:

- :func:`score_sum`: the sum of LAS's f over the unlabeled points. Free, but f is not a
  calibrated probability: far from every label it stays near the prior pi, so the sum is
  mostly pi x (unlabeled points) and moves little as positives are found. Its interval is
  what the sum's spread would be IF f were calibrated (a Poisson-binomial SD); it does not
  cover the bias.
- :func:`recent_hit_rate`: positives among the last few labels, with a Wilson interval.
  It is the rate of the next queries (the search asks the likeliest first), so it says
  when a label stops paying off; it is not a count of what is left.
- :func:`draw_sample` + :func:`sampled_estimate`: label m points drawn at random (uniform
  by default; ``mix`` < 1 mixes in f-proportional draws) and estimate the count
  (Hansen-Hurwitz) with a confidence interval. Calibrated by construction (unbiased for
  any f), at the cost of m labels spent on the estimate instead of the search.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from ...errors import ParameterError

LEVEL = 0.95
RECENT_WINDOW = 20


@dataclass(frozen=True)
class Estimate:
    """An estimate with its interval at ``level``: ``value`` in [``low``, ``high``]."""

    kind: str
    value: float
    low: float
    high: float
    level: float
    basis: int  # points the estimate rests on (unlabeled points, window, sample size)

    def as_dict(self) -> dict:
        return asdict(self)


def _z(level: float) -> float:
    """The two-sided normal quantile for ``level`` (inverse error function by bisection:
    no SciPy for one number)."""
    if not 0 < level < 1:
        raise ParameterError(f"level must be in (0, 1), got {level}")
    lo, hi = 0.0, 10.0
    for _ in range(80):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if math.erf(mid / math.sqrt(2)) < level else (lo, mid)
    return (lo + hi) / 2


def score_sum(f: np.ndarray, labels: np.ndarray, level: float = LEVEL) -> Estimate:
    """Sum of f over the unlabeled points (labels < 0), f clipped to [0, 1]; the interval
    is the normal one of a sum of independent Bernoulli(f_i), i.e. assumes f calibrated."""
    f, labels = np.asarray(f, np.float64), np.asarray(labels)
    if f.shape != labels.shape:
        raise ParameterError(f"f and labels must have the same shape, got {f.shape} and {labels.shape}")
    p = np.clip(f[labels < 0], 0.0, 1.0)
    value = float(p.sum(dtype=np.float64))
    half = _z(level) * math.sqrt(float(np.sum(p * (1 - p), dtype=np.float64)))
    return Estimate("score_sum", value, max(0.0, value - half), min(float(len(p)), value + half), level, len(p))


def wilson(hits: int, n: int, level: float = LEVEL) -> tuple[float, float]:
    """Wilson's interval for a proportion hits / n (good at 0 and 1, unlike the normal one)."""
    if n <= 0:
        return 0.0, 1.0
    z, p = _z(level), hits / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def recent_hit_rate(answers: np.ndarray, window: int = RECENT_WINDOW, level: float = LEVEL) -> Estimate:
    """The share of positives among the last ``window`` answers (in the order given; 1 =
    positive), with Wilson's interval: what the next queries are likely to yield."""
    if window < 1:
        raise ParameterError(f"window must be >= 1, got {window}")
    recent = np.asarray(answers, np.float64)[-window:]
    hits = int(np.sum(recent >= 0.5))  # a graded answer counts as `labels` shows it
    low, high = wilson(hits, len(recent), level)
    value = hits / len(recent) if len(recent) else float("nan")
    return Estimate("recent_hit_rate", value, low, high, level, len(recent))


def sample_weights(f: np.ndarray, labels: np.ndarray, mix: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """(unlabeled indices, drawing probabilities): ``mix`` of uniform plus ``1 - mix`` of
    f-proportional. The uniform part keeps every point drawable (the estimate stays
    unbiased and its variance bounded however wrong f is); the f part puts the draws where
    the positives likely are, which shrinks the interval when f ranks well."""
    if not 0 < mix <= 1:
        raise ParameterError(f"mix must be in (0, 1], got {mix}")
    f, labels = np.asarray(f, np.float64), np.asarray(labels)
    idx = np.flatnonzero(labels < 0)
    if not len(idx):
        raise ParameterError("every point is labeled: nothing remains to estimate")
    w = np.clip(f[idx], 0.0, None)
    total = w.sum(dtype=np.float64)
    p = np.full(len(idx), 1.0 / len(idx))
    if total > 0 and mix < 1:
        p = mix * p + (1 - mix) * w / total
    return idx, p / p.sum()


def draw_sample(
    f: np.ndarray, labels: np.ndarray, m: int, rng: np.random.Generator, mix: float = 1.0
) -> tuple[np.ndarray, np.ndarray]:
    """m draws (with replacement) from :func:`sample_weights`: (indices, their probabilities)."""
    if m < 2:
        raise ParameterError(f"a sample needs at least 2 draws for an interval, got {m}")
    idx, p = sample_weights(f, labels, mix)
    pick = rng.choice(len(idx), size=m, replace=True, p=p)
    return idx[pick], p[pick]


def sampled_estimate(answers: np.ndarray, probabilities: np.ndarray, level: float = LEVEL) -> Estimate:
    """Hansen-Hurwitz: the positives among the unlabeled points from m draws with
    replacement, draw k having probability p_k and answer y_k: mean of y_k / p_k. Uniform
    draws get Wilson's interval scaled to the population; others a normal interval from
    the draws' spread (floored at 0), trustworthy only once the sample holds ten or so
    positives."""
    y, p = np.asarray(answers, np.float64), np.asarray(probabilities, np.float64)
    if y.shape != p.shape or y.ndim != 1 or len(y) < 2:
        raise ParameterError("give at least 2 answers and their drawing probabilities, one each")
    if np.any(p <= 0) or np.any(p > 1):
        raise ParameterError("drawing probabilities must be in (0, 1]")
    if np.allclose(p, p[0], rtol=1e-9):
        # uniform draws: population 1 / p, Wilson's interval on the share (right at 0 hits,
        # where the normal interval of a rare class collapses to a point)
        population = 1.0 / float(p[0])
        hits = int(np.sum(y >= 0.5))
        low, high = wilson(hits, len(y), level)
        return Estimate("sampled", population * hits / len(y), population * low, population * high, level, len(y))
    t = y / p
    value = float(t.mean())
    half = _z(level) * float(t.std(ddof=1)) / math.sqrt(len(t))
    return Estimate("sampled", value, max(value - half, 0.0), value + half, level, len(t))


def sampled_remaining(population: int, answers: np.ndarray, found_since: int, level: float = LEVEL) -> Estimate:
    """Positives left now, from a uniform sample drawn without replacement from the
    ``population`` points unlabeled at the draw, ``answers`` the sample's answers so far:
    population x (Wilson share) - ``found_since`` (positives labeled since the draw, the
    sample's included), floored at 0. Without replacement the interval is conservative."""
    answers = np.asarray(answers, np.float64)
    if len(answers) < 1:
        raise ParameterError("no point of the sample is labeled yet")
    hits = int(np.sum(answers >= 0.5))
    low, high = wilson(hits, len(answers), level)
    value = population * hits / len(answers) - found_since
    return Estimate(
        "sampled",
        max(value, 0.0),
        max(population * low - found_since, 0.0),
        max(population * high - found_since, 0.0),
        level,
        len(answers),
    )


def remaining_summary(
    f: np.ndarray | None, labels: np.ndarray, answers: np.ndarray, window: int = RECENT_WINDOW, level: float = LEVEL
) -> dict:
    """What `session status` and `run` report: the score sum (None when f is not a
    probability, e.g. WNAS's), the recent hit rate (None before any label) and the
    positives found so far."""
    answers = np.asarray(answers, np.float64)
    return {
        "found": int(np.sum(answers >= 0.5)),
        "unlabeled": int(np.sum(np.asarray(labels) < 0)),
        "score_sum": None if f is None else score_sum(f, labels, level).as_dict(),
        "recent_hit_rate": recent_hit_rate(answers, window, level).as_dict() if len(answers) else None,
    }
