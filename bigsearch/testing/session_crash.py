"""Crash testing of sessions: a driver labels in a loop and is killed with SIGKILL.

The driver is a real process doing what an analyst does: ask, label (now and then a
wrong label, then undo it), with a checkpoint every few labels, acknowledging each
step in an ack file only after the session returned. The controller kills it with
SIGKILL after a random delay, then opens the session (as a reader) and checks:

- every acknowledged label is in force exactly once (and at most the one operation
  in flight when the driver died was added or undone);
- the labels in force are a prefix of an uninterrupted reference session's, and the
  next query and f equal the reference's at that step (f to 1e-12; bit-identity is
  counted).

Process starts are what a kill costs, so the driver is forked from a zygote: one
Python start imports bigsearch and warms the numba kernels on a throwaway session,
then forks a fresh driver per kill (the forked driver is single-threaded until it
opens the session, so fork is safe here). A kill that leaves a checkpoint's temporary
directory behind provably landed during checkpointing; those are counted.

    python -m bigsearch.testing.session_crash zygote STORE SESSION LIMIT CHECKPOINT_EVERY
"""

import os
import shutil
import signal
import sys
import time
from pathlib import Path

import numpy as np

from .forking import Forker, serve

DECOY_EVERY, DECOY_AT = 7, 3      # at steps k = 3, 10, 17, ...: a wrong label, then undo


def is_decoy_step(k):
    return k % DECOY_EVERY == DECOY_AT


# -- the driver (runs in the forked child) ---------------------------------------------------
def drive(store, session_dir, ack_path, y, limit, checkpoint_every):
    from ..errors import SessionNotFoundError
    from ..session import Session
    fd = os.open(ack_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)

    def ack(text):
        os.write(fd, f"{text}\n".encode())

    try:
        s = Session.open(session_dir)
    except SessionNotFoundError:
        s = Session.create(store, session_dir, checkpoint_every=checkpoint_every)
    history = s.history
    if history and history[-1][1] != y[history[-1][0]]:   # died between a wrong label and its undo
        s.undo(1)
        ack("U")
    while s.n_labels < limit:
        k = s.n_labels
        q = s.ask()
        if is_decoy_step(k):
            s.tell(q, 1 - int(y[q]))
            ack(f"L {q} {1 - int(y[q])}")
            s.undo(1)
            ack("U")
        s.tell(q, int(y[q]))
        ack(f"L {q} {int(y[q])}")
    ack("full")
    time.sleep(3600)


def zygote(store, session_dir, limit, checkpoint_every):
    """Warm up, then fork one driver per request ``{"ack": ACK_PATH}`` on stdin (forking.py)."""
    from ..session import Session
    from ..storage import open_store
    with open_store(store) as st:
        y = st.labels()
    warm = Path(f"{session_dir}.warmup")
    shutil.rmtree(warm, ignore_errors=True)
    with Session.create(store, warm, checkpoint_every=2) as s:
        for _ in range(5):
            s.tell(s.ask(), 0)
        s.undo(2)
    with Session.open(warm) as s:
        s.tell(s.ask(), 1)
    shutil.rmtree(warm)
    serve(lambda request: _child(store, session_dir, request["ack"], y, limit, checkpoint_every))


def _child(*args):
    code = 0
    try:
        drive(*args)
    except BaseException as e:  # report anything, then leave without running the zygote's code
        with open(args[2], "a") as fh:
            fh.write(f"error {type(e).__name__}: {e}".replace("\n", " ") + "\n")
        code = 1
    finally:
        os._exit(code)


