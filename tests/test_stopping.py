"""The stopping rule's recall estimate (engine/guidance/stopping.py) against a direct
computation: the fitted change point, decay and rate maximize the likelihood over a fine
grid, the interval's ends are the extreme counts of the fits the deviance bound admits, and
the rule's promises hold on streams of hits drawn from a known rate."""

import math

import numpy as np
import pytest

from bigsearch.engine.guidance import stopping
from bigsearch.engine.guidance.stopping import recall_estimate, stop_reached
from bigsearch.errors import ParameterError


def direct(answers, n_total, level, given):
    """The same estimate by brute force: every (uc, b, lam) on a fine grid of lam, the
    Poisson log-likelihood of the window's hits under the rate lam e^{b min(u, uc)} summed
    record by record, and the expected hits among the records left summed term by term."""
    y = np.asarray(answers) >= 0.5
    read, found = len(y), int(y.sum())
    W = min(read - given, max(stopping.MIN_WINDOW, math.ceil(stopping.WINDOW_SHARE * read)))
    window = y[read - W :][::-1]  # distance u from the last record read
    u = np.arange(W)
    b_max = 1.0 / (stopping.SLOWEST * read)
    lams = np.geomspace(1e-6, 2.0, 20000)
    k = np.arange(1, n_total - read + 1)
    fits = []
    for uc in stopping.change_points(W):
        for b in stopping.DECAYS * b_max:
            shape = np.exp(b * np.minimum(u, uc))  # the rate's shape over the window
            # sum over the window's records of [h_u log(lam shape_u) - lam shape_u]
            ll = window.sum() * np.log(lams) + np.log(shape[window]).sum() - lams * shape.sum()
            fits.append((ll, lams * np.exp(-b * k).sum()))
    best = max(ll.max() for ll, _ in fits)
    cut = best + math.log(2 * (1 - level))  # half the chi-square(2) quantile at 2 level - 1
    admitted = np.concatenate([r[ll >= cut] for ll, r in fits])
    return found, admitted.min(), admitted.max()


def stream(shape, seed, n=600):
    """Hits drawn from a known rate: one decay ("decay"), or a plateau of 150 records at
    precision 0.8 and then a fast decay ("plateau"); a relevant and an irrelevant record given."""
    rng = np.random.default_rng(seed)
    t = np.arange(n)
    if shape == "decay":
        rate = 0.4 * np.exp(-t / 120.0)
    else:
        rate = np.where(t < 150, 0.8, 0.8 * np.exp(-(t - 150) / 15.0))
    answers = (rng.random(n) < rate).astype(int)
    answers[:2] = [1, 0]
    return answers


@pytest.mark.parametrize(("shape", "read"), [("decay", 600), ("plateau", 250), ("plateau", 170)])
@pytest.mark.parametrize("seed", [0, 1])
def test_the_interval_is_the_profile_likelihood_ones(shape, read, seed):
    n = 3000
    answers = stream(shape, seed)[:read]
    est = recall_estimate(answers, n, given=2)
    found, low, high = direct(answers, n, 0.95, 2)
    assert est.found == found
    assert est.remaining_high == pytest.approx(high, rel=2e-3)
    assert est.remaining_low == pytest.approx(low, rel=2e-3, abs=1e-6)
    assert est.recall_low == pytest.approx(found / (found + high), rel=0.01)


def test_a_plateau_then_an_end_stops_sooner_than_one_decay_would(monkeypatch):
    """Hits at precision 0.9, then a fast fall: the change point lets the decay start where
    the plateau ends, so the rule stops 30 or more records sooner than with one decay over
    the whole window (the change point fixed at its start), and still past the target."""
    n, target = 3000, 0.95
    t = np.arange(n)
    rate = np.where(t < 100, 0.9, 0.9 * np.exp(-(t - 100) / 10.0))

    def stop(answers):
        return next(k for k in range(102, n, 5) if stop_reached(recall_estimate(answers[:k], n, given=2), target))

    for seed in range(4):
        answers = (np.random.default_rng(seed).random(n) < rate).astype(int)
        answers[:2] = [1, 0]
        with_change = stop(answers)
        with monkeypatch.context() as m:
            m.setattr(stopping, "CHANGE_POINTS", np.array([1.0]))
            one_decay = stop(answers)
        assert with_change <= one_decay - 30
        assert answers[:with_change].sum() >= target * answers.sum()


def test_no_estimate_before_the_search_has_gone_far():
    est = recall_estimate([1, 0] + [0] * 20, 1000, given=2)
    assert math.isnan(est.recall) and est.recall_low == 0.0 and not stop_reached(est, 0.95)
    est = recall_estimate([0] * 300, 1000)
    assert est.found == 0 and not stop_reached(est, 0.5)


def test_everything_read_is_full_recall():
    est = recall_estimate([1, 0, 1, 0], 4)
    assert est.recall == est.recall_low == 1.0 and stop_reached(est, 0.99)


def test_a_steady_rate_never_stops():
    """Hits at a steady rate say nothing of a fall: the flat rate keeps the upper end of
    the records left high however long the run."""
    rng = np.random.default_rng(4)
    answers = (rng.random(2000) < 0.05).astype(int)
    for read in (200, 500, 1000, 2000):
        assert not stop_reached(recall_estimate(answers[:read], 20_000), 0.9)


def test_a_decay_seen_through_stops_after_the_target_and_not_long_after():
    """Hits from a rate falling exponentially (the expected total known): over many
    streams the stop comes after the target recall in at least 95% of them."""
    rng = np.random.default_rng(5)
    n, total = 5000, 100
    scale = 250.0
    rate = total / scale * np.exp(-np.arange(n) / scale)  # expected hits: ~total
    ok, late = 0, []
    for _ in range(40):
        answers = (rng.random(n) < np.minimum(rate, 1.0)).astype(int)
        R = answers.sum()
        stop = next(t for t in range(120, n + 1, 20) if stop_reached(recall_estimate(answers[:t], n), 0.95))
        ok += answers[:stop].sum() >= 0.95 * R
        late.append(stop / (np.argmax(np.cumsum(answers) >= math.ceil(0.95 * R)) + 1))
    assert ok >= 38
    assert np.median(late) < 2.0


def test_bad_arguments_say_what_is_wrong():
    with pytest.raises(ParameterError, match="level"):
        recall_estimate([1], 10, level=1.5)
    with pytest.raises(ParameterError, match="answers for"):
        recall_estimate([1, 0, 1], 2)
    with pytest.raises(ParameterError, match="target"):
        stop_reached(recall_estimate([1], 10), 0)
