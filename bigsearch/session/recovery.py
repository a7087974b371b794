"""Recovery and replay: how a session finds the state in force (session.py says what it
is) from its directory. Opening reads the checkpoint manifests, then the journal; loads
the newest checkpoint that is a prefix of the history, skipping damaged ones with a
warning; and replays the label groups after it, in the groups they were first applied in.
"""

from __future__ import annotations

import warnings

from ..backends import pass_progress
from ..engine.core.registry import saving_class
from ..errors import SessionCorruptError, SessionError, SessionWarning
from .checkpoint import list_checkpoints, read_arrays, read_manifest
from .journal import History, read_journal, truncate_journal

JOURNAL, CHECKPOINTS = "journal.jsonl", "checkpoints"  # in the session directory


class SessionRecovery:
    """The reading and replaying half of :class:`~bigsearch.session.Session` (mixed into
    it): it sets ``_manifests``, ``_history`` and ``_saved`` and loads the engine."""

    def _read_state(self):
        """Checkpoint manifests, then the journal (in that order: a checkpoint never
        covers more journal than was written before it)."""
        self._manifests = self._read_manifests()
        path = self.directory / JOURNAL
        journal = read_journal(path)
        for ckpt, body, _ in self._manifests:
            if body is not None and body["journal"]["bytes"] > journal.valid_bytes:
                raise SessionCorruptError(
                    f"{path} ends at byte {journal.valid_bytes} but checkpoint {ckpt.name} covers "
                    f"{body['journal']['bytes']} bytes: acknowledged labels are missing from the journal"
                )
        if journal.torn_bytes and self.writable:
            truncate_journal(path, journal.valid_bytes)
            warnings.warn(
                f"dropped a torn last line of {path} ({journal.torn_bytes} bytes): a write cut "
                "short, never acknowledged",
                SessionWarning,
                stacklevel=4,
            )
        self._history = History.from_records(journal.records)

    def _read_manifests(self):
        """[(path, manifest body or None, error or None)], newest first."""
        out = []
        for path in list_checkpoints(self.directory / CHECKPOINTS):
            try:
                out.append((path, read_manifest(path), None))
            except FileNotFoundError:
                continue  # removed by the writer meanwhile
            except (ValueError, KeyError) as e:
                out.append((path, None, str(e)))
        return out

    def _holds_prefix(self, body):
        """Whether the checkpoint's label groups are the first ones of the history."""
        k = body["history"]["groups"]
        return (
            body["method"] == self.method
            and k <= len(self._history.groups)
            and self._history.digest(k) == body["history"]["digest"]
        )

    def _load_engine(self):
        store = self._open_store()
        for _ in range(3):
            try:
                return self._engine_from_disk(store)
            except _Vanished:
                self._read_state()  # the writer pruned a checkpoint as we read it
        raise SessionError(f"{self.directory}: checkpoints keep changing under this reader; try again")

    def _report(self, what, done, total):
        if self.progress is not None:
            self.progress(what, done, total)

    def _engine_from_disk(self, store):
        damaged, engine, start = [], None, 0
        self._saved = None
        for path, body, error in self._manifests:
            if body is None:
                damaged.append(f"{path.name}: {error}")
            elif self._holds_prefix(body):
                what = f"restoring the checkpoint after label {body['history']['labels']:,} (one pass over X)"
                self._report(what, 0, store.n_chunks)
                try:
                    with pass_progress(lambda done, total: self._report(what, done, total)):
                        engine = self._engine_from_checkpoint(store, path, body)
                    self._report(what, store.n_chunks, store.n_chunks)
                except (ValueError, KeyError, OSError) as e:
                    if not path.exists():
                        raise _Vanished() from None
                    damaged.append(f"{path.name}: {e}")
                    continue
                start = body["history"]["groups"]
                self._saved = (start, body["history"]["digest"])
                break
        self._since_checkpoint = sum(len(g.index) for g in self._history.groups[start:])
        if engine is None:
            if damaged:
                raise SessionCorruptError(
                    f"{self.directory}: no valid checkpoint ({'; '.join(damaged)}); rebuild the state "
                    f"from the journal with `bigsearch session rebuild {self.directory}`"
                )
            engine = new_engine(
                self.method, store, self.info["params"], self.info["engine"], self._backend, self._n_threads
            )
        for problem in damaged:
            warnings.warn(f"skipped damaged checkpoint {problem}; using an older one", SessionWarning, stacklevel=5)
        since = self._history.groups[start:]
        try:
            for k, group in enumerate(since):
                self._report("replaying the labels since (one pass per group)", k, len(since))
                apply_group(engine, group.index, group.label)
            if since:
                self._report("replaying the labels since (one pass per group)", len(since), len(since))
        except BaseException:
            engine.close()
            raise
        return engine

    def _engine_from_checkpoint(self, store, path, body):
        arrays = read_arrays(path, body)
        if body["store_fingerprint"] != self.info["store"]["fingerprint"]:
            raise ValueError("it was written for another store")
        return saving_class(self.method).from_state(
            store, {"meta": body["meta"], "arrays": arrays}, backend=self._backend, n_threads=self._n_threads
        )


class _Vanished(Exception):
    """A checkpoint disappeared while a reader loaded it."""


def new_engine(method, store, params, options, backend, n_threads):
    """An engine initialized with no labels: the state every replay starts from."""
    kwargs = {k: v for k, v in {**params, **options}.items() if v is not None}
    engine = saving_class(method)(store, backend=backend, n_threads=n_threads, **kwargs)
    try:
        engine.sync()  # initialize now, before any label is told
    except BaseException:
        engine.close()
        raise
    return engine


def apply_group(engine, index, label):
    """Tell a group of labels and apply them in one pass."""
    engine.tell(index, label)
    engine.sync()
