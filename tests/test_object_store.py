"""Feature stores in object storage, against a real S3-compatible server (moto's, started
here on 127.0.0.1): ingest to s3://, info, run, sessions, locally and on a LocalCluster
of worker processes, with the same queries as the same data on local disk; the local
chunk cache. (Errors and a server stopped mid-run: test_object_store_errors.py.)"""

import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest
from distributed import Client, LocalCluster

import bigsearch
from bigsearch.backends.distributed import Distributed
from bigsearch.session import Session
from bigsearch.storage import open_store
from bigsearch.storage.remote import ObjectZarrStore
from bigsearch.storage.remote_options import remote_defaults
from bigsearch.testing import clustered_points, dense_las_run
from bigsearch.testing.cluster import assert_persisted, persisted_chunks
from bigsearch.testing.s3_server import ACCESS, NO_METADATA, S3Server
from bigsearch.testing.store_suite import StoreFormatTests

from conftest import run_cli, run_queries

BUCKET = "features"
LAS_OPTIONS = {"pi": 0.05, "eta": 0.6, "alpha": 0.05}
CREDENTIALS = {"access_key_id": "testing", "secret_access_key": "testing"}


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    """The server, with its endpoint and credentials in this process's environment (and
    so in the CLI's subprocesses and the LocalCluster's workers)."""
    server = S3Server().start()
    env = {
        **ACCESS,
        **NO_METADATA,
        "AWS_ENDPOINT_URL": server.endpoint,
        "BIGSEARCH_CHUNK_CACHE": str(tmp_path_factory.mktemp("chunk-cache")),
    }
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        server.create_bucket(BUCKET)
        yield server
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        server.stop()


@pytest.fixture(scope="module")
def data():
    return clustered_points(600, 10, prevalence=0.05, seed=4, spread=0.8)


@pytest.fixture
def url(request):
    """A fresh store URL per test."""
    return f"s3://{BUCKET}/{request.node.name.replace('[', '-').replace(']', '')}.zarr"


@pytest.fixture(scope="module")
def client(s3):
    with (
        LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster,
        Client(cluster) as c,
    ):
        yield c


def first_positive(y):
    return int(np.flatnonzero(y)[0])


@pytest.mark.parametrize(
    "encoding,chunk_rows",
    [("float32", 1), ("float64", 37), ("float32", 120), ("float64", 120), ("int8", 37), ("binary", 37)],
)
def test_las_on_s3_matches_the_dense_reference_and_the_local_store(s3, data, tmp_path, url, encoding, chunk_rows):
    X, y = data
    n = 40 if chunk_rows == 1 else 120  # one request per chunk: few chunks keep it fast
    X, y = X[:n], y[:n]
    if encoding == "binary":
        X = np.c_[(X[:, :-1] > 0).astype(np.float64), np.ones(len(X))]
    bigsearch.create_store(url, X, y, encoding=encoding, chunk_rows=chunk_rows)
    local = bigsearch.create_store(tmp_path / "s.zarr", X, y, encoding=encoding, chunk_rows=chunk_rows)
    start = first_positive(y)
    results = {}
    for where in (url, local):
        search = bigsearch.LAS(where, **LAS_OPTIONS)
        search.tell(start, 1)
        results[str(where)] = (run_queries(search, y, 8), search.f.copy(), search.impact.copy())
        search.close()
    (q_s3, f_s3, im_s3), (q_local, f_local, im_local) = results[url], results[str(local)]
    assert q_s3 == q_local
    np.testing.assert_array_equal(f_s3, f_local)
    np.testing.assert_array_equal(im_s3, im_local)
    with open_store(local) as s:
        stored = s.read_rows(np.arange(len(X)))  # the values as stored (rounded by the encoding)
    assert q_s3 == dense_las_run(stored, y, [start], 8, **LAS_OPTIONS)


