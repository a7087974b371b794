"""The ask/tell interface shared by every search method, and the base of chunked searches.

``tell(index, label)`` records labels (the initial ones and every answer); the work
they cause is done lazily, when ``ask()`` or a score is next needed, so several labels
told together cost one pass over X. Labels are validated before anything changes.

:class:`ChunkedSearch` is what a method that streams X through a backend builds on: it
owns the backend, allocates the per-point state the method declares (``POINT_STATE``),
runs the selection over the chunks' partials, saves and restores the state it declares
(``SAVED_GLOBALS``, ``SAVED_POINT_ARRAYS``) and closes the backend. A method supplies
its parameters record, its chunk steps, ``_initialize`` / ``_update`` and the recipe
that rebuilds a lost chunk (docs/architecture.md).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from os import PathLike
from typing import Any, ClassVar, TypeVar

import numpy as np
from numpy.typing import DTypeLike

from ...backends import Backend, StepCall, make_backend
from ...errors import LabelError, ParameterError, StoreError
from ...storage import FeatureStore, open_store
from .params import Params, PruneOptions
from .select import PassSummary, Ranked, select
from .steps import best_in_chunk

StoreLike = str | PathLike[str] | FeatureStore
Labels = int | Sequence[int] | np.ndarray
SearchT = TypeVar("SearchT", bound="ChunkedSearch")


class ActiveSearch:
    """Base class: label bookkeeping and the ask/tell protocol."""

    method: ClassVar[str] = "?"
    GRADED: ClassVar[bool] = False     # takes graded labels y in [0, 1] besides 0 and 1
    REAL_LABELS: ClassVar[bool] = False   # takes any finite number (a regression target, e.g. a score)
    PROBABILITY_SCORES: ClassVar[bool] = False   # f in [0, 1], read as P(positive) (engine/guidance/remaining.py)
    # init_progress(what, done, total), if set, hears of the steps of a long initialization
    # (AGR's k-means iterations), for a progress bar
    init_progress: Callable[[str, int, int], None] | None = None
    params: Params

    def __init__(self, store: StoreLike, store_options: dict[str, Any] | None = None) -> None:
        self.store = open_store(store, store_options)
        self.n = self.store.n
        self._label = np.full(self.n, -1, np.int8)
        self._grade: dict[int, float] = {}     # point -> its graded label, for labels other than 0 and 1
        self.history: list[tuple[int, int | float]] = []    # (index, label) in the order told
        self._pending: list[tuple[int, int | float]] = []   # told but not yet applied to the scores

    # -- the protocol ------------------------------------------------------------
    def tell(self, index: Labels, label: Labels) -> None:
        """Record the label (0 or 1) of a point, or of several: tell([i, j], [1, 0]).

        Methods with ``GRADED`` also take graded labels, any y in [0, 1] (e.g. how good
        a measured score is): label propagation takes y as the point's soft label.
        ``labels`` shows such a point as 1 when y >= 0.5, else 0."""
        indices, labels = self.validate_labels(index, label)
        for i, y in zip(indices, labels):
            self._label[i] = int(y >= 0.5)
            if y not in (0, 1):
                self._grade[i] = y
            self.history.append((i, y))
            self._pending.append((i, y))

    def ask(self) -> int:
        """The index of the next point to label."""
        self._sync()
        if len(self.history) >= self.n:
            raise LabelError("every point is labeled; there is nothing left to ask")
        return self._choose()

    def sync(self) -> None:
        """Apply every label told so far now (the first call initializes): one pass over
        X for all pending labels. ``ask``, ``top`` and the scores call it themselves."""
        self._sync()

    def top(self, k: int = 10) -> Ranked:
        """The k unlabeled points with the highest selection scores, best first (the
        first is what ``ask()`` returns): (indices, scores) as NumPy arrays."""
        if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 0:
            raise ParameterError(f"top(k) needs a whole number k >= 0, got {k!r}")
        self._sync()
        if k == 0:
            return np.empty(0, np.int64), np.empty(0, np.float64)
        return self._top(int(k))

    def next_batch(self, k: int) -> list[int]:
        """The next k points to label together: the top k (methods may choose better)."""
        self._sync()
        return [int(i) for i in self._top(int(k))[0]]

    def _choose(self) -> int:
        return int(self._top(1)[0][0])

    def _top(self, k: int) -> Ranked:
        raise ParameterError(f"{self.method} search has no scores to rank points by; use ask()")

    def run_details(self) -> dict[str, Any]:
        """What a simulation records about how the run went besides its queries (e.g.
        the bytes of X read per query); JSON-able."""
        return {}

    def f_costs_a_pass(self) -> bool:
        """Whether reading ``f`` now costs a pass over X (pruned queries leave the f of
        the blocks they did not read behind)."""
        return False

    def engine_options(self) -> dict[str, Any]:
        """Constructor options besides the parameters that change the numbers (not the
        backend or threads): what a saved search must be recreated with."""
        return {}

    # -- what subclasses provide -------------------------------------------------
    def _sync(self) -> None:
        """Bring the scores up to date with every label told so far."""
        raise NotImplementedError

    # -- shared helpers ----------------------------------------------------------
    @property
    def labels(self) -> np.ndarray:
        """Per point: 1, 0, or -1 when not labeled (a read-only view)."""
        view = self._label.view()
        view.flags.writeable = False
        return view

    @property
    def n_labeled(self) -> int:
        return len(self.history)

    def history_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """The labels told so far, in order: (indices int64, labels int8)."""
        return _as_arrays(self.history)

    def _take_pending(self) -> tuple[np.ndarray, np.ndarray]:
        """(indices, int8 labels) told since the last call; graded ones as 0 or 1
        (``label_values`` has their values)."""
        pending, self._pending = self._pending, []
        idx = _as_arrays(pending)[0]
        return idx, self._label[idx]

    def label_values(self, idx: np.ndarray) -> np.ndarray:
        """The labels told for points ``idx``, graded ones included (float64)."""
        return np.array([self._grade.get(int(i), self._label[i]) for i in idx], np.float64)

    @property
    def has_pending(self) -> bool:
        """Whether labels were told that the scores do not reflect yet (``sync`` applies them)."""
        return bool(self._pending)

    def validate_labels(self, index: Labels, label: Labels) -> tuple[list[int], list[int | float]]:
        """(indices, labels) as ``tell`` would record them, or a LabelError saying what is
        wrong (out of range, labeled already, not a label this method takes); records nothing."""
        scalar = np.ndim(index) == 0
        indices = [index] if scalar else list(index)  # type: ignore[arg-type]
        labels = [label] if np.ndim(label) == 0 else list(label)  # type: ignore[arg-type]
        if len(labels) != len(indices):
            raise LabelError(f"{len(indices)} indices but {len(labels)} labels")
        out_i, out_y, seen = [], [], set()
        for i, y in zip(indices, labels):
            if isinstance(i, (bool, np.bool_)) or not isinstance(i, numbers.Integral):
                raise LabelError(f"index {i!r} is not an integer")
            i = int(i)
            if not 0 <= i < self.n:
                raise LabelError(f"index {i} is out of range: the store has {self.n} points (0..{self.n - 1})")
            if self._label[i] >= 0 or i in seen:
                how = self._label[i] if self._label[i] >= 0 else "twice in this call"
                raise LabelError(f"point {i} is already labeled ({how})")
            seen.add(i)
            out_i.append(i)
            out_y.append(self._check_label(i, y))
        return out_i, out_y

    def _check_label(self, i: int, y: Any) -> int | float:
        """0 or 1 as an int; a graded label in [0, 1] as a float (when the method takes them)."""
        if isinstance(y, (bool, np.bool_)):
            y = int(y)
        if isinstance(y, numbers.Integral) and int(y) in (0, 1):
            return int(y)
        if isinstance(y, numbers.Real) and ((self.GRADED and 0.0 <= float(y) <= 1.0)
                                            or (self.REAL_LABELS and math.isfinite(float(y)))):
            return int(float(y)) if float(y) in (0.0, 1.0) else float(y)
        graded = " or a graded label in [0, 1]" if self.GRADED else ""
        graded = " or any finite number (a score)" if self.REAL_LABELS else graded
        raise LabelError(f"label {y!r} for point {i} is not 0 (negative), 1 (positive){graded}")

    def close(self) -> None:
        pass

    def __enter__(self) -> ActiveSearch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} on {self.store.path}: {self.n_labeled} labels>"


@dataclass(frozen=True)
class PointArray:
    """One array of a method's per-point state: its name (the attribute chunk steps see
    on a chunk's state), dtype and initial value."""
    name: str
    dtype: DTypeLike
    fill: Any


