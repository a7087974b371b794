"""The labelling page driven in a real headless Chromium (Selenium): keys, undo, skip,
a server restarted and killed mid-session (skips included), two tabs, a wrong token,
double presses, a dead server, documents, the decisions and why-this-record at a
desktop's 1280 px and a phone's 390 px. The journal must hold exactly the labels a
Python Session records for the same answers.

One Chromium serves the module's tests (reset between them: one window, no cookies, the
desktop size), each test its own server and session.

Needs Chromium and its driver from the system packages (`apt-get install chromium
chromium-driver`; .ci/run installs them); skipped, saying so, where they are absent.
Set BIGSEARCH_SCREENSHOTS=DIR to keep the page's screenshots (docs/serve-*.png are made so).
"""

import json
import os
import re
import signal
import time
from pathlib import Path

import numpy as np
import pytest

from bigsearch import Session
from bigsearch.testing import clustered_points
from bigsearch.testing.serve import CHROMEDRIVER, CHROMIUM, chromium
from tests.conftest import run_cli, server_process

pytest.importorskip("flask", reason="bigsearch[serve] (flask, waitress) is not installed")
webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (pip install selenium)")
from selenium.common.exceptions import TimeoutException
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import WebDriverWait

pytestmark = pytest.mark.skipif(not (CHROMIUM and CHROMEDRIVER),
                                reason="Chromium and chromedriver are not installed "
                                       "(apt-get install chromium chromium-driver; .ci/run does)")
KEY = {1: "a", 0: "x", "skip": Keys.SPACE, "undo": Keys.BACK_SPACE}
WAIT = 60
DESKTOP, PHONE = 1280, 390
MIN_VIEW_MS = 400       # app.js: how long a new record is on screen before a key answers it
# How often a wait looks at the page again: selenium's default, half a second, added about
# that much to every answer a test waits for (the page marks itself busy until a record has
# been on show MIN_VIEW_MS, so looking sooner never answers one too early).
POLL_SECONDS = 0.05


@pytest.fixture(scope="module")
def shared_chromium(tmp_path_factory):
    driver = chromium(tmp_path_factory.mktemp("chromium-profile"))
    yield driver
    driver.quit()


@pytest.fixture
def browser(shared_chromium):
    """The module's Chromium at the desktop size, left as it was found: one window, no
    cookies, no phone emulation."""
    driver = shared_chromium
    width(driver, DESKTOP)
    yield driver
    handles = driver.window_handles
    for handle in handles[1:]:
        driver.switch_to.window(handle)
        driver.close()
    driver.switch_to.window(handles[0])
    driver.get("about:blank")
    driver.execute_cdp_cmd("Network.clearBrowserCookies", {})
    driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


def width(driver, px):
    """Show the page at ``px`` wide: a desktop's window (1280) or a phone's screen (390)."""
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": px, "height": 844 if px < 700 else 900, "deviceScaleFactor": 1,
                            "mobile": px < 700})


@pytest.fixture
def data():
    return clustered_points(400, 8, prevalence=0.1, seed=9, spread=0.8)


@pytest.fixture
def store(store_factory, data):
    X, y = data
    return store_factory(X, y, "zarr", "float32", 64)


@pytest.fixture
def servers():
    started = []

    def make(*args, **kw):
        server = server_process(*args, timeout=WAIT, **kw)
        started.append(server)
        return server
    yield make
    for s in started:
        s.kill()


def waiting(driver, timeout=WAIT):
    """A WebDriverWait on ``driver`` that looks every POLL_SECONDS."""
    return WebDriverWait(driver, timeout, poll_frequency=POLL_SECONDS)


def body(driver, name):
    return driver.find_element(By.TAG_NAME, "body").get_attribute(f"data-{name}")


def wait_for(driver, labels, what="the page"):
    """Wait until the page is idle and shows ``labels`` labels; returns the index on show."""
    try:
        waiting(driver).until(
            lambda d: body(d, "busy") != "1" and body(d, "labels") == str(labels) and body(d, "index"))
    except TimeoutException:
        raise AssertionError(f"{what} did not reach {labels} labels: shows {body(driver, 'labels')}, "
                             f"status {driver.find_element(By.ID, 'status').text!r}") from None
    return int(body(driver, "index"))


def press(driver, key):
    driver.find_element(By.TAG_NAME, "body").send_keys(KEY[key])


def status_text(driver):
    return driver.find_element(By.ID, "status").text


def journal_history(directory):
    with Session.open(directory, readonly=True) as s:
        return s.history, s.status()["undone"]


def screenshot(driver, name):
    where = os.environ.get("BIGSEARCH_SCREENSHOTS")
    if where:
        driver.save_screenshot(str(Path(where) / name))


