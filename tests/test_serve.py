"""The labelling page's model and web application, without a browser: exact answers
with and without computing ahead, conflicts between tabs, the explanation of a score
against the dense reference, the guards, and the command line."""

import re
import signal
import socket
import subprocess
import sys
import threading
from types import SimpleNamespace

import numpy as np
import pytest

import bigsearch
from bigsearch import Session
from bigsearch.testing import clustered_points
from bigsearch.testing.dense import dense_f, dense_wnas
from bigsearch.testing.serve import PageClient
from tests.conftest import chunkings, run_cli, server_process

flask = pytest.importorskip("flask", reason="bigsearch[serve] (flask, waitress) is not installed")

from bigsearch.errors import LabelError
from bigsearch.serve.app import Guard, create_app
from bigsearch.serve.explain import explain
from bigsearch.serve.labeler import Conflict, Labeler


@pytest.fixture
def data():
    return clustered_points(300, 8, prevalence=0.1, seed=5, spread=0.8)


@pytest.fixture
def store(store_factory, data):
    X, y = data
    return store_factory(X, y, "zarr", "float32", 37)


def answer_loop(labeler, y, steps, slip_every=4):
    """Answer from y; every ``slip_every`` steps give the wrong answer first and undo it."""
    for t in range(steps):
        i = labeler.view()["item"]["index"]
        if t % slip_every == slip_every - 1:
            labeler.settle()
            labeler.answer(i, 1 - int(y[i]))
            labeler.undo(i)
        labeler.settle()
        labeler.answer(i, int(y[i]))


@pytest.mark.parametrize(("method", "copy_in_memory"), [("las", True), ("las", False), ("wnas", True),
                                                      ("wnas", False), ("las-pruned", True)])
def test_answers_computed_ahead_equal_a_plain_session(tmp_path, store, data, method, copy_in_memory):
    _, y = data
    params = {"las": {"pi": 0.1, "alpha": 0.05}, "wnas": {}, "las-pruned": {"pi": 0.1, "prune": True}}[method]
    method = method.split("-")[0]
    Session.create(store, tmp_path / "page", method=method, checkpoint_every=5, **params).close()
    with Session.open(tmp_path / "page") as s:
        labeler = Labeler(s, copy_in_memory=copy_in_memory)
        answer_loop(labeler, y, 12)
        assert labeler.adopted == 15       # every answer came from a prepared copy
        page_f, page_next = np.array(s.search.f), s.ask()
        item = labeler.view()["item"]                  # its f comes from the query (pruned: no pass)
        assert item["index"] == page_next and item["why"]["f"] == pytest.approx(page_f[page_next], rel=1e-12)
        labeler.close()
    # the same answers told to a plain Python session
    with Session.create(store, tmp_path / "plain", method=method, **params) as s:
        for t in range(12):
            i = s.ask()
            if t % 4 == 3:
                s.tell(i, 1 - int(y[i]))
                s.undo(1)
            s.tell(i, int(y[i]))
        plain_history, plain_f, plain_next = s.history, np.array(s.search.f), s.ask()
    with Session.open(tmp_path / "page", readonly=True) as s:
        assert s.history == plain_history
        assert s.status()["undone"] == 3
        np.testing.assert_array_equal(s.search.f, plain_f)    # bit for bit, from the journal
    np.testing.assert_array_equal(page_f, plain_f)
    assert page_next == plain_next


def test_the_curve_keeps_its_size():
    from bigsearch.serve.labeler import hits_curve
    assert hits_curve([]) == []
    assert hits_curve([1, 0, 1]) == [[1, 1], [2, 1], [3, 2]]
    labels = np.random.default_rng(0).integers(0, 2, 100_000)
    curve = hits_curve(labels)
    assert len(curve) == 400 and curve[0] == [1, int(labels[0])] and curve[-1] == [100_000, int(labels.sum())]
    assert all(h == int(labels[:t].sum()) for t, h in curve[::50])


@pytest.mark.parametrize("kind", ["zarr", "hdf5"])
def test_a_fork_in_memory_continues_exactly(store_factory, data, kind):
    from bigsearch.serve.fork import fork, forkable
    X, y = data
    for cls, kw in ((bigsearch.LAS, {"pi": 0.1, "alpha": 0.05}), (bigsearch.WNAS, {})):
        engine = cls(store_factory(X, y, kind, "float64", 7), **kw)
        engine.tell([0, 1, 2], [int(v) for v in y[:3]])
        engine.sync()
        assert forkable(engine)
        copy = fork(engine)
        before = np.array(engine.f)
        copy.tell(5, 1)
        copy.sync()
        np.testing.assert_array_equal(engine.f, before)          # the original is untouched
        engine.tell(5, 1)
        engine.sync()
        for name in ("f", "J", "impact") if cls is bigsearch.LAS else ("f",):
            np.testing.assert_array_equal(getattr(copy, name), getattr(engine, name))
        assert copy.ask() == engine.ask() and copy.history == engine.history
        copy.close()
        engine.close()


def journal_ops(directory):
    """The journal's records without their sequence numbers, times and checksums."""
    from bigsearch.session.journal import read_journal
    return [{k: v for k, v in r.items() if k not in ("seq", "time", "crc")}
            for r in read_journal(directory / "journal.jsonl").records]


def page_steps(labeler, y, steps=10):
    """Answer from y, skipping at steps 2 and 3 and skipping then undoing the skip at 5."""
    for t in range(steps):
        item = labeler.view()["item"]
        if t in (2, 3, 5):
            labeler.skip(item["index"])
            after = labeler.view()["item"]
            assert after["index"] != item["index"] and after["rank"] >= 2
            if t == 5:
                assert labeler.view()["last"] == {"index": item["index"], "skip": True}
                labeler.undo(item["index"], skip=True)
                assert labeler.view()["item"] == item          # shown again
            else:
                item = after
        labeler.answer(item["index"], int(y[item["index"]]))


