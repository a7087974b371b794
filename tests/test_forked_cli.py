"""bigsearch/testing/forked_cli.py: a command forked from the process with the libraries imported gives
what `python -m bigsearch` from scratch gives (exit status, stdout, stderr), in its own
directory and environment; a variable read at import sends it back to a fresh start."""

import os
import resource
import subprocess
import sys

import pytest

from bigsearch.testing import clustered_points
from bigsearch.testing.forked_cli import ForkedCli

from conftest import QUIET_AND_TRACED


@pytest.fixture(scope="module")
def forked():
    forking = ForkedCli({**os.environ, **QUIET_AND_TRACED})
    assert forking.forker.ready
    yield forking
    forking.close()


def from_scratch(args, cwd, env):
    return subprocess.run([sys.executable, "-m", "bigsearch", *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=120)


def test_a_forked_command_gives_what_a_fresh_one_gives(forked, tmp_path, store_factory):
    store = store_factory(*clustered_points(300, 4, prevalence=0.1, seed=3), "zarr", "float32", 64)
    env = {**os.environ, **QUIET_AND_TRACED}
    (tmp_path / "bad.csv").write_text("a,b\n1,2\n3\n")
    for args in (["--version"], ["info", str(store)], ["no-such-command"], ["info", "missing.zarr"],
                 ["ingest", "bad.csv", "out.zarr"], ["run", str(store), "--budget", "0", "--out", "r"]):
        fork, fresh = forked.run(args, tmp_path, env, 120), from_scratch(args, tmp_path, env)
        assert (fork.returncode, fork.stdout, fork.stderr) == (fresh.returncode, fresh.stdout, fresh.stderr), args
    assert not (tmp_path / "out.zarr").exists() and not (tmp_path / "r").exists()


def test_the_command_has_its_own_directory_and_environment(forked, tmp_path):
    env = {**os.environ, **QUIET_AND_TRACED, "BIGSEARCH_DATA_DIR": "cache"}
    (tmp_path / "cache" / "adult").mkdir(parents=True)
    (tmp_path / "cache" / "adult" / "adult.data").write_text("1,2\n")
    fork, fresh = (run(["datasets", "path", "adult"], tmp_path, env) for run in (forked_run(forked), from_scratch))
    assert fork.stdout == fresh.stdout and (fork.returncode, fork.stderr) == (fresh.returncode, fresh.stderr)
    assert "BIGSEARCH_DATA_DIR" not in os.environ and os.getcwd() != str(tmp_path)


def forked_run(forked):
    return lambda args, cwd, env: forked.run(args, cwd, env, 60)


def test_a_variable_read_at_import_needs_a_fresh_start(forked):
    env = {**os.environ, **QUIET_AND_TRACED}
    assert forked.can_run(env) and forked.can_run({**env, "BIGSEARCH_DATA_DIR": "elsewhere"})
    for name in ("NUMBA_CACHE_DIR", "PYTHONPATH", "OPENBLAS_CORETYPE", "TMPDIR"):
        assert not forked.can_run({**env, name: "/somewhere/else"}), name


def test_a_test_process_holding_many_files(tmp_path):
    """A test process may hold more than select()'s 1,024 files (it did on CI): the replies'
    pipe is then numbered past them."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if min(hard, 4096) < 1200:
        pytest.skip(f"this system allows {hard} open files, too few to open 1,100")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 4096)), hard))
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    try:
        forking = ForkedCli({**os.environ, **QUIET_AND_TRACED})
        assert forking.forker.proc.stdout.fileno() > 1024
        done = forking.run(["--version"], tmp_path, {**os.environ, **QUIET_AND_TRACED}, 60)
        assert done.returncode == 0 and done.stdout.startswith("bigsearch")
        forking.close()
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_a_started_command_reads_as_a_pipe_does(forked, tmp_path):
    """popen (what ServerProcess forks `serve` with): stdout line by line as it comes, then
    the rest and stderr at the end, as Popen's pipes give them; the next command may then fork."""
    env = {**os.environ, **QUIET_AND_TRACED}
    for args in (["run", "--help"], ["ingest", "missing.csv", "out.zarr"]):
        command = forked.popen(args, tmp_path, env)
        assert forked.run(["--version"], tmp_path, env, 60) is None  # one command at a time
        first = command.stdout.readline()
        out, err = command.communicate(timeout=60)
        fresh = from_scratch(args, tmp_path, env)
        assert (command.returncode, first + out, err) == (fresh.returncode, fresh.stdout, fresh.stderr)
        assert first == fresh.stdout[: len(first)] and (first.endswith("\n") or not first)
    assert forked.run(["--version"], tmp_path, env, 60).returncode == 0