# -- the reference ------------------------------------------------------------------------------
def reference_run(store, directory, limit, checkpoint_every):
    """The driver's program without interruptions: per step k, the query and f before
    labeling, and (on decoy steps) the query and f after the wrong label. Checks on the
    way that undoing the wrong label restores the state exactly."""
    from ..session import Session
    from ..storage import open_store
    with open_store(store) as st:
        y = st.labels()
    ref = {"labels": [], "q": [], "f": [], "decoy_q": {}, "decoy_f": {}}
    with Session.create(store, directory, checkpoint_every=checkpoint_every) as s:
        for k in range(limit + 1):
            q = s.ask()
            ref["q"].append(q)
            ref["f"].append(np.array(s.search.f))
            if k == limit:
                break
            if is_decoy_step(k):
                s.tell(q, 1 - int(y[q]))
                ref["decoy_q"][k], ref["decoy_f"][k] = s.ask(), np.array(s.search.f)
                s.undo(1)
                if s.ask() != q or not np.array_equal(s.search.f, ref["f"][k]):
                    raise AssertionError(f"reference: undo at step {k} did not restore the state exactly")
            s.tell(q, int(y[q]))
            ref["labels"].append((q, int(y[q])))
    ref["y"] = y
    return ref


# -- the controller -----------------------------------------------------------------------------
class Zygote:
    def __init__(self, store, session_dir, limit, checkpoint_every):
        self.forker = Forker([sys.executable, "-m", "bigsearch.testing.session_crash", "zygote", str(store),
                              str(session_dir), str(limit), str(checkpoint_every)],
                             env={**os.environ, "PYTHONWARNINGS": "ignore"})
        if not self.forker.ready:
            raise RuntimeError(f"the zygote is not ready to fork (exit status {self.forker.proc.poll()})")

    def run_and_kill(self, ack_path, delay):
        """Fork a driver, SIGKILL it after ``delay`` seconds; returns its exit status (minus
        the signal that ended it)."""
        pid = self.forker.start({"ack": str(ack_path)})
        time.sleep(delay)
        os.kill(pid, signal.SIGKILL)
        return self.forker.wait()

    def close(self):
        self.forker.close()


def acknowledged(ack_path, labels):
    """Apply one driver's acknowledgements to the labels in force before it started:
    (labels in force per the acknowledgements, acks per kind, last ack, error lines)."""
    labels, acks, last, errors = list(labels), {"L": 0, "U": 0}, None, []
    text = Path(ack_path).read_text() if Path(ack_path).exists() else ""
    for line in text.splitlines():
        word, *rest = line.split()
        if word == "L":
            labels.append((int(rest[0]), int(rest[1])))
        elif word == "U":
            labels.pop()
        elif word == "error":
            errors.append(line)
        acks[word] = acks.get(word, 0) + 1
        last = word
    return labels, acks, last, errors


def check_after_kill(session_dir, acked, ref, tol=1e-12):
    """Open the session and compare it with the acknowledgements and the reference.
    Returns a dict of what was found; raises AssertionError on any discrepancy."""
    from ..session import Session
    y = ref["y"]
    with Session.open(session_dir, readonly=True) as s:
        held = s.history
        in_flight = _in_flight(held, acked, y)
        decoy = bool(held) and held[-1][1] != y[held[-1][0]]
        base = held[:-1] if decoy else held
        k = len(base)
        if base != ref["labels"][:k]:
            raise AssertionError(f"labels in force differ from the reference's first {k}")
        q_ref, f_ref = (ref["decoy_q"][k], ref["decoy_f"][k]) if decoy else (ref["q"][k], ref["f"][k])
        if decoy and held[-1] != (ref["q"][k], 1 - int(y[ref["q"][k]])):
            raise AssertionError(f"step {k}: unexpected wrong label {held[-1]}")
        q, f = s.ask(), np.array(s.search.f)
    if q != q_ref:
        raise AssertionError(f"after {k} labels{' and a wrong one' if decoy else ''} the next query is {q}, "
                             f"the reference's is {q_ref}")
    err = float(np.abs(f - f_ref).max())
    if err > tol:
        raise AssertionError(f"after {k} labels f differs from the reference by {err:.3g}")
    return {"held": held, "labels": k, "in_flight": in_flight, "bit_identical": err == 0.0}


