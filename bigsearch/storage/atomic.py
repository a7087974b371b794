"""Atomic, durable file writes: a reader sees the old file or the whole new one, and what
a call has published survives a crash or a power cut.

A rename is atomic but not durable until the directory holding it is fsync'd, and a
file's bytes are not durable until the file is; so every publication here is: write
under a hidden temporary sibling name, fsync the file (every file of a directory tree),
rename, fsync the directory. The temporary name carries the writer's host and process
id, so a later write to the same path removes what a killed writer left
(``remove_stale_leftovers``) and never what a live one is writing.

Every place in bigsearch that publishes a file goes through here: feature stores
(storage/writer.py), session directories, checkpoints and exports (session/), experiment
identities (experiments/resume.py), the AGR anchors cache (engine/methods/agr_anchors.py).
"""

import ctypes
import errno
import json
import os
import re
import shutil
import socket
import uuid
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

# fsyncs of many small files (a store's chunks) run in threads: the file system commits
# them together (measured: 200 files, 0.95 s one by one, 0.02 s with 32 threads).
FSYNC_THREADS = 32
_HOST = re.sub(r"[^A-Za-z0-9_]", "_", socket.gethostname())


def temp_sibling(path, tag="tmp"):
    """``.NAME.TAG-HOST-PID-RANDOM`` beside ``path``: hidden, unique, and traceable to its writer."""
    path = Path(path)
    return path.with_name(f".{path.name}.{tag}-{_HOST}-{os.getpid()}-{uuid.uuid4().hex[:8]}")


