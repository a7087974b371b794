"""The suite every feature store passes (zarr-python's ``StoreTests`` habit), shipped in the
package so a store format defined outside it can run it too::

    from bigsearch.testing.store_suite import StoreFormatTests

    class TestMyFormat(StoreFormatTests):
        fmt = MyStore

A store format written by ``bigsearch.create_store`` to a local path needs nothing more. Other
stores (object storage, arrays wrapped as stores) override ``make`` / ``open`` / ``listing``
and declare what they cannot do in the capability attributes below; a case that needs a
capability the store declares it lacks is skipped, saying which (an accepted skip on CI:
tests/conftest.py)."""

import pickle

import numpy as np
import pytest

import bigsearch
from bigsearch.errors import ParameterError, StoreExistsError
from bigsearch.storage import STORE_FORMATS, StoreWriter, is_feature_store, open_store, store_codecs, store_kind_for

DTYPES = ["float32", "float64"]
LACKS = "the store under test lacks the capability"  # how a capability skip's reason starts


def read_all(store):
    """Every row of X, read chunk by chunk through the store."""
    return np.concatenate([np.array(x) for x in _chunks(store)])


def _chunks(store):
    for j in range(store.n_chunks):
        with store.chunk(j) as x:
            yield x


def assert_chunks_read_only(store):
    """Every chunk reaches the kernels read-only, mapped or decoded (numba compiles a kernel
    apart for writable arrays: storage/encoding.py, ``read_only``)."""
    for j in range(len(store.chunks)):
        with store.chunk(j) as x:
            assert not x.flags.writeable, f"chunk {j} of {store.path} is writable"


