"""Ingest streams: memory stays bounded by the block and chunk sizes, a killed ingest
leaves no store, and the progress bar shows only on a terminal."""

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from bigsearch.errors import StoreNotFoundError
from bigsearch.storage import open_store

from conftest import run_cli, run_on_a_terminal

PEAK_CODE = """import sys
from bigsearch.cli import main
try:
    main(sys.argv[1:], standalone_mode=False)
finally:
    hwm = [line for line in open('/proc/self/status') if line.startswith('VmHWM')][0]
    print('PEAK_KB', int(hwm.split()[1]), file=sys.stderr)
"""


def write_csv(path, mb, seed=0):
    """A HIGGS-like CSV (label + 28 values) of about ``mb`` MB: one block written repeatedly."""
    rng = np.random.default_rng(seed)
    block = np.round(rng.normal(size=(5_000, 29)), 3)
    block[:, 0] = rng.integers(0, 2, len(block))
    lines = "\n".join(",".join(f"{v:.3f}" for v in row) for row in block) + "\n"
    data = lines.encode()
    repeats = max(1, int(mb * 1e6 / len(data)))
    with open(path, "wb") as fh:
        for _ in range(repeats):
            fh.write(data)
    return path, repeats * len(block)


def peak_kb(*args):
    r = subprocess.run([sys.executable, "-c", PEAK_CODE, *map(str, args)], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    return int(r.stderr.split("PEAK_KB")[-1].split()[0])


@pytest.mark.slow
@pytest.mark.large
@pytest.mark.timeout(1200)  # a 350 MB CSV written and ingested (each ingest allowed 300 s)
def test_memory_is_bounded_by_blocks_not_by_the_input(tmp_path):
    small, _ = write_csv(tmp_path / "small.csv", 0.1)
    big, rows = write_csv(tmp_path / "big.csv", 350)
    opts = ["--label-column", "0", "--chunk-rows", "20000", "-q"]
    base = peak_kb("ingest", small, tmp_path / "small.zarr", *opts)
    peak = peak_kb("ingest", big, tmp_path / "big.zarr", *opts)
    increase = (peak - base) * 1024
    size = os.path.getsize(big)
    assert size > 3 * increase, f"peak RSS grew by {increase / 1e6:.0f} MB for a {size / 1e6:.0f} MB input"
    with open_store(tmp_path / "big.zarr") as s:
        assert s.shape == (rows, 28)


@pytest.mark.parametrize("name", ["out.zarr", "out.h5"])
def test_sigkill_leaves_no_store(tmp_path, name):
    src, _ = write_csv(tmp_path / "in.csv", 60)
    out = tmp_path / name
    p = subprocess.Popen([sys.executable, "-m", "bigsearch", "ingest", src, out, "--label-column", "0",
                          "--chunk-rows", "5000", "-q"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 120
    while time.time() < deadline and p.poll() is None:
        partial = [f for f in os.listdir(tmp_path) if f.startswith(f".{name}.partial-")]
        if partial and _bytes(tmp_path / partial[0]) > 2_000_000:   # some chunks are written
            break
        time.sleep(0.05)
    assert p.poll() is None, "ingest finished before it could be killed: make the input larger"
    p.send_signal(signal.SIGKILL)
    p.wait()
    assert not out.exists()
    with pytest.raises(StoreNotFoundError):
        open_store(out)
    left = sorted(set(os.listdir(tmp_path)) - {"in.csv"})
    assert left and all(f.startswith(f".{name}.partial-") for f in left), left
    # the next ingest to the same OUT (of a small input: what is left does not depend on it)
    # removes what the killed one left
    small, small_rows = write_csv(tmp_path / "small.csv", 0.1)
    assert run_cli("ingest", small, out, "--label-column", "0", "-q").returncode == 0
    assert sorted(set(os.listdir(tmp_path)) - {"in.csv", "small.csv"}) == [name]
    assert open_store(out).n == small_rows


def _bytes(path):
    if path.is_file():
        return path.stat().st_size
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def run_on_terminal(*args):
    """Run the CLI with stderr on a pseudo-terminal; returns what the terminal showed."""
    res, shown = run_on_a_terminal(*args, env={"COLUMNS": "100"})
    assert res.returncode == 0, shown
    return shown


def test_progress_bar_on_a_terminal_only(tmp_path):
    src, _ = write_csv(tmp_path / "in.csv", 3)
    shown = run_on_terminal("ingest", src, tmp_path / "a.zarr", "--label-column", "0")
    assert "writing" in shown and "100%" in shown and "rows x 28 features" in shown
    quiet = run_on_terminal("ingest", src, tmp_path / "b.zarr", "--label-column", "0", "--quiet")
    assert quiet.strip() == ""
    piped = run_cli("ingest", src, tmp_path / "c.zarr", "--label-column", "0")
    assert piped.returncode == 0 and "%" not in piped.stderr
    summary = piped.stderr.strip().splitlines()     # the summary and its throughput per stage, no bar
    assert len(summary) == 2 and "rows x 28 features" in summary[0] and summary[1].startswith("per stage: read ")
    two_pass = run_on_terminal("ingest", src, tmp_path / "d.zarr", "--label-column", "0", "--bins", "3")
    assert "pass 1/2: statistics" in two_pass and "pass 2/2: writing" in two_pass
