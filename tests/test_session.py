"""Sessions from Python: resume and undo equivalence, locks, fingerprints, recovery."""

import json
import os
import signal
import subprocess
import sys

import numpy as np
import pytest

import bigsearch
from bigsearch import Session
from bigsearch.errors import (
    LabelError,
    SessionCorruptError,
    SessionExistsError,
    SessionFormatError,
    SessionLockedError,
    SessionNotFoundError,
    SessionWarning,
    StoreError,
)
from bigsearch.session.files import read_sealed_json, sealed_json
from bigsearch.testing import clustered_points

TOL = 1e-12
METHOD_KW = {"las": {"alpha": 0.05}, "wnas": {}}


@pytest.fixture
def data():
    return clustered_points(400, 10, prevalence=0.08, seed=21, spread=0.8)


@pytest.fixture
def store(store_factory, data):
    X, y = data
    return store_factory(X, y, "zarr", "float32", 37)


def engine_after(store, method, groups):
    """A plain engine that received ``groups`` of labels, each applied in one pass:
    the state of a session that never closed."""
    cls = {"las": bigsearch.LAS, "wnas": bigsearch.WNAS}[method]
    engine = cls(store, **METHOD_KW[method])
    engine.f
    for index, label in groups:
        engine.tell(index, label)
        engine.f
    return engine


def assert_same_state(session, engine):
    s = session.search
    assert np.abs(s.f - engine.f).max() <= TOL
    if isinstance(engine, bigsearch.LAS):
        assert np.abs(s.J - engine.J).max() <= TOL
        assert np.abs(s.impact - engine.impact).max() <= TOL
    assert session.ask() == engine.ask()
    assert session.history == engine.history


def oracle_groups(y, picks):
    return [([int(i) for i in idx], [int(y[i]) for i in idx]) for idx in picks]


@pytest.mark.parametrize("method", ["las", "wnas"])
def test_label_close_reopen_equals_a_session_that_never_closed(tmp_path, store, data, method):
    _, y = data
    directory = tmp_path / "sess"
    never_closed = Session.create(store, tmp_path / "ref", method=method, checkpoint_every=4, **METHOD_KW[method])
    s = Session.create(store, directory, method=method, checkpoint_every=4, **METHOD_KW[method])
    first = int(np.flatnonzero(y)[0])
    groups = [([first], [1])]
    for step in range(14):
        if step % 3 == 2:                       # close (checkpoint) and reopen, or crash-like drop
            s.close(checkpoint=step % 2 == 0)
            s = Session.open(directory)
        idx = groups[-1][0] if step == 0 else [s.ask()]
        if step:
            groups.append((idx, [int(y[idx[0]])]))
        s.tell(*groups[-1])
        never_closed.tell(*groups[-1])
        assert s.search.n_labeled == step + 1
    s.close()
    reopened = Session.open(directory)
    assert_same_state(reopened, engine_after(store, method, groups))
    np.testing.assert_array_equal(reopened.search.f, never_closed.search.f)   # bit-identical, in fact
    assert reopened.ask() == never_closed.ask()
    reopened.close()
    never_closed.close()


def test_groups_told_together_are_replayed_together(tmp_path, store, data):
    _, y = data
    groups = oracle_groups(y, [[5, 9, 200], [17], [33, 34]])
    with Session.create(store, tmp_path / "s", alpha=0.05, checkpoint_every=100) as s:
        for g in groups:
            s.tell(*g)
    journal = [json.loads(line) for line in (tmp_path / "s" / "journal.jsonl").read_text().splitlines()]
    assert [r["index"] for r in journal] == [g[0] for g in groups]
    with Session.open(tmp_path / "s", readonly=True) as s:
        np.testing.assert_array_equal(s.search.f, engine_after(store, "las", groups).f)


