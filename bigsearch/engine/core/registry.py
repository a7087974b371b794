"""The registry of search methods: the one place that lists them.

Each entry names a method's class, its parameters record and what it can do; the
simulator, sessions, experiments and the CLI read this and nothing else (adding a
method is one module, one line here, its kernel and its tests: docs/architecture.md).
Classes are named by import path and loaded on first use, so listing the methods
(``bigsearch --help``) imports no numerical code.

:func:`plan_methods` is the one place where the options a caller gives become each
method's checked options record (a :class:`MethodPlan`): experiments, ``simulate``,
sessions and the CLI all plan their methods with it, before any store is opened.
"""

from __future__ import annotations

import importlib
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from ...errors import ParameterError
from .params import (
    AGROptions,
    ASGOptions,
    BLROptions,
    LASOptions,
    Options,
    RandomOptions,
    RFOptions,
    ScreenOptions,
    WNASOptions,
)

if TYPE_CHECKING:
    from .base import ActiveSearch, ChunkedSearch


RUN_OPTIONS = ("backend", "n_threads")     # how a search runs, not what it computes: chunked searches only


@dataclass(frozen=True)
class MethodSpec:
    """One search method.

    name: what users type (``--method NAME``); target: "module:Class" of its
    :class:`~bigsearch.engine.core.base.ActiveSearch` subclass (a search's ``params`` is its
    frozen parameters record, defined where the method wants: engine/core/params.py for the
    built-in ones); description: one line for help texts; ranks: it has scores to rank
    points by (``top(k)``, batches, the pairs experiment); sessions: it can save and restore
    its state (``export_state`` / ``from_state``), which sessions need; warm_start: its
    initialization costs passes over X before any label, so experiments that start many
    searches restore one initialized state instead; options: its options record (an
    :class:`~bigsearch.engine.core.params.Options` dataclass: every keyword its constructor takes
    besides the store, the backend and threads, each checked without a store).
    """
    name: str
    target: str
    description: str
    ranks: bool = True
    sessions: bool = False
    warm_start: bool = False
    options: type[Options] = Options

    @property
    def cls(self) -> type[ActiveSearch]:
        module, _, attr = self.target.partition(":")
        return getattr(importlib.import_module(module), attr)

    def settings(self) -> tuple[str, ...]:
        """The names of its options: its parameters and engine options (LAS's drift check,
        pruning, ...); not the backend or threads."""
        return self.options.names()

    def validate(self, given: Mapping[str, Any] | None = None, *, strict: bool = False,
                 offered: Collection[str] | None = None) -> Options:
        """Its options record from ``given`` (name -> value; None: the default), checked
        without a store or an engine. Names it does not take are left out, so one set of
        options can serve several methods; ``strict`` refuses them instead (see
        :meth:`check_settings`)."""
        given = {k: v for k, v in (given or {}).items() if v is not None}
        if strict:
            self.check_settings(given, offered)
        return self.options(**{k: v for k, v in given.items() if k in self.settings()})

    def check_settings(self, given: Mapping[str, Any], offered: Collection[str] | None = None) -> None:
        """Refuse settings (not None) that this method does not have. ``offered``: the
        settings the caller lets users give (a command's flags), the only ones the message lists."""
        foreign = sorted(k for k, v in given.items() if v is not None and k not in self.settings())
        if foreign:
            takes = [k for k in self.settings() if offered is None or k in offered]
            raise ParameterError(f"{', '.join(foreign)} does not apply to {self.name}, which takes "
                                 f"{', '.join(takes) or 'no parameters'}")

    def create(self, store: Any, options: Options | None = None, *, backend: Any = "local",
               n_threads: int | None = None) -> ActiveSearch:
        """A new search on ``store`` with its options record (default: every default),
        running on ``backend`` with ``n_threads`` when it streams X (a ChunkedSearch)."""
        from .base import ChunkedSearch  # the engine: imported when a search is made
        options = self.validate() if options is None else options
        if not isinstance(options, self.options):
            raise TypeError(f"{self.name} takes a {self.options.__name__}, not a {type(options).__name__}")
        runs = {"backend": backend, "n_threads": n_threads} if issubclass(self.cls, ChunkedSearch) else {}
        return self.cls(store, **runs, **options.keywords())


