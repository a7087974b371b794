"""Compact encodings of X: fewer bytes per point, decoded exactly by the kernels.

A store keeps X in one of five encodings (docs/store-format.md):

- ``float32``, ``float64``: the values themselves;
- ``float16``: the values rounded to half precision (X is float16);
- ``int8``: codes c_ij in [-127, 127] and a float32 scale per row: x_ij = scale_i * c_ij
  (X is int8, ``X_scale`` is float32 of length n); a row of integers within +-127 is
  stored exactly (scale 1);
- ``binary``: 0/1 features bit-packed 8 to a byte (bit b of byte p is feature 8p + b,
  little bit order) and a float32 scale per row: x_ij = scale_i * bit_ij (X is uint8 of
  n x ceil(r / 8), ``X_scale`` as for int8).

The **decoded** matrix is the one the engine is exact for: every value converted to
float64, times the row's scale (float32 converted to float64) where there is one. A
chunk of an encoded store reaches the kernels as an :class:`Encoded` tuple (a float16
chunk as its raw 16-bit patterns, which numba reads), never as decoded floats.
"""

from typing import NamedTuple

import numpy as np

from ..errors import DataError, StoreError

ENCODINGS = ("float32", "float64", "float16", "int8", "binary")
ENCODING_ATTR = "bigsearch_encoding"      # {"name": ..., "n_features": r} on the group / file
SCALE_NAME = "X_scale"
SCALED = ("int8", "binary")               # encodings with a scale per row
# Packed bits count as sparse up to this share of bits set: the engine's sparse kernels take
# them (engine/core/steps.py), denser ones go to BLAS on decoded rows.
SPARSE_BITS = 1 / 16
INT8_MAX = 127
FLOAT16_MAX = float(np.finfo(np.float16).max)

_STORED_DTYPE = {"float32": np.float32, "float64": np.float64, "float16": np.float16,
                 "int8": np.int8, "binary": np.uint8}


class Encoded(NamedTuple):
    """A chunk (or some rows) of an encoded store, as the kernels receive it.

    codes: (m, c) uint16 (float16 bit patterns), int8 codes, or uint8 packed bits;
    scale: (m,) float32 (empty for float16); n_features: r, the decoded row length.
    """
    codes: np.ndarray
    scale: np.ndarray
    n_features: int


def check_encoding(name):
    if name not in ENCODINGS:
        raise StoreError(f"unknown encoding {name!r}; use one of {', '.join(ENCODINGS)}")
    return name


def stored_dtype(encoding):
    return np.dtype(_STORED_DTYPE[check_encoding(encoding)])


def stored_columns(encoding, r):
    """Columns of the stored X for r features (bytes of packed bits for binary)."""
    return (r + 7) // 8 if encoding == "binary" else r


def bytes_per_point(encoding, r):
    """Bytes a point takes in X (and its scale)."""
    return stored_columns(encoding, r) * stored_dtype(encoding).itemsize + (4 if encoding in SCALED else 0)


def encoding_attrs(encoding, r):
    """Attributes that describe an encoding on the store (none for plain floats)."""
    if encoding in ("float32", "float64"):
        return {}
    return {ENCODING_ATTR: {"name": encoding, "n_features": int(r)}}


def encoding_of(attrs, dtype, shape, where):
    """(encoding name, r) of a stored X from the store's attributes and X's dtype and shape."""
    meta = attrs.get(ENCODING_ATTR)
    dtype = np.dtype(dtype).newbyteorder("=")
    if meta is None:
        if dtype in (np.float32, np.float64, np.float16):
            return dtype.name, int(shape[1]) if len(shape) == 2 else 0
        raise StoreError(f"{where}: X has dtype {dtype} but the store has no {ENCODING_ATTR!r} attribute "
                         "saying how to decode it; bigsearch reads float16/32/64 X, or int8/binary "
                         "X written by `bigsearch ingest --encoding`")
    if not isinstance(meta, dict) or meta.get("name") not in ENCODINGS:
        raise StoreError(f"{where}: attribute {ENCODING_ATTR}={meta!r} does not name an encoding "
                         f"({', '.join(ENCODINGS)})")
    name, r = meta["name"], int(meta.get("n_features", shape[1] if len(shape) == 2 else 0))
    if dtype != stored_dtype(name):
        raise StoreError(f"{where}: encoding {name} stores X as {stored_dtype(name)}, but X is {dtype}")
    if len(shape) == 2 and shape[1] != stored_columns(name, r):
        raise StoreError(f"{where}: encoding {name} of {r} features stores {stored_columns(name, r)} "
                         f"columns, but X has {shape[1]}")
    return name, r


