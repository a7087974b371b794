"""Zarr feature stores in object storage: ``s3://``, ``gs://``, ``az://`` (read and write),
``http(s)://`` (read only).

The object stores are obstore's (one Rust client for S3 and S3-compatible servers, Google
Cloud Storage, Azure Blob Storage and plain HTTP), wrapped in zarr's own
``zarr.storage.ObjectStore``. Credentials, region and endpoint come from obstore's usual
environment variables (``AWS_ACCESS_KEY_ID``, ``AWS_ENDPOINT_URL``, ``GOOGLE_SERVICE_ACCOUNT``,
``AZURE_STORAGE_ACCOUNT_KEY``, ...) and from storage options (``--storage-option KEY=VALUE``:
any obstore config key or client option, plus ``retries`` and ``retry_timeout``).

Reading. The store lists X's chunk objects once when it opens (their ETags and sizes),
and every chunk read goes through a local chunk cache (storage/chunk_cache.py), verified
against that listing: the first pass fetches each chunk from the object store, later
passes memory-map the cached copy as a local store would. Requests that fail on the
network are retried with exponential backoff (obstore's retry: 10 retries within 3
minutes by default); then the read stops with one line naming the store and the cause.

Writing. Object stores cannot rename a prefix, so a new store is written in place and
its root ``zarr.json`` is written last: until then the prefix holds no store that opens.

URLs, storage options and the obstore client: storage/remote_options.py; obstore's errors
as one line each: storage/remote_errors.py.
"""

import contextlib
import hashlib

import numpy as np

from ..errors import ObjectStoreError, StoreExistsError, StoreNotFoundError
from .base import advise_willneed, map_file_array, release_nothing
from .chunk_cache import ChunkCache, cache_settings
from .location import url_scheme
from .remote_errors import translated_errors
from .remote_options import READ_ONLY_SCHEMES, ROOT_KEY, check_url, object_store, with_defaults
from .zarr_store import ZarrStore


