"""X given as an array (issue 17 item 2): NumPy, zarr.Array, h5py.Dataset and dask arrays
wherever a store is taken, read block by block (exact against the dense reference for
chunk sizes 1, uneven and all, float32 and float64), with clear errors for what cannot be
searched; and `dataset=` / `--dataset` for an X that is not named X."""

import itertools
import json

import dask.array as da
import h5py
import numpy as np
import pytest
import zarr

import bigsearch
from bigsearch import simulate
from bigsearch.errors import BigsearchError, DataError, ParameterError, StoreError
from bigsearch.storage import open_store
from bigsearch.storage.arrays import DaskArrayStore, HDF5DatasetStore, NumpyArrayStore, ZarrArrayStore
from bigsearch.testing import brute_force_impact, dense_las_run, dense_wnas
from bigsearch.testing.store_suite import StoreFormatTests

from conftest import DTYPES, chunkings, read_all, run_cli

RTOL = 1e-9
ARRAY_KINDS = ["numpy", "zarr", "h5py", "dask"]


def as_array(kind, X, chunk_rows, folder, name="emb"):
    """X as an array of ``kind`` whose own row chunks are ``chunk_rows`` rows."""
    if kind == "numpy":
        return X
    if kind == "zarr":
        z = zarr.create_array(
            str(folder / f"{name}.zarr"), shape=X.shape, chunks=(chunk_rows, X.shape[1]), dtype=X.dtype
        )
        z[:] = X
        return z
    if kind == "h5py":
        with h5py.File(folder / f"{name}.h5", "w") as f:
            f.create_dataset(name, data=X, chunks=(chunk_rows, X.shape[1]))
        return h5py.File(folder / f"{name}.h5", "r")[name]
    return da.from_array(X, chunks=(chunk_rows, X.shape[1]))


class Recorded:
    """The source of a real dask array, recording the rows dask reads from it (class
    attributes: dask copies the object it computes from)."""

    X = np.zeros((1, 1))
    reads: list = []

    @property
    def shape(self):
        return self.X.shape

    @property
    def dtype(self):
        return self.X.dtype

    ndim = 2

    def __getitem__(self, key):
        if key[0].stop > key[0].start:
            Recorded.reads.append(key)
        return self.X[key]


@pytest.fixture
def arrays(tmp_path):
    counter = itertools.count()

    def make(kind, X, chunk_rows):
        return as_array(kind, X, chunk_rows, tmp_path, f"a{next(counter)}")

    return make


@pytest.mark.parametrize("kind,dtype,chunk_rows", list(itertools.product(ARRAY_KINDS, DTYPES, chunkings(80))))
def test_las_on_an_array_matches_brute_force(small_data, arrays, kind, dtype, chunk_rows):
    X, y = small_data
    X = X.astype(dtype)
    # a NumPy array is chunked by chunk_rows=; the others by their own chunks
    x = arrays(kind, X, chunk_rows)
    search = bigsearch.LAS(x, pi=0.2, alpha=0.01, store_options={"chunk_rows": chunk_rows} if kind == "numpy" else None)
    assert search.store.chunk_rows == chunk_rows and search.store.dtype == np.dtype(dtype)
    labels = np.full(len(y), -1)
    start = [int(np.flatnonzero(y)[0]), int(np.flatnonzero(y == 0)[0])]
    search.tell(start, [1, 0])
    labels[start] = [1, 0]
    for _ in range(4):
        f, im = brute_force_impact(X.astype(np.float64), labels, pi=0.2)
        np.testing.assert_allclose(search.f, f, rtol=RTOL, atol=RTOL * np.abs(f).max())
        np.testing.assert_allclose(search.impact, im, rtol=RTOL, atol=RTOL * np.abs(im).max())
        i = search.ask()
        search.tell(i, int(y[i]))
        labels[i] = y[i]
    search.close()


@pytest.mark.parametrize("kind", ARRAY_KINDS)
def test_simulate_and_wnas_on_an_array_with_labels_given_apart(small_data, arrays, kind):
    X, y = small_data
    x = arrays(kind, X, 7)
    init = int(np.flatnonzero(y)[3])
    record = simulate(x, "las", 25, init=[(init, 1)], y=y, pi=0.15, eta=0.6, w0=0.02)
    assert [i for i, _ in record["queries"]] == dense_las_run(X, y, [init], 25, pi=0.15, eta=0.6, w0=0.02)
    assert [lab for _, lab in record["queries"]] == [int(y[i]) for i, _ in record["queries"]]
    wnas = bigsearch.WNAS(x)
    wnas.tell(init, 1)
    labels = np.full(len(y), -1)
    labels[init] = 1
    np.testing.assert_allclose(wnas.f, dense_wnas(X, labels), rtol=RTOL)


