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
from collections import deque
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ..storage.format import DISPLAY_ATTR, PIXELS_NAME, RECORDS_NAME
from .documents import document_roles

RECORD_FORMATS = ("csv", "tsv", "parquet", "libsvm", "ris", "xlsx")
ROWS_PER_CHUNK_BYTES = 4 << 20
RECORD_BLOCKS_AHEAD = 2     # blocks whose records may still be in the making: bounded memory
RECORD_CHUNK_ROWS = 4096    # records per chunk, fewer for long records (documents: _record_chunk_rows)


def display_keeper(readers, writer):
    """The keeper for these inputs (None when there is nothing to keep); its ``append``
    is called with every step of the writing pass."""
    first = readers[0]
    shapes = {tuple(getattr(r, "row_shape", ()) or ()) for r in readers}
    if len(shapes) == 1 and len(next(iter(shapes))) >= 2:
        return ImageKeeper(writer, next(iter(shapes)), np.result_type(*[r.dtype for r in readers]))
    if all(r.format in RECORD_FORMATS for r in readers):
        # a RIS record has few of the file's tags: its record leaves out those it lacks
        return FieldsKeeper(writer, [c.name for c in first.columns], skip_nulls=first.format == "ris",
                            chunk_rows=_record_chunk_rows(readers))
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
    """The records of a CSV / TSV / Parquet / LIBSVM input. A block's JSON is made on a
    thread of its own (pyarrow's kernels release Python's lock) while the pass goes on with
    the next blocks; the blocks are written in order, at most RECORD_BLOCKS_AHEAD behind."""

    def __init__(self, writer, names, skip_nulls=False, chunk_rows=RECORD_CHUNK_ROWS):
        self.names, self.skip_nulls = names, skip_nulls
        self.array = writer.add_rows_array(RECORDS_NAME, (), str, chunk_rows)
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="records")
        self._made = deque()

    def append(self, step, keep=None):
        self._made.append(self._pool.submit(record_texts, step, self.names, keep, self.skip_nulls))
        self._write_made(RECORD_BLOCKS_AHEAD)

    def spec(self):
        """The display spec, once every row is appended: the blocks still being made are written first."""
        self._write_made(0)
        self._pool.shutdown()
        spec = {"kind": "fields", "array": RECORDS_NAME, "fields": self.names}
        roles = document_roles(self.names)
        if "title" in roles or "abstract" in roles:       # a document: the page shows it as one
            spec["document"] = {role: name for role, name in roles.items() if role != "label"}
        return spec

    def _write_made(self, behind):
        """Write the made blocks in order, waiting until at most ``behind`` are unwritten."""
        while self._made and (self._made[0].done() or len(self._made) > behind):
            texts = self._made.popleft().result()
            if len(texts):
                self.array.append(texts)


