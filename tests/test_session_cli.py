"""`bigsearch session ...` through the real command in a subprocess."""

import csv
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import bigsearch
from bigsearch import Session
from bigsearch.session.files import read_sealed_json, sealed_json
from bigsearch.testing import clustered_points

from conftest import FIXTURES, run_cli


@pytest.fixture
def store(tmp_path):
    X, y = clustered_points(300, 8, prevalence=0.1, seed=4, spread=0.8)
    ids = np.array([f"doc-{i:04d}" for i in range(300)])
    return bigsearch.create_store(tmp_path / "s.zarr", X, y, ids, chunk_rows=40), y


def snapshot(directory, times=False):
    """Every file's bytes (and, with times, every entry's mtime) under directory."""
    out = {}
    for root, dirs, files in os.walk(directory):
        for name in dirs + files:
            path = os.path.join(root, name)
            key = os.path.relpath(path, directory)
            out[key] = (open(path, "rb").read() if name in files else None,
                        os.stat(path).st_mtime_ns if times else None)
    return out


def ok(*args):
    res = run_cli(*args)
    assert res.returncode == 0, res.stderr
    return res


def test_a_session_from_the_command_line(tmp_path, store):
    path, y = store
    d = tmp_path / "sess"
    res = ok("session", "new", path, d, "--pi", 0.1, "--checkpoint-every", 2)
    assert res.stdout.startswith(f"created session {d}: las (alpha=0, eta=0.5, pi=0.1, w0=0.003333)")

    before = snapshot(d, times=True)
    top = json.loads(ok("session", "next", d, "-k", 3, "--json").stdout)
    assert snapshot(d, times=True) == before                      # next changes nothing at all
    with Session.open(d, readonly=True) as s:
        assert [r["index"] for r in top] == s.top(3)[0].tolist()
    assert [r["rank"] for r in top] == [1, 2, 3] and top[0]["id"] == f"doc-{top[0]['index']:04d}"
    shown = ok("session", "next", d, "-k", 2).stdout.splitlines()
    assert shown[0].startswith(f"#1: index {top[0]['index']}, id {top[0]['id']} (score ")
    assert shown[-1] == f"answer: bigsearch session label {d} {top[0]['index']} 1   (1: positive, 0: negative)"

    first, second = top[0]["index"], top[1]["index"]
    res = ok("session", "label", d, first, y[first], second, y[second])
    assert res.stdout.startswith(f"recorded 2 labels ({y[first] + y[second]} positive); the session has 2 labels")
    # two points not asked yet (with no labels every f is pi, so the first queries are
    # decided by rounding: which ones they are is not this test's business)
    a, b = [i for i in range(7, 12) if i not in (first, second)][:2]
    labels_csv = tmp_path / "more.csv"
    labels_csv.write_text(f"id,index,label,comment\nx,{a},1,looks like one\ny,{b},0,\n")
    ok("session", "label", d, "--from", labels_csv)
    res = ok("session", "undo", d)
    assert res.stdout.startswith(f"undid 1 label: {b} (0); the session has 3 labels")

    st = json.loads(ok("session", "status", d, "--json").stdout)
    expected = [(first, int(y[first])), (second, int(y[second])), (a, 1)]
    assert st["labels"] == 3 and st["undone"] == 1 and st["journal_records"] == 3
    assert st["hits"] == np.cumsum([lab for _, lab in expected]).tolist()
    assert st["positives"] == st["hits"][-1] and st["checkpoint"]["labels"] == 3
    text = ok("session", "status", d).stdout
    assert "labels      3:" in text and "(1 undone)" in text and "hits by step" in text

    ok("session", "export", d, "--csv", tmp_path / "out.csv")
    rows = list(csv.DictReader(open(tmp_path / "out.csv")))
    assert [(int(r["index"]), int(r["label"])) for r in rows] == expected
    assert [r["id"] for r in rows] == [f"doc-{i:04d}" for i, _ in expected]
    assert all(r["time"].endswith("Z") for r in rows) and list(rows[0]) == ["index", "id", "label", "time"]

    # the export reads back in as labels: a second session ends in the same state
    d2 = tmp_path / "sess2"
    Session.create(path, d2, pi=0.1).close()
    ok("session", "label", d2, "--from", tmp_path / "out.csv")
    with Session.open(d2, readonly=True) as a, Session.open(d, readonly=True) as b:
        assert a.history == b.history