def test_label_with_keys_and_undo_as_a_python_session_would(tmp_path, browser, servers, store, data):
    _, y = data
    d = tmp_path / "page"
    Session.create(store, d, pi=0.1).close()
    server = servers(d, "--budget", "30").start()
    browser.get(server.url)
    answers = []
    shown = wait_for(browser, 0)
    for t in range(16):
        if t % 5 == 4:                                   # a slip of the finger, undone
            press(browser, 1 - int(y[shown]))
            wait_for(browser, len(answers) + 1)
            assert re.search(f"recorded point {shown} as", status_text(browser))
            press(browser, "undo")
            assert wait_for(browser, len(answers)) == shown
            assert status_text(browser) == f"undid the label of point {shown}"
        press(browser, int(y[shown]))
        answers.append((shown, int(y[shown])))
        shown = wait_for(browser, len(answers))
    assert browser.find_element(By.ID, "labels-used").text == "16 of 30"
    assert browser.find_element(By.ID, "positives-found").text == str(sum(a for _, a in answers))
    curve = browser.find_element(By.CSS_SELECTOR, "#curve polyline").get_attribute("points").split()
    assert len(curve) == 17                              # (0, 0) and one point per label
    assert not browser.find_element(By.ID, "why-table").is_displayed()       # the numbers: behind a toggle
    browser.find_element(By.CSS_SELECTOR, "#why-details summary").click()
    assert len(browser.find_elements(By.CSS_SELECTOR, "#why-table tbody tr:not(.rest):not(.total)")) == 5
    rows = [r.text for r in browser.find_elements(By.CSS_SELECTOR, "#why-table tbody tr")]
    assert rows[5].startswith("11 other answers") and rows[6].startswith("the prior")
    assert rows[7].startswith("f ") and "% of f" in browser.find_element(By.ID, "why-summary").text
    timings = browser.execute_script("return window.bigsearchTimings")
    assert len(timings) == 16 + 3
    screenshot(browser, "serve-plain.png")
    code, out, _ = server.stop()
    assert code == 0 and "has 16 labels" in out
    # the same answers from Python
    with Session.create(store, tmp_path / "python", pi=0.1) as s:
        for t in range(16):
            i = s.ask()
            if t % 5 == 4:
                s.tell(i, 1 - int(y[i]))
                s.undo()
            s.tell(i, int(y[i]))
        python_history = s.history
    assert journal_history(d) == (python_history, 3)
    assert python_history == answers


def test_skip_shows_the_next_best_and_labels_nothing(tmp_path, browser, servers, store):
    d = tmp_path / "s"
    Session.create(store, d, pi=0.1).close()
    with Session.open(d, readonly=True) as s:
        best = s.top(3)[0].tolist()
    browser.get(servers(d).start().url)
    assert wait_for(browser, 0) == best[0]
    press(browser, "skip")
    waiting(browser).until(lambda b: body(b, "index") == str(best[1]))
    wait_for(browser, 0)
    assert "the search's 2nd choice" in browser.find_element(By.ID, "item-meta").text
    press(browser, 0)
    assert wait_for(browser, 1) != best[1]
    assert journal_history(d)[0] == [(best[1], 0)]


def test_restart_kill_and_the_command_line_in_turn(tmp_path, browser, servers, store, data):
    _, y = data
    d = tmp_path / "s"
    Session.create(store, d, pi=0.1, checkpoint_every=2).close()
    server = servers(d).start()
    browser.get(server.url)
    acked = []
    shown = wait_for(browser, 0)
    for _ in range(3):
        press(browser, int(y[shown]))
        acked.append((shown, int(y[shown])))
        shown = wait_for(browser, len(acked))
    skipped = shown                                  # a skip is journaled like a label
    press(browser, "skip")
    waiting(browser).until(lambda b: body(b, "skipped") == "1" and body(b, "busy") != "1")
    shown = wait_for(browser, 3)
    # SIGKILL: nothing acknowledged is lost; the page says so and reconnects by itself
    server.proc.kill()
    server.proc.wait()
    press(browser, int(y[shown]))
    waiting(browser).until(lambda b: "cannot be reached" in status_text(b))
    assert journal_history(d)[0] == acked
    server = servers(d, port=server.port).start()
    waiting(browser).until(lambda b: status_text(b).startswith("reconnected"))
    # the key found the server gone (the page checks every few seconds whether it is there:
    # if it had noticed first, the key was not sent at all)
    assert status_text(browser) in (f"reconnected: your answer for point {shown} was not recorded; answer again",
                                    "reconnected: the server is back, answer on")
    assert wait_for(browser, 3) == shown != skipped      # the skip survived the kill
    r = run_cli("session", "next", d, "--json")          # the command line agrees with the page
    assert r.returncode == 0 and json.loads(r.stdout)[0]["index"] == shown
    press(browser, int(y[shown]))
    acked.append((shown, int(y[shown])))
    shown = wait_for(browser, 4)
    # a clean stop, the command line, and the page again
    code, out, _ = server.stop()
    assert code == 0 and "has 4 labels" in out
    r = run_cli("session", "label", d, shown, int(y[shown]))
    assert r.returncode == 0, r.stderr
    acked.append((shown, int(y[shown])))
    server = servers(d, port=server.port).start()
    browser.refresh()
    shown = wait_for(browser, 5)
    assert browser.find_element(By.ID, "last-label").text.startswith(f"point {acked[-1][0]}:")
    press(browser, "skip")                           # undo takes back the newest: the skip, then the label
    waiting(browser).until(lambda b: body(b, "skipped") == "2" and body(b, "busy") != "1")
    press(browser, "undo")
    waiting(browser).until(lambda b: status_text(b) == f"undid the skip of point {shown}")
    assert wait_for(browser, 5) == shown and body(browser, "skipped") == "1"
    press(browser, "undo")
    wait_for(browser, 4)
    server.stop(signal.SIGTERM)
    assert journal_history(d) == (acked[:4], 1)
    with Session.open(d, readonly=True) as s:
        assert s.skipped == [skipped]


def test_two_windows_never_label_a_point_twice(tmp_path, browser, servers, store):
    d = tmp_path / "s"
    Session.create(store, d, pi=0.1).close()
    url = servers(d).start().url
    browser.get(url)
    first = wait_for(browser, 0)
    tab_a = browser.current_window_handle
    browser.switch_to.new_window("window")   # side by side: both visible, neither refreshes
    browser.get(url)
    tab_b = browser.current_window_handle
    assert wait_for(browser, 0, "tab B") == first
    browser.switch_to.window(tab_a)
    press(browser, 1)
    after = wait_for(browser, 1, "tab A")
    browser.switch_to.window(tab_b)          # still shows `first`: answering it is refused
    browser.execute_script("document.dispatchEvent(new KeyboardEvent('keydown', {key: 'x'}))")
    waiting(browser).until(lambda b: "already labeled" in status_text(b))
    assert wait_for(browser, 1, "tab B") == after
    press(browser, 0)                        # tab B answers the new point
    wait_for(browser, 2, "tab B")
    browser.switch_to.window(tab_a)          # tab A has not seen that label: its undo is refused
    browser.execute_script("document.dispatchEvent(new KeyboardEvent('keydown', {key: 'Backspace'}))")
    waiting(browser).until(lambda b: "cannot undo" in status_text(b))
    wait_for(browser, 2, "tab A")
    assert journal_history(d) == ([(first, 1), (after, 0)], 0)


