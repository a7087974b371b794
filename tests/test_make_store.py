"""tools/make_store.py, the generator of synthetic stores that the scale benchmarks and users
run: a real subprocess, a real store on disk."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import bigsearch

TOOL = Path(__file__).resolve().parent.parent / "tools" / "make_store.py"


def make(*args, summaries=False):
    """The tool in a subprocess; without the block summaries (three passes) unless asked."""
    extra = () if summaries else ("--no-summaries",)
    return subprocess.run([sys.executable, str(TOOL), *map(str, args), *extra], capture_output=True, text=True)


@pytest.mark.parametrize("name", ["s.zarr", "s.h5"])
def test_generated_store_is_realistic(tmp_path, name):
    out = tmp_path / name
    res = make(out, "--n", 20000, "--r", 32, "--prevalence", 0.01, "--chunk-rows", 3000)
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    assert report["n"] == 20000 and report["r"] == 32 and report["chunk_rows"] == 3000
    with bigsearch.open_store(out) as store:
        X = store.read_rows(np.arange(store.n))
        y = store.labels()
    assert report["positives"] == int(y.sum())
    assert abs(y.mean() - 0.01) < 0.003
    np.testing.assert_allclose(np.linalg.norm(X, axis=1), 1.0, rtol=1e-5)   # unit rows
    np.testing.assert_allclose(X[:, -1], X[0, -1], rtol=1e-6)               # the bias feature
    assert (X @ X.sum(axis=0) > 0).all()                                     # positive degrees
    # clustered positives: closer to each other than to the negatives, on average
    pos, neg = X[y == 1], X[y == 0][:2000]
    assert (pos @ pos.T).mean() > (pos @ neg.T).mean() + 0.05


def test_same_seed_same_store(tmp_path):
    for name in ("a.zarr", "b.zarr"):
        assert make(tmp_path / name, "--n", 3000, "--r", 8, "--seed", 3).returncode == 0
    a, b = (bigsearch.open_store(tmp_path / n) for n in ("a.zarr", "b.zarr"))
    np.testing.assert_array_equal(a.read_rows(np.arange(3000)), b.read_rows(np.arange(3000)))
    np.testing.assert_array_equal(a.labels(), b.labels())


@pytest.mark.parametrize("args, message", [
    (["--n", 0], "--n must be >= 1"),
    (["--n", 10, "--prevalence", 1.5], "--prevalence must be in (0, 1)"),
])
def test_bad_arguments_are_one_line_errors(tmp_path, args, message):
    res = make(tmp_path / "x.zarr", *args)
    assert res.returncode == 2 and message in res.stderr and "Traceback" not in res.stderr
    assert not (tmp_path / "x.zarr").exists()


def test_existing_store_is_kept(tmp_path):
    out = tmp_path / "x.zarr"
    assert make(out, "--n", 100, "--r", 4).returncode == 0
    res = make(out, "--n", 200, "--r", 4)
    assert res.returncode == 2 and "--overwrite" in res.stderr
    assert bigsearch.open_store(out).n == 100


@pytest.mark.parametrize("name", ["g.zarr", "g.h5"])
def test_generated_order_groups_the_same_rows_by_cluster(tmp_path, name):
    """--order generated writes the default store's rows permuted (row p is row ids[p]),
    grouped by generating cluster, in one streaming pass; progress goes to stderr."""
    from bigsearch.synthetic import BLOCK_ROWS, cluster_centres, draw_clusters

    n, seed = BLOCK_ROWS + 4321, 5                 # two generator blocks, chunks unaligned with clusters
    common = ("--n", n, "--r", 8, "--seed", seed, "--prevalence", 0.01, "--chunk-rows", 999)
    assert make(tmp_path / "rows.zarr", *common).returncode == 0
    res = make(tmp_path / name, *common, "--order", "generated")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["order"] == "generated" and "rows/s" in res.stderr
    with bigsearch.open_store(tmp_path / "rows.zarr") as rows, bigsearch.open_store(tmp_path / name) as grouped:
        ids = grouped.ids()
        np.testing.assert_array_equal(np.sort(ids), np.arange(n))
        np.testing.assert_array_equal(grouped.read_rows(np.arange(n)), rows.read_rows(ids))
        np.testing.assert_array_equal(grouped.labels(), rows.labels()[ids])
    centres = cluster_centres(8, seed)
    cluster = np.concatenate([draw_clusters(np.random.default_rng([seed, 2, b]), centres, min(BLOCK_ROWS, n - a),
                                            0.01)[1] for b, a in enumerate(range(0, n, BLOCK_ROWS))])
    assert (np.diff(cluster[ids]) >= 0).all()                        # grouped by cluster
    for c in np.unique(cluster):                                     # each group in row order
        assert (np.diff(ids[cluster[ids] == c]) > 0).all()


@pytest.mark.parametrize("name,order", [("rows.zarr", "rows"), ("generated.h5", "generated")])
def test_stores_carry_valid_block_summaries(tmp_path, name, order):
    """Written before the store appears; a pruned search uses them (they describe X)."""
    out = tmp_path / name
    res = make(out, "--n", 3000, "--r", 8, "--chunk-rows", 1000, "--order", order, "--quiet", summaries=True)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["summaries_MiB"] > 0
    las = bigsearch.LAS(out, prune=True)
    las.sync()
    assert las.pruning.summaries_from == "store"
    assert bigsearch.open_store(out).describe()["block_summaries"]["fingerprint_matches"]