@pytest.mark.parametrize("codec", ["zstd", "gzip"])
def test_compressed_stores_read_the_same_values(s3, data, url, codec):
    from bigsearch.ingest.pipeline import compressors_for

    X, y = data
    bigsearch.create_store(url, X, y, chunk_rows=64, compressors=compressors_for("zarr", codec))
    with open_store(url) as s:
        assert s.codec() == codec + "-1"
        np.testing.assert_array_equal(s.read_rows(np.arange(len(X))), X)
        np.testing.assert_array_equal(s.labels(), y)


def test_cli_ingest_to_s3_then_info_and_run_as_on_local_disk(s3, data, tmp_path, url):
    X, y = data
    csv = tmp_path / "d.csv"
    np.savetxt(csv, np.c_[X, y], delimiter=",", fmt="%.6f")
    local = tmp_path / "d.zarr"
    common = ["--label-column", X.shape[1], "--positive", 1, "--chunk-rows", 100]
    done = run_cli("ingest", csv, url, *common, "--cluster", "local:1", cwd=tmp_path)  # blocks on a dask worker
    assert done.returncode == 0, done.stderr
    assert re.search(r"blocks featurized on the cluster: [1-9]", done.stderr), done.stderr
    done = run_cli("ingest", csv, local, *common, "-q", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "s3:").exists()  # the old bug: a local directory named s3:
    infos = [json.loads(run_cli("info", s, "--json").stdout) for s in (url, local)]
    for key in ("n", "r", "dtype", "chunk_rows", "labels"):
        assert infos[0][key] == infos[1][key]
    assert infos[0]["attrs"]["featurization"] == infos[1]["attrs"]["featurization"]
    text = run_cli("info", url).stdout
    assert "object store" in text and "cached" in text
    queries = {}
    for name, store in (("s3", url), ("local", local)):
        out = tmp_path / f"runs-{name}"
        done = run_cli(
            "run", store, "--method", "las,wnas", "--budget", 12, "--alpha", 0.01, "--out", out, "-q", "--no-plots"
        )
        assert done.returncode == 0, done.stderr
        queries[name] = [r["queries"] for r in json.loads((out / "results.json").read_text())["runs"]]
        done = run_cli("pairs", store, "--pairs", 3, "--top", 10, "--out", out, "-q")
        assert done.returncode == 0, done.stderr
        queries[name].append(json.loads((out / "pairs.json").read_text())["draws"])
    assert queries["s3"] == queries["local"]


def test_the_cache_serves_later_passes_and_refetches_changed_chunks(s3, data, tmp_path, url):
    X, y = data
    bigsearch.create_store(url, X, y, chunk_rows=100)
    options = {"cache_dir": str(tmp_path / "cache")}
    with open_store(url, options) as s:
        s.read_rows(np.arange(len(X)))  # the first pass fetches every chunk
        assert (s._cache.misses, s._cache.hits) == (6, 0)
    with open_store(url, options) as s:  # a new search on the same machine
        rows = s.read_rows(np.arange(len(X)))
        assert (s._cache.misses, s._cache.hits) == (0, 6)
        np.testing.assert_array_equal(rows, X)
    X2 = X.copy()
    X2[250] += 1.0  # one chunk changes: its ETag changes
    bigsearch.create_store(url, X2, y, chunk_rows=100, overwrite=True)
    with open_store(url, options) as s:
        rows = s.read_rows(np.arange(len(X)))
        assert s._cache.misses >= 1 and s._cache.hits <= 5
        np.testing.assert_array_equal(rows, X2)
    assert len(list((tmp_path / "cache").rglob("2-*.raw"))) == 1  # the stale copy of chunk 2 is gone


def test_a_chunk_rewritten_during_a_search_stops_it(s3, data, tmp_path, url):
    """A chunk object whose ETag is not the one listed when the store opened was rewritten
    meanwhile: reading it is an error, never a silent mix of two versions of X."""
    import obstore

    X, y = data
    bigsearch.create_store(url, X, y, chunk_rows=100)
    with open_store(url, {"cache_dir": str(tmp_path / "cache")}) as s:
        key = s._chunk_key(3)
        stored = obstore.get(s._object_store, key).bytes()
        obstore.put(s._object_store, key, bytes(stored)[::-1])  # same size, other bytes: another ETag
        np.testing.assert_array_equal(s.read_rows([5, 150]), X[[5, 150]])  # other chunks read as before
        with pytest.raises(bigsearch.errors.StoreError, match="chunk .*3.* changed while this search was running"):
            s.read_rows([350])


