"""Storage: feature stores on disk (Zarr v3 directories, HDF5 files), read chunk by chunk."""

from pathlib import Path

from ..errors import StoreError, StoreNotFoundError
from .base import FeatureStore
from .format import FORMAT_VERSION, HDF5_SIGNATURE, default_chunk_rows
from .hdf5_store import HDF5Store
from .writer import StoreWriter, create_store, store_kind_for
from .zarr_store import ZarrStore


__all__ = ["FeatureStore", "HDF5Store", "ZarrStore", "StoreWriter", "create_store", "open_store",
           "store_kind_for", "default_chunk_rows", "FORMAT_VERSION"]


def open_store(path, options=None):
    """Open a feature store: a Zarr group directory or an HDF5 file.

    ``path`` may already be an open :class:`FeatureStore` (returned as it is).
    ``options`` go to the store class (``chunk_rows`` for contiguous HDF5 data).
    """
    if isinstance(path, FeatureStore):
        return path
    path = Path(path)
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
