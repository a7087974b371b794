"""Parameters of the search methods: one immutable, validated record per method.

A method's record is what defines one search of that method (what results files and
sessions record, and what a search is rebuilt from): ``as_dict()`` is its JSON form and
``names()`` the keywords its constructor takes for it. Options that change how a search
runs but not what it computes (the backend, threads) are not parameters.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import asdict, dataclass, fields, replace
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
        _check_las(self)

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
class ScreenParams(Params):
    """Screening (engine/methods/screen.py): ridge, the penalty on the weights; balance, how
    many times less the negatives weigh in all than the positives; unread, how many
    negatives the unread records count for in all; adapt, whether the answers-only ridge and
    the unread one are weighed by their recent ranking of the answers (else the second alone);
    neighbours, k of the nearest positives' mean similarity; neighbour_weight, its weight in
    standard deviations of the linear score; explore_after, the irrelevant records in a row
    after which as many are drawn at random, then as many ranked, by turns until one is
    relevant (0: never)."""
    ridge: float = 1.0
    balance: float = 9.8
    unread: float = 1000.0
    adapt: bool = True
    neighbours: int = 3
    neighbour_weight: float = 0.0
    explore_after: int = 100

    def __post_init__(self) -> None:
        _check_screen(self)


def _check_screen(record: Any) -> None:
    record._set("ridge", _check("ridge", record.ridge, 0, math.inf))
    record._set("balance", _check("balance", record.balance, 0, math.inf))
    record._set("unread", _check("unread", record.unread, 0, math.inf, low_open=False))
    if not isinstance(record.adapt, bool):
        raise ParameterError(f"adapt must be true or false, got {record.adapt!r}")
    record._set("adapt", bool(record.adapt))
    record._set("neighbours", _check_int("neighbours", record.neighbours, 1))
    if record.neighbours > 3:
        raise ParameterError(f"neighbours must be 1, 2 or 3, got {record.neighbours}")
    record._set("neighbour_weight", _check("neighbour_weight", record.neighbour_weight, 0, math.inf,
                                            low_open=False))
    record._set("explore_after", _check_int("explore_after", record.explore_after, 0))


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
        _check_agr(self)


def _check_agr(record: Any) -> None:
    """AGR's parameters, checked in place; anchors may be None in an options record (chosen
    from the store's size)."""
    for name, low in (("anchors", 1), ("neighbors", 1), ("lae_iterations", 1), ("kmeans_iterations", 1),
                      ("kmeans_seed", 0)):
        record._set(name, _check_int(name, getattr(record, name), low, allow_none=name == "anchors"))
    if record.anchors is not None and record.neighbors > record.anchors:
        raise ParameterError(f"AGR needs 1 <= neighbors <= anchors, got neighbors={record.neighbors} and "
                             f"anchors={record.anchors}")
    record._set("gamma", _check("gamma", record.gamma, 0, math.inf, low_open=False))


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


LAS_RANGES = (("pi", 0, 1, True), ("eta", 0, 1, True), ("w0", 0, math.inf, True), ("alpha", 0, math.inf, False))


def _check_las(record: Any, optional: tuple[str, ...] = ()) -> None:
    """LAS's (and ASG's) parameters, checked in place; those in ``optional`` may be None
    (an options record: filled in from the store)."""
    for name, low, high, low_open in LAS_RANGES:
        value = getattr(record, name)
        if value is not None or name not in optional:
            record._set(name, _check(name, value, low, high, low_open=low_open))


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