def test_skips_are_journaled_as_the_python_session_records_them(tmp_path, store, data):
    """With and without prefetching: the same journal (skips and their undo included) as
    Session.skip / unskip / tell, the same f; a restarted page shows the same item."""
    _, y = data
    results = []
    for prefetch in (True, False):
        d = tmp_path / f"p{prefetch}"
        Session.create(store, d, pi=0.1).close()
        with Session.open(d) as s:
            labeler = Labeler(s, prefetch=prefetch)
            page_steps(labeler, y)
            results.append((s.history, np.array(s.search.f), labeler.view()["item"]))
            labeler.close()
    assert results[0][0] == results[1][0]
    np.testing.assert_array_equal(results[0][1], results[1][1])
    assert results[0][2] == results[1][2]
    with Session.create(store, tmp_path / "python", pi=0.1) as s:
        for t in range(10):
            i = s.ask()
            if t in (2, 3, 5):
                s.skip(i)
                if t == 5:
                    s.unskip(i)
                else:
                    i = s.ask()
            s.tell(i, int(y[i]))
        python_next, python_skipped = s.ask(), s.skipped
    page = tmp_path / "pTrue"
    assert journal_ops(page) == journal_ops(tmp_path / "python")
    assert [r["op"] for r in journal_ops(page)].count("skip") == 3
    with Session.open(page) as s:                     # the server restarted
        labeler = Labeler(s)
        assert labeler.view()["item"] == results[0][2] and labeler.view()["skipped"] == 2
        assert s.ask() == python_next == results[0][2]["index"]
        assert s.skipped == python_skipped and s.status()["skipped"] == python_skipped
        last = s.candidates(300)[-2:]                   # skipped points come after every other
        assert {c["index"] for c in last} == set(python_skipped)
        labeler.close()


def test_checkpoints_are_written_after_the_reply(tmp_path, store, data, monkeypatch):
    _, y = data
    d = tmp_path / "s"
    Session.create(store, d, pi=0.1, checkpoint_every=2).close()
    writers = []
    checkpoint = Session.checkpoint

    def spy(session):
        writers.append(threading.current_thread().name)
        return checkpoint(session)
    monkeypatch.setattr(Session, "checkpoint", spy)
    with Session.open(d) as s:
        labeler = Labeler(s)
        for _ in range(4):
            i = labeler.view()["item"]["index"]
            labeler.answer(i, int(y[i]))
        labeler.settle()
        assert writers == ["bigsearch-checkpoint_0"] * 2          # not in the answer's thread
        with Session.open(d, readonly=True) as r:                 # loads that checkpoint, replays nothing
            assert r.status()["checkpoint"]["labels"] == 4
            np.testing.assert_array_equal(r.search.f, s.search.f)
        labeler.close()


def test_two_tabs_never_label_twice_or_undo_each_other(tmp_path, store):
    Session.create(store, tmp_path / "s", pi=0.1).close()
    with Session.open(tmp_path / "s") as s:
        labeler = Labeler(s)
        i = labeler.view()["item"]["index"]            # both tabs show i
        labeler.answer(i, 1)                            # tab A
        with pytest.raises(Conflict, match=f"point {i} is already labeled"):
            labeler.answer(i, 0)                        # tab B, late
        j = labeler.view()["item"]["index"]
        with pytest.raises(Conflict, match="not the one on show"):
            labeler.skip(i)
        labeler.undo(i)                                 # tab A
        with pytest.raises(Conflict, match=f"cannot undo point {i}: there are no labels"):
            labeler.undo(i)                             # tab B, late
        assert s.history == [] and j != i
        labeler.answer(j, 0)                            # tab A
        k = labeler.view()["item"]["index"]
        labeler.skip(k)                                 # tab A
        with pytest.raises(Conflict, match=f"cannot undo point {j}: the last skip is point {k}'s"):
            labeler.undo(j)                             # tab B has not seen the skip
        labeler.undo(k, skip=True)
        assert s.history == [(j, 0)] and s.skipped == [] and labeler.view()["item"]["index"] == k
        labeler.close()


