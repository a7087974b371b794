"""Cluster-ordered stores (ingest/cluster_order.py): the same points, labels and ids,
grouped by k-means cluster; through the library, `bigsearch ingest --cluster-order`
and tools/make_store.py."""

import csv
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import bigsearch
from bigsearch.backends.local import LocalBackend
from bigsearch.engine.core.kmeans import kmeans, squared_distances
from bigsearch.errors import ParameterError, StoreExistsError
from bigsearch.ingest import cluster_order as ordering
from bigsearch.ingest.cluster_order import cluster_order
from bigsearch.testing import clustered_points

from conftest import run_cli, store_path

ROOT = Path(__file__).resolve().parents[1]


def check_permuted(src, out, clusters):
    a, b = bigsearch.open_store(src), bigsearch.open_store(out)
    assert (b.n, b.r, b.dtype) == (a.n, a.r, a.dtype)
    X, Xo = a.read_rows(np.arange(a.n)), b.read_rows(np.arange(b.n))
    ids = b.ids()
    src_ids = a.ids()
    rows = ids if src_ids is None else np.searchsorted(src_ids, ids)
    assert sorted(rows.tolist()) == list(range(a.n))          # a permutation, original rows named
    assert np.array_equal(Xo, X[rows])
    if a.labels() is not None:
        assert np.array_equal(b.labels(), a.labels()[rows])
    assert b.attrs["cluster_order"]["clusters"] == clusters


@pytest.mark.parametrize("kind,dtype", [("zarr", "float32"), ("hdf5", "float64")])
def test_rows_are_permuted_with_labels_and_ids(tmp_path, store_factory, kind, dtype):
    X, y = clustered_points(500, 6, prevalence=0.1, seed=1, spread=0.3)
    src = store_factory(X, y, kind, dtype, 37)
    out = store_path(tmp_path, "o", kind)
    summary = cluster_order(src, out, clusters=5, seed=0)
    assert sum(summary["sizes"]) == 500
    check_permuted(src, out, 5)
    assert bigsearch.open_store(out).chunk_rows == 37


@pytest.mark.parametrize("kind,dtype,chunk_rows", [("zarr", "float32", 37), ("hdf5", "float64", 64)])
def test_every_row_appears_once_with_its_id_and_label(tmp_path, monkeypatch, kind, dtype, chunk_rows):
    """k-means on a sample (100 of 1,001 rows), the spill read back in blocks of 3 rows, chunk
    sizes that do not divide n, shuffled ids: the output is the input's rows permuted, each
    once with its id and label, cluster after cluster, rows of a cluster in input order."""
    monkeypatch.setattr(ordering, "MIN_SAMPLE", 100)
    monkeypatch.setattr(ordering, "SAMPLE_PER_CLUSTER", 10)
    monkeypatch.setattr(ordering, "WRITE_BYTES", 3 * 8 * np.dtype(dtype).itemsize)
    X, y = clustered_points(1001, 8, prevalence=0.1, seed=7, spread=0.3)
    ids = np.random.default_rng(0).permutation(1001) * 3 + 10**9
    src, out = store_path(tmp_path, "s", kind), store_path(tmp_path, "o", kind)
    bigsearch.create_store(src, X.astype(dtype), y, ids=ids, chunk_rows=chunk_rows)
    summary = cluster_order(src, out, clusters=6, seed=1, chunk_rows=50)
    b = bigsearch.open_store(out)
    place = {int(v): i for i, v in enumerate(ids)}
    rows = np.array([place[int(v)] for v in b.ids()])
    assert np.array_equal(np.sort(rows), np.arange(1001))            # each row exactly once
    assert np.array_equal(b.read_rows(np.arange(1001)), X.astype(dtype)[rows].astype(np.float64))
    assert np.array_equal(b.labels(), y[rows]) and b.dtype == np.dtype(dtype) and b.chunk_rows == 50
    sizes = np.array(summary["sizes"])
    assert sizes.sum() == 1001 and (sizes > 0).sum() > 1
    for run in np.split(rows, np.cumsum(sizes[sizes > 0])[:-1]):
        assert np.all(np.diff(run) > 0)                              # a cluster's rows in input order