METHODS: dict[str, MethodSpec] = {spec.name: spec for spec in (
    MethodSpec("las", "bigsearch.engine.methods.las:LAS",
               "Linearized Active Search: label propagation with the impact factor", sessions=True, warm_start=True,
               options=LASOptions),
    MethodSpec("wnas", "bigsearch.engine.methods.wnas:WNAS", "weighted-neighbour Active Search (no parameters)",
               sessions=True, options=WNASOptions),
    MethodSpec("agr", "bigsearch.engine.methods.agr:AGR", "Anchor Graph Regularization (k-means anchors)",
               options=AGROptions),
    MethodSpec("asg", "bigsearch.engine.methods.asg:ASG", "dense Active Search on Graphs (n x n: small stores)",
               options=ASGOptions),
    MethodSpec("random", "bigsearch.engine.methods.random:RandomSearch", "uniform random queries (the baseline)",
               ranks=False, options=RandomOptions),
    MethodSpec("blr", "bigsearch.engine.methods.blr:BLR",
               "Bayesian linear regression on x . w (greedy, UCB or Thompson; any labels, scores included)",
               sessions=True, options=BLROptions),
    MethodSpec("screen", "bigsearch.engine.methods.screen:Screen",
               "documents: class-weighted ridges, on the answers and with the unread records as weak negatives, "
               "weighed by how each ranks the answers", sessions=True, options=ScreenOptions),
    MethodSpec("rf", "bigsearch.engine.methods.rf:RandomForestSearch",
               "random forest retrained per batch, greedy (MolPAL's model; a baseline, needs scikit-learn)",
               options=RFOptions),
)}


def method_spec(name: str, *, need: str | None = None) -> MethodSpec:
    """The registry entry of method ``name``; ``need`` ("ranks" or "sessions") also
    requires that capability."""
    spec = METHODS.get(name)
    candidates = [m for m, s in METHODS.items() if need is None or getattr(s, need)]
    if spec is None or name not in candidates:
        what = {None: "method", "ranks": "method with scores", "sessions": "method for sessions"}[need]
        raise ParameterError(f"unknown {what} {name!r}; choose from {', '.join(candidates)}")
    return spec


@dataclass(frozen=True)
class MethodPlan:
    """A method as a run or a session will build it: its registry entry and its options
    record, checked without a store (:func:`plan_methods`)."""

    spec: MethodSpec
    options: Options

    @property
    def name(self) -> str:
        return self.spec.name

    def for_shape(self, n: int, r: int) -> MethodPlan:
        """The plan with the defaults that depend on the store's size filled in and checked
        (``Options.for_shape``: AGR's anchors)."""
        return replace(self, options=self.options.for_shape(n, r))

    def for_seed(self, seed: int) -> MethodPlan:
        """The plan of a run drawn with ``seed``: a method with a seed option (random
        search, BLR's Thompson draws, rf's forest) takes the run's, so runs differ."""
        if "seed" not in self.spec.settings():
            return self
        return replace(self, options=replace(self.options, seed=seed))  # type: ignore[call-arg]

    def create(self, store: Any, *, backend: Any = "local", n_threads: int | None = None) -> ActiveSearch:
        """The search this plan describes, on ``store``."""
        return self.spec.create(store, self.options, backend=backend, n_threads=n_threads)


def plan_methods(names: Iterable[str], options: Mapping[str, Any] | None = None, *, seed: int | None = None,
                 need: str | None = None, strict: bool = False,
                 offered: Collection[str] | None = None) -> tuple[MethodPlan, ...]:
    """Each of the methods ``names`` with its options record from one set of ``options``
    (name -> value; None: the default), checked without a store or an engine.

    Each method takes the names it has, so one set serves several methods (``bigsearch
    run --method las,agr``); ``strict`` refuses the others instead, listing the ones
    ``offered`` (a session's method). ``seed``: a run's seed, which a method with a seed
    option takes over any given. ``need``: a capability every method must have
    ("ranks", "sessions")."""
    given = {**(options or {}), **({} if seed is None else {"seed": seed})}
    plans = []
    for name in names:
        spec = method_spec(name, need=need)
        plans.append(MethodPlan(spec, spec.validate(given, strict=strict, offered=offered)))
    return tuple(plans)


def method_names(need: str | None = None) -> list[str]:
    """The registered methods' names (those with capability ``need``, if given)."""
    return [m for m, s in METHODS.items() if need is None or getattr(s, need)]


def saving_class(name: str) -> type[ChunkedSearch]:
    """The class of method ``name``, which must save and restore its state (sessions,
    warm starts)."""
    from .base import ChunkedSearch  # the engine: imported when a search is made
    cls = method_spec(name, need="sessions").cls
    if not issubclass(cls, ChunkedSearch):
        raise TypeError(f"{cls.__name__} is registered with sessions=True but is not a ChunkedSearch")
    return cls