def test_the_page_shows_images_and_records(tmp_path, browser, servers):
    """A store ingested from IDX images and one from a CSV: the page draws the image
    and lists the record's fields by name (the screenshots in docs/ come from here)."""
    from sklearn.datasets import load_digits

    from tests.test_serve import write_idx
    digits = load_digits()
    write_idx(tmp_path / "digits.idx", (digits.images * 16).clip(0, 255))
    (tmp_path / "labels.csv").write_text("label\n" + "".join(f"{int(t == 3)}\n" for t in digits.target))
    r = run_cli("ingest", tmp_path / "digits.idx", tmp_path / "digits.zarr", "--labels", tmp_path / "labels.csv",
                "--positive", "1", "--normalize", "--bias")
    assert r.returncode == 0, r.stderr
    d = tmp_path / "threes"
    with Session.create(tmp_path / "digits.zarr", d, pi=0.1) as s:
        s.tell(3, 1)                                      # one 3 we know, as in sessions.md
    server = servers(d, "--budget", "40").start()
    browser.get(server.url)
    y = (digits.target == 3).astype(int)
    for t in range(1, 16):
        shown = wait_for(browser, t)
        press(browser, int(y[shown]))
    shown = wait_for(browser, 16)
    canvas = browser.find_element(By.ID, "item-image")
    assert (canvas.get_attribute("width"), canvas.get_attribute("height")) == ("8", "8")
    drawn = browser.execute_script(
        "const c = document.getElementById('item-image').getContext('2d');"
        "return Array.from(c.getImageData(0, 0, 8, 8).data).filter((v, k) => k % 4 === 0);")
    np.testing.assert_array_equal(drawn, np.round(255 * (digits.images[shown] * 16).clip(0, 255).ravel() / 255))
    assert len(browser.find_elements(By.CSS_SELECTOR, "#why-table tbody tr:not(.rest):not(.total)")) == 5
    screenshot(browser, "serve-image.png")
    server.stop()

    rows = [("Ada", 36, "London", "yes"), ("Alan", 41, "Wilmslow", "no"), ("Grace", 85, "Arlington", "yes")] * 20
    lines = "".join(f"{a}{i},{b},{c},{e}\n" for i, (a, b, c, e) in enumerate(rows))
    (tmp_path / "people.csv").write_text("name,age,city,label\n" + lines)
    r = run_cli("ingest", tmp_path / "people.csv", tmp_path / "people.zarr", "--label-column", "label",
                "--positive", "yes", "--drop", "name", "--categorical", "city", "--normalize", "--bias")
    assert r.returncode == 0, r.stderr
    Session.create(tmp_path / "people.zarr", tmp_path / "people", pi=0.3).close()
    server = servers(tmp_path / "people").start()
    browser.get(server.url)
    shown = wait_for(browser, 0)
    cells = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "#item-body th, #item-body td")]
    name, age, city, label = rows[shown]
    assert cells == ["name", f"{name}{shown}", "age", str(age), "city", city]      # not the label column
    screenshot(browser, "serve-record.png")
    server.stop()


# -- issue 25 ------------------------------------------------------------------------------
def journal_ops(directory):
    from bigsearch.session.journal import read_journal
    return [r["op"] for r in read_journal(Path(directory) / "journal.jsonl").records]


def test_a_lost_reply_is_read_back_from_the_server(tmp_path, browser, servers, store):
    """The answer reaches the journal but its reply is lost (as when the server dies just
    after the fsync): once reconnected the page says what the server recorded."""
    d = tmp_path / "s"
    Session.create(store, d, pi=0.1).close()
    server = servers(d).start()
    browser.get(server.url)
    shown = wait_for(browser, 0)
    browser.execute_script("""
        const real = window.fetch;
        window.fetch = async (path, init) => {
          const response = await real(path, init);
          if (path === "/api/answer") { window.fetch = real; throw new TypeError("Failed to fetch"); }
          return response;
        };""")
    press(browser, 0)
    waiting(browser).until(lambda b: status_text(b).startswith("reconnected"))
    assert status_text(browser) == f"reconnected: point {shown} is recorded as negative"
    assert any("checking whether the negative of point" in t
               for t in browser.execute_script("return window.bigsearchStatus"))
    wait_for(browser, 1)
    server.stop()
    assert journal_history(d)[0] == [(shown, 0)]


def test_keys_a_second_key_shift_and_undo_say_what_they_do(tmp_path, browser, servers, store):
    d = tmp_path / "s"
    Session.create(store, d, pi=0.1).close()
    server = servers(d).start()
    browser.get(server.url)
    first = wait_for(browser, 0)
    browser.execute_script(                          # a quick double x: two keydowns in one go
        "for (const k of ['x', 'x']) document.dispatchEvent(new KeyboardEvent('keydown', {key: k}));")
    second = wait_for(browser, 1)
    assert status_text(browser) == (f"recorded point {first} as negative "
                                    "(x pressed meanwhile: ignored, one key per answer)")
    browser.find_element(By.TAG_NAME, "body").send_keys("A")      # Shift+a
    third = wait_for(browser, 2)
    browser.execute_script(                          # Caps Lock: the key is "A" without Shift
        "document.dispatchEvent(new KeyboardEvent('keydown', {key: 'A'}));")
    wait_for(browser, 3)
    press(browser, "undo")
    assert wait_for(browser, 2) == third
    log = browser.execute_script("return window.bigsearchStatus")
    assert "undoing..." in log and log[-1] == f"undid the label of point {third}"
    server.stop()
    assert journal_history(d) == ([(first, 0), (second, 1)], 1)


