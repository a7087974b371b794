"""The store formats bigsearch reads and writes, by name ("zarr", "hdf5").

A format is a :class:`~bigsearch.storage.base.FeatureStore` subclass that declares, on
the class, what the rest of the package asks of a format: its name (``kind``), the output
names that choose it (``suffixes``), the codecs it writes (``codecs``, ``compressors``),
how to recognize one on disk (``recognizes``), how to open it (``open``) and the class that
writes it (``writer``). ``open_store``, ``store_kind_for``, the store writer and ingest read
formats only through this registry; adding a format is one module and one
``register_store_format`` line (docs/contributing.md).
"""

from os import PathLike
from pathlib import Path
from typing import Any

from ..errors import StoreError, StoreNotFoundError
from .arrays import ARRAY_TYPES, unsupported
from .base import FeatureStore
from .format import X_NAME
from .hdf5_store import HDF5Store
from .location import is_url, local_path
from .remote import open_object_store
from .zarr_store import ZarrStore

STORE_FORMATS: dict[str, type[FeatureStore]] = {}  # kind -> class, in the order open_store asks them
DEFAULT_KIND = "zarr"  # what a path without a known suffix is written as
ARRAY_STORES: list[type[FeatureStore]] = []  # the classes wrapping an array object (storage/arrays.py)
HEAD_BYTES = 8  # what ``recognizes`` sees of a file


def register_store_format(cls):
    """Make ``cls`` (a FeatureStore subclass) a store format named ``cls.kind``."""
    STORE_FORMATS[cls.kind] = cls
    return cls


def register_array_type(cls):
    """Make ``open_store`` read objects that ``cls.wraps`` (an ArrayStore subclass)."""
    ARRAY_STORES.append(cls)
    return cls


for _format in (ZarrStore, HDF5Store):
    register_store_format(_format)
for _array_type in ARRAY_TYPES:
    register_array_type(_array_type)


def store_format(kind):
    """The FeatureStore class of a format name."""
    if kind not in STORE_FORMATS:
        raise StoreError(f"unknown store format {kind!r}; use {_either(repr(k) for k in STORE_FORMATS)}")
    return STORE_FORMATS[kind]


def store_kind_for(path, kind=None):
    """The format to write ``path`` in: ``kind`` when given, else the format whose suffix
    the name has, else the default (DEFAULT_KIND: Zarr)."""
    if kind is not None:
        return store_format(kind).kind
    suffix = Path(path).suffix.lower()
    return next((k for k, cls in STORE_FORMATS.items() if suffix in cls.suffixes), DEFAULT_KIND)


def store_codecs():
    """Every codec name some format writes, in registration order."""
    return tuple(dict.fromkeys(c for cls in STORE_FORMATS.values() for c in cls.codecs))


def open_store(path: Any, options: dict[str, Any] | None = None) -> FeatureStore:
    """Open a feature store in any registered format.

    ``path`` may already be an open :class:`FeatureStore` (returned as it is), or X itself
    as an array (NumPy, ``zarr.Array``, ``h5py.Dataset``, dask; storage/arrays.py), whose
    ``options`` are ``y``, ``ids`` and ``chunk_rows``. For a path, ``options`` go to the
    format's ``open`` (``dataset``: the array holding X, default "X"; ``chunk_rows`` for
    contiguous HDF5 data), or for a URL to
    :class:`~bigsearch.storage.remote.ObjectZarrStore` (``storage_options``,
    ``cache_dir``, ``cache_size``, ``dataset``).
    """
    if isinstance(path, FeatureStore):
        return path
    if not isinstance(path, (str, PathLike)):
        return wrap_array(path, options)
    if is_url(path):  # s3://, gs://, az://, http(s)://: Zarr in object storage, never a local path
        return open_object_store(path, options)
    path = Path(local_path(path))
    options = {k: v for k, v in (options or {}).items() if v is not None}
    described = [cls.description for cls in STORE_FORMATS.values()]
    if not path.exists():
        raise StoreNotFoundError(f"no feature store at {path} (expected {_either(described)})")
    head = None if path.is_dir() else _head(path)
    for cls in STORE_FORMATS.values():
        if cls.recognizes(path, head):
            return cls.open(path, options)
    raise StoreError(f"{path} is neither {' nor '.join(described)}; convert your data with `bigsearch ingest`")


def store_source(store, dataset=None):
    """(path, options) that reopen ``store`` later or elsewhere (sessions): a path with
    ``dataset``; an open store by its path and dataset; a zarr or h5py array by the file
    holding it. An array that lives only in this process (NumPy, dask) has none."""
    if not isinstance(store, (str, PathLike, FeatureStore)):
        store = wrap_array(store)
    if isinstance(store, FeatureStore):
        place = store.location()
        if place is None:
            raise StoreError(
                f"{store.path} lives only in this process (or in no group of a file), but this "
                "needs a store it can reopen (after a crash, on another day): write it to one "
                "first, e.g. bigsearch.create_store('X.zarr', x, y), or pass a zarr.Array in a "
                "local group or an h5py.Dataset"
            )
        store, dataset = place
    return str(store), {"dataset": dataset} if dataset not in (None, X_NAME) else {}


def wrap_array(x, options=None):
    """A FeatureStore reading the array ``x`` in place (``options``: y, ids, chunk_rows)."""
    options = {k: v for k, v in (options or {}).items() if v is not None}
    unknown = sorted(set(options) - {"y", "ids", "chunk_rows"})
    if unknown:
        raise StoreError(f"an array store takes the options y, ids and chunk_rows, not {', '.join(unknown)}")
    for cls in ARRAY_STORES:
        if cls.wraps(x):
            return cls(x, **options)
    raise StoreError(unsupported(x))


def is_feature_store(path):
    """Whether ``path`` is a whole feature store of a registered format: what an overwrite
    may replace (nothing else)."""
    path = Path(path)
    try:
        head = None if path.is_dir() else _head(path)
    except StoreError:
        return False
    return any(cls.replaceable(path, head) for cls in STORE_FORMATS.values())


def _head(path):
    try:
        with open(path, "rb") as fh:
            return fh.read(HEAD_BYTES)
    except OSError as e:
        raise StoreError(f"cannot read {path}: {e.strerror}") from e


def _either(words):
    words = list(words)
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} or {words[-1]}"
