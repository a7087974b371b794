"""What a session records and who can read it: a session is its owner's only (0700 and
0600, whatever the umask), a correction is its own journal event (when, by whom, from
what to what) and every answer keeps its own time, and a blind start is said."""

import json
import os
import stat

import numpy as np
import pytest

import bigsearch
from bigsearch import Session
from bigsearch.session.journal import read_journal
from bigsearch.testing import clustered_points
from tests.conftest import run_cli


@pytest.fixture
def store(tmp_path):
    X, y = clustered_points(200, 6, prevalence=0.15, seed=2, spread=0.8)
    return bigsearch.create_store(tmp_path / "s.zarr", X, y, chunk_rows=40), y


def modes(directory):
    """{path relative to directory: permission bits} of the directory and everything in it."""
    out = {".": stat.S_IMODE(os.stat(directory).st_mode)}
    for root, dirs, files in os.walk(directory):
        for name in dirs + files:
            path = os.path.join(root, name)
            out[os.path.relpath(path, directory)] = stat.S_IMODE(os.stat(path).st_mode)
    return out


def test_a_session_is_its_owners_only(tmp_path, store):
    path, y = store
    old = os.umask(0o022)  # the usual umask, which leaves new files readable by everyone
    try:
        d = tmp_path / "s"
        with Session.create(path, d, pi=0.1, checkpoint_every=2, start_from={"vector": np.ones(6)}) as s:
            for _ in range(3):
                i = s.ask()
                s.tell(i, int(y[i]))
            s.draw_sample(5, seed=1)
    finally:
        os.umask(old)
    found = modes(d)
    assert {"session.json", "journal.jsonl", "lock", "start.npy", "sample.json"} <= set(found)
    assert any(name.startswith("checkpoints/") and name.endswith(".npy") for name in found)
    for name, mode in found.items():
        is_dir = os.path.isdir(d / name)
        assert mode == (0o700 if is_dir else 0o600), (name, oct(mode))


def test_an_older_session_readable_by_others_is_said(tmp_path, store):
    path, _ = store
    d = tmp_path / "s"
    Session.create(path, d, pi=0.1).close()
    os.chmod(d, 0o755)  # as sessions were created before
    with pytest.warns(bigsearch.errors.SessionWarning, match=r"can be read by other users .*`chmod -R go= "):
        Session.open(d).close()
    with Session.open(d, readonly=True):  # a reader changes nothing and says nothing
        pass
    r = run_cli("session", "label", d, 3, 0)
    assert r.returncode == 0 and r.stderr.startswith(f"Warning: session {d} can be read by other users")


def test_a_correction_is_its_own_event_and_keeps_every_answers_time(tmp_path, store):
    """Correct the second of four answers: the state is that of a session told the
    corrected labels as the page used to tell them (an undo, then the labels again in
    one group), the export keeps the four answers' own times, and the journal's one
    record says what changed, when, by whom and from where."""
    path, y = store
    d = tmp_path / "s"
    with Session.create(path, d, pi=0.1, checkpoint_every=3) as s:
        for _ in range(4):
            i = s.ask()
            s.tell(i, int(y[i]))
        answers, times = s.history, [t for _, _, t in s._history.rows()]
        second, was = answers[1]
        assert s.correct(second, 1 - was) == 3  # it and the two after it, told again
        f = np.array(s.search.f)
        assert s.history == [answers[0], (second, 1 - was), *answers[2:]]
        with pytest.raises(bigsearch.errors.LabelError, match="already labeled"):
            s.correct(second, 1 - was)
        with pytest.raises(bigsearch.errors.LabelError, match="not labeled"):
            s.correct(next(j for j in range(200) if j not in dict(answers)), 1)
    with Session.create(path, tmp_path / "before", pi=0.1) as b:  # the same state, as the page made it
        for i, lab in answers:
            b.tell(i, lab)
        b.undo(3)
        b.tell([i for i, _ in answers[1:]], [1 - was, *[lab for _, lab in answers[2:]]])
        np.testing.assert_array_equal(b.search.f, f)
    with Session.open(d, readonly=True) as r:  # from the journal (and a checkpoint): the same
        np.testing.assert_array_equal(r.search.f, f)
        status = r.status(estimate=False)
        (event,) = r.corrections
    assert status["undone"] == 0 and status["corrections"] == [event]
    assert (event["point"], event["from"], event["to"], event["via"]) == (second, was, 1 - was, "python")
    assert event["by"] and event["time"] >= times[-1]  # ms resolution: the same millisecond can hold both
    records = read_journal(d / "journal.jsonl").records
    assert [r["op"] for r in records] == ["label"] * 4 + ["correct"]
    assert records[-1]["times"] == times[1:]
    r = run_cli("session", "export", d, "--out", "-", "--format", "json")
    rows = json.loads(r.stdout)
    assert [(row["index"], row["label"], row["time"]) for row in rows] == [
        (i, lab, t) for (i, lab), t in zip([answers[0], (second, 1 - was), *answers[2:]], times)
    ]
    # the command line: a correction, and the status that lists them
    fourth = answers[3][0]
    r = run_cli("session", "correct", d, fourth, answers[3][1])
    assert r.returncode == 2 and r.stderr == f"Error: point {fourth} is already labeled {answers[3][1]}\n"
    r = run_cli("session", "correct", d, fourth, 1 - answers[3][1])
    assert r.returncode == 0 and r.stdout == f"corrected point {fourth}: {answers[3][1]} -> {1 - answers[3][1]}\n"
    text = run_cli("session", "status", d).stdout
    assert f"corrected   2 answers: {second}: {was} -> {1 - was} (" in text and ", cli)" in text
    with Session.open(d, readonly=True) as r:
        assert [c["via"] for c in r.corrections] == ["python", "cli"]
        assert [t for _, _, t in r._history.rows()] == times


def test_a_blind_start_is_said_at_session_new(tmp_path, store):
    path, y = store
    r = run_cli("session", "new", path, tmp_path / "blind", "--pi", 0.1)
    assert r.returncode == 0
    notice = r.stdout.splitlines()[1]
    assert (
        notice.startswith(
            "blind start: no --start-from, so until a first positive answer every point scores the prior, pi = 0.1"
        )
        and "--start-from ids:ID,..., vector:FILE.npy or keyword:" in notice
    )
    # the store's own labels, a screening's decisions or a simulation's truth: offered, not taken
    offer = r.stdout.splitlines()[2]
    assert offer == (
        f"the store holds {int((y >= 0).sum()):,} labels ({int((y == 1).sum()):,} positive): if they "
        "are decisions already made, start the session again with --start-from labels to start from them"
    )
    known = int(np.flatnonzero(y == 1)[0])
    r = run_cli("session", "new", path, tmp_path / "known", "--pi", 0.1, "--start-from", f"ids:{known}")
    assert r.returncode == 0 and "blind start" not in r.stdout
    with Session.open(tmp_path / "blind") as s:
        assert s.blind
        s.tell(s.ask(), 0)
        assert s.blind  # negatives alone: still nothing to go on
        s.tell(known, 1)
        assert not s.blind
    with Session.create(path, tmp_path / "vector", pi=0.1, start_from={"vector": np.ones(6)}) as s:
        assert not s.blind  # the vector's candidates are asked first
