"""The labelling page's model: a writer Session, the item on show, and the next item
for both answers computed ahead.

Everything that changes the session goes through one lock, in the order requests
arrive, and is checked against the journal's state: an answer for a point that is
already labeled (another tab answered it) or an undo of a label that is no longer the
last is refused with a :class:`Conflict`, so two tabs never label a point twice or undo
each other's work. An answer is acknowledged only after ``Session.tell`` returned, that
is after its journal record is fsync'd.

No waiting: while the person reads item i, a background thread copies the engine state
twice, tells the copies (i, 1) and (i, 0), and picks the next item of each. In memory a
copy reuses an engine no longer needed (the branch not taken, the state before the
answer) and copies into it only what differs (serve/fork.py: with pruned queries, a
few percent of the rows); elsewhere it goes through ``export_state`` / ``from_state``.
The answer key then only appends to the journal and adopts the prepared copy
(``Session.tell(applied=...)``), which holds exactly the state ``Session.tell`` would
have computed. A skip, an undo or an answer to another point
makes the prepared copies stale; they are dropped and the next ones computed.

Skips and their undos are journaled too (``Session.skip`` / ``unskip``), so the page,
a second tab, a restarted server and ``bigsearch session next`` agree on what is put
aside. A checkpoint that comes due is written by a background thread after the reply
(the labels are already durable in the journal); anything that changes the session
waits for it first, so it always sees the state it was asked to save.
"""

import io
import math
import threading
import warnings
from concurrent.futures import CancelledError, ThreadPoolExecutor

import numpy as np

from ..engine.guidance.remaining import recent_hit_rate
from ..engine.guidance.seeding import labels_told, seeded_top, seeding
from ..errors import BigsearchError, LabelError, ParameterError, SessionWarning
from ..session.session import ranked_unskipped
from .explain import explain
from .fork import fork, forkable, refit
from .records import Summaries, hidden_fields, read_display

RECENT = 10                    # decisions listed on the page, each correctable
# What a method's answers may be (the page asks for a number unless "binary"), and how
# a refusal says it.
TAKES = {"binary": "0 (negative) or 1 (positive)", "grade": "0, 1 or a grade in [0, 1]",
         "number": "0, 1 or any finite number (a measurement or score, higher is better)"}


class Conflict(BigsearchError):
    """The request is out of date: the session changed since the page last saw it."""


class BudgetSpent(Conflict):
    """An answer after the budget is spent (the page shows the end instead)."""