def test_wnas_session_and_its_parameters(tmp_path, store):
    path, y = store
    res = run_cli("session", "new", path, tmp_path / "w", "--method", "wnas", "--alpha", 0.1)
    assert res.returncode == 2 and res.stderr == "Error: --alpha does not apply to wnas, which takes --prune\n"
    ok("session", "new", path, tmp_path / "w", "--method", "wnas")
    ok("session", "label", tmp_path / "w", 3, 1)
    with Session.open(tmp_path / "w", readonly=True) as s:
        ref = bigsearch.WNAS(path)
        ref.tell(3, 1)
        assert s.method == "wnas" and s.ask() == ref.ask()
        np.testing.assert_array_equal(s.search.f, ref.f)


def make_labelled(tmp_path, store_path, y):
    d = tmp_path / "sess"
    with Session.create(store_path, d, pi=0.1, checkpoint_every=2) as s:
        s.tell(5, int(y[5]))
        for _ in range(4):
            i = s.ask()
            s.tell(i, int(y[i]))
    return d


def cut_journal(d):
    j = d / "journal.jsonl"
    j.write_bytes(j.read_bytes()[:-25])


def damage_all_checkpoints(d):
    for c in (d / "checkpoints").iterdir():
        (c / "J.npy").write_bytes(b"\x93NUMPY garbage")


def newer_format(d):
    info = read_sealed_json(d / "session.json")
    (d / "session.json").write_bytes(sealed_json({**info, "format": 99}))


def damage_middle_line(d):
    j = d / "journal.jsonl"
    lines = j.read_bytes().split(b"\n")
    lines[2] = lines[2][:10] + b"X" + lines[2][11:]
    j.write_bytes(b"\n".join(lines))


def change_store(d):
    import zarr
    store = read_sealed_json(d / "session.json")["store"]["path"]
    x = zarr.open_group(store, mode="r+")["X"]
    x[0, 0] = x[0, 0] + 1