def test_decisions_question_hit_rate_and_the_end_of_the_budget(tmp_path, browser, servers, store, data):
    _, y = data
    d = tmp_path / "s"
    Session.create(store, d, pi=0.1).close()
    server = servers(d, "--budget", "3", "--question", "Is this point in the target cluster?").start()
    browser.get(server.url)
    wait_for(browser, 0)
    assert browser.find_element(By.ID, "question").text == "Is this point in the target cluster?"
    answers = []
    for t in range(3):
        shown = wait_for(browser, t)
        press(browser, 1 if t == 1 else 0)
        answers.append((shown, 1 if t == 1 else 0))
    waiting(browser).until(lambda b: body(b, "spent") == "1" and body(b, "busy") != "1")
    assert browser.find_element(By.ID, "labels-used").text == "3 of 3 (budget reached)"
    assert browser.find_element(By.ID, "end").text.startswith("Budget reached: 3 labels of 3")
    assert browser.find_element(By.ID, "hit-rate").text.startswith("1 of the last 3")
    assert not browser.find_element(By.ID, "btn-positive").is_enabled()
    press(browser, 1)                                # refused aloud, nothing recorded
    waiting(browser).until(lambda b: "budget is spent" in status_text(b))
    recent = browser.find_elements(By.CSS_SELECTOR, "#recent li")
    assert [e.get_attribute("data-index") for e in recent] == [str(i) for i, _ in answers[::-1]]
    recent[2].find_element(By.TAG_NAME, "button").click()          # the first answer was wrong
    waiting(browser).until(lambda b: status_text(b) == f"corrected point {answers[0][0]} to positive")
    screenshot(browser, "serve-end.png")
    server.stop()
    assert journal_history(d)[0] == [(answers[0][0], 1), *answers[1:]]


def test_a_screening_at_its_stop_says_so_and_names_the_check(tmp_path, browser, servers, store, data):
    """A screening session answered to its stopping rule: the page's recall says the target
    is reached, and that a random sample checks it (the rule reads the order of the hits)."""
    _, y = data
    d = tmp_path / "s"
    with Session.create(store, d, method="screen", stop_at_recall=0.9, start_from=f"ids:{np.flatnonzero(y)[0]}") as s:
        while not s.status()["remaining"]["recall"]["stop"]:
            i = int(s.candidates(1)[0]["index"])
            s.tell(i, int(y[i]))
        n = len(s.history)
    server = servers(d).start()
    browser.get(server.url)
    wait_for(browser, n)
    assert body(browser, "stop") == "1"
    recall = browser.find_element(By.ID, "recall")
    assert recall.text.endswith("stop: 90% reached with 95% confidence; check it with a random sample")
    check = recall.find_element(By.CLASS_NAME, "stop-check").get_attribute("title")
    assert check.startswith("The rule models the hits found") and "bigsearch session sample" in check
    server.stop()


def test_a_phone_width_page(tmp_path, browser, servers, store):
    """At 390 px nothing is wider than the screen; the buttons, progress and status are
    on it (docs/serve-narrow.png comes from here)."""
    d = tmp_path / "s"
    Session.create(store, d, pi=0.1).close()
    server = servers(d, "--budget", "20", "--question", "Is this point in the target cluster?").start()
    browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                            {"width": 390, "height": 844, "deviceScaleFactor": 1, "mobile": True})
    browser.get(server.url)
    for t in range(3):
        wait_for(browser, t)
        press(browser, t % 2)
    wait_for(browser, 3)
    assert browser.execute_script("return document.documentElement.clientWidth") == 390
    assert browser.execute_script("return document.documentElement.scrollWidth") <= 390
    def on_screen(*names):
        for name in names:
            e = browser.find_element(By.ID, name)
            assert e.is_displayed() and in_view(browser, e), (name, e.rect)
    on_screen("btn-positive", "btn-negative", "btn-skip", "btn-undo", "status", "mini-progress", "tab-decisions")
    assert browser.find_element(By.ID, "mini-progress").location["y"] < 200     # the progress on the first screen
    browser.find_element(By.ID, "tab-progress").click()                         # the rest: a tab away
    on_screen("labels-used", "hit-rate", "status")
    browser.find_element(By.ID, "tab-item").click()
    browser.find_element(By.ID, "btn-undo").click()                # buttons are a phone's only input
    wait_for(browser, 2)
    assert browser.find_element(By.ID, "mini-progress").text == "2 of 20 labels · 1 positive"
    screenshot(browser, "serve-narrow.png")
    server.stop()


