"""An experiment resolved once into a frozen plan, which `bigsearch run`, ``run_methods``,
``run_experiment`` and ``simulate`` then execute (runner.py, simulate.py).

Resolving takes two steps, and every check lives in one of them:

1. :func:`plan_runs`, without a store: the counts (runs, budget, batch size), how runs
   start, each method's options record (the registry's ``plan_methods``, which sessions
   use too), what joins them (fantasy needs batches and a method that takes it; raw
   scores need a method that regresses them) and where the labels of X given as an
   array come from. An :class:`Experiment` is planned when it is made, so a bad one
   fails there, before any store is opened (as scikit-learn checks parameters without
   data).
2. :meth:`ExperimentPlan.on_store`, once the store is open: its labels (the oracle), the
   cold start, every run's initial labels, the budget against the points left, what
   depends on the store's size (AGR's anchors) and the answers of graded scores.
   Nothing is written before both steps pass.

A run-level option is a field of :class:`Experiment` (what users give), a keyword of
:func:`plan_runs` with its check there, and a field of :class:`ExperimentPlan` (what
execution reads); a method's option is a field of its options record
(engine/core/params.py) and needs nothing here.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field, fields, replace
from functools import cached_property
from os import PathLike
from pathlib import Path
from typing import Any

import numpy as np

from ..engine.core.registry import MethodPlan, plan_methods
from ..engine.guidance.seeding import StartFrom, resolve_start
from ..engine.guidance.stopping import check_target
from ..errors import LabelError, ParameterError
from ..storage import FeatureStore, open_store, require_local
from ..storage.fingerprint import store_fingerprint
from .graded import is_raw, load_answers


@dataclass(frozen=True)
class Experiment:
    """What to run, in the user's words (results.json describes it). ``options`` are the
    methods' parameters (pi, eta, w0, alpha for LAS; anchors, neighbors, gamma for AGR);
    None means the method's default. It is planned when made (:attr:`plan`), so a bad
    experiment fails here, before any store is opened."""

    store: str
    methods: tuple
    budget: int
    runs: int = 1
    seed: int = 0
    init_index: tuple | None = None
    init_positives: int = 1
    init_negatives: int = 0
    batch_size: int = 1
    options: dict = field(default_factory=dict)
    graded: tuple | None = None  # (scores file, BEST, ZERO), or (file, "raw", sign): experiments/graded.py
    start_from: str | None = None  # a cold start (engine/guidance/seeding.py) instead of the initial labels
    dataset: str | None = None  # the array of the store holding X (None: X)
    stop_at_recall: float | None = None  # stop a run once the recall reached is this, with 95% confidence

    def __post_init__(self) -> None:
        _ = self.plan  # every check, now: an experiment that cannot run is never made

    @cached_property
    def plan(self) -> ExperimentPlan:
        """The experiment resolved (:func:`plan_runs`), run on the local backend and written
        nowhere until ``run_experiment`` says where (:meth:`ExperimentPlan.run_on`)."""
        start = Start(
            index=self.init_index,
            positives=self.init_positives,
            negatives=self.init_negatives,
            start_from=self.start_from,
        )
        return plan_runs(
            self.store,
            self.methods,
            self.budget,
            options=self.options,
            runs=self.runs,
            seed=self.seed,
            start=start,
            batch_size=self.batch_size,
            graded=self.graded,
            dataset=self.dataset,
            stop_at_recall=self.stop_at_recall,
            experiment=self,
        )

    @classmethod
    def of(cls, store: Any, methods: Any, budget: int, **settings: Any) -> Experiment:
        """The experiment of keyword settings, as ``run_methods`` and `bigsearch run` take
        them: this class's fields by name, and the rest the methods' options."""
        own = {f.name for f in fields(cls)} - {"store", "methods", "budget", "options"}
        mine = {name: settings.pop(name) for name in own & settings.keys()}
        if mine.get("init_index") is not None:
            mine["init_index"] = tuple(mine["init_index"])
        return cls(str(store), tuple(methods), budget, **mine, options=settings)

    def identity(self, store: FeatureStore, y: np.ndarray) -> dict[str, Any]:
        """Everything a run's record depends on (resume.py compares it): the store's X
        (fingerprint) and its labels y, which answer the queries; each method's options
        apart (a method's records depend on its own only)."""
        init = {
            "index": list(self.init_index) if self.init_index is not None else None,
            "positives": self.init_positives,
            "negatives": self.init_negatives,
        }
        return {
            "format": 3,
            "store": store_fingerprint(store),
            "labels_sha256": hashlib.sha256(np.ascontiguousarray(y, np.int8).tobytes()).hexdigest(),
            "budget": self.budget,
            "seed": self.seed,
            "init": init,
            "batch_size": self.batch_size,
            **({"graded": [str(self.graded[0]), *self.graded[1:]]} if self.graded else {}),
            **({"dataset": self.dataset} if self.dataset else {}),
            **({"start_from": self.start_from} if self.start_from else {}),
            **({"stop_at_recall": self.stop_at_recall} if self.stop_at_recall is not None else {}),
            "options": {m.name: self.given_options(m) for m in self.plan.methods},
        }

    def given_options(self, method: MethodPlan) -> dict[str, Any]:
        """The options given (not None) that ``method`` takes."""
        taken = method.spec.settings()
        return {k: v for k, v in sorted(self.options.items()) if v is not None and k in taken}

    def describe(self) -> dict[str, Any]:
        """The experiment as results.json records it, with every run's seed."""
        return {
            **asdict(self),
            "methods": list(self.methods),
            "seeds": [self.plan.run_seed(r) for r in range(self.runs)],
        }


@dataclass(frozen=True)
class Start:
    """How each run starts: the ``labels`` given, (index, label) pairs (simulate's
    ``init``); else a cold start ``start_from`` (engine/guidance/seeding.py): its known
    positives, or none when it chooses the first queries; else the points ``index``,
    answered by the stored labels; else ``positives`` random positives and ``negatives``
    random negatives, drawn with the run's seed."""

    labels: tuple | None = None
    index: tuple | None = None
    positives: int = 1
    negatives: int = 0
    start_from: Any = None

    def __post_init__(self) -> None:
        if self.labels is not None:
            object.__setattr__(self, "labels", tuple(tuple(pair) for pair in self.labels))
        if self.index is not None:
            object.__setattr__(self, "index", tuple(self.index))

    def initial(self, y: np.ndarray, seed: int, start: StartFrom | None) -> list:
        """A run's initial labels [(index, label)]; ``start``: the cold start, resolved."""
        if self.labels is not None:
            return list(self.labels)
        if start is not None:
            return [] if start.positives is None else initial_labels(y, seed, start.positives.tolist())
        return initial_labels(y, seed, self.index, self.positives, self.negatives)


@dataclass(frozen=True)
class Targets:
    """What the oracle tells the methods ``told`` instead of the stored 0/1 labels (hits
    still count the stored positives): ``graded`` scores from a file, (FILE, BEST, ZERO)
    or (FILE, "raw", sign) (experiments/graded.py), or the ``answers`` given, one per
    point (simulate's; an array, left out of comparisons)."""

    told: frozenset
    graded: tuple | None = None
    answers: Any = field(default=None, compare=False)

    def load(self, n: int, methods: tuple[MethodPlan, ...]) -> np.ndarray:
        """The answers for a store of ``n`` points, checked."""
        if self.graded is not None:
            scores, best, zero = self.graded
            return load_answers(scores, best, zero, n)
        answers = np.asarray(self.answers, np.float64)
        real = any(m.spec.cls.REAL_LABELS for m in methods if m.name in self.told)  # a regression: any target
        if answers.shape != (n,) or not np.all(np.isfinite(answers) if real else (answers >= 0) & (answers <= 1)):
            what = "finite numbers" if real else "graded labels in [0, 1]"
            raise ParameterError(f"answers must be {n} {what}, one per point")
        return answers


@dataclass(frozen=True)
class Output:
    """Where an experiment's files go: the local directory ``out``; ``overwrite``: replace
    another experiment there; ``plot``: draw the recall figure (matplotlib)."""

    out: Path
    overwrite: bool = False
    plot: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "out", require_local(self.out, "out"))


