"""Exploration: when a search has run dry, records drawn at random until one is relevant.

A ranked search reads the records most like the relevant ones found; a group of relevant
records unlike any of them (a second topic of a review) ranks low until the search stumbles
on one. On synthetic corpora with three inclusion topics the screen method read 400-520
irrelevant records in a row before it found the last topic (docs/screening.md): records
drawn at random find a group of g relevant ones among u unread in u / (g + 1) draws on
average, far fewer once the search only reads near misses. So after ``explore_after``
irrelevant records in a row, the next ``explore_after`` records are drawn uniformly from
the unread ones, then as many are ranked, and so on, until one is relevant; the ranking
then follows it. (Drawing until a hit cost a run its last relevant records: 5 left among
2,400 unread are one draw in 480, while the ranking still found one every ~100 reads.)

The draws are a function of the labels told so far (their count and the unread records),
so a run, a restored session and the dense reference draw the same records. Pure functions
of arrays; engine/methods/screen.py calls them.
"""

from __future__ import annotations

import numpy as np

EXPLORE_SEED = 20261129  # the draws' stream; the step (labels told so far) picks the draw
DRAW_BLOCK = 64


def misses_in_a_row(labels: np.ndarray) -> int:
    """How many of the last labels (in the order told) were irrelevant (< 0.5) in a row."""
    relevant = np.flatnonzero(np.asarray(labels, np.float64) >= 0.5)
    return len(labels) - 1 - int(relevant[-1]) if len(relevant) else len(labels)


def exploring(labels: np.ndarray, explore_after: int) -> bool:
    """Whether the next records are drawn at random: after ``explore_after`` > 0 irrelevant
    answers in a row, ``explore_after`` draws, then as many ranked records, and so on,
    until an answer is relevant (the labels in the order told)."""
    if explore_after <= 0:
        return False
    return (misses_in_a_row(labels) // explore_after) % 2 == 1


def random_unread(n: int, labeled: np.ndarray, k: int, step: int) -> list[int]:
    """k distinct records drawn uniformly from those of 0..n-1 not in ``labeled``, the same
    for the same (n, labeled, step); the first j of k draws are the j draws (``ask`` is the
    first of ``top(k)``): ranks among the unread from one stream, repeats skipped."""
    labeled = np.unique(np.asarray(labeled, np.int64))
    n_unread = n - len(labeled)
    k = min(k, n_unread)
    rng = np.random.default_rng([EXPLORE_SEED, step])
    ranks: dict[int, None] = {}  # insertion-ordered: the draws in the order drawn
    while len(ranks) < k:
        for r in rng.integers(n_unread, size=DRAW_BLOCK).tolist():  # a fixed block: one stream for any k
            ranks.setdefault(r)
            if len(ranks) == k:
                break
    return [_unread_at(labeled, r) for r in ranks]


def _unread_at(labeled: np.ndarray, rank: int) -> int:
    """The rank-th (from 0) record not in ``labeled`` (sorted): the least i with
    i = rank + #(labeled <= i), reached from below (O(log) per step, no array of n)."""
    i, count = rank, -1
    while count != (count := int(np.searchsorted(labeled, i, side="right"))):
        i = rank + count
    return i
