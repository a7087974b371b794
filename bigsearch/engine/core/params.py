"""Parameters of the search methods: one immutable, validated record per method.

A method's record is what defines one search of that method (what results files and
sessions record, and what a search is rebuilt from): ``as_dict()`` is its JSON form and
``names()`` the keywords its constructor takes for it. Options that change how a search
runs but not what it computes (the backend, threads) are not parameters.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import asdict, dataclass, fields
from typing import Any

from ...errors import ParameterError


def _check(name: str, value: Any, low: float, high: float, low_open: bool = True,
           high_open: bool = True) -> float:
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


def _check_int(name: str, value: Any, low: int, allow_none: bool = False) -> int | None:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ParameterError(f"{name} must be an integer, got {value!r}")
    if value < low:
        raise ParameterError(f"{name} must be >= {low}, got {value}")
    return int(value)


class Params:
    """What every parameters record offers (the records are frozen dataclasses)."""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)  # type: ignore[call-overload]

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The parameters' names: the keywords the method's constructor takes for them."""
        return tuple(f.name for f in fields(cls))  # type: ignore[arg-type]

    def _set(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)   # validation inside __post_init__ of a frozen record


@dataclass(frozen=True)
class LASParams(Params):
    """pi: prior probability of a positive; eta: transition probability into a labeled
    point's pseudo-node (lam = (1 - eta) / eta); w0: weight of an unlabeled point's
    pseudo-node; alpha: weight of the rescaled impact factor in the selection."""
    pi: float
    w0: float
    eta: float = 0.5
    alpha: float = 0.0

    def __post_init__(self) -> None:
        self._set("pi", _check("pi", self.pi, 0, 1))
        self._set("eta", _check("eta", self.eta, 0, 1))
        self._set("w0", _check("w0", self.w0, 0, math.inf))
        self._set("alpha", _check("alpha", self.alpha, 0, math.inf, low_open=False))

    @classmethod
    def for_store(cls, store: Any, pi: float | None = None, eta: float = 0.5, w0: float | None = None,
                  alpha: float = 0.0) -> LASParams:
        """The record with the store-dependent defaults filled in: pi from the store's
        labels, w0 = 1 / n."""
        return cls(pi=default_pi(store, pi), w0=1.0 / store.n if w0 is None else w0, eta=eta, alpha=alpha)


@dataclass(frozen=True)
class DriftCheck(Params):
    """How LAS guards its incrementally updated K^-1: every ``check_every`` labels
    (None or 0: never) it measures ||K K^-1 - I|| and recomputes K^-1 and J from X when
    that exceeds ``drift_tol``. Numerics, not a parameter of the model."""
    check_every: int | None = 100
    drift_tol: float = 1e-10

    def __post_init__(self) -> None:
        self._set("check_every", _check_int("check_every", self.check_every, 0, allow_none=True))
        self._set("drift_tol", _check("drift_tol", self.drift_tol, 0, math.inf, low_open=False))


@dataclass(frozen=True)
class WNASParams(Params):
    """WNAS has no parameters: f is a weighted vote of the labeled points."""


@dataclass(frozen=True)
class AGRParams(Params):
    """anchors: k, the number of k-means anchors; neighbors: s, the nearest anchors each
    point is embedded on; gamma: weight of the graph regularizer; lae_iterations:
    iterations of Local Anchor Embedding; kmeans_iterations, kmeans_seed: Lloyd
    iterations and seed of k-means."""
    anchors: int = 500
    neighbors: int = 3
    gamma: float = 0.01
    lae_iterations: int = 10
    kmeans_iterations: int = 20
    kmeans_seed: int = 0

    def __post_init__(self) -> None:
        for name, low in (("anchors", 1), ("neighbors", 1), ("lae_iterations", 1), ("kmeans_iterations", 1),
                          ("kmeans_seed", 0)):
            self._set(name, _check_int(name, getattr(self, name), low))
        if self.neighbors > self.anchors:
            raise ParameterError(f"AGR needs 1 <= neighbors <= anchors, got {self.neighbors} and {self.anchors}")
        self._set("gamma", _check("gamma", self.gamma, 0, math.inf, low_open=False))


@dataclass(frozen=True)
class RandomParams(Params):
    """seed: the seed of the random draws (None: fresh entropy)."""
    seed: int | None = None

    def __post_init__(self) -> None:
        self._set("seed", _check_int("seed", self.seed, 0, allow_none=True))


@dataclass(frozen=True)
class RFParams(Params):
    """The random-forest baseline (engine/methods/rf.py), MolPAL's defaults: n_trees trees of depth
    at most max_depth, min_samples_leaf rows per leaf; seed: the forest's random_state."""
    n_trees: int = 100
    max_depth: int = 8
    min_samples_leaf: int = 1
    seed: int | None = 0

    def __post_init__(self) -> None:
        for name in ("n_trees", "max_depth", "min_samples_leaf"):
            self._set(name, _check_int(f"rf: {name}", getattr(self, name), 1))
        self._set("seed", _check_int("rf: seed", self.seed, 0, allow_none=True))


def default_pi(store: Any, pi: float | None) -> float:
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


ACQUISITIONS = ("greedy", "ucb", "thompson")


@dataclass(frozen=True)
class BLRParams(Params):
    """Bayesian linear regression (engine/methods/blr.py). acquisition: greedy (the predictive
    mean), ucb (mean + beta sqrt(variance)) or thompson (one exact posterior draw per
    query); lam: the prior precision of the weights, noise: the variance of a label's
    noise (None: each fitted by the evidence of the labels, refitted each time the labels
    grow by ``refit_share``); seed: the seed of Thompson's draws."""
    acquisition: str = "greedy"
    beta: float = 2.0
    lam: float | None = None
    noise: float | None = None
    refit_share: float = 0.25
    seed: int | None = 0

    def __post_init__(self) -> None:
        if self.acquisition not in ACQUISITIONS:
            raise ParameterError(f"acquisition {self.acquisition!r} is not one of {', '.join(ACQUISITIONS)}")
        self._set("beta", _check("beta", self.beta, 0, math.inf, low_open=False))
        for name in ("lam", "noise"):
            if getattr(self, name) is not None:
                self._set(name, _check(name, getattr(self, name), 0, math.inf))
        self._set("refit_share", _check("refit_share", self.refit_share, 0, math.inf))
        self._set("seed", _check_int("seed", self.seed, 0, allow_none=True))
