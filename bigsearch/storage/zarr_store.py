"""Zarr stores (v3, and v2 groups zarr-python can open).

Fast path: an uncompressed chunk of a local Zarr array is a plain file of values in
C order (the edge chunk is stored at full size), so it is memory-mapped directly.
zarr-python's own read path is 6-35x slower for this (docs/performance.md); it
remains the slow path for compressed, sharded or remote arrays.
"""

from pathlib import Path

import numpy as np

from ..errors import StoreError, StoreNotFoundError
from .atomic import fsync_tree, publish, publish_over, remove, remove_stale_leftovers, temp_sibling
from .base import FeatureStore, advise_willneed, map_file_array, release_nothing
from .encoding import SCALE_NAME
from .format import (
    COMPLETE_ATTR,
    IDS_NAME,
    LABEL_CHUNK,
    OPTIONAL_NAMES,
    X_NAME,
    Y_NAME,
    ZARR_METADATA,
    check_features,
    missing_dataset,
)

# xarray.open_zarr names an array's dimensions from these (Zarr v3 ``dimension_names``)
POINT_DIM, FEATURE_DIM = "point", "feature"


class ZarrWriter:
    """Writes a Zarr v3 group (see StoreWriter), every array with dimension names, so
    that ``xarray.open_zarr`` reads it as a Dataset over (point, feature)."""

    def __init__(self, path, r, dtype, chunk_rows, labels, ids_dtype, attrs, compressors, scaled=False):
        import zarr
        self.zarr = zarr
        # a URL's writer passes the group it made (storage/remote.py)
        self.group = path if isinstance(path, zarr.Group) else zarr.open_group(str(path), mode="w", zarr_format=3)
        self.group.attrs.update(attrs)
        self.x = self.group.create_array(X_NAME, shape=(0, r), chunks=(chunk_rows, r), dtype=dtype,
                                         compressors=compressors, fill_value=0,
                                         config={"write_empty_chunks": True},
                                         dimension_names=(POINT_DIM, FEATURE_DIM))
        self.group.attrs[COMPLETE_ATTR] = True     # so a missing chunk file reads as damage
        self.scale = self.group.create_array(SCALE_NAME, shape=(0,), chunks=(chunk_rows,), dtype="float32",
                                             compressors=compressors, fill_value=0,
                                             dimension_names=(POINT_DIM,)) if scaled else None
        self.y = self.group.create_array(Y_NAME, shape=(0,), chunks=(LABEL_CHUNK,), dtype="int8",
                                         fill_value=-1, dimension_names=(POINT_DIM,)) if labels else None
        self.ids = None
        if ids_dtype is not None:
            dt = str if np.dtype(ids_dtype).kind in "OUS" else np.dtype(ids_dtype)
            self.ids = self.group.create_array(IDS_NAME, shape=(0,), chunks=(LABEL_CHUNK,), dtype=dt,
                                               dimension_names=(POINT_DIM,))

    def write(self, start, X, scale, y, ids):
        stop = start + len(X)
        if stop > self.x.shape[0]:      # grow only: StoreWriter.write_at fills regions in any order
            self.x.resize((stop, self.x.shape[1]))
        self.x[start:stop] = X
        for arr, values in ((self.scale, scale), (self.y, y), (self.ids, ids)):
            if arr is not None:
                if values is None:
                    raise StoreError("every block must carry the same optional columns (y, ids)")
                if stop > arr.shape[0]:
                    arr.resize((stop,))
                arr[start:stop] = values

    def set_attrs(self, attrs):
        self.group.attrs.update(attrs)

    def create_rows(self, name, tail, dtype, chunk_rows):
        return self.group.create_array(name, shape=(0, *tail), chunks=(chunk_rows, *tail),
                                       dtype=str if dtype is str else np.dtype(dtype),
                                       dimension_names=(POINT_DIM, *(f"{name}_{k}" for k in range(len(tail)))))

    def close(self):
        _settle()


SETTLE_SECONDS = 60


def _settle():
    """Wait for the writes zarr still has running. When one chunk of a write fails (EFBIG,
    ENOSPC), zarr raises at once and leaves the others running (``asyncio.gather``), and
    they would make the store's directories again after StoreWriter removed it."""
    import asyncio

    from zarr.core.sync import sync

    async def the_others():
        others = asyncio.all_tasks() - {asyncio.current_task()}
        if others:
            await asyncio.wait(others, timeout=SETTLE_SECONDS)
    sync(the_others())