@dataclass(frozen=True)
class ExperimentPlan:
    """An experiment resolved by :func:`plan_runs`: all that runner.py and simulate.py read.

    ``store``: a path or URL, an open store, or X as an array (whose labels are ``y``);
    ``dataset``: the array of the store holding X. ``methods``: each method's plan (its
    options record). Run r draws its start (and a method with a seed its draws) with
    ``seed`` + r; ``budget`` queries, in batches of ``batch_size`` for methods that rank.
    ``targets``: the answers besides the stored labels, or None. ``stop_at_recall``: a run
    stops early once the recall reached is that, with 95% confidence (engine/guidance/
    stopping.py), or None. ``backend``, ``n_threads``:
    where the searches run. ``output``: where the files go (None for ``simulate``).
    ``experiment``: the :class:`Experiment` it was planned from, if any (results.json
    describes it)."""

    store: Any
    methods: tuple[MethodPlan, ...]
    budget: int
    runs: int = 1
    seed: int = 0
    start: Start = Start()
    batch_size: int = 1
    targets: Targets | None = None
    dataset: str | None = None
    stop_at_recall: float | None = None
    y: Any = field(default=None, compare=False)
    backend: Any = "local"
    n_threads: int | None = None
    output: Output | None = None
    experiment: Experiment | None = field(default=None, compare=False, repr=False)

    def run_seed(self, run: int) -> int:
        return self.seed + run

    def batch_for(self, method: MethodPlan) -> int:
        """The batch size of ``method``: one for a method with no scores to rank by (random
        search draws one point at a time)."""
        return self.batch_size if method.spec.ranks else 1

    def run_on(
        self, backend: Any = "local", n_threads: int | None = None, output: Output | None = None
    ) -> ExperimentPlan:
        """This plan run on ``backend`` with ``n_threads``, writing to ``output``: where it
        runs and writes changes nothing it computes, so an Experiment is planned without them."""
        return replace(self, backend=backend, n_threads=n_threads, output=output)

    def open_store(self) -> FeatureStore:
        """The store to search (X given as an array: with its labels ``y``)."""
        options = {"y": self.y} if self.y is not None else {"dataset": self.dataset} if self.dataset else None
        return open_store(self.store, options)

    def on_store(self, store: FeatureStore) -> PlanOnStore:
        """The checks that need the open ``store``, in one step, before anything is written:
        its labels, the cold start, every run's initial labels, the budget against the
        points left unlabeled, the defaults from its size, the answers."""
        y = self._oracle(store)
        start = resolve_start(store, self.start.start_from)
        if start is not None and start.told is not None:
            raise ParameterError(
                "start_from labels is for sessions: in a run the stored labels are the answers "
                "(start a run from init_index or ids:...)"
            )
        initial = tuple(self.start.initial(y, self.run_seed(run), start) for run in range(self.runs))
        check_budget(self.budget, store.n - len(initial[0]))  # every run starts from as many
        methods = tuple(m.for_shape(store.n, store.r) for m in self.methods)
        answers = None if self.targets is None else self.targets.load(store.n, methods)
        return PlanOnStore(self, store, y, methods, initial, start, answers)

    def _oracle(self, store: FeatureStore) -> np.ndarray:
        """The stored labels, which answer the queries."""
        y = store.labels()
        if y is None:
            given = "" if isinstance(self.store, (str, PathLike, FeatureStore)) else "pass them as y=, or "
            raise ParameterError(
                f"{store.path} has no labels (y), so no oracle can be simulated; {given}"
                "use an interactive session instead"
            )
        return y


