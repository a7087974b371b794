"""Block summaries stored with the store (engine/pruning/summaries.py): `bigsearch summarize` in a
subprocess (what it writes, what `info` says, each refusal), and pruned LAS and WNAS
reading them (local backend and a real dask LocalCluster) with exactly the full pass's
queries; summaries that no longer describe X are recomputed, never used."""

import shutil
import subprocess

import numpy as np
import pytest

import bigsearch
from bigsearch.engine.pruning.summaries import CHANGED, GROUP, write_block_summaries

from conftest import KINDS, run_cli, store_path, tight_blocks

N = 500


@pytest.fixture(scope="module")
def data():
    """500 points in 6 dimensions, rows sorted so that blocks are tight."""
    return tight_blocks(N, 6, 0.08, seed=11)


def make(tmp_path, data, kind, name="s", chunk_rows=150, **options):
    X, y = data
    path = store_path(tmp_path, name, kind)
    bigsearch.create_store(path, X, y, chunk_rows=chunk_rows, kind=kind, **options)
    return path


def queries(search, y, steps, k=1):
    """Queries and the scores they were chosen with, ``k`` per round, after one positive and one negative."""
    search.tell([int(np.flatnonzero(y == 1)[0]), int(np.flatnonzero(y == 0)[0])], [1, 0])
    out = []
    while len(out) < steps:
        idx, sc = search.top(k)
        out += list(zip(idx.tolist(), sc.tolist()))
        search.tell(idx.tolist(), [int(y[i]) for i in idx])
    return out


def siblings(path):
    """What else is in the store's directory (leftovers of a write would show here)."""
    return sorted(p.name for p in path.parent.iterdir() if p.name != path.name)


# -- the command -------------------------------------------------------------------
@pytest.mark.parametrize("kind", KINDS)
def test_summarize_writes_what_pruned_searches_use(tmp_path, data, kind):
    path = make(tmp_path, data, kind)
    before = siblings(path)
    done = run_cli("summarize", path, "--block-rows", 64)
    assert done.returncode == 0, done.stderr
    assert "block summaries of 10 blocks of 64 rows" in done.stdout  # 3 chunks of 150 rows (3 each) + 50 rows
    assert siblings(path) == before  # nothing left beside it
    info = bigsearch.open_store(path).describe()["block_summaries"]  # what `info --json` prints
    assert info == {"complete": True, "block_rows": 64, "basis_dim": 6, "version": 1, "fingerprint_matches": True}
    assert "block summaries: blocks of 64 rows" in run_cli("info", path).stdout
    las = bigsearch.LAS(path, prune=True, block_rows=64)
    las.sync()
    assert las.pruning.summaries_from == "store"
    # again with another block size: replaced, atomically
    assert run_cli("summarize", path, "--quiet").returncode == 0
    assert bigsearch.open_store(path).describe()["block_summaries"]["block_rows"] == 128
    assert siblings(path) == before


def test_summarize_shows_a_bar_per_pass_on_a_terminal(tmp_path, data):
    from conftest import run_on_a_terminal

    path = make(tmp_path, data, "hdf5")
    done, shown = run_on_a_terminal("summarize", path)
    assert done.returncode == 0
    assert all(f"{label}  [" in shown for label in ("column sums", "degrees and basis", "block summaries"))
    assert "100%" in shown
    assert "[" not in run_cli("summarize", path).stderr  # off a terminal: none


def test_summarize_an_encoded_store(tmp_path, data):
    path = make(tmp_path, data, "zarr", encoding="int8")
    assert run_cli("summarize", path, "--block-rows", 64).returncode == 0
    _, y = data
    full, pruned = (bigsearch.LAS(path, pi=0.08, prune=p, block_rows=64) for p in (False, True))
    assert queries(pruned, y, 15) == queries(full, y, 15)
    assert pruned.pruning.summaries_from == "store"


def test_info_says_when_there_are_none_and_when_x_changed(tmp_path, data):
    import zarr

    path = make(tmp_path, data, "zarr")
    assert "block summaries: none" in run_cli("info", path).stdout
    assert bigsearch.open_store(path).describe()["block_summaries"] is None
    write_block_summaries(path, block_rows=64)
    x = zarr.open_group(str(path), mode="r+")["X"]
    x[0, 0] = x[0, 0] + 1.0  # chunk 0 is in the fingerprint's sample
    assert "X changed since they were written: not used" in run_cli("info", path).stdout


def negative_degrees(tmp_path):
    path = tmp_path / "neg.zarr"
    bigsearch.create_store(path, np.array([[1.0, 0.0], [0.0, 1.0], [-5.0, -5.0]]))
    return path


@pytest.mark.parametrize(
    "args,message",
    [
        (["--block-rows", 100], "--block-rows must be a positive multiple of 64, got 100"),
        (["--block-rows", 0], "--block-rows must be a positive multiple of 64, got 0"),
    ],
)
def test_summarize_refuses_bad_block_rows(tmp_path, data, args, message):
    path = make(tmp_path, data, "zarr")
    done = run_cli("summarize", path, *args)
    assert (done.returncode, done.stderr.strip()) == (2, f"Error: {message}")
    assert bigsearch.open_store(path).read_group(GROUP) is None


