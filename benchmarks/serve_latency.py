"""The labelling page: time from an answer key to the next item on screen (issue 14).

A real `bigsearch serve` process and a headless Chromium; a simulated person answers
from the store's labels, either every 2 s (someone reading each item) or as fast as the
page allows. The page measures each latency itself, from the keydown event to the
animation frame that shows the next item (window.bigsearchTimings), so the figures
include the HTTP round trip, the journal fsync and the rendering.

Servers on the same session, one after the other: with the next items computed ahead
(the default) and with --no-prefetch (the engine pass after each answer), so their
ratio is measured in one run on one machine. ``--prune`` makes the session's queries
pruned (LAS alpha = 0 on a store in cluster order: ``--store`` one written with
``tools/make_store.py --cluster-order 0``).

    python benchmarks/serve_latency.py --n 1000000 --r 128
    python benchmarks/serve_latency.py --store /tmp/x10m.zarr --prune --modes prefetch

``--prepare-split`` times instead, in one process, the phases of preparing both answers
(copying the engine, the tell, the pruned query, the explanation), with whole copies and
with refitted spare engines alternating item by item (serve/fork.py).

``--checkpoint-spike`` measures instead, in one process without a browser, the time of
``Labeler.answer`` for the answers at which a checkpoint comes due, with the checkpoint
written in the answer's path (as before issue 14's second round) and after the reply.

Each run adds its rows to benchmarks/results/serve_latency.json (rows of the same n,
pruning, prefetching, person, store and ``--copies`` are replaced), with the load
average during the run. The server runs the code on PYTHONPATH: to measure the page
before refitted copies, point it at a tree of that commit and pass ``--copies whole``.
"""

import argparse
import json
import os
import shutil
import signal
import sys
import tempfile
import time

import numpy as np

from bigsearch import Session, open_store

from common import DATA, RESULTS, bench_store, machine, stamp, table

KEYS = {1: "a", 0: "x"}


def wait_until_labels(driver, labels, timeout=600):
    driver.set_script_timeout(timeout)
    driver.execute_async_script("""
        const [want, done] = arguments;
        (function poll() {
          const b = document.body;
          if (b.dataset.busy !== "1" && b.dataset.labels === String(want) && b.dataset.index) done();
          else setTimeout(poll, 2);
        })();""", labels)
    return int(driver.find_element("tag name", "body").get_attribute("data-index"))


def person(driver, y, answers, every):
    """Answer ``answers`` items from y, one every ``every`` seconds (0: at once);
    returns the page's latencies in ms."""
    body = driver.find_element("tag name", "body")
    labels = int(body.get_attribute("data-labels"))
    before = len(driver.execute_script("return window.bigsearchTimings"))
    shown = wait_until_labels(driver, labels)
    for _ in range(answers):
        if every:
            time.sleep(every)
        body.send_keys(KEYS[int(y[shown] == 1)])
        labels += 1
        shown = wait_until_labels(driver, labels)
    return driver.execute_script("return window.bigsearchTimings")[before:]


def summary(ms):
    ms = np.asarray(ms)
    return {"answers": len(ms), "p50_ms": round(float(np.percentile(ms, 50)), 1),
            "p95_ms": round(float(np.percentile(ms, 95)), 1), "max_ms": round(float(ms.max()), 1)}


def new_session(store, directory, y, prune, checkpoint_every=50):
    shutil.rmtree(directory, ignore_errors=True)
    t = time.perf_counter()
    with Session.create(store, directory, pi=0.005, checkpoint_every=checkpoint_every, prune=prune or None) as s:
        s.tell(int(np.flatnonzero(y == 1)[0]), 1)      # one known positive, as a person would start
    return time.perf_counter() - t


def page_latency(args, store, y, n, r):
    from bigsearch.testing.serve import ServerProcess, chromium
    directory = DATA / f"serve-session-{n}x{r}{'-prune' if args.prune else ''}"
    t_create = new_session(store, directory, y, args.prune)
    print(f"session created in {t_create:.1f} s", file=sys.stderr)
    rows, profile = [], tempfile.mkdtemp(prefix="serve-bench-")
    driver = chromium(profile)
    try:
        for mode in args.modes.split(","):
            prefetch = mode == "prefetch"
            server = ServerProcess(directory, *([] if prefetch else ["--no-prefetch"]), timeout=900).start()
            try:
                driver.get(server.url)
                wait_until_labels(driver, int(server.banner[0].split(" labels)")[0].rsplit(" ", 1)[1]))
                for who, every, count in (("every 2 s", args.every, args.slow), ("at once", 0.0, args.fast)):
                    if not count:
                        continue
                    load = os.getloadavg()[0]
                    ms = person(driver, y, count, every)
                    rows.append({"n": n, "r": r, "prune": bool(args.prune), "prefetch": prefetch, "person": who,
                                 "copies": args.copies,
                                 **summary(ms), "load": round((load + os.getloadavg()[0]) / 2, 1),
                                 "session_create_s": round(t_create, 1), "store": str(store),
                                 "when": time.strftime("%Y-%m-%d %H:%M:%S")})
                    print(rows[-1], file=sys.stderr)
            finally:
                server.stop(signal.SIGTERM)       # (a background job ignores SIGINT)
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)
        shutil.rmtree(directory, ignore_errors=True)
    table(rows, ["n", "prune", "prefetch", "person", "answers", "p50_ms", "p95_ms", "max_ms", "load"])
    return rows