class Labeler:
    """Serve one session to the page. ``budget``: the number of labels planned (the
    page ends there; None for none), not counting the session's starting labels (the
    known positives of ``session new --start-from``) unless ``count_start``.
    ``question``: what "positive" means, shown with every point. ``hide``: record
    fields not to show (the store's label column is never shown). ``highlight``: words
    the page marks in the records (a trailing ``*`` matches any ending).
    ``prefetch=False`` computes after each answer (for measuring what prefetching
    saves); ``background_checkpoints=False`` writes a due checkpoint before replying, as
    ``Session.tell`` does (for measuring the difference)."""

    def __init__(self, session, *, budget=None, prefetch=True, explain_top=5, copy_in_memory=True,
                 background_checkpoints=True, question=None, hide=(), count_start=False, highlight=()):
        self.session = session
        self.question = question
        self.highlight = highlight_terms(highlight)
        self.hidden = hidden_fields(session.search.store, hide)
        self.summaries = Summaries(session.search.store, self.hidden)   # the records the lists name
        self.start_labels = 0 if count_start else labels_told(session.info.get("start"))
        self.copy_in_memory = copy_in_memory   # False: copy through export/from_state, as on a cluster
        self.budget = budget
        self.prefetch = prefetch
        self.background_checkpoints = background_checkpoints
        self.explain_top = explain_top
        self._lock = threading.Lock()
        self._worker = ThreadPoolExecutor(1, thread_name_prefix="bigsearch-ahead")
        self._saver = ThreadPoolExecutor(1, thread_name_prefix="bigsearch-checkpoint")
        self._saving = None
        self._ahead = None
        self._spares = []         # engines no longer in use, for the next copies (serve/fork.py)
        self._spares_lock = threading.Lock()
        self.adopted = 0          # answers served from a prepared copy (for tests and benchmarks)
        self.copied = []          # per in-memory copy: the share of rows copied (1.0: a whole copy)
        self._before = None       # the engine before the newest label, for a fast undo
        with self._lock:
            self._current = self._item(self.session.search, self.session.history, self.session.skipped)
            self._look_ahead()

    # -- what the page sees --------------------------------------------------------------
    def view(self):
        with self._lock:
            return self._view()

    def _view(self):
        history = self.session.history
        labels = [y for _, y in history]
        used = max(0, len(labels) - self.start_labels)
        rate = recent_hit_rate(np.array(labels, np.float64)) if labels else None
        return {"item": self._current, "skipped": len(self.session.skipped), "question": self.question,
                "progress": {"labels": len(labels), "positives": sum(y >= 0.5 for y in labels),
                             "curve": hits_curve(labels), "budget": self.budget, "used": used,
                             "start_labels": self.start_labels, "spent": self._spent(), "n": self.session.search.n,
                             "hit_rate": None if rate is None else {"hits": int(round(rate.value * rate.basis)),
                                                                    "of": rate.basis, "low": rate.low,
                                                                    "high": rate.high},
                             "recall": self.session.recall()},
                "recent": self._recent(history),
                "last": _last(self.session.last_action()),
                "blind": self.session.blind,
                "highlight": self.highlight,
                "session": {"directory": str(self.session.directory), "method": self.session.method,
                            "takes": label_kind(self.session.search)}}

    def _spent(self):
        return self.budget is not None and self.session.n_labels - self.start_labels >= self.budget

    def _recent(self, history):
        """The newest RECENT labels, newest first: [{"index", "id", "label", "summary"
        (records.summary: what the point was), "was" (the answer a correction replaced,
        when the point's answer in force is a correction's)}]."""
        recent = history[-RECENT:][::-1]
        if not recent:
            return []
        indices = [i for i, _ in recent]
        ids = self.session.search.store.ids(indices)
        corrected = {c["point"]: c for c in self.session.corrections}
        out = []
        for k, (summary, (i, y)) in enumerate(zip(self.summaries.of(indices), recent)):
            d = {"index": i, "id": None if ids is None else _plain(ids[k]), "label": y, "summary": summary}
            if i in corrected and corrected[i]["to"] == y:
                d["was"] = corrected[i]["from"]
            out.append(d)
        return out

    # -- the person's answers ------------------------------------------------------------
    def answer(self, index, label):
        """Record the answer for ``index`` (durable when this returns); the new view."""
        with self._lock:
            index, label = _point(index), self._label(label)
            self._check_unlabeled(index)
            if self._spent():
                raise BudgetSpent(f"the budget of {self.budget} labels is spent: undo or correct an answer, "
                                  "or serve again with a larger budget to go on")
            self._wait_for_checkpoint()
            prepared = self._take_prepared(index, label)
            checkpoint = not self.background_checkpoints
            if prepared is not None:
                engine, item = prepared
                replaced = self.session.search
                self.session.tell(index, label, applied=engine, checkpoint=checkpoint, close_replaced=False)
                self._set_before(replaced)      # the state before this label: undo adopts it
                self.adopted += 1
            else:
                self._set_before(None)
                self.session.tell(index, label, checkpoint=checkpoint)
                item = None
            self._current = item or self._item(self.session.search, self.session.history, self.session.skipped)
            if self.session.checkpoint_due:
                self._saving = self._saver.submit(self._checkpoint)
            self._look_ahead()
            return self._view()

    def skip(self, index):
        """Put ``index`` aside and show the next best point instead (journaled:
        ``Session.skip``; the point comes back after every other, or by undo)."""
        with self._lock:
            index = _point(index)
            if self._current is None or self._current["index"] != index:
                raise Conflict(f"point {index} is not the one on show any more; here is the current one")
            self._wait_for_checkpoint()
            self.session.skip(index)
            self._replan()
            return self._view()

    def undo(self, index, skip=False):
        """Withdraw the newest label or skip, which must be the label (or with
        ``skip=True`` the skip) of ``index``, so a tab never undoes what it has not seen.
        A label's undo adopts the engine kept from before it (no reload) when there is one."""
        with self._lock:
            index = _point(index)
            last = self.session.last_action()
            if last is None or last[1] != index or (last[0] == "skip") != bool(skip):
                raise Conflict(f"cannot undo point {index}: {_describe(last)} (changed in another tab?)")
            self._wait_for_checkpoint()
            if skip:
                self.session.unskip(index)
            else:
                self._undo_labels(1)
            self._replan()
            return self._view()

    def correct(self, index, label):
        """Change the answer of one of the RECENT newest labels (``Session.correct``: the
        labels from it on are told again, in order, with this one changed; one journal
        record says what changed, when and by whom, and each label keeps its time). The
        newest label's correction adopts the engine kept from before it (no reload)."""
        with self._lock:
            index, label = _point(index), self._label(label)
            history = self.session.history
            recent = [i for i, _ in history[-RECENT:]]
            if index not in recent:
                raise Conflict(f"point {index} is not among the {RECENT} newest labels (changed in another tab?)")
            k = len(history) - [i for i, _ in history].index(index)
            if history[-k][1] == label:
                raise LabelError(f"point {index} is already labeled {label}")
            self._wait_for_checkpoint()
            self._drop_ahead()
            before, self._before = self._before, None
            restored = None
            if before is not None and k == 1 and before.history == history[:-1] and not before.has_pending:
                restored = before
            elif before is not None:
                self._keep_spare(before)
            replaced = self.session.search
            self.session.correct(index, label, restored=restored, close_replaced=False, via="page",
                                 checkpoint=not self.background_checkpoints)
            if restored is not None:
                self._keep_spare(replaced)
            if self.session.checkpoint_due and self.background_checkpoints:
                self._saving = self._saver.submit(self._checkpoint)
            self._replan()
            return self._view()

    def _label(self, label):
        """0 or 1 as an int, another number as a float when the session's method takes it
        (a grade in [0, 1], or any finite number for a regression); else a LabelError
        naming what the method takes."""
        takes = label_kind(self.session.search)
        refused = LabelError(f"{self.session.method} takes {TAKES[takes]}, not {label!r}")
        if isinstance(label, bool) or not isinstance(label, (int, float)):
            raise refused
        if label in (0, 1):
            return int(label)
        try:
            y = float(label)
        except OverflowError:                 # a JSON integer too large for a float
            y = math.inf
        if (takes == "number" and math.isfinite(y)) or (takes == "grade" and 0.0 <= y <= 1.0):
            return y
        raise refused

    def _undo_labels(self, count):
        """Session.undo, adopting the engine kept from before the newest label when it
        holds exactly the state after the undo (else the session reloads it)."""
        before, self._before = self._before, None
        if before is not None and count == 1 and before.history == self.session.history[:-1] \
                and not before.has_pending:
            replaced = self.session.search
            self.session.undo(1, restored=before, close_replaced=False)
            self._keep_spare(replaced)
            return
        if before is not None:
            self._keep_spare(before)
        self.session.undo(count)

    def _set_before(self, engine):
        """Keep ``engine`` (the state before the newest label) for undo; the one kept
        before becomes a spare."""
        old, self._before = self._before, engine
        if old is not None:
            self._keep_spare(old)

    def export_csv(self):
        with self._lock:
            out = io.StringIO()
            self.session.export_csv(out)
            return out.getvalue()

    def settle(self):
        """Wait until the next items for both answers are computed and a due checkpoint
        is written (as if the person read for long enough); for tests and benchmarks."""
        with self._lock:
            ahead, saving = self._ahead, self._saving
        for future in [*(ahead or {}).get("futures", {}).values(), *([saving] if saving else [])]:
            future.exception()

    def close(self):
        with self._lock:
            self._drop_ahead()
            self._worker.shutdown(wait=True)
            self._wait_for_checkpoint()
            self._saver.shutdown(wait=True)
            with self._spares_lock:
                spares, self._spares = self._spares, []
            if self._before is not None:
                spares.append(self._before)
                self._before = None
            for engine in spares:
                engine.close()

    # -- checkpoints after the reply -----------------------------------------------------
    def _checkpoint(self):
        try:
            self.session.checkpoint()
        except Exception as e:          # the labels are in the journal; the next due label retries
            warnings.warn(f"could not write a checkpoint ({e}); every label is still in the journal",
                          SessionWarning, stacklevel=1)

    def _wait_for_checkpoint(self):
        """Let a checkpoint under way finish before the session changes (it reads the
        engine and the history it was asked to save)."""
        if self._saving is not None:
            self._saving.result()
            self._saving = None

    # -- choosing and describing items ---------------------------------------------------
    def _replan(self):
        self._drop_ahead()
        self._current = self._item(self.session.search, self.session.history, self.session.skipped)
        self._look_ahead()

    def _item(self, engine, history, skipped):
        """The best unlabeled point not skipped (as the session ranks: its start first,
        while it chooses), with all the page shows about it."""
        chosen = choose(engine, skipped, self.session.start)
        if chosen is None:
            return None
        index, score, rank = chosen
        store = engine.store
        ids = store.ids([index])
        item = {"index": index, "id": None if ids is None else _plain(ids[0]), "score": score, "rank": rank,
                "display": read_display(store, index, self.hidden), "chosen_by": self._chosen_by(engine, index)}
        self.summaries.keep(index, item["display"])       # listed among the decisions once answered
        alpha = engine.params.as_dict().get("alpha", 0.0)    # LAS's weight of the impact factor
        item["why"] = explain(engine, index, history, self.explain_top, f=None if alpha else score)
        if alpha:
            item["impact"] = float(engine.impact[index])
        points = [*item["why"]["points"], *item["why"]["negatives"]] if item["why"] else []
        if points:
            labels_of = store.ids([p["index"] for p in points])
            for k, (p, summary) in enumerate(zip(points, self.summaries.of([p["index"] for p in points]))):
                p["id"] = None if labels_of is None else _plain(labels_of[k])
                p["summary"] = summary
        return item

    def _chosen_by(self, engine, index):
        """The session's start when it chose this point (a vector's or keyword's
        candidates, asked until the first positive), else None."""
        start = self.session.start
        if start is None or not seeding(start, engine.labels) or not np.any(start.candidates == index):
            return None
        return {"strategy": start.strategy, "source": start.source}

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
        history, skipped = self.session.history, self.session.skipped
        why = self._current["why"]
        likely = 1 if (why["f"] if why else self._current["score"]) >= 0.5 else 0   # the answer computed first
        ahead = {"index": index, "futures": {}}
        for label in (likely, 1 - likely):
            ahead["futures"][label] = self._worker.submit(self._branch, in_memory, source, history, skipped,
                                                          index, label)
        self._ahead = ahead

    def _branch(self, in_memory, source, history, skipped, index, label):
        engine = self._copy_of(source) if in_memory else self.session.engine_from_state(source)
        try:
            engine.tell(index, label)
            engine.sync()
            told = history + [(index, label)]
            return engine, self._item(engine, told, [i for i in skipped if i != index])
        except BaseException:
            engine.close()
            raise

    def _copy_of(self, source):
        """An engine equal to ``source``: a spare refitted (only what differs is copied),
        else a new copy. Runs in the worker thread, so one spare at a time is refitted,
        after the branch that read it (the worker runs its tasks in order)."""
        with self._spares_lock:
            spare = self._spares.pop() if self._spares else None
        if spare is None:
            engine = fork(source)
            self.copied.append(1.0)
            return engine
        try:
            self.copied.append(refit(spare, source))
        except BaseException:
            spare.close()
            raise
        return spare

    def _keep_spare(self, engine):
        """Keep an engine no one reads any more for the next copies (two at most)."""
        if not self.copy_in_memory or not forkable(engine):
            engine.close()
            return
        with self._spares_lock:
            if len(self._spares) < 2:
                self._spares.append(engine)
                return
        engine.close()

    def _take_prepared(self, index, label):
        """The prepared (engine, next item) for this answer, waiting for it if it is being
        computed; None when there is none (then the caller computes it). The other
        branch's engine, once computed, is kept as a spare."""
        ahead, self._ahead = self._ahead, None
        if ahead is None or ahead["index"] != index:
            _discard(ahead)
            return None
        future = ahead["futures"].pop(label, None)     # None: a grade or number, not computed ahead
        _discard(ahead, self._keep_result)
        if future is None:
            return None
        if future.cancel():
            return None            # not started yet: computing it here is as fast
        try:
            return future.result()
        except CancelledError:
            return None

    def _keep_result(self, future):
        if not future.cancelled() and future.exception() is None:
            self._keep_spare(future.result()[0])

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