def test_rows_of_a_cluster_are_contiguous(tmp_path, store_factory):
    X, y = clustered_points(400, 6, prevalence=0.1, seed=4, spread=0.2)
    src = store_factory(X, y, "zarr", "float64", 50)
    out = tmp_path / "o.zarr"
    cluster_order(src, out, clusters=4, seed=0, iterations=3)
    store = bigsearch.open_store(src)
    backend = LocalBackend(store)
    centres = kmeans(store, 4, seed=0, iterations=3, mapper=backend.map)    # the same centres
    backend.close()
    Xo = bigsearch.open_store(out).read_rows(np.arange(400))
    nearest = squared_distances(Xo, centres, (centres ** 2).sum(axis=1)).argmin(axis=1)
    assert np.all(np.diff(nearest) >= 0) and len(np.unique(nearest)) > 1    # one run per cluster, in order


def test_source_ids_are_kept(tmp_path):
    X, y = clustered_points(120, 5, prevalence=0.2, seed=2)
    src = tmp_path / "s.zarr"
    bigsearch.create_store(src, X, y, ids=np.arange(1000, 1120), chunk_rows=16)
    cluster_order(src, tmp_path / "o.zarr", clusters=3)
    check_permuted(src, tmp_path / "o.zarr", 3)
    assert bigsearch.open_store(tmp_path / "o.zarr").ids().min() == 1000


def test_refuses_to_overwrite_or_write_over_the_source(tmp_path, store_factory):
    X, y = clustered_points(50, 4, seed=3)
    src = store_factory(X, y)
    with pytest.raises(ParameterError, match="other than the source"):
        cluster_order(src, src, overwrite=True)
    with pytest.raises(StoreExistsError):
        cluster_order(src, store_factory(X, y), clusters=2)
    with pytest.raises(ParameterError, match="clusters"):
        cluster_order(src, tmp_path / "o.zarr", clusters=51)
    assert not (tmp_path / "o.zarr").exists() and not list(tmp_path.glob(".o.zarr*"))


def test_ingest_cluster_order(tmp_path):
    X, y = clustered_points(300, 5, prevalence=0.1, seed=6, spread=0.3)
    np.save(tmp_path / "x.npy", X.astype(np.float32))
    np.save(tmp_path / "y.npy", y)
    plain, ordered = tmp_path / "plain.zarr", tmp_path / "ordered.zarr"
    for out, extra in ((plain, []), (ordered, ["--cluster-order", "4"])):
        done = run_cli("ingest", tmp_path / "x.npy", out, "--labels", tmp_path / "y.npy", "--positive", "1", *extra)
        assert done.returncode == 0, done.stderr
    check_permuted(plain, ordered, 4)
    assert not list(tmp_path.glob(".ordered.zarr*"))      # the unordered copy is gone


def test_make_store_cluster_order(tmp_path):
    out = tmp_path / "c.zarr"
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "make_store.py"), str(out), "--n", "3000",
                           "--r", "8", "--cluster-order", "6", "--chunk-rows", "512"],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    made = json.loads(done.stdout)
    assert made["clusters"] == 6 and set(made["cluster_order_stages"]) == {"kmeans", "assign", "spill", "write"}
    assert made["x_bytes"] <= made["peak_disk_bytes"] < 1.5 * made["bytes_on_disk"]     # about one copy at once
    store = bigsearch.open_store(out)
    assert sorted(store.ids().tolist()) == list(range(3000))
    assert not list(tmp_path.glob(".c.zarr*"))


def test_display_arrays_move_with_their_rows(tmp_path):
    """The labelling page's pixels are rewritten in the new order: row i shows the
    image of original row ids[i] (records: tests/test_serve.py)."""
    from bigsearch.serve.records import display_spec, read_display
    images = np.random.default_rng(0).integers(0, 255, size=(200, 4, 4), dtype=np.uint8)
    np.save(tmp_path / "img.npy", images)
    np.save(tmp_path / "y.npy", (np.arange(200) % 10 == 0).astype(np.int8))
    out = tmp_path / "o.zarr"
    done = run_cli("ingest", tmp_path / "img.npy", out, "--labels", tmp_path / "y.npy", "--positive", "1",
                   "--normalize", "--bias", "--cluster-order", "3")
    assert done.returncode == 0, done.stderr
    store = bigsearch.open_store(out)
    assert display_spec(store)["kind"] == "image" and store.attrs["cluster_order"]["clusters"] == 3
    ids = store.ids()
    assert sorted(ids.tolist()) == list(range(200)) and ids.tolist() != list(range(200))
    for i in range(200):
        np.testing.assert_array_equal(read_display(store, i)["pixels"], images[ids[i]].ravel())


