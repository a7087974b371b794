"""StoreWriter for object-store URLs: the same blocks, written in place, published last.

Object stores cannot rename a prefix, so the store is written where it will live, with
its root ``zarr.json`` held back until ``close()``: before that nothing at the URL opens
as a store, and a failed or interrupted write leaves no store (``abort()`` deletes what
was written; a killed writer's objects are deleted by the next write to the URL).
Replacing an existing store (``overwrite=True``) deletes it first.
"""

from .remote import zarr_group_for_writing
from .remote_options import check_url, check_writable
from .writer import StoreWriter


class ObjectStoreWriter(StoreWriter, for_urls=True):
    """``StoreWriter(url, ...)`` for ``s3://``, ``gs://`` and ``az://`` URLs (Zarr only);
    storage options from :func:`bigsearch.storage.remote_options.remote_defaults` and the
    environment."""

    @staticmethod
    def _location(path):
        check_url(path, write=True)
        return path.rstrip("/")

    def _prepare(self):
        check_writable(self.path, self.kind)
        group, self._publish, self._abort = zarr_group_for_writing(self.path, None, self.overwrite)
        return group

    def _publish_written(self):
        """Write the root zarr.json: the store appears."""
        self._publish()

    def _sync_behind(self):
        pass  # chunks go to object storage as they are written: nothing on a local disk to sync

    def abort(self):
        self._abort()
