"""One process compiles a kernel; the others wait for it and load it from numba's cache.

numba compiles a kernel in every process that calls it before its cache holds it, so the
worker processes of a dask cluster, or commands started side by side, compiled the same
kernels at the same moment (a LAS kernel is 6-10 s of a core; on a cold cache the two
workers of a local cluster compiled 75-81 functions each, the same ones). A lock file per
function, held across numba's look-up in its cache, the compile and the save, lets the
first process compile while the others wait and then find the kernel in the cache. It also
keeps two processes from saving one function's cache index at once: numba reads, extends
and rewrites it, so the last writer's signatures would win and the other's be compiled
again later.

Best effort: without ``fcntl`` (Windows), where the lock file cannot be made (a read-only
cache), or when another process has held the lock for ``WAIT_S``, the kernel is compiled
as numba would, unlocked. A lock dies with its process, so a crash leaves none held.
"""

from __future__ import annotations

import contextlib
import functools
import time
from pathlib import Path

from numba.core.caching import FunctionCache
from numba.core.compiler_lock import global_compiler_lock
from numba.core.registry import CPUDispatcher

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

WAIT_S = 120.0  # longer than any kernel's compile on a loaded machine; then compile unlocked
POLL_S = 0.02
_held: set[Path] = set()  # this process's locks: a kernel's compile compiles the kernels it calls


def lock_compiles(namespace: dict) -> None:
    """Make every cached numba function in ``namespace`` (a kernel module's globals())
    compile under its lock file."""
    for value in list(namespace.values()):
        if isinstance(value, CPUDispatcher) and not getattr(value.compile, "locked", False):
            path = _lock_path(value)
            if path is not None:
                value.compile = _locked(value.compile, path)


def _lock_path(dispatcher) -> Path | None:
    """The lock file beside the function's cache index; None where it has no cache (or a
    numba whose cache is laid out otherwise: its internals are read here)."""
    cache = getattr(dispatcher, "_cache", None)
    index = getattr(getattr(cache, "_cache_file", None), "_index_path", None)
    if not isinstance(cache, FunctionCache) or index is None:
        return None
    return Path(index).with_name(Path(index).name + ".lock")


def _locked(compile, path: Path):
    @functools.wraps(compile)
    def compile_locked(sig):
        # numba's own lock first: its threads then never wait on each other's files
        with global_compiler_lock, _file_lock(path):
            return compile(sig)

    compile_locked.locked = True  # type: ignore[attr-defined]
    return compile_locked


@contextlib.contextmanager
def _file_lock(path: Path):
    if fcntl is None or path in _held:
        yield
        return
    try:
        fd = open(path, "a")
    except OSError:
        yield
        return
    with fd:
        locked = _acquire(fd)
        if locked:
            _held.add(path)
        try:
            yield
        finally:
            if locked:
                _held.discard(path)
                fcntl.flock(fd, fcntl.LOCK_UN)


def _acquire(fd) -> bool:
    deadline = time.monotonic() + WAIT_S
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() > deadline:
                return False
            time.sleep(POLL_S)
        except OSError:  # a file system without locks
            return False