def _record_chunk_rows(readers):
    """Records per chunk of the ``records`` array: 4096, or as many as make about 4 MiB of
    input when rows are longer (abstracts: 2 to 6 kB a record), since a chunk's records are
    held, joined and encoded at once (with 4096 records of 3 kB, 100 MB more at the peak)."""
    rows = [r.estimated_rows() for r in readers]
    if not all(rows) or not sum(rows):
        return RECORD_CHUNK_ROWS
    row_bytes = sum(r.size for r in readers) / sum(rows)
    return int(max(256, min(RECORD_CHUNK_ROWS, ROWS_PER_CHUNK_BYTES // max(1, row_bytes))))


def record_texts(step, names, keep=None, skip_nulls=False):
    """The JSON text of each row of a block kept (``keep``: a mask, or None for all);
    ``skip_nulls``: a table's null values are left out of their row's object."""
    if step.table is not None:
        texts = table_json(step.table, skip_nulls)
    else:
        texts = np.array([json.dumps(r, allow_nan=False, default=str) for r in _records(step, names)], dtype=object)
    return texts if keep is None else texts[np.asarray(keep, bool)]


def table_json(table, skip_nulls=False):
    """Each row of a pyarrow RecordBatch as the text of a JSON object {column: value} (the
    values ``json.dumps`` writes; floats in pyarrow's shortest form), made by pyarrow's
    compute kernels a column at a time: a Python object and ``json.dumps`` for every value
    cost 34 us a row of 29 numbers, 20x the CSV's parsing; this about 3.5 us. Non-finite
    floats are the strings "nan", "inf", "-inf"; nulls null (or left out, ``skip_nulls``); a
    column of another type (dates, lists...) or of strings with control characters goes
    through ``json.dumps``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if skip_nulls:      # each field ', "name": value' or '' (null), joined, the first ', ' cut
        pairs = [pc.fill_null(pc.binary_join_element_wise(", " + json.dumps(name) + ": ",
                                                          _json_values(column, pa, pc, null=None), ""), "")
                 for name, column in zip(table.schema.names, table.columns)]
        if not pairs:
            return np.array(["{}"] * table.num_rows, dtype=object)
        joined = pc.utf8_slice_codeunits(pc.binary_join_element_wise(*pairs, ""), 2)
        return pc.binary_join_element_wise("{", joined, "}", "").to_numpy(zero_copy_only=False)
    parts = []
    for j, (name, column) in enumerate(zip(table.schema.names, table.columns)):
        parts += [("{" if j == 0 else ", ") + json.dumps(name) + ": ", _json_values(column, pa, pc)]
    if not parts:
        return np.array(["{}"] * table.num_rows, dtype=object)
    joined = pc.binary_join_element_wise(*parts, "}", "")
    return joined.to_numpy(zero_copy_only=False)


def _json_values(column, pa, pc, null="null"):
    """A pyarrow string array: each value of ``column`` as JSON text (a null as ``null``
    says: JSON's null, or None to keep it null)."""
    kind = column.type
    if pa.types.is_floating(kind):
        text = pc.cast(column, pa.string())
        # pyarrow prints 1.0 as "1": ".0" where a whole float printed without an exponent,
        # as Python's repr does (a keyword search reads "1.0")
        text = _edited(text, pc.equal(pc.trunc(column), column), pc,
                       lambda t: pc.if_else(pc.match_substring_regex(t, r"^-?[0-9]+$"),
                                            pc.binary_join_element_wise(t, ".0", ""), t))
        text = _edited(text, pc.invert(pc.is_finite(column)), pc, lambda t: _quoted(t, pc))
    elif pa.types.is_integer(kind) or pa.types.is_boolean(kind):
        text = pc.cast(column, pa.string())
    elif (pa.types.is_string(kind) or pa.types.is_large_string(kind)) and not pc.any(
        pc.match_substring_regex(column, "[\\x00-\\x1f]")  # control characters: json.dumps below
    ).as_py():
        text = pc.cast(column, pa.string())  # a block's strings: well under 2 GB
        for special in ("\\", '"'):  # backslashes first (SMILES have them), then quotes
            text = pc.replace_substring(text, special, "\\" + special)
        text = _quoted(text, pc)
    else:
        return pa.array([None if v is None and null is None else json.dumps(_plain(v), allow_nan=False, default=str)
                         for v in column.to_pylist()], pa.string())
    return pc.fill_null(text, null) if column.null_count and null is not None else text


def _quoted(text, pc):
    return pc.binary_join_element_wise('"', text, '"', "")


def _edited(text, where, pc, edit):
    """``text`` with edit(its values where ``where`` is true) in their place: the edit runs
    on those values only (few: whole or non-finite floats), or not at all."""
    where = pc.fill_null(where, False)
    if not pc.any(where).as_py():
        return text
    return pc.replace_with_mask(text, where, edit(pc.filter(text, where)))


def _records(step, names):
    """[{name: value}] for the rows of a block of a matrix (LIBSVM, arrays), as the source had them."""
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