def test_agr_on_an_array_is_agr_on_the_same_store(small_data, store_factory, tmp_path):
    X, y = small_data
    x = as_array("h5py", X, 7, tmp_path)
    on_array = simulate(x, "agr", 10, y=y.astype(bool), anchors=6)  # booleans are labels too
    assert not (tmp_path / ".bigsearch-cache").exists()  # no anchor cache beside an array
    path = store_factory(X, y, "zarr", "float64", 7)
    assert on_array["queries"] == simulate(path, "agr", 10, anchors=6)["queries"]


def test_a_numpy_array_is_used_in_place_and_others_are_read_a_block_at_a_time(small_data):
    X, _ = small_data
    store = bigsearch.open_store(X, {"chunk_rows": 16})
    with store.chunk(2) as rows:
        assert np.shares_memory(rows, X) and rows.shape == (16, 6)  # a view: no copy
    Recorded.X, Recorded.reads = X, []
    store = bigsearch.open_store(da.from_array(Recorded(), chunks=(16, 6), asarray=False))
    np.testing.assert_array_equal(read_all(store), X)
    rows = [key[0].stop - key[0].start for key in Recorded.reads]
    assert max(rows) <= 16 and sum(rows) == len(X)  # never the whole of X at once
    fortran = np.asfortranarray(X)  # the kernels need C order: copied per block
    np.testing.assert_array_equal(read_all(bigsearch.open_store(fortran, {"chunk_rows": 7})), X)


@pytest.mark.parametrize(
    "x,message",
    [
        (np.zeros(5), "2-D array"),
        (np.zeros((2, 3, 4)), "2-D array"),
        (np.zeros((0, 3)), "at least one row"),
        (np.zeros((4, 3), np.int64), "floating-point features"),
        (np.array([["a", "b"]]), "floating-point features"),
        ([[1.0, 2.0]], "NumPy array, a zarr.Array, an h5py.Dataset or a dask array"),
    ],
)
def test_arrays_that_cannot_be_searched_say_why(x, message):
    with pytest.raises(StoreError, match=message):
        bigsearch.LAS(x, pi=0.1)


def test_labels_and_values_that_cannot_be_used_say_why(small_data):
    X, y = small_data
    for bad, message in [
        (y[:-1], r"shape \(79,\), expected \(80,\)"),
        (y * 2, "labels must be 1"),
        (np.where(y == 1, np.nan, 0.0), "non-finite"),
        (y * 0.5, "fractional"),
    ]:
        with pytest.raises(StoreError, match=message):
            simulate(X, "las", 3, y=bad)
    with pytest.raises(ParameterError, match="no labels"):
        simulate(X, "las", 3)
    with pytest.raises(StoreError, match="y, ids and chunk_rows, not dataset"):
        bigsearch.open_store(X, {"dataset": "emb"})
    bad_x = X.copy()
    bad_x[33, 2] = np.inf
    with pytest.raises(DataError, match="non-finite value .* row 33"):
        bigsearch.LAS(bad_x, pi=0.2).ask()


def test_a_session_reopens_a_zarr_array_by_its_group_and_name(small_data, tmp_path):
    X, y = small_data
    group = zarr.open_group(str(tmp_path / "g.zarr"), mode="w")
    group.create_array("emb", shape=X.shape, chunks=(7, 6), dtype="float32")[:] = X
    session = bigsearch.Session.create(group["emb"], tmp_path / "sess", pi=0.2)
    session.tell(int(np.flatnonzero(y)[0]), 1)
    first = session.ask()
    session.close()
    assert run_cli("session", "status", tmp_path / "sess").returncode == 0
    again = bigsearch.Session.open(tmp_path / "sess")
    assert again.info["store"]["dataset"] == "emb" and again.ask() == first
    again.close()
    with pytest.raises(BigsearchError, match="lives only in this process.*create_store"):
        bigsearch.Session.create(X, tmp_path / "other", pi=0.2)