def test_a_token_that_refuses_strangers_and_outlives_restarts(tmp_path, browser, servers, store):
    """--host 0.0.0.0: a missing or wrong token is refused; the printed address is one
    another machine can use, its token becomes a cookie and leaves the address; the token is
    the same at the next start, and the open page goes on: the first key after the restart
    fetches the new server's CSRF token and is recorded once; --new-token replaces it."""
    d = tmp_path / "s"
    Session.create(store, d, pi=0.1).close()
    server = servers(d, "--host", "0.0.0.0").start()
    assert "0.0.0.0" not in server.url
    token = re.search(r"\?token=(\S+)", server.url).group(1)
    assert server.banner[1].startswith(f"access token: {token}")
    base = f"http://127.0.0.1:{server.port}/"
    for url in (base, base + "?token=wrong" + token[:4]):
        browser.get(url)
        assert "a valid access token is required" in browser.find_element(By.TAG_NAME, "body").text
    browser.get(base + "?token=" + token)  # the token becomes a cookie; the address loses it
    shown = wait_for(browser, 0)
    assert "token" not in browser.current_url
    assert server.stop()[0] == 0
    server = servers(d, "--host", "0.0.0.0", port=server.port).start()
    assert re.search(r"\?token=(\S+)", server.url).group(1) == token
    wait_for(browser, 0)
    press(browser, 1)                                  # the cookie still opens it
    wait_for(browser, 1)
    assert status_text(browser) == f"recorded point {shown} as positive"
    server.stop()
    server = servers(d, "--host", "0.0.0.0", "--new-token", port=server.port).start()
    assert re.search(r"\?token=(\S+)", server.url).group(1) != token
    browser.refresh()
    assert "a valid access token is required" in browser.find_element(By.TAG_NAME, "body").text
    assert browser.find_element(By.TAG_NAME, "h1").text == "bigsearch: access refused"
    assert server.stop()[0] == 0
    assert journal_history(d)[0] == [(shown, 1)]
    assert journal_ops(d) == ["label"]


def test_the_quickstart_page_walk_through(tmp_path, browser, servers):
    """docs/quickstart.md, "The same from the page": its commands as written (the serve
    command on a free port), answered from the CSV's fraud column in the browser."""
    import csv
    import shlex
    import shutil

    from tests.conftest import FIXTURES
    doc = (Path(__file__).resolve().parents[1] / "docs" / "quickstart.md").read_text()
    ingest = next(line for line in re.findall(r"```bash\n(.*?)```", doc, re.S)
                  if line.startswith("bigsearch ingest transactions.csv"))
    page = doc[doc.index("**The same from the page.**"):doc.index("**4. Measure it")]
    commands = [shlex.split(line[2:]) for block in re.findall(r"```console\n(.*?)```", page, re.S)
                for line in block.splitlines() if line.startswith("$ ")]
    assert [c[:2] for c in commands] == [["bigsearch", "session"], ["bigsearch", "serve"], ["bigsearch", "session"]]
    source = FIXTURES / "quickstart" / "transactions.csv"
    shutil.copy(source, tmp_path)
    fraud = [int(row["fraud"]) for row in csv.DictReader(source.open())]
    for command in (shlex.split(ingest.strip()), commands[0]):
        r = run_cli(*command[1:], cwd=tmp_path)
        assert r.returncode == 0, r.stderr
    serve = commands[1]
    budget = int(serve[serve.index("--budget") + 1])
    server = servers(tmp_path / serve[2], *serve[3:]).start()
    browser.get(server.url)
    shown = wait_for(browser, 0)
    assert browser.find_element(By.ID, "question").text == serve[serve.index("--question") + 1]
    assert "start, keyword:note=gift" in browser.find_element(By.ID, "why-start").text
    cells = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "#item-body th")]
    assert cells == ["id", "amount", "hour", "country", "channel", "note"]      # not fraud
    for t in range(budget):
        shown = wait_for(browser, t)
        press(browser, fraud[shown])
    waiting(browser).until(lambda b: body(b, "spent") == "1" and body(b, "busy") != "1")
    assert browser.find_element(By.ID, "end").text.startswith(f"Budget reached: {budget} labels of {budget}")
    assert server.stop()[0] == 0
    r = run_cli(*commands[2][1:], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "page.csv").read_text().count("\n") == budget + 1


def type_number(driver, text):
    """Type ``text`` into the page's number field and press Enter."""
    field = driver.find_element(By.ID, "number-input")
    field.send_keys(text)
    field.send_keys(Keys.ENTER)


def test_a_score_typed_in_the_number_field(tmp_path, browser, servers, store):
    """A blr session takes a score from the number field (Enter records it; keys typed in
    the field are not shortcuts), shows it among the last decisions, changes it in place,
    and the journal holds it; a las session refuses a score, saying what it takes."""
    d = tmp_path / "blr"
    Session.create(store, d, method="blr").close()
    server = servers(d).start()
    browser.get(server.url)
    first = wait_for(browser, 0)
    assert body(browser, "takes") == "number"
    assert browser.find_element(By.ID, "number-label").text == "your measurement / score"
    type_number(browser, "3.7")
    second = wait_for(browser, 1)
    assert status_text(browser) == f"recorded point {first} as 3.7"
    assert browser.find_element(By.ID, "last-label").text == f"point {first}: 3.7"
    field = browser.find_element(By.ID, "number-input")
    assert browser.switch_to.active_element == field and field.get_attribute("value") == ""   # ready for the next
    field.send_keys("-20", Keys.BACK_SPACE, Keys.SPACE, "x")    # no undo, skip or answer while typing
    assert field.get_attribute("value") == "-2" and body(browser, "labels") == "1"
    field.send_keys(".5", Keys.ENTER)
    third = wait_for(browser, 2)
    field.send_keys(Keys.ESCAPE)                                 # out of the field: the keys answer again
    press(browser, 1)
    wait_for(browser, 3)
    recent = browser.find_elements(By.CSS_SELECTOR, "#recent li")
    assert [e.find_element(By.CSS_SELECTOR, ".tag").text for e in recent] == ["positive", "-2.5", "3.7"]
    recent[2].find_element(By.CSS_SELECTOR, "button.change").click()          # 3.7 was a typo of 4.25
    change = recent[2].find_element(By.TAG_NAME, "input")
    assert browser.switch_to.active_element == change and change.get_attribute("value") == "3.7"
    change.send_keys(Keys.CONTROL, "a")
    change.send_keys("4.25", Keys.ENTER)
    waiting(browser).until(lambda b: status_text(b) == f"corrected point {first} to 4.25")
    screenshot(browser, "serve-number.png")
    server.stop()
    with Session.open(d, readonly=True) as s:                    # the journal, read back
        assert s.history == [(first, 4.25), (second, -2.5), (third, 1)]
    # a las session: a grade behind a toggle (most answers are 0 or 1), and the answer keys
    # keep working from its field: at a phone's width, then a desktop's
    d = tmp_path / "las"
    Session.create(store, d, pi=0.1).close()
    server = servers(d).start()
    width(browser, PHONE)
    browser.get(server.url)
    shown = wait_for(browser, 0)
    assert not browser.find_element(By.ID, "number-answer").is_displayed()
    browser.find_element(By.ID, "btn-grade").click()
    field = browser.find_element(By.ID, "number-input")
    assert field.is_displayed() and browser.switch_to.active_element == field
    assert browser.find_element(By.ID, "number-label").text == "a grade in [0, 1]"
    field.send_keys("x")                                 # nothing typed yet: x answers, as outside the field
    second = wait_for(browser, 1)
    assert status_text(browser) == f"recorded point {shown} as negative"
    width(browser, DESKTOP)
    field.click()
    field.send_keys("A")
    third = wait_for(browser, 2)
    assert status_text(browser) == f"recorded point {second} as positive"
    field.click()
    type_number(browser, "3.7")
    waiting(browser).until(lambda b: "not 3.7" in status_text(b))
    assert status_text(browser) == "las takes 0, 1 or a grade in [0, 1], not 3.7"
    assert "error" in browser.find_element(By.ID, "status").get_attribute("class")
    field.clear()
    field.send_keys("0.4", "x")                          # a key inside a number: said, not taken
    waiting(browser).until(lambda b: "not part of a number" in status_text(b))
    assert field.get_attribute("value") == "0.4" and body(browser, "labels") == "2"
    field.send_keys(Keys.ENTER)
    wait_for(browser, 3)
    server.stop()
    assert journal_history(d) == ([(shown, 0), (second, 1), (third, 0.4)], 0)


