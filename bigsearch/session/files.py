"""Sealed JSON: a JSON document that carries its own checksum, so a damaged file is
recognized (session.json, checkpoint manifests). Writing files atomically and durably is
storage/atomic.py's job.
"""

import hashlib
import json
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
