"""The cluster path is authenticated: `--cluster local:N` speaks TLS with credentials made
for it alone, and `--scheduler` reaches a TLS cluster with the CA, certificate and key
given (real LocalClusters with worker processes, the real CLI in a subprocess)."""

import gc
import logging

import pytest
from distributed import Client, LocalCluster
from distributed.security import Security

import bigsearch
from bigsearch.backends.distributed import connect
from bigsearch.testing import clustered_points

from conftest import run_cli


def test_a_local_cluster_speaks_tls_and_refuses_strangers():
    with connect(local_workers=2) as backend:
        address = backend.client.scheduler.address
        assert address.startswith("tls://127.0.0.1:")
        assert all(w.startswith("tls://") for w in backend.client.scheduler_info()["workers"])
        assert backend.client.submit(sum, [1, 2]).result() == 3
        registered = _clients_of(backend.client)
        strangers = ((address, dict()),                                   # no credentials: no TLS context
                     (address, dict(security=Security.temporary())),      # credentials of another CA
                     (address.replace("tls://", "tcp://"), dict()))       # plain TCP to the TLS port
        for stranger, credentials in strangers:
            # how the refusal surfaces depends on timing (a handshake error, a timeout, a closed
            # comm, an assertion inside distributed when the comm dies mid-read): what must hold
            # is that the attempt fails and the scheduler never registers the stranger
            with pytest.raises(Exception):
                Client(stranger, timeout=5, **credentials)
            # the failed Client, kept alive by its exception's traceback, is collected here: the
            # collector running it inside the next Client's start deadlocked distributed's loop
            # runner (its __del__ closes, and the start holds the lock close waits for)
            gc.collect()
        assert _clients_of(backend.client) == registered


def _clients_of(client):
    return client.run_on_scheduler(lambda dask_scheduler: sorted(dask_scheduler.clients))


@pytest.fixture(scope="module")
def tls_cluster(tmp_path_factory):
    """A LocalCluster over TLS whose CA, certificate and key are PEM files on disk."""
    security = Security.temporary()
    files = tmp_path_factory.mktemp("tls")
    for name, pem in (("ca.pem", security.tls_ca_file), ("cert.pem", security.tls_client_cert),
                      ("key.pem", security.tls_client_key)):
        (files / name).write_text(pem)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None, silence_logs=logging.ERROR, security=security) as cluster:
        yield cluster.scheduler_address, files


def test_run_on_a_tls_scheduler_with_its_credentials(tls_cluster, tmp_path):
    address, files = tls_cluster
    X, y = clustered_points(60, 5, prevalence=0.2, seed=1, spread=0.8)
    store = bigsearch.create_store(tmp_path / "s.zarr", X, y, chunk_rows=7)
    tls = ["--tls-ca-file", files / "ca.pem", "--tls-cert", files / "cert.pem", "--tls-key", files / "key.pem"]
    local = run_cli("run", store, "--budget", 4, "--out", tmp_path / "local", "-q", "--no-plots")
    remote = run_cli("run", store, "--budget", 4, "--out", tmp_path / "remote", "-q", "--no-plots",
                     "--scheduler", address, *tls)
    assert local.returncode == 0 and remote.returncode == 0, remote.stderr
    import json
    queries = [json.loads((tmp_path / d / "results.json").read_text())["runs"][0]["queries"]
               for d in ("local", "remote")]
    assert queries[0] == queries[1]


@pytest.mark.parametrize("options, message", [
    ([], "speaks TLS"),
    (["--tls-ca-file", "ca.pem"], "needs --tls-cert"),
    (["--tls-ca-file", "missing.pem", "--tls-cert", "cert.pem"], "no such file"),
])
def test_a_tls_scheduler_without_credentials_is_a_one_line_error(tls_cluster, tmp_path, options, message):
    address, files = tls_cluster
    X, y = clustered_points(30, 3, prevalence=0.2, seed=1, spread=0.8)
    store = bigsearch.create_store(tmp_path / "s.zarr", X, y)
    done = run_cli("run", store, "--budget", 2, "--out", tmp_path / "o", "--scheduler", address, *options,
                   cwd=files)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and lines[0].startswith("Error:"), done.stderr
    assert message in lines[0]


def test_tls_files_are_for_a_scheduler_only(tmp_path):
    X, y = clustered_points(30, 3, prevalence=0.2, seed=1, spread=0.8)
    store = bigsearch.create_store(tmp_path / "s.zarr", X, y)
    (tmp_path / "ca.pem").write_text("x")
    done = run_cli("run", store, "--budget", 2, "--out", tmp_path / "o", "--cluster", "local:1",
                   "--tls-ca-file", tmp_path / "ca.pem")
    assert done.returncode == 2 and "for --scheduler" in done.stderr


def test_tls_files_for_a_plain_tcp_scheduler_are_a_one_line_error(tls_cluster, tmp_path):
    """Credentials mean "authenticate the scheduler": a tcp:// address cannot, and is refused
    before anything is sent (dask checks the scheme first, so no cluster is needed)."""
    _, files = tls_cluster
    X, y = clustered_points(30, 3, prevalence=0.2, seed=1, spread=0.8)
    store = bigsearch.create_store(tmp_path / "s.zarr", X, y)
    done = run_cli("run", store, "--budget", 2, "--out", tmp_path / "o", "--scheduler", "tcp://127.0.0.1:9",
                   "--tls-ca-file", files / "ca.pem", "--tls-cert", files / "cert.pem", "--tls-key", files / "key.pem")
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and lines[0].startswith("Error:"), done.stderr
    assert "tls://" in lines[0] and not (tmp_path / "o").exists()