def test_a_cache_smaller_than_the_store_keeps_the_first_chunks(s3, data, tmp_path, url):
    X, y = data
    bigsearch.create_store(url, X, y, chunk_rows=100)
    chunk_bytes = 100 * X.shape[1] * X.itemsize
    options = {"cache_dir": str(tmp_path / "cache"), "cache_size": int(2.5 * chunk_bytes)}
    with open_store(url, options) as s:
        for _ in range(3):
            np.testing.assert_array_equal(s.read_rows(np.arange(len(X))), X)
            s._cache.flush()  # the cache writes in the background
        c = s._cache.describe()
    # pass 1: 2 chunks admitted, 4 declined; passes 2 and 3: those 2 hit, the other 4 are refetched
    assert (c["hits"], c["misses"], c["declined"]) == (4, 14, 12)
    assert c["used_bytes"] <= options["cache_size"]


def test_a_chunk_admitted_twice_stays_cached(tmp_path, monkeypatch):
    """Two passes may both miss a chunk whose first write is still pending: the second
    write must not remove the first one's file (a reader may be about to map it); the
    rename replaces it in one step."""
    from bigsearch.storage import chunk_cache
    from bigsearch.storage.chunk_cache import ChunkCache

    removed = []
    unlink = chunk_cache._unlink
    monkeypatch.setattr(chunk_cache, "_unlink", lambda path: removed.append(path.name) or unlink(path))
    cache = ChunkCache(tmp_path, "store", limit=1 << 20)
    values = np.arange(40.0).reshape(4, 10)
    for _ in range(2):
        cache.admit(3, ("etag", 320), values)
        cache.flush()
        path = cache.lookup(3, ("etag", 320), values.nbytes)
        assert path is not None and np.array_equal(np.fromfile(path).reshape(4, 10), values)
    assert removed == []
    cache.admit(3, ("etag2", 320), values + 1)  # a new version replaces the old one
    cache.flush()
    assert [p.name for p in cache.dir.glob("3-*.raw")] == [cache._path(3, ("etag2", 320)).name]


def test_a_chunk_evicted_between_lookup_and_read_is_fetched_again(s3, data, tmp_path, url):
    """Another process's eviction can remove a cached chunk just after this one found it."""
    X, y = data
    bigsearch.create_store(url, X, y, chunk_rows=100)
    options = {"cache_dir": str(tmp_path / "cache")}
    with open_store(url, options) as s:
        s.read_rows(np.arange(len(X)))
        s._cache.flush()
    with open_store(url, options) as s:
        found = s._cache.lookup

        def found_then_evicted(j, tag, nbytes):
            path = found(j, tag, nbytes)
            if path is not None:
                path.unlink()
            return path

        s._cache.lookup = found_then_evicted
        np.testing.assert_array_equal(s.read_rows(np.arange(len(X))), X)
        assert s._cache.hits == 6


def test_no_cache_reads_the_object_store_every_pass(s3, data, url):
    X, y = data
    bigsearch.create_store(url, X, y, chunk_rows=100)
    with open_store(url, {"cache_size": "0"}) as s:
        assert s._cache is None and "no local chunk cache" in s.slow_reason
        np.testing.assert_array_equal(s.read_rows([5, 599, 0]), X[[5, 599, 0]])


