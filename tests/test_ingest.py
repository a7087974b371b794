"""`bigsearch ingest` on the real data sets in ../shared/datasets, round trips through every
input format, and the featurization steps checked against independent computations."""

import dataclasses
import gzip
import json

import numpy as np
import pandas as pd
import pytest

import bigsearch
from bigsearch.ingest import FeatureOptions, LabelOptions, OutputOptions, SourceOptions, ingest
from bigsearch.ingest.stats import block_stats, merge_stats, quantile_edges
from bigsearch.storage import open_store

from conftest import dataset_files, run_cli

ADULT_LABEL = ["--label-column", "14", "--positive", ">50K", "--positive", ">50K."]


# The public data sets (bigsearch datasets): a test that needs one is skipped without it.
def adult():
    return dataset_files("adult", "adult.data", "adult.test")


def mnist(name):
    return dataset_files("mnist", name)[0]


def higgs():
    return dataset_files("higgs", "lightgbm_binary.train")[0]


def digits():
    return dataset_files("sklearn_digits", "digits.csv.gz")[0]


def read_x(path):
    with open_store(path) as s:
        parts = []
        for j in range(s.n_chunks):
            with s.chunk(j) as x:
                parts.append(np.array(x))
        return np.concatenate(parts), s.labels(), s.ids(), s.attrs


def adult_frame():
    """The Adult files read independently with pandas (the UCI conventions by hand)."""
    data, test = adult()
    frames = [pd.read_csv(data, header=None, skipinitialspace=True),
              pd.read_csv(test, header=None, skipinitialspace=True, skiprows=1)]
    return pd.concat(frames, ignore_index=True)


@pytest.fixture(scope="module")
def adult_store(tmp_path_factory):
    out = tmp_path_factory.mktemp("adult") / "adult.zarr"
    r = run_cli("ingest", *adult(), out, *ADULT_LABEL, "--bins", "5")
    assert r.returncode == 0, r.stderr
    return out


def test_adult_as_published_counts_and_one_hot(adult_store):
    X, y, ids, attrs = read_x(adult_store)
    assert X.shape == (48_842, 124)
    assert (y == 1).sum() == 11_687 and (y == 0).sum() == 37_155
    assert ids is None
    # 14 attributes, each one-hot (8 categorical + 6 binned): exactly 14 ones per row
    assert set(np.unique(X)) == {0.0, 1.0}
    np.testing.assert_array_equal(X.sum(axis=1), 14)
    f = attrs["featurization"]
    assert f["n_features"] == 124 and f["bins"] == 5 and f["label"]["positive"] == [">50K", ">50K."]
    assert attrs["provenance"]["sources"][1]["rows"] == 16_281


def test_adult_categories_match_pandas(adult_store):
    X, _, _, attrs = read_x(adult_store)
    df = adult_frame()
    offset = 0
    for c in attrs["featurization"]["columns"]:
        width = len(c["categories"]) if c["kind"] == "onehot" else len(c["edges"]) + 1
        block = X[:, offset:offset + width]
        if c["kind"] == "onehot":
            dummies = pd.get_dummies(df[c["index"]].str.strip()).astype(np.float32)
            assert list(dummies.columns) == c["categories"]
            np.testing.assert_array_equal(block, dummies.to_numpy())
        else:
            x = df[c["index"]].to_numpy(np.float64)
            if c["level"] == 0:  # exact: the edges are the inverted-CDF quantiles
                q = np.unique(np.quantile(x, np.arange(1, 5) / 5, method="inverted_cdf"))
                np.testing.assert_array_equal(c["edges"], q[q < x.max()])
                np.testing.assert_array_equal(block.argmax(axis=1),
                                              np.searchsorted(c["edges"], x, side="left"))
        offset += width
    assert offset == 124


def test_adult_prevalence_subsample(adult_store, tmp_path):
    out = tmp_path / "adult5.zarr"
    r = run_cli("ingest", *adult(), out, *ADULT_LABEL, "--bins", "5", "--prevalence", "0.05", "--seed", "3")
    assert r.returncode == 0, r.stderr
    X, y, ids, attrs = read_x(out)
    assert abs(len(y) - 39_100) < 200
    assert abs(y.mean() - 0.05) <= 0.001
    assert (y == 0).sum() == 37_155                      # every negative kept
    assert np.all(np.diff(ids) > 0)                      # original row numbers, in order
    X_all, y_all, _, _ = read_x(adult_store)
    np.testing.assert_array_equal(X, X_all[ids])
    np.testing.assert_array_equal(y, y_all[ids])
    s = attrs["featurization"]["subsample"]
    assert s["positives_kept"] == (y == 1).sum() and s["positives_in_input"] == 11_687


