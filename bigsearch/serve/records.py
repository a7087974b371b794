"""What the page shows of a point, read by id from the store without reading X.

Stores made by ``bigsearch ingest`` keep it (ingest/records.py; docs/store-format.md):
the source record's fields as one JSON object per row (``records``), or an image's
pixels (``pixels``, with its shape in the ``display`` attribute).
"""

import json

import numpy as np

from ..errors import ParameterError
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
    """{"kind": "fields", "fields": {name: value}} (without the ``hidden`` ones) or
    {"kind": "image", "shape": [h, w(, c)], "pixels": [...], "range": [lo, hi]} for point
    ``index``, or None when the store keeps nothing to show."""
    spec = display_spec(store)
    if not spec:
        return None
    values = store.read_per_row(spec["array"], np.array([index], np.int64))
    if values is None:
        return None
    if spec["kind"] == "fields":
        text = values[0]
        fields = json.loads(text.decode() if isinstance(text, bytes) else str(text))
        return {"kind": "fields", "fields": {k: v for k, v in fields.items() if k not in hidden}}
    pixels = np.asarray(values[0]).reshape(-1)
    return {"kind": "image", "shape": list(spec["shape"]), "pixels": pixels.tolist(),
            "range": spec.get("range") or [float(pixels.min()), float(pixels.max())]}
