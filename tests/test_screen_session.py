"""The stopping rule in a session (issue 38): `session new --stop-at-recall`, the recall with
its interval in `status` and on the page's view, computed as engine/guidance/stopping.py
computes it from the answers in order (or from an answered random sample), and the rule
met once its lower end reaches the target."""

import numpy as np
import pytest

from bigsearch.engine.guidance.stopping import recall_estimate, stop_reached
from bigsearch.errors import ParameterError
from bigsearch.session import Session
from bigsearch.synthetic import clustered_points

from conftest import run_cli


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    X, y = clustered_points(600, 6, prevalence=0.08, seed=5, spread=0.5)
    from conftest import write_store

    return write_store(tmp_path_factory.mktemp("st"), X, y, "zarr", "float32", 64), y


def answer(session, y, k):
    for _ in range(k):
        i = int(session.candidates(1)[0]["index"])
        session.tell(i, int(y[i]))


def test_status_gives_the_rules_estimate_and_says_when_it_is_met(store, tmp_path):
    path, y = store
    with Session.create(path, tmp_path / "s", method="screen", stop_at_recall=0.9, start_from="ids:0") as s:
        first = int(np.flatnonzero(y)[0])
        s.tell(first, 1)
        answer(s, y, 40)
        early = s.status()["remaining"]["recall"]
        assert early["recall"] is None and early["stop"] is False and early["target"] == 0.9
        answer(s, y, 250)
        recall = s.status()["remaining"]["recall"]
        answers = np.array([lab for _, lab in s.history], float)
        direct = recall_estimate(answers, len(y), given=1)  # the start's known positive: not the search's pace
        assert recall["basis"] == "order"
        assert recall["recall_low"] == pytest.approx(direct.recall_low)
        assert recall["stop"] == stop_reached(direct, 0.9) is True
    # a stop from the order of the hits names its check, a random sample
    said = run_cli("session", "status", tmp_path / "s").stdout.splitlines()
    at = next(k for k, line in enumerate(said) if line.startswith("stop "))
    assert said[at] == "stop        yes: the rule is a recall of 90% reached with 95% confidence"
    assert said[at + 1].startswith("check       the rule models the hits found") and "session sample" in said[at + 1]


def test_a_random_sample_answers_instead(store, tmp_path):
    path, y = store
    with Session.create(path, tmp_path / "s", method="screen") as s:
        s.tell([int(np.flatnonzero(y)[0]), int(np.flatnonzero(y == 0)[0])], [1, 0])
        answer(s, y, 30)
        drawn = s.draw_sample(40, seed=1)
        s.tell(drawn, [int(y[i]) for i in drawn])
        recall = s.status()["remaining"]["recall"]
        sample = s.status()["remaining"]["sample"]["estimate"]
        found = sum(lab >= 0.5 for _, lab in s.history)
        assert recall["basis"] == "sample" and recall["target"] is None
        assert recall["recall_low"] == pytest.approx(found / (found + sample["high"]))


def test_the_target_is_checked_before_anything_is_written(store, tmp_path):
    path, _ = store
    with pytest.raises(ParameterError, match="stop_at_recall"):
        Session.create(path, tmp_path / "s", method="screen", stop_at_recall=1.5)
    assert not (tmp_path / "s").exists()
    out = run_cli("session", "new", path, tmp_path / "t", "--method", "screen", "--stop-at-recall", "0")
    assert out.returncode == 2 and "--stop-at-recall" in out.stderr and "Traceback" not in out.stderr


def test_the_page_view_carries_the_estimate(store, tmp_path):
    pytest.importorskip("flask")
    from bigsearch.serve.labeler import Labeler

    path, y = store
    with Session.create(path, tmp_path / "s", method="screen", stop_at_recall=0.9) as s:
        s.tell([int(np.flatnonzero(y)[0]), int(np.flatnonzero(y == 0)[0])], [1, 0])
        answer(s, y, 150)
    with Session.open(tmp_path / "s") as s:
        labeler = Labeler(s, prefetch=False, background_checkpoints=False)
        try:
            view = labeler.view()["progress"]["recall"]
        finally:
            labeler.close()
    assert view["target"] == 0.9 and view["recall"] is not None and 0 < view["recall_low"] <= view["recall"]


def test_a_session_run_dry_offers_the_draws_and_the_cli_takes_the_option(store, tmp_path):
    """A session (and so the page) offers the engine's random draws once explore_after
    irrelevant answers came in a row, the same after it is reopened; `run
    --screen-explore-after` reaches the engine and a bad value is refused cleanly."""
    path, y = store
    negatives = np.flatnonzero(y == 0)
    with Session.create(path, tmp_path / "s", method="screen", explore_after=5) as s:
        s.tell([int(np.flatnonzero(y)[0]), *map(int, negatives[:5])], [1, 0, 0, 0, 0, 0])
        assert s.search.exploring
        offered = [c["index"] for c in s.candidates(3)]
        assert offered[0] == s.ask() == s.search.ask()
        assert offered == s.search.next_batch(3)
    with Session.open(tmp_path / "s") as s:
        assert [c["index"] for c in s.candidates(3)] == offered
    first = f"{int(np.flatnonzero(y)[0])},{int(negatives[0])}"
    done = run_cli(
        "run",
        path,
        "--method",
        "screen",
        "--screen-explore-after",
        2,
        "--budget",
        6,
        "--init-index",
        first,
        "--no-plots",
        "--out",
        tmp_path / "r",
    )
    assert done.returncode == 0, done.stderr
    bad = run_cli(
        "run", path, "--method", "screen", "--screen-explore-after", -1, "--budget", 6, "--out", tmp_path / "b"
    )
    assert bad.returncode == 2 and "--screen-explore-after" in bad.stderr and "Traceback" not in bad.stderr