def test_prevalence_choice_does_not_depend_on_block_size(tmp_path):
    labels = LabelOptions(column=14, positive=[">50K", ">50K."], prevalence=0.05, seed=1)
    ingest(adult(), tmp_path / "a.zarr", labels=labels)
    ingest(adult(), tmp_path / "b.zarr", labels=labels, source=SourceOptions(block_bytes=50_000))
    ingest(adult(), tmp_path / "c.zarr", labels=dataclasses.replace(labels, seed=2))
    ids = [read_x(tmp_path / f"{n}.zarr")[2] for n in "abc"]
    np.testing.assert_array_equal(ids[0], ids[1])
    assert len(ids[0]) == len(ids[2]) and not np.array_equal(ids[0], ids[2])


def mnist_test_images():
    with gzip.open(mnist("t10k-images-idx3-ubyte.gz")) as fh:
        images = np.frombuffer(fh.read(), np.uint8, offset=16).reshape(10_000, 784)
    with gzip.open(mnist("t10k-labels-idx1-ubyte.gz")) as fh:
        labels = np.frombuffer(fh.read(), np.uint8, offset=8)
    return images.astype(np.float64), labels


def test_mnist_from_idx_normalized(tmp_path):
    out = tmp_path / "mnist.zarr"
    r = run_cli("ingest", mnist("t10k-images-idx3-ubyte.gz"), out,
                "--labels", mnist("t10k-labels-idx1-ubyte.gz"), "--positive", "1", "--normalize")
    assert r.returncode == 0, r.stderr
    X, y, _, attrs = read_x(out)
    images, labels = mnist_test_images()
    assert X.shape == (10_000, 784) and (y == 1).sum() == 1_135
    np.testing.assert_array_equal(y, (labels == 1).astype(np.int8))
    expected = images / np.linalg.norm(images, axis=1, keepdims=True)
    np.testing.assert_allclose(X, expected, rtol=1e-6, atol=1e-7)
    assert attrs["featurization"]["steps"] == ["encode", "normalize"]


def test_higgs_whitespace_separated_label_first(tmp_path):
    out = tmp_path / "higgs.h5"
    r = run_cli("ingest", higgs(), out, "--label-column", "0")
    assert r.returncode == 0, r.stderr
    X, y, _, _ = read_x(out)
    ref = np.loadtxt(higgs())
    assert X.shape == (7_000, 28) and (y == 1).sum() == 3_716
    np.testing.assert_array_equal(X, ref[:, 1:].astype(np.float32))
    np.testing.assert_array_equal(y, ref[:, 0])


def test_digits_normalize_bias(tmp_path):
    out = tmp_path / "digits.zarr"
    r = run_cli("ingest", digits(), out, "--label-column", "64", "--positive", "3", "--normalize", "--bias",
                "--dtype", "float64")
    assert r.returncode == 0, r.stderr
    X, y, _, _ = read_x(out)
    ref = np.loadtxt(digits(), delimiter=",")
    assert X.shape == (1_797, 65) and (y == 1).sum() == 183
    np.testing.assert_allclose(X[:, :64], ref[:, :64] / np.linalg.norm(ref[:, :64], axis=1, keepdims=True))
    np.testing.assert_array_equal(X[:, 64], 1.0)
    assert (X @ X.sum(axis=0) > 0).all()   # every LAS degree is positive


def test_rff_approximates_the_rbf_kernel_and_is_seeded(tmp_path):
    rng = np.random.default_rng(0)
    A = rng.normal(size=(30, 5)) * 0.3
    np.save(tmp_path / "a.npy", A)
    kw = dict(features=FeatureOptions(rff=6000, gamma=0.7, seed=4), output=OutputOptions(dtype="float64"))
    ingest([tmp_path / "a.npy"], tmp_path / "r.zarr", **kw)
    ingest([tmp_path / "a.npy"], tmp_path / "s.zarr", source=SourceOptions(block_bytes=200), **kw)
    Z, _, _, attrs = read_x(tmp_path / "r.zarr")
    K = np.exp(-0.7 * ((A[:, None, :] - A[None, :, :]) ** 2).sum(-1))
    assert np.abs(Z @ Z.T - K).max() < 0.06            # Monte Carlo error ~ 1/sqrt(D)
    np.testing.assert_array_equal(Z, read_x(tmp_path / "s.zarr")[0])
    assert attrs["featurization"]["rff"]["dim"] == 6000