@dataclass(frozen=True)
class PlanOnStore:
    """A plan checked against its open store (:meth:`ExperimentPlan.on_store`): what each
    run reads. ``y``: the stored labels (the oracle); ``methods``: the plan's, with the
    defaults from the store's size; ``initial``: each run's initial labels; ``start``: the
    cold start, resolved; ``answers``: the targets' answers, one per point, or None."""

    plan: ExperimentPlan
    store: FeatureStore
    y: np.ndarray = field(compare=False)
    methods: tuple[MethodPlan, ...]
    initial: tuple
    start: StartFrom | None
    answers: np.ndarray | None = field(compare=False)

    def answers_for(self, method: MethodPlan) -> np.ndarray | None:
        """The answers ``method`` is told: the targets' if it takes them, else None (the
        stored labels)."""
        targets = self.plan.targets
        return self.answers if targets is not None and method.name in targets.told else None


def plan_runs(
    store: Any,
    methods: Any,
    budget: int,
    *,
    options: dict | None = None,
    runs: int = 1,
    seed: int = 0,
    start: Start = Start(),
    batch_size: int = 1,
    graded: tuple | None = None,
    answers: Any = None,
    dataset: str | None = None,
    stop_at_recall: float | None = None,
    y: Any = None,
    backend: Any = "local",
    n_threads: int | None = None,
    experiment: Experiment | None = None,
) -> ExperimentPlan:
    """Every check of an experiment that needs no store, each once, and the plan it makes
    (see :class:`ExperimentPlan`). ``options``: one set of options for every method, each
    taking those it has (the registry's ``plan_methods``); ``answers``: given answers,
    one per point, that the oracle tells every method instead of the stored labels."""
    _check_counts(runs, budget, batch_size)
    _check_start(start, runs)
    planned = plan_methods(methods, options, seed=seed)
    _check_fantasy((options or {}).get("fantasy"), batch_size, planned)
    _check_labels_given(store, y)
    targets = _targets(graded, answers, planned)
    stop_at_recall = check_target(stop_at_recall)
    return ExperimentPlan(
        store,
        planned,
        budget,
        runs=runs,
        seed=seed,
        start=start,
        batch_size=int(batch_size),
        targets=targets,
        dataset=dataset,
        stop_at_recall=stop_at_recall,
        y=y,
        backend=backend,
        n_threads=n_threads,
        experiment=experiment,
    )


