"""Sessions: Active Search with a person as the oracle, over days, losing nothing.

A session directory holds

    session.json    what the session is: method, parameters, store path and fingerprint
    journal.jsonl   every label and undo in order, fsync'd before it is acknowledged
    checkpoints/    engine states after prefixes of the journal (the newest few)
    lock            the writer's lock

The state in force is defined by the journal alone: the engine initialized with no
labels, then each label group still in force applied in order, one pass each (see
journal.History). A checkpoint holds that state after some prefix of the groups, so
opening loads the newest checkpoint that is a prefix of the history and replays the
groups after it. Replaying in the same groups the labels were first applied in makes
the result bit-identical to a session that never closed; undo is exact for the same
reason (the state is rebuilt without the undone labels).
"""

from __future__ import annotations

import io
import numbers
import os
import warnings
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import numpy as np

from .. import __version__
from ..engine.core.registry import MethodPlan, plan_methods, saving_class
from ..engine.core.select import Ranked
from ..engine.guidance.seeding import resolve_start
from ..engine.guidance.stopping import check_target
from ..errors import (
    LabelError,
    ParameterError,
    SessionCorruptError,
    SessionError,
    SessionExistsError,
    SessionFormatError,
    SessionNotFoundError,
    SessionWarning,
)
from ..storage import open_store, require_local, store_location, store_source
from ..storage.atomic import (
    atomic_path,
    remove_stale_leftovers,
    remove_tree,
)
from ..storage.fingerprint import store_fingerprint
from .checkpoint import (
    FORMAT_VERSION,
    remove_leftovers,
    write_checkpoint,
)
from .export import export_format, write_labels
from .export_records import RECORD_EXPORTS, write_records
from .files import private_dir, read_sealed_json, sealed_json, shared_with_others, write_private
from .fingerprint import check_fingerprint
from .journal import JournalWriter, now
from .lock import SessionLock
from .recovery import CHECKPOINTS, JOURNAL, SessionRecovery, new_engine
from .status import SessionStatus

if TYPE_CHECKING:
    from ..engine.core.base import ChunkedSearch, Labels
    from ..engine.guidance.seeding import StartFrom
    from ..storage import FeatureStore

INFO, LOCK = "session.json", "lock"      # the journal and checkpoints: recovery.py; the sample: status.py
START = "start.npy"        # a vector's or keyword's candidates (engine/guidance/seeding.py)