class StoreFormatTests:
    fmt = None  # the FeatureStore subclass under test
    # -- capabilities (True: the cases that need it run) ------------------------------------
    writes = True  # bigsearch.create_store writes it: codecs, atomic writes, overwrite
    local_path = True  # it is a file or directory on this machine, recognized by its content
    keeps_attrs = True  # it stores attributes (attrs=, the bigsearch_format version)
    atomic_writes = True  # a failed write leaves nothing; an existing store is replaced whole
    fast_path = True  # an uncompressed store's chunks are used in place (mapped), not decoded
    cached_decode = False  # a compressed store is decoded once into a local cache, then mapped
    raw_codec = "none"  # what codec() says of an uncompressed store (None: the store does not know)

    # -- how the store under test is made and opened ---------------------------------------
    def path(self, tmp_path, name="s"):
        return tmp_path / f"{name}{self.fmt.suffixes[0]}"

    def make(self, tmp_path, X, y=None, ids=None, chunk_rows=None, name="s", **options):
        """Write X (and y, ids) as a store of this format; returns what ``open`` takes."""
        return bigsearch.create_store(self.path(tmp_path, name), X, y, ids=ids, chunk_rows=chunk_rows, **options)

    def open(self, where):
        return open_store(where)

    def listing(self, tmp_path):
        """The names of the stores (and leftovers) where ``make`` writes."""
        return sorted(p.name for p in tmp_path.iterdir())

    def needs(self, *capabilities):
        lacking = [c for c in capabilities if not getattr(self, c)]
        if lacking:
            pytest.skip(f"{LACKS} {' and '.join(lacking)} ({type(self).__name__} declares it False)")

    # -- the cases ----------------------------------------------------------------------------
    @pytest.mark.parametrize("dtype", DTYPES)
    @pytest.mark.parametrize("chunk_rows", [1, 7, 50, 1000])
    def test_round_trip(self, tmp_path, dtype, chunk_rows):
        rng = np.random.default_rng(0)
        X = rng.normal(size=(50, 4)).astype(dtype)
        y = rng.integers(-1, 2, 50).astype(np.int8)
        ids = np.arange(1000, 1050)
        if self.local_path:
            assert store_kind_for(self.path(tmp_path)) == self.fmt.kind
        with self.open(self.make(tmp_path, X, y, ids=ids, chunk_rows=chunk_rows)) as s:
            assert type(s) is self.fmt and s.kind == self.fmt.kind
            assert s.fast_path == self.fast_path and s.codec() == self.raw_codec
            assert s.shape == (50, 4) and s.dtype == dtype and s.chunk_rows == chunk_rows
            np.testing.assert_array_equal(read_all(s), X)
            np.testing.assert_array_equal(s.labels(), y)
            np.testing.assert_array_equal(s.ids(), ids)
            np.testing.assert_array_equal(s.ids([49, 0, 7, 0]), ids[[49, 0, 7, 0]])
            assert len(s.ids([])) == 0
            for name, values in (("y", y), ("ids", ids)):  # a range of rows, as cluster order reads them
                np.testing.assert_array_equal(s.read_per_row(name, slice(3, 41)), values[3:41])
            np.testing.assert_array_equal(s.read_rows([49, 0, 7]), X[[49, 0, 7]].astype(np.float64))
            assert_chunks_read_only(s)
            if self.keeps_attrs:
                assert s.attrs["bigsearch_format"] == 1

    def test_string_ids_and_attributes(self, tmp_path):
        attrs = {"provenance": {"source": "unit test", "rows": [1, 2]}} if self.keeps_attrs else {}
        X, ids = np.ones((5, 2), np.float32), np.array(["a", "b", "c", "d", "e"])
        with self.open(self.make(tmp_path, X, ids=ids, **({"attrs": attrs} if attrs else {}))) as s:
            assert list(s.ids()) == ["a", "b", "c", "d", "e"]
            assert list(s.ids([4, 1, 4])) == ["e", "b", "e"]
            assert s.labels() is None
            if self.keeps_attrs:
                assert s.attrs["provenance"] == {"source": "unit test", "rows": [1, 2]}

    def test_every_declared_codec_round_trips(self, tmp_path):
        self.needs("writes")
        X = np.round(np.random.default_rng(1).normal(size=(40, 6)), 2).astype(np.float32)
        for codec in self.fmt.codecs:
            where = self.make(tmp_path, X, chunk_rows=9, name=codec, compressors=self.fmt.compressors(codec))
            with self.open(where) as s:
                np.testing.assert_array_equal(read_all(s), X)
                assert_chunks_read_only(s)  # a decoded chunk too
                assert (s.codec() == "none") == (codec == "none")
                assert codec == "none" or codec in s.codec().replace("blosc-", "")
                assert s.fast_path == (codec == "none" or self.cached_decode)

    def test_codecs_of_other_formats_are_refused(self):
        self.needs("writes")
        for codec in set(store_codecs()) - set(self.fmt.codecs):
            with pytest.raises(ParameterError, match=f"not available for {self.fmt.label} output"):
                self.fmt.compressors(codec)

    def test_recognized_by_content_not_name(self, tmp_path):
        self.needs("writes", "local_path")
        path = bigsearch.create_store(tmp_path / "plain-name", np.eye(3), kind=self.fmt.kind)
        with open_store(path) as s:
            assert type(s) is self.fmt
        formats = list(STORE_FORMATS.values())
        earlier = formats[: formats.index(self.fmt)]  # the first format that recognizes a path opens it
        head = None if path.is_dir() else path.read_bytes()[:8]
        assert not any(cls.recognizes(path, head) for cls in earlier)

    def test_failed_write_leaves_nothing(self, tmp_path):
        self.needs("writes", "atomic_writes")
        before = self.listing(tmp_path)
        with pytest.raises(RuntimeError):
            with StoreWriter(self.path(tmp_path), 3, chunk_rows=4) as w:
                w.append(np.ones((10, 3)))
                raise RuntimeError("interrupted")
        assert self.listing(tmp_path) == before

    def test_existing_store_is_not_overwritten_unless_asked(self, tmp_path):
        self.needs("writes")
        before = self.listing(tmp_path)
        where = self.make(tmp_path, np.ones((4, 2)))
        with pytest.raises(StoreExistsError, match="already exists"):
            self.make(tmp_path, np.zeros((4, 2)))
        np.testing.assert_array_equal(read_all(self.open(where)), np.ones((4, 2)))
        self.make(tmp_path, np.full((5, 2), 2.0), overwrite=True)
        np.testing.assert_array_equal(read_all(self.open(where)), np.full((5, 2), 2.0))
        assert self.listing(tmp_path) == sorted([*before, str(self.path(tmp_path)).rpartition("/")[2]])

    def test_overwrite_replaces_only_a_whole_store(self, tmp_path):
        self.needs("writes", "local_path", "atomic_writes")
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
        """Stores travel to dask workers by pickling (by path, or the array itself)."""
        X = np.random.default_rng(7).random((9, 2))
        s = self.open(self.make(tmp_path, X, chunk_rows=4))
        s2 = pickle.loads(pickle.dumps(s))
        assert type(s2) is self.fmt and s2.chunk_rows == 4
        np.testing.assert_array_equal(read_all(s2), X)
