"""Readers, one per input format, and the detection of an input's format.

The format comes from --format, else from the file's first bytes (HDF5, NumPy, Parquet
and IDX signatures and ARFF's @relation, looked for through gzip), else from its name (.csv, .tsv, .svm,
...), else from its text (``label index:value`` tokens are LIBSVM, anything else
delimited is CSV).
"""

import os
import re
from pathlib import Path

from ...errors import InputError
from .arff import ArffReader
from .arrays import HDF5Reader, ParquetReader, ZarrReader
from .base import Block, Column, Reader, open_binary
from .binary import IdxReader, NpyReader
from .csv import CsvReader
from .excel import ExcelReader
from .libsvm import LibsvmReader
from .ris import RisReader

LIBSVM_TOKEN = re.compile(rb"^(qid:\S+|\d+:\S+)$")
READERS = {}    # format name -> reader class, in the order messages list them

__all__ = ["FORMATS", "READERS", "Block", "Column", "Reader", "detect_format", "open_reader",
           "register_reader"]


def register_reader(cls):
    """Make ``cls`` (a Reader subclass) read the formats it declares in ``cls.formats``."""
    for fmt in cls.formats:
        READERS[fmt] = cls
    return cls


for _reader in (CsvReader, LibsvmReader, NpyReader, HDF5Reader, ZarrReader, IdxReader, ParquetReader, ArffReader,
                RisReader, ExcelReader):
    register_reader(_reader)
FORMATS = tuple(READERS)


def open_reader(path, fmt=None, options=None):
    """A reader for one input file (format given or detected), configured by ``options``
    (a SourceOptions; the defaults when None). ingest/options.py validates formats against
    READERS, so the readers never import it (no cycle)."""
    path = str(path)
    _check_readable(path)
    fmt = fmt or detect_format(path)
    if fmt not in READERS:
        raise InputError(f"{path}: unknown format {fmt!r}; choose one of {', '.join(READERS)}")
    return READERS[fmt].open(path, fmt, options)


def _reader_classes():
    return list(dict.fromkeys(READERS.values()))


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
    name = Path(path).name.lower().removesuffix(".gz")
    classes = _reader_classes()
    found = (next((fmt for cls in classes if (fmt := cls.format_of_head(head))), None)
             or next((fmt for cls in classes if (fmt := cls.format_of_name(name))), None))
    return found or _sniff_text(path, head)


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
        raise InputError(f"{path}: cannot tell the format of this binary file; give source.format "
                         f"({'|'.join(READERS)})")
    complete = head.splitlines()[:-1] or head.splitlines()   # the last line may be cut
    lines = [ln for ln in complete if ln.strip() and not ln.startswith((b"#", b"|"))]
    if not lines:
        raise InputError(f"{path}: no data lines; give source.format ({'|'.join(READERS)})")
    tokens = lines[0].split(b"#", 1)[0].split()
    if len(tokens) >= 2 and all(LIBSVM_TOKEN.match(t) for t in tokens[1:]):
        return "libsvm"
    return "tsv" if b"\t" in lines[0] else "csv"