# -- a day's work on the page (issue 39) ----------------------------------------------------
def statuses(driver, since=0):
    return driver.execute_script("return window.bigsearchStatus")[since:]


def in_view(driver, element):
    """Whether ``element`` is on the screen as it is scrolled now."""
    return driver.execute_script(
        "const r = arguments[0].getBoundingClientRect();"
        "return r.width > 0 && r.top >= 0 && r.bottom <= innerHeight && r.left >= 0 && r.right <= innerWidth;",
        element)


def test_a_double_press_answers_one_record(tmp_path, browser, servers, store):
    """x, then x again 30-250 ms later (keys at a desktop's width, taps on a phone's): one
    label each time, and the second press is refused aloud (the record on show was new, or
    the first was still being recorded). Also: a blind start is said on the page, and the
    loopback page needs its token."""
    from bigsearch.testing.serve import PageClient
    d = tmp_path / "s"
    Session.create(store, d, pi=0.1).close()
    server = servers(d).start()
    base = server.url.split("?")[0]
    browser.get(base)                                    # any local user can reach 127.0.0.1: a token
    assert "a valid access token is required" in browser.find_element(By.TAG_NAME, "body").text
    r = PageClient(base).get("/api/state")
    assert r.status_code == 403 and r.get_json()["code"] == "token"
    browser.get(server.url)
    labels = 0
    wait_for(browser, labels)
    blind = browser.find_element(By.ID, "blind")
    assert blind.is_displayed() and "--start-from" in blind.text and "Blind start" in blind.text
    for px, how in ((DESKTOP, "key"), (PHONE, "tap")):
        width(browser, px)
        for gap in (30, 60, 100, 150, 250):
            wait_for(browser, labels)
            since = len(statuses(browser))
            browser.execute_script("""
                const [gap, how] = arguments;
                window.pressed = 0;
                const once = () => {
                  if (how === "key") document.dispatchEvent(new KeyboardEvent("keydown", {key: "x"}));
                  else document.getElementById("btn-negative").click();
                  window.pressed += 1;
                };
                once();
                setTimeout(once, gap);""", gap, how)
            waiting(browser).until(lambda b: b.execute_script("return window.pressed") == 2)
            labels += 1
            wait_for(browser, labels, f"{how} pressed twice {gap} ms apart")
            said = statuses(browser, since)
            assert body(browser, "labels") == str(labels), (px, gap, said)
            assert any("not taken" in t or "ignored" in t for t in said), (px, gap, said)
    assert blind.is_displayed()
    press(browser, 1)
    wait_for(browser, labels + 1)
    assert not blind.is_displayed()                      # a positive: the search has something to go on
    server.stop()
    history, _ = journal_history(d)
    assert [y for _, y in history] == [0] * labels + [1]


