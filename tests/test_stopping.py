"""The stopping rule's recall estimate (engine/guidance/stopping.py) against a direct
computation: the fitted decay and rate maximize the likelihood over a fine grid, the
interval's ends are the extreme counts of the fits the deviance bound admits, and the
rule's promises hold on streams of hits drawn from a known rate."""

import math

import numpy as np
import pytest

from bigsearch.engine.guidance import stopping
from bigsearch.engine.guidance.stopping import recall_estimate, stop_reached
from bigsearch.errors import ParameterError


def direct(answers, n_total, level, given):
    """The same estimate by brute force: every (lam, b) on a fine grid, the Poisson
    log-likelihood of the window's hits summed term by term."""
    y = np.asarray(answers) >= 0.5
    read, found = len(y), int(y.sum())
    W = min(read - given, max(stopping.MIN_WINDOW, math.ceil(stopping.WINDOW_SHARE * read)))
    window = y[read - W :][::-1]  # distance u from the last record read
    u = np.arange(W)
    b_max = 1.0 / (stopping.SLOWEST * read)
    bs = stopping.DECAYS * b_max  # the decays the rule fits over
    lams = np.geomspace(1e-6, 2.0, 20000)
    best, fits = -np.inf, []
    k = np.arange(1, n_total - read + 1)
    hits = u[window]
    for b in bs:
        # sum over the window's records of [h_u log(lam e^{bu}) - lam e^{bu}], term by term
        ll = len(hits) * np.log(lams) + b * hits.sum() - lams * np.exp(b * u).sum()
        future = np.exp(-b * k).sum()
        fits.append((ll, lams * future))
        best = max(best, ll.max())
    cut = best - stopping._chi2_one(2 * level - 1) / 2
    admitted = np.concatenate([r[ll >= cut] for ll, r in fits])
    return found, admitted.min(), admitted.max()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_interval_is_the_profile_likelihood_ones(seed):
    rng = np.random.default_rng(seed)
    n, read = 3000, 600
    rate = 0.4 * np.exp(-np.arange(read) / 120.0)
    answers = (rng.random(read) < rate).astype(int)
    answers[:2] = [1, 0]
    est = recall_estimate(answers, n, given=2)
    found, low, high = direct(answers, n, 0.95, 2)
    assert est.found == found
    assert est.remaining_high == pytest.approx(high, rel=2e-3)
    assert est.remaining_low == pytest.approx(low, rel=2e-3, abs=1e-6)
    assert est.recall_low == pytest.approx(found / (found + high), rel=0.01)


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