# -- reading --------------------------------------------------------------------------------
class ObjectZarrStore(ZarrStore):
    """A Zarr v3 feature store at an object-store URL, read through a local chunk cache.

    Parameters
    ----------
    url : str
        ``s3://bucket/features.zarr``, ``gs://...``, ``az://...`` or ``https://...``.
    storage_options : dict, optional
        obstore config keys and client options (e.g. ``endpoint``, ``region``,
        ``allow_http``), plus ``retries`` and ``retry_timeout`` (seconds).
    cache_dir, cache_size : optional
        The local chunk cache (default ``$BIGSEARCH_CHUNK_CACHE`` or
        ``~/.cache/bigsearch/chunks``, at most ``$BIGSEARCH_CHUNK_CACHE_SIZE`` or 20 GiB);
        ``cache_size=0`` reads every chunk from the object store on every pass.
    """

    def __init__(self, url, storage_options=None, cache_dir=None, cache_size=None, dataset=None):
        check_url(url)
        self.url = url
        self.storage_options = dict(storage_options or {})
        self._cache_args = {"cache_dir": cache_dir, "cache_size": cache_size}
        self._object_store = object_store(url, self.storage_options)
        with self._errors():
            super().__init__(url, dataset)
            listed = self._list_chunks()
        self._objects = listed or {}
        self._heads = None if listed is not None else set()  # chunks asked for one by one
        self._cache = ChunkCache.for_store(url, **cache_settings(cache_dir, cache_size))
        self.fast_path = True  # _map_chunk: mapped from the cache, or fetched when not cached
        self.slow_reason = "" if self._cache else "no local chunk cache (cache size 0)"

    def _errors(self, action="read"):
        return translated_errors(self.url, self.storage_options, action)

    @staticmethod
    def _location(path):
        return path

    def _open_group(self, path):
        import zarr
        from zarr.storage import ObjectStore

        with self._errors():
            if not _exists(self._object_store, ROOT_KEY):  # a clear error before zarr's generic one
                raise StoreNotFoundError(
                    f"no feature store at {self.url} (no {ROOT_KEY} there; bigsearch "
                    "reads Zarr v3 groups from object stores, HDF5 files only locally)"
                )
            return zarr.open_group(ObjectStore(self._object_store, read_only=True), mode="r")

    def _chunk_key(self, j):
        return f"{self._x.path}/{self._x.metadata.encode_chunk_key((j, 0))}".lstrip("/")

    def _list_chunks(self):
        """{chunk key: (ETag, size)} of X's chunk objects (one listing per 1000 chunks);
        None where the server cannot list (plain HTTP): then each chunk's metadata is
        asked for (a HEAD) the first time this process reads it."""
        import obstore

        if url_scheme(self.url) in READ_ONLY_SCHEMES:
            return None
        prefix = f"{self._x.path}/"
        out = {}
        for batch in obstore.list(self._object_store, prefix=prefix, chunk_size=1000):
            for meta in batch:
                out[meta["path"]] = _version(meta)
        return out

    def _tag(self, key):
        """The (ETag, size) of chunk object ``key``; None when it was never written."""
        if self._heads is not None and key not in self._objects and key not in self._heads:
            import obstore

            with self._errors():
                try:
                    self._objects[key] = _version(obstore.head(self._object_store, key))
                except FileNotFoundError:
                    pass
            self._heads.add(key)
        return self._objects.get(key)

    @property
    def raw_chunks(self):
        """Whether a chunk object holds the raw little-endian values (no decoding)."""
        return not self._codec_reasons(self._x)

    def _map_chunk(self, j, huge=False):
        """Chunk j's stored rows: mapped from the local cache (fetched into it first when
        missing or stale), or fetched into memory when there is no room in the cache."""
        a, b = self.chunks[j]
        key = self._chunk_key(j)
        tag = self._tag(key)
        if tag is None:  # never written: the fill value
            return np.full((b - a, self.columns), self._x.fill_value, self.dtype), release_nothing
        nbytes = self.chunk_rows * self.columns * self.dtype.itemsize
        path = self._cache.lookup(j, tag, nbytes) if self._cache else None
        if path is None:
            values = self._fetch(j, key, tag)
            if self._cache:
                self._cache.admit(j, tag, values)  # written in the background; this pass uses values
            return values[: b - a], release_nothing
        try:
            x, release = map_file_array(path, 0, self.dtype, (self.chunk_rows, self.columns), huge=huge)
        except FileNotFoundError:  # evicted between lookup and map (another store's eviction)
            return self._fetch(j, key, tag)[: b - a], release_nothing
        return x[: b - a], release

    def _fetch(self, j, key, tag):
        """Chunk j's values (chunk_rows x r) from the object store."""
        import obstore

        a, b = self.chunks[j]
        with self._errors():
            if not self.raw_chunks:
                out = np.full((self.chunk_rows, self.columns), self._x.fill_value, self.dtype)
                out[: b - a] = self._x[a:b]
                return out
            got = obstore.get(self._object_store, key)
            data = got.bytes()
        if got.meta.get("e_tag") and got.meta["e_tag"] != tag[0]:
            raise ObjectStoreError(
                f"{self.url}: chunk {key} changed while this search was running "
                "(its ETag differs from the one listed when the store was opened)"
            )
        return np.frombuffer(data, self.dtype.newbyteorder("<")).reshape(self.chunk_rows, self.columns)

    def _advise_willneed(self, j):
        tag = self._objects.get(self._chunk_key(j))
        path = self._cache.path_if_cached(j, tag) if self._cache and tag else None
        if path is not None:
            advise_willneed(path, 0, 0)

    def close(self):
        if self._cache:
            self._cache.flush()
        super().close()

    def _read_optional(self, name, rows=None):
        with self._errors():
            return super()._read_optional(name, rows)

    def _read_scale(self):
        with self._errors():
            return super()._read_scale()

    def describe(self):
        out = super().describe()
        out["cache"] = self._cache.describe() if self._cache else None
        return out

    def _disk_bytes(self):
        return sum(size for _, size in self._objects.values())

    def reopen_options(self):
        return {"storage_options": self.storage_options, **self._cache_args, **super().reopen_options()}


def _version(meta):
    """What identifies one version of an object: its ETag (else its modification time), and its size."""
    return (meta.get("e_tag") or str(meta.get("last_modified")), int(meta["size"]))


