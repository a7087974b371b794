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
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
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
    """The forking process of one test process. ``run`` gives what subprocess.run would and
    ``popen`` what subprocess.Popen would (stdout and stderr read as pipes), or None where
    they cannot: another command running, a bad directory, a variable read at import that
    differs (``can_run``), the forking process gone."""

    def __init__(self, env):
        self.settings = import_settings(env)
        self.lock = threading.Lock()
        self.outputs = Path(tempfile.mkdtemp(prefix="bigsearch-cli-"))
        self.forker = Forker([sys.executable, "-m", "bigsearch.testing.forked_cli"], env)
        self.started = 0

    def can_run(self, env):
        return self.forker.alive() and import_settings(env) == self.settings

    def run(self, args, cwd, env, timeout, address_space=None):
        """``address_space``: the command's limit of virtual memory in bytes (RLIMIT_AS)."""
        command = self.popen(args, cwd, env, address_space)
        if command is None:
            return None
        try:
            out, err = command.communicate(timeout)
        except subprocess.TimeoutExpired:
            command.kill()
            out, err = command.communicate()
            raise subprocess.TimeoutExpired(command.args, timeout, out, err) from None
        return subprocess.CompletedProcess(command.args, command.returncode, out, err)

    def popen(self, args, cwd, env, address_space=None):
        if not (os.path.isdir(cwd) and self.can_run(env) and self.lock.acquire(blocking=False)):
            return None  # subprocess says what is wrong with cwd; another command running: the caller starts it
        self.started += 1
        out, err = self.outputs / f"{self.started}.stdout", self.outputs / f"{self.started}.stderr"
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
            self.lock.release()
            return None  # the forking process is gone: this command and the next start from scratch
        return ForkedCommand(self, pid, [sys.executable, "-m", "bigsearch", *args], out, err)

    def close(self):
        self.forker.close()
        shutil.rmtree(self.outputs, ignore_errors=True)


_ONE_PER_PROCESS = []


def shared_forked_cli(env):
    """This process's ForkedCli, started with ``env`` on first use (one, however many copies
    of the module asking for it: tests import conftest under two names)."""
    if not _ONE_PER_PROCESS:
        _ONE_PER_PROCESS.append(ForkedCli(env))
    return _ONE_PER_PROCESS[0]


def close_forked_cli():
    while _ONE_PER_PROCESS:
        _ONE_PER_PROCESS.pop().close()


class ForkedCommand:
    """A command ForkedCli.popen started, with the part of Popen's interface the tests use:
    pid, args, returncode, stdout.readline(), poll, wait, send_signal, kill, communicate."""

    def __init__(self, owner, pid, args, out, err):
        self.owner, self.pid, self.args, self.returncode = owner, pid, args, None
        self.stdout, self._err = _Following(out, self), err

    def poll(self):
        if self.returncode is None:
            self._ended(self.owner.forker.wait(timeout=0))
        return self.returncode

    def wait(self, timeout=None):
        if self.returncode is None:
            self._ended(self.owner.forker.wait(timeout))
            if self.returncode is None:
                raise subprocess.TimeoutExpired(self.args, timeout)
        return self.returncode

    def _ended(self, status):
        if status is not None:
            self.returncode = status
            self.owner.lock.release()

    def send_signal(self, sig):
        if self.returncode is None:
            os.kill(self.pid, sig)

    def kill(self):
        self.send_signal(signal.SIGKILL)

    def communicate(self, timeout=None):
        """What it writes from here to its end: (stdout, stderr), as text."""
        self.wait(timeout)
        out, err = self.stdout.read(), _Following(self._err, self).read()
        for path in (self.stdout.path, self._err):
            path.unlink(missing_ok=True)
        return out, err


class _Following:
    """A command's stdout file read as a pipe is: readline waits for a whole line, or the end."""

    def __init__(self, path, command):
        self.path, self.command, self.file = path, command, None

    def readline(self):
        line = ""
        while not line.endswith("\n"):
            self.file = self.file or (open(self.path) if self.path.exists() else None)
            more = self.file.readline() if self.file else ""
            line += more
            if not more and self.command.poll() is not None and not self._unread():
                return line
            if not more:
                time.sleep(0.01)
        return line

    def _unread(self):
        return self.file is not None and self.file.tell() < self.path.stat().st_size

    def read(self):
        """The rest, once the command has ended ("" if it never opened its output)."""
        self.file = self.file or (open(self.path) if self.path.exists() else None)
        if self.file is None:
            return ""
        with self.file:
            return self.file.read()


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