def checkpoint_spike(args, store, y, n, r):
    """Labeler.answer times at due and other answers, the checkpoint in the answer's path
    and after the reply, alternating the two in one run on the same store."""
    from bigsearch.serve.labeler import Labeler
    every, rounds = args.checkpoint_every, args.spike_rounds
    times = {False: {"due": [], "other": []}, True: {"due": [], "other": []}}
    dirs = {bg: DATA / f"serve-spike-{n}x{r}-{'bg' if bg else 'inline'}" for bg in (False, True)}
    sessions, labelers = {}, {}
    try:
        new_session(store, dirs[False], y, args.prune, checkpoint_every=every)
        shutil.rmtree(dirs[True], ignore_errors=True)
        shutil.copytree(dirs[False], dirs[True])      # the same session twice (creating one at 10M takes minutes)
        for bg in (False, True):
            sessions[bg] = Session.open(dirs[bg])
            labelers[bg] = Labeler(sessions[bg], background_checkpoints=bg)
        load = os.getloadavg()[0]
        for step in range(rounds * every):
            for bg in (False, True):                  # alternate: the same load for both
                lab, s = labelers[bg], sessions[bg]
                lab.settle()                          # a person who reads: the next items are ready
                i = lab.view()["item"]["index"]
                due = s._since_checkpoint + 1 >= every
                t = time.perf_counter()
                lab.answer(i, int(y[i] == 1))
                times[bg]["due" if due else "other"].append(1e3 * (time.perf_counter() - t))
        load = round((load + os.getloadavg()[0]) / 2, 1)
    finally:
        for bg in labelers:
            labelers[bg].close()
        for bg in sessions:
            sessions[bg].close()
        for d in dirs.values():
            shutil.rmtree(d, ignore_errors=True)
    rows = []
    for bg in (False, True):
        for kind in ("due", "other"):
            ms = np.asarray(times[bg][kind])
            rows.append({"n": n, "r": r, "checkpoint": "after the reply" if bg else "in the answer's path",
                         "answers": kind, "count": len(ms), "p50_ms": round(float(np.median(ms)), 1),
                         "max_ms": round(float(ms.max()), 1), "load": load, "prune": bool(args.prune),
                         "checkpoint_every": every,
                         "when": time.strftime("%Y-%m-%d %H:%M:%S")})
    table(rows, ["n", "checkpoint", "answers", "count", "p50_ms", "max_ms", "load"])
    return rows


