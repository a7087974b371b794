"""StoreWriter for object-store URLs: the same blocks, written in place, published last.

Object stores cannot rename a prefix, so the store is written where it will live, with
its root ``zarr.json`` held back until ``close()``: before that nothing at the URL opens
as a store, and a failed or interrupted write leaves no store (``abort()`` deletes what
was written; a killed writer's objects are deleted by the next write to the URL).
Replacing an existing store (``overwrite=True``) deletes it first.
"""

import numpy as np

from ..errors import StoreError
from .format import FEATURE_DTYPES, FORMAT_ATTR, FORMAT_VERSION, default_chunk_rows
from .remote import check_url, zarr_group_for_writing
from .writer import StoreWriter, _ZarrWriter, store_kind_for


class ObjectStoreWriter(StoreWriter):
    """``StoreWriter(url, ...)`` for ``s3://``, ``gs://`` and ``az://`` URLs (Zarr only).
    ``storage_options`` as for :func:`bigsearch.open_store`."""

    def __init__(self, path, n_features, *, dtype="float32", chunk_rows=None, kind=None,
                 labels=False, ids_dtype=None, attrs=None, overwrite=False, compressors=None,
                 storage_options=None):
        check_url(path, write=True)
        self.path = path
        self.kind = store_kind_for(path, kind)
        if self.kind != "zarr":
            raise StoreError(f"{path}: HDF5 files cannot be written to object storage; write a Zarr store "
                             "(a URL not ending in .h5, or --output-format zarr)")
        self.r = int(n_features)
        self.dtype = np.dtype(dtype)
        if self.dtype not in FEATURE_DTYPES:
            raise StoreError(f"X dtype {self.dtype} is not supported; use float32 or float64")
        self.chunk_rows = int(chunk_rows or default_chunk_rows(self.r, self.dtype.itemsize))
        self.overwrite = overwrite
        self.n = 0
        self.rows_appended = 0
        self._pending = []
        group, self._publish, self._abort = zarr_group_for_writing(path, storage_options, overwrite)
        attrs = {FORMAT_ATTR: FORMAT_VERSION, **(attrs or {})}
        self._backend = _ZarrWriter(group, self.r, self.dtype, self.chunk_rows, labels, ids_dtype, attrs,
                                    compressors)

    def close(self):
        """Write what is pending, then the root zarr.json: the store appears."""
        self._flush(final=True)
        if self.n == 0:
            self.abort()
            raise StoreError(f"{self.path}: no rows were written")
        self._publish()
        return self.path

    def abort(self):
        self._abort()
