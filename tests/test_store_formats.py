"""The suite every store format passes (zarr-python's StoreTests habit): a base class of
tests and one subclass per registered format. A format registered without a subclass
here fails ``test_every_registered_format_runs_the_suite``."""

import pickle

import numpy as np
import pytest

import bigsearch
from bigsearch.errors import ParameterError, StoreExistsError
from bigsearch.storage import (
    STORE_FORMATS,
    HDF5Store,
    StoreWriter,
    ZarrStore,
    is_feature_store,
    open_store,
    registry,
    store_codecs,
    store_kind_for,
)

from conftest import DTYPES, read_all


class StoreFormatTests:
    fmt = None  # the FeatureStore subclass under test

    def path(self, tmp_path, name="s"):
        return tmp_path / f"{name}{self.fmt.suffixes[0]}"

    @pytest.mark.parametrize("dtype", DTYPES)
    @pytest.mark.parametrize("chunk_rows", [1, 7, 50, 1000])
    def test_round_trip(self, tmp_path, dtype, chunk_rows):
        rng = np.random.default_rng(0)
        X = rng.normal(size=(50, 4)).astype(dtype)
        y = rng.integers(-1, 2, 50).astype(np.int8)
        ids = np.arange(1000, 1050)
        path = self.path(tmp_path)
        assert store_kind_for(path) == self.fmt.kind
        bigsearch.create_store(path, X, y, ids=ids, chunk_rows=chunk_rows)
        with open_store(path) as s:
            assert type(s) is self.fmt and s.kind == self.fmt.kind
            assert s.fast_path and s.shape == (50, 4) and s.dtype == dtype and s.codec() == "none"
            assert s.chunk_rows == chunk_rows
            np.testing.assert_array_equal(read_all(s), X)
            np.testing.assert_array_equal(s.labels(), y)
            np.testing.assert_array_equal(s.ids(), ids)
            np.testing.assert_array_equal(s.ids([49, 0, 7, 0]), ids[[49, 0, 7, 0]])
            assert len(s.ids([])) == 0
            for name, values in (("y", y), ("ids", ids)):  # a range of rows, as cluster order reads them
                np.testing.assert_array_equal(s.read_per_row(name, slice(3, 41)), values[3:41])
            np.testing.assert_array_equal(s.read_rows([49, 0, 7]), X[[49, 0, 7]].astype(np.float64))
            assert s.attrs["bigsearch_format"] == 1

    def test_string_ids_and_attributes(self, tmp_path):
        path = bigsearch.create_store(
            self.path(tmp_path),
            np.ones((5, 2), np.float32),
            ids=np.array(["a", "b", "c", "d", "e"]),
            attrs={"provenance": {"source": "unit test", "rows": [1, 2]}},
        )
        with open_store(path) as s:
            assert list(s.ids()) == ["a", "b", "c", "d", "e"]
            assert list(s.ids([4, 1, 4])) == ["e", "b", "e"]
            assert list(s.read_per_row("ids", slice(1, 3))) == ["b", "c"]
            assert s.attrs["provenance"] == {"source": "unit test", "rows": [1, 2]}
            assert s.labels() is None

    def test_every_declared_codec_round_trips(self, tmp_path):
        X = np.round(np.random.default_rng(1).normal(size=(40, 6)), 2).astype(np.float32)
        for codec in self.fmt.codecs:
            path = bigsearch.create_store(
                self.path(tmp_path, codec), X, chunk_rows=9, compressors=self.fmt.compressors(codec)
            )
            with open_store(path) as s:
                np.testing.assert_array_equal(read_all(s), X)
                assert (s.codec() == "none") == (codec == "none")
                assert codec == "none" or codec in s.codec().replace("blosc-", "")
                assert s.fast_path == (codec == "none")

    def test_codecs_of_other_formats_are_refused(self):
        for codec in set(store_codecs()) - set(self.fmt.codecs):
            with pytest.raises(ParameterError, match=f"not available for {self.fmt.label} output"):
                self.fmt.compressors(codec)

    def test_recognized_by_content_not_name(self, tmp_path):
        path = bigsearch.create_store(tmp_path / "plain-name", np.eye(3), kind=self.fmt.kind)
        with open_store(path) as s:
            assert type(s) is self.fmt
        formats = list(STORE_FORMATS.values())
        earlier = formats[: formats.index(self.fmt)]  # the first format that recognizes a path opens it
        head = None if path.is_dir() else path.read_bytes()[:8]
        assert not any(cls.recognizes(path, head) for cls in earlier)

    def test_failed_write_leaves_nothing(self, tmp_path):
        with pytest.raises(RuntimeError):
            with StoreWriter(self.path(tmp_path), 3, chunk_rows=4) as w:
                w.append(np.ones((10, 3)))
                raise RuntimeError("interrupted")
        assert list(tmp_path.iterdir()) == []

    def test_existing_store_is_not_overwritten_unless_asked(self, tmp_path):
        path = bigsearch.create_store(self.path(tmp_path), np.ones((4, 2)))
        with pytest.raises(StoreExistsError, match="already exists"):
            bigsearch.create_store(path, np.zeros((4, 2)))
        np.testing.assert_array_equal(read_all(open_store(path)), np.ones((4, 2)))
        bigsearch.create_store(path, np.full((5, 2), 2.0), overwrite=True)
        np.testing.assert_array_equal(read_all(open_store(path)), np.full((5, 2), 2.0))
        assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]

    def test_overwrite_replaces_only_a_whole_store(self, tmp_path):
        path = bigsearch.create_store(self.path(tmp_path), np.ones((4, 2)))
        assert is_feature_store(path)
        other = tmp_path / "other" / path.name  # the user's files under a store's name
        other.parent.mkdir()
        if path.is_dir():
            other.mkdir()
            (other / "notes.txt").write_text("mine")
        else:
            other.write_bytes(b"not a store")
        assert not is_feature_store(other)
        with pytest.raises(StoreExistsError, match="not a bigsearch store"):
            bigsearch.create_store(other, np.ones((4, 2)), overwrite=True)

    def test_survives_pickling(self, tmp_path):
        """Stores travel to dask workers by path."""
        X = np.random.default_rng(7).random((9, 2))
        s = open_store(bigsearch.create_store(self.path(tmp_path), X, chunk_rows=4))
        s2 = pickle.loads(pickle.dumps(s))
        assert type(s2) is self.fmt
        np.testing.assert_array_equal(read_all(s2), X)


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
