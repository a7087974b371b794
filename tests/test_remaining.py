"""Positives remaining (engine/guidance/remaining.py): the estimators on their own, then as
`session status` and `run` report them."""

import json
import math

import numpy as np
import pytest

import bigsearch
from bigsearch import Session, simulate
from bigsearch.engine.guidance.remaining import (
    _z,
    draw_sample,
    recent_hit_rate,
    remaining_summary,
    sample_weights,
    sampled_estimate,
    sampled_remaining,
    score_sum,
    wilson,
)
from bigsearch.errors import ParameterError
from bigsearch.testing import clustered_points

from conftest import run_cli


def test_normal_quantile_and_wilson_interval():
    assert _z(0.95) == pytest.approx(1.959964, abs=1e-6)
    assert _z(0.99) == pytest.approx(2.575829, abs=1e-6)
    # Wilson's 95% interval for 0 of 20 and 5 of 20 (published values)
    assert wilson(0, 20) == pytest.approx((0.0, 0.16113), abs=1e-5)
    assert wilson(5, 20) == pytest.approx((0.11186, 0.46870), abs=1e-5)
    assert wilson(0, 0) == (0.0, 1.0)


def test_score_sum_counts_unlabeled_points_only_with_a_bernoulli_interval():
    f = np.array([0.9, 0.5, 1.2, -0.1, 0.2])
    labels = np.array([1, -1, -1, -1, 0])
    est = score_sum(f, labels)
    assert est.value == pytest.approx(0.5 + 1.0 + 0.0)  # clipped to [0, 1]; labeled points left out
    half = 1.959964 * math.sqrt(0.25)
    assert (est.low, est.high) == pytest.approx((max(0, 1.5 - half), min(3, 1.5 + half)), abs=1e-6)
    assert est.basis == 3
    with pytest.raises(ParameterError, match="same shape"):
        score_sum(f, labels[:4])


def test_recent_hit_rate_reads_the_last_window_of_answers():
    answers = np.array([1] * 30 + [0] * 15 + [1] * 5)
    est = recent_hit_rate(answers, window=20)
    assert est.value == 0.25 and est.basis == 20
    assert (est.low, est.high) == pytest.approx(wilson(5, 20))
    assert recent_hit_rate(np.array([0.7, 0.2]), window=5).value == 0.5  # graded: >= 0.5 is positive


def test_the_sampled_estimate_is_unbiased_for_any_scores():
    """One draw of Hansen-Hurwitz has expectation sum_k p_k (y_k / p_k) = the true count,
    whatever f: checked exactly over the drawing distribution, then by simulation."""
    rng = np.random.default_rng(0)
    n = 200
    y = (rng.random(n) < 0.1).astype(float)
    labels = np.full(n, -1)
    labels[:20] = y[:20]
    truth = y[20:].sum()
    for f in (rng.random(n), 0.05 + 0.9 * y, 1 - y):  # uninformative, good, adversarial scores
        idx, p = sample_weights(f, labels)
        assert np.all(idx >= 20) and p.sum() == pytest.approx(1.0)
        assert np.sum(p * (y[idx] / p)) == pytest.approx(truth)
    f = 0.05 + 0.9 * y
    covered = 0
    for _ in range(200):
        idx, p = draw_sample(f, labels, 50, rng)
        est = sampled_estimate(y[idx], p)
        covered += est.low <= truth <= est.high
    assert covered >= 170  # a 95% interval: at least 85% of 200 samples, allowing for noise


def test_estimators_refuse_bad_arguments():
    with pytest.raises(ParameterError, match="nothing remains"):
        sample_weights(np.ones(3), np.zeros(3))
    with pytest.raises(ParameterError, match="at least 2 draws"):
        draw_sample(np.ones(3), -np.ones(3), 1, np.random.default_rng(0))
    with pytest.raises(ParameterError, match="probabilities"):
        sampled_estimate(np.ones(3), np.array([0.5, 0.0, 0.5]))
    with pytest.raises(ParameterError, match="window"):
        recent_hit_rate(np.ones(3), window=0)


