"""`bigsearch` commands in processes forked from one that has imported the third-party
libraries (numpy, numba, zarr, h5py, scipy, pyarrow, pandas, dask; forking.py): a command's
process is its own (exit status, stdout and stderr, working directory, environment, memory
limit) and starts as `python -m bigsearch` does, without 0.5-0.7 s of imports each time. The
suite runs some 500 commands (``run_cli`` in tests/conftest.py; docs/contributing.md has the
figures and when a command still starts from scratch).

    python -m bigsearch.testing.forked_cli     # the forking process (ForkedCli starts it)
"""

import atexit
import os
import runpy
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from .forking import Forker, serve

PRELOADED = (
    "numpy",
    "numba",
    "zarr",
    "h5py",
    "scipy.linalg",
    "pyarrow",
    "pyarrow.csv",
    "pyarrow.compute",
    "pandas",
    "click",
    "dask",
    "dask.array",
    "distributed",
)
# Read when a library is imported (or first used, and kept: TMPDIR): a command whose value of one
# differs from the forking process's starts from scratch.
READ_AT_IMPORT = (
    "PYTHON",
    "NUMBA_",
    "OPENBLAS_",
    "OMP_",
    "MKL_",
    "DASK_",
    "ZARR_",
    "LD_",
    "MALLOC",
    "LANG",
    "LC_",
    "TMP",
    "TEMP",
)


def import_settings(env):
    return {k: v for k, v in env.items() if k.startswith(READ_AT_IMPORT)}


class ForkedCli:
    """The forking process of one test process; ``run`` gives what subprocess.run would, or
    None where it cannot (another command running, a bad directory, the process gone)."""

    def __init__(self, env):
        self.settings = import_settings(env)
        self.lock = threading.Lock()
        self.outputs = Path(tempfile.mkdtemp(prefix="bigsearch-cli-"))
        self.forker = Forker([sys.executable, "-m", "bigsearch.testing.forked_cli"], env)

    def can_run(self, env):
        return self.forker.alive() and import_settings(env) == self.settings

    def run(self, args, cwd, env, timeout, address_space=None):
        """``address_space``: the command's limit of virtual memory in bytes (RLIMIT_AS)."""
        if not os.path.isdir(cwd) or not self.lock.acquire(blocking=False):
            return None  # subprocess says what is wrong with cwd; another command running: the caller starts it
        try:
            return self._run(args, cwd, env, timeout, address_space)
        finally:
            self.lock.release()

    def _run(self, args, cwd, env, timeout, address_space):
        out, err = self.outputs / "stdout", self.outputs / "stderr"
        request = {
            "args": args,
            "cwd": str(cwd),
            "env": env,
            "stdout": str(out),
            "stderr": str(err),
            "address_space": address_space,
        }
        try:
            pid = self.forker.start(request)
        except OSError:
            return None  # the forking process is gone: this command and the next start from scratch
        status = self.forker.wait(timeout)
        cmd = [sys.executable, "-m", "bigsearch", *args]
        if status is None:
            os.kill(pid, 9)
            self.forker.wait()
            raise subprocess.TimeoutExpired(cmd, timeout, _read(out), _read(err))
        return subprocess.CompletedProcess(cmd, status, _read(out), _read(err))

    def close(self):
        self.forker.close()
        for path in self.outputs.iterdir():
            path.unlink()
        self.outputs.rmdir()


def _read(path):
    """A command's output as subprocess.run(text=True) gives it: the locale's encoding,
    universal newlines."""
    with open(path) as f:
        text = f.read()
    path.unlink()
    return text


def run_command(request):
    """In the forked process: become `python -m bigsearch ARGS` run in ``cwd`` with ``env``,
    its stdin empty and its output in the two files."""
    import resource

    if request["address_space"]:
        resource.setrlimit(resource.RLIMIT_AS, (request["address_space"],) * 2)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    for fd, path, flags in (
        (0, os.devnull, os.O_RDONLY),
        (1, request["stdout"], os.O_WRONLY | os.O_CREAT),
        (2, request["stderr"], os.O_WRONLY | os.O_CREAT),
    ):
        opened = os.open(path, flags | (os.O_TRUNC if fd else 0), 0o600)
        os.dup2(opened, fd)
        os.close(opened)
    sys.argv = ["-m", *request["args"]]  # runpy puts __main__.py's path first, as -m does
    sys.path[0] = os.getcwd()
    os._exit(_exit_status())


def _exit_status():
    """Run `bigsearch`'s __main__ as -m does and end as the interpreter would (threads joined,
    atexit handlers run, output flushed), without tearing down the modules one by one: with
    every library imported that took 0.35 s of each command."""
    try:
        runpy.run_module("bigsearch", run_name="__main__", alter_sys=True)
        status = 0
    except SystemExit as e:
        status = _status_of(e.code)
    except BaseException:
        sys.excepthook(*sys.exc_info())
        status = 1
    threading._shutdown()  # what the interpreter runs at exit: joins the thread pools' workers
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    return status & 0xFF


def _status_of(code):
    """The exit status SystemExit(code) gives: None 0, an int itself, anything else printed and 1."""
    if code is None or isinstance(code, int):
        return code or 0
    print(code, file=sys.stderr)
    return 1


def preload_and_serve():
    import importlib

    for name in PRELOADED:
        importlib.import_module(name)
    serve(run_command)


if __name__ == "__main__":
    preload_and_serve()
