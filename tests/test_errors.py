"""Bad inputs give clear errors from the library, and at the CLI a one-line message,
exit status 2 and no traceback."""

import h5py
import numpy as np
import pytest

import bigsearch
from bigsearch.errors import DataError, LabelError, NumericalError, ParameterError, ResourceError

from conftest import run_cli, store_path


@pytest.fixture
def good_store(tmp_path, small_data):
    X, y = small_data
    return bigsearch.create_store(tmp_path / "good.zarr", X, y, chunk_rows=7)


def test_negative_degrees_are_counted_with_a_fix(tmp_path):
    X = np.random.default_rng(0).normal(size=(40, 3))
    path = bigsearch.create_store(tmp_path / "neg.zarr", X, chunk_rows=7)
    s = bigsearch.LAS(path, pi=0.1)
    d = X.astype(np.float32).astype(np.float64) @ X.astype(np.float32).sum(axis=0)
    with pytest.raises(DataError, match=rf"{int((d <= 0).sum())} of 40 points have a degree.*"
                                        r"unit-normalize the rows and\s+append a constant 1 feature"):
        s.ask()


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("kind", ["zarr", "hdf5"])
def test_non_finite_values_name_the_first_bad_row(tmp_path, small_data, bad, kind):
    X, y = small_data
    X = X.copy()
    X[33, 2] = bad
    X[50, 0] = bad
    path = bigsearch.create_store(store_path(tmp_path, "nan", kind), X, y, chunk_rows=7)
    with pytest.raises(DataError, match="non-finite value.*in row 33"):
        bigsearch.LAS(path, pi=0.1).ask()


@pytest.mark.parametrize("label", [2, -1, 1.5, -0.5, float("nan"), "1", None])
def test_labels_must_be_0_or_1_or_graded(good_store, label):
    s = bigsearch.LAS(good_store)      # LAS takes graded labels in [0, 1], nothing else
    with pytest.raises(LabelError, match=r"is not 0 .negative., 1 .positive. or a graded label in \[0, 1\]"):
        s.tell(3, label)
    assert s.n_labeled == 0


@pytest.mark.parametrize("index", [-1, 80, 10**9])
def test_index_out_of_range(good_store, index):
    with pytest.raises(LabelError, match=r"out of range: the store has 80 points \(0..79\)"):
        bigsearch.WNAS(good_store).tell(index, 1)


def test_index_already_labeled_and_nothing_changes(good_store):
    s = bigsearch.LAS(good_store)
    s.tell(5, 1)
    with pytest.raises(LabelError, match="point 5 is already labeled"):
        s.tell([6, 5], [0, 0])
    assert s.n_labeled == 1 and s.labels[6] == -1     # the valid half of the call was not applied
    with pytest.raises(LabelError, match="twice in this call"):
        s.tell([7, 7], [0, 1])


def test_bad_parameters(good_store):
    for kwargs, msg in [({"eta": 1.0}, "eta = 1.0 is outside"), ({"w0": 0}, "w0 = 0.0 is outside"),
                        ({"alpha": -1}, "alpha = -1.0"), ({"pi": 0}, "pi = 0.0")]:
        with pytest.raises(ParameterError, match=msg):
            bigsearch.LAS(good_store, **kwargs)


def test_pi_is_required_without_labels(tmp_path, small_data):
    path = bigsearch.create_store(tmp_path / "nolabels.h5", small_data[0])
    with pytest.raises(ParameterError, match="pi .* is required"):
        bigsearch.LAS(path)


def test_sherman_morrison_denominator_guard(good_store):
    s = bigsearch.LAS(good_store, pi=0.2)
    s.ask()
    s.Kinv *= -1e9                 # a corrupted inverse: 1 + gamma x^T K^-1 x < 0
    s.tell(3, 1)
    with pytest.raises(NumericalError, match="Sherman-Morrison denominator"):
        s.ask()


def test_asg_refuses_what_does_not_fit(tmp_path):
    # 300,000 points: dense ASG would need about 2 TB; the store itself is 2.4 MB.
    path = bigsearch.create_store(tmp_path / "wide.zarr", np.ones((300_000, 2), np.float32))
    with pytest.raises(ResourceError, match=r"n = 300000 needs about .* GiB.*use LAS"):
        bigsearch.ASG(path, pi=0.1)


def test_every_point_labeled(tmp_path):
    X = np.abs(np.random.default_rng(1).random((3, 2)))
    s = bigsearch.LAS(bigsearch.create_store(tmp_path / "tiny.zarr", X), pi=0.5)
    s.tell([0, 1, 2], [1, 0, 1])
    with pytest.raises(LabelError, match="every point is labeled"):
        s.ask()


# -- the same at the command line ----------------------------------------------------

def assert_clean_failure(result, *needles):
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert "Traceback" not in result.stderr
    assert len(lines) == 1 or lines[0].startswith("Usage:"), result.stderr
    for needle in needles:
        assert needle in result.stderr, result.stderr


def test_cli_errors(tmp_path, small_data):
    X, y = small_data
    out = tmp_path / "out"
    neg = bigsearch.create_store(tmp_path / "neg.zarr", np.random.default_rng(0).normal(size=(40, 3)),
                                 np.zeros(40, np.int8) + (np.arange(40) < 5))
    Xn = X.copy()
    Xn[12, 1] = np.nan
    nan = bigsearch.create_store(tmp_path / "nan.h5", Xn, y)
    good = bigsearch.create_store(tmp_path / "good.zarr", X, y)
    with h5py.File(tmp_path / "noX.h5", "w") as fh:
        fh.create_dataset("data", data=X)
    with h5py.File(tmp_path / "rank.h5", "w") as fh:
        fh.create_dataset("X", data=np.ones(5))
    cases = [
        (["run", neg, "--budget", 3, "--out", out, "--pi", 0.1], ["have a degree", "unit-normalize"]),
        (["run", nan, "--budget", 3, "--out", out], ["non-finite", "row 12"]),
        (["run", tmp_path / "missing.zarr", "--budget", 3, "--out", out], ["no feature store"]),
        (["run", tmp_path / "noX.h5", "--budget", 3, "--out", out], ["no dataset 'X'"]),
        (["run", tmp_path / "rank.h5", "--budget", 3, "--out", out], ["2-D array"]),
        (["run", good, "--budget", 3, "--out", out, "--init-index", 80], ["out of range"]),
        (["run", good, "--budget", 3, "--out", out, "--method", "bogus"], ["unknown method 'bogus'"]),
        (["run", good, "--budget", 3, "--out", out, "--eta", 2], ["--eta"]),
        (["info", tmp_path / "missing.h5"], ["no feature store"]),
    ]
    for args, needles in cases:
        assert_clean_failure(run_cli(*args), *needles)
    assert not (out / "results.json").exists()