# -- a run's options: what the CLI, experiments and sessions pass to a method ---------------
@dataclass(frozen=True)
class Options(Params):
    """Everything a method's constructor takes besides the store and where it runs
    (``backend``, ``n_threads``, ``store_options``): its parameters and its engine options
    (pruning, LAS's drift check, fantasized batches), as a run gives them. Each field is
    checked in ``__post_init__`` without a store (None: the default; a default that depends
    on the store is filled in by :meth:`for_shape`). A method declares its record in its
    registry line (``MethodSpec(..., options=LASOptions)``); the record's fields are its
    constructor's keywords (tests/test_methods.py checks). This base class, with no fields,
    is the record of a method without options."""

    def for_shape(self, n: int, r: int) -> Options:
        """The record with the defaults that depend on the store's size filled in, and
        checked against it (n points, r features): all that can be known before X is read."""
        return self

    def keywords(self) -> dict[str, Any]:
        """The constructor's keywords (the values themselves: as_dict() copies)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


def _check_bool(name: str, value: Any) -> bool:
    if type(value).__name__ not in ("bool", "bool_"):       # Python's or NumPy's
        raise ParameterError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def _check_pruning(record: Any) -> None:
    """prune (exact pruned queries, engine/pruning/: True, or a :class:`PruneOptions`) and
    block_rows (None: the default), checked together by :meth:`PruneOptions.of`."""
    if isinstance(record.prune, dict):          # a PruneOptions as as_dict() wrote it
        record._set("prune", PruneOptions(**record.prune))
    if not isinstance(record.prune, PruneOptions):
        record._set("prune", _check_bool("prune", record.prune))
    PruneOptions.of(record.prune, record.block_rows)
    if record.block_rows is not None:
        record._set("block_rows", check_block_rows(record.block_rows))


DEFAULT_BLOCK_ROWS = 128  # rows per pruning block (engine/pruning/)


@dataclass(frozen=True)
class PruneOptions(Params):
    """How pruned queries cut X (engine/pruning/): ``block_rows`` rows per block (a
    multiple of 64; None: 128) and ``basis_dim`` directions in the basis the block
    summaries bound in (LAS and BLR; None: the default of engine/pruning/block_summaries.py).

    The one shape of the pruning options: the engines' constructors, sessions, runs and
    the CLI's ``--prune`` all reach it through :meth:`of`, which also reads the older
    keywords (``prune=True, block_rows=64``)."""
    block_rows: int | None = None
    basis_dim: int | None = None

    def __post_init__(self) -> None:
        if self.block_rows is not None:
            self._set("block_rows", check_block_rows(self.block_rows))
        self._set("basis_dim", _check_int("basis_dim", self.basis_dim, 1, allow_none=True))

    @classmethod
    def of(cls, prune: Any, block_rows: int | None = None) -> PruneOptions | None:
        """The record for a method's keywords ``prune`` (False or None: off; True; or a
        PruneOptions) and ``block_rows`` (the older keyword for ``PruneOptions.block_rows``)."""
        if isinstance(prune, PruneOptions):
            if block_rows is not None and check_block_rows(block_rows) != check_block_rows(prune.block_rows):
                raise ParameterError(f"block_rows={block_rows!r} disagrees with prune={prune!r}: give it once, "
                                     "in PruneOptions")
            return prune
        if prune is None or not _check_bool("prune", prune):
            return None
        return cls(block_rows)

    def saved(self) -> dict[str, Any]:
        """What a saved search records of it (``block_rows`` as used, ``basis_dim`` when set)."""
        out: dict[str, Any] = {"block_rows": check_block_rows(self.block_rows)}
        return out if self.basis_dim is None else {**out, "basis_dim": self.basis_dim}

    @classmethod
    def from_saved(cls, saved: dict[str, Any] | None) -> PruneOptions | None:
        """The record a saved search's ``saved()`` came from (None: not pruned)."""
        return None if not saved else cls(saved.get("block_rows"), saved.get("basis_dim"))


def check_block_rows(block_rows: Any) -> int:
    """Rows per block: a multiple of the kernels' ROW_BLOCK, so a block's rows go through
    exactly the code path (pairs of rows, vectorized groups) they take in the full pass."""
    from ...kernels.common import ROW_BLOCK  # the kernels' row block: numerical code, imported when needed

    if block_rows is None:
        return DEFAULT_BLOCK_ROWS
    if (
        isinstance(block_rows, bool)
        or int(block_rows) != block_rows
        or block_rows < ROW_BLOCK
        or block_rows % ROW_BLOCK
    ):
        raise ParameterError(f"block_rows must be a positive multiple of {ROW_BLOCK}, got {block_rows!r}")
    return int(block_rows)


def check_fantasy(value: Any) -> float | str | None:
    """None (top-B batches), "f", or a soft label in [0, 1] (engine/methods/fantasy.py)."""
    if value is None or value == "f":
        return value
    try:
        y = float(value)
    except (TypeError, ValueError):
        raise ParameterError(f"fantasy must be 'f' or a label in [0, 1], got {value!r}") from None
    if not 0.0 <= y <= 1.0:
        raise ParameterError(f"fantasy must be 'f' or a label in [0, 1], got {value!r}")
    return y


