"""Where a store is: a local path, a ``file://`` URL, or an object-store URL (``s3://``,
``gs://``, ``az://``, ``http(s)://``), told apart by their text alone.

Every store module asks this one (base, the writers, the registry, remote); it imports
nothing of the package but errors, so none of them imports another to learn whether a
path is a URL.
"""

import os
import re
from pathlib import Path

from ..errors import ParameterError

URL_RE = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*)://")


def url_scheme(path):
    """The scheme of a URL (``s3``, ``gs``, ...), or None for a local path."""
    if not isinstance(path, str):
        return None
    match = URL_RE.match(path)
    return match.group(1).lower() if match else None


def is_url(path):
    return url_scheme(path) not in (None, "file")


def local_path(path):
    """``file:///x`` as ``/x``; anything else as it is."""
    return path[len("file://") :] if url_scheme(path) == "file" else path


def store_location(path, resolve=False):
    """Where a store is, for other processes and later runs: a URL as it is, a local path
    made absolute (symbolic links resolved with ``resolve``)."""
    if is_url(str(path)):
        return str(path).rstrip("/")
    path = local_path(str(path))
    return str(Path(path).resolve()) if resolve else os.path.abspath(path)


def require_local(path, name):
    """``path`` (parameter ``name``) as a local Path; a URL is refused: results, sessions
    and exports are written to the local disk, only feature stores live in object storage
    (as a Path, ``s3://b/x`` would silently become a local directory ``s3:``)."""
    if is_url(str(path)):
        raise ParameterError(
            f"{name} {path} is a URL: it must be a local path (only feature stores can be in object storage)"
        )
    return Path(local_path(str(path)))


def local_dir_beside(path, name):
    """A local directory for files derived from the store at ``path``: ``name`` beside a
    local store; for a URL, under the chunk cache's root (nothing beside it is local)."""
    if is_url(str(path)):
        from .chunk_cache import cache_settings

        return Path(cache_settings()["root"]).parent / name.lstrip(".")
    return Path(local_path(str(path))).parent / name