# -- encoding blocks of rows (ingest, StoreWriter) ------------------------------------
def encode_rows(X, encoding, first_row=0):
    """(codes, scale or None) of a block of rows X (k x r); ``first_row`` is the global
    index of X's first row, for error messages. Raises DataError when the values cannot
    be encoded (non-0/1 for binary, overflow for float16 and int8)."""
    X = np.asarray(X)
    if encoding in ("float32", "float64"):
        return X.astype(encoding, copy=False), None
    if not np.all(np.isfinite(X)):
        i, j = _first(~np.isfinite(X))
        raise DataError(f"row {first_row + i}, feature {j} is {X[i, j]}; encodings need finite values")
    if encoding == "float16":
        return _encode_float16(X, first_row), None
    if encoding == "int8":
        return _encode_int8(X, first_row)
    return _encode_binary(X, first_row)


def _first(mask):
    i, j = np.argwhere(mask)[0]
    return int(i), int(j)


def _encode_float16(X, first_row):
    big = np.abs(X) > FLOAT16_MAX
    if big.any():
        i, j = _first(big)
        raise DataError(f"row {first_row + i}, feature {j} is {X[i, j]:g}, beyond float16's range "
                        f"(+-{FLOAT16_MAX:g}); rescale the features (e.g. features.normalize) or use "
                        "output.encoding float32")
    return X.astype(np.float16)


def _encode_int8(X, first_row):
    """Codes round(x / scale) with scale = max |x_i| / 127 per row (float32); scale 1 for a
    row of integers within +-127 (counts, e.g. fingerprints': then the codes are the values)."""
    X = X.astype(np.float64, copy=False)
    peak = np.abs(X).max(axis=1) if X.shape[1] else np.zeros(len(X))
    scale = (peak / INT8_MAX).astype(np.float32)
    exact = (peak <= INT8_MAX) & np.all(X == np.rint(X), axis=1)
    scale[exact & (peak > 0)] = 1.0
    tiny = (scale == 0) & (peak > 0)          # the scale underflows float32: codes would overflow
    if tiny.any():
        i = int(np.flatnonzero(tiny)[0])
        raise DataError(f"row {first_row + i}: its largest value {peak[i]:g} is too small for an int8 scale "
                        "(float32 underflows); rescale the features (e.g. features.normalize) or use "
                        "output.encoding float32")
    safe = np.where(scale > 0, scale, 1.0).astype(np.float64)
    codes = np.rint(X / safe[:, None])
    over = np.abs(codes) > INT8_MAX
    if over.any():                              # the float32 scale rounded down: clip by one step
        codes = np.clip(codes, -INT8_MAX, INT8_MAX)
    return codes.astype(np.int8), scale


def binary_rows(X):
    """Whether every row of X is 0/1 times one number (float32): --encoding binary fits."""
    return binary_nonzeros(X) is not None


def binary_nonzeros(X):
    """The number of non-zero values of X when every row is 0/1 times one number (compared
    as float32), else None; stops at the first block that fails."""
    total = 0
    for block in _cached_blocks(np.asarray(X, dtype=np.float32)):
        count = _binary_block(block)
        if count is None:
            return None
        total += count
    return total


def small_integers(X):
    """Whether every value of X is an integer within +-127 (what int8 stores exactly);
    stops at the first block that fails."""
    return all(np.all(np.abs(b) <= INT8_MAX) and np.all(b == np.rint(b)) for b in _cached_blocks(np.asarray(X)))


