"""A session's decisions written into the records they are about: the reviewer's file back.

``ris``: every record of the store as a RIS entry with the decision in a note, the
convention ASReview uses (``asreview/data/ris.py``), so ASReview and a reference manager read
it back: ``N1  - ASReview_relevant`` (label 1), ``ASReview_irrelevant`` (0), or
``ASReview_not_seen`` (no label), put first among the entry's notes. A store ingested
from RIS gives back each entry as rispy read it (ingest/readers/ris.py: ``entry_of``);
another store's records become entries through their document roles (title, abstract,
authors, ...: ingest/documents.py), the other columns left out.

``records``: CSV, the source's columns in its order and ``label_included`` (1, 0, a graded
label as given, or empty when unlabeled); a source column of that name keeps its value
where the session has no label. Numbers are written as the store kept them (whole numbers
without ``.0``).

Both stream the store's ``records`` a batch at a time, in the store's row order (which is
the file's unless ingest subsampled or reordered the rows), so memory stays bounded.
"""

import contextlib
import csv
import json
import sys

import numpy as np

from ..errors import ParameterError, SessionExistsError
from ..ingest.documents import document_roles
from ..storage.atomic import atomic_create
from ..storage.format import DISPLAY_ATTR, RECORDS_NAME

RECORD_EXPORTS = ("ris", "records")
LABEL_COLUMN = "label_included"
NOTES = {1: "ASReview_relevant", 0: "ASReview_irrelevant", None: "ASReview_not_seen"}
BATCH_ROWS = 4096
# a non-RIS record's roles as RIS tags (rispy's names); authors and keywords split at ';'
ROLE_KEYS = {
    "type": "type_of_reference",
    "title": "title",
    "authors": "authors",
    "year": "year",
    "journal": "secondary_title",
    "abstract": "abstract",
    "keywords": "keywords",
    "doi": "doi",
}


def write_records(store, labels, out, fmt):
    """Write every record of ``store`` with its label from ``labels`` [(index, label)] as
    ``fmt`` (ris or records) to a new file ``out``, ``-`` (stdout) or an open text file;
    returns the number of records."""
    fields = _fields(store)
    decided = {int(i): y for i, y in labels}
    if fmt == "ris":
        rispy = _rispy()
        graded = next(((i, y) for i, y in decided.items() if y not in (0, 1)), None)
        if graded is not None:
            raise ParameterError(
                f"point {graded[0]}'s label {graded[1]} is graded: a RIS note says relevant or "
                "irrelevant; export the records as CSV (format records) to keep it"
            )
        write = _ris_writer(rispy, store, fields)
    elif fmt == "records":
        write = _csv_writer(fields)
    else:
        raise ParameterError(f"unknown records export format {fmt!r}; use {', '.join(RECORD_EXPORTS)}")
    if out == "-":
        out = sys.stdout
    if hasattr(out, "write"):
        return write(out, _records(store, decided))
    with _new_file(out) as fh:
        return write(fh, _records(store, decided))


def _rispy():
    try:
        import rispy
    except ImportError:
        raise ParameterError("RIS export needs rispy: pip install 'bigsearch[ingest]'") from None
    return rispy


def _fields(store):
    spec = store.attrs.get(DISPLAY_ATTR)
    spec = json.loads(spec) if isinstance(spec, str) else spec
    if not spec or spec.get("kind") != "fields":
        raise ParameterError(
            f"{store.path} keeps no records to export (it was not ingested from a file of records: "
            "RIS, CSV, TSV, Excel or Parquet); export the labels (format csv) instead"
        )
    return [str(f) for f in spec["fields"]]


def _records(store, decided):
    """(fields of the record as a dict, its label or None) for every row, in order."""
    for a in range(0, store.n, BATCH_ROWS):
        texts = store.read_per_row(RECORDS_NAME, slice(a, min(store.n, a + BATCH_ROWS)))
        for k, text in enumerate(texts):
            text = text.decode() if isinstance(text, bytes) else str(text)
            yield json.loads(text), decided.get(a + k)


@contextlib.contextmanager
def _new_file(path):
    try:
        with atomic_create(path, "w", newline="", encoding="utf-8") as fh:
            yield fh
    except FileExistsError:
        raise SessionExistsError(f"{path} already exists; export to a new file (nothing was written)") from None


# -- RIS ------------------------------------------------------------------------------------
def _ris_writer(rispy, store, fields):
    from ..ingest.readers.ris import entry_of

    class Writer(rispy.RisWriter):
        def set_header(self, count):
            return ""  # rispy numbers the entries ("1."): reference managers need no numbers

    writer = Writer(enforce_list_tags=False)
    from_ris = _sources_are_ris(store)
    roles = {} if from_ris else document_roles(fields)
    types = set(rispy.TYPE_OF_REFERENCE_MAPPING)

    def write(fh, records):
        n, batch = 0, []
        for record, label in records:
            entry = entry_of(record) if from_ris else _entry_from_roles(record, roles, types)
            batch.append(_with_decision(entry, label))
            if len(batch) == BATCH_ROWS:
                fh.write(("\n" if n else "") + writer.formats(batch))
                n, batch = n + len(batch), []
        if batch:
            fh.write(("\n" if n else "") + writer.formats(batch))
        return n + len(batch)

    return write


def _sources_are_ris(store):
    provenance = store.attrs.get("provenance") or {}
    provenance = json.loads(provenance) if isinstance(provenance, str) else provenance
    sources = provenance.get("sources") or []
    return bool(sources) and all(s.get("format") == "ris" for s in sources)


def _with_decision(entry, label):
    """The entry with the decision first among its notes; an ASReview decision already
    there is replaced, or kept when the session has no label for it."""
    notes = list(entry.get("notes") or [])
    earlier = [note for note in notes if note in NOTES.values()]
    if label is None and earlier:
        return entry
    rest = [note for note in notes if note not in NOTES.values()]
    return {**entry, "notes": [NOTES[None if label is None else int(label)], *rest]}


def _entry_from_roles(record, roles, types):
    entry = {}
    for role, key in ROLE_KEYS.items():
        value = record.get(roles[role]) if role in roles else None
        if value is None or value == "":
            continue
        text = _text(value)
        entry[key] = [v.strip() for v in text.split(";") if v.strip()] if key in ("authors", "keywords") else text
    if entry.get("type_of_reference", "").upper() not in types:
        entry.pop("type_of_reference", None)  # a name ("Article"), not a RIS type: rispy writes JOUR
    return entry


# -- CSV ------------------------------------------------------------------------------------
def _csv_writer(fields):
    columns = fields if LABEL_COLUMN in fields else [*fields, LABEL_COLUMN]

    def write(fh, records):
        out = csv.writer(fh, lineterminator="\n")
        out.writerow(columns)
        n = 0
        for record, label in records:
            row = {name: _text(record.get(name)) for name in fields}
            if label is not None or LABEL_COLUMN not in fields:
                row[LABEL_COLUMN] = "" if label is None else _text(label)
            out.writerow([row[c] for c in columns])
            n += 1
        return n

    return write


def _text(value):
    """A record's value as text: '' for null, whole numbers without '.0'."""
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, (np.generic,)):
        return _text(value.item())
    if isinstance(value, (list, dict)):
        return json.dumps(value)
    return str(value)
