"""A session's labels written out: CSV, JSON or Parquet, one row per label in force.

Every format has the same columns, ``index``, ``id`` (the store's id, empty or null when
it has none), ``label`` and ``time`` (when the label was told, ISO 8601 UTC). A file
appears whole and never replaces one (``atomic_create``); ``-`` is stdout (not for
Parquet, which is binary). JSON is a list of objects (docs/schema/session-export.json).
"""

import contextlib
import csv
import json
import sys
from pathlib import Path

from ..errors import ParameterError, SessionExistsError
from ..storage.atomic import atomic_create

COLUMNS = ("index", "id", "label", "time")
EXPORT_FORMATS = ("csv", "json", "parquet", "ris", "records")  # the last two: export_records.py


def export_format(out, fmt=None):
    """``fmt`` when given, else the one ``out``'s suffix names, else CSV."""
    if fmt is None:
        suffix = Path(str(out)).suffix.lower().lstrip(".")
        fmt = suffix if suffix in EXPORT_FORMATS else "csv"
    if fmt not in EXPORT_FORMATS:
        raise ParameterError(f"unknown export format {fmt!r}; use {', '.join(EXPORT_FORMATS)}")
    return fmt


def write_labels(rows, out, fmt):
    """Write ``rows`` [(index, id, label, time)] to ``out`` (a path, ``-`` or an open text
    file) in format ``fmt``; returns the number of rows."""
    if fmt == "parquet":
        table = _arrow_table(rows)  # before a file is created: a missing pyarrow leaves none
        if out == "-" or hasattr(out, "write"):
            raise ParameterError("Parquet is binary: export it to a file, not to stdout")
        with _new_file(out, "wb") as fh:
            import pyarrow.parquet as pq

            pq.write_table(table, fh)
        return len(rows)
    write = _write_csv if fmt == "csv" else _write_json
    if out == "-":
        out = sys.stdout
    if hasattr(out, "write"):
        write(out, rows)
    else:
        with _new_file(out, "w", newline="") as fh:
            write(fh, rows)
    return len(rows)


@contextlib.contextmanager
def _new_file(path, mode, **kwargs):
    """``atomic_create`` with the session's message for an existing file."""
    try:
        with atomic_create(path, mode, **kwargs) as fh:
            yield fh
    except FileExistsError:
        raise SessionExistsError(f"{path} already exists; export to a new file (nothing was written)") from None


def _write_csv(fh, rows):
    writer = csv.writer(fh, lineterminator="\n")
    writer.writerow(COLUMNS)
    writer.writerows(rows)


def _write_json(fh, rows):
    json.dump([dict(zip(COLUMNS, (i, None if ident == "" else ident, y, t))) for i, ident, y, t in rows], fh)
    fh.write("\n")


def _arrow_table(rows):
    try:
        import pyarrow as pa
    except ImportError:
        raise ParameterError("Parquet export needs pyarrow: pip install 'bigsearch[ingest]'") from None
    columns = list(zip(*rows)) if rows else [[] for _ in COLUMNS]
    ids = [None if v == "" else v for v in columns[1]]
    labels = columns[2]
    label_type = pa.int8() if all(isinstance(v, int) for v in labels) else pa.float64()
    return pa.table(
        {
            "index": pa.array(columns[0], pa.int64()),
            "id": pa.array(ids),
            "label": pa.array(labels, label_type),
            "time": pa.array(columns[3], pa.string()),
        }
    )
