"""``bigsearch.prepare``: ingest's feature steps for an array in memory, equal to what
`bigsearch ingest` writes from the same numbers, and the error that points to it."""

import numpy as np
import pytest

import bigsearch
from bigsearch.errors import DataError, ParameterError

from conftest import read_all, run_cli


@pytest.fixture
def X():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(700, 6))  # negative similarities: LAS refuses it as it is
    X[3] = 0.0
    return X


def ingested(tmp_path, X, *flags):
    np.save(tmp_path / "x.npy", X)
    out = tmp_path / f"x{len(list(tmp_path.iterdir()))}.zarr"
    done = run_cli("ingest", tmp_path / "x.npy", out, "--dtype", "float64", *flags)
    assert done.returncode == 0, done.stderr
    with bigsearch.open_store(out) as s:
        return read_all(s)


def test_normalize_and_bias_are_what_ingest_writes_and_what_they_say(tmp_path, X):
    with pytest.warns(RuntimeWarning, match="1 rows are all zero"):
        Z = bigsearch.prepare(X, normalize=True, bias=True, dtype="float64")
    np.testing.assert_array_equal(Z, ingested(tmp_path, X, "--normalize", "--bias"))
    norms = np.linalg.norm(X, axis=1, keepdims=True)
    expected = np.hstack([X / np.where(norms == 0, 1, norms), np.ones((len(X), 1))])
    np.testing.assert_allclose(Z, expected, rtol=1e-12, atol=1e-15)
    assert bigsearch.prepare(X, bias=True).dtype == np.float32


def test_random_fourier_features_are_what_ingest_writes(tmp_path, X):
    X[3] = 1.0
    Z = bigsearch.prepare(X, normalize=True, rff=16, gamma=0.5, seed=3, dtype="float64")
    np.testing.assert_array_equal(Z, ingested(tmp_path, X, "--normalize", "--rff", 16, "--gamma", 0.5, "--seed", 3))


def test_las_points_to_prepare_and_runs_on_what_it_returns(X):
    y = (np.arange(len(X)) % 10 == 0).astype(np.int8)
    with pytest.raises(DataError, match=r"bigsearch.prepare\(X, normalize=True, bias=True\)"):
        search = bigsearch.LAS(X, pi=0.1)
        search.tell([0], [1])
        search.ask()
    search = bigsearch.LAS(bigsearch.prepare(X, normalize=True, bias=True), pi=0.1)
    search.tell([0], [int(y[0])])
    assert 0 <= search.ask() < len(X)


def test_bad_input_is_refused_by_ingests_own_checks(X):
    with pytest.raises(ParameterError, match="rff 0"):
        bigsearch.prepare(X, rff=0)
    bad = X.copy()
    bad[5, 2] = np.nan
    with pytest.raises(DataError, match=r"X\[5, 2\] is nan"):
        bigsearch.prepare(bad, normalize=True)
    with pytest.raises(DataError, match="2-D"):
        bigsearch.prepare(np.ones(4))


def test_the_package_shows_only_its_names():
    assert "importlib" not in dir(bigsearch) and "prepare" in dir(bigsearch)