def highlight_terms(terms):
    """The words to mark, as given (stripped, no empty ones, each once); a ParameterError
    for one that is not text or too long to be a word or phrase."""
    out = []
    for term in terms:
        if not isinstance(term, str) or len(term.strip()) > 100:
            raise ParameterError(f"highlight: {term!r} is not a word or phrase (at most 100 characters)")
        if term.strip() and term.strip() not in out:
            out.append(term.strip())
    return out


CURVE_POINTS = 400


def hits_curve(labels, points=CURVE_POINTS):
    """[[t, positives among the first t labels]] at no more than ``points`` values of t
    (the last one always): a curve that costs the same to send at 10 or 100,000 labels."""
    hits = np.cumsum(np.asarray(labels, np.float64) >= 0.5, dtype=np.int64)   # a grade counts from 0.5
    if len(hits) == 0:
        return []
    t = np.unique(np.linspace(1, len(hits), min(points, len(hits))).round().astype(np.int64))
    return [[int(k), int(hits[k - 1])] for k in t]


def choose(engine, skipped, start=None):
    """(index, selection score, rank) of the best unlabeled point, the ``skipped`` ones
    after every other, the ``start``'s candidates first while it chooses (Session.ask's
    choice); None when all are labeled."""
    if engine.n_labeled >= engine.n:
        return None
    ranker = None if start is None else (lambda k: seeded_top(engine, start, k))
    indices, scores, ranks = ranked_unskipped(engine, skipped, 1, ranker)
    return int(indices[0]), float(scores[0]), int(ranks[0])