class Session(SessionRecovery, SessionStatus):
    """An Active Search session kept in a directory. Use :meth:`create` or :meth:`open`.

    Writers (the default) hold the session's lock until :meth:`close`; readers
    (``readonly=True``) take no lock and change nothing. ``backend`` and
    ``n_threads`` go to the engine.
    """

    # progress(what, done, total), if set, hears of the steps of loading the state
    # (restoring a checkpoint, replaying labels since), for a progress bar
    progress: Any = None

    def __init__(self, directory: str | PathLike[str], *, writable: bool, store: str | PathLike[str] | None = None,
                 backend: Any = "local", n_threads: int | None = None) -> None:
        self.directory = require_local(directory, "directory")
        self.writable = writable
        self._store_override, self._backend, self._n_threads = store, backend, n_threads
        self._lock: SessionLock | None = None
        self._journal: JournalWriter | None = None
        self._engine: ChunkedSearch | None = None
        self._store: FeatureStore | None = None
        self._saved: tuple[int, str] | None = None    # (groups, digest) of the newest checkpoint of this history
        self._start: StartFrom | None = None
        self._since_checkpoint = 0
        self.info = read_info(self.directory)
        try:
            if writable:
                self._lock = SessionLock(self.directory / LOCK, self.directory).acquire()
                if self._lock.stale_holder:
                    warnings.warn(f"took over the lock of process {self._lock.stale_holder.split()[0]}, "
                                  "which ended without closing the session", SessionWarning, stacklevel=3)
                remove_leftovers(self.directory / CHECKPOINTS)
                mode = shared_with_others(self.directory)
                if mode is not None:
                    warnings.warn(f"session {self.directory} can be read by other users of this machine "
                                  f"(mode {mode:04o}), and its journal holds every answer: `chmod -R go= "
                                  f"{self.directory}` makes it private (new sessions are)", SessionWarning,
                                  stacklevel=3)
            self._read_state()
            if writable:
                self._journal = JournalWriter(self.directory / JOURNAL, self._history.last_seq + 1)
        except BaseException:
            self._release()
            raise

    # -- creating and opening --------------------------------------------------------
    @classmethod
    def create(cls, store: Any, directory: str | PathLike[str], *, method: str = "las", checkpoint_every: int = 50,
               keep_checkpoints: int = 3, backend: Any = "local", n_threads: int | None = None,
               start_from: Any = None, dataset: str | None = None, prior_from_labels: bool = True,
               stop_at_recall: float | None = None, **params: Any) -> Session:
        """Start a session on ``store`` in the new (or empty) ``directory``.

        ``method``: a registered method that can save its state (las, wnas);
        ``params``: its parameters (pi, eta, w0, alpha for LAS, see :class:`bigsearch.LAS`).
        A checkpoint is written every ``checkpoint_every`` labels and on close; the
        newest ``keep_checkpoints`` are kept (undo beyond them replays from the start).
        ``start_from``: a cold start (engine/guidance/seeding.py; a spec string or a ``StartFrom``):
        known positives are recorded as the first labels; a vector's or keyword's
        candidates are kept in the session and asked first until a positive is labeled.
        ``prior_from_labels=False`` (a person answers: the CLI's ``session new``) refuses to
        take LAS's ``pi`` from the store's labels, which would tell the search the share of
        the answers: ``pi`` must then be given when the store has labels.
        ``store``: a path or URL (``dataset``: the array holding X, default X), or a
        zarr.Array / h5py.Dataset in a file, which the session reopens by its file and name.
        ``stop_at_recall`` R: the protocol's stopping rule; ``status`` says when the recall
        reached is R with 95% confidence (engine/guidance/stopping.py).
        """
        plan = plan_session(method, params, directory, checkpoint_every, keep_checkpoints, stop_at_recall)
        directory = plan.directory
        path, options = store_source(store, dataset)       # what reopens it: a path, and the dataset when not X
        store = open_store(path, options)          # our own handle, closed with the session
        try:
            if not prior_from_labels:
                require_prior(plan.method, store)
            start = resolve_start(store, start_from)
            engine = new_engine(method, store, plan.method.options, backend, n_threads)
        except BaseException:
            store.close()
            raise
        try:
            info = {"format": FORMAT_VERSION, "created": now(), "bigsearch_version": __version__,
                    "method": method, "params": engine.params.as_dict(), "engine": engine.engine_options(),
                    "store": {"path": store_location(store.path, resolve=True), **options,
                              "fingerprint": store_fingerprint(store)},
                    "checkpoint_every": plan.checkpoint_every, "keep_checkpoints": plan.keep_checkpoints,
                    "stop_at_recall": plan.stop_at_recall}
            extra = {}
            if start is not None:
                info["start"] = start.describe()
                if start.candidates is not None:
                    extra[START] = _npy_bytes(start.candidates)
            publish_directory(directory, info, extra)
            session = cls(directory, writable=True, backend=backend, n_threads=n_threads)
        except BaseException:
            engine.close()
            store.close()
            raise
        session._store, session._engine = store, engine
        told = None if start is None else start.labels_to_tell()
        if told is not None:
            try:
                session.tell(*told)    # journaled like any label
            except BaseException:
                session.close(checkpoint=False)
                raise
        return session

    @classmethod
    def open(cls, directory: str | PathLike[str], *, readonly: bool = False, store: str | PathLike[str] | None = None,
             backend: Any = "local", n_threads: int | None = None) -> Session:
        """Open an existing session; ``store`` replaces the recorded store path (a
        moved store), which must still match the session's fingerprint."""
        return cls(directory, writable=not readonly, store=store, backend=backend, n_threads=n_threads)

    @classmethod
    def rebuild(cls, directory: str | PathLike[str], *, store: str | PathLike[str] | None = None,
                backend: Any = "local", n_threads: int | None = None) -> Session:
        """Recompute the state from the journal alone, replacing every checkpoint
        (for when all of them are damaged). Returns the open writer session."""
        session = cls(directory, writable=True, store=store, backend=backend, n_threads=n_threads)
        try:
            for path, _, _ in session._manifests:
                remove_tree(path)
            session._manifests = []
            session.checkpoint()
        except BaseException:
            session.close(checkpoint=False)
            raise
        return session

    # -- the protocol ----------------------------------------------------------------
    def ask(self) -> int:
        """The index of the next point to label (skipped points come after every other)."""
        if not self._history.skips and self.start is None:
            return self.search.ask()
        return int(self.top(1)[0][0])

    def top(self, k: int = 10) -> Ranked:
        """The k best unlabeled points: (indices, scores), best first; the start's
        candidates first while no positive is labeled (engine/guidance/seeding.py); points put
        aside with :meth:`skip` come after every other unlabeled point."""
        indices, scores, _ = ranked_unskipped(self.search, self._history.skipped, k, self._ranker())
        return Ranked(indices, scores)

    def _ranker(self):
        """top(k) as the session ranks: the engine's, or the seeded one while a start chooses."""
        start = self.start
        if start is None:
            return None
        from ..engine.guidance.seeding import seeded_top
        return lambda k: seeded_top(self.search, start, k)

    @property
    def start(self) -> StartFrom | None:
        """The session's cold start when it has candidates to ask (a vector or keyword)."""
        spec = self.info.get("start")
        if spec is None or "candidates" not in spec:
            return None
        if self._start is None:
            from ..engine.guidance.seeding import StartFrom
            try:
                candidates = np.load(self.directory / START, allow_pickle=False)
            except (OSError, ValueError) as e:
                raise SessionCorruptError(f"{self.directory / START} is missing or damaged ({e})") from None
            self._start = StartFrom(spec["strategy"], spec["source"], candidates=candidates, ordered=spec["ordered"])
        return self._start

    def tell(self, index: Labels, label: Labels, *, applied: ChunkedSearch | None = None,
             checkpoint: bool = True, close_replaced: bool = True) -> int:
        """Record labels: tell(i, 1) or tell([i, j], [1, 0]). Labels told in one call
        are applied in one pass over X. Returns when they are durably in the journal.

        ``applied``: an engine from :meth:`engine_from_state` of this session's current
        state to which exactly these labels were already told and applied (computed
        ahead, e.g. while a person reads); the session adopts it instead of doing the
        pass itself. The result is the same, bit for bit. ``close_replaced=False``
        leaves the engine it replaces open, for the caller to reuse or close (the
        labelling page turns it into its next copy: serve/fork.py).

        ``checkpoint=False``: do not write a checkpoint that has come due (every
        ``checkpoint_every`` labels) now; the caller writes it later, when
        :attr:`checkpoint_due` says so (the labelling page does, after replying). The
        labels are durable either way: a checkpoint only shortens the replay."""
        self._require_writer("label")
        if applied is not None:
            return self._adopt(index, label, applied, checkpoint, close_replaced)
        engine = self.search
        before = engine.n_labeled
        engine.tell(index, label)                 # validates first: a bad label changes nothing
        told = engine.history[before:]
        if not told:
            raise LabelError("no labels given")
        try:
            engine.sync()                         # apply now: the journal's groups are the engine's
            record = self._writer_journal().append({"op": "label", "index": [i for i, _ in told],
                                           "label": [y for _, y in told]})
        except BaseException:
            self._drop_engine()                   # it holds labels the journal may not: reload
            raise
        self._after_label(record, len(told), checkpoint)
        return len(told)

    def _adopt(self, index, label, engine, checkpoint, close_replaced):
        current = self.search
        told = list(zip(*current.validate_labels(index, label)))
        if not told:
            raise LabelError("no labels given")
        if engine.history != current.history + told or engine.has_pending:
            raise ParameterError("the engine given as applied= does not hold this session's labels "
                                 "followed by exactly these ones")
        record = self._writer_journal().append({"op": "label", "index": [i for i, _ in told],
                                       "label": [y for _, y in told]})
        self._engine = engine
        if close_replaced:
            current.close()
        self._after_label(record, len(told), checkpoint)
        return len(told)

    def _after_label(self, record, count, checkpoint):
        self._history.apply(record)
        self._since_checkpoint += count
        if checkpoint and self.checkpoint_due:
            self.checkpoint()

    @property
    def checkpoint_due(self) -> bool:
        """Whether ``checkpoint_every`` labels have been told since the last checkpoint."""
        return self._since_checkpoint >= self.info["checkpoint_every"]

    def export_engine_state(self) -> dict[str, Any]:
        """The engine's current state (``export_state()``: copies), for
        :meth:`engine_from_state`, which may then run in another thread."""
        return self.search.export_state()

    def engine_from_state(self, state: dict[str, Any]) -> ChunkedSearch:
        """A new engine continuing from ``state`` (one pass over X), on this session's
        store; it changes nothing in the session until given to ``tell(applied=...)``."""
        return saving_class(self.method).from_state(self._open_store(), state, backend=self._backend,
                                                       n_threads=self._n_threads)

    def undo(self, count: int = 1, *, restored: ChunkedSearch | None = None,
             close_replaced: bool = True) -> list[tuple[int, int]]:
        """Withdraw the last ``count`` labels; returns them as [(index, label)]. The
        state afterwards is that of a session that never received them.

        ``restored``: an engine kept from before those labels (the labelling page keeps
        the one it replaced), holding exactly the label groups in force after the undo;
        the session adopts it instead of reloading the state from a checkpoint and
        replaying the labels since. ``close_replaced=False`` leaves the engine it
        replaces open, for the caller to reuse or close."""
        self._require_writer("undo")
        if isinstance(count, bool) or not isinstance(count, numbers.Integral) or count < 1:
            raise ParameterError(f"the number of labels to undo must be a positive integer, got {count!r}")
        if count > self._history.n_labels:
            raise LabelError(f"cannot undo {count} labels: the session has {self._history.n_labels}")
        undone = self._history.last(count)
        if restored is not None:
            self._check_restored(restored, count)
        record = self._writer_journal().append({"op": "undo", "count": int(count)})
        self._history.apply(record)
        if restored is None:
            self._drop_engine()
            self.search                           # rebuild now, so a problem shows here
        else:
            replaced, self._engine = self._engine, restored
            self._since_checkpoint = max(0, self._since_checkpoint - int(count))
            if close_replaced and replaced is not None:
                replaced.close()
        return undone

    def _check_restored(self, engine, count):
        """``engine`` must hold the whole label groups left after undoing ``count``
        labels (a group cut in two would be applied otherwise than when it was told)."""
        groups, left = self._history.groups, count
        k = len(groups)
        while left > 0 and k:
            k -= 1
            left -= len(groups[k].index)
        expected = [(i, y) for g in groups[:k] for i, y in zip(g.index, g.label)]
        if left != 0 or engine.has_pending or engine.history != expected:
            raise ParameterError("the engine given as restored= does not hold this session's labels "
                                 f"without the last {count}")

    def correct(self, index: int, label: Any, *, restored: ChunkedSearch | None = None, checkpoint: bool = True,
                close_replaced: bool = True, by: str | None = None, via: str = "python") -> int:
        """Change the answer given for ``index`` (a label in force) to ``label``: the labels
        from it on are withdrawn and told again in their order, in one group, with this one
        changed, which is the state of a session told them so. One journal record says what
        changed, when, by whom (``by``, default the user running this process) and from
        where (``via``: "python", "cli", "page"); every label keeps the time it was first
        given (:meth:`export`). Returns the number of labels told again (1 for the newest).

        ``restored``: an engine holding this session's label groups without those labels
        (the labelling page keeps the one before the newest label); it is told them and
        adopted instead of reloading the state. ``checkpoint`` and ``close_replaced``: as
        for :meth:`tell` and :meth:`undo`."""
        self._require_writer("correct")
        index = self._point(index)
        rows = self._history.rows()
        position = next((k for k in range(len(rows) - 1, -1, -1) if rows[k][0] == index), None)
        if position is None:
            raise LabelError(f"point {index} is not labeled: there is no answer to correct")
        new = self._answer(index, label)
        old = rows[position][1]
        if new == old:
            raise LabelError(f"point {index} is already labeled {old}")
        tail = rows[position:]
        indices, labels = [i for i, _, _ in tail], [new] + [y for _, y, _ in tail[1:]]
        record = {"op": "correct", "point": index, "from": old, "to": new, "by": by or _user(), "via": via,
                  "index": indices, "label": labels, "times": [t for _, _, t in tail]}
        if restored is not None:
            self._check_restored(restored, len(tail))
            restored.tell(indices, labels)
            restored.sync()                       # applied first: a failure changes nothing
        self._history.apply(self._writer_journal().append(record))
        if restored is None:
            self._drop_engine()
            self.search                           # rebuild now (a checkpoint, then the groups since)
        else:
            replaced, self._engine = self._engine, restored
            if close_replaced and replaced is not None:
                replaced.close()
        self._since_checkpoint += len(tail)
        if checkpoint and self.checkpoint_due:
            self.checkpoint()
        return len(tail)

    def _answer(self, index, y):
        """``y`` as :meth:`tell` would record it for ``index`` (0 or 1 as an int; a grade or
        a score as a float, where the method takes them), or a LabelError."""
        engine = self.search
        if isinstance(y, (bool, np.bool_)) or not isinstance(y, numbers.Real):
            raise LabelError(f"label {y!r} for point {index} is not a number")
        if float(y) in (0.0, 1.0):
            return int(y)
        if (engine.GRADED and 0.0 <= float(y) <= 1.0) or (engine.REAL_LABELS and np.isfinite(float(y))):
            return float(y)
        takes = " or a grade in [0, 1]" if engine.GRADED else " or any finite number" if engine.REAL_LABELS else ""
        raise LabelError(f"label {y!r} for point {index} is not 0 (negative), 1 (positive){takes}")

    @property
    def corrections(self) -> list[dict[str, Any]]:
        """Every correction made, oldest first: {"point", "from", "to", "time", "by", "via",
        "seq"} (the journal record's)."""
        return [dict(c) for c in self._history.corrections]

    @property
    def blind(self) -> bool:
        """Whether nothing guides the next queries yet: no start to choose them
        (``start_from``) and no positive answer (for a method that takes any number, no
        answer at all), so the engine proposes points about as good as any (every score is
        the prior's until a positive)."""
        if self.start is not None:                # its candidates are asked until the first positive
            return False
        if self.search.REAL_LABELS:
            return self._history.n_labels == 0
        return not any(y >= 0.5 for _, y in self.history)

    def skip(self, index: int) -> None:
        """Put the unlabeled point ``index`` aside (the labelling page's skip): it is
        proposed after every other unlabeled point until it is labeled or
        :meth:`unskip` withdraws the skip. Durable when it returns, like a label; it
        changes no score."""
        self._require_writer("skip")
        index = self._point(index)
        labeled = dict(self._history.pairs())        # not the engine: skipping costs no pass over X
        if index in labeled:
            raise LabelError(f"point {index} is already labeled ({labeled[index]})")
        if index in self._history.skips:
            raise LabelError(f"point {index} is already skipped")
        self._history.apply(self._writer_journal().append({"op": "skip", "index": [index]}))

    def unskip(self, index: int | None = None) -> int:
        """Withdraw the skip of ``index`` (default: the newest skip in force); returns
        the point, which is proposed in its place again."""
        self._require_writer("unskip")
        skipped = self._history.skipped
        if index is None:
            if not skipped:
                raise LabelError("no point is skipped")
            index = skipped[-1]
        index = self._point(index)
        if index not in self._history.skips:
            raise LabelError(f"point {index} is not skipped")
        self._history.apply(self._writer_journal().append({"op": "unskip", "index": [index]}))
        return index

    @property
    def skipped(self) -> list[int]:
        """The points put aside with :meth:`skip` and not labeled since, oldest first."""
        return self._history.skipped

    def last_action(self) -> tuple[Any, ...] | None:
        """("label", index, label) or ("skip", index): the newest label or skip in force
        (what the labelling page's undo withdraws); None when there is neither."""
        return self._history.last_action()

    def _point(self, index):
        if isinstance(index, bool) or not isinstance(index, numbers.Integral):
            raise LabelError(f"index {index!r} is not an integer")
        n = self.info["store"]["fingerprint"]["n"]
        if not 0 <= index < n:
            raise LabelError(f"index {index} is out of range: the store has {n} points (0..{n - 1})")
        return int(index)

    # -- what the session holds ------------------------------------------------------
    @property
    def search(self) -> ChunkedSearch:
        """The engine (LAS or WNAS) in its current state: f, J, impact, top, ..."""
        if self._engine is None:
            self._engine = self._load_engine()
        return self._engine

    def reads(self) -> dict[str, Any] | None:
        """How the engine chooses queries and what each cost: ``pruning`` (on, or off and
        why), ``bytes_read`` (bytes of X read to choose each query asked since the session
        was opened; restoring the engine is not counted), ``x_bytes``; None for engines
        that do not say (their ``run_details()`` is empty)."""
        return self.search.run_details() or None

    @property
    def history(self) -> list[tuple[int, int]]:
        """[(index, label)] in force, in the order told."""
        return self._history.pairs()

    @property
    def n_labels(self) -> int:
        return self._history.n_labels

    @property
    def method(self) -> str:
        return self.info["method"]

    def candidates(self, k: int = 10) -> list[dict[str, Any]]:
        """The k best unlabeled points as [{"rank", "index", "id", "score"}], skipped
        points after every other; ``rank`` counts among all unlabeled points."""
        indices, scores, ranks = ranked_unskipped(self.search, self._history.skipped, k, self._ranker())
        ids = self._ids(indices)
        return [{"rank": int(rank), "index": int(i), "id": None if ids is None else _plain(ids[r]),
                 "score": float(s)} for r, (i, s, rank) in enumerate(zip(indices, scores, ranks))]

    def export_csv(self, out: str | PathLike[str] | IO[str]) -> int:
        """Write one row per label in force, in order: index, id, label, time.
        ``out`` is a path or an open text file."""
        return self.export(out, "csv")

    def export(self, out: str | PathLike[str] | IO[str], format: str | None = None) -> int:
        """Write every label in force, in order (index, id, label, time), as ``format``
        csv, json or parquet (default: from ``out``'s suffix, else csv) to a new file
        ``out``, ``-`` (stdout) or an open text file; returns the number of rows. ``ris``
        and ``records`` (CSV) write every record of the store with its decision instead
        (export_records.py); they return the number of records."""
        fmt = export_format(out, format)
        if isinstance(out, (str, PathLike)) and str(out) != "-":
            require_local(out, "out")
        if fmt in RECORD_EXPORTS:       # every record with its decision: the reviewer's file back
            return write_records(self.search.store, self.history, out, fmt)
        rows = list(self._history.rows())
        ids = self._ids([i for i, _, _ in rows])
        rows = [(i, "" if ids is None else _plain(ids[k]), y, t) for k, (i, y, t) in enumerate(rows)]
        return write_labels(rows, out, fmt)

    # -- saving ----------------------------------------------------------------------
    def checkpoint(self) -> Path | None:
        """Write a checkpoint of the current state now (if it has none yet)."""
        self._require_writer("checkpoint")
        engine, h = self.search, self._history
        if self._saved == (len(h.groups), h.digest(len(h.groups))):
            return None                           # skips alone change no engine state
        info = {"method": self.method, "params": self.info["params"], "created": now(),
                "store_fingerprint": self.info["store"]["fingerprint"],
                "journal": {"seq": h.last_seq, "bytes": self._writer_journal().size},
                "history": {"groups": len(h.groups), "labels": h.n_labels, "digest": h.digest(len(h.groups))}}
        path, _ = write_checkpoint(self.directory / CHECKPOINTS, h.last_seq, engine.export_state(), info)
        self._saved, self._since_checkpoint = (len(h.groups), h.digest(len(h.groups))), 0
        self._prune()
        return path

    def _prune(self):
        """Keep the newest few checkpoints of the current history; drop stale or damaged ones."""
        kept = 0
        for path, body, _ in self._read_manifests():
            if body is not None and self._holds_prefix(body) and kept < self.info["keep_checkpoints"]:
                kept += 1
            else:
                remove_tree(path)
        self._manifests = self._read_manifests()

    def close(self, checkpoint: bool = True) -> None:
        """Checkpoint (a writer whose state is newer than its last checkpoint) and
        release the lock."""
        try:
            if checkpoint and self.writable and self._engine is not None and self._lock is not None:
                self.checkpoint()
        finally:
            self._release()

    def _release(self):
        self._drop_engine()
        for resource in (self._journal, self._store):
            if resource is not None:
                resource.close()
        self._journal = self._store = None
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def __enter__(self) -> Session:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self.close(checkpoint=exc_type is None)

    def __repr__(self):
        mode = "writer" if self.writable else "reader"
        return f"<Session {self.directory} ({self.method}, {self.n_labels} labels, {mode})>"

    # -- the engine ------------------------------------------------------------------
    def _open_store(self):
        if self._store is None:
            store = open_store(self._store_path(), {"dataset": self.info["store"].get("dataset")})
            try:
                check_fingerprint(self.info["store"]["fingerprint"], store, self.directory)
            except BaseException:
                store.close()
                raise
            self._store = store
        return self._store

    def _store_path(self):
        return str(self._store_override or self.info["store"]["path"])

    def _drop_engine(self):
        if self._engine is not None:
            self._engine.close()
            self._engine = None

    def _ids(self, indices):
        """The ids of these points only: a store of millions of ids is not read whole."""
        return self._open_store().ids(indices)

    def _writer_journal(self) -> JournalWriter:
        assert self._journal is not None    # _require_writer checked it
        return self._journal

    def _require_writer(self, what):
        if not self.writable:
            raise SessionError(f"cannot {what}: session {self.directory} is open read-only")
        if self._lock is None:
            raise SessionError(f"cannot {what}: session {self.directory} is closed")