@pytest.mark.parametrize(
    "target,message",
    [
        (lambda tmp: "s3://bucket/store.zarr", "summaries are added to local stores only"),
        (lambda tmp: tmp / "nothing.zarr", "nothing.zarr"),
        (negative_degrees, "degree x_i . sum_j x_j <= 0"),
    ],
)
def test_summarize_refuses_what_it_cannot_do(tmp_path, target, message):
    done = run_cli("summarize", target(tmp_path))
    assert done.returncode == 2 and message in done.stderr, done.stderr
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("Error: ") and "Traceback" not in done.stderr


def read_only_mounts():
    """Whether this machine lets a process mount in a namespace of its own (a store made
    read-only for one command, whoever runs it: root ignores file modes)."""
    if shutil.which("unshare") is None:
        return False
    return subprocess.run(["unshare", "-rm", "true"], capture_output=True).returncode == 0


@pytest.mark.skipif(
    not read_only_mounts(), reason="needs unshare -rm (user and mount namespaces) to mount a store read-only"
)
@pytest.mark.parametrize("kind", KINDS)
def test_summarize_refuses_a_read_only_store(tmp_path, data, kind):
    import sys

    path = make(tmp_path, data, kind)
    script = (
        f"mount --bind {path} {path} && mount -o remount,bind,ro {path} && "
        f"exec {sys.executable} -m bigsearch summarize {path}"
    )
    done = subprocess.run(["unshare", "-rm", "sh", "-c", script], capture_output=True, text=True)
    assert done.returncode == 2, done.stderr
    assert (
        done.stderr == f"Error: {path}: the store is read-only here (it and the directory holding it must be "
        "writable); copy it somewhere writable first\n"
    )
    assert bigsearch.open_store(path).read_group(GROUP) is None


# -- stale summaries ---------------------------------------------------------------
def test_summaries_of_another_x_are_recomputed(tmp_path, data):
    """Summaries written for another X (copied over from another store) are refused by
    the fingerprint; written with another block size, by the block size."""
    X, y = data
    path = make(tmp_path, data, "zarr")
    other = make(tmp_path, (X[::-1].copy(), y[::-1].copy()), "zarr", name="other")
    write_block_summaries(other, block_rows=64)
    shutil.copytree(other / GROUP, path / GROUP)
    las = bigsearch.LAS(path, prune=True, block_rows=64)
    las.sync()
    assert las.pruning.summaries_from == CHANGED
    las = bigsearch.LAS(other, prune=True, block_rows=128)
    las.sync()
    assert las.pruning.summaries_from == "computed: the store has summaries of blocks of 64 rows"


# -- WNAS reads them ---------------------------------------------------------------
def swap_unsampled_rows(values):
    """Swap two rows of two blocks of chunk 1 of 150-row chunks, a chunk the fingerprint
    does not sample: every column sum stays, so only the blocks' degrees tell."""
    values[[160, 230]] = values[[230, 160]]


@pytest.mark.parametrize("kind", KINDS)
def test_pruned_wnas_reads_stored_summaries(tmp_path, data, kind):
    _, y = data
    path = make(tmp_path, data, kind)
    write_block_summaries(path, block_rows=64)
    full, pruned = bigsearch.WNAS(path), bigsearch.WNAS(path, prune=True, block_rows=64)
    assert queries(pruned, y, 25, k=2) == queries(full, y, 25, k=2)  # queries and scores, bit for bit
    assert pruned.pruning.summaries_from == "store"
    assert np.array_equal(pruned.f, full.f)
    computed = bigsearch.WNAS(make(tmp_path, data, kind, name="plain"), prune=True, block_rows=64)
    computed.tell(0, 1)
    computed.ask()
    assert computed.pruning.summaries_from == "computed: the store has none"
    a, b = pruned.pruning.blocks, computed.pruning.blocks
    assert np.array_equal(a.centre, b.centre) and np.array_equal(a.radius, b.radius)  # the same numbers
    other_size = bigsearch.WNAS(path, prune=True, block_rows=128)
    other_size.tell(0, 1)
    other_size.ask()
    assert other_size.pruning.summaries_from == "computed: the store has summaries of blocks of 64 rows"


@pytest.mark.parametrize("kind", KINDS)
def test_wnas_recomputes_summaries_of_an_older_x(tmp_path, data, kind):
    from test_pruning import edit_x

    _, y = data
    path = make(tmp_path, data, kind)
    write_block_summaries(path, block_rows=64)
    edit_x(path, kind, swap_unsampled_rows)
    full, pruned = bigsearch.WNAS(path), bigsearch.WNAS(path, prune=True, block_rows=64)
    assert queries(pruned, y, 25) == queries(full, y, 25)
    assert pruned.pruning.summaries_from == CHANGED


@pytest.mark.parametrize("kind", KINDS)
def test_a_failed_publish_leaves_the_old_summaries(tmp_path, data, kind):
    """``publish_group`` fails midway (an array its format cannot store): the store keeps
    the summaries it had, whole, and nothing is left beside it."""
    path = make(tmp_path, data, kind)
    write_block_summaries(path, block_rows=64)
    before, files = bigsearch.open_store(path).read_group(GROUP), siblings(path)
    fmt = type(bigsearch.open_store(path))
    arrays = {"good": np.ones(3), "bad": np.array([object(), None], dtype=object)}
    with pytest.raises(Exception):  # the format library's own error
        fmt.publish_group(path, GROUP, arrays, {"version": 1})
    after = bigsearch.open_store(path).read_group(GROUP)
    assert after[0] == before[0] and all(np.array_equal(after[1][k], before[1][k]) for k in before[1])
    assert siblings(path) == files
