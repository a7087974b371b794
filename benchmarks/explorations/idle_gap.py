"""Does an LAS iteration slow down after the machine's CPUs have been idle for a while?

One LAS search on a store (alpha as given), then for each rest: ROUNDS iterations (tell +
ask), each after that many milliseconds of sleep. Each iteration's pass runs on two threads
(the local backend's ``_on_every_thread``: this thread and the pool's), timed here from
the hand-off: how late the pool's thread starts its share after the hand-off, and how long
each thread's share of the pass takes. Prints one JSON line per rest: the medians, and the
iterations in their slow mode (over 1.25x the fastest quartile's median).

    python benchmarks/explorations/idle_gap.py STORE --rests 0 50 100 200 --rounds 30
"""

import argparse
import json
import threading
import time

import numpy as np

import bigsearch
from bigsearch.backends import local

HAND_OFFS = []


ON_EVERY_THREAD = local.LocalBackend._on_every_thread


def timed_on_every_thread(self, fn):
    """LocalBackend._on_every_thread with the hand-off and each thread's share timed (ns)."""
    rec, own = {"hand_off": time.perf_counter_ns()}, threading.get_ident()

    def timed_share():
        who = "own" if threading.get_ident() == own else "pool"
        rec[f"{who}_start"] = time.perf_counter_ns()
        fn()
        rec[f"{who}_end"] = time.perf_counter_ns()

    ON_EVERY_THREAD(self, timed_share)
    HAND_OFFS.append(rec)


def ms(ns):
    return round(ns / 1e6, 2)


def rounds_after(search, y, i, rest, rounds):
    rows = []
    for _ in range(rounds):
        time.sleep(rest)
        HAND_OFFS.clear()
        t0 = time.perf_counter_ns()
        search.tell(i, int(y[i]))
        i = search.ask()
        total = time.perf_counter_ns() - t0
        h = HAND_OFFS[-1]
        rows.append(
            dict(
                total_ms=ms(total),
                pool_late_ms=ms(h["pool_start"] - h["hand_off"]),
                own_share_ms=ms(h["own_end"] - h["own_start"]),
                pool_share_ms=ms(h["pool_end"] - h["pool_start"]),
            )
        )
    return rows, i


def summary(rest_ms, rows):
    totals = np.array([r["total_ms"] for r in rows])
    fast = np.median(np.sort(totals)[: max(1, len(totals) // 4)])
    slow = totals > 1.25 * fast
    med = {k: round(float(np.median([r[k] for r in rows])), 2) for k in rows[0]}
    slow_rows = [r for r, s in zip(rows, slow) if s]
    slow_med = {k: round(float(np.median([r[k] for r in slow_rows])), 2) for k in rows[0]} if slow_rows else {}
    return dict(rest_ms=rest_ms, rounds=len(rows), median=med, slow=int(slow.sum()), slow_median=slow_med)


def main(store, rests, rounds, alpha):
    local.LocalBackend._on_every_thread = timed_on_every_thread
    with bigsearch.LAS(store, alpha=alpha) as search:
        y = search.store.labels()
        search.tell(int(np.flatnonzero(y)[0]), 1)
        i = search.ask()
        for _ in range(5):  # warm: kernels compiled, maps held
            search.tell(i, int(y[i]))
            i = search.ask()
        for rest in rests:
            rows, i = rounds_after(search, y, i, rest / 1e3, rounds)
            print(json.dumps(summary(rest, rows)), flush=True)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("store")
    ap.add_argument("--rests", type=float, nargs="+", default=[0, 50, 100, 200], help="milliseconds")
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--alpha", type=float, default=0.0)
    a = ap.parse_args()
    main(a.store, a.rests, a.rounds, a.alpha)