def _cached_blocks(X):
    """X 1 MiB of rows at a time, so that a check's passes over a block stay in the cache
    (twice as fast on 4,096-wide rows as whole blocks)."""
    rows = max(1, (1 << 20) // max(1, X.shape[1] * X.itemsize))
    return (X[a:a + rows] for a in range(0, len(X), rows))


def _binary_block(X):
    nonzero = X != 0
    first = X[np.arange(len(X)), nonzero.argmax(axis=1)]
    first[first == 0] = np.nan       # an all-zero row: no value equals its "first"
    # Every value equal to its row's first non-zero one is non-zero, so the rows are 0/1
    # times one number when as many values equal it as are non-zero.
    count = int(np.count_nonzero(nonzero))
    return count if int(np.count_nonzero(X == first[:, None])) == count else None


def _encode_binary(X, first_row):
    """Packed bits of X != 0 and the row's common nonzero value as its scale (values
    are compared as float32, the precision of the scale, as a float32 store keeps them)."""
    X = X.astype(np.float32, copy=False)
    nonzero = X != 0
    scale = np.zeros(len(X), np.float32)
    has = nonzero.any(axis=1)
    first_col = nonzero.argmax(axis=1)
    scale[has] = X[has, first_col[has]]
    bad = nonzero & (X != scale[:, None])
    if bad.any():
        i, j = _first(bad)
        raise DataError(f"output.encoding binary needs every row to be 0/1 times one number, but row "
                        f"{first_row + i} has {X[i, j]:g} at feature {j} and {scale[i]:g} elsewhere; "
                        "use output.encoding float32, float16 or int8 (note: features.bias after features.normalize "
                        "appends a 1, which is not the row's scale)")
    return np.packbits(nonzero, axis=1, bitorder="little"), scale


# -- decoding (NumPy: the reference, BLAS blocks, read_rows) ---------------------------
def read_only(x):
    """A read-only view of chunk ``x`` (an array, or an Encoded tuple's codes): numba
    compiles each kernel apart for read-only and writable arrays, so every chunk the
    kernels receive is read-only (one compile per chunk dtype, not two)."""
    if isinstance(x, Encoded):
        return x._replace(codes=read_only(x.codes))
    view = x.view()
    view.flags.writeable = False
    return view


def as_chunk(raw, encoding, scale, r):
    """What the kernels receive for stored rows ``raw`` (and their scales): read-only,
    whether ``raw`` is a map of the file or a buffer it was decoded into."""
    raw = read_only(raw)
    if encoding in ("float32", "float64"):
        return raw
    if encoding == "float16":
        return Encoded(raw.view(np.uint16), np.zeros(0, np.float32), r)
    return Encoded(raw, scale, r)


def n_rows(x):
    return len(x.codes) if isinstance(x, Encoded) else x.shape[0]


def n_features(x):
    return x.n_features if isinstance(x, Encoded) else x.shape[1]


def decode(x, a=0, b=None):
    """Rows a:b of a chunk as float64 (the decoded values)."""
    if not isinstance(x, Encoded):
        return np.asarray(x[a:b], dtype=np.float64)
    codes = x.codes[a:b]
    if codes.dtype == np.uint16:
        return codes.view(np.float16).astype(np.float64)
    if codes.dtype == np.int8:
        values = codes.astype(np.float64)
    else:
        values = np.unpackbits(codes, axis=1, count=x.n_features, bitorder="little").astype(np.float64)
    return values * x.scale[a:b, None].astype(np.float64)


def take(x, rows):
    """The given rows (local indices) of a chunk, as a chunk of the same kind (a copy)."""
    if not isinstance(x, Encoded):
        return np.array(x[rows])
    return Encoded(np.array(x.codes[rows]), np.array(x.scale[rows] if len(x.scale) else x.scale), x.n_features)


def concat(parts, r):
    """Rows from several chunks (in order) as one chunk."""
    if not isinstance(parts[0], Encoded):
        return np.concatenate(parts)
    scales = [p.scale for p in parts]
    return Encoded(np.concatenate([p.codes for p in parts]), np.concatenate(scales), r)


def copy_chunk(x):
    """An in-memory, read-only copy of a chunk (for workers that keep X in memory)."""
    out = take(x, slice(None))
    for arr in (out.codes, out.scale) if isinstance(out, Encoded) else (out,):
        arr.flags.writeable = False
    return out


def chunk_bytes(x):
    """The raw bytes of a chunk, little-endian (for fingerprints)."""
    if not isinstance(x, Encoded):
        return np.ascontiguousarray(x, dtype=x.dtype.newbyteorder("<")).tobytes()
    return (np.ascontiguousarray(x.codes, dtype=x.codes.dtype.newbyteorder("<")).tobytes()
            + np.ascontiguousarray(x.scale, dtype="<f4").tobytes())