class ChunkedSearch(ActiveSearch):
    """A search whose per-point state lives in a backend and is updated by chunk steps.

    Subclasses declare ``POINT_STATE`` (or override ``point_state()`` when it depends on
    the parameters), and implement ``_initialize()`` (the passes before any query; it
    applies every label told so far), ``_update(idx, lab)`` (new labels: one pass) and
    ``rebuild_recipe()``. Saving needs ``SAVED_GLOBALS`` / ``SAVED_POINT_ARRAYS`` and
    ``_restore(meta)``.

    ``params`` is the method's parameters record, or a function of the opened store that
    returns it (for defaults that depend on the data); it is validated before the
    backend starts.
    """

    POINT_STATE: ClassVar[tuple[PointArray, ...]] = ()
    SAVED_GLOBALS: ClassVar[tuple[str, ...]] = ()        # attributes export_state keeps
    SAVED_POINT_ARRAYS: ClassVar[tuple[str, ...]] = ()   # per-point arrays export_state keeps

    def __init__(self, store: StoreLike, params: Params | Callable[[FeatureStore], Params], *,
                 backend: Any = "local", n_threads: int | None = None,
                 store_options: dict[str, Any] | None = None) -> None:
        super().__init__(store, store_options)
        self.params = params(self.store) if callable(params) else params
        self.backend: Backend = make_backend(self.store, backend, n_threads)
        try:
            self.backend.set_rebuild(self.rebuild_recipe)
            for a in self.point_state():
                self.backend.alloc(a.name, a.dtype, a.fill)
        except BaseException:
            self.backend.close()
            raise
        self._ready = False
        self._summary: PassSummary | None = None

    def point_state(self) -> tuple[PointArray, ...]:
        """The per-point arrays every chunk's state holds."""
        return self.POINT_STATE

    # -- what a method provides ----------------------------------------------------
    def _initialize(self) -> None:
        """The passes before the first query; must apply every label told so far."""
        self._ready = True

    def _update(self, idx: np.ndarray, lab: np.ndarray) -> None:
        """Apply new labels (possibly none) and leave ``self._summary`` current."""
        raise NotImplementedError

    def rebuild_recipe(self) -> StepCall:
        """The step and arguments that recompute a chunk's per-point state from the
        global state (a backend that loses a chunk runs it)."""
        raise NotImplementedError

    def _restore(self, meta: dict[str, Any]) -> None:
        """After ``from_state`` has set the saved arrays: what else the state needs."""
        raise NotImplementedError

    # -- the protocol ----------------------------------------------------------------
    def _sync(self) -> None:
        if not self._ready:
            self._initialize()
        if self._pending or self._summary is None:
            self._update(*self._take_pending())

    @property
    def f(self) -> np.ndarray:
        """The scores f, one per point (float64, read-only)."""
        return self._point_values("f")

    def _point_values(self, name: str) -> np.ndarray:
        self._sync_scores()
        return self.backend.gather(name)

    def _sync_scores(self) -> None:
        """``_sync``, then every per-point value current (for a method that can leave
        values behind between queries, as LAS's pruned queries do)."""
        self._sync()

    def _pass(self, step: Any, *args: Any, t_prev: float = 0.0) -> None:
        """One pass of ``step`` over the chunks; its partials become the summary."""
        self._summary = PassSummary.from_partials(self.backend.map(step, *args), t_prev)

    def _selection_weight(self) -> float:
        """t, the weight of the impact factor in this query's score (0: f alone)."""
        return 0.0

    def _top(self, k: int) -> Ranked:
        assert self._summary is not None
        return select(self._summary, self._selection_weight(), self._rescan, k)

    def _rescan(self, chunk_ids: list[int], t: float, k: int) -> list[Ranked]:
        return self.backend.map_state(best_in_chunk, chunk_ids, t, k)

    # -- saving and restoring ----------------------------------------------------------
    def export_state(self) -> dict[str, Any]:
        """Everything needed to continue exactly: {"meta": JSON-able dict, "arrays":
        {name: ndarray}} with the parameters, the labels in order and the declared state."""
        self._sync()
        idx, lab = self.history_arrays()
        arrays = self._saved_globals()
        arrays.update(history_index=idx, history_label=lab)
        arrays.update({name: np.array(self.backend.gather(name)) for name in self.SAVED_POINT_ARRAYS})
        meta = {"method": self.method, "params": self.params.as_dict(), "n": self.n, "r": self.store.r,
                **self._export_meta()}
        return {"meta": meta, "arrays": arrays}

    def _export_meta(self) -> dict[str, Any]:
        return {}

    def _saved_globals(self) -> dict[str, np.ndarray]:
        """The global arrays a state keeps: by default the attributes named in SAVED_GLOBALS."""
        return {name: np.array(getattr(self, name), copy=True) for name in self.SAVED_GLOBALS}

    def _load_globals(self, arrays: dict[str, np.ndarray]) -> None:
        for name in self.SAVED_GLOBALS:
            setattr(self, name, np.array(arrays[name], dtype=np.float64))

    @classmethod
    def _options_from_meta(cls, meta: dict[str, Any]) -> dict[str, Any]:
        """The constructor's keywords that a saved state's meta records."""
        return dict(meta["params"])

    @classmethod
    def from_state(cls: type[SearchT], store: StoreLike, state: dict[str, Any], *, backend: Any = "local",
                   n_threads: int | None = None, store_options: dict[str, Any] | None = None) -> SearchT:
        """A search continuing from ``export_state()`` output, with the same next query."""
        meta, arrays = state["meta"], state["arrays"]
        self = cls(store, backend=backend, n_threads=n_threads, store_options=store_options,
                   **cls._options_from_meta(meta))
        try:
            self._check_shape(meta)
            self.tell(arrays["history_index"].tolist(), arrays["history_label"].tolist())
            self._pending = []
            self._load_globals(arrays)
            for name in self.SAVED_POINT_ARRAYS:
                self.backend.assign(name, arrays[name])
            self._restore(meta)
        except BaseException:
            self.close()
            raise
        self._ready = True
        return self

    def _check_shape(self, meta: dict[str, Any]) -> None:
        if (meta["n"], meta["r"]) != (self.n, self.store.r):
            raise StoreError(f"the saved state is for a store of {meta['n']} x {meta['r']}, "
                             f"but {self.store.path} is {self.n} x {self.store.r}")

    def close(self) -> None:
        """Stop the backend and unmap the chunk maps the store held across passes."""
        self.backend.close()
        self.store.release_maps()