@pytest.mark.parametrize("kind", ["zarr", "hdf5"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_why_this_point_is_exact_for_las(store_factory, kind, dtype):
    """a_ij y_j for the labeled j plus the prior's share is f_i, term by term equal to
    the dense solve's G_ij (1 - b_j) y'_j."""
    X, y = clustered_points(90, 6, prevalence=0.2, seed=3, spread=0.8)
    for chunk_rows in chunkings(len(X)):
        path = store_factory(X, y, kind, dtype, chunk_rows)
        engine = bigsearch.LAS(path, pi=0.2, eta=0.6)
        rng = np.random.default_rng(chunk_rows)
        picks = rng.choice(len(X), 14, replace=False)
        engine.tell(picks, y[picks])
        i = engine.ask()
        history = engine.history
        why = explain(engine, i, history, top=len(history))
        # the dense reference, from the stored (rounded) X
        Xs = bigsearch.open_store(path).read_rows(np.arange(len(X)))
        labels = np.full(len(X), -1)
        labels[picks] = y[picks]
        n, eta, w0, pi = len(X), 0.6, 1.0 / len(X), 0.2
        A = Xs @ Xs.T
        b = np.where(labels >= 0, eta * 0 + (1 - eta), 1 / (1 + w0))
        G = np.linalg.inv(np.eye(n) - (b / A.sum(1))[:, None] * A)
        share = G * (1 - b)[None, :]                    # a_ij: where walks from i end
        yprime = np.where(labels >= 0, labels, pi)
        f = dense_f(Xs, labels, pi, eta)
        assert why["f"] == pytest.approx(f[i], rel=1e-9)
        for p in why["points"]:
            assert p["weight"] == pytest.approx(share[i, p["index"]], rel=1e-8, abs=1e-13)
            assert p["contribution"] == pytest.approx(share[i, p["index"]] * labels[p["index"]], rel=1e-8, abs=1e-13)
        unl = labels < 0
        assert why["prior"] == pytest.approx((share[i, unl] * yprime[unl]).sum(), rel=1e-8)
        assert why["prior"] + sum(p["contribution"] for p in why["points"]) == pytest.approx(f[i], rel=1e-10)
        assert why["labeled"] == pytest.approx(sum(p["contribution"] for p in why["points"]), rel=1e-12)
        order = [(-p["contribution"], -abs(p["weight"])) for p in why["points"]]
        assert order == sorted(order)
        negatives = sorted((j for j in picks if labels[j] == 0), key=lambda j: -share[i, j])[:3]
        assert [p["index"] for p in why["negatives"]] == negatives        # the ones it is most like
        engine.close()


def test_why_this_point_for_wnas(store_factory):
    X, y = clustered_points(60, 5, prevalence=0.3, seed=4, spread=0.8)
    engine = bigsearch.WNAS(store_factory(X, y, "hdf5", "float64", 7))
    engine.tell([0, 1, 2, 3, 4, 5], y[:6])
    i = engine.ask()
    why = explain(engine, i, engine.history, top=6)
    labels = np.full(len(X), -1)
    labels[:6] = y[:6]
    assert sum(p["contribution"] for p in why["points"]) == pytest.approx(dense_wnas(X, labels)[i], rel=1e-9)
    engine.close()


# -- the web application ----------------------------------------------------------------
@pytest.fixture
def client_for(tmp_path, store):
    """The real server (`bigsearch serve` in a subprocess) on a new session, and an HTTP
    client for it; with the page's CSRF token and (off loopback) the printed access token."""
    servers = []

    def make(host="127.0.0.1", *args, cookie=True):
        d = tmp_path / f"s{len(servers)}"
        Session.create(store, d, pi=0.1).close()
        servers.append(server_process(d, "--host", host, *args).start())
        token = re.search(r"access token: (\S+)", servers[-1].banner[1])
        auth = {"Authorization": f"Bearer {token.group(1)}"} if token else {}
        state = PageClient(servers[-1].url).get("/api/state", headers=auth).get_json()
        guard = SimpleNamespace(token=token and token.group(1), csrf_token=state["csrf"])
        client = PageClient(servers[-1].url)
        if token and cookie:                     # as the page does: the printed address sets a cookie
            assert client.get(f"/?token={guard.token}").status_code == 303
        return client, guard
    yield make
    for server in servers:
        assert server.stop()[0] == 0


def post(client, path, body, csrf, **headers):
    return client.post(path, json=body, headers={"X-CSRF-Token": csrf, **headers})


def test_changes_need_the_csrf_token_and_the_page_origin(client_for):
    client, guard = client_for()
    html = client.get("/").get_data(as_text=True)
    assert guard.csrf_token in html and "{{CSRF}}" not in html
    i = client.get("/api/state").get_json()["item"]["index"]
    assert client.post("/api/answer", json={"index": i, "label": 1}).status_code == 403
    assert post(client, "/api/answer", {"index": i, "label": 1}, "wrong").status_code == 403
    r = post(client, "/api/answer", {"index": i, "label": 1}, guard.csrf_token, Origin="http://evil.example")
    assert r.status_code == 403 and "cross-site" in r.get_json()["error"]
    r = client.post("/api/answer", data=f"index={i}&label=1", headers={"X-CSRF-Token": guard.csrf_token},
                    content_type="application/x-www-form-urlencoded")
    assert r.status_code == 415
    assert client.get("/api/state").get_json()["progress"]["labels"] == 0
    r = post(client, "/api/answer", {"index": i, "label": 1}, guard.csrf_token, Origin=client.base)  # the page's
    assert r.status_code == 200 and r.get_json()["progress"]["labels"] == 1
    r = post(client, "/api/answer", {"index": i, "label": 0}, guard.csrf_token)
    assert r.status_code == 409 and r.get_json()["state"]["progress"]["labels"] == 1
    r = post(client, "/api/answer", {"index": "7", "label": 1}, guard.csrf_token)
    assert r.status_code == 400 and "not an integer" in r.get_json()["error"]
    r = post(client, "/api/answer", {"index": 10**6, "label": 1}, guard.csrf_token)
    assert r.status_code == 400 and "out of range" in r.get_json()["error"]
    csv = client.get("/api/export.csv").get_data(as_text=True).splitlines()
    assert csv[0] == "index,id,label,time" and csv[1].startswith(f"{i},,1,")


def test_loopback_server_refuses_other_host_names(client_for):
    client, _ = client_for()
    assert client.get("/api/state", headers={"Host": "attacker.example:8765"}).status_code == 403
    assert client.get("/api/state", headers={"Host": "localhost:8765"}).status_code == 200


def test_loopback_needs_the_token_too_unless_no_token(client_for):
    """Any user of the machine can reach 127.0.0.1: the token is asked there too (its
    cookie named after the port, so two servers do not overwrite each other's), and
    /api/ping says the server is there; --no-token serves without it, on loopback only."""
    client, guard = client_for(cookie=False)
    for path in ("/api/state", "/api/ping"):
        r = client.get(path)
        assert r.status_code == 403 and r.get_json()["code"] == "token"
    r = client.get(f"/?token={guard.token}")
    port = client.base.rsplit(":", 1)[1]
    assert r.status_code == 303 and r.headers["Set-Cookie"].startswith(f"bigsearch_token_{port}=")
    assert client.get("/api/ping").get_json() == {"ok": True}
    i = client.get("/api/state").get_json()["item"]["index"]
    assert post(client, "/api/answer", {"index": i, "label": 0}, guard.csrf_token).status_code == 200
    client, guard = client_for("127.0.0.1", "--no-token")
    assert guard.token is None and client.get("/api/state").status_code == 200
    assert client.get("/api/state", headers={"Host": "attacker.example"}).status_code == 403
    r = run_cli("serve", "no-such-session", "--host", "0.0.0.0", "--no-token")      # refused before it is opened
    assert r.returncode == 2 and r.stderr == ("Error: --no-token is only for a loopback --host: 0.0.0.0 is not one, "
                                              "and every request to it needs the access token\n")


def test_other_hosts_need_the_token(client_for):
    client, guard = client_for(host="0.0.0.0", cookie=False)
    assert client.get("/api/state").status_code == 403
    assert client.get("/api/state?token=wrong").status_code == 403
    assert client.get("/api/state", headers={"Authorization": f"Bearer {guard.token}"}).status_code == 200
    r = client.get(f"/?token={guard.token}")
    cookie = r.headers["Set-Cookie"]
    assert r.status_code == 303 and "HttpOnly" in cookie and "SameSite=Strict" in cookie
    assert client.get("/api/state").status_code == 200         # the cookie now
    i = client.get("/api/state").get_json()["item"]["index"]
    assert post(client, "/api/answer", {"index": i, "label": 0}, guard.csrf_token).status_code == 200


# -- the command -------------------------------------------------------------------------
def start_server(directory, *args, sigint_ignored=False):
    """`bigsearch serve` in a subprocess; returns (process, url) once it listens. With
    ``sigint_ignored`` it starts as a shell's background job does, SIGINT ignored."""
    ignore = (lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if sigint_ignored else None
    proc = subprocess.Popen([sys.executable, "-m", "bigsearch", "serve", str(directory), "--port", "0", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=ignore)
    line = proc.stdout.readline()
    match = re.search(r"at (http://\S+)", line)
    if not match:
        proc.kill()
        raise AssertionError(f"the server did not start: {line}{proc.stderr.read()}")
    return proc, match.group(1)


def test_serve_starts_stops_and_fails_like_the_cli(tmp_path, store):
    import urllib.request
    d = tmp_path / "s"
    Session.create(store, d, pi=0.1).close()
    proc, url = start_server(d)
    try:
        state = urllib.request.urlopen(url.replace("/?", "/api/state?"), timeout=30).read()
        assert b'"labels":0' in state
        r = run_cli("serve", d, "--port", "0")                   # the session is in use
        assert r.returncode == 2 and re.fullmatch(r"Error: session \S+ is in use by process \d+.*\n", r.stderr)
        r = run_cli("session", "label", d, "1", "1")
        assert r.returncode == 2 and "in use by process" in r.stderr
        with Session.open(d, readonly=True) as reader:      # readers work meanwhile
            assert reader.n_labels == 0
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "stopped; session" in out and "has 0 labels" in out
    # in turn: the command line and the page on the same session
    assert run_cli("session", "label", d, "1", "1").returncode == 0
    r = run_cli("session", "skip", d, "2", "3")
    assert r.returncode == 0 and r.stdout == "skipped 2 points; the session has 2 skipped\n"
    r = run_cli("session", "unskip", d)
    assert r.returncode == 0 and r.stdout == "unskipped 3; the session has 1 skipped\n"
    r = run_cli("session", "skip", d, "1")
    assert r.returncode == 2 and r.stderr == "Error: point 1 is already labeled (1)\n"
    assert "skipped     1 point, proposed after every other: 2\n" in run_cli("session", "status", d).stdout
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        r = run_cli("serve", d, "--port", busy.getsockname()[1])
    assert r.returncode == 2 and re.fullmatch(r"Error: cannot listen on 127\.0\.0\.1:\d+: .*\n", r.stderr)
    r = run_cli("serve", tmp_path / "nothing")
    assert r.returncode == 2 and r.stderr.startswith("Error: no session at")
    proc, url = start_server(d)
    try:
        assert b'"labels":1' in urllib.request.urlopen(url.replace("/?", "/api/state?"), timeout=30).read()
    finally:
        proc.terminate()                     # SIGTERM: a clean stop too
        out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0 and "has 1 labels" in out
    proc, url = start_server(d, sigint_ignored=True)   # `bigsearch serve ... &` from a script
    try:
        proc.send_signal(signal.SIGINT)                # still stops it
        out, _ = proc.communicate(timeout=60)
    finally:
        proc.kill()                                    # if it did not stop, the test fails without leaving it
    assert proc.returncode == 0 and "has 1 labels" in out


# -- what ingest keeps to show a point ------------------------------------------------------
def write_idx(path, images):
    import struct
    with open(path, "wb") as fh:
        fh.write(b"\0\0\x08" + bytes([images.ndim]) + struct.pack(f">{images.ndim}i", *images.shape)
                 + images.astype(np.uint8).tobytes())


@pytest.mark.parametrize("out", ["img.zarr", "img.h5"])
def test_ingest_keeps_images_by_shape(tmp_path, out):
    from bigsearch.serve.records import read_display
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (70, 6, 5), dtype=np.uint8)
    write_idx(tmp_path / "img.idx", images)
    np.save(tmp_path / "img.npy", images.astype(np.float32) / 255)
    for source, dtype in (("img.idx", np.uint8), ("img.npy", np.float32)):
        target = tmp_path / f"{source}-{out}"
        r = run_cli("ingest", tmp_path / source, target, "--normalize", "--bias", "--chunk-rows", "16")
        assert r.returncode == 0, r.stderr
        store = bigsearch.open_store(target)
        for i in (0, 15, 16, 69):
            shown = read_display(store, i)
            assert shown["kind"] == "image" and shown["shape"] == [6, 5]
            expected = images[i] if dtype == np.uint8 else images[i].astype(np.float32) / 255
            np.testing.assert_array_equal(np.array(shown["pixels"], dtype), expected.ravel())
        assert read_display(store, 3)["range"] == ([0, 255] if dtype == np.uint8 else
                                                   [float(images.min()) / 255, float(images.max()) / 255])
        store.close()


def test_ingest_keeps_source_records_aligned_with_x(tmp_path):
    """Every row's record is its source row, after --prevalence dropped some rows."""
    from bigsearch.serve.records import read_display
    rows = [(f"p{i}", 20 + i % 50, ["Oslo", "Lima", "Pune"][i % 3], "yes" if i % 4 == 0 else "no") for i in range(300)]
    (tmp_path / "t.csv").write_text("name,age,city,label\n" + "".join(f"{a},{b},{c},{d}\n" for a, b, c, d in rows))
    for out, order in (("t.h5", ()), ("ordered.zarr", ("--cluster-order", "4"))):
        r = run_cli("ingest", tmp_path / "t.csv", tmp_path / out, "--label-column", "label", "--positive", "yes",
                    "--drop", "name", "--categorical", "city", "--prevalence", "0.1", "--normalize", "--bias", *order)
        assert r.returncode == 0, r.stderr
        store = bigsearch.open_store(tmp_path / out)
        ids = store.ids()
        assert store.n < 300 and len(ids) == store.n
        assert (np.diff(ids.astype(np.int64)) < 0).any() == bool(order)    # cluster order moved rows
        for i in range(store.n):
            fields = read_display(store, i)["fields"]
            name, age, city, label = rows[int(ids[i])]
            assert fields == {"name": name, "age": age, "city": city, "label": label}
        store.close()
    (tmp_path / "t.svm").write_text("1 1:0.5 4:2\n0 2:1.5\n1 3:-1 4:0.25\n")
    r = run_cli("ingest", tmp_path / "t.svm", tmp_path / "svm.zarr", "--normalize", "--bias")
    assert r.returncode == 0, r.stderr
    store = bigsearch.open_store(tmp_path / "svm.zarr")
    record = read_display(store, 2)["fields"]
    assert record.pop("label") == 1 and list(record.values()) == [-1.0, 0.25]
    assert read_display(bigsearch.open_store(tmp_path / "t.h5"), 0) is not None
    plain = bigsearch.create_store(tmp_path / "plain.zarr", np.ones((3, 2)))
    assert read_display(bigsearch.open_store(plain), 0) is None


def test_records_are_the_rows_as_json_dumps_writes_them():
    """The records of a block made by pyarrow's kernels (ingest/records.py) read back as
    json.dumps of each row read back: every type, nulls, non-finite floats as strings,
    whole floats still floats, strings with quotes and backslashes (SMILES), strings with
    control characters, a column of dates."""
    import datetime
    import json
    import math

    import pyarrow as pa

    from bigsearch.ingest.records import table_json

    nan, inf = float("nan"), float("inf")
    columns = {
        "x": pa.array([0.1, 1.0, 1e-7, -0.0, nan, inf, -inf, None, 1e300, 1 / 3], pa.float64()),
        "f32": pa.array([0.5, 1.5, None, 2.0, 0.25, 3.0, -1.0, 8.0, 0.0, 7.0], pa.float32()),
        "n": pa.array([1, None, -3, 4, 5, 6, 7, 8, 2**40, 0], pa.int64()),
        "ok": pa.array([True, False, None] + [True] * 7),
        "name": pa.array(["Oslo", 'say "hi"', "back\\slash", "two\nlines", "tab\t", "\u00e9t\u00e9", None,
                          "", "\x01", "plain"]),
        "plain": pa.array(["a", "b", None, "d", "e", "f", "g", "h", "i", "j"], pa.large_string()),  # Parquet's
        "smiles": pa.array(["C/C=C\\C", 'a "b"', "\\\"", "F/C=C/F", None, "", "\u00e9", "x", "y", "z"]),
        "day": pa.array([datetime.date(2020, 1, d) for d in range(1, 11)]),
    }
    batch = pa.RecordBatch.from_pydict(columns)
    texts = table_json(batch)

    def plain(v):
        return str(v) if isinstance(v, float) and not math.isfinite(v) else v

    expected = [json.loads(json.dumps({k: plain(v) for k, v in row.items()}, default=str)) for row in batch.to_pylist()]
    got = [json.loads(t) for t in texts]
    assert got == expected
    assert [list(g) for g in got] == [list(columns)] * 10  # the columns' order
    assert isinstance(got[1]["x"], float) and got[4]["x"] == "nan" and got[6]["x"] == "-inf"
    assert got[0]["f32"] == 0.5 and got[7]["x"] is None and got[1]["n"] is None
    assert list(table_json(pa.RecordBatch.from_pydict({}))) == []


def test_a_refitted_copy_continues_exactly(store_factory):
    """The page's copies of a pruned search reuse spare engines (serve/fork.py, refit):
    only the blocks either engine rescored and the labels either was told are copied,
    and the search continues bit for bit as one engine told the same answers; after a
    full pass every row is copied."""
    from bigsearch.serve.fork import fork, refit
    X, y = clustered_points(3000, 8, prevalence=0.05, seed=3, spread=0.3)
    centres = X[np.random.default_rng(0).choice(len(X), 24, replace=False)]
    order = np.argsort(np.argmax(X @ centres.T, axis=1), kind="stable")     # rows in cluster order
    X, y = X[order], y[order]
    store = store_factory(X, y, "zarr", "float32", 1000)
    engine, reference = (bigsearch.LAS(store, pi=0.05, prune=True, block_rows=64) for _ in range(2))
    for e in (engine, reference):
        e.tell(int(np.flatnonzero(y == 1)[0]), 1)
        e.sync()
    spares, shares = [], []
    for step in range(14):
        if step == 8:                     # a full pass (f read) in the lineage: everything differs
            assert np.array_equal(engine.f, reference.f)
        i = engine.ask()
        assert i == reference.ask()
        before = {k: engine.backend.gather(k).copy() for k in engine.backend.array_names()}
        branches = {}
        for label in (1, 0):
            if spares:
                copy = spares.pop()
                shares.append(refit(copy, engine))
            else:
                copy = fork(engine)
                shares.append(1.0)
            copy.tell(i, label)
            copy.sync()
            copy.ask()
            branches[label] = copy
        for k, v in before.items():       # the source is only read
            np.testing.assert_array_equal(engine.backend.gather(k), v)
        answer = int(y[i])
        reference.tell(i, answer)
        reference.sync()
        reference.ask()
        spares = [engine, branches[1 - answer]]
        engine = branches[answer]
        for k in reference.backend.array_names():
            np.testing.assert_array_equal(engine.backend.gather(k), reference.backend.gather(k),
                                          err_msg=f"{k} at step {step}")
        np.testing.assert_array_equal(engine.pruning.pruner.best, reference.pruning.pruner.best)
        assert engine.history == reference.history
    assert min(shares) < 0.3                     # blocks, not whole arrays
    assert shares[16] == shares[17] == 1.0        # after the full pass at step 8: whole arrays
    labels = np.array(engine.labels, np.int64)
    np.testing.assert_allclose(engine.f, dense_f(X.astype(np.float32).astype(np.float64), labels, 0.05),
                               rtol=1e-9, atol=1e-12)
    for e in (engine, reference, *spares):
        e.close()


def test_the_page_proposes_what_the_session_proposes_from_its_start(tmp_path, store, data):
    """A session started from a vector asks its candidates first (engine/guidance/seeding.py):
    the page shows them too, computed ahead or not, until the engine takes over."""
    X, y = data
    v = -X[np.flatnonzero(y == 1)].mean(axis=0)            # away from the positives: negatives first
    Session.create(store, tmp_path / "s", pi=0.1, start_from={"vector": v}).close()
    with Session.open(tmp_path / "s") as s:
        assert s.ask() != s.search.ask()                 # the start chooses, not the engine
        labeler = Labeler(s)
        for _ in range(6):
            item = labeler.view()["item"]
            assert item["index"] == s.ask() and item["rank"] == 1
            labeler.settle()
            labeler.answer(item["index"], int(y[item["index"]]))
        assert labeler.adopted == 6
        labeler.close()


def test_status_of_a_pruned_session_costs_no_pass(tmp_path, store, data):
    """remaining() leaves out the score sum where f is behind (pruned queries) instead of
    recomputing every f; the recent hit rate is there."""
    _, y = data
    with Session.create(store, tmp_path / "p", pi=0.1, prune=True) as s:
        for _ in range(3):
            i = s.ask()
            s.tell(i, int(y[i]))
        rem = s.status()["remaining"]
        assert rem["score_sum"] is None and "pruned" in rem["score_sum_left_out"]
        assert rem["recent_hit_rate"]["basis"] == 3
        assert s.search.pruning.stale                    # no full pass was made
        res = run_cli("session", "status", tmp_path / "p")
    assert res.returncode == 0 and "score sum   left out: the session's queries are pruned" in res.stdout
    with Session.create(store, tmp_path / "full", pi=0.1) as s:
        assert s.status()["remaining"]["score_sum"] is not None


# -- issue 25: undo, corrections, the budget, what a point shows ---------------------------
def count_reloads(monkeypatch):
    """Calls of Session._load_engine (a checkpoint restored and the labels since replayed)."""
    calls = []
    load = Session._load_engine

    def spy(session):
        calls.append(1)
        return load(session)
    monkeypatch.setattr(Session, "_load_engine", spy)
    return calls


@pytest.mark.parametrize("copy_in_memory", [True, False])
def test_undo_adopts_the_engine_kept_before_the_last_label(tmp_path, store, data, monkeypatch, copy_in_memory):
    """Undo restores the engine the page kept from before the label: no reload, and the
    state is a plain session's, bit for bit."""
    _, y = data
    Session.create(store, tmp_path / "page", pi=0.1).close()
    with Session.open(tmp_path / "page") as s:
        s.search                                        # loaded once, at the start
        reloads = count_reloads(monkeypatch)
        labeler = Labeler(s, copy_in_memory=copy_in_memory)
        for _ in range(3):
            i = labeler.view()["item"]["index"]
            labeler.settle()
            labeler.answer(i, int(y[i]))
        labeler.undo(i)
        assert reloads == []                            # restored, not rebuilt
        k = labeler.view()["item"]["index"]
        labeler.skip(k)                                 # a skip does not touch the kept state
        labeler.undo(k, skip=True)
        assert labeler.view()["item"]["index"] == i
        page_f, history = np.array(s.search.f), s.history
        labeler.settle()
        labeler.answer(i, int(y[i]))
        labeler.undo(i)
        assert reloads == []
        labeler.close()
    with Session.create(store, tmp_path / "plain", pi=0.1) as s:
        for _ in range(2):
            j = s.ask()
            s.tell(j, int(y[j]))
        assert s.history == history and s.ask() == i
        np.testing.assert_array_equal(page_f, s.search.f)


def test_session_undo_refuses_an_engine_of_another_state(tmp_path, store):
    from bigsearch.errors import ParameterError
    with Session.create(store, tmp_path / "s", pi=0.1) as s:
        s.tell([1, 2], [1, 0])                          # one group of two labels
        other = bigsearch.LAS(store, pi=0.1)
        other.tell(1, 1)
        other.sync()
        with pytest.raises(ParameterError, match="does not hold this session's labels without the last 1"):
            s.undo(1, restored=other)                   # half a group: not the state after the undo
        assert s.history == [(1, 1), (2, 0)]
        other.close()


def test_a_recent_decision_is_corrected_in_place(tmp_path, store, data):
    """Correct the second of four answers: the labels keep their order, the state is
    the dense solve's for the corrected labels, and the journal says what was done."""
    X, y = data
    Session.create(store, tmp_path / "s", pi=0.1).close()
    with Session.open(tmp_path / "s") as s:
        labeler = Labeler(s)
        for _ in range(4):
            i = labeler.view()["item"]["index"]
            labeler.answer(i, int(y[i]))
        answers = s.history
        view = labeler.view()
        assert [d["index"] for d in view["recent"]] == [i for i, _ in answers][::-1]
        second, label = answers[1]
        times = [t for _, _, t in s._history.rows()]
        view = labeler.correct(second, 1 - label)
        assert s.history == [answers[0], (second, 1 - label), *answers[2:]]
        assert view["recent"][2] == {"index": second, "id": None, "label": 1 - label, "summary": None, "was": label}
        assert [t for _, _, t in s._history.rows()] == times            # every answer keeps its time
        with pytest.raises(LabelError, match="already labeled"):
            labeler.correct(second, 1 - label)
        labels = np.full(len(X), -1)
        for j, v in s.history:
            labels[j] = v
        Xs = bigsearch.open_store(store).read_rows(np.arange(len(X)))
        np.testing.assert_allclose(s.search.f, dense_f(Xs, labels, 0.1), rtol=1e-9, atol=1e-12)
        unlabeled = next(j for j in range(len(X)) if labels[j] < 0)
        with pytest.raises(Conflict, match="not among the 10 newest"):
            labeler.correct(unlabeled, 1)
        labeler.close()
    ops = journal_ops(tmp_path / "s")
    assert [r["op"] for r in ops] == ["label"] * 4 + ["correct"]              # one record: its own event
    assert (ops[-1]["point"], ops[-1]["from"], ops[-1]["to"], ops[-1]["via"]) == (second, label, 1 - label, "page")


def test_the_budget_ends_the_page_and_starting_labels_are_not_counted(tmp_path, store, data):
    from bigsearch.serve.labeler import BudgetSpent
    _, y = data
    known = int(np.flatnonzero(y == 1)[0])
    for count_start, allowed in ((False, 3), (True, 2)):
        d = tmp_path / f"s{count_start}"
        Session.create(store, d, pi=0.1, start_from=f"ids:{known}").close()
        with Session.open(d) as s:
            labeler = Labeler(s, budget=3, count_start=count_start)
            progress = labeler.view()["progress"]
            assert (progress["labels"], progress["used"], progress["spent"]) == (1, 1 - allowed + 2, False)
            for _ in range(allowed):
                i = labeler.view()["item"]["index"]
                labeler.answer(i, int(y[i]))
            progress = labeler.view()["progress"]
            assert progress["spent"] and progress["used"] == 3 and progress["labels"] == allowed + 1
            i = labeler.view()["item"]["index"]
            with pytest.raises(BudgetSpent, match="the budget of 3 labels is spent"):
                labeler.answer(i, 0)
            assert s.n_labels == allowed + 1
            last = s.history[-1][0]
            labeler.undo(last)                          # undo reopens the budget
            assert not labeler.view()["progress"]["spent"]
            labeler.close()


def test_the_stores_labels_told_at_the_start_are_not_counted_either(tmp_path, store_factory, data):
    X, y = data
    pilot = np.full(len(y), -1, np.int8)
    pilot[:5] = y[:5]                                  # a pilot's five decisions kept in the store
    Session.create(store_factory(X, pilot, "zarr", "float32", 37), tmp_path / "s", pi=0.1, start_from="labels").close()
    with Session.open(tmp_path / "s") as s:
        labeler = Labeler(s, budget=3)
        progress = labeler.view()["progress"]
        assert (progress["labels"], progress["used"], progress["start_labels"]) == (5, 0, 5)
        labeler.close()


def test_the_recent_hit_rate_is_shown(tmp_path, store, data):
    _, y = data
    Session.create(store, tmp_path / "s", pi=0.1).close()
    with Session.open(tmp_path / "s") as s:
        labeler = Labeler(s)
        assert labeler.view()["progress"]["hit_rate"] is None
        for answer in (1, 0, 1, 0, 0):
            labeler.answer(labeler.view()["item"]["index"], answer)
        rate = labeler.view()["progress"]["hit_rate"]
        assert rate["hits"] == 2 and rate["of"] == 5 and rate["low"] < 0.4 < rate["high"]
        labeler.close()


def people_store(tmp_path, header=True):
    rows = [(f"p{i}", 20 + i % 50, ["Oslo", "Lima", "Pune"][i % 3], "yes" if i % 4 == 0 else "no") for i in range(80)]
    lines = "".join(f"{a},{b},{c},{d}\n" for a, b, c, d in rows)
    (tmp_path / "t.csv").write_text(("name,age,city,verdict\n" if header else "") + lines)
    r = run_cli("ingest", tmp_path / "t.csv", tmp_path / "t.zarr", "--label-column", "verdict" if header else "3",
                "--positive", "yes", "--drop", "name" if header else "0", "--categorical", "city" if header else "2",
                "--normalize", "--bias")
    assert r.returncode == 0, r.stderr
    return tmp_path / "t.zarr", rows


def test_the_label_column_is_never_shown_and_hide_hides_more(tmp_path):
    store, rows = people_store(tmp_path)
    Session.create(store, tmp_path / "s", pi=0.25).close()
    with Session.open(tmp_path / "s") as s:
        labeler = Labeler(s, hide=("city",), question="Is this person a yes?")
        view = labeler.view()
        i = view["item"]["index"]
        name, age, _, _ = rows[i]
        assert view["item"]["display"]["fields"] == {"name": name, "age": age}
        assert view["question"] == "Is this person a yes?"
        labeler.close()
        from bigsearch.errors import ParameterError
        with pytest.raises(ParameterError, match=r"hide: no field 'town' in the store's records \(its fields: "
                                                 r"name, age, city, verdict\)"):
            Labeler(s, hide=("town",))
    r = run_cli("serve", tmp_path / "s", "--hide", "town", "--port", "0")
    assert r.returncode == 2 and r.stderr.startswith("Error: --hide: no field 'town'") and r.stderr.count("\n") == 1


def test_why_this_point_shows_the_rest_and_the_start_that_chose(tmp_path, store, data):
    X, y = data
    v = -X[np.flatnonzero(y == 1)].mean(axis=0)
    Session.create(store, tmp_path / "s", pi=0.1, start_from={"vector": v}).close()
    with Session.open(tmp_path / "s") as s:
        labeler = Labeler(s, explain_top=2)
        item = labeler.view()["item"]
        assert item["chosen_by"] == {"strategy": "vector", "source": "vector"}
        while s.n_labels < 8 or not any(lab for _, lab in s.history):
            i = labeler.view()["item"]["index"]
            labeler.answer(i, 1 if s.n_labels >= 6 else int(y[i]))
        item = labeler.view()["item"]
        assert item["chosen_by"] is None                   # a positive: the engine chooses now
        why = item["why"]
        assert len(why["points"]) == 2 and why["rest"]["count"] == s.n_labels - 2
        total = why["prior"] + sum(p["contribution"] for p in why["points"]) + why["rest"]["contribution"]
        assert total == pytest.approx(why["f"], rel=1e-10)
        labeler.close()


def test_the_token_is_kept_mode_0600_and_rotated(tmp_path):
    import os
    import stat

    from bigsearch.serve.server import TOKEN_FILE, reachable_host, session_token
    first = session_token(tmp_path)
    assert session_token(tmp_path) == first
    assert stat.S_IMODE(os.stat(tmp_path / TOKEN_FILE).st_mode) == 0o600
    second = session_token(tmp_path, rotate=True)
    assert second != first and session_token(tmp_path) == second
    assert stat.S_IMODE(os.stat(tmp_path / TOKEN_FILE).st_mode) == 0o600
    assert reachable_host("0.0.0.0") not in ("0.0.0.0", "")
    assert reachable_host("10.1.2.3") == "10.1.2.3"


def test_refusals_are_a_page_for_people_and_json_with_a_code_for_the_page(client_for):
    client, _ = client_for(host="0.0.0.0", cookie=False)  # the real server, asked without its access token
    r = client.get("/")
    assert r.status_code == 403 and r.mimetype == "text/html"
    text = r.get_data(as_text=True)
    assert "a valid access token is required" in text and "?token=" in text and "{" not in text
    r = client.get("/api/state")
    assert r.status_code == 403 and r.get_json()["code"] == "token"
    client, guard = client_for()
    i = client.get("/api/state").get_json()["item"]["index"]
    r = post(client, "/api/answer", {"index": i, "label": 1}, "stale-token")
    assert r.status_code == 403 and r.get_json()["code"] == "csrf"
    r = post(client, "/api/correct", {"index": i, "label": 0}, guard.csrf_token)
    assert r.status_code == 409 and "not among the 10 newest" in r.get_json()["error"]


def test_a_headerless_csv_keeps_its_names_from_names_or_a_names_file(tmp_path):
    """UCI's adult.data has no header and an adult.names beside it: the page shows the
    source's names (not f0, f1, ...), and never the label column."""
    (tmp_path / "adult.names").write_text("| the classes first\n>50K, <=50K.\n\nage: continuous.\n"
                                          "workclass: Private, Self-emp, Never-worked.\n")
    rows = [(20 + i % 40, ["Private", "Self-emp", "Never-worked"][i % 3], ">50K" if i % 5 == 0 else "<=50K")
            for i in range(60)]
    (tmp_path / "adult.data").write_text("".join(f"{a},{w},{c}\n" for a, w, c in rows))
    r = run_cli("ingest", tmp_path / "adult.data", tmp_path / "a.zarr", "--format", "csv", "--label-column", "class",
                "--positive", ">50K", "--categorical", "workclass", "--normalize", "--bias")
    assert r.returncode == 0, r.stderr
    r = run_cli("ingest", tmp_path / "adult.data", tmp_path / "b.zarr", "--format", "csv", "--names", "years,job,y",
                "--label-column", "y", "--positive", ">50K", "--categorical", "job", "--normalize", "--bias")
    assert r.returncode == 0, r.stderr
    r = run_cli("ingest", tmp_path / "adult.data", tmp_path / "c.zarr", "--format", "csv", "--names", "years,job")
    assert r.returncode == 2 and r.stderr.endswith("--names gives 2 distinct names for 3 columns; "
                                                   "give one name per column\n")
    for store, names in (("a.zarr", ("age", "workclass")), ("b.zarr", ("years", "job"))):
        Session.create(tmp_path / store, tmp_path / f"s-{store}", pi=0.2).close()
        with Session.open(tmp_path / f"s-{store}") as s:
            labeler = Labeler(s)
            item = labeler.view()["item"]
            age, work, _ = rows[item["index"]]
            assert item["display"]["fields"] == {names[0]: age, names[1]: work}
            labeler.close()


def test_a_number_where_the_method_takes_one(tmp_path, store):
    """BLR takes a score, LAS a grade in [0, 1], each through the page's JSON; a number
    the method does not take is refused (400) with what it takes; a score is shown in the
    recent decisions, corrected to another and undone, as the journal keeps it."""
    Session.create(store, tmp_path / "blr", method="blr").close()
    Session.create(store, tmp_path / "las", pi=0.1).close()
    with Session.open(tmp_path / "blr") as blr, Session.open(tmp_path / "las") as las:
        clients = {}
        for name, s in (("blr", blr), ("las", las)):
            labeler, guard = Labeler(s), Guard("127.0.0.1")
            clients[name] = (labeler, create_app(labeler, guard).test_client(), guard.csrf_token)
        labeler, client, csrf = clients["blr"]
        view = client.get("/api/state").get_json()
        assert view["session"]["takes"] == "number"
        i = first = view["item"]["index"]
        r = post(client, "/api/answer", {"index": i, "label": 3.7}, csrf)
        assert r.status_code == 200, r.get_json()
        assert r.get_json()["recent"][0] == {"index": i, "id": None, "label": 3.7, "summary": None}
        assert r.get_json()["last"] == {"index": i, "label": 3.7}
        j = r.get_json()["item"]["index"]
        r = post(client, "/api/answer", {"index": j, "label": -12}, csrf)       # an integer score
        assert r.status_code == 200 and blr.history == [(i, 3.7), (j, -12.0)]
        assert r.get_json()["progress"]["positives"] == 1 and r.get_json()["progress"]["curve"] == [[1, 1], [2, 1]]
        r = post(client, "/api/correct", {"index": i, "label": 2.5}, csrf)
        assert r.status_code == 200 and blr.history == [(i, 2.5), (j, -12.0)]
        r = post(client, "/api/undo", {"index": j}, csrf)
        assert r.status_code == 200 and blr.history == [(i, 2.5)]
        for bad in (None, "3.7", True, 1e400, 10**400):
            r = client.post("/api/answer", data=f'{{"index": {j}, "label": {json_text(bad)}}}',
                            headers={"X-CSRF-Token": csrf}, content_type="application/json")
            assert r.status_code == 400 and r.get_json()["error"].startswith("blr takes 0, 1 or any finite number")
        labeler, client, csrf = clients["las"]
        view = client.get("/api/state").get_json()
        assert view["session"]["takes"] == "grade"
        i = view["item"]["index"]
        r = post(client, "/api/answer", {"index": i, "label": 3.7}, csrf)
        assert r.status_code == 400
        assert r.get_json()["error"] == "las takes 0, 1 or a grade in [0, 1], not 3.7"
        r = post(client, "/api/answer", {"index": i, "label": 0.25}, csrf)
        assert r.status_code == 200 and las.history == [(i, 0.25)]
        assert r.get_json()["recent"][0]["label"] == 0.25 and r.get_json()["progress"]["positives"] == 0
        for labeler, _, _ in clients.values():
            labeler.close()
    with Session.open(tmp_path / "blr", readonly=True) as s:        # read back from the journal
        assert s.history == [(first, 2.5)] and s.status()["undone"] == 1   # the undo's (a correction is its own)
        assert [(c["point"], c["from"], c["to"]) for c in s.corrections] == [(first, 3.7, 2.5)]
    assert journal_ops(tmp_path / "las") == [{"op": "label", "index": [i], "label": [0.25]}]


def json_text(value):
    """``value`` as a JSON text, Python's spelling of the non-finite floats included."""
    import json
    return json.dumps(value)


# -- what the lists name, and documents ----------------------------------------------------
def test_document_roles_by_the_names_reviewers_files_use():
    from bigsearch.serve.records import document_roles
    spec = {"kind": "fields", "array": "records"}
    fields = {"PY": 2019, "Primary Title": "A", "AB": "text", "Mesh-Terms": "x; y", "T2": "J", "AU": "B",
              "DO": "10.1/2", "n": 3}
    assert document_roles(spec, fields) == {"title": "Primary Title", "abstract": "AB", "keywords": "Mesh-Terms",
                                            "year": "PY", "venue": "T2", "authors": "AU", "doi": "DO"}
    assert document_roles(spec, {"title": "A", "TITLE": "B"}) == {"title": "title"}       # the first one
    assert document_roles(spec, {"abstract": "only an abstract"}) == {"abstract": "abstract"}
    assert document_roles(spec, {"year": 2019, "journal": "J", "name": "x"}) is None       # no title, no abstract
    explicit = {**spec, "document": {"title": "Headline", "abstract": "Body", "venue": "hidden one", "bogus": "n"}}
    assert document_roles(explicit, {"Headline": "A", "Body": "B", "title": "not this", "n": 1}) == \
        {"title": "Headline", "abstract": "Body"}
    assert document_roles(explicit, {"title": "A"}) is None      # the spec says where; its fields are not shown


def test_the_page_names_records_by_their_content(tmp_path):
    """A store whose display spec maps the parts of a document (as the text ingest writes
    it): the item carries the mapping, the last decisions and why-this-point's records
    carry their titles (a plain record: its first fields), a blind start and the words to
    highlight are in the view."""
    import zarr
    rows = [(f"Headline {i}", f"Body {i} " * 30, i % 7, "yes" if i % 4 == 0 else "no") for i in range(60)]
    (tmp_path / "d.csv").write_text("Headline,Body,x,verdict\n" + "".join(f"{a},{b},{c},{d}\n" for a, b, c, d in rows))
    r = run_cli("ingest", tmp_path / "d.csv", tmp_path / "d.zarr", "--label-column", "verdict", "--positive", "yes",
                "--drop", "Headline,Body", "--normalize", "--bias")
    assert r.returncode == 0, r.stderr
    group = zarr.open_group(tmp_path / "d.zarr", mode="r+")
    group.attrs["display"] = {**group.attrs["display"], "document": {"title": "Headline", "abstract": "Body"}}
    Session.create(tmp_path / "d.zarr", tmp_path / "s", pi=0.25).close()
    with Session.open(tmp_path / "s") as s:
        labeler = Labeler(s, highlight=("body", " body ", "rand*", ""))
        view = labeler.view()
        assert view["blind"] and view["highlight"] == ["body", "rand*"]
        assert view["item"]["display"]["document"] == {"title": "Headline", "abstract": "Body"}
        answered = []
        for answer in (0, 1, 0, 1):
            i = labeler.view()["item"]["index"]
            labeler.answer(i, answer)
            answered.append(i)
        view = labeler.view()
        assert not view["blind"]
        assert [d["summary"] for d in view["recent"]] == [{"text": f"Headline {i}"} for i in answered[::-1]]
        why = view["item"]["why"]
        assert {p["summary"]["text"] for p in why["points"] + why["negatives"]} <= {f"Headline {i}" for i in answered}
        assert [p["label"] for p in why["negatives"]] == [0, 0]
        labeler.close()
    (tmp_path / "people").mkdir()
    store, people = people_store(tmp_path / "people")
    Session.create(store, tmp_path / "p", pi=0.25).close()
    with Session.open(tmp_path / "p") as s:
        labeler = Labeler(s)
        i = labeler.view()["item"]["index"]
        view = labeler.answer(i, 0)
        name, age, city, _ = people[i]
        assert view["recent"][0]["summary"] == {"text": f"name {name} · age {age} · city {city}"}
        assert "document" not in view["item"]["display"]
        labeler.close()
