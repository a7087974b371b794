"""The labelling page's model: a writer Session, the item on show, and the next item
for both answers computed ahead.

Everything that changes the session goes through one lock, in the order requests
arrive, and is checked against the journal's state: an answer for a point that is
already labeled (another tab answered it) or an undo of a label that is no longer the
last is refused with a :class:`Conflict`, so two tabs never label a point twice or undo
each other's work. An answer is acknowledged only after ``Session.tell`` returned, that
is after its journal record is fsync'd.

No waiting: while the person reads item i, a background thread copies the engine state
(``export_state`` / ``from_state``) twice, tells the copies (i, 1) and (i, 0), and
picks the next item of each. The answer key then only appends to the journal and
adopts the prepared copy (``Session.tell(applied=...)``), which holds exactly the state
``Session.tell`` would have computed. A skip, an undo or an answer to another point
makes the prepared copies stale; they are dropped and the next ones computed.
"""

import io
import threading
from concurrent.futures import CancelledError, ThreadPoolExecutor

import numpy as np

from ..errors import BigsearchError, LabelError
from .explain import explain
from .fork import fork, forkable
from .records import read_display


class Conflict(BigsearchError):
    """The request is out of date: the session changed since the page last saw it."""


class Labeler:
    """Serve one session to the page. ``budget``: the number of labels planned (shown
    as progress; None for none). ``prefetch=False`` computes after each answer (for
    measuring what prefetching saves)."""

    def __init__(self, session, *, budget=None, prefetch=True, explain_top=5, copy_in_memory=True):
        self.session = session
        self.copy_in_memory = copy_in_memory   # False: copy through export/from_state, as on a cluster
        self.budget = budget
        self.prefetch = prefetch
        self.explain_top = explain_top
        self._lock = threading.Lock()
        self._skipped = []
        self._worker = ThreadPoolExecutor(1, thread_name_prefix="bigsearch-ahead")
        self._ahead = None
        self.adopted = 0          # answers served from a prepared copy (for tests and benchmarks)
        with self._lock:
            self._current = self._item(self.session.search, self.session.history, self._skipped)
            self._look_ahead()

    # -- what the page sees --------------------------------------------------------------
    def view(self):
        with self._lock:
            return self._view()

    def _view(self):
        history = self.session.history
        labels = [y for _, y in history]
        last = history[-1] if history else None
        return {"item": self._current, "skipped": len(self._skipped),
                "progress": {"labels": len(labels), "positives": int(sum(labels)),
                             "curve": hits_curve(labels), "budget": self.budget,
                             "n": self.session.search.n},
                "last": None if last is None else {"index": last[0], "label": last[1]},
                "session": {"directory": str(self.session.directory), "method": self.session.method}}

    # -- the person's answers ------------------------------------------------------------
    def answer(self, index, label):
        """Record the answer for ``index`` (durable when this returns); the new view."""
        with self._lock:
            index, label = _point(index), _label(label)
            self._check_unlabeled(index)
            prepared = self._take_prepared(index, label)
            if prepared is not None:
                engine, item = prepared
                self.session.tell(index, label, applied=engine)
                self.adopted += 1
            else:
                self.session.tell(index, label)
                item = None
            self._skipped = [i for i in self._skipped if i != index]
            self._current = item or self._item(self.session.search, self.session.history, self._skipped)
            self._look_ahead()
            return self._view()

    def skip(self, index):
        """Show the next best point instead of ``index`` (not recorded: skips last
        until the server stops, or until every other point is labeled or skipped)."""
        with self._lock:
            index = _point(index)
            if self._current is None or self._current["index"] != index:
                raise Conflict(f"point {index} is not the one on show any more; here is the current one")
            self._skipped.append(index)
            self._replan()
            return self._view()

    def undo(self, index):
        """Withdraw the last label, which must be that of ``index`` (so a tab never undoes
        a label it has not seen)."""
        with self._lock:
            index = _point(index)
            history = self.session.history
            if not history or history[-1][0] != index:
                last = f"the last label is point {history[-1][0]}'s" if history else "there are no labels"
                raise Conflict(f"cannot undo point {index}: {last} (changed in another tab?)")
            self.session.undo(1)
            self._replan()
            return self._view()

    def export_csv(self):
        with self._lock:
            out = io.StringIO()
            self.session.export_csv(out)
            return out.getvalue()

    def settle(self):
        """Wait until the next items for both answers are computed (as if the person
        read for long enough); for tests and benchmarks."""
        with self._lock:
            ahead = self._ahead
        for future in (ahead or {}).get("futures", {}).values():
            future.exception()

    def close(self):
        with self._lock:
            self._drop_ahead()
            self._worker.shutdown(wait=True)

    # -- choosing and describing items ---------------------------------------------------
    def _replan(self):
        self._drop_ahead()
        self._current = self._item(self.session.search, self.session.history, self._skipped)
        self._look_ahead()

    def _item(self, engine, history, skipped):
        """The best unlabeled point not skipped, with all the page shows about it."""
        chosen = choose(engine, skipped)
        if chosen is None:
            return None
        index, score, rank = chosen
        store = engine.store
        ids = store.ids([index])
        item = {"index": index, "id": None if ids is None else _plain(ids[0]), "score": score, "rank": rank,
                "display": read_display(store, index)}
        item["why"] = explain(engine, index, history, self.explain_top)
        if engine.method == "las" and engine.params.alpha:
            item["impact"] = float(engine.impact[index])
        labels_of = store.ids([p["index"] for p in item["why"]["points"]]) if item["why"]["points"] else None
        for k, p in enumerate(item["why"]["points"]):
            p["id"] = None if labels_of is None else _plain(labels_of[k])
        return item

    # -- computing ahead -----------------------------------------------------------------
    def _look_ahead(self):
        """Start computing the next item for both answers to the item on show."""
        self._ahead = None
        if not self.prefetch or self._current is None:
            return
        index = self._current["index"]
        engine = self.session.search
        # In memory, each branch copies the engine in the worker thread (off the answer's
        # path); the session only reads it meanwhile, or changes it after the branch it
        # adopts has finished (a branch dropped as stale may read a changing engine: its
        # result is never used).
        in_memory = self.copy_in_memory and forkable(engine)
        source = engine if in_memory else self.session.export_engine_state()
        history, skipped = self.session.history, list(self._skipped)
        likely = 1 if self._current["why"]["f"] >= 0.5 else 0
        ahead = {"index": index, "futures": {}}
        for label in (likely, 1 - likely):
            ahead["futures"][label] = self._worker.submit(self._branch, in_memory, source, history, skipped,
                                                          index, label)
        self._ahead = ahead

    def _branch(self, in_memory, source, history, skipped, index, label):
        engine = fork(source) if in_memory else self.session.engine_from_state(source)
        try:
            engine.tell(index, label)
            engine.sync()
            told = history + [(index, label)]
            return engine, self._item(engine, told, [i for i in skipped if i != index])
        except BaseException:
            engine.close()
            raise

    def _take_prepared(self, index, label):
        """The prepared (engine, next item) for this answer, waiting for it if it is being
        computed; None when there is none (then the caller computes it)."""
        ahead, self._ahead = self._ahead, None
        if ahead is None or ahead["index"] != index:
            _discard(ahead)
            return None
        future = ahead["futures"].pop(label)
        _discard(ahead)
        if future.cancel():
            return None            # not started yet: computing it here is as fast
        try:
            return future.result()
        except CancelledError:
            return None

    def _drop_ahead(self):
        _discard(self._ahead)
        self._ahead = None

    def _check_unlabeled(self, index):
        engine = self.session.search
        if not 0 <= index < engine.n:
            raise LabelError(f"index {index} is out of range: the store has {engine.n} points (0..{engine.n - 1})")
        if engine.labels[index] >= 0:
            raise Conflict(f"point {index} is already labeled ({int(engine.labels[index])}), "
                           "perhaps in another tab; here is the current item")