def require_prior(method: MethodPlan, store: FeatureStore) -> None:
    """Refuse to take pi from the labels of the store a person is about to label, when
    ``method`` (the session's plan) takes pi and none is given."""
    takes_pi = "pi" in method.spec.settings() and getattr(method.options, "pi", None) is None
    y = store.labels() if takes_pi else None
    if y is not None and (y >= 0).any():
        raise ParameterError("pi is required: the store has labels, and a prior taken from them would tell the "
                             "search the share of the answers you are about to give; pass pi, your guess of "
                             "the share of positives")


def ranked_unskipped(engine, skipped, k, top=None):
    """The k best unlabeled points, the ``skipped`` ones after every other: (indices,
    scores, ranks), ranks counting from 1 among all unlabeled points by score.
    ``top(k)``: the ranking to follow (default ``engine.top``; a session's start, seeding.py)."""
    top = top or engine.top
    skip = {i for i in skipped if engine.labels[i] < 0}
    if not skip or isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 0:   # top checks k
        indices, scores = top(k)
        return indices, scores, np.arange(1, len(indices) + 1)
    indices, scores = top(k + len(skip))
    aside = np.fromiter((int(i) in skip for i in indices), bool, len(indices))
    order = np.concatenate([np.flatnonzero(~aside), np.flatnonzero(aside)])[:k]
    return indices[order], scores[order], order + 1


