"""A local disk cache of remote chunks, so that only the first pass reads the object store.

Each store (by URL) has a directory under the cache root; a cached chunk is a file of its
stored values (chunk_rows x stored columns, little-endian, C order), named after the chunk
and a hash of the chunk object's ETag and size as listed when the store was opened. A
chunk whose object changed has another name, so it is fetched again (and the stale file
removed); nothing is trusted that the listing does not confirm. Files are written under
a temporary name, fsync'd and renamed into place (storage/atomic.py), so processes
sharing the directory (the workers of one machine) never read a partial chunk, nor
does a search after a crash.

The size limit. Chunks are admitted while the directory holds less than the limit;
when it is full, files of *other* stores are removed (least recently used first), but
never this store's: a pass reads the chunks in order, and evicting this store's own
chunks to make room would make every pass miss (a cyclic scan over more than an LRU
cache holds hits nothing). So with a cache smaller than the shard, the first chunks
that fit stay cached, and every pass re-reads only the others from the object store.
The limit is checked when a chunk is admitted, from a scan of the directory made when
the store opened plus this process's own additions: processes sharing a directory may
overshoot it by what each adds meanwhile.
"""

import hashlib
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from .atomic import atomic_path

DEFAULT_SIZE = 20 * 2**30
SIZE_UNITS = {"": 1, "b": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}


def parse_size(text):
    """``20G``, ``512M``, ``1.5T``, ``0`` (bytes when no unit) as a number of bytes."""
    if isinstance(text, (int, float)):
        return int(text)
    s = str(text).strip().lower().removesuffix("ib").removesuffix("b")
    unit = s[-1:] if s[-1:] in SIZE_UNITS else ""
    try:
        value = float(s[: len(s) - len(unit)])
    except ValueError:
        raise ValueError(f"cache size {text!r} is not a size such as 20G, 512M or 0") from None
    if not 0 <= value < float("inf"):
        raise ValueError(f"cache size {text!r} is not a size >= 0 such as 20G, 512M or 0")
    return int(value * SIZE_UNITS[unit])


def default_cache_dir():
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "bigsearch", "chunks")


def cache_settings(cache_dir=None, cache_size=None):
    """The cache directory and size limit: given, else from BIGSEARCH_CHUNK_CACHE(_SIZE),
    else ~/.cache/bigsearch/chunks and 20 GiB."""
    from ..errors import ParameterError

    size = cache_size if cache_size is not None else os.environ.get("BIGSEARCH_CHUNK_CACHE_SIZE", DEFAULT_SIZE)
    try:
        size = parse_size(size)
    except ValueError as e:
        raise ParameterError(str(e)) from None
    return {"root": cache_dir or os.environ.get("BIGSEARCH_CHUNK_CACHE") or default_cache_dir(), "limit": size}


class ChunkCache:
    """The cached chunks of one store. ``lookup(j, tag, nbytes)`` -> path or None;
    ``admit(j, tag, values)`` writes a fetched chunk (in the background)."""

    PENDING = 2  # chunks waiting to be written: the memory a fast network can borrow

    def __init__(self, root, key, limit):
        self.root = Path(root)
        self.dir = self.root / key
        self.limit = int(limit)
        self.dir.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._writer = ThreadPoolExecutor(1, thread_name_prefix="bigsearch-cache")
        self._slots = threading.BoundedSemaphore(self.PENDING)
        self._pending = set()
        self.used = _tree_bytes(self.root)
        self.hits = self.misses = self.declined = 0

    @classmethod
    def for_store(cls, url, root, limit):
        """The cache of ``url``, or None when the limit is 0 or the directory cannot be made."""
        if limit <= 0:
            return None
        key = hashlib.sha256(url.rstrip("/").encode()).hexdigest()[:24]
        try:
            return cls(root, key, limit)
        except OSError as e:
            import warnings

            warnings.warn(
                f"no chunk cache for {url}: cannot use {root} ({e.strerror}); every pass reads the object store",
                RuntimeWarning,
                stacklevel=3,
            )
            return None

    def _path(self, j, tag):
        digest = hashlib.sha256(repr(tuple(tag)).encode()).hexdigest()[:16]
        return self.dir / f"{j}-{digest}.raw"

    def lookup(self, j, tag, nbytes):
        """The cached file of chunk j at version ``tag``, if there and whole (``nbytes``)."""
        path = self._path(j, tag)
        try:
            whole = path.stat().st_size == nbytes
        except OSError:
            whole = False
        if whole:
            self.hits += 1
            return path
        self.misses += 1
        return None

    def admit(self, j, tag, values):
        """Start writing chunk j's values to the cache in the background (the caller
        uses ``values`` meanwhile); whether there was room. At most ``PENDING`` writes
        wait at once: a fetch that outruns the disk waits for a slot."""
        values = np.ascontiguousarray(values, dtype=values.dtype.newbyteorder("<"))
        with self._lock:
            if self.used + values.nbytes > self.limit and not self._make_room(values.nbytes):
                self.declined += 1
                return False
            self.used += values.nbytes
        self._slots.acquire()
        future = self._writer.submit(self._write, j, tag, values)
        future.add_done_callback(lambda _: self._slots.release())
        self._pending.add(future)
        future.add_done_callback(self._pending.discard)
        return True

    def flush(self):
        """Wait for the background writes."""
        for future in list(self._pending):
            future.result()

    def _write(self, j, tag, values):
        target = self._path(j, tag)
        for stale in self.dir.glob(f"{j}-*.raw"):  # an older version of this chunk
            if stale == target:  # the same version, admitted twice: the rename replaces it
                continue
            size = stale.stat().st_size if stale.exists() else 0
            if _unlink(stale):
                with self._lock:
                    self.used -= size
        try:
            with atomic_path(target, tag="partial") as tmp, open(tmp, "wb") as fh:
                fh.write(memoryview(values).cast("B"))
        except OSError:  # a full or failing disk costs the next pass a fetch, nothing else
            with self._lock:
                self.used -= values.nbytes

    def path_if_cached(self, j, tag):
        """Chunk j's cached file if it exists (for read-ahead; no checks, no counts)."""
        path = self._path(j, tag)
        return path if path.exists() else None

    def _make_room(self, need):
        """Remove other stores' cached chunks, least recently used first, until ``need``
        bytes fit; whether they do."""
        others = [
            (f.stat().st_atime, f.stat().st_size, f)
            for d in self.root.iterdir()
            if d.is_dir() and d != self.dir
            for f in d.glob("*.raw")
        ]
        for _, size, f in sorted(others):
            if self.used + need <= self.limit:
                break
            if _unlink(f):
                self.used -= size
        return self.used + need <= self.limit

    def describe(self):
        return {
            "dir": str(self.dir),
            "limit_bytes": self.limit,
            "used_bytes": self.used,
            "hits": self.hits,
            "misses": self.misses,
            "declined": self.declined,
        }


def _tree_bytes(root):
    total = 0
    for dirpath, _, files in os.walk(root):
        for f in files:
            try:
                total += os.path.getsize(os.path.join(dirpath, f))
            except OSError:
                pass
    return total


def _unlink(path):
    try:
        os.unlink(path)
        return True
    except OSError:
        return False
