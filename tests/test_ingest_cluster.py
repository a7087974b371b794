"""`bigsearch ingest --cluster local:2`: the statistics pass and the featurization (here
random Fourier features and quantile bins) run on a real LocalCluster of 2 worker
processes and give the same store as a local ingest; a bad value is still reported
with its file and line."""

import numpy as np

import bigsearch

from conftest import dataset_files, run_cli


def stored(path):
    s = bigsearch.open_store(path)
    return s.read_rows(np.arange(s.n)), s.labels(), s.attrs["featurization"]


def test_cluster_ingest_equals_local(tmp_path):
    cases = {
        "higgs": (dataset_files("higgs", "lightgbm_binary.train"),
                  ["--label-column", "0", "--normalize", "--bias", "--rff", "64", "--gamma", "0.5", "--seed", "7"]),
        "adult": (dataset_files("adult", "adult.data", "adult.test"),
                  ["--label-column", "14", "--positive", ">50K", "--positive", ">50K.", "--bins", "5",
                   "--normalize", "--prevalence", "0.05", "--seed", "2"]),
    }
    for name, (sources, options) in cases.items():
        outs = []
        for where in ([], ["--cluster", "local:2"]):
            out = tmp_path / f"{name}{len(where)}.zarr"
            r = run_cli("ingest", *sources, out, *options, *where)
            assert r.returncode == 0, r.stderr
            if where:
                assert "blocks featurized on the cluster: " in r.stderr and "(redone here after a worker " \
                    "failed: 0)" in r.stderr and "cluster: 0 " not in r.stderr
            outs.append(stored(out))
        (X0, y0, f0), (X1, y1, f1) = outs
        np.testing.assert_array_equal(X0, X1)
        np.testing.assert_array_equal(y0, y1)
        assert f0 == f1


def test_bad_value_on_a_cluster_names_its_line(tmp_path):
    src = tmp_path / "bad.csv"
    src.write_text("".join(f"{i},{i * 0.5},{i % 2}\n" for i in range(3000)).replace("2000,1000.0,0", "2000,oops,0"))
    r = run_cli("ingest", src, tmp_path / "out.zarr", "--label-column", "2", "--positive", "1",
                "--cluster", "local:2")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "bad.csv, line 2001" in r.stderr and "'oops'" in r.stderr
    assert not (tmp_path / "out.zarr").exists()

