"""Checkpoints: the engine state after a prefix of the journal, one directory each.

``checkpoints/<seq>/`` (seq: the last journal record it includes, 10 digits) holds one
``.npy`` file per array of ``export_state()`` (written and read with pickling off) and
``manifest.json``: format version, method, parameters, store fingerprint, journal
position, the label groups it holds (count and chained digest), and each file's
SHA-256, all sealed by the manifest's own checksum. A checkpoint is written in a
hidden temporary directory, every file and the directory fsync'd, then renamed into
place and the parent fsync'd: a reader sees a whole checkpoint or none.
"""

import hashlib
import io
import re
import shutil

import numpy as np

from ..errors import SessionFormatError
from ..storage.atomic import atomic_path, remove_tree
from .files import private_dir, read_sealed_json, sealed_json, write_private

FORMAT_VERSION = 1
MANIFEST = "manifest.json"
NAME = re.compile(r"^\d{10}$")
ARRAY_NAME = re.compile(r"^[A-Za-z0-9_]+$")


def checkpoint_name(seq):
    return f"{seq:010d}"


def write_checkpoint(root, seq, state, info):
    """Publish the checkpoint of ``state`` (export_state() output) after journal record
    ``seq``; ``info`` goes into the manifest. Returns (path, manifest body)."""
    final = root / checkpoint_name(seq)
    with atomic_path(final, "tmp") as tmp:
        private_dir(tmp)                  # the owner's only, as the whole session (files.py)
        files = {}
        for name, array in state["arrays"].items():
            buf = io.BytesIO()
            np.save(buf, np.ascontiguousarray(array), allow_pickle=False)
            data = buf.getvalue()
            write_private(tmp / f"{name}.npy", data)
            files[name] = {"file": f"{name}.npy", "sha256": hashlib.sha256(data).hexdigest(),
                           "dtype": array.dtype.str, "shape": list(array.shape)}
        body = {"format": FORMAT_VERSION, "seq": seq, "meta": state["meta"], "arrays": files, **info}
        write_private(tmp / MANIFEST, sealed_json(body))
        if final.exists():          # a damaged checkpoint of the same journal position
            remove_tree(final)
    return final, body


def list_checkpoints(root):
    """Checkpoint directories, newest (highest seq) first."""
    names = [p.name for p in root.iterdir() if NAME.match(p.name)] if root.is_dir() else []
    return [root / name for name in sorted(names, reverse=True)]


def read_manifest(path):
    """The manifest body; ValueError when it is damaged, SessionFormatError when newer."""
    try:
        body = read_sealed_json(path / MANIFEST)
    except (OSError, UnicodeDecodeError) as e:
        if not path.exists():
            raise
        raise ValueError(str(e)) from None
    if not isinstance(body.get("format"), int):
        raise ValueError("no format version")
    if body["format"] > FORMAT_VERSION:
        raise SessionFormatError(f"checkpoint {path} was written in session format {body['format']}, newer than "
                                 f"this bigsearch understands ({FORMAT_VERSION}); upgrade bigsearch")
    return body


def read_arrays(path, body):
    """The checkpoint's arrays, each checked against its SHA-256; ValueError when damaged."""
    arrays = {}
    for name, entry in body["arrays"].items():
        if not ARRAY_NAME.match(name) or entry["file"] != f"{name}.npy":
            raise ValueError(f"the manifest names the file {entry['file']!r} for array {name!r}; a checkpoint "
                             "holds only NAME.npy files of its own directory")
        data = (path / entry["file"]).read_bytes()
        if hashlib.sha256(data).hexdigest() != entry["sha256"]:
            raise ValueError(f"{entry['file']}: checksum mismatch")
        array = np.load(io.BytesIO(data), allow_pickle=False)
        if array.dtype.str != entry["dtype"] or list(array.shape) != entry["shape"]:
            raise ValueError(f"{entry['file']}: dtype or shape differs from the manifest")
        arrays[name] = array
    return arrays


def remove_leftovers(root):
    """Remove temporary and half-removed directories of writers that died."""
    for p in root.iterdir():
        if p.name.startswith(".") and (".tmp-" in p.name or ".trash-" in p.name):
            shutil.rmtree(p, ignore_errors=True)