def _check_counts(runs: int, budget: int, batch_size: int) -> None:
    if runs < 1:
        raise ParameterError(f"runs must be >= 1, got {runs}")
    if budget < 0:
        raise ParameterError(f"budget must be >= 0, got {budget}")
    if batch_size < 1:
        raise ParameterError(f"batch_size must be >= 1, got {batch_size}")


def _check_start(start: Start, runs: int) -> None:
    """A given start is the same for every run: several runs would repeat each other."""
    if start.start_from is not None and start.index is not None:
        raise ParameterError("give init_index or start_from, not both")
    if start.start_from is not None and runs > 1:
        raise ParameterError(
            "start_from gives every run the same start, so several runs would repeat each other; give runs=1"
        )
    if start.index is not None and runs > 1:
        raise ParameterError(
            "init_index gives every run the same start, so several runs would repeat "
            "each other; use init_positives / init_negatives for random starts"
        )


def _check_fantasy(fantasy: Any, batch_size: int, methods: tuple[MethodPlan, ...]) -> None:
    """fantasy chooses the points of a batch: without batches, or without a method that
    takes it, it would be ignored (its value is the methods' own check)."""
    if fantasy is None:
        return
    if batch_size == 1:
        raise ParameterError("fantasy chooses the points of each batch: it needs batch_size > 1")
    if not any("fantasy" in m.spec.settings() for m in methods):
        raise ParameterError(f"fantasy applies to none of the methods run ({', '.join(m.name for m in methods)})")


def _check_labels_given(store: Any, y: Any) -> None:
    """``y`` are the labels of X given as an array; a store has its own."""
    if y is not None and isinstance(store, (str, PathLike, FeatureStore)):
        raise ParameterError(
            f"y= gives the labels of X passed as an array; the store {getattr(store, 'path', store)} "
            "has its own (its y array)"
        )


def _targets(graded: tuple | None, answers: Any, methods: tuple[MethodPlan, ...]) -> Targets | None:
    """The answers besides the stored labels, and the methods told them: the given answers
    go to every method; graded labels to those that take them; raw scores are targets for
    the methods that regress them (another would silently learn from the stored 0/1
    labels alone)."""
    if graded is not None and answers is not None:
        raise ParameterError("give graded or answers, not both")
    if answers is not None:
        return Targets(frozenset(m.name for m in methods), answers=answers)
    if graded is None:
        return None
    raw = is_raw(graded)
    told = frozenset(m.name for m in methods if (m.spec.cls.REAL_LABELS if raw else m.spec.cls.GRADED))
    if raw and not told:
        raise ParameterError(
            f"graded scores without BEST,ZERO are regression targets, which none of "
            f"{', '.join(m.name for m in methods)} takes (blr does); to grade them, give "
            "graded BEST,ZERO"
        )
    return Targets(told, graded=tuple(graded))


def initial_labels(y, seed, init_index=None, init_positives=1, init_negatives=0):
    """The starting labels [(index, label)]: given indices, or random positives and
    negatives drawn from y with ``seed`` (the same for every method of a run)."""
    if init_index is not None:
        out = []
        for i in init_index:
            if not 0 <= i < len(y):
                raise LabelError(f"init_index {i} is out of range: the store has {len(y)} points")
            if y[i] < 0:
                raise LabelError(f"init_index {i}: the store has no label for point {i}")
            out.append((int(i), int(y[i])))
        return out
    rng = np.random.default_rng(seed)
    out = []
    for label, k in ((1, init_positives), (0, init_negatives)):
        pool = np.flatnonzero(y == label)
        if k > len(pool):
            raise ParameterError(
                f"asked for {k} initial {'positives' if label else 'negatives'} but the store has {len(pool)}"
            )
        out += [(int(i), label) for i in rng.choice(pool, size=k, replace=False)]
    return out


def check_budget(budget, left):
    """Refuse a budget larger than the ``left`` points unlabeled after the initial labels:
    it would label everything, slowly, to no purpose."""
    if budget > left:
        raise ParameterError(
            f"budget {budget:,} is more than the {left:,} points left unlabeled after the "
            f"initial labels; give a budget of at most {left:,}"
        )
