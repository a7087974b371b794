"""Sealed JSON: a JSON document that carries its own checksum, so a damaged file is
recognized (session.json, checkpoint manifests); and files for the session's owner only.
Writing files atomically and durably is storage/atomic.py's job.

A session's journal holds every answer: its directory and files are created for the
owner only (0700 and 0600, whatever the umask), as the labelling page's token is, so
other users of the machine cannot read the answers or the checkpoints.
"""

import hashlib
import json
import os
import stat
from pathlib import Path

from ..storage.journal import canonical_json


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


PRIVATE_DIR, PRIVATE_FILE = 0o700, 0o600


def private_dir(path):
    """Create the directory ``path`` for its owner only (mkdir's mode is masked by the
    umask, so the mode is set again after)."""
    Path(path).mkdir(mode=PRIVATE_DIR)
    os.chmod(path, PRIVATE_DIR)


def write_private(path, data):
    """Write ``data`` to the new file ``path``, created readable by its owner only (call
    it inside an atomic block: the file is published with the block)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, PRIVATE_FILE)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)


def shared_with_others(path):
    """The mode of ``path`` when users other than its owner may read or enter it, else None."""
    mode = stat.S_IMODE(os.stat(path).st_mode)
    return mode if mode & 0o077 else None