@pytest.mark.parametrize("persist", [False, True])
def test_local_cluster_workers_read_their_shards_from_s3(s3, client, data, tmp_path, url, persist):
    X, y = data
    bigsearch.create_store(url, X, y, chunk_rows=37)
    local = bigsearch.create_store(tmp_path / "s.zarr", X, y, chunk_rows=37)
    start = first_positive(y)
    on_disk = bigsearch.LAS(local, **LAS_OPTIONS)
    on_cluster = bigsearch.LAS(url, backend=Distributed(client, persist=persist), **LAS_OPTIONS)
    for s in (on_disk, on_cluster):
        s.tell(start, 1)
    assert run_queries(on_cluster, y, 10) == run_queries(on_disk, y, 10)
    np.testing.assert_array_equal(on_cluster.f, on_disk.f)
    np.testing.assert_array_equal(on_cluster.impact, on_disk.impact)
    if persist:  # X is in the workers' memory, split between them
        assert_persisted(on_cluster.backend)
    else:
        assert not any(persisted_chunks(on_cluster.backend).values())
    wnas = [bigsearch.WNAS(s, backend=b) for s, b in ((local, "local"), (url, client))]
    for s in wnas:
        s.tell(start, 1)
    assert run_queries(wnas[1], y, 6) == run_queries(wnas[0], y, 6)


def test_each_worker_fetches_only_its_shards_chunks(s3, client, data, tmp_path, url):
    """The workers read X from the object store themselves, each only its own shard's
    chunks: with a chunk cache directory per worker, each holds exactly its shard's."""
    X, y = data
    bigsearch.create_store(url, X, y, chunk_rows=50)
    base = tmp_path / "worker-caches"

    def own_cache(dask_worker, base=str(base)):
        old = os.environ.get("BIGSEARCH_CHUNK_CACHE")
        os.environ["BIGSEARCH_CHUNK_CACHE"] = os.path.join(base, dask_worker.address.rsplit(":", 1)[1])
        return old

    def restore(dask_worker, old):
        os.environ.pop("BIGSEARCH_CHUNK_CACHE", None)
        if old[dask_worker.address] is not None:
            os.environ["BIGSEARCH_CHUNK_CACHE"] = old[dask_worker.address]

    old = client.run(own_cache)
    try:
        search = bigsearch.LAS(url, backend=client, **LAS_OPTIONS)  # the cache directory: each worker's own
        search.tell(first_positive(y), 1)
        search.ask()
        shards = {s.address.rsplit(":", 1)[1]: set(s.chunks) for s in search.backend.shards}
        search.close()
    finally:
        client.run(restore, old=old)
    assert len(shards) == 2 and set.union(*shards.values()) == set(range(12))

    def cached(port):
        return {int(f.name.split("-")[0]) for f in (base / port).rglob("*.raw")}

    deadline = time.monotonic() + 60  # the cache writes in the background
    while any(cached(port) != chunks for port, chunks in shards.items()) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert {port: cached(port) for port in shards} == shards


def test_the_server_stopping_mid_run_on_a_cluster_is_the_same_clear_error(client, data):
    """A worker that cannot reach the object store (after its retries) stops the search
    with the one-line error, not a worker-loss recovery or a dask traceback."""
    X, y = data
    server = S3Server().start()
    try:
        server.create_bucket("features")
        options = {
            "storage_options": {"endpoint": server.endpoint, "retries": "1", "retry_timeout": "2", **CREDENTIALS},
            "cache_size": 0,  # no cache: every pass goes to the server
        }
        with remote_defaults(options["storage_options"]):
            bigsearch.create_store("s3://features/s.zarr", X, y, chunk_rows=100)
        search = bigsearch.LAS(open_store("s3://features/s.zarr", options), backend=client, **LAS_OPTIONS)
        search.tell(first_positive(y), 1)
        i = search.ask()
        server.stop()
        search.tell(i, int(y[i]))
        with pytest.raises(bigsearch.errors.StoreError, match="cannot reach the object store.*after 1 retries"):
            search.ask()
        assert search.backend.recoveries == []
        search.close()
    finally:
        server.stop()