def read_info(directory):
    path = directory / INFO
    if not path.is_file():
        raise SessionNotFoundError(f"no session at {directory} (no {INFO}); start one with "
                                   f"`bigsearch session new STORE {directory}`")
    try:
        info = read_sealed_json(path)
    except (ValueError, UnicodeDecodeError) as e:
        raise SessionCorruptError(f"{path} is damaged ({e})") from None
    version = info.get("format")
    if not isinstance(version, int):
        raise SessionCorruptError(f"{path} has no format version")
    if version > FORMAT_VERSION:
        raise SessionFormatError(f"session {directory} was written in session format {version}, newer than "
                                 f"this bigsearch understands ({FORMAT_VERSION}); upgrade bigsearch")
    return info


def publish_directory(directory, info, extra=None):
    """Create the session's files under a temporary name, then rename: a crash leaves
    either a whole new session or none (and an existing empty directory is replaced).
    The directory is its owner's only (0700, its files 0600)."""
    directory.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_leftovers(directory)        # what a killed `session new` left here
    try:
        with atomic_path(directory, "partial") as tmp:
            private_dir(tmp)                     # the owner's only: the journal holds every answer
            write_private(tmp / INFO, sealed_json(info))
            write_private(tmp / JOURNAL, b"")
            write_private(tmp / LOCK, b"")
            private_dir(tmp / CHECKPOINTS)
            for name, data in (extra or {}).items():
                write_private(tmp / name, data)
    except OSError as e:
        if directory.exists():
            raise SessionExistsError(f"{directory} already exists and is not empty; choose a new directory") from e
        raise


