"""Storage: feature stores on disk (Zarr v3 directories, HDF5 files), read chunk by chunk."""

from pathlib import Path

from ..errors import StoreError, StoreNotFoundError
from .base import FeatureStore
from .format import FORMAT_VERSION, default_chunk_rows
from .hdf5_store import HDF5Store
from .remote import is_url, local_dir_beside, local_path, open_object_store, store_location
from .writer import StoreWriter, create_store, store_kind_for
from .zarr_store import ZarrStore

HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"

__all__ = ["FeatureStore", "HDF5Store", "ZarrStore", "StoreWriter", "create_store", "open_store",
           "store_kind_for", "default_chunk_rows", "FORMAT_VERSION", "is_url", "store_location",
           "local_dir_beside"]


def open_store(path, options=None):
    """Open a feature store: a Zarr group directory, an HDF5 file, or a Zarr group at an
    object-store URL (storage/remote.py).

    ``path`` may already be an open :class:`FeatureStore` (returned as it is).
    ``options`` go to the store class (``chunk_rows`` for contiguous HDF5 data;
    ``storage_options``, ``cache_dir``, ``cache_size`` for URLs).
    """
    if isinstance(path, FeatureStore):
        return path
    if is_url(path):     # s3://, gs://, az://, http(s)://: never a local path
        return open_object_store(path, options)
    path = Path(local_path(path))
    options = {k: v for k, v in (options or {}).items() if v is not None}
    if not path.exists():
        raise StoreNotFoundError(f"no feature store at {path} (expected a Zarr directory or an HDF5 file)")
    if path.is_dir():
        return ZarrStore(path)
    try:
        with open(path, "rb") as fh:
            head = fh.read(8)
    except OSError as e:
        raise StoreError(f"cannot read {path}: {e.strerror}") from e
    if head == HDF5_SIGNATURE:
        return HDF5Store(path, **options)
    raise StoreError(f"{path} is neither a Zarr directory nor an HDF5 file; "
                     "convert your data with `bigsearch ingest`")
