"""Where do the relevant records still to find sit in the screen method's ranking when it
starts exploring?

The engine's Screen in process from a start, on a synthetic corpus (tools/make_abstracts.py,
3,000 records, corpus seed 1); at the start of each exploration phase (after 100 misses in a
row, engine/guidance/exploration.py) with relevant records still to find: the share of the
unread records ranked above each of them (by the score f), and the expected draws to the
first of them for draws uniform over the unread records and over the top q of the ranking,
k / (hits among the top k + 1). The records to find: on `multi-topic` the relevant records of
an inclusion topic not yet found (each record's topic replayed from the generator, as
exploration_weights.py does), on the other presets every relevant record not yet read.

    python benchmarks/explorations/exploration_ranks.py STORE hard 1334,718 --budget 1300
"""

import argparse
import json
import math

import numpy as np
import zarr
from exploration_streams import records_to_target
from exploration_weights import topics_of

from bigsearch.engine.guidance.exploration import exploring
from bigsearch.engine.methods.screen import Screen

TOP_SHARES = (1.0, 0.5, 0.25, 0.1)


def to_find(preset, y, kind, which, read, unread):
    """Which unread records are still to find (a mask over ``unread``)."""
    if preset != "multi-topic":
        return y[unread]
    found = {int(which[i]) for i in read if kind[i] == 2}
    return y[unread] & ~np.isin(which[unread], list(found))


def phase_row(preset, y, kind, which, told, f, read):
    unread = np.setdiff1d(np.arange(len(y)), told)
    target = to_find(preset, y, kind, which, told, unread)
    if not target.any():
        return None
    rank = np.empty(len(unread), np.int64)
    rank[np.argsort(-f[unread], kind="stable")] = np.arange(len(unread))
    draws = {}
    for q in TOP_SHARES:
        k = int(q * len(unread))
        draws[str(q)] = round(k / (int((rank[target] < k).sum()) + 1), 1)
    return dict(
        read=read,
        to_find=int(target.sum()),
        unread=len(unread),
        share_above=sorted(round(float(r / len(unread)), 3) for r in rank[target]),
        expected_draws_from_top=draws,
    )


def main(store, preset, priors, budget, explore_after=100):
    y = np.asarray(zarr.open_group(store, mode="r")["y"][:]) >= 0.5
    labels, kind, which = topics_of(len(y), preset, 1)
    assert np.array_equal(labels == 1, y), "the replayed labels differ from the store's"
    rows = []

    def at_phase_start(search, read):
        told, lab = (np.asarray(a) for a in search.history_arrays())
        if exploring(lab, explore_after) and not exploring(lab[:-1], explore_after):
            row = phase_row(preset, y, kind, which, told, np.asarray(search.f), read)
            if row is not None:
                rows.append(row)

    with Screen(store, explore_after=explore_after) as search:
        records_to_target(search, y, priors, math.ceil(0.95 * y.sum()), budget, at_phase_start)
    return rows


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("store")
    ap.add_argument("preset", help="the store's make_abstracts preset (its corpus seed 1)")
    ap.add_argument("priors", help="the start: a relevant and an irrelevant record, e.g. 1334,718")
    ap.add_argument("--budget", type=int, default=1200)
    a = ap.parse_args()
    for row in main(a.store, a.preset, [int(v) for v in a.priors.split(",")], a.budget):
        print(json.dumps(row))
