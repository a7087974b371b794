"""What the page shows of a point, read by id from the store without reading X.

Stores made by ``bigsearch ingest`` keep it (ingest/records.py; docs/store-format.md):
the source record's fields as one JSON object per row (``records``), or an image's
pixels (``pixels``, with its shape in the ``display`` attribute).

A record whose fields hold a title and/or an abstract is a *document*: the page shows
it as one is read (the title as a heading, the abstract in paragraphs, keywords, venue
and year). Which field plays which part: the display spec's ``document`` mapping when
the store has one (``{"title": COLUMN, "abstract": COLUMN, ...}``, written by the text
ingest), else the column names reviewers' files use (ingest/documents.py).
"""

import functools
import json
import threading
from collections import OrderedDict

import numpy as np

from ..errors import ParameterError
from ..ingest.documents import document_roles as roles_by_name
from ..storage.format import DISPLAY_ATTR


def display_spec(store):
    """The store's ``display`` attribute as a dict, or None."""
    spec = store.attrs.get(DISPLAY_ATTR)
    return json.loads(spec) if isinstance(spec, str) else spec


def label_fields(store):
    """The record fields that hold the store's labels: the label column ingest read
    (``featurization.label.column``), or ``label`` for labels read beside the features
    (LIBSVM). A person labelling must not see them: they are the answer."""
    featurization = store.attrs.get("featurization")
    if isinstance(featurization, str):
        featurization = json.loads(featurization)
    rule = (featurization or {}).get("label") or {}
    if rule.get("column") is not None:
        return {str(rule["column"])}
    return {"label"} if rule else set()


def hidden_fields(store, hide=()):
    """The fields the page leaves out: the label fields and the ``hide`` ones, which
    must be fields of the records."""
    spec = display_spec(store) or {}
    known = [str(f) for f in spec.get("fields") or []]
    unknown = [h for h in hide if h not in known]
    if unknown:
        shown = ", ".join(known) if known else "none: this store keeps no records"
        raise ParameterError(f"hide: no field {', '.join(map(repr, unknown))} in the store's records "
                             f"(its fields: {shown})")
    return label_fields(store) | set(hide)


def read_display(store, index, hidden=frozenset()):
    """{"kind": "fields", "fields": {name: value}} (without the ``hidden`` ones; with
    "document": {role: field} when they make a document, ``document_roles``) or
    {"kind": "image", "shape": [h, w(, c)], "pixels": [...], "range": [lo, hi]} for point
    ``index``, or None when the store keeps nothing to show."""
    return read_displays(store, [index], hidden)[0]


def read_displays(store, indices, hidden=frozenset()):
    """``read_display`` of each of ``indices`` (in their order), read in one go."""
    spec = display_spec(store)
    if not spec or not len(indices):
        return [None] * len(indices)
    rows = np.unique(np.asarray(indices, np.int64))
    values = store.read_per_row(spec["array"], rows)
    if values is None:
        return [None] * len(indices)
    at = {int(i): k for k, i in enumerate(rows)}
    return [_display(spec, values[at[int(i)]], hidden) for i in indices]


def _display(spec, value, hidden):
    if spec["kind"] == "fields":
        fields = json.loads(value.decode() if isinstance(value, bytes) else str(value))
        out = {"kind": "fields", "fields": {k: v for k, v in fields.items() if k not in hidden}}
        roles = document_roles(spec, out["fields"])
        if roles:
            out["document"] = roles
        return out
    pixels = np.asarray(value).reshape(-1)
    return {"kind": "image", "shape": list(spec["shape"]), "pixels": pixels.tolist(),
            "range": spec.get("range") or [float(pixels.min()), float(pixels.max())]}


# The parts of a document the page shows, and the role of ingest/documents.py that each is
# (the one list of the column names reviewers' files use: document_roles).
PARTS = {"title": "title", "abstract": "abstract", "keywords": "keywords", "year": "year", "venue": "journal",
         "authors": "authors", "doi": "doi"}


def document_roles(spec, fields):
    """{part: field} for the parts of a document (PARTS) among ``fields`` (the record's
    shown fields), or None when there is neither a title nor an abstract. The display
    spec's ``document`` mapping is used when present (its fields that are shown; "journal"
    is read as "venue"), else the column names ``ingest.documents.document_roles`` knows."""
    explicit = spec.get("document")
    if isinstance(explicit, dict):
        named = {("venue" if part == "journal" else part): name for part, name in explicit.items()}
        roles = {part: name for part, name in named.items() if part in PARTS and name in fields}
    else:
        roles = _roles_by_name(tuple(fields))
    return roles if "title" in roles or "abstract" in roles else None


@functools.lru_cache(maxsize=64)
def _roles_by_name(names):
    by_role = roles_by_name(names)
    return {part: by_role[role] for part, role in PARTS.items() if role in by_role}


SUMMARY_CHARS = 160
THUMBNAIL_VALUES = 1024      # an image this small (28 x 28 or less) is sent whole as its own summary


def summary(display):
    """A line to recognize a point by in a list: {"text"} (a document's title, else the
    start of its abstract; a record's first fields), {"image"} (a small image itself) or
    None (nothing to show)."""
    if display is None:
        return None
    if display["kind"] == "image":
        return {"image": display} if len(display["pixels"]) <= THUMBNAIL_VALUES else None
    fields, roles = display["fields"], display.get("document") or {}
    for role in ("title", "abstract"):
        text = _text(fields.get(roles.get(role)))
        if text:
            return {"text": _clip(text)}
    parts = [f"{name} {_text(value)}" for name, value in fields.items() if _text(value)]
    return {"text": _clip(" · ".join(parts))} if parts else None


def _text(value):
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return " ".join(str(value).split())


def _clip(text):
    return text if len(text) <= SUMMARY_CHARS else text[: SUMMARY_CHARS - 1].rstrip() + "\u2026"


class Summaries:
    """The summaries of the points the page lists (recent decisions, why-this-point's
    records), kept for the newest ``size`` points: a record never changes, and most were
    on show once (``keep``), so listing them reads nothing."""

    def __init__(self, store, hidden, size=4096):
        self.store, self.hidden, self.size = store, hidden, size
        self._kept = OrderedDict()
        self._lock = threading.Lock()      # the page's requests and its thread computing ahead

    def keep(self, index, display):
        with self._lock:
            self._keep(int(index), summary(display))

    def _keep(self, index, value):
        self._kept[index] = value
        self._kept.move_to_end(index)
        while len(self._kept) > self.size:
            self._kept.popitem(last=False)

    def of(self, indices):
        """The summaries of ``indices`` (those not kept are read in one go)."""
        with self._lock:
            missing = sorted({int(i) for i in indices if int(i) not in self._kept})
        read = dict(zip(missing, read_displays(self.store, missing, self.hidden))) if missing else {}
        with self._lock:
            for i, display in read.items():
                self._keep(i, summary(display))
            return [self._kept[int(i)] if int(i) in self._kept else summary(read.get(int(i))) for i in indices]