def test_numpy_round_trip_every_layout(tmp_path):
    X = np.random.default_rng(1).normal(size=(257, 9)).astype(np.float32)
    np.save(tmp_path / "c.npy", X)
    np.save(tmp_path / "f.npy", np.asfortranarray(X))
    with open(tmp_path / "c.npy", "rb") as src, gzip.open(tmp_path / "g.npy.gz", "wb") as dst:
        dst.write(src.read())
    for name in ("c.npy", "f.npy", "g.npy.gz"):
        out = tmp_path / f"{name}.zarr"
        r = run_cli("ingest", tmp_path / name, out, "--chunk-rows", "50")
        assert r.returncode == 0, r.stderr
        back, y, ids, _ = read_x(out)
        np.testing.assert_array_equal(back, X)
        assert y is None and ids is None


def test_hdf5_store_to_zarr_is_equal(tmp_path):
    X = np.random.default_rng(2).random((300, 7)).astype(np.float32)
    y = np.random.default_rng(3).integers(-1, 2, 300).astype(np.int8)
    ids = np.arange(1000, 1300)
    src = bigsearch.create_store(tmp_path / "s.h5", X, y, ids=ids, chunk_rows=64,
                                 attrs={"provenance": {"source": "test"}})
    r = run_cli("ingest", src, tmp_path / "s.zarr")
    assert r.returncode == 0, r.stderr
    back, y2, ids2, attrs = read_x(tmp_path / "s.zarr")
    np.testing.assert_array_equal(back, X)
    np.testing.assert_array_equal(y2, y)
    np.testing.assert_array_equal(ids2, ids)
    assert attrs["provenance"]["sources"][0]["provenance"] == {"source": "test"}


def test_parquet_with_header_names_and_text_column(tmp_path):
    df = pd.DataFrame({"size": [1.5, 2.0, 3.5, 4.0], "colour": ["red", "blue", "red", "green"],
                       "target": ["yes", "no", "no", "yes"]})
    df.to_parquet(tmp_path / "t.parquet")
    ingest([tmp_path / "t.parquet"], tmp_path / "t.zarr", labels=LabelOptions(column="target", positive=["yes"]))
    X, y, _, attrs = read_x(tmp_path / "t.zarr")
    np.testing.assert_array_equal(X, [[1.5, 0, 0, 1], [2, 1, 0, 0], [3.5, 0, 0, 1], [4, 0, 1, 0]])
    np.testing.assert_array_equal(y, [1, 0, 0, 1])
    assert attrs["featurization"]["feature_names"] == ["size", "colour=blue", "colour=green", "colour=red"]


def test_csv_header_detected_and_categorical_numbers(tmp_path):
    (tmp_path / "h.csv").write_text("a,b,label\n1,7,x\n2,8,y\n3,7,x\n")
    ingest([tmp_path / "h.csv"], tmp_path / "h.zarr", labels=LabelOptions(column="label", positive=["y"]),
           features=FeatureOptions(categorical=["b"]))
    X, y, _, attrs = read_x(tmp_path / "h.zarr")
    np.testing.assert_array_equal(X, [[1, 1, 0], [2, 0, 1], [3, 1, 0]])
    assert attrs["featurization"]["feature_names"] == ["a", "b=7", "b=8"]


def test_libsvm_with_and_without_n_features(tmp_path):
    from sklearn.datasets import dump_svmlight_file
    rng = np.random.default_rng(5)
    X = np.round(rng.random((120, 6)), 3)
    X[X < 0.4] = 0
    X[:, 5] = 0                                            # the last feature never appears
    y = rng.integers(0, 2, 120) * 2 - 1                    # LIBSVM's +1 / -1
    dump_svmlight_file(X, y, str(tmp_path / "d.svm"), zero_based=False)
    float64 = OutputOptions(dtype="float64")
    ingest([tmp_path / "d.svm"], tmp_path / "a.zarr", output=float64)
    ingest([tmp_path / "d.svm"], tmp_path / "b.zarr", output=float64,
           source=SourceOptions(n_features=6, block_bytes=300))
    a, ya, _, _ = read_x(tmp_path / "a.zarr")
    b, yb, _, _ = read_x(tmp_path / "b.zarr")
    np.testing.assert_array_equal(a, X[:, :5])
    np.testing.assert_array_equal(b, X)
    np.testing.assert_array_equal(ya, (y == 1).astype(np.int8))
    np.testing.assert_array_equal(yb, ya)