@pytest.mark.parametrize("method", ["las", "wnas"])
def test_undo_equals_never_having_received_the_labels(tmp_path, store, data, method):
    _, y = data
    picks = [[3], [7, 8, 120], [55], [61], [90, 91], [300], [301], [350]]
    groups = oracle_groups(y, picks)
    directory = tmp_path / "s"
    with Session.create(store, directory, method=method, checkpoint_every=3, **METHOD_KW[method]) as s:
        for g in groups:
            s.tell(*g)
    with Session.open(directory) as s:
        assert s.undo(2) == [(301, int(y[301])), (350, int(y[350]))]
        assert s.history == [p for g in groups[:6] for p in zip(*g)]
        assert_same_state(s, engine_after(store, method, groups[:6]))
        assert s.undo(2) == [(91, int(y[91])), (300, int(y[300]))]        # splits the group [90, 91]
        assert_same_state(s, engine_after(store, method, groups[:4] + [([90], [int(y[90])])]))
        s.undo(4)                               # back before the first checkpoint, into a group
        partial = [([3], [int(y[3])]), ([7, 8], [int(y[7]), int(y[8])])]
        assert_same_state(s, engine_after(store, method, partial))
        s.tell(399, 0)                          # and labelling goes on from there
        assert_same_state(s, engine_after(store, method, partial + [([399], [0])]))
    with Session.open(directory, readonly=True) as s:     # the undo survives a reopen
        assert_same_state(s, engine_after(store, method, partial + [([399], [0])]))
        assert s.status()["undone"] == 8


def test_undo_returns_the_labels_and_refuses_too_many(tmp_path, store):
    with Session.create(store, tmp_path / "s") as s:
        s.tell([1, 2], [1, 0])
        s.tell(3, 0)
        assert s.undo(2) == [(2, 0), (3, 0)]
        with pytest.raises(LabelError, match="cannot undo 2 labels: the session has 1"):
            s.undo(2)
        with pytest.raises(bigsearch.errors.ParameterError):
            s.undo(0)


def test_a_second_writer_is_refused_and_readers_are_not(tmp_path, store):
    with Session.create(store, tmp_path / "s") as s:
        s.tell(4, 1)
        with pytest.raises(SessionLockedError, match=rf"in use by process {os.getpid()} \(this process\)"):
            Session.open(tmp_path / "s")
        with Session.open(tmp_path / "s", readonly=True) as reader:
            assert reader.history == [(4, 1)]
            with pytest.raises(bigsearch.errors.SessionError, match="read-only"):
                reader.tell(5, 0)
    Session.open(tmp_path / "s").close()          # free again after close


HOLDER = """
import sys, time, bigsearch
s = bigsearch.Session.open(sys.argv[1])
s.tell(int(sys.argv[2]), 0)
print("holding", flush=True)
time.sleep(600)
"""


def test_lock_names_the_live_holder_and_a_dead_holders_lock_is_taken_over(tmp_path, store):
    directory = tmp_path / "s"
    Session.create(store, directory).close()
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(directory), "11"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "holding"
        with pytest.raises(SessionLockedError, match=rf"session {directory} is in use by process {holder.pid}\b"):
            Session.open(directory)
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    with pytest.warns(SessionWarning, match=rf"took over the lock of process {holder.pid}"):
        s = Session.open(directory)
    assert s.history == [(11, 0)]                 # the dead holder's acknowledged label is there
    s.close()
    assert (directory / "lock").read_text() == ""  # a clean close leaves no name behind


def rewrite_x(store_path, X):
    import zarr
    zarr.open_group(str(store_path), mode="r+")["X"][:] = X


def test_a_changed_store_is_refused(tmp_path, store, data, store_factory):
    X, y = data
    with Session.create(store, tmp_path / "s") as s:
        s.tell(1, 0)
    changed = X.copy()
    changed[-1, 0] += 0.25                        # the last chunk is always sampled
    rewrite_x(store, changed)
    with pytest.raises(StoreError, match="has changed since session .* began: the contents of sampled chunks changed"):
        Session.open(tmp_path / "s", readonly=True).ask()
    rewrite_x(store, X)
    with Session.open(tmp_path / "s", readonly=True) as s:    # the same data again: accepted
        assert s.ask() >= 0
    other = store_factory(np.vstack([X, X[:1]]), np.append(y, 0), "zarr", "float32", 37)
    with pytest.raises(StoreError, match=r"its shape changed \(400 x 10 -> 401 x 10\)"):
        Session.open(tmp_path / "s", readonly=True, store=other).ask()
    rechunked = store_factory(X, y, "zarr", "float32", 50)
    with pytest.raises(StoreError, match=r"its rows per chunk changed \(37 -> 50\)"):
        Session.open(tmp_path / "s", readonly=True, store=rechunked).ask()
    featurized = tmp_path / "feat.zarr"
    bigsearch.create_store(featurized, X, y, dtype="float32", chunk_rows=37,
                           attrs={"featurization": {"steps": ["pca"]}})
    with pytest.raises(StoreError, match="its featurization attributes changed"):
        Session.open(tmp_path / "s", readonly=True, store=featurized).ask()
    moved = store_factory(X, y, "hdf5", "float32", 37)          # the same data elsewhere: accepted
    with Session.open(tmp_path / "s", readonly=True, store=moved) as s:
        assert s.history == [(1, 0)]