def test_a_sample_without_replacement_estimates_what_is_left_now():
    est = sampled_remaining(100, np.array([1, 0, 0, 0]), found_since=1)
    low, high = wilson(1, 4)
    assert (est.value, est.basis) == (24.0, 4)
    assert (est.low, est.high) == pytest.approx((max(100 * low - 1, 0), 100 * high - 1))
    assert sampled_remaining(50, np.zeros(10), found_since=0).value == 0.0
    with pytest.raises(ParameterError, match="no point of the sample"):
        sampled_remaining(50, np.zeros(0), 0)


def test_summary_without_labels_or_probability_scores():
    s = remaining_summary(None, -np.ones(4), np.array([]))
    assert s == {"found": 0, "unlabeled": 4, "score_sum": None, "recent_hit_rate": None}


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    X, y = clustered_points(200, 6, prevalence=0.1, seed=3, spread=0.8)
    path = tmp_path_factory.mktemp("rem") / "s.zarr"
    bigsearch.create_store(path, X, y, chunk_rows=64)
    return path, y


def test_session_status_shows_the_estimates(tmp_path, store):
    path, y = store
    d = tmp_path / "sess"
    with Session.create(path, d, pi=0.1) as s:
        for _ in range(6):
            i = s.ask()
            s.tell(i, int(y[i]))
        hist = [lab for _, lab in s.history]
    res = run_cli("session", "sample", d, "-m", 30, "--seed", 5, "--json")
    drawn = json.loads(res.stdout)
    assert len(set(drawn)) == 30 and not set(drawn) & {i for i, _ in Session.open(d, readonly=True).history}
    answered = drawn[:12]
    with Session.open(d) as s:
        s.tell(answered, [int(y[i]) for i in answered])
        f, labels = np.array(s.search.f), np.array(s.search.labels)
    expected = sampled_remaining(194, y[answered], int(y[answered].sum()))
    hist_all = hist + [int(y[i]) for i in answered]
    with Session.open(d, readonly=True) as r:  # what `status --json` prints
        rem = json.loads(json.dumps(r.status()))["remaining"]
    assert rem["score_sum"]["value"] == pytest.approx(score_sum(f, labels).value)
    assert rem["recent_hit_rate"]["value"] == pytest.approx(np.mean(hist_all[-20:]))
    assert rem["found"] == sum(hist_all) and rem["unlabeled"] == 182
    assert rem["sample"] == {"drawn": 30, "answered": 12, "estimate": expected.as_dict()}
    text = run_cli("session", "status", d).stdout
    assert f"left        ~{expected.value:,.0f} positives unlabeled (95% interval {expected.low:,.0f}-" in text
    assert "from 12 of the 30 random points labeled" in text
    assert f"score sum   {rem['score_sum']['value']:,.0f} (f summed over 182 unlabeled points" in text
    assert f"recent      {sum(hist_all[-20:])} positive in the last 18 labels" in text


def test_a_run_records_the_estimates_at_its_end(store):
    path, y = store
    record = simulate(path, "las", 10, seed=1)
    rem = record["remaining"]
    assert rem["found"] == 1 + record["hits"][-1]  # the initial positive and the hits
    assert rem["unlabeled"] == 200 - 11 and rem["score_sum"]["basis"] == 189
    assert simulate(path, "wnas", 3, seed=1)["remaining"]["score_sum"] is None  # WNAS's f is no probability


def test_status_export_and_a_runs_end_at_alpha_0_rebuild_no_J(tmp_path, store, passes):
    """After a batch at alpha = 0, J lags behind: `session status` (its score sum reads f),
    a checkpoint, the labels' export and the estimate at the end of `run` rebuild none
    (counted: LAS's passes that recompute J from K^-1, an n r^2 pass each)."""
    path, y = store
    with Session.create(path, tmp_path / "sess", pi=0.1, alpha=0.0, checkpoint_every=1000) as s:
        s.tell(int(np.flatnonzero(y)[0]), 1)
        batch = s.search.next_batch(12)
        s.tell(batch, [int(y[i]) for i in batch])
        s.ask()
        passes.clear()
        assert s.status()["remaining"]["score_sum"] is not None
        s.checkpoint()
        s.export(tmp_path / "labels.csv")
        assert passes == []
    record = simulate(path, "las", 30, seed=1, batch_size=12, alpha=0.0)
    assert record["remaining"]["score_sum"] is not None
    j_passes = [p for p in passes if p.rebuilds_J and p.store == str(path)]
    assert j_passes == []  # not even the initialization's: at alpha = 0 no query reads J