@pytest.mark.parametrize("kind", ["records", "pixels"])
def test_display_values_are_read_back_a_block_at_a_time(tmp_path, monkeypatch, kind):
    """A cluster's display values come back from the spill DISPLAY_BLOCK_ROWS at a time (a
    cluster of text can hold a tenth of a corpus): with blocks of 7 values, far smaller
    than the clusters, row i still shows original row ids[i]'s record or image."""
    from bigsearch.serve.records import read_displays

    rng = np.random.default_rng(1)
    if kind == "pixels":
        np.save(tmp_path / "src.npy", rng.integers(0, 255, size=(150, 3, 3), dtype=np.uint8))
        args = [tmp_path / "src.npy", "--normalize"]
    else:
        words = np.array(["alpha", "beta", "gamma", "delta", "ε-psilon", 'quo"te', "new\nline"])
        with open(tmp_path / "src.csv", "w", encoding="utf-8", newline="") as fh:
            out = csv.writer(fh)
            out.writerow(["title", "abstract"])
            for i in range(150):
                out.writerow([f"{' '.join(rng.choice(words, 4))} {i}", " ".join(rng.choice(words, 12))])
        args = [tmp_path / "src.csv", "--header", "--text-column", "title,abstract", "--text-dim", "8"]
    src = tmp_path / "src.zarr"
    done = run_cli("ingest", *args, src)
    assert done.returncode == 0, done.stderr
    monkeypatch.setattr(ordering, "DISPLAY_BLOCK_ROWS", 7)
    cluster_order(src, tmp_path / "o.zarr", clusters=3)
    a, b = bigsearch.open_store(src), bigsearch.open_store(tmp_path / "o.zarr")
    ids = b.ids()
    assert ids.tolist() != list(range(150))
    assert read_displays(b, list(range(150))) == read_displays(a, ids.tolist())


# -- the block summaries, computed as the ordered store is written ---------------------------------
def stored_group(path):
    from bigsearch.engine.pruning.summaries import GROUP
    return bigsearch.open_store(path).read_group(GROUP, None)


@pytest.mark.parametrize("kind,dtype,chunk_rows", [("zarr", "float32", 70), ("hdf5", "float64", 128)])
def test_summaries_written_in_stream_are_those_of_the_passes(tmp_path, monkeypatch, kind, dtype, chunk_rows):
    """The summaries computed as the output is written (one pass, the degrees, after it)
    are bit for bit those of summaries_of_store's three passes over the output, but for
    the basis (of a k-means sample here), and the box and residual radius, which are
    compute_summaries' pass with that basis; a search then reads them from the store."""
    from bigsearch.backends.local import LocalBackend
    from bigsearch.engine.pruning.block_summaries import DEFAULT_BLOCK_ROWS, compute_summaries
    from bigsearch.engine.pruning.summaries import summaries_of_store

    monkeypatch.setattr(ordering, "MIN_SAMPLE", 300)         # the basis from a sample of 300 of 1,000 rows
    monkeypatch.setattr(ordering, "SAMPLE_PER_CLUSTER", 10)
    monkeypatch.setattr(ordering, "WRITE_BYTES", 3 * chunk_rows * 40 * np.dtype(dtype).itemsize)
    X, y = clustered_points(1000, 40, prevalence=0.05, seed=5, spread=0.4)
    src, out = store_path(tmp_path, "s", kind), store_path(tmp_path, "o", kind)
    bigsearch.create_store(src, X.astype(dtype), y, chunk_rows=33)
    summary = cluster_order(src, out, clusters=7, seed=2, chunk_rows=chunk_rows)
    assert summary["block_summaries"]["passes"] == 1
    attrs, got = stored_group(out)
    with bigsearch.open_store(out) as store:
        sm, s, deg_sum = summaries_of_store(store)
        backend = LocalBackend(store)
        with_basis = compute_summaries(backend.map, store.chunks, got["basis"], DEFAULT_BLOCK_ROWS)
        backend.close()
    assert attrs["block_rows"] == DEFAULT_BLOCK_ROWS and got["basis"].shape == (40, 32)
    assert np.allclose(got["basis"].T @ got["basis"], np.eye(32), atol=1e-12)     # orthonormal: valid bounds
    assert not np.allclose(np.abs(got["basis"]), np.abs(sm.basis))                # a sample's, not X's
    assert np.array_equal(got["s"], s) and np.array_equal(got["deg_sum"], deg_sum)
    for field in ("centre", "radius", "norm_max", "deg_min", "deg_max"):
        assert np.array_equal(got[field], getattr(sm, field)), field
    for field in ("lo", "hi", "radius_perp"):
        assert np.array_equal(got[field], getattr(with_basis, field)), field
    full, pruned = bigsearch.LAS(out), bigsearch.LAS(out, prune=True)
    pruned.sync()
    assert pruned.pruning.summaries_from == "store"
    labels = bigsearch.open_store(out).labels()
    first = [int(np.flatnonzero(labels == 1)[0]), int(np.flatnonzero(labels == 0)[0])]
    for search in (full, pruned):
        search.tell(first, [1, 0])
    for _ in range(15):
        (i,), _ = full.top(1)
        (j,), _ = pruned.top(1)
        assert i == j
        full.tell([int(i)], [int(labels[i])])
        pruned.tell([int(i)], [int(labels[i])])