CURVE_POINTS = 400


def hits_curve(labels, points=CURVE_POINTS):
    """[[t, positives among the first t labels]] at no more than ``points`` values of t
    (the last one always): a curve that costs the same to send at 10 or 100,000 labels."""
    hits = np.cumsum(labels, dtype=np.int64)
    if len(hits) == 0:
        return []
    t = np.unique(np.linspace(1, len(hits), min(points, len(hits))).round().astype(np.int64))
    return [[int(k), int(hits[k - 1])] for k in t]


def choose(engine, skipped):
    """(index, selection score, rank) of the best unlabeled point not in ``skipped``
    (which is cleared when it holds every unlabeled point); None when all are labeled."""
    unlabeled = engine.n - engine.n_labeled
    if unlabeled == 0:
        return None
    skip = {i for i in skipped if engine.labels[i] < 0}
    if len(skip) >= unlabeled:
        skip.clear()
        skipped.clear()
    indices, scores = engine.top(len(skip) + 1)
    for rank, (i, s) in enumerate(zip(indices, scores), start=1):
        if int(i) not in skip:
            return int(i), float(s), rank
    raise AssertionError("top(k) returned only skipped points")


def _discard(ahead):
    """Cancel what has not started and close the engines of what has."""
    if ahead is None:
        return
    for future in ahead["futures"].values():
        if not future.cancel():
            future.add_done_callback(_close_result)


def _close_result(future):
    if not future.cancelled() and future.exception() is None:
        future.result()[0].close()


def _point(index):
    if isinstance(index, bool) or not isinstance(index, int):
        raise LabelError(f"index {index!r} is not an integer")
    return index


def _label(label):
    if isinstance(label, bool) or label not in (0, 1):
        raise LabelError(f"label {label!r} is not 0 (negative) or 1 (positive)")
    return label


def _plain(value):
    if isinstance(value, bytes):
        return value.decode()
    return value.item() if isinstance(value, np.generic) else value