def fsync_dir(path):
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_file(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_tree(path):
    """fsync a file, or every file and directory under a directory (deepest first)."""
    path = Path(path)
    if not path.is_dir():
        _fsync_file(path)
        return
    files, dirs = [], []
    for root, _, names in os.walk(path):
        dirs.append(root)
        files.extend(os.path.join(root, n) for n in names)
    with ThreadPoolExecutor(min(FSYNC_THREADS, max(1, len(files)))) as pool:
        list(pool.map(_fsync_file, files))
    for d in reversed(dirs):
        fsync_dir(d)


def fsync_written(path, done=None):
    """fsync the files under ``path`` (a tree still being written, or a file), one at a
    time, so that their pages go to the disk while the writer goes on and the fsync of the
    finished tree (:func:`fsync_tree`, which still makes it durable) finds them clean.
    Files in ``done`` (a set) are skipped and those synced are added to it, so a writer
    calling it after every chunk syncs each file once, not the whole tree each time.
    Errors are left to that one: a file may vanish (an abort) while this runs."""
    done = set() if done is None else done
    paths = [path] if not Path(path).is_dir() else [os.path.join(r, n) for r, _, names in os.walk(path) for n in names]
    for p in paths:
        if p in done:
            continue
        try:
            _fsync_file(p)
            done.add(p)
        except OSError:
            pass


def write_durable(path, data):
    """Write bytes to a new file and fsync it (the caller publishes it by renaming)."""
    with open(path, "xb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())


def publish(tmp, path):
    """Rename a finished (fsync'd) ``tmp`` to ``path``, replacing a file there, and make the
    rename durable. A directory at ``path`` is not replaced (the rename fails)."""
    os.replace(tmp, path)
    fsync_dir(Path(path).parent)


def publish_over(tmp, path):
    """Publish ``tmp`` at ``path`` where a file or a directory tree already is, so that a
    kill at any moment leaves the old one or the new one at ``path``: the two names are
    exchanged in one atomic step (Linux renameat2), then the old one (now at ``tmp``) is
    removed. Where the exchange is not available, the old one is renamed away (tag "old"),
    the new one renamed in, then the old one removed; a writer killed between the two
    renames leaves ``path`` missing, which ``restore_interrupted_replace`` repairs."""
    path = Path(path)
    if _exchange(tmp, path):
        fsync_dir(path.parent)
        remove(tmp)
        return
    old = temp_sibling(path, "old")
    os.rename(path, old)
    publish(tmp, path)
    remove(old)


def restore_interrupted_replace(path):
    """Put back the old copy a writer killed between the two renames of ``publish_over``
    left under its "old" name while ``path`` is missing (never delete the only copy);
    returns its name, or None."""
    path = Path(path)
    if path.exists() or not path.parent.is_dir():
        return None
    pattern = re.compile(rf"\.{re.escape(path.name)}\.old-{re.escape(_HOST)}-(\d+)-[0-9a-f]{{8}}$")
    found = [e for e in path.parent.iterdir() if (m := pattern.match(e.name)) and not _alive(int(m.group(1)))]
    if not found:
        return None
    newest = max(found, key=lambda e: e.stat().st_mtime)
    os.rename(newest, path)
    fsync_dir(path.parent)
    return newest.name


def _exchange(a, b):
    """Swap two paths atomically (renameat2 RENAME_EXCHANGE); False where unsupported."""
    libc = _libc()
    renameat2 = getattr(libc, "renameat2", None) if libc is not None else None
    if renameat2 is None:
        return False
    if renameat2(AT_FDCWD, os.fsencode(a), AT_FDCWD, os.fsencode(b), RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP):
        return False
    raise OSError(err, os.strerror(err), str(b))


def _libc():
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


AT_FDCWD, RENAME_EXCHANGE = -100, 2


@contextmanager
def atomic_path(path, tag="tmp"):
    """Yield a temporary sibling path to write a file or a directory tree at; when the
    block ends without an exception, fsync what is there and publish it at ``path``;
    otherwise remove it and leave ``path`` as it was."""
    path = Path(path)
    tmp = temp_sibling(path, tag)
    try:
        yield tmp
        fsync_tree(tmp)
        publish(tmp, path)
    except BaseException:
        remove(tmp)
        raise


@contextmanager
def atomic_open(path, mode="w", **kwargs):
    """``open`` for writing a new version of ``path``: published when the block succeeds."""
    with atomic_path(path) as tmp:
        with open(tmp, mode, **kwargs) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())


@contextmanager
def atomic_create(path, mode="w", **kwargs):
    """``open`` for writing a new file at ``path`` that must not replace one: written aside,
    fsync'd, then linked into place (a hard link never replaces a file), so ``path``
    appears whole or not at all; FileExistsError when something is already there."""
    path = Path(path)
    if path.exists():
        raise FileExistsError(errno.EEXIST, "already exists", str(path))
    tmp = temp_sibling(path, "tmp")
    try:
        with open(tmp, "x" + mode.replace("w", ""), **kwargs) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.link(tmp, path)
        fsync_dir(path.absolute().parent)
    finally:
        tmp.unlink(missing_ok=True)


def atomic_write_bytes(path, data):
    with atomic_open(path, "wb") as fh:
        fh.write(data)


def atomic_write_json(path, value, **dump_kwargs):
    atomic_write_bytes(path, json.dumps(value, **dump_kwargs).encode())


def remove(path):
    """Remove a file or a directory tree if it is there."""
    path = Path(path)
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def remove_tree(path):
    """Remove a directory as one atomic step for readers: rename it away, then delete."""
    path = Path(path)
    gone = temp_sibling(path, "trash")
    try:
        os.rename(path, gone)
    except FileNotFoundError:
        return
    shutil.rmtree(gone, ignore_errors=True)


def remove_stale_leftovers(path, tags=("partial", "old")):
    """Remove the temporary siblings of ``path`` (with one of ``tags``) left by writers on
    this host that died (killed, or the machine lost power); returns their names."""
    path = Path(path)
    restore_interrupted_replace(path)  # an "old" copy with no path is the only copy
    alternatives = "|".join(re.escape(t) for t in tags)
    pattern = re.compile(rf"\.{re.escape(path.name)}\.(?:{alternatives})-{re.escape(_HOST)}-(\d+)-[0-9a-f]{{8}}$")
    removed = []
    for entry in path.parent.iterdir() if path.parent.is_dir() else ():
        match = pattern.match(entry.name)
        if match and not _alive(int(match.group(1))):
            remove(entry)
            removed.append(entry.name)
    return removed


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True