@pytest.mark.parametrize("kind", ["zarr", "hdf5"])
def test_dataset_names_the_array_holding_X(small_data, tmp_path, kind):
    X, y = small_data
    path = tmp_path / ("s.zarr" if kind == "zarr" else "s.h5")
    bigsearch.create_store(path, X, y, chunk_rows=7)
    if kind == "zarr":
        zarr.open_group(str(path), mode="a").create_array(
            "emb", shape=(80, 4), chunks=(9, 4), compressors=None, dtype="float64"
        )[:] = X[:, 2:]
    else:
        with h5py.File(path, "a") as f:
            f.create_dataset("emb", data=X[:, 2:], chunks=(9, 4))
    store = bigsearch.open_store(path, {"dataset": "emb"})
    assert (store.r, store.chunk_rows, store.dataset) == (4, 9, "emb") and store.fast_path
    np.testing.assert_array_equal(read_all(store), X[:, 2:])
    np.testing.assert_array_equal(store.labels(), y)  # the group's y goes with it
    with pytest.raises(StoreError, match="no (array|dataset) 'nope'.*'X', 'emb'.*dataset=NAME"):
        bigsearch.open_store(path, {"dataset": "nope"})
    if kind == "hdf5":
        return  # the commands below read either kind through the same option
    out = tmp_path / "out"
    res = run_cli("run", path, "--dataset", "emb", "--budget", 5, "--out", out, "-q", "--no-plots")
    assert res.returncode == 0, res.stderr
    record = simulate(store, "las", 5)
    assert json.loads((out / "results.json").read_text())["runs"][0]["queries"] == record["queries"]
    res = run_cli("session", "new", path, tmp_path / "sess", "--dataset", "emb", "--pi", 0.2)
    assert res.returncode == 0, res.stderr
    with bigsearch.Session.open(tmp_path / "sess", readonly=True) as session:
        assert session.info["store"]["dataset"] == "emb" and session.status()["r"] == 4
    res = run_cli("info", path, "--dataset", "nope")
    assert res.returncode == 2 and res.stderr.startswith("Error: ") and "no array 'nope'" in res.stderr


def test_xarray_opens_a_store_over_points_and_features(small_data, tmp_path):
    xr = pytest.importorskip("xarray", reason="xarray is in the test extra: pip install -e '.[test]'")
    X, y = small_data
    path = tmp_path / "s.zarr"
    bigsearch.create_store(path, X, y, ids=np.array([f"p{i}" for i in range(80)]), chunk_rows=7, encoding="int8")
    ds = xr.open_zarr(path, consolidated=False)
    assert ds["X"].dims == ("point", "feature") and ds["y"].dims == ds["ids"].dims == ("point",)
    assert ds.sizes == {"point": 80, "feature": 6}
    np.testing.assert_array_equal(ds["y"].values, y)
    assert ds["ids"].values[3] == "p3"
    np.testing.assert_allclose(ds["X"].values * ds["X_scale"].values[:, None], X, atol=0.01)


# -- the store suite (bigsearch/testing/store_suite.py), on each array wrapped as a store ---------
class ArraySuite(StoreFormatTests):
    """An array wrapped as a store: made by its library, not by bigsearch.create_store (so no
    codecs, attributes or atomic writes of ours), held by the caller (not a path)."""

    kind = "numpy"
    writes = local_path = keeps_attrs = atomic_writes = False
    fast_path = False  # read through its library into a buffer
    raw_codec = None

    def make(self, tmp_path, X, y=None, ids=None, chunk_rows=None, name="s", **options):
        assert not options, f"{options}: an array wrapped as a store has no writing options"
        x = as_array(self.kind, X, min(chunk_rows or 10, len(X)), tmp_path, name)
        return x, dict(y=y, ids=ids, chunk_rows=chunk_rows)

    def open(self, where):
        x, options = where
        return open_store(x, options)


class TestNumpyArraySuite(ArraySuite):
    fmt, kind, fast_path = NumpyArrayStore, "numpy", True  # its blocks are views of the array


class TestZarrArraySuite(ArraySuite):
    fmt, kind = ZarrArrayStore, "zarr"


class TestHDF5DatasetSuite(ArraySuite):
    fmt, kind = HDF5DatasetStore, "h5py"


class TestDaskArraySuite(ArraySuite):
    fmt, kind = DaskArrayStore, "dask"