def prepare_split(args, store, y, n, r):
    """What preparing both answers costs, phase by phase, in one process: a copy of the
    engine (a whole copy, ``fork``, as before issue 14's third round, and a spare engine
    refitted, ``refit``, alternating item by item), the tell, the pruned query and the
    explanation, for each of the two answers to the item on show."""
    from bigsearch import LAS
    from bigsearch.serve.explain import explain
    from bigsearch.serve.fork import fork, refit
    from bigsearch.serve.labeler import choose
    t = time.perf_counter()
    engine = LAS(store, pi=0.005, prune=bool(args.prune))
    first = int(np.flatnonzero(y == 1)[0])
    engine.tell(first, 1)
    engine.sync()
    print(f"engine ready in {time.perf_counter() - t:.1f} s", file=sys.stderr)
    history, spares, times = [(first, 1)], [], {"fork": [], "refit": []}
    load = os.getloadavg()[0]
    for step in range(2 * args.split_items + 1):
        how = "fork" if step % 2 else "refit"
        index = choose(engine, [])[0]
        branches, phases = {}, {"copy": 0.0, "tell": 0.0, "query": 0.0, "explain": 0.0, "share": 0.0}
        for label in (1, 0):
            t0 = time.perf_counter()
            if how == "refit" and spares:
                copy = spares.pop()
                phases["share"] += refit(copy, engine) / 2
            else:
                copy = fork(engine)
                phases["share"] += 0.5
            t1 = time.perf_counter()
            copy.tell(index, label)
            copy.sync()
            t2 = time.perf_counter()
            nxt = choose(copy, [])
            t3 = time.perf_counter()
            explain(copy, nxt[0], history + [(index, label)], 5, f=nxt[1])
            t4 = time.perf_counter()
            for k, a, b in (("copy", t0, t1), ("tell", t1, t2), ("query", t2, t3), ("explain", t3, t4)):
                phases[k] += 1e3 * (b - a)
            branches[label] = copy
        answer = int(y[index] == 1)
        for e in spares:
            e.close()
        spares = [engine, branches[1 - answer]]
        engine = branches[answer]
        history.append((index, answer))
        if step:                                      # the first item: no spare yet
            times[how].append(phases)
    for e in (engine, *spares):
        e.close()
    load = round((load + os.getloadavg()[0]) / 2, 1)
    rows = []
    for how, items in times.items():
        rows.append({"n": n, "r": r, "prune": bool(args.prune), "copy": how, "items": len(items),
                     **{f"{k}_ms_p50": round(float(np.median([p[k] for p in items])), 1)
                        for k in ("copy", "tell", "query", "explain")},
                     "both_ms_p50": round(float(np.median([sum(v for k, v in p.items() if k != "share")
                                                           for p in items])), 1),
                     "rows_copied": round(float(np.median([p["share"] for p in items])), 4),
                     "load": load, "when": time.strftime("%Y-%m-%d %H:%M:%S")})
    table(rows, ["n", "copy", "items", "copy_ms_p50", "tell_ms_p50", "query_ms_p50", "explain_ms_p50",
                 "both_ms_p50", "rows_copied", "load"])
    return rows


def merge(name, rows, key):
    """Add rows to the results file, replacing those with the same key."""
    path = RESULTS / "serve_latency.json"
    record = json.loads(path.read_text()) if path.exists() else {"benchmark": "serve_latency"}
    kept = [row for row in record.get(name, []) if not any(key(row) == key(new) for new in rows)]
    record[name] = kept + rows
    record["machine"] = machine()
    record["note"] = ("2 shared cores, loaded by other engineers' work (load = 1-minute load average during the "
                      "rows); latencies measured in the page; checkpoint_spike measured in-process")
    RESULTS.mkdir(exist_ok=True)
    path.write_text(json.dumps(stamp(record), indent=2, default=float))
    print(f"saved {path}", file=sys.stderr)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--r", type=int, default=128)
    ap.add_argument("--store", default=None, help="an existing store (default: the synthetic n x r bench store)")
    ap.add_argument("--prune", action="store_true", help="pruned queries (a store in cluster order)")
    ap.add_argument("--modes", default="prefetch,no-prefetch")
    ap.add_argument("--slow", type=int, default=12, help="answers of the person who reads for 2 s")
    ap.add_argument("--fast", type=int, default=20, help="answers of the person who answers at once")
    ap.add_argument("--every", type=float, default=2.0)
    ap.add_argument("--copies", default="refitted",
                    help="how the server copies the engine ahead, recorded with the rows: 'refitted' (this "
                         "code), or 'whole' when the server runs the code before it (PYTHONPATH to an old tree)")
    ap.add_argument("--checkpoint-spike", action="store_true")
    ap.add_argument("--checkpoint-every", type=int, default=5)
    ap.add_argument("--spike-rounds", type=int, default=3)
    ap.add_argument("--prepare-split", action="store_true",
                    help="time the phases of preparing both answers in-process: whole copies vs refitted spares")
    ap.add_argument("--split-items", type=int, default=6, help="items per way of copying (--prepare-split)")
    args = ap.parse_args()
    store = args.store or bench_store(args.n, args.r)
    with open_store(store) as st:
        y, n, r = st.labels(), st.n, st.r
    print(f"lscpu model: {machine()['cpu']}; load {os.getloadavg()}", file=sys.stderr)
    if args.prepare_split:
        rows = prepare_split(args, store, y, n, r)
        merge("prepare_split", rows, lambda row: (row["n"], row["prune"], row["copy"]))
    elif args.checkpoint_spike:
        rows = checkpoint_spike(args, store, y, n, r)
        merge("checkpoint_spike", rows, lambda row: (row["n"], row["checkpoint"], row["answers"]))
    else:
        rows = page_latency(args, store, y, n, r)
        merge("rows", rows, lambda row: (row.get("n"), row.get("prune", False), row["prefetch"], row["person"],
                                         row.get("store"), row.get("copies")))


if __name__ == "__main__":
    main()
