"""Sessions under SIGKILL, 1,000 times; and what durability costs per label.

1. The crash test of tests/test_session_crash.py at scale: a driver labels in a loop
   (with a wrong label and its undo every 7 steps, a checkpoint every 3 labels) and is
   SIGKILLed after a random delay, 1,000 times; after every kill the session must open,
   hold every acknowledged label exactly once, and give the uninterrupted reference's
   next query and f (bigsearch.testing.session_crash). Any failure stops the script
   with the discrepancy.
2. Per label on a larger store, measured alternately so a slow spell hits both: a
   session's tell (apply, journal append + fsync) against the bare engine's tell +
   apply; a checkpoint write; opening the session from a checkpoint, and with no
   checkpoint (engine initialization, then a replay of every label).

    python benchmarks/session_crash_stress.py [--kills 1000] [--seed 0] [--n 200000] [--r 32]
"""

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

import bigsearch
from bigsearch.testing.session_crash import crash_test

from common import bench_store, median, save, timed


def run_crash(kills, seed, workdir):
    t0 = time.perf_counter()

    def progress(kill, stats):
        if (kill + 1) % 100 == 0:
            print(f"  {kill + 1:>5} kills  {time.perf_counter() - t0:6.0f} s  {stats}", flush=True)
    stats = crash_test(workdir, kills, seed=seed, progress=progress)
    stats["seconds"] = time.perf_counter() - t0
    return stats


def measure_labels(store, labels, workdir):
    """Medians (s) of a session's tell and of the bare engine's, alternated."""
    y = bigsearch.open_store(store).labels()
    first = int(np.flatnonzero(y)[0])
    session = bigsearch.Session.create(store, workdir / "timing", pi=0.005, checkpoint_every=10**9)
    engine = bigsearch.LAS(store, pi=0.005)
    session.tell(first, 1)
    engine.tell(first, 1)
    engine.f
    with_journal, bare = [], []
    for _ in range(labels):
        i = session.ask()
        t, _ = timed(session.tell, i, int(y[i]))
        with_journal.append(t)
        j = engine.ask()
        t, _ = timed(lambda: (engine.tell(j, int(y[j])), engine.f))
        bare.append(t)
    checkpoint, _ = timed(session.checkpoint)
    session.close()
    engine.close()
    init, _ = timed(lambda: bigsearch.LAS(store, pi=0.005).f)   # where a replay from scratch starts
    opened = time_open(workdir / "timing")
    for c in (workdir / "timing" / "checkpoints").iterdir():   # force a replay of every label
        shutil.rmtree(c)
    replayed = time_open(workdir / "timing")
    return {"labels": labels, "tell_session_s": median(with_journal), "tell_engine_s": median(bare),
            "journal_overhead_s": median(with_journal) - median(bare), "checkpoint_s": checkpoint,
            "open_from_checkpoint_s": opened, "engine_init_s": init, "open_replaying_s": replayed,
            "replayed_labels": labels + 1}


def time_open(directory):
    """Seconds to open a session and have its engine state ready."""
    t = time.perf_counter()
    with bigsearch.Session.open(directory, readonly=True) as s:
        s.search
        return time.perf_counter() - t


def fsync_latency(workdir, count=100):
    path = workdir / "fsync-probe"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    t = time.perf_counter()
    for _ in range(count):
        os.write(fd, b"x" * 100 + b"\n")
        os.fsync(fd)
    os.close(fd)
    return (time.perf_counter() - t) / count


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kills", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--r", type=int, default=32)
    ap.add_argument("--labels", type=int, default=30)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="session-stress-") as tmp:
        workdir = Path(tmp)
        print(f"crash test: {args.kills} SIGKILLs", flush=True)
        crash = run_crash(args.kills, args.seed, workdir / "crash")
        print(f"survived {crash['kills']} kills in {crash['seconds']:.0f} s: {crash}")
        store = bench_store(args.n, args.r)
        print(f"per label on {store} ({args.n:,} x {args.r})", flush=True)
        timing = measure_labels(store, args.labels, workdir)
        timing["fsync_s"] = fsync_latency(workdir)
        for k, v in timing.items():
            print(f"  {k:<24} {v * 1e3:9.2f} ms" if k.endswith("_s") else f"  {k:<24} {v}")
    save("session_crash_stress", {"crash": crash, "timing": {"n": args.n, "r": args.r, **timing}})


if __name__ == "__main__":
    main()
