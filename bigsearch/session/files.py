"""Durable file operations: what is written is on disk before anyone is told so.

A rename is atomic but not durable until the directory holding it is fsync'd, and a
file's bytes are not durable until the file is; so every publication here is: write
under a temporary name, fsync the file, rename, fsync the directory.
"""

import hashlib
import json
import os
import shutil
from pathlib import Path

from ..storage.writer import temp_sibling


def fsync_dir(path):
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_durable(path, data):
    """Write bytes to a new file and fsync it (the caller publishes it by renaming)."""
    with open(path, "xb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())


def temp_name(path, tag="tmp"):
    """A hidden sibling name that no other process will pick (it names this host and
    process, so leftovers of a dead process can be told apart: remove_stale_leftovers)."""
    return temp_sibling(Path(path), tag)


def remove_tree(path):
    """Remove a directory as one atomic step for readers: rename it away, then delete."""
    path = Path(path)
    gone = temp_name(path, "trash")
    try:
        os.rename(path, gone)
    except FileNotFoundError:
        return
    shutil.rmtree(gone, ignore_errors=True)


def canonical_json(value):
    """One byte string per value: what checksums are computed over."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False).encode()


def sealed_json(body):
    """JSON text of ``body`` with its own checksum, so a damaged file is recognized."""
    return json.dumps({"body": body, "sha256": hashlib.sha256(canonical_json(body)).hexdigest()},
                      indent=1, sort_keys=True, allow_nan=False).encode()


def read_sealed_json(path):
    """The body of a ``sealed_json`` file; ValueError when it is damaged."""
    outer = json.loads(Path(path).read_bytes())
    if not isinstance(outer, dict) or set(outer) != {"body", "sha256"}:
        raise ValueError("not a sealed JSON document")
    if hashlib.sha256(canonical_json(outer["body"])).hexdigest() != outer["sha256"]:
        raise ValueError("checksum mismatch")
    return outer["body"]