@dataclass(frozen=True)
class LASOptions(Options):
    """LAS (engine/methods/las.py): the parameters of :class:`LASParams` (pi None: the stored labels'
    prevalence; w0 None: 1 / n), the :class:`DriftCheck`, pruning, and fantasy (how a batch
    is chosen, engine/methods/fantasy.py; it needs every f, so not with prune)."""
    pi: float | None = None
    eta: float = 0.5
    w0: float | None = None
    alpha: float = 0.0
    check_every: int | None = 100
    drift_tol: float = 1e-10
    prune: bool | PruneOptions = False
    block_rows: int | None = None
    fantasy: float | str | None = None

    def __post_init__(self) -> None:
        _check_las(self, optional=("pi", "w0"))
        for name, value in DriftCheck(self.check_every, self.drift_tol).as_dict().items():
            self._set(name, value)
        _check_pruning(self)
        self._set("fantasy", check_fantasy(self.fantasy))
        if self.prune and self.fantasy is not None:
            raise ParameterError("fantasized batches need every f after each pass: use prune or fantasy, not both")


@dataclass(frozen=True)
class ASGOptions(Options):
    """ASG (engine/methods/asg.py): LAS's parameters, no engine options."""
    pi: float | None = None
    eta: float = 0.5
    w0: float | None = None
    alpha: float = 0.0

    def __post_init__(self) -> None:
        _check_las(self, optional=("pi", "w0"))


@dataclass(frozen=True)
class ScreenOptions(Options):
    """Screening (engine/methods/screen.py): the parameters of :class:`ScreenParams`, and
    pruning (queries while neighbour_weight is 0, engine/pruning/screen.py)."""
    ridge: float = 1.0
    balance: float = 9.8
    unread: float = 1000.0
    adapt: bool = True
    neighbours: int = 3
    neighbour_weight: float = 0.0
    explore_after: int = 100
    prune: bool | PruneOptions = False
    block_rows: int | None = None

    def __post_init__(self) -> None:
        _check_screen(self)
        _check_pruning(self)


@dataclass(frozen=True)
class WNASOptions(Options):
    """WNAS (engine/methods/wnas.py): no parameters; pruning."""
    prune: bool | PruneOptions = False
    block_rows: int | None = None

    def __post_init__(self) -> None:
        _check_pruning(self)


AGR_MAX_ANCHORS = 500       # the paper's k
AGR_POINTS_PER_ANCHOR = 10  # on smaller stores: one anchor per 10 points


def default_anchors(n: int, neighbors: int) -> int:
    """AGR's anchors when none are given: 500, or one per 10 points when that is fewer
    (at least ``neighbors``): k-means needs as many distinct points as anchors."""
    return min(AGR_MAX_ANCHORS, max(n // AGR_POINTS_PER_ANCHOR, neighbors))


@dataclass(frozen=True)
class AGROptions(Options):
    """AGR (engine/methods/agr.py): the parameters of :class:`AGRParams` (anchors None: chosen from
    the store's size, :func:`default_anchors`) and where its k-means anchors are cached."""
    anchors: int | None = None
    neighbors: int = 3
    gamma: float = 0.01
    lae_iterations: int = 10
    kmeans_iterations: int = 20
    kmeans_seed: int = 0
    cache_dir: Any = None

    def __post_init__(self) -> None:
        _check_agr(self)

    def for_shape(self, n: int, r: int) -> AGROptions:
        anchors = default_anchors(n, self.neighbors) if self.anchors is None else self.anchors
        if anchors > n:
            raise ParameterError(f"AGR needs 1 <= anchors <= n = {n:,} (the points of the store), got "
                                 f"anchors={anchors}; give fewer")
        return replace(self, anchors=anchors)


@dataclass(frozen=True)
class RandomOptions(Options, RandomParams):
    """Random search (engine/methods/random.py): its seed."""


@dataclass(frozen=True)
class RFOptions(Options, RFParams):
    """The random-forest baseline (engine/methods/rf.py): :class:`RFParams` and n_jobs, the threads
    scikit-learn fits with."""
    n_jobs: int = 1

    def __post_init__(self) -> None:
        super().__post_init__()
        self._set("n_jobs", _check_int("rf: n_jobs", self.n_jobs, 1))


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


@dataclass(frozen=True)
class BLROptions(Options, BLRParams):
    """BLR (engine/methods/blr.py): its parameters, :class:`BLRParams`, and pruning (greedy
    and UCB queries, engine/pruning/blr.py)."""
    prune: bool | PruneOptions = False
    block_rows: int | None = None

    def __post_init__(self) -> None:
        BLRParams.__post_init__(self)
        _check_pruning(self)