def test_ingest_cluster_order_to_s3_writes_the_ordered_store_there(s3, data, tmp_path, url):
    """`ingest ... s3://... --cluster-order K`: the ordered store at the URL, its temporary
    copies local and removed, no local directory named s3:."""
    X, y = data
    csv = tmp_path / "d.csv"
    np.savetxt(csv, np.c_[X, y], delimiter=",", fmt="%.6f")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    args = ["--label-column", X.shape[1], "--positive", 1, "--chunk-rows", 100, "--cluster-order", 4, "-q"]
    done = run_cli("ingest", csv, url, *args, cwd=tmp_path, env={"TMPDIR": str(tmp)})
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.csv", "tmp"] and not any(tmp.iterdir())
    with open_store(url) as s:
        rows = s.ids()
        assert sorted(rows.tolist()) == list(range(len(X)))  # a permutation naming the original rows
        assert s.attrs["cluster_order"]["clusters"] == 4 and s.chunk_rows == 100
        np.testing.assert_allclose(s.read_rows(np.arange(len(X))), X[rows], atol=1e-6)
        np.testing.assert_array_equal(s.labels(), y[rows])
    from bigsearch.ingest.cluster_order import cluster_order

    local = bigsearch.create_store(tmp_path / "s.zarr", X, y)
    with pytest.raises(bigsearch.errors.StoreExistsError, match="already exists"):
        cluster_order(local, url, clusters=2)
    with pytest.raises(bigsearch.errors.StoreError, match="HDF5 files cannot be written to object storage"):
        cluster_order(local, url.replace(".zarr", ".h5"), clusters=2)


def test_storage_options_travel_to_the_workers(s3, client, data, url):
    """A store sent to a worker is opened there with the driver's storage options and
    cache settings (not the worker's defaults)."""
    X, y = data
    bigsearch.create_store(url, X, y, chunk_rows=100)
    options = {"endpoint": s3.endpoint, "access_key_id": "testing", "secret_access_key": "testing", "retries": "3"}
    store = open_store(url, {"storage_options": options, "cache_size": "1G"})
    seen = client.submit(lambda s: (s.storage_options, s._cache.limit, s.n), store).result()
    assert seen == (options, 2**30, len(X))
    search = bigsearch.LAS(store, backend=client, **LAS_OPTIONS)
    search.tell(first_positive(y), 1)
    assert 0 <= search.ask() < len(X)


def test_agr_anchors_of_an_s3_store_are_cached_locally(s3, data, tmp_path, url, monkeypatch):
    X, y = data
    bigsearch.create_store(url, X, y, chunk_rows=100)
    local = bigsearch.create_store(tmp_path / "s.zarr", X, y, chunk_rows=100)
    monkeypatch.chdir(tmp_path)
    queries = []
    for store in (url, local):
        search = bigsearch.AGR(store, anchors=8)
        search.tell(first_positive(y), 1)
        queries.append(run_queries(search, y, 4))
    assert queries[0] == queries[1]
    assert not (tmp_path / "s3:").exists()
    beside_the_chunk_cache = Path(os.environ["BIGSEARCH_CHUNK_CACHE"]).parent / "bigsearch-cache"
    assert len(list(beside_the_chunk_cache.glob("*.anchors-k8-*.npz"))) == 1


