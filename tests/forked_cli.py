"""`bigsearch` commands in processes forked from one that has already imported the third-party
libraries (numpy, numba, zarr, h5py, scipy, pyarrow, pandas, dask): a command's process is its
own (its exit status, stdout and stderr, its working directory, environment and memory limit), and it starts
the way `python -m bigsearch` does, without paying 0.5 s of imports each time. The suite runs
some 500 commands; docs/contributing.md has what this saves and when a command still starts
from scratch (``run_cli`` in tests/conftest.py decides).

Run as a script, this is the process commands are forked from: it reads one request a line
on stdin (JSON: args, cwd, env, stdout and stderr paths) and answers on stdout with the
command's pid, then its exit status (a signal as a negative number, as subprocess does)."""

import atexit
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import threading
import traceback
from pathlib import Path

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
    """A forking process for one test process; ``run`` gives what subprocess.run would,
    or None where it cannot (busy with another command, not started, gone)."""

    def __init__(self, env):
        self.settings = import_settings(env)
        self.lock = threading.Lock()
        self.outputs = Path(tempfile.mkdtemp(prefix="bigsearch-cli-"))
        self.proc = subprocess.Popen(
            [sys.executable, __file__], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, bufsize=0
        )
        self.replies = select.poll()  # not select(): a test process may hold more than 1,024 files
        self.replies.register(self.proc.stdout, select.POLLIN)
        self.ready = self._reply(timeout=120) == {"ready": True}

    def can_run(self, env):
        return self.ready and self.proc.poll() is None and import_settings(env) == self.settings

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
            self.proc.stdin.write((json.dumps(request) + "\n").encode())
            pid = self._reply(timeout=60)["pid"]
        except (OSError, RuntimeError, TypeError):
            self.ready = False  # the forking process is gone: commands start from scratch
            return None
        reply = self._reply(timeout)
        cmd = [sys.executable, "-m", "bigsearch", *args]
        if reply is None:
            os.kill(pid, 9)
            self._reply(timeout=60)
            raise subprocess.TimeoutExpired(cmd, timeout, _read(out), _read(err))
        return subprocess.CompletedProcess(cmd, reply["status"], _read(out), _read(err))

    def _reply(self, timeout):
        line = b""
        while not line.endswith(b"\n"):
            if not self.replies.poll(timeout * 1000):
                return None
            chunk = os.read(self.proc.stdout.fileno(), 4096)
            if not chunk:
                raise RuntimeError("the forking process is gone")
            line += chunk
        return json.loads(line)

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=30)
        shutil.rmtree(self.outputs, ignore_errors=True)


def _read(path):
    """A command's output as subprocess.run(text=True) gives it: the locale's encoding,
    universal newlines."""
    with open(path) as f:
        text = f.read()
    path.unlink()
    return text


def serve():
    import importlib

    for name in PRELOADED:
        importlib.import_module(name)
    if threading.active_count() != 1:  # a thread would be lost at fork: say not ready
        print(json.dumps({"ready": False}), flush=True)
        return
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            try:
                run_command(request)  # ends this process with the command's exit status
            finally:
                traceback.print_exc()  # reached only where setting the process up failed
                os._exit(70)
        print(json.dumps({"pid": pid}), flush=True)
        _, status = os.waitpid(pid, 0)
        print(json.dumps({"status": os.waitstatus_to_exitcode(status)}), flush=True)


def run_command(request):
    """In the forked process: become `python -m bigsearch ARGS` run in ``cwd`` with ``env``,
    its stdin empty and its output in the two files."""
    import importlib.util
    import resource
    import types

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
    spec = importlib.util.find_spec("bigsearch.__main__")
    main_module = types.ModuleType("__main__")  # as -m leaves it: dask's spawned workers look
    main_module.__spec__, main_module.__file__ = spec, spec.origin
    sys.modules["__main__"] = main_module
    sys.argv = [spec.origin, *request["args"]]
    sys.path[0] = os.getcwd()
    os._exit(_exit_status(request["args"]))


def _exit_status(args):
    """Run the command and end as the interpreter would (threads joined, atexit handlers run,
    output flushed), without tearing down the modules one by one: with every library imported
    that took 0.35 s of each command."""
    from bigsearch.cli import main

    try:
        main(args, prog_name="bigsearch")
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


if __name__ == "__main__":
    serve()