BAD = {
    "index not an integer": (None, ["label", "{d}", "abc", "1"], "index 'abc' is not an integer"),
    "index out of range": (None, ["label", "{d}", "300", "1"], "index 300 is out of range: the store has 300 points"),
    "negative index": (None, ["label", "{d}", "-3", "1"], "index -3 is out of range"),
    "already labeled": (None, ["label", "{d}", "5", "0"], "point 5 is already labeled"),
    "label not 0 or 1": (None, ["label", "{d}", "6", "2"],
                         "label 2 for point 6 is not 0 (negative), 1 (positive) or a graded"),
    "label in a file": (None, ["label", "{d}", "--from", "{bad_csv}"], "line 3: label 'yes' for point 7 is not 0"),
    "unpaired": (None, ["label", "{d}", "6"], "labels come in INDEX LABEL pairs, but 1 values were given"),
    "undo too many": (None, ["undo", "{d}", "99"], "cannot undo 99 labels: the session has 5"),
    "undo not a number": (None, ["undo", "{d}", "two"], "COUNT must be a positive integer, got 'two'"),
    "k not positive": (None, ["next", "{d}", "-k", "0"], "Invalid value for '-k': 0 is not in the range x>=1."),
    "not a session": (None, ["next", "{tmp}"], "no session at"),
    "every checkpoint damaged (next)": (damage_all_checkpoints, ["next", "{d}"], "no valid checkpoint"),
    "every checkpoint damaged (label)": (damage_all_checkpoints, ["label", "{d}", "6", "1"], "no valid checkpoint"),
    "acknowledged line torn": (cut_journal, ["label", "{d}", "6", "1"], "acknowledged labels are missing"),
    "damaged journal line": (damage_middle_line, ["next", "{d}"], "line 3 is damaged"),
    "newer format": (newer_format, ["label", "{d}", "6", "1"], "session format 99, newer than this bigsearch"),
    "changed store": (change_store, ["label", "{d}", "6", "1"], "the contents of sampled chunks changed"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_input_is_one_line_exit_2_and_changes_nothing(tmp_path, store, case):
    path, y = store
    d = make_labelled(tmp_path, path, y)
    damage, args, message = BAD[case]
    if damage:
        damage(d)
    bad_csv = tmp_path / "bad.csv"
    bad_csv.write_text("index,label\n6,1\n7,yes\n")
    before = snapshot(d)
    res = run_cli("session", *[a.format(d=d, tmp=tmp_path, bad_csv=bad_csv) for a in args])
    assert res.returncode == 2, res.stdout + res.stderr
    assert res.stderr.startswith("Error: ") and res.stderr.count("\n") == 1, res.stderr
    assert message in res.stderr
    assert snapshot(d) == before


def test_recoveries_warn_and_go_on(tmp_path, store):
    path, y = store
    d = make_labelled(tmp_path, path, y)
    newest = sorted((d / "checkpoints").iterdir())[-1]
    (newest / "Kinv_base.npy").write_bytes(b"\x93NUMPY garbage")
    res = ok("session", "next", d)
    assert f"Warning: skipped damaged checkpoint {newest.name}: Kinv_base.npy: checksum mismatch" in res.stderr
    with open(d / "journal.jsonl", "ab") as fh:
        fh.write(b'{"index":[9],"lab')
    res = ok("session", "label", d, 6, 1)
    assert "Warning: dropped a torn last line" in res.stderr
    with Session.open(d, readonly=True) as s:
        assert s.history[-1] == (6, 1) and s.n_labels == 6
    ok("session", "rebuild", d)
    assert len(list((d / "checkpoints").iterdir())) == 1


def test_a_locked_session_names_its_holder(tmp_path, store):
    path, y = store
    d = make_labelled(tmp_path, path, y)
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time, bigsearch\n"
                               "s = bigsearch.Session.open(sys.argv[1]); print('holding', flush=True); time.sleep(600)",
                               str(d)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "holding"
        res = run_cli("session", "undo", d)
        assert res.returncode == 2
        assert res.stderr.startswith(f"Error: session {d} is in use by process {holder.pid}")
        ok("session", "status", d)                   # readers need no lock
    finally:
        holder.kill()
        holder.wait()
    res = ok("session", "undo", d)
    assert f"Warning: took over the lock of process {holder.pid}" in res.stderr


@pytest.fixture
def adult_store(tmp_path):
    """The Adult excerpt ingested with its records (what the page and `next` show)."""
    out = tmp_path / "adult.zarr"
    ok("ingest", FIXTURES / "adult_head300.data", out, "--label-column", 14, "--positive", ">50K", "--bins", 5,
       "--normalize", "--bias")
    return out


def test_next_shows_the_record_and_never_the_label_column(tmp_path, adult_store):
    d = tmp_path / "sess"
    Session.create(adult_store, d, pi=0.2).close()          # (`session new`: test_a_session_from_the_command_line)
    rows = json.loads(ok("session", "next", d, "-k", 2, "--json").stdout)
    source = (FIXTURES / "adult_head300.data").read_text().splitlines()
    for r in rows:
        fields = r["record"]["fields"]
        line = [v.strip() for v in source[r["index"]].split(",")]
        assert "f14" not in fields, "the label column is the answer"
        assert [str(v).strip() for v in fields.values()] == [str(float(v)) if v.isdigit() else v for v in line[:14]]
    text = ok("session", "next", d, "-k", 2).stdout
    first = rows[0]
    workclass = source[first["index"]].split(",")[1].strip()
    assert f"#1: index {first['index']} (score " in text and f"  f1   {workclass}" in text
    assert "K" not in text.replace("Kingdom", ""), "neither <=50K nor >50K is shown"


def test_new_on_a_labelled_store_requires_pi(tmp_path, store):
    path, _ = store
    res = run_cli("session", "new", path, tmp_path / "s")
    assert res.returncode == 2 and res.stderr.startswith("Error: --pi is required: the store has labels")
    assert "--pi, your guess of the share of positives" in res.stderr and not (tmp_path / "s").exists()
    unlabelled = bigsearch.create_store(tmp_path / "u.zarr", *clustered_points(100, 4, seed=1)[:1], chunk_rows=40)
    ok("session", "new", unlabelled, tmp_path / "u", "--pi", 0.1)
    # (WNAS, which has no prior, needs no --pi: test_wnas_session_and_its_parameters)


def test_status_leads_with_the_recent_hit_rate(tmp_path, store):
    path, y = store
    d = tmp_path / "sess"
    positives = np.flatnonzero(y)[:3]
    with Session.create(path, d, pi=0.1) as s:              # (new and label: test_a_session_from_the_command_line)
        s.tell([*positives.tolist(), 0], [1, 1, 1, 0])
    lines = ok("session", "status", d).stdout.splitlines()
    order = [line.split()[0] for line in lines if line.split()[0] in ("recent", "left", "score")]
    assert order == ["recent", "left", "score"], lines
    assert "3 positive in the last 4 labels" in lines[[ln.split()[0] for ln in lines].index("recent")]
    assert "not a count" in next(ln for ln in lines if ln.startswith("score"))
    assert lines[-1].startswith("recall      not estimated yet (4 records read")  # docs/screening.md


def test_next_is_quiet_unless_verbose(tmp_path, store):
    path, y = store
    d = tmp_path / "sess"
    with Session.create(path, d, pi=0.1, prune=True) as s:  # `session new --prune`
        s.tell(int(np.flatnonzero(y)[0]), 1)
    assert ok("session", "next", d).stderr == ""
    assert ok("session", "next", d, "-v").stderr.startswith("las: pruning on")


def test_next_shows_an_image_as_text(tmp_path):
    rng = np.random.default_rng(0)
    images = rng.integers(0, 16, (60, 6, 5)).astype(np.float32)
    np.save(tmp_path / "images.npy", images)
    (tmp_path / "labels.txt").write_text("".join(f"{int(i % 5 == 0)}\n" for i in range(60)))
    ok("ingest", tmp_path / "images.npy", tmp_path / "im.zarr", "--labels", tmp_path / "labels.txt",
       "--normalize", "--bias")
    d = tmp_path / "sess"
    Session.create(tmp_path / "im.zarr", d, pi=0.2).close()
    record = json.loads(ok("session", "next", d, "--json").stdout)[0]
    np.testing.assert_array_equal(record["record"]["pixels"], images[record["index"]].ravel())
    lines = ok("session", "next", d).stdout.splitlines()[1:-1]
    lo, hi = record["record"]["range"]
    shades = " .:-=+*#%@"
    expected = ["  " + "".join(shades[min(9, int((v - lo) / (hi - lo) * 10))] * 2 for v in row)
                for row in images[record["index"]]]
    assert lines == expected


def test_an_answer_given_again_names_the_command_that_changes_it(tmp_path, store):
    """`session label` of a point answered before: the other answer names `session correct`
    (a reviewer changing their mind), the same answer is refused alone."""
    path, y = store
    d = make_labelled(tmp_path, path, y)
    was, other = int(y[5]), 1 - int(y[5])
    res = run_cli("session", "label", d, 5, other)
    assert res.returncode == 2
    assert res.stderr == (f"Error: point 5 is already labeled ({was}); to change that answer: "
                          f"bigsearch session correct {d} 5 {other}\n")
    res = run_cli("session", "label", d, 5, was)
    assert res.returncode == 2 and res.stderr == f"Error: point 5 is already labeled ({was})\n"
    ok("session", "correct", d, 5, other)