def test_libsvm_comments_qid_and_zero_based_indices(tmp_path):
    (tmp_path / "z.svm").write_text("# a comment line\n1 qid:3 0:0.5 6:1 # note 9:2\n-1 1:1\n\n+1 2:2\n")
    ingest([tmp_path / "z.svm"], tmp_path / "z.zarr", output=OutputOptions(dtype="float64"))
    X, y, _, attrs = read_x(tmp_path / "z.zarr")
    expected = np.zeros((3, 7))
    expected[0, [0, 6]], expected[1, 1], expected[2, 2] = [0.5, 1], 1, 2
    np.testing.assert_array_equal(X, expected)
    np.testing.assert_array_equal(y, [1, 0, 1])
    assert attrs["featurization"]["feature_names"] == [str(j) for j in range(7)]


def test_quantile_sketch_does_not_depend_on_blocking():
    from bigsearch.ingest.readers import Block, Column, Reader
    reader = Reader.__new__(Reader)
    reader.columns, reader.path = [Column("x", True)], "mem"
    x = np.random.default_rng(6).lognormal(size=(60_000, 1))   # more distinct values than the cap
    def stats(step):
        out = None
        for a in range(0, len(x), step):
            s = block_stats(Block(reader, a, matrix=x[a:a + step]), {0: "bins"}, None)
            out = s if out is None else merge_stats(s, out)
        return out["sketch"][0]
    one, many = stats(len(x)), stats(7_001)
    assert one[0] > 0 and one[0] == many[0]
    np.testing.assert_array_equal(one[1], many[1])
    np.testing.assert_array_equal(one[2], many[2])
    edges = quantile_edges(one, 4)
    exact = np.quantile(x, [0.25, 0.5, 0.75])
    np.testing.assert_allclose(edges, exact, rtol=2.0 ** -(52 - one[0]) * 4)


def test_info_reports_codec_size_and_featurization(tmp_path):
    out = tmp_path / "d.zarr"
    assert run_cli("ingest", digits(), out, "--label-column", "64", "--positive", "0", "--normalize",
                   "--bias", "--codec", "zstd").returncode == 0
    text = run_cli("info", out)
    assert text.returncode == 0, text.stderr
    assert "codec: zstd-1" in text.stdout and "MiB on disk" in text.stdout
    assert "64 numeric columns -> 64 features; then normalize, bias -> 65" in text.stdout
    d = json.loads(run_cli("info", out, "--json").stdout)
    assert d["codec"] == "zstd-1" and d["bytes_on_disk"] > 0 and not d["fast_path"]
    assert d["labels"] == {"1": 178, "0": 1_619, "-1": 0}
    X, _, _, _ = read_x(out)
    ref = np.loadtxt(digits(), delimiter=",")[:, :64]
    np.testing.assert_allclose(X[:, :64], ref / np.linalg.norm(ref, axis=1, keepdims=True), rtol=1e-6)


@pytest.mark.parametrize("name, chunk_rows", [("in.zarr", 7), ("in.h5", 7), ("in.h5", None)])
def test_array_inputs_are_read_by_whole_source_chunks(tmp_path, name, chunk_rows):
    """Blocks smaller than the source's chunks come out of whole chunks read once (a chunk
    read per block decoded every chunk many times), with rows, labels and ids aligned."""
    from bigsearch.ingest.readers import open_reader
    rng = np.random.default_rng(5)
    X = rng.normal(size=(53, 4)).astype("float32")
    y = rng.integers(0, 2, 53).astype(np.int8)
    ids = np.arange(100, 153)
    path = tmp_path / name
    if name.endswith(".h5"):
        import h5py
        with h5py.File(path, "w") as f:
            f.create_dataset("X", data=X, chunks=None if chunk_rows is None else (chunk_rows, 4))
            f["y"], f["ids"] = y, ids
    else:
        bigsearch.create_store(path, X, y, ids=ids, chunk_rows=chunk_rows)
    reader = open_reader(path)
    blocks = list(reader.blocks(block_bytes=2 * 16))            # 2 rows of 16 bytes
    assert max(len(b.matrix) for b in blocks) == 2
    np.testing.assert_array_equal(np.concatenate([b.matrix for b in blocks]), X)
    np.testing.assert_array_equal(np.concatenate([b.labels for b in blocks]), y)
    np.testing.assert_array_equal(np.concatenate([b.ids for b in blocks]), ids)
    if chunk_rows:                                               # no block spans two chunks
        assert reader._span(2, 16) == 7 and reader._span(9, 16) == 14
        assert all(b.start // 7 == (b.start + len(b.matrix) - 1) // 7 for b in blocks)
    reader.close()
