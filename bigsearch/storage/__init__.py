"""Storage: feature stores on disk (Zarr v3 directories, HDF5 files), read chunk by chunk;
``arrays`` reads X given as an array (NumPy, zarr, h5py, dask) the same way.

``registry`` knows the formats (open_store, store_kind_for); ``base`` is what every format
offers the engine; ``writer`` writes any format atomically (through ``atomic``);
``journal`` is the checksummed append-only log sessions and experiments keep.
"""

from .base import FeatureStore
from .format import FORMAT_VERSION, default_chunk_rows
from .hdf5_store import HDF5Store
from .location import is_url, local_dir_beside, require_local, store_location
from .registry import (
    STORE_FORMATS,
    is_feature_store,
    open_store,
    register_array_type,
    register_store_format,
    store_codecs,
    store_format,
    store_kind_for,
    store_source,
)
from .remote_writer import ObjectStoreWriter  # StoreWriter(url) writes through it (it names itself)
from .writer import StoreWriter, create_store
from .zarr_store import ZarrStore

__all__ = ["FeatureStore", "HDF5Store", "ZarrStore", "StoreWriter", "ObjectStoreWriter", "create_store", "open_store",
           "store_kind_for", "store_format", "store_codecs", "register_store_format", "STORE_FORMATS",
           "register_array_type", "store_source", "is_feature_store",
           "default_chunk_rows", "FORMAT_VERSION", "is_url", "store_location", "local_dir_beside",
           "require_local"]
