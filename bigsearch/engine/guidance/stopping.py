"""When to stop screening: the recall reached so far, estimated from the order of the hits.

A search reads the likeliest records first, so the rate of relevant records among those
read falls as it goes on: once it has fallen far enough, the records left hold few. The
estimate models the hits among the last ``W`` records read as a Poisson process whose rate
is flat (a plateau) until a change point ``uc`` records before the last one, then decays
exponentially (never grows):

    rate u records before the last one:   lam * exp(b min(u, uc)),      0 <= b <= b_max,
    expected hits in the k-th record after:  lam * exp(-b k),

fits ``(uc, b, lam)`` to them by maximum likelihood, and extrapolates to the ``M`` records
not read: ``remaining = lam e^-b (1 - e^-bM) / (1 - e^-b)`` (``lam M`` when flat). The
change point lets a search that finds relevant records at a steady high precision and then
runs dry be followed where one decay over the whole window cannot (on the synthetic
`easy` corpus of 3,000 records it stopped at 1.6-1.8x the records needed, against 1.8-2.0x
with one decay).
``uc = W`` is the one decay, ``b = 0`` the flat rate, both always among the fits.

The interval: every ``(uc, b, lam)`` the hits do not reject at the level gives a count, and
the interval spans them. The change point is not a regular parameter (its likelihood ratio
does not follow chi-square), so the region is the joint one of the change point and the
rate's two parameters (deviance within the chi-square quantile with 2 degrees of freedom),
projected on the count: it holds whatever the change point. A flat rate over the window is
always allowed, so a run of misses short compared with the records left keeps the upper
end high: the rule stops only when the hits have slowed down convincingly. The fastest
decay b_max is one e-fold every ``SLOWEST x read`` records: the rule's one assumption of
scale, and what decides how soon it stops. The recall is ``found / (found + remaining)``;
:func:`stop_reached` says when its lower end reaches the target.

The window: the last ``max(MIN_WINDOW, WINDOW_SHARE x read)`` records past the reviewer's
own (``given``) ones. Calibrated on the screening set given to the project and on synthetic
corpora (benchmarks/stopping.py; docs/screening.md has the figures and the variants tried).
A model of the hits cannot know of relevant records the search has not come near (a topic
of the inclusion criteria it has not touched): where a random sample of the unread records
has been labeled (`session sample`), its estimate of the positives left (remaining.py) is
calibrated by construction and is used instead.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from ...errors import ParameterError
from ...kernels.stopping import remaining_hits

LEVEL = 0.95
MIN_WINDOW = 100
WINDOW_SHARE = 1.0
SLOWEST = 0.25  # the rate falls by e at most every SLOWEST x (records read)
DECAYS = np.concatenate([[0.0], np.geomspace(1e-3, 1.0, 80)])  # b / b_max, the fitted grid
CHANGE_POINTS = np.geomspace(0.02, 1.0, 24)  # the decay's share of the window, the fitted grid
MIN_DECAY = 10  # records: the shortest decay after a plateau


@dataclass(frozen=True)
class RecallEstimate:
    """Recall so far with its interval at ``level``, and the counts behind it."""

    found: int
    read: int
    remaining: float  # relevant records estimated among those not read
    remaining_high: float  # ... the upper end of its interval
    remaining_low: float
    recall: float
    recall_low: float
    recall_high: float
    level: float
    window: int  # records the fit rests on

    def as_dict(self) -> dict:
        return asdict(self)


def recall_estimate(answers, n_total: int, level: float = LEVEL, given: int = 0) -> RecallEstimate:
    """The recall reached after reading ``answers`` (in the order read; >= 0.5 counts as
    relevant) of ``n_total`` records, the first ``given`` of them chosen by the reviewer
    (the prior knowledge: they count as found, not as evidence of the search's pace)."""
    y = np.asarray(answers, np.float64) >= 0.5
    read, found = len(y), int(y.sum())
    if not 0 < level < 1:
        raise ParameterError(f"level must be in (0, 1), got {level}")
    if read > n_total:
        raise ParameterError(f"{read} answers for {n_total} records")
    left = n_total - read
    if found == 0:
        return RecallEstimate(0, read, math.nan, float(left), 0.0, math.nan, 0.0, 1.0, level, 0)
    if left == 0:
        return RecallEstimate(found, read, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, level, 0)
    searched = read - min(given, read)
    if searched < MIN_WINDOW:
        return RecallEstimate(found, read, math.nan, float(left), 0.0, math.nan, 0.0, 1.0, level, searched)
    W = min(searched, max(MIN_WINDOW, math.ceil(WINDOW_SHARE * read)))
    u = np.flatnonzero(y[read - W :][::-1]).astype(np.float64)  # hits' distances from the last record read
    low, value, high = _remaining(u, W, left, level, 1.0 / (SLOWEST * read))
    return RecallEstimate(
        found, read, value, high, low, found / (found + value), found / (found + high), found / (found + low), level, W
    )


def check_target(recall) -> float | None:
    """A stopping rule's target recall: None (no rule), or a number in (0, 1)."""
    if recall is None:
        return None
    try:
        value = float(recall)
    except (TypeError, ValueError):
        raise ParameterError(f"stop_at_recall must be a number in (0, 1), got {recall!r}") from None
    if not 0 < value < 1:
        raise ParameterError(f"stop_at_recall must be in (0, 1), got {recall!r} (0.95: stop at 95% recall)")
    return value


def stop_reached(estimate: RecallEstimate, target: float) -> bool:
    """Whether the recall's lower end has reached ``target``."""
    if not 0 < target <= 1:
        raise ParameterError(f"the target recall must be in (0, 1], got {target}")
    return estimate.found > 0 and estimate.recall_low >= target


def _remaining(hits, W, M, level, b_max):
    """(low, fitted, high) expected hits among the next M records, from the hits at
    distances ``hits`` (ascending) in a window of W records, decays up to b_max
    (kernels/stopping.py)."""
    return remaining_hits(hits, W, M, _cut(level), DECAYS, b_max, change_points(W))


def change_points(W: int) -> np.ndarray:
    """The change points fitted in a window of W records: the decay over the last uc of
    them (uc from MIN_DECAY to W, geometric), ascending, W among them."""
    knots = np.minimum(np.maximum(np.rint(CHANGE_POINTS * W), min(MIN_DECAY, W)), W)
    return np.unique(knots)


def _cut(level):
    """Half the deviance the interval admits: the chi-square quantile with 2 degrees of
    freedom at 2 level - 1 (one-sided ends), -log(2 (1 - level)) (the change point and the
    count jointly: the change point is not a regular parameter, so the interval is the
    projection of their joint region, not the profile over it)."""
    return -math.log(2.0 * (1.0 - level))