def _as_arrays(pairs: list[tuple[int, Any]]) -> tuple[np.ndarray, np.ndarray]:
    """(indices int64, labels): int8 labels, or float64 when some are graded."""
    graded = any(not isinstance(y, int) for _, y in pairs)
    return np.array([i for i, _ in pairs], np.int64), np.array([y for _, y in pairs], np.float64 if graded else np.int8)


class PrunableSearch(ChunkedSearch):
    """A chunked search whose queries may be pruned: read only the blocks of X that could
    hold the answer (engine/pruning/, whose contract.py says what the search gives its
    pruning and what the pruning offers). Keeps the bytes of X read to choose each query,
    for ``run_details``."""

    FULL_PASS: ClassVar[str] = "a full pass per query"   # what a query costs without pruning
    pruning: Any   # the method's pruning (engine/pruning/contract.py: Pruning), or None when off

    def _start_pruning(self, make: Callable[[Any, PruneOptions], Any], prune: Any,
                       block_rows: int | None = None) -> None:
        """``make(self, options)`` when the keywords ``prune``, ``block_rows`` ask for
        pruned queries (read as one :class:`PruneOptions`), else no pruning."""
        options = PruneOptions.of(prune, block_rows)
        self.pruning = make(self, options) if options is not None else None
        self.bytes_since_query = 0   # bytes of X read since the last query was chosen
        self.query_bytes: list[int] = []   # per query (ask or top): bytes of X read to choose it

    def count_read(self, nbytes: int) -> None:
        """Bytes of X read towards the next query (the pruning reports its reads here)."""
        self.bytes_since_query += int(nbytes)

    def rebuild_everywhere(self) -> None:
        """Every chunk's state recomputed by the rebuild recipe: one pass over X."""
        step, args = self.rebuild_recipe()
        self._pass(step, *args)

    def _prune_keywords(self) -> dict[str, Any]:
        """The constructor's keywords that give this search's pruning again (JSON)."""
        if self.pruning is None:
            return {}
        saved = self.pruning.options.saved()
        return {"prune": True, **saved} if len(saved) == 1 else {"prune": saved}

    def _prune_meta(self) -> dict[str, Any]:
        """What a saved state records of the pruning (``_prune_from_meta`` reads it)."""
        return {"prune": self.pruning.options.saved()} if self.pruning is not None else {}

    @staticmethod
    def _prune_from_meta(meta: dict[str, Any]) -> dict[str, Any]:
        """The constructor's keywords for the pruning a saved state recorded."""
        return {"prune": PruneOptions.from_saved(meta.get("prune")) or False}

    def run_details(self) -> dict[str, Any]:
        """Bytes of X read to choose each round's queries, and whether queries were pruned."""
        return {"bytes_read": self.query_bytes, "x_bytes": self.store.nbytes, "pruning": self.pruning_status}

    @property
    def pruning_status(self) -> str:
        """How queries are chosen: a full pass each, or pruned (and why not)."""
        return f"off: {self.FULL_PASS}" if self.pruning is None else str(self.pruning.status)

    def _pruned(self) -> Any:
        """The pruning when queries are pruned, else None."""
        return self.pruning if self.pruning is not None and self.pruning.active else None

    def _top(self, k: int) -> Ranked:
        pruning = self._pruned()
        out = Ranked(*pruning.top(k)) if pruning is not None else super()._top(k)
        self._end_round()
        return out

    def _end_round(self) -> None:
        """What choosing this round's queries read, recorded."""
        self.query_bytes.append(self.bytes_since_query)
        self.bytes_since_query = 0

    def f_costs_a_pass(self) -> bool:
        pruning = self._pruned()
        return pruning is not None and bool(pruning.stale)
