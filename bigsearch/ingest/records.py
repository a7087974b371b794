"""What a person needs to see a point, kept beside X (docs/store-format.md, "display").

The labelling page (`bigsearch serve`) shows one point at a time as its source had it,
read by id without touching X:

- ``fields``: the source record, one JSON object per row in the string array
  ``records`` (every column of a CSV / TSV / Parquet row by name, label included; a
  LIBSVM row's label and its nonzero features);
- ``image``: the pixels of inputs whose rows are images (IDX files, .npy arrays and
  HDF5 / Zarr datasets of 3 or more dimensions), in ``pixels`` (n x h*w(*c), the source
  dtype), with the shape in the ``display`` attribute.

Plain 2-D numeric arrays keep nothing: their rows are the features themselves. The rows
kept are exactly the rows written to X (after --prevalence subsampling).
"""

import json
import math

import numpy as np

from ..storage.format import DISPLAY_ATTR, PIXELS_NAME, RECORDS_NAME

RECORD_FORMATS = ("csv", "tsv", "parquet", "libsvm")
ROWS_PER_CHUNK_BYTES = 4 << 20


def display_keeper(readers, writer):
    """The keeper for these inputs (None when there is nothing to keep); its ``append``
    is called with every step of the writing pass."""
    first = readers[0]
    shapes = {tuple(getattr(r, "row_shape", ()) or ()) for r in readers}
    if len(shapes) == 1 and len(next(iter(shapes))) >= 2:
        return ImageKeeper(writer, next(iter(shapes)), np.result_type(*[r.dtype for r in readers]))
    if all(r.format in RECORD_FORMATS for r in readers):
        return FieldsKeeper(writer, [c.name for c in first.columns])
    return None


class ImageKeeper:
    def __init__(self, writer, shape, dtype):
        self.shape, self.dtype = [int(s) for s in shape], np.dtype(dtype).newbyteorder("=")
        width = math.prod(self.shape)
        rows = max(1, ROWS_PER_CHUNK_BYTES // (width * self.dtype.itemsize))
        self.array = writer.add_rows_array(PIXELS_NAME, (width,), self.dtype, rows)
        self.lo, self.hi = math.inf, -math.inf

    def append(self, step, keep=None):
        pixels = step.matrix if keep is None else step.matrix[keep]
        pixels = np.asarray(pixels, self.dtype)
        if len(pixels):
            self.lo, self.hi = min(self.lo, float(pixels.min())), max(self.hi, float(pixels.max()))
            self.array.append(pixels)

    def spec(self):
        value_range = [0, 255] if self.dtype == np.uint8 else [self.lo, self.hi]
        return {"kind": "image", "array": PIXELS_NAME, "shape": self.shape, "range": value_range}


class FieldsKeeper:
    def __init__(self, writer, names):
        self.names = names
        self.array = writer.add_rows_array(RECORDS_NAME, (), str, 4096)

    def append(self, step, keep=None):
        rows = _records(step, self.names)
        if keep is not None:
            rows = [r for r, k in zip(rows, keep) if k]
        if rows:
            self.array.append(np.array([json.dumps(r, allow_nan=False, default=str) for r in rows], dtype=object))

    def spec(self):
        return {"kind": "fields", "array": RECORDS_NAME, "fields": self.names}


def _records(step, names):
    """[{name: value}] for the rows of a block, as the source had them."""
    if step.table is not None:
        return [{k: _plain(v) for k, v in row.items()} for row in step.table.to_pylist()]
    matrix = step.matrix.tocsr() if hasattr(step.matrix, "tocsr") else None
    out = []
    for k in range(len(step)):
        row = {}
        if step.labels is not None:
            row["label"] = _plain(step.labels[k])
        if matrix is not None:
            a, b = matrix.indptr[k], matrix.indptr[k + 1]
            row.update({names[j]: _plain(v) for j, v in zip(matrix.indices[a:b], matrix.data[a:b])})
        else:
            row.update({name: _plain(v) for name, v in zip(names, step.matrix[k])})
        out.append(row)
    return out


def _plain(value):
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


def record_display(writer, keeper):
    """Set the store's ``display`` attribute (once every row is appended)."""
    if keeper is not None:
        writer.set_attrs(**{DISPLAY_ATTR: keeper.spec()})