def _last(action):
    """The newest label or skip, as the page's undo names it."""
    if action is None:
        return None
    if action[0] == "skip":
        return {"index": action[1], "skip": True}
    return {"index": action[1], "label": action[2]}


def _describe(action):
    if action is None:
        return "there are no labels or skips"
    return f"the last {'skip' if action[0] == 'skip' else 'label'} is point {action[1]}'s"


def _discard(ahead, done=None):
    """Cancel what has not started; give what has to ``done`` once finished (default:
    close its engine: a stale branch may have read an engine that changed meanwhile)."""
    if ahead is None:
        return
    for future in ahead["futures"].values():
        if not future.cancel():
            future.add_done_callback(done or _close_result)


def _close_result(future):
    if not future.cancelled() and future.exception() is None:
        future.result()[0].close()


def _point(index):
    if isinstance(index, bool) or not isinstance(index, int):
        raise LabelError(f"index {index!r} is not an integer")
    return index


def label_kind(engine):
    """What ``engine``'s method takes as an answer: "number" (any finite number: a
    regression such as blr), "grade" (y in [0, 1]) or "binary" (0 or 1)."""
    return "number" if engine.REAL_LABELS else "grade" if engine.GRADED else "binary"


def _plain(value):
    if isinstance(value, bytes):
        return value.decode()
    return value.item() if isinstance(value, np.generic) else value