def test_a_dead_server_is_shown_and_no_answer_piles_up(tmp_path, browser, servers, store):
    """SIGKILL after an acknowledged answer: the page notices by itself (no key), says so
    and turns answering off; three keys meanwhile are refused aloud, one retry loop runs
    (not one per key), and once the server is back the page goes on and the next key is
    recorded once."""
    d = tmp_path / "s"
    Session.create(store, d, pi=0.1).close()
    server = servers(d).start()
    browser.get(server.url)
    first = wait_for(browser, 0)
    press(browser, 0)
    second = wait_for(browser, 1)
    server.proc.kill()
    server.proc.wait()
    waiting(browser, 20).until(lambda b: body(b, "connection") == "lost")
    assert browser.find_element(By.ID, "connection").text == "disconnected: retrying"
    assert status_text(browser).startswith("disconnected: the server cannot be reached")
    assert not any(browser.find_element(By.ID, f"btn-{b}").is_enabled() for b in ("positive", "negative", "skip"))
    loops = browser.execute_script("return window.bigsearchReconnects")
    since = len(statuses(browser))
    for _ in range(3):
        browser.execute_script("document.dispatchEvent(new KeyboardEvent('keydown', {key: 'x'}))")
    refused = [t for t in statuses(browser, since) if t.startswith("x not sent: the server cannot be reached")]
    assert len(refused) == 3
    width(browser, PHONE)                                  # a phone: the state is in the bar on screen
    time.sleep(3)
    assert browser.execute_script("return window.bigsearchReconnects") - loops <= 5      # ~1 a second, one loop
    assert in_view(browser, browser.find_element(By.ID, "status")) and "disconnected" in status_text(browser)
    assert not browser.find_element(By.ID, "btn-negative").is_enabled()
    assert journal_history(d)[0] == [(first, 0)]
    server = servers(d, port=server.port).start()
    waiting(browser).until(lambda b: body(b, "connection") == "ok")
    assert status_text(browser) == "reconnected: the server is back, answer on"
    assert wait_for(browser, 1) == second
    browser.find_element(By.ID, "btn-positive").click()
    wait_for(browser, 2)
    assert status_text(browser) == f"recorded point {second} as positive"
    server.stop()
    assert journal_history(d)[0] == [(first, 0), (second, 1)]
    assert journal_ops(d) == ["label", "label"]


WORDS = ("trial outcome cohort mortality children adults vaccine screening analysis sample dose follow-up "
         "hospital incidence risk review").split()


def document_rows(n=40):
    """Records as a reviewer's export has them: title, a structured abstract of about
    3,000 characters (with a 240-character word and the words to highlight), keywords,
    year, journal, authors, DOI, two numbers, and the answer (included)."""
    rng = np.random.default_rng(7)
    rows = []
    for i in range(n):
        relevant = i % 5 == 0
        sections = []
        for name in ("BACKGROUND", "METHODS", "RESULTS", "CONCLUSIONS"):
            words = list(rng.choice(WORDS, 95))
            words[3] = "randomised" if relevant else "nonrandomised"
            words[10] = "placebo" if i % 2 else "Placebo-controlled"
            sections.append(f"{name}: " + " ".join(words) + ".")
        abstract = " ".join(sections) + " " + "x" * 240 + "."
        rows.append({
            "Title": f'<img src=x onerror="window.pwned=1"> Study {i}: a {"randomised" if relevant else "cohort"} '
                     f'trial of <b>{WORDS[i % len(WORDS)]}</b> & more',
            "Abstract": abstract, "Keywords": "; ".join(rng.choice(WORDS, 4)), "Year": 1995 + i % 25,
            "Journal": f"Journal of {WORDS[(3 * i) % len(WORDS)].title()}",
            "Authors": "; ".join(f"Author{k}, A." for k in range(1 + i % 9)), "DOI": f"10.1000/doc.{i}",
            "f1": round(float(rng.normal(1.5 if relevant else 0, 1)), 4),
            "f2": round(float(rng.normal(1.5 if relevant else 0, 1)), 4),
            "included": "yes" if relevant else "no"})
    return rows


@pytest.fixture(scope="module")
def documents(tmp_path_factory):
    """A store of documents ingested from a CSV (the text columns kept as records only)."""
    import csv
    folder = tmp_path_factory.mktemp("documents")
    rows = document_rows()
    with open(folder / "records.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    r = run_cli("ingest", folder / "records.csv", folder / "records.zarr", "--label-column", "included",
                "--positive", "yes", "--drop", "Title,Abstract,Keywords,Journal,Authors,DOI", "--normalize", "--bias")
    assert r.returncode == 0, r.stderr
    return folder / "records.zarr", rows


def test_documents_read_as_documents_at_both_widths(tmp_path, browser, servers, documents):
    """The title as the heading, authors, venue and year, the DOI, keywords, the abstract
    in its sections; the words given to --highlight marked (whole words; random* any
    ending); markup in a title shown as text, never run; a 3,000-character abstract with
    a 240-character word fits 1280 and 390 px (docs/serve-document*.png come from here)."""
    path, rows = documents
    d = tmp_path / "s"
    Session.create(path, d, pi=0.2, start_from="ids:0").close()
    server = servers(d, "--highlight", "random*, placebo").start()
    browser.get(server.url)
    shown = wait_for(browser, 1)
    row = rows[shown]
    assert len(row["Abstract"]) >= 3000
    for px in (DESKTOP, PHONE):
        width(browser, px)
        title = browser.find_element(By.ID, "item-title")
        assert title.tag_name == "h2" and title.text == row["Title"]
        assert browser.find_elements(By.CSS_SELECTOR, "#item-panel img, #item-panel b") == []
        assert browser.execute_script("return window.pwned") is None
        document = browser.find_element(By.CSS_SELECTOR, "#item-body article.document")
        paragraphs = document.find_elements(By.CSS_SELECTOR, ".abstract p")
        assert [p.find_element(By.TAG_NAME, "strong").text for p in paragraphs] == \
            ["BACKGROUND:", "METHODS:", "RESULTS:", "CONCLUSIONS:"]
        text = browser.execute_script("return arguments[0].textContent", document.find_element(By.CLASS_NAME,
                                                                                                 "abstract"))
        assert "".join(text.split()) == "".join(row["Abstract"].split())     # every word, in paragraphs
        assert [k.text for k in document.find_elements(By.CSS_SELECTOR, ".keywords li")] == \
            row["Keywords"].split("; ")
        assert document.find_element(By.CLASS_NAME, "source").text.startswith(f"{row['Journal']}, {row['Year']}")
        link = document.find_element(By.CSS_SELECTOR, ".source a")
        assert link.get_attribute("href") == f"https://doi.org/{row['DOI']}"
        assert document.find_element(By.CLASS_NAME, "byline").text.startswith("Author0, A.")
        marks = [m.text for m in browser.find_elements(By.CSS_SELECTOR, "#item-panel mark")]
        assert marks and all(re.fullmatch(r"(?i)random\w*|placebo", m) for m in marks), marks
        assert "nonrandomised" not in marks and {"placebo", "Placebo"} & set(marks)
        assert browser.execute_script("return document.documentElement.scrollWidth") <= px
        for p in paragraphs + [title]:
            assert p.rect["x"] >= 0 and p.rect["x"] + p.rect["width"] <= px, (px, p.rect)
        screenshot(browser, "serve-document.png" if px == DESKTOP else "serve-document-narrow.png")
    server.stop()