class ZarrStore(FeatureStore):
    kind = "zarr"
    description = "a Zarr directory"
    label = "Zarr"
    suffixes = (".zarr",)
    codecs = ("none", "lz4", "zstd", "gzip")
    writer = ZarrWriter

    @classmethod
    def recognizes(cls, path, head):
        return head is None     # any directory: ZarrStore explains what is wrong with it

    @classmethod
    def replaceable(cls, path, head):
        """A Zarr group with an array X and nothing but Zarr metadata and arrays at its top."""
        if head is not None:
            return False
        entries = list(Path(path).iterdir())
        names = {e.name for e in entries}
        return (bool(names & {"zarr.json", ".zgroup"}) and (Path(path) / X_NAME).is_dir()
                and all(e.is_dir() or e.name in ZARR_METADATA for e in entries))

    @classmethod
    def _compressor(cls, codec):
        import zarr.codecs as zc
        return [{"lz4": lambda: zc.BloscCodec(cname="lz4", clevel=5, shuffle="shuffle"),
                 "zstd": lambda: zc.ZstdCodec(level=1), "gzip": lambda: zc.GzipCodec(level=1)}[codec]()]

    @classmethod
    def open(cls, path, options):
        return cls(path, dataset=options.get("dataset"))

    def __init__(self, path, dataset=None):
        import zarr
        from zarr.storage import LocalStore
        self.dataset = dataset or X_NAME        # the array holding X (--dataset)
        path = self._location(path)
        try:
            group = self._open_group(path)
        except StoreError:
            raise
        except FileNotFoundError as e:
            raise StoreNotFoundError(f"no Zarr store at {path}") from e
        except Exception as e:  # zarr raises several kinds for "this is not a group"
            raise StoreError(f"{path} is not a readable Zarr group: {_one_line(e)}") from e
        name = self.dataset
        try:
            x = group[name] if name in group else None
        except Exception as e:  # a damaged X/zarr.json
            raise StoreError(f"{path}: the metadata of {name} ({name}/zarr.json) is damaged: {_one_line(e)}") from e
        if x is None:
            raise StoreError(missing_dataset(path, "the Zarr group", "array", name, _arrays(group)))
        if not isinstance(x, zarr.Array):
            raise StoreError(f"{path}: {name!r} is a group, not an array")
        chunk_rows = self._row_block(x, path)
        check_features(x.shape, x.dtype, chunk_rows, str(path))
        super().__init__(path, x.shape[0], x.shape[1], x.dtype, chunk_rows, dict(group.attrs))
        self._group, self._x = group, x
        self._chunk_dir = self._raw_chunk_dir(x)
        self.fast_path = self._chunk_dir is not None
        # every chunk was written (bigsearch's writer): a missing chunk file is damage, not
        # the fill value; known only for local stores
        self._local_dir = Path(x.store.root) / x.path if isinstance(x.store, LocalStore) else None
        self._complete = bool(self.attrs.get(COMPLETE_ATTR)) and self._local_dir is not None

    @staticmethod
    def _location(path):
        return Path(path)

    def _open_group(self, path):
        import zarr
        return zarr.open_group(str(path), mode="r")

    @staticmethod
    def _row_block(x, path):
        """Rows per read: the shard when sharded, else the chunk; whole rows only."""
        block = getattr(x, "shards", None) or x.chunks
        if len(x.shape) == 2 and block[1] != x.shape[1]:
            raise StoreError(
                f"{path}: X is chunked along columns (chunks {tuple(block)} for shape "
                f"{tuple(x.shape)}); bigsearch reads whole rows, so rewrite X with chunks "
                f"(rows, {x.shape[1]}), e.g. with `bigsearch ingest {path} OUT --format zarr`"
            )
        return block[0]

    def _raw_chunk_dir(self, x):
        """The array's directory when its chunks are raw little-endian files, else None."""
        from zarr.storage import LocalStore
        reasons = []
        if not isinstance(x.store, LocalStore):
            reasons.append(f"store type {type(x.store).__name__} is not a local directory")
        reasons += self._codec_reasons(x)
        if reasons:
            self.slow_reason = "; ".join(reasons)
            return None
        return Path(x.store.root) / x.path

    @staticmethod
    def _codec_reasons(x):
        """Why x's chunk objects are not raw little-endian values (an empty list when they are)."""
        from zarr.codecs import BytesCodec
        reasons = []
        if x.compressors or x.filters:
            reasons.append(f"codecs {[type(c).__name__ for c in (*x.filters, *x.compressors)]} need decoding")
        if getattr(x, "shards", None):
            reasons.append("sharded")
        if x.metadata.zarr_format == 3:
            if not isinstance(x.serializer, BytesCodec) or (
                    x.dtype.itemsize > 1
                    and str(getattr(x.serializer.endian, "value", x.serializer.endian)) != "little"):
                reasons.append("serializer is not little-endian bytes")
        elif getattr(x.metadata, "order", "C") != "C" or x.dtype.byteorder == ">":
            reasons.append("v2 chunks not in little-endian C order")
        return reasons

    def chunk_file(self, j):
        if self._local_dir is None or getattr(self._x, "shards", None):
            return None
        return self._chunk_file(j)

    def _chunk_file(self, j):
        return (self._chunk_dir or self._local_dir) / self._x.metadata.encode_chunk_key((j, 0))

    def _map_chunk(self, j, huge=False):
        a, b = self.chunks[j]
        path = self._chunk_file(j)
        expected = self.chunk_rows * self.columns * self.dtype.itemsize
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            self._check_missing(j, path)  # zarr leaves chunks equal to the fill value unwritten
            return np.full((b - a, self.columns), self._x.fill_value, self.dtype), release_nothing
        if size != expected:          # mapping past a file's end would kill the process (SIGBUS)
            raise StoreError(f"{self.path}: chunk file {path} is {size:,} bytes, expected {expected:,} "
                             f"(rows {a}..{b - 1} of X): the store is damaged (truncated?); write it again")
        x, release = map_file_array(path, 0, self.dtype, (self.chunk_rows, self.columns), huge=huge)
        return x[: b - a], release

    def _decode_chunk(self, j, out):
        a, b = self.chunks[j]
        if self._complete and not self._chunk_file(j).exists():
            self._check_missing(j, self._chunk_file(j))
        try:
            out[...] = self._x[a:b]
        except Exception as e:         # codecs raise many kinds on damaged bytes
            raise StoreError(f"{self.path}: chunk {j} of X (rows {a}..{b - 1}) cannot be decoded: "
                             f"{_one_line(e)}; the store is damaged, write it again") from e

    def _check_missing(self, j, path):
        if self._complete:
            a, b = self.chunks[j]
            raise StoreError(f"{self.path}: chunk file {path} (rows {a}..{b - 1} of X) is missing, but this "
                             "store was written with every chunk: it is damaged; write it again")

    def _advise_willneed(self, j):
        if self._chunk_dir is not None:
            advise_willneed(self._chunk_file(j), 0, 0)

    def _read_scale(self):
        return np.asarray(self._group[SCALE_NAME][:]) if SCALE_NAME in self._group else None

    def _read_optional(self, name, rows=None):
        if name not in OPTIONAL_NAMES or name == self.dataset:
            return None
        try:
            if name not in self._group:
                return None
            array = self._group[name]
            return np.asarray(array[:] if rows is None else array.get_orthogonal_selection(rows))
        except Exception as e:
            raise StoreError(f"{self.path}: the array {name} cannot be read: {_one_line(e)}; the store is "
                             "damaged, write it again") from e

    def reopen_options(self):
        return {"dataset": self.dataset} if self.dataset != X_NAME else {}

    def _read_group(self, name, select=None):
        import zarr
        try:
            if name not in self._group:
                return None
            group = self._group[name]
            if not isinstance(group, zarr.Group):
                return None
            if select is None:
                return dict(group.attrs), {k: np.asarray(a[...]) for k, a in group.arrays()}
            arrays = {k: group[k] for k in select if k in group}
            return dict(group.attrs), {k: np.asarray(a[select[k] if select[k] is not None else ...])
                                       for k, a in arrays.items()}
        except Exception as e:
            raise StoreError(f"{self.path}: the group {name} cannot be read: {_one_line(e)}") from e

    @classmethod
    def write_group(cls, path, name, arrays, attrs):
        import zarr
        group = zarr.open_group(str(path), mode="r+")
        if name in group:
            del group[name]
        _write_group_dir(Path(path) / name, arrays, attrs)

    @classmethod
    def publish_group(cls, path, name, arrays, attrs):
        """The group is written as a directory beside the store, fsync'd, then renamed
        into it (exchanged with an old one): X is not copied."""
        path = Path(path)
        remove_stale_leftovers(path, tags=(name,))
        tmp = temp_sibling(path, name)
        try:
            _write_group_dir(tmp, arrays, attrs)
            fsync_tree(tmp)
            if (path / name).exists():
                publish_over(tmp, path / name)
            else:
                publish(tmp, path / name)
        except BaseException:
            _settle()
            remove(tmp)
            raise

    def codec(self):
        return " + ".join(_codec_name(c) for c in (*self._x.filters, *self._x.compressors)) or "none"


