"""The writer's lock: one process at a time may change a session.

The lock is an ``flock`` on the session directory itself, which the kernel releases
when its holder exits in any way, SIGKILL included, so a dead writer never blocks the
next one; and a directory cannot be deleted and recreated under a live writer the way
a lock file can (``rm DIR/lock`` would otherwise let a second writer in, and two
writers make a journal nothing can open). DIR/lock is also locked (writers of older
versions lock only it) and names its holder ("pid host"), for the "in use by process
N" message; a name left in a file whose lock is free is a stale lock, from a writer
that died: it is taken over and reported.
"""

import fcntl
import os
import socket

from ..errors import SessionLockedError

WIDTH = 80   # the holder's name is written in place at a fixed width: no empty file between


class SessionLock:
    def __init__(self, path, session_dir):
        self.path = path
        self.session_dir = session_dir
        self.fd = self.dir_fd = None
        self.stale_holder = None     # "pid host" of a dead writer whose lock was taken over

    def acquire(self):
        dir_fd = os.open(self.session_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        fd = None
        try:
            _lock(dir_fd, self.path, self.session_dir)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            _lock(fd, self.path, self.session_dir)
        except BaseException:
            for f in (fd, dir_fd):
                if f is not None:
                    os.close(f)
            raise
        self.stale_holder = _read_holder(fd) or None
        me = f"{os.getpid()} {socket.gethostname()}"
        os.pwrite(fd, me.ljust(WIDTH)[:WIDTH].encode() + b"\n", 0)
        self.fd, self.dir_fd = fd, dir_fd
        return self

    def release(self):
        if self.fd is None:
            return
        try:
            os.ftruncate(self.fd, 0)     # a clean exit leaves no name: a name means a crash
        finally:
            for fd in (self.fd, self.dir_fd):
                fcntl.flock(fd, fcntl.LOCK_UN)
                os.close(fd)
            self.fd = self.dir_fd = None


def _lock(fd, path, session_dir):
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        try:
            holder_fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            holder = ""
        else:
            holder = _read_holder(holder_fd)
            os.close(holder_fd)
        raise SessionLockedError(f"session {session_dir} is in use by {_describe(holder)}; "
                                 "close it there first (readers: session next/status/export work meanwhile)") from None


def _read_holder(fd):
    return os.pread(fd, WIDTH + 1, 0).decode(errors="replace").strip()


def _describe(holder):
    if not holder:
        return "another process"
    pid, _, host = holder.partition(" ")
    where = "" if host == socket.gethostname() else f" on host {host}"
    this = " (this process)" if pid == str(os.getpid()) and not where else ""
    return f"process {pid}{where}{this}"