def labelled_session(tmp_path, store, y, labels=9, checkpoint_every=3):
    directory = tmp_path / "s"
    with Session.create(store, directory, alpha=0.05, checkpoint_every=checkpoint_every) as s:
        for _ in range(labels):
            i = s.ask()
            s.tell(i, int(y[i]))
        return directory, s.history


def checkpoints(directory):
    return sorted((directory / "checkpoints").iterdir())


def test_a_damaged_checkpoint_falls_back_to_the_previous_one(tmp_path, store, data):
    _, y = data
    directory, history = labelled_session(tmp_path, store, y)
    newest = checkpoints(directory)[-1]
    with open(newest / "J.npy", "r+b") as fh:       # flip one byte of J
        fh.seek(200)
        b = fh.read(1)
        fh.seek(200)
        fh.write(bytes([b[0] ^ 1]))
    with pytest.warns(SessionWarning, match=f"skipped damaged checkpoint {newest.name}: J.npy: checksum mismatch"):
        with Session.open(directory, readonly=True) as s:
            assert_same_state(s, engine_after(store, "las", [([i], [lab]) for i, lab in history]))


def test_every_checkpoint_damaged_is_a_clear_error_until_rebuilt(tmp_path, store, data):
    _, y = data
    directory, history = labelled_session(tmp_path, store, y)
    for ckpt in checkpoints(directory):
        (ckpt / "manifest.json").write_text((ckpt / "manifest.json").read_text()[:-20])
    with pytest.raises(SessionCorruptError, match=r"no valid checkpoint .*bigsearch session rebuild"):
        Session.open(directory, readonly=True).ask()
    with Session.rebuild(directory) as s:
        assert_same_state(s, engine_after(store, "las", [([i], [lab]) for i, lab in history]))
    assert len(checkpoints(directory)) == 1


def test_checkpoints_never_unpickle(tmp_path, store, data):
    """An object array (which only pickle could load) in a checkpoint, with a manifest
    whose checksums match it, is refused as damaged."""
    import hashlib
    import io
    _, y = data
    directory, history = labelled_session(tmp_path, store, y)
    newest = checkpoints(directory)[-1]
    buf = io.BytesIO()
    np.save(buf, np.array([{"x": 1}, None], dtype=object), allow_pickle=True)
    (newest / "s.npy").write_bytes(buf.getvalue())
    body = read_sealed_json(newest / "manifest.json")
    body["arrays"]["s"]["sha256"] = hashlib.sha256(buf.getvalue()).hexdigest()
    (newest / "manifest.json").write_bytes(sealed_json(body))
    with pytest.warns(SessionWarning, match="Object arrays cannot be loaded when allow_pickle=False"):
        with Session.open(directory, readonly=True) as s:
            assert_same_state(s, engine_after(store, "las", [([i], [lab]) for i, lab in history]))


def test_a_torn_last_journal_line_is_dropped_when_never_acknowledged(tmp_path, store, data):
    _, y = data
    directory, history = labelled_session(tmp_path, store, y, labels=4, checkpoint_every=2)
    journal = directory / "journal.jsonl"
    whole = journal.read_bytes()
    torn = b'{"index":[77],"label":[1],"op":"la'
    journal.write_bytes(whole + torn)
    with Session.open(directory, readonly=True) as s:      # a reader ignores it and changes nothing
        assert s.history == history
    assert journal.read_bytes() == whole + torn
    with pytest.warns(SessionWarning, match=f"dropped a torn last line .*{len(torn)} bytes"):
        s = Session.open(directory)
    assert journal.read_bytes() == whole
    s.tell(77, 1)
    s.close()
    with Session.open(directory, readonly=True) as s:
        assert s.history == history + [(77, 1)]


