"""What the page shows of a point, read by id from the store without reading X.

Stores made by ``bigsearch ingest`` keep it (ingest/records.py; docs/store-format.md):
the source record's fields as one JSON object per row (``records``), or an image's
pixels (``pixels``, with its shape in the ``display`` attribute).
"""

import json

import numpy as np

from ..storage.format import DISPLAY_ATTR


def display_spec(store):
    """The store's ``display`` attribute as a dict, or None."""
    spec = store.attrs.get(DISPLAY_ATTR)
    return json.loads(spec) if isinstance(spec, str) else spec


def read_display(store, index):
    """{"kind": "fields", "fields": {name: value}} or {"kind": "image", "shape": [h, w(, c)],
    "pixels": [...], "range": [lo, hi]} for point ``index``, or None when the store keeps
    nothing to show."""
    spec = display_spec(store)
    if not spec:
        return None
    values = store.read_per_row(spec["array"], np.array([index], np.int64))
    if values is None:
        return None
    if spec["kind"] == "fields":
        text = values[0]
        return {"kind": "fields", "fields": json.loads(text.decode() if isinstance(text, bytes) else str(text))}
    pixels = np.asarray(values[0]).reshape(-1)
    return {"kind": "image", "shape": list(spec["shape"]), "pixels": pixels.tolist(),
            "range": spec.get("range") or [float(pixels.min()), float(pixels.max())]}
