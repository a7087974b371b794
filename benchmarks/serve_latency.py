"""The labelling page: time from an answer key to the next item on screen (issue 14).

A real `bigsearch serve` process and a headless Chromium; a simulated person answers
from the store's labels, either every 2 s (someone reading each item) or as fast as the
page allows. The page measures each latency itself, from the keydown event to the
animation frame that shows the next item (window.bigsearchTimings), so the figures
include the HTTP round trip, the journal fsync and the rendering.

Two servers on the same session, one after the other: with the next items computed
ahead (the default) and with --no-prefetch (the engine pass after each answer), so
their ratio is measured in one run on one machine.

    python benchmarks/serve_latency.py --n 1000000 --r 128

Writes benchmarks/results/serve_latency.json.
"""

import argparse
import shutil
import sys
import tempfile
import time

import numpy as np

from bigsearch import Session, open_store
from bigsearch.testing.serve import ServerProcess, chromium

from common import DATA, bench_store, machine, save, table

KEYS = {1: "a", 0: "x"}


def wait_until_labels(driver, labels, timeout=300):
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
        t = time.perf_counter()
        if every:
            time.sleep(max(0.0, every - (time.perf_counter() - t)))
        body.send_keys(KEYS[int(y[shown] == 1)])
        labels += 1
        shown = wait_until_labels(driver, labels)
    return driver.execute_script("return window.bigsearchTimings")[before:]


def summary(ms):
    ms = np.asarray(ms)
    return {"answers": len(ms), "p50_ms": float(np.percentile(ms, 50)), "p95_ms": float(np.percentile(ms, 95)),
            "max_ms": float(ms.max())}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--r", type=int, default=128)
    ap.add_argument("--slow", type=int, default=12, help="answers of the person who reads for 2 s")
    ap.add_argument("--fast", type=int, default=20, help="answers of the person who answers at once")
    ap.add_argument("--every", type=float, default=2.0)
    args = ap.parse_args()
    store = bench_store(args.n, args.r)
    y = open_store(store).labels()
    directory = DATA / f"serve-session-{args.n}x{args.r}"
    shutil.rmtree(directory, ignore_errors=True)
    t = time.perf_counter()
    with Session.create(store, directory, pi=0.005, checkpoint_every=50) as s:
        first = int(np.flatnonzero(y == 1)[0])
        s.tell(first, 1)                             # one known positive, as a person would start
    t_create = time.perf_counter() - t
    rows, profile = [], tempfile.mkdtemp(prefix="serve-bench-")
    driver = chromium(profile)
    try:
        for prefetch in (True, False):
            server = ServerProcess(directory, *([] if prefetch else ["--no-prefetch"]), timeout=300).start()
            try:
                driver.get(server.url)
                wait_until_labels(driver, int(server.banner[0].split(" labels)")[0].rsplit(" ", 1)[1]))
                for who, every, count in (("every 2 s", args.every, args.slow), ("at once", 0.0, args.fast)):
                    ms = person(driver, y, count, every)
                    rows.append({"prefetch": prefetch, "person": who, **summary(ms)})
                    print(rows[-1], file=sys.stderr)
            finally:
                server.stop()
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)
    table(rows, ["prefetch", "person", "answers", "p50_ms", "p95_ms", "max_ms"])
    def p95(who, prefetch):
        return next(r["p95_ms"] for r in rows if r["person"] == who and r["prefetch"] == prefetch)
    ratio = {who: p95(who, False) / p95(who, True) for who in ("every 2 s", "at once")}
    print("p95 without / with prefetch:", ratio)
    save("serve_latency", {"n": args.n, "r": args.r, "dtype": "float32", "session_create_s": t_create,
                           "rows": rows, "p95_ratio_no_prefetch_over_prefetch": ratio,
                           "note": "2 shared cores, loaded by other work; latencies measured in the page", **machine()})


if __name__ == "__main__":
    main()
