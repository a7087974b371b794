"""The feature store format: names, attributes and the checks every store passes.

A store is a Zarr v3 group (a directory) or an HDF5 file holding

- ``X``: n x r, float32 or float64, chunked along rows only (whole rows per chunk);
  or an encoded X (float16; int8 or packed bits with ``X_scale``, see encoding.py);
- ``y`` (optional): n labels, int8: 1 positive, 0 negative, -1 unknown;
- ``ids`` (optional): n identifiers (integers or strings), e.g. original row numbers;

and attributes on the group / file root: ``bigsearch_format`` (format version, an
int; missing means 1), ``provenance`` and ``featurization`` (free-form JSON).
See docs/store-format.md.
"""

import numpy as np

from ..errors import StoreError

FORMAT_VERSION = 2          # 2: encoded X (float16, int8, binary); plain float stores are still written as 1
FORMAT_ATTR = "bigsearch_format"
SUMMARIES_GROUP = "block_summaries"   # pruning block summaries beside X (engine/pruning/summaries.py)
COMPLETE_ATTR = "every_chunk_written"   # True: a missing chunk file is damage, not the fill value
X_NAME, Y_NAME, IDS_NAME = "X", "y", "ids"
# What a person is shown for a point (written by ingest/records.py; docs/store-format.md)
RECORDS_NAME, PIXELS_NAME, DISPLAY_ATTR = "records", "pixels", "display"
OPTIONAL_NAMES = (Y_NAME, IDS_NAME, RECORDS_NAME, PIXELS_NAME)
FEATURE_DTYPES = (np.dtype("float32"), np.dtype("float64"))
STORED_DTYPES = (*FEATURE_DTYPES, np.dtype("float16"), np.dtype("int8"), np.dtype("uint8"))
LABEL_VALUES = (-1, 0, 1)

# Larger chunk files stream faster (fewer page faults, longer reads: 32 MiB chunks made a
# pass 9-12% faster than 16 MiB ones, warm and cold), but each thread maps a whole chunk
# at a time; 32 MiB keeps that within the memory budget (docs/performance.md).
DEFAULT_CHUNK_BYTES = 32 * 2**20
LABEL_CHUNK = 1 << 20       # rows per chunk of y and ids


def default_chunk_rows(n_features, itemsize, target_bytes=DEFAULT_CHUNK_BYTES):
    """Rows per chunk so that one chunk of X holds about ``target_bytes``."""
    return max(1, int(target_bytes // (max(1, n_features) * itemsize)))


def check_format_version(attrs, where):
    version = attrs.get(FORMAT_ATTR, 1)
    if not isinstance(version, int) or version < 1:
        raise StoreError(f"{where}: attribute {FORMAT_ATTR}={version!r} is not a format version")
    if version > FORMAT_VERSION:
        raise StoreError(
            f"{where} was written in store format {version}, newer than this bigsearch "
            f"understands ({FORMAT_VERSION}); upgrade bigsearch"
        )
    return version


def check_features(shape, dtype, chunk_rows, where):
    """Validate X's shape, dtype and row chunking; returns (n, r)."""
    if len(shape) != 2:
        raise StoreError(
            f"{where}: X must be a 2-D array (n points x r features), got {len(shape)}-D "
            f"shape {tuple(shape)}; reshape it to (n, r)"
        )
    n, r = shape
    if n < 1 or r < 1:
        raise StoreError(f"{where}: X has shape {tuple(shape)}; it needs at least one row and one column")
    if np.dtype(dtype).newbyteorder("=") not in STORED_DTYPES:
        raise StoreError(
            f"{where}: X has dtype {np.dtype(dtype)}; bigsearch reads float32 or float64, "
            "convert X with astype('float32')"
        )
    if chunk_rows is not None and chunk_rows < 1:
        raise StoreError(f"{where}: X has a chunk of {chunk_rows} rows")
    return int(n), int(r)


def missing_dataset(path, container, noun, name, found):
    """The message for a store without the array ``name`` (X, or what --dataset named);
    ``noun``: what the container calls an array (array, dataset)."""
    what = "(the n x r feature matrix)" if name == X_NAME else "(named by dataset=NAME)"
    others = sorted(k for k in found if k != name)
    hint = f"; its 2-D {noun}s: {', '.join(map(repr, others))}: choose one with dataset=NAME" if others else ""
    return f"{path}: {container} has no {noun} {name!r} {what}{hint}"


def check_labels(y, n, where):
    """Validate a label vector; returns it as int8."""
    y = np.asarray(y)
    if y.shape != (n,):
        raise StoreError(f"{where}: y has shape {y.shape}, expected ({n},) to match X")
    if not np.issubdtype(y.dtype, np.integer):
        raise StoreError(f"{where}: y has dtype {y.dtype}; labels are int8 (1, 0, or -1 for unknown)")
    bad = ~np.isin(y, LABEL_VALUES)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise StoreError(
            f"{where}: y[{i}] = {y[i]}; labels must be 1 (positive), 0 (negative) or -1 (unknown)"
        )
    return y.astype(np.int8, copy=False)


ZARR_METADATA = {"zarr.json", ".zgroup", ".zattrs", ".zarray", ".zmetadata"}
HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"