def test_a_session_on_s3_keeps_its_files_local_and_asks_what_a_local_one_asks(s3, data, tmp_path, url):
    X, y = data
    bigsearch.create_store(url, X, y, chunk_rows=64)
    local = bigsearch.create_store(tmp_path / "s.zarr", X, y, chunk_rows=64)
    first = first_positive(y)
    d = tmp_path / "session-s3"  # on s3 through the CLI; on local disk through the library (faster)
    assert run_cli("session", "new", url, d, "--alpha", 0.01, "--pi", repr(float(y.mean()))).returncode == 0
    assert run_cli("session", "label", d, first, 1).returncode == 0
    i = json.loads(run_cli("session", "next", d, "--json").stdout)[0]["index"]
    assert run_cli("session", "label", d, i, int(y[i])).returncode == 0
    shown = json.loads(run_cli("session", "next", d, "-k", 5, "--json").stdout)
    nexts = {"s3": [{k: v for k, v in c.items() if k != "record"} for c in shown]}  # the CLI adds the record
    with Session.create(local, tmp_path / "session-local", alpha=0.01) as s:
        s.tell(first, 1)
        assert s.candidates(1)[0]["index"] == i
        s.tell(i, int(y[i]))
        nexts["local"] = json.loads(json.dumps(s.candidates(5)))
    assert nexts["s3"] == nexts["local"]
    assert json.loads((tmp_path / "session-s3" / "session.json").read_text())["body"]["store"]["path"] == url
    # the labelling page over it, with the endpoint and credentials from --storage-option alone
    options = [f"endpoint={s3.endpoint}", "access_key_id=testing", "secret_access_key=testing", "region=us-east-1"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    serve = subprocess.Popen(
        [sys.executable, "-m", "bigsearch", "serve", tmp_path / "session-s3", "--port", "0", "--no-token"]
        + [a for o in options for a in ("--storage-option", o)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**env, **NO_METADATA},
    )
    try:
        line = serve.stdout.readline()
        assert " at http://" in line, line + serve.stderr.read()
        page = re.search(r"at (http://\S+)", line).group(1)
        state = json.loads(urllib.request.urlopen(f"{page}/api/state", timeout=60).read())
        assert state["item"]["index"] == nexts["local"][0]["index"]
    finally:
        serve.terminate()
        serve.wait(30)


def test_an_http_store_reads_like_the_local_one_through_the_cache(data, tmp_path):
    """https:// (here http:// on 127.0.0.1): read-only, no listing: each chunk's version comes
    from a HEAD the first time it is read."""
    import re
    import subprocess
    import sys

    X, y = data
    bigsearch.create_store(tmp_path / "www" / "s.zarr", X, y, chunk_rows=64)
    server = subprocess.Popen(
        [sys.executable, "-m", "http.server", "0", "--bind", "127.0.0.1"],
        cwd=tmp_path / "www",
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        port = re.search(r"port (\d+)", server.stdout.readline()).group(1)
        url = f"http://127.0.0.1:{port}/s.zarr"
        options = {"cache_dir": str(tmp_path / "cache")}
        for hits in (0, 10):
            with open_store(url, options) as s:
                np.testing.assert_array_equal(s.read_rows(np.arange(len(X))), X)
                assert s._cache.hits == hits
        on_http, on_disk = bigsearch.LAS(url, **LAS_OPTIONS), bigsearch.LAS(tmp_path / "www" / "s.zarr", **LAS_OPTIONS)
        for s in (on_http, on_disk):
            s.tell(first_positive(y), 1)
        assert run_queries(on_http, y, 5) == run_queries(on_disk, y, 5)
        with pytest.raises(bigsearch.errors.StoreError, match="read-only"):
            bigsearch.create_store(f"http://127.0.0.1:{port}/new.zarr", X, y)
    finally:
        server.terminate()
        server.wait()


class TestObjectStoreSuite(StoreFormatTests):
    """The store suite (bigsearch/testing/store_suite.py) on Zarr in the S3 server: a URL, not a
    local path (so not recognized by content); written in place, since an object store cannot
    swap a prefix atomically (bigsearch/storage/remote.py)."""

    fmt = ObjectZarrStore
    local_path = atomic_writes = False
    cached_decode = True  # chunks are fetched (and decoded) into the local chunk cache

    @pytest.fixture(autouse=True)
    def _server(self, s3):
        self.server = s3

    def path(self, tmp_path, name="s"):
        return f"s3://{BUCKET}/{tmp_path.name}/{name}.zarr"

    def make(self, tmp_path, X, y=None, ids=None, chunk_rows=None, name="s", **options):
        super().make(tmp_path, X, y, ids, chunk_rows, name, **options)
        return self.path(tmp_path, name)  # the URL (create_store returns it as a Path)

    def listing(self, tmp_path):
        found = self.server.client().list_objects_v2(Bucket=BUCKET, Prefix=f"{tmp_path.name}/")
        return sorted({o["Key"].split("/")[1] for o in found.get("Contents", [])})
