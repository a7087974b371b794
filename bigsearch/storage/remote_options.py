"""Object-store URLs and storage options: which schemes bigsearch reads and writes, the
``--storage-option KEY=VALUE`` pairs, the defaults a process sets for the URLs it opens,
and the obstore client built from them (storage/remote.py reads and writes through it).
"""

import atexit
import contextlib
import datetime
import functools
import os
import sys
import threading
import time

from ..errors import ObjectStoreError, StoreError
from .location import url_scheme

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


def with_defaults(options):
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
    _guard_exit()
    try:
        return from_url(url.rstrip("/"), config=config or None, client_options=client or None, retry_config=retry)
    except BaseError as e:
        detail = str(e).splitlines()[0]
        raise ObjectStoreError(f"{url}: bad storage option: {detail}; see docs/cluster.md for the keys") from None
    except ValueError as e:  # obstore's own URL checks (e.g. "empty host")
        raise ObjectStoreError(f"{url}: not an object-store URL ({e}); give SCHEME://BUCKET/PATH") from None


@functools.cache  # once a process
def _guard_exit():
    """Make the interpreter wait at exit for threads it did not start to leave Python code.

    obstore's async calls (zarr's ObjectStore awaits them) hand their results to the event
    loop from tokio threads: loop.call_soon_threadsafe, which releases the GIL to wake the
    loop. If the main thread, woken by that result, finishes and shuts the interpreter down
    before the tokio thread takes the GIL back, CPython (< 3.14) ends that thread with
    pthread_exit, and the unwind through Rust frames aborts the process: SIGABRT at the end
    of a command that succeeded (2 of 1,500 `info` runs on s3 under load). atexit runs
    before the shutdown, so waiting there closes the window."""
    atexit.register(wait_for_foreign_threads)


def wait_for_foreign_threads(timeout=5.0):
    """Wait (at most ``timeout`` s) until no thread unknown to ``threading`` runs Python code."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        known = {t.ident for t in threading.enumerate() if not isinstance(t, threading._DummyThread)}
        if not set(sys._current_frames()) - known:
            return
        time.sleep(0.001)


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