def test_decisions_why_and_corrections_name_the_records(tmp_path, browser, servers, documents):
    """The last decisions and why-this-record name the records by their titles (the
    numbers behind a toggle), the header says what rank and row mean, the answer buttons
    have their colours; on a phone the decisions are a tab away, keyboard hints are gone
    and the status stays on screen; a correction says so at once, keeps every answer's
    time and is journaled as its own event; the session is its owner's only."""
    import stat
    path, rows = documents
    d = tmp_path / "s"
    Session.create(path, d, pi=0.2, start_from="ids:0").close()
    server = servers(d).start()
    browser.get(server.url)
    answered = []
    for t in range(1, 7):
        shown = wait_for(browser, t)
        answer = int(rows[shown]["included"] == "yes")
        press(browser, answer)
        answered.append((shown, answer))
    wait_for(browser, 7)
    # the header: what the numbers are; the buttons: green and red
    meta = browser.find_element(By.ID, "item-meta").text
    assert re.search(r"row \d+ of the store", meta) and "choice" in meta and "rank" not in meta and "score" not in meta
    colours = browser.execute_script(
        "return ['btn-positive', 'btn-negative'].map((id) => getComputedStyle(document.getElementById(id))"
        ".backgroundColor.match(/\\d+/g).map(Number))")
    (r1, g1, _), (r2, g2, _) = colours
    assert g1 > r1 + 20 and r2 > g2 + 20, colours
    # why this record: a plain sentence and the records by title; the numbers behind a toggle
    plain = browser.find_element(By.ID, "why-plain").text
    assert re.fullmatch(r"Like \d+ records? you marked positive:", plain), plain
    titles = {rows[i]["Title"] for i, y in [(0, 1), *answered] if y == 1}
    listed = [li.text for li in browser.find_elements(By.CSS_SELECTOR, "#why-list li")]
    assert listed and set(listed) <= titles
    assert not browser.find_element(By.ID, "why-table").is_displayed()
    assert "f =" not in browser.find_element(By.ID, "why").text
    # the last decisions: each by its record's title
    recent = browser.find_elements(By.CSS_SELECTOR, "#recent li")
    assert [li.find_element(By.CLASS_NAME, "what").text for li in recent[:6]] == \
        [rows[i]["Title"] for i, _ in answered[::-1]]
    assert not any(re.search(r"point \d+ \(", li.text) for li in recent)
    exported = browser.execute_script("return fetch('/api/export.csv').then((r) => r.text())")
    # a phone: the decisions a tab away, no keyboard hints, the status on screen
    width(browser, PHONE)
    assert not any(k.is_displayed() for k in browser.find_elements(By.CSS_SELECTOR, "#answers kbd"))
    browser.execute_script("window.scrollTo(0, document.body.scrollHeight)")
    assert in_view(browser, browser.find_element(By.ID, "status"))
    assert in_view(browser, browser.find_element(By.ID, "btn-positive"))
    browser.find_element(By.ID, "tab-progress").click()
    rate = browser.find_element(By.CSS_SELECTOR, "#hit-rate .nowrap")
    assert browser.execute_script("return arguments[0].getClientRects().length", rate) == 1
    browser.find_element(By.ID, "tab-decisions").click()
    recent = browser.find_elements(By.CSS_SELECTOR, "#recent li")
    assert in_view(browser, recent[0]) and not browser.find_element(By.ID, "item-panel").is_displayed()
    corrected, was = answered[-3]
    since = len(statuses(browser))
    recent[2].find_element(By.TAG_NAME, "button").click()           # "make positive / negative"
    waiting(browser).until(lambda b: status_text(b).startswith("corrected point"))
    said = statuses(browser, since)
    assert said[0].startswith(f"correcting point {corrected} to ") and said[-1] == \
        f"corrected point {corrected} to {'negative' if was else 'positive'}"
    assert in_view(browser, browser.find_element(By.ID, "status"))
    li = browser.find_elements(By.CSS_SELECTOR, "#recent li")[2]
    assert li.get_attribute("data-index") == str(corrected)
    assert f"corrected from {'positive' if was else 'negative'}" in li.text
    screenshot(browser, "serve-decisions-narrow.png")
    # every answer keeps its time; the correction is its own event
    after = browser.execute_script("return fetch('/api/export.csv').then((r) => r.text())")
    times = [line.rsplit(",", 1)[1] for line in exported.splitlines()[1:]]
    assert [line.rsplit(",", 1)[1] for line in after.splitlines()[1:]] == times
    assert server.stop()[0] == 0
    from bigsearch.session.journal import read_journal
    last = read_journal(d / "journal.jsonl").records[-1]
    assert (last["op"], last["point"], last["from"], last["to"], last["via"]) == \
        ("correct", corrected, was, 1 - was, "page")
    with Session.open(d, readonly=True) as s:
        assert [c["point"] for c in s.corrections] == [corrected]
    for p in (d, d / "checkpoints"):
        assert stat.S_IMODE(p.stat().st_mode) == 0o700, p
    for p in (d / "journal.jsonl", d / "session.json", d / "serve-token"):
        assert stat.S_IMODE(p.stat().st_mode) == 0o600, p