def open_object_store(url, options=None):
    """``open_store`` for URLs: the options given, over the thread's remote defaults."""
    options = with_defaults(options)
    return ObjectZarrStore(
        url, options.get("storage_options"), options.get("cache_dir"), options.get("cache_size"), options.get("dataset")
    )


# -- writing --------------------------------------------------------------------------------
def zarr_group_for_writing(url, storage_options, overwrite):
    """A new Zarr group at ``url`` whose root ``zarr.json`` is held back until
    ``publish()`` (returns (group, publish, abort)). An existing store is refused unless
    ``overwrite``, then deleted first (object stores cannot swap a prefix atomically);
    objects under ``url`` that hold no store (a killed write's) are removed."""
    import zarr

    check_url(url, write=True)
    storage_options = with_defaults({"storage_options": storage_options}).get("storage_options") or {}
    store = object_store(url, storage_options)
    with translated_errors(url, storage_options, "write"):
        exists = _exists(store, ROOT_KEY)
        if exists and not overwrite:
            raise StoreExistsError(f"{url} already exists; pass overwrite=True to replace it")
        _delete_prefix(store)
        held = HeldRootStore(store)
        group = zarr.open_group(held, mode="w-", zarr_format=3)

    def publish():
        with translated_errors(url, storage_options, "write"):
            held.publish()

    def abort():
        with contextlib.suppress(Exception):
            _delete_prefix(store)

    return group, publish, abort


def _exists(store, key):
    """Whether the (small) object ``key`` exists. A GET, not a HEAD: S3's error body says
    which error it is (NoSuchBucket, AccessDenied, InvalidAccessKeyId, ...), a HEAD
    response carries none. A missing bucket raises."""
    import obstore

    try:
        obstore.get(store, key).bytes()
    except FileNotFoundError as e:
        if "NoSuchBucket" in str(e):
            raise
        return False
    return True


def _delete_prefix(store):
    """Delete every object under the store's prefix, the root zarr.json first."""
    import obstore

    keys = [m["path"] for batch in obstore.list(store, chunk_size=1000) for m in batch]
    keys.sort(key=lambda k: k != ROOT_KEY)
    for start in range(0, len(keys), 1000):
        obstore.delete(store, keys[start : start + 1000])


def _held_root_store_class():
    from zarr.storage import ObjectStore, WrapperStore

    class _HeldRootStore(WrapperStore):
        """zarr's ObjectStore, except that the root zarr.json is kept in memory until
        ``publish()``: a store appears only once everything else is written."""

        def __init__(self, store):
            super().__init__(store if isinstance(store, ObjectStore) else ObjectStore(store))
            self.root = None
            self.published = False

        def _with_store(self, store):
            return self

        async def set(self, key, value):
            if key == ROOT_KEY and not self.published:
                self.root = value
                return
            await self._store.set(key, value)

        async def get(self, key, prototype, byte_range=None):
            if key == ROOT_KEY and not self.published:
                return (
                    self.root
                    if byte_range is None or self.root is None
                    else await super().get(key, prototype, byte_range)
                )
            return await self._store.get(key, prototype, byte_range)

        async def exists(self, key):
            if key == ROOT_KEY and not self.published:
                return self.root is not None
            return await self._store.exists(key)

        def publish(self):
            import obstore

            self.published = True
            if self.root is not None:
                obstore.put(self._store.store, ROOT_KEY, self.root.to_bytes())

    return _HeldRootStore


def HeldRootStore(store):  # noqa: N802 (a class made on first use: zarr imports lazily)
    global _HELD
    if _HELD is None:
        _HELD = _held_root_store_class()
    return _HELD(store)


_HELD = None


def store_exists(url, storage_options=None):
    """Whether a feature store (a root zarr.json) exists at ``url``."""
    storage_options = with_defaults({"storage_options": storage_options}).get("storage_options") or {}
    with translated_errors(url, storage_options, "read"):
        return _exists(object_store(url, storage_options), ROOT_KEY)


def cache_key(url):
    return hashlib.sha256(url.rstrip("/").encode()).hexdigest()[:24]
