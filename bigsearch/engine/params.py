"""Parameters of the search methods: one immutable, validated record per method."""

import math
from dataclasses import asdict, dataclass

from ..errors import ParameterError


def _check(name, value, low, high, low_open=True, high_open=True):
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise ParameterError(f"{name} must be a number, got {value!r}") from None
    below = value <= low if low_open else value < low
    above = value >= high if high_open else value > high
    if not math.isfinite(value) or below or above:
        lo, hi = ("(" if low_open else "["), (")" if high_open else "]")
        raise ParameterError(f"{name} = {value} is outside its range {lo}{low}, {high}{hi}")
    return value


@dataclass(frozen=True)
class LASParams:
    """pi: prior probability of a positive; eta: transition probability into a labeled
    point's pseudo-node (lam = (1 - eta) / eta); w0: weight of an unlabeled point's
    pseudo-node; alpha: weight of the rescaled impact factor in the selection."""
    pi: float
    w0: float
    eta: float = 0.5
    alpha: float = 0.0

    def __post_init__(self):
        object.__setattr__(self, "pi", _check("pi", self.pi, 0, 1))
        object.__setattr__(self, "eta", _check("eta", self.eta, 0, 1))
        object.__setattr__(self, "w0", _check("w0", self.w0, 0, math.inf))
        object.__setattr__(self, "alpha", _check("alpha", self.alpha, 0, math.inf, low_open=False))

    def as_dict(self):
        return asdict(self)


def default_pi(store, pi):
    """pi as given, else the prevalence of the store's known labels."""
    if pi is not None:
        return pi
    y = store.labels()
    known = None if y is None else y[y >= 0]
    if known is None or known.size == 0 or not 0 < known.mean() < 1:
        raise ParameterError(
            "pi (the prior probability of a positive) is required: the store has no labels "
            "of both classes to estimate it from; pass pi=..., e.g. your guess of the prevalence")
    return float(known.mean())