@dataclass(frozen=True)
class SessionPlan:
    """A new session, checked before its store is opened (:func:`plan_session`): its method
    with the options record, planned as runs plan theirs (the registry's ``plan_methods``),
    its directory and how often it writes checkpoints."""

    method: MethodPlan
    directory: Path
    checkpoint_every: int = 50
    keep_checkpoints: int = 3
    stop_at_recall: float | None = None


def plan_session(method: str, params: dict[str, Any], directory: str | PathLike[str], checkpoint_every: int = 50,
                 keep_checkpoints: int = 3, stop_at_recall: float | None = None) -> SessionPlan:
    """Every check of a new session that needs no store, and its plan: ``method`` must save
    its state and take every one of ``params`` (strict: a session records what it was given)."""
    stop_at_recall = check_target(stop_at_recall)
    local = require_local(directory, "directory")
    (planned,) = plan_methods((method,), params, need="sessions", strict=True)
    for name, value in (("checkpoint_every", checkpoint_every), ("keep_checkpoints", keep_checkpoints)):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
            raise ParameterError(f"{name} must be a positive integer, got {value!r}")
    if local.exists() and (not local.is_dir() or any(local.iterdir())):
        raise SessionExistsError(f"{local} already exists and is not empty; choose a new directory")
    return SessionPlan(planned, local, int(checkpoint_every), int(keep_checkpoints), stop_at_recall)


def _user():
    """Who runs this process, for the journal's record of a correction."""
    import getpass
    try:
        return getpass.getuser()
    except (KeyError, OSError):            # no name for this uid (a container)
        return f"uid {os.getuid()}"


def _npy_bytes(array):
    buf = io.BytesIO()
    np.save(buf, array, allow_pickle=False)
    return buf.getvalue()


def _plain(value):
    """An id as a plain Python value (ids may be NumPy integers or bytes)."""
    if isinstance(value, bytes):
        return value.decode()
    return value.item() if isinstance(value, np.generic) else value
