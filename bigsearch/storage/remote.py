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
"""

import contextlib
import datetime
import hashlib
import os
import re

import numpy as np

from ..errors import StoreError, StoreExistsError, StoreNotFoundError
from .base import advise_willneed, map_file_array, release_nothing
from .chunk_cache import ChunkCache, cache_settings
from .location import url_scheme
from .zarr_store import ZarrStore

WRITABLE_SCHEMES = ("s3", "s3a", "gs", "az", "azure", "abfs", "abfss", "adl")
READ_ONLY_SCHEMES = ("http", "https")
CLIENT_OPTIONS = (
    "allow_http",
    "allow_invalid_certificates",
    "connect_timeout",
    "default_content_type",
    "pool_idle_timeout",
    "pool_max_idle_per_host",
    "proxy_url",
    "proxy_ca_certificate",
    "proxy_excludes",
    "randomize_addresses",
    "read_timeout",
    "timeout",
    "user_agent",
)
ENDPOINT_KEYS = ("endpoint", "endpoint_url", "aws_endpoint", "aws_endpoint_url")
ROOT_KEY = "zarr.json"


class ObjectStoreError(StoreError):
    """An object store cannot be used: no credentials, unreachable, no such bucket, denied."""


# -- URLs and options -----------------------------------------------------------------------
def check_url(url, write=False):
    """Refuse a scheme obstore cannot serve (or cannot write), with the ones it can."""
    scheme = url_scheme(url)
    if write and scheme in READ_ONLY_SCHEMES:
        raise StoreError(f"{url}: {scheme}:// stores are read-only; write to s3://, gs:// or az:// instead")
    if scheme not in WRITABLE_SCHEMES + READ_ONLY_SCHEMES:
        raise StoreError(
            f"{url}: unknown URL scheme {scheme}://; bigsearch reads s3://, gs://, az:// "
            "and http(s):// stores, and local paths"
        )


def check_writable(url, kind):
    """Refuse what cannot be written at ``url``: a read-only or unknown scheme, or a store
    of a format other than Zarr (``kind``)."""
    check_url(url, write=True)
    if kind != "zarr":
        raise StoreError(
            f"{url}: HDF5 files cannot be written to object storage; write a Zarr store "
            "(a URL not ending in .h5, or output.format zarr)"
        )


def parse_storage_options(pairs):
    """``("KEY=VALUE", ...)`` as a dict (``--storage-option``)."""
    out = {}
    for pair in pairs or ():
        key, sep, value = str(pair).partition("=")
        if not sep or not key.strip():
            raise StoreError(f"storage_options {pair!r} is not KEY=VALUE (e.g. endpoint=http://localhost:9000)")
        out[key.strip().lower()] = value.strip()
    return out


_defaults = {}


@contextlib.contextmanager
def remote_defaults(storage_options=None, cache_dir=None, cache_size=None):
    """Storage options and cache settings for the object-store URLs this process opens
    by path meanwhile (the CLI's ``--storage-option``, ``--cache-dir``, ``--cache-size``).
    Stores sent to dask workers carry theirs explicitly."""
    old = dict(_defaults)
    _defaults.update({"storage_options": dict(storage_options or {}), "cache_dir": cache_dir, "cache_size": cache_size})
    try:
        yield
    finally:
        _defaults.clear()
        _defaults.update(old)


def _with_defaults(options):
    merged = dict(_defaults)
    merged.update({k: v for k, v in (options or {}).items() if v is not None})
    return merged


def object_store(url, storage_options=None):
    """An obstore store rooted at ``url`` (its path is the store's prefix)."""
    try:
        from obstore.exceptions import BaseError
        from obstore.store import from_url
    except ImportError:
        raise StoreError(f"{url}: stores in object storage need obstore: pip install 'bigsearch[remote]'") from None
    config, client, retry = _split_options(url, dict(storage_options or {}))
    try:
        return from_url(url.rstrip("/"), config=config or None, client_options=client or None, retry_config=retry)
    except BaseError as e:
        detail = str(e).splitlines()[0]
        raise ObjectStoreError(f"{url}: bad storage option: {detail}; see docs/cluster.md for the keys") from None
    except ValueError as e:  # obstore's own URL checks (e.g. "empty host")
        raise ObjectStoreError(f"{url}: not an object-store URL ({e}); give SCHEME://BUCKET/PATH") from None


def _split_options(url, options):
    """Storage options as obstore's (config, client options, retry config)."""
    retry = {
        "max_retries": _option_number(options, "retries", 10, int, most=1000),
        "retry_timeout": datetime.timedelta(seconds=_option_number(options, "retry_timeout", 180, float, most=86400)),
    }
    client = {
        k: _bool(options.pop(k)) if k.startswith("allow") else options.pop(k)
        for k in list(options)
        if k in CLIENT_OPTIONS
    }
    endpoint = next(
        (options[k] for k in ENDPOINT_KEYS if k in options),
        os.environ.get("AWS_ENDPOINT_URL") or os.environ.get("AWS_ENDPOINT"),
    )
    if url_scheme(url) in ("s3", "s3a") and endpoint and endpoint.startswith("http://"):
        client.setdefault("allow_http", True)  # the user named a plain-http endpoint
    if url_scheme(url) == "http":
        client.setdefault("allow_http", True)
    for k in ("skip_signature", "virtual_hosted_style_request"):
        if k in options:
            options[k] = _bool(options[k])
    return options, client, retry


def _option_number(options, key, default, kind, most):
    """Storage option ``key`` as a number of ``kind`` (int, or float seconds) in [0, most]."""
    text = options.pop(key, default)
    try:
        value = kind(text)
    except (TypeError, ValueError):
        value = -1
    if not 0 <= value <= most:
        raise ObjectStoreError(f"storage_options {key}={text}: give a number from 0 to {most} (e.g. {key}={default})")
    return value


def _bool(value):
    return value if isinstance(value, bool) else str(value).lower() in ("1", "true", "yes", "on")


# -- errors ---------------------------------------------------------------------------------
def _endpoint_of(url, storage_options):
    opts = storage_options or {}
    return next(
        (opts[k] for k in ENDPOINT_KEYS if k in opts),
        os.environ.get("AWS_ENDPOINT_URL") or os.environ.get("AWS_ENDPOINT") or "its default endpoint",
    )


def describe_error(error, url, storage_options=None, action="read"):
    """An obstore (or OS) error as one line that says what is wrong and how to fix it."""
    text = str(error)
    first = text.splitlines()[0] if text else type(error).__name__
    code = re.search(r"<Code>([^<]+)</Code>", text)
    code = code.group(1) if code else ""
    name = type(error).__name__
    bucket = url.split("://", 1)[-1].split("/", 1)[0]
    endpoint = _endpoint_of(url, storage_options)
    if code in ("NoSuchBucket", "ContainerNotFound") or "bucket does not exist" in text.lower():
        return StoreNotFoundError(
            f"{url}: the bucket {bucket!r} does not exist at {endpoint}; create it or check the URL"
        )
    if (
        code in ("InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken", "InvalidToken")
        or name == "UnauthenticatedError"
    ):
        return ObjectStoreError(
            f"{url}: the object store rejected the credentials ({code or name}); "
            "check AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (or the matching storage options)"
        )
    if code == "AccessDenied" or name == "PermissionDeniedError":
        return ObjectStoreError(
            f"{url}: permission denied to {action} ({code or 'HTTP 403'}); the credentials "
            f"need {action} access to bucket {bucket!r}"
        )
    if (
        "/latest/api/token" in text
        or "metadata" in first.lower()
        and "credential" in text.lower()
        or "169.254.169.254" in text
    ):
        return ObjectStoreError(
            f"{url}: no credentials for the object store: set AWS_ACCESS_KEY_ID and "
            "AWS_SECRET_ACCESS_KEY (or storage_options access_key_id=... "
            "secret_access_key=...), or skip_signature=true for a public bucket"
        )
    if (
        "error sending request" in text
        or "Connection refused" in text
        or "dns error" in text
        or "connect" in first.lower()
        and "timed out" in text.lower()
    ):
        retries = re.search(r"after (\d+) retries", text)
        tried = f" (after {retries.group(1)} retries)" if retries else ""
        return ObjectStoreError(
            f"{url}: cannot reach the object store at {endpoint}{tried}; check the "
            "endpoint (AWS_ENDPOINT_URL or storage_options endpoint=...) and the network"
        )
    if isinstance(error, FileNotFoundError) or name == "NotFoundError":
        return StoreNotFoundError(f"no feature store at {url} (no {ROOT_KEY} there)")
    return ObjectStoreError(f"{url}: object store error while trying to {action}: {first[:300]}")


@contextlib.contextmanager
def translated_errors(url, storage_options=None, action="read"):
    """Turn obstore's errors (and zarr's wrapping of them) into one-line StoreErrors."""
    from obstore.exceptions import BaseError

    error = None
    try:
        yield
    except StoreError:
        raise
    except (BaseError, OSError) as e:
        error = describe_error(e, url, storage_options, action)
    if error is not None:  # raised outside the except block: no context for dask to carry
        raise error from None


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

    # Each pass maps the cache's files anew: a held map would keep an evicted file's disk
    # space past the cache's limit, and a chunk fetched into memory is no map to hold.
    maps_holdable = False

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
    options = _with_defaults(options)
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
    storage_options = _with_defaults({"storage_options": storage_options}).get("storage_options") or {}
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
    storage_options = _with_defaults({"storage_options": storage_options}).get("storage_options") or {}
    with translated_errors(url, storage_options, "read"):
        return _exists(object_store(url, storage_options), ROOT_KEY)


def cache_key(url):
    return hashlib.sha256(url.rstrip("/").encode()).hexdigest()[:24]