def test_a_torn_line_that_a_checkpoint_covers_is_an_error(tmp_path, store, data):
    _, y = data
    directory, _ = labelled_session(tmp_path, store, y, labels=4, checkpoint_every=2)
    journal = directory / "journal.jsonl"
    journal.write_bytes(journal.read_bytes()[:-30])       # the checkpoint at close covers it all
    with pytest.raises(SessionCorruptError, match="acknowledged labels are missing from the journal"):
        Session.open(directory, readonly=True)


def test_a_damaged_line_before_the_end_is_an_error(tmp_path, store, data):
    _, y = data
    directory, _ = labelled_session(tmp_path, store, y, labels=4)
    journal = directory / "journal.jsonl"
    lines = journal.read_bytes().split(b"\n")
    lines[1] = lines[1].replace(b'"label":[', b'"label":[1,')
    journal.write_bytes(b"\n".join(lines))
    with pytest.raises(SessionCorruptError, match="line 2 is damaged \\(checksum mismatch\\)"):
        Session.open(directory, readonly=True)


def test_a_newer_format_is_refused(tmp_path, store, data):
    _, y = data
    directory, _ = labelled_session(tmp_path, store, y, labels=2)
    newest = checkpoints(directory)[-1]
    body = read_sealed_json(newest / "manifest.json")
    (newest / "manifest.json").write_bytes(sealed_json({**body, "format": 2}))
    with pytest.raises(SessionFormatError, match=f"checkpoint .*{newest.name} was written in session format 2"):
        Session.open(directory, readonly=True)
    info = read_sealed_json(directory / "session.json")
    (directory / "session.json").write_bytes(sealed_json({**info, "format": 2}))
    with pytest.raises(SessionFormatError, match="session .* was written in session format 2, newer than"):
        Session.open(directory, readonly=True)


def test_create_refuses_an_existing_session_and_open_a_missing_one(tmp_path, store):
    Session.create(store, tmp_path / "s").close()
    with pytest.raises(SessionExistsError, match="already exists and is not empty"):
        Session.create(store, tmp_path / "s")
    (tmp_path / "empty").mkdir()
    Session.create(store, tmp_path / "empty").close()       # an empty directory is fine
    with pytest.raises(SessionNotFoundError, match="no session at"):
        Session.open(tmp_path / "nothing")
    assert not list(tmp_path.glob(".*partial*"))


def test_checkpoints_are_written_every_n_labels_and_pruned(tmp_path, store, data):
    _, y = data
    directory, _ = labelled_session(tmp_path, store, y, labels=10, checkpoint_every=3)
    names = [p.name for p in checkpoints(directory)]
    assert names == ["0000000006", "0000000009", "0000000010"]   # the newest 3; 10 from close
    manifest = read_sealed_json(directory / "checkpoints" / "0000000009" / "manifest.json")
    assert manifest["history"]["labels"] == 9 and manifest["journal"]["seq"] == 9
    assert set(manifest["arrays"]) == {"history_index", "history_label", "s", "K", "Kinv_base", "Kinv_G", "Kinv_c",
                                       "xq", "xz", "V", "J"}
    assert manifest["params"]["alpha"] == 0.05 and manifest["format"] == 1


def test_a_failed_journal_write_leaves_no_trace(tmp_path, store, data):
    """A real write failure (the file size limit, EFBIG) in the middle of a journal
    line: the label is not acknowledged, the partial line is cut back, and the
    session goes on as if the call had never been made."""
    import resource
    _, y = data
    directory, history = labelled_session(tmp_path, store, y, labels=3)
    journal = directory / "journal.jsonl"
    s = Session.open(directory)
    before = journal.read_bytes()
    i = s.ask()
    previous = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (len(before) + 40, hard))
    try:
        with pytest.raises(OSError):
            s.tell(i, int(y[i]))
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, previous)
    assert journal.read_bytes() == before
    assert s.history == history
    s.tell(i, int(y[i]))
    s.close()
    with Session.open(directory, readonly=True) as r:
        assert_same_state(r, engine_after(store, "las", [([a], [b]) for a, b in history + [(i, int(y[i]))]]))


def test_create_removes_what_a_killed_create_left(tmp_path, store):
    import subprocess
    import sys

    from bigsearch.storage.atomic import temp_sibling
    dead = int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                              text=True).stdout)
    stale = temp_sibling(tmp_path / "s", "partial")
    stale = stale.with_name(stale.name.replace(f"-{os.getpid()}-", f"-{dead}-"))
    stale.mkdir()
    Session.create(store, tmp_path / "s", checkpoint_every=10).close()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".s.")) == []
