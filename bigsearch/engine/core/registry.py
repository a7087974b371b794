"""The registry of search methods: the one place that lists them.

Each entry names a method's class, its parameters record and what it can do; the
simulator, sessions, experiments and the CLI read this and nothing else (adding a
method is one module, one line here, its kernel and its tests: docs/architecture.md).
Classes are named by import path and loaded on first use, so listing the methods
(``bigsearch --help``) imports no numerical code.
"""

from __future__ import annotations

import importlib
import inspect
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ...errors import ParameterError

if TYPE_CHECKING:
    from .base import ActiveSearch, ChunkedSearch


RUN_OPTIONS = ("backend", "n_threads")     # how a search runs, not what it computes


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
    searches restore one initialized state instead.
    """
    name: str
    target: str
    description: str
    ranks: bool = True
    sessions: bool = False
    warm_start: bool = False

    @property
    def cls(self) -> type[ActiveSearch]:
        module, _, attr = self.target.partition(":")
        return getattr(importlib.import_module(module), attr)

    def options(self) -> tuple[str, ...]:
        """The keywords its constructor takes besides the store (parameters, backend, ...)."""
        signature = inspect.signature(self.cls.__init__)
        return tuple(name for name, p in signature.parameters.items()
                     if p.kind is p.KEYWORD_ONLY and name != "store_options")

    def settings(self) -> tuple[str, ...]:
        """The options that define what a search computes: its parameters and engine
        options (LAS's drift check, ...); not the backend or threads."""
        return tuple(k for k in self.options() if k not in RUN_OPTIONS)

    def create(self, store: Any, **options: Any) -> ActiveSearch:
        """A new search on ``store`` with the options it takes; others, and None (the
        default), are left out, so one set of options can serve several methods."""
        taken = self.options()
        return self.cls(store, **{k: v for k, v in options.items() if k in taken and v is not None})

    def check_settings(self, given: dict[str, Any]) -> None:
        """Refuse settings (not None) that this method does not have."""
        foreign = sorted(k for k, v in given.items() if v is not None and k not in self.settings())
        if foreign:
            takes = ", ".join(self.settings()) if self.settings() else "no parameters"
            raise ParameterError(f"{', '.join(foreign)} does not apply to {self.name}, which takes {takes}")


METHODS: dict[str, MethodSpec] = {spec.name: spec for spec in (
    MethodSpec("las", "bigsearch.engine.methods.las:LAS",
               "Linearized Active Search: label propagation with the impact factor", sessions=True, warm_start=True),
    MethodSpec("wnas", "bigsearch.engine.methods.wnas:WNAS", "weighted-neighbour Active Search (no parameters)",
               sessions=True),
    MethodSpec("agr", "bigsearch.engine.methods.agr:AGR", "Anchor Graph Regularization (k-means anchors)"),
    MethodSpec("asg", "bigsearch.engine.methods.asg:ASG", "dense Active Search on Graphs (n x n: small stores)"),
    MethodSpec("random", "bigsearch.engine.methods.random:RandomSearch", "uniform random queries (the baseline)",
               ranks=False),
    MethodSpec("blr", "bigsearch.engine.methods.blr:BLR",
               "Bayesian linear regression on x . w (greedy, UCB or Thompson; any labels, scores included)",
               sessions=True),
    MethodSpec("rf", "bigsearch.engine.methods.rf:RandomForestSearch",
               "random forest retrained per batch, greedy (MolPAL's model; a baseline, needs scikit-learn)"),
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