def _in_flight(held, acked, y):
    """What the session holds beyond the acknowledgements: None, "label" or "undo"."""
    if held == acked:
        return None
    if len(held) == len(acked) + 1 and held[:-1] == acked:
        return "label"                      # journaled, killed before the ack
    if held == acked[:-1] and acked[-1][1] != y[acked[-1][0]]:
        return "undo"                       # an undo of a wrong label, killed before the ack
    raise AssertionError(f"acknowledged labels are not in force exactly once: acknowledged {len(acked)} "
                         f"(last {acked[-3:]}), the session holds {len(held)} (last {held[-3:]})")


def crash_test(workdir, kills, *, seed=0, max_delay=0.25, n=600, r=8, limit=160, checkpoint_every=3,
               progress=None):
    """Run ``kills`` kill-and-check rounds; returns counts (raises AssertionError on failure)."""
    from ..storage import create_store
    from ..synthetic import clustered_points
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    X, y = clustered_points(n, r, prevalence=0.1, seed=seed, spread=0.8)
    store = create_store(workdir / "store.h5", X, y, chunk_rows=64, overwrite=True)
    ref = reference_run(store, workdir / "reference", limit, checkpoint_every)
    session_dir, ack_path = workdir / "session", workdir / "acks"
    rng = np.random.default_rng(seed)
    stats = {"kills": 0, "sigkilled": 0, "checked": 0, "during_checkpoint": 0, "before_first_ack": 0,
             "in_flight_label": 0, "in_flight_undo": 0, "bit_identical": 0, "sessions": 1,
             "labels_acknowledged": 0}
    zyg = Zygote(store, session_dir, limit, checkpoint_every)
    held = []                               # labels in force, as last verified
    stalled = 0                             # kills in a row that found no new label in force
    try:
        for kill in range(kills):
            ack_path.unlink(missing_ok=True)
            # a loaded machine can make opening alone outlast the delay: widen it until
            # labelling gets somewhere again, so every round keeps making progress
            status = zyg.run_and_kill(ack_path, rng.uniform(0, max_delay * (1 + stalled)))
            stats["kills"] += 1
            stats["sigkilled"] += status == -signal.SIGKILL
            if any(".tmp-" in p.name for p in (session_dir / "checkpoints").glob(".*")):
                stats["during_checkpoint"] += 1
            acked, acks, last, errors = acknowledged(ack_path, held)
            if errors:
                raise AssertionError(f"kill {kill}: the driver failed: {errors[0]}")
            stats["before_first_ack"] += last is None
            stats["labels_acknowledged"] += acks["L"]
            if not session_dir.exists():    # killed before the session was created
                stalled += 1
                continue
            found = check_after_kill(session_dir, acked, ref)
            stalled = stalled + 1 if found["labels"] <= _true_labels(held, y) else 0
            held = found["held"]
            stats["checked"] += 1
            if found["in_flight"]:
                stats[f"in_flight_{found['in_flight']}"] += 1
            stats["bit_identical"] += found["bit_identical"]
            if progress:
                progress(kill, stats)
            if found["labels"] >= limit - 1 or last == "full":
                shutil.rmtree(session_dir)  # a finished round: start a new session
                held = []
                stats["sessions"] += 1
    finally:
        zyg.close()
    return stats


def _true_labels(held, y):
    """Labels in force, not counting a trailing wrong one."""
    return len(held) - (bool(held) and held[-1][1] != y[held[-1][0]])


if __name__ == "__main__":
    if sys.argv[1:2] == ["zygote"]:
        store_arg, session_arg, limit_arg, every_arg = sys.argv[2:6]
        zygote(store_arg, session_arg, int(limit_arg), int(every_arg))
    else:
        sys.exit("usage: python -m bigsearch.testing.session_crash zygote STORE SESSION LIMIT CHECKPOINT_EVERY")