GROUP_CHUNK_BYTES = 1 << 20   # chunks of whole rows: a slice of rows (a worker's blocks) decodes little else


def _write_group_dir(target, arrays, attrs):
    """A Zarr group of ``arrays`` at the directory ``target``, its attributes last (a
    group without them is one a crash cut short)."""
    import zarr
    sub = zarr.open_group(str(target), mode="w")
    for key, values in arrays.items():
        row_bytes = values.itemsize * int(np.prod(values.shape[1:]))
        rows = max(1, min(values.shape[0] if values.ndim else 1, GROUP_CHUNK_BYTES // max(1, row_bytes)))
        chunks = (rows, *values.shape[1:]) if values.ndim else None
        sub.create_array(key, shape=values.shape, chunks=chunks, dtype=values.dtype, fill_value=0)[...] = values
    sub.attrs.update(attrs)


def _arrays(group):
    try:
        return [k for k, v in group.members() if len(getattr(v, "shape", ())) == 2]
    except Exception:  # a damaged member: the message names none
        return []


def _one_line(error):
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}"


def _codec_name(codec):
    name = type(codec).__name__.removesuffix("Codec").lower()
    cname = getattr(codec, "cname", None)
    level = getattr(codec, "clevel", getattr(codec, "level", None))
    cname = getattr(cname, "value", cname)
    return "-".join(str(p) for p in (name, cname, level) if p is not None)
