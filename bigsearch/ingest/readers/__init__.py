"""Readers, one per input format, and the detection of an input's format.

The format comes from --format, else from the file's first bytes (HDF5, NumPy, Parquet
and IDX signatures, looked for through gzip), else from its name (.csv, .tsv, .svm,
...), else from its text (``label index:value`` tokens are LIBSVM, anything else
delimited is CSV).
"""

import os
import re
from pathlib import Path

from ...errors import InputError
from .arrays import ArrayReader, ParquetReader
from .base import Block, Column, Reader, open_binary
from .binary import IDX_TYPES, IdxReader, NpyReader
from .csv import CsvReader
from .libsvm import LibsvmReader

FORMATS = ("csv", "tsv", "libsvm", "npy", "hdf5", "zarr", "idx", "parquet")
SUFFIXES = {".csv": "csv", ".tsv": "tsv", ".tab": "tsv", ".svm": "libsvm", ".libsvm": "libsvm",
            ".svmlight": "libsvm", ".npy": "npy", ".h5": "hdf5", ".hdf5": "hdf5", ".hdf": "hdf5",
            ".zarr": "zarr", ".parquet": "parquet", ".pq": "parquet", ".idx": "idx"}
LIBSVM_TOKEN = re.compile(rb"^(qid:\S+|\d+:\S+)$")

__all__ = ["FORMATS", "Block", "Column", "Reader", "detect_format", "open_reader"]


def open_reader(path, fmt=None, *, delimiter=None, header=None, dataset=None, n_features=None):
    """A reader for one input file (format given or detected)."""
    path = str(path)
    _check_readable(path)
    fmt = fmt or detect_format(path)
    if fmt in ("csv", "tsv"):
        return CsvReader(path, delimiter=delimiter, header=header, fmt=fmt)
    if fmt == "libsvm":
        return LibsvmReader(path, n_features=n_features)
    if fmt == "npy":
        return NpyReader(path)
    if fmt == "idx":
        return IdxReader(path)
    if fmt in ("hdf5", "zarr"):
        return ArrayReader(path, fmt, dataset)
    if fmt == "parquet":
        return ParquetReader(path)
    raise InputError(f"{path}: unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")


def _check_readable(path):
    if not os.path.exists(path):
        raise InputError(f"{path}: no such file")
    if os.path.isdir(path):
        if not any(os.path.exists(os.path.join(path, m)) for m in ("zarr.json", ".zgroup", ".zarray")):
            raise InputError(f"{path}: a directory, and not a Zarr store")
        return
    try:
        with open(path, "rb"):
            pass
    except OSError as e:
        raise InputError(f"{path}: cannot be read ({e.strerror})") from None


def detect_format(path):
    if os.path.isdir(path):
        return "zarr"
    head = _head(path)
    if head.startswith(b"\x89HDF\r\n\x1a\n"):
        return "hdf5"
    if head.startswith(b"\x93NUMPY"):
        return "npy"
    if head.startswith(b"PAR1"):
        return "parquet"
    if len(head) >= 4 and head[:2] == b"\0\0" and head[2] in IDX_TYPES and 1 <= head[3] <= 4:
        return "idx"
    name = Path(path).name.lower().removesuffix(".gz")
    suffix = Path(name).suffix
    if suffix in SUFFIXES:
        return SUFFIXES[suffix]
    if "-ubyte" in name:
        return "idx"
    return _sniff_text(path, head)


def _head(path, size=1 << 16):
    stream, raw = open_binary(path)
    try:
        return stream.read(size)
    except (EOFError, OSError):
        return b""
    finally:
        raw.close()


def _sniff_text(path, head):
    if not head:
        raise InputError(f"{path}: empty file")
    if b"\0" in head:
        raise InputError(f"{path}: cannot tell the format of this binary file; give --format "
                         f"({'|'.join(FORMATS)})")
    complete = head.splitlines()[:-1] or head.splitlines()   # the last line may be cut
    lines = [ln for ln in complete if ln.strip() and not ln.startswith((b"#", b"|"))]
    if not lines:
        raise InputError(f"{path}: no data lines; give --format ({'|'.join(FORMATS)})")
    tokens = lines[0].split(b"#", 1)[0].split()
    if len(tokens) >= 2 and all(LIBSVM_TOKEN.match(t) for t in tokens[1:]):
        return "libsvm"
    return "tsv" if b"\t" in lines[0] else "csv"
