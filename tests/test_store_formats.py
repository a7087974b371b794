"""The suite every store format passes (bigsearch/testing/store_suite.py, zarr-python's
StoreTests habit): one subclass per registered format. A format registered without a
subclass here fails ``test_every_registered_format_runs_the_suite``. The object store
(test_object_store.py) and the arrays wrapped as stores (test_arrays.py) run it too."""

from bigsearch.storage import STORE_FORMATS, HDF5Store, ZarrStore, registry, store_kind_for
from bigsearch.testing.store_suite import StoreFormatTests


class TestZarr(StoreFormatTests):
    fmt = ZarrStore


class TestHDF5(StoreFormatTests):
    fmt = HDF5Store


def test_every_registered_format_runs_the_suite():
    tested = {cls.fmt for cls in StoreFormatTests.__subclasses__()}
    assert set(STORE_FORMATS.values()) <= tested


def test_the_default_format_is_zarr_whatever_the_order(monkeypatch):
    """A directory format registered before Zarr (to be recognized first) does not become the default."""
    monkeypatch.setattr(registry, "STORE_FORMATS", {"hdf5": HDF5Store, "zarr": ZarrStore})
    assert store_kind_for("plain-name") == "zarr" and store_kind_for("x.h5") == "hdf5"