def test_an_encoded_output_has_the_summaries_of_the_passes(tmp_path):
    """Encoded as it is written: the summaries are the passes' over the stored (encoded) X."""
    from bigsearch.engine.pruning.summaries import summaries_of_store
    X, y = clustered_points(400, 10, prevalence=0.05, seed=8, spread=0.4)
    src, out = tmp_path / "s.zarr", tmp_path / "o.zarr"
    bigsearch.create_store(src, X.astype(np.float32), y, chunk_rows=64)
    summary = cluster_order(src, out, clusters=4, encoding="float16")
    assert "passes" not in summary["block_summaries"]
    _, got = stored_group(out)
    with bigsearch.open_store(out) as store:
        sm, s, _ = summaries_of_store(store)
    assert np.array_equal(got["s"], s) and np.array_equal(got["lo"], sm.lo)


def test_a_temporary_source_is_removed_once_spilled(tmp_path, monkeypatch):
    """discard_source: the source's chunk files go as they are spilled, and the spill file's
    tail as the output is written, so about one copy of X is on disk beside the output (as
    the summary states); without it a user's source is never touched."""
    monkeypatch.setattr(ordering, "WRITE_BYTES", 2 * 50 * 6 * 4)      # the write in blocks of 100 rows
    X, y = clustered_points(1000, 6, prevalence=0.1, seed=3)
    src = tmp_path / "s.zarr"
    bigsearch.create_store(src, X.astype(np.float32), y, chunk_rows=50)
    seen = {}
    write = ordering._write

    def spy(spill, *args, **kw):
        seen["source"] = src.exists()
        return write(spill, *args, **kw)

    monkeypatch.setattr(ordering, "_write", spy)
    kept = cluster_order(src, tmp_path / "a.zarr", clusters=3)
    assert seen["source"] and src.exists()
    disk = kept["disk_bytes"]
    assert disk["source"] + disk["out"] <= kept["peak_disk_bytes"] < sum(disk.values())
    gone = cluster_order(src, tmp_path / "b.zarr", clusters=3, discard_source=True)
    assert not seen["source"] and not src.exists()
    disk = gone["disk_bytes"]
    assert disk["spill"] >= X.nbytes // 2 and disk["out"] >= X.nbytes // 2
    assert disk["out"] <= gone["peak_disk_bytes"] < disk["source"] + disk["spill"] - 10 * 50 * 6 * 4
    a, b = bigsearch.open_store(tmp_path / "a.zarr"), bigsearch.open_store(tmp_path / "b.zarr")
    assert np.array_equal(a.read_rows(np.arange(1000)), b.read_rows(np.arange(1000)))
    assert np.array_equal(a.ids(), b.ids())
