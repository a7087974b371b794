"""Object-store errors as one line each: what is wrong (no bucket, bad credentials,
denied, unreachable, no store) and how to fix it, for every read and write of
storage/remote.py.
"""

import contextlib
import os
import re

from ..errors import ObjectStoreError, StoreError, StoreNotFoundError
from .remote_options import ENDPOINT_KEYS, ROOT_KEY


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
