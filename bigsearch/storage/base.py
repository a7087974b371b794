"""What every feature store offers the engine: its shape, its row chunks, and fast chunk reads.

A chunk read returns a NumPy view of the chunk's rows. On the fast path that view is a
memory map of the stored bytes (no copy: an uncompressed Zarr chunk is a plain file of
little-endian values, and an uncompressed HDF5 dataset has plain file offsets). For a
store larger than half the memory available, leaving the ``with`` block unmaps the pages,
so X never stays resident: the page cache keeps the data, the process does not. Stores
that need decoding (compression, sharding, big-endian data) take the slow path: a decode
into a reused per-thread buffer.

A pass over a store that fits in memory maps whole chunks with transparent huge pages
where Linux offers them: the pages then come from the disk in 2 MiB reads and stay in the
page cache as 2 MiB folios, which every later pass maps with one page-table entry each
instead of 512 (a warm pass spent most of its CPU mapping 4 KiB pages; 2.5x faster with
them, docs/performance.md). Not for a store larger than half the memory available, whose
every pass reads from the disk: there a 2 MiB folio can cost compaction of memory (up to
4x the CPU of a cold pass was measured) for no later gain. Nor for reads of a few rows
(pruned queries) that map a chunk for themselves: a 2 MiB read for a 64 KiB block would
read far more of X than asked.

A store that fits in half the memory available also keeps its chunk maps open across
passes (``hold_maps``): a later pass then finds every page already mapped (no page faults,
no map and unmap per chunk), and a read of a few rows uses the chunk's held map (the
passes before any query have read every page). Those pages are file-backed, the page
cache, which the kernel reclaims under pressure: they count in the process's RSS but not
in its anonymous memory, which is what the memory budget counts (docs/performance.md). ``close()`` (or
``release_maps()``) unmaps them. A larger store maps and unmaps each chunk in each pass, so
X never stays in the process. A published store is immutable (storage/writer.py publishes
a new version beside it and swaps it in): a held map keeps reading the version that was
open, as an open HDF5 file does; a search over a store replaced on disk must be reopened.
"""

import contextlib
import mmap
import os
import shutil
import threading
from pathlib import Path

import numpy as np

from ..errors import ParameterError, StoreError
from ..limits import MEMORY_FRACTION, available_memory, open_files_allowed
from .atomic import fsync_tree, publish_over, remove, remove_stale_leftovers, temp_sibling
from .encoding import SCALE_NAME, SCALED, as_chunk, bytes_per_point, concat, decode, encoding_of, take
from .fingerprint import store_fingerprint
from .format import SUMMARIES_GROUP, check_format_version, check_labels
from .location import store_location

PAGE = mmap.PAGESIZE


def _huge_pages_offered():
    """Whether a mapping may ask for transparent huge pages (Linux, THP not 'never')."""
    if not hasattr(mmap, "MADV_HUGEPAGE"):
        return False
    try:
        setting = Path("/sys/kernel/mm/transparent_hugepage/enabled").read_text()
    except OSError:
        return False
    return "[never]" not in setting


HUGE_MAPS = _huge_pages_offered()
# At most this many chunk maps held by one store: Linux allows 65,530 maps per process by
# default (vm.max_map_count), shared with everything else the process maps. Each map also
# holds a file (Python's mmap keeps a duplicate of the descriptor), so a store holds at most
# half the files the process may open (`ulimit -n`: 1,024 on many Linux systems, 256 on
# macOS); beyond that it maps and unmaps each chunk in each pass, as a larger store does.
MAX_HELD_MAPS = 16384


def max_held_maps():
    return min(MAX_HELD_MAPS, open_files_allowed() // 2)


class FeatureStore:
    """Base class of the store formats: subclasses set the fields below and implement the
    ``_`` hooks; the class attributes and class methods are what a format declares to the
    registry (storage/registry.py)."""

    kind = "?"                 # the format's name ("zarr", "hdf5")
    description = "?"          # in messages: "a Zarr directory", "an HDF5 file"
    label = "?"                # in messages: "Zarr", "HDF5"
    suffixes = ()              # output names ending so are written in this format
    codecs = ("none",)         # compression names the format writes
    writer = None              # the class that writes the format (see storage/writer.py)
    dataset = "X"              # the array of the container that holds X (--dataset)
    on_disk = True             # False: an array object (storage/arrays.py), no path to keep files beside

    @classmethod
    def recognizes(cls, path, head):
        """True when ``path`` holds this format; ``head`` is a file's first bytes (None
        for a directory)."""
        return False

    @classmethod
    def open(cls, path, options):
        """Open a store; ``options`` are open_store's (a format takes those it knows)."""
        return cls(path)

    @classmethod
    def replaceable(cls, path, head):
        """True when ``path`` is a whole store of this format, which ``overwrite=True``
        may replace (stricter than ``recognizes``, which may claim a path to explain what
        is wrong with it)."""
        return cls.recognizes(path, head)

    @classmethod
    def compressors(cls, codec):
        """What the format's writer takes for a codec name (None: uncompressed)."""
        if codec not in cls.codecs:
            raise ParameterError(f"codec {codec} is not available for {cls.label} output; use "
                                 f"{', '.join(cls.codecs[:-1])} or {cls.codecs[-1]}")
        return None if codec == "none" else cls._compressor(codec)

    @classmethod
    def _compressor(cls, codec):
        raise NotImplementedError

    def __init__(self, path, n, columns, dtype, chunk_rows, attrs):
        """``columns`` and ``dtype`` are those of the stored X; the store's attributes say
        how they decode (``encoding``) into n x r values."""
        self.path = path
        self.dtype = np.dtype(dtype)
        self.chunk_rows = int(chunk_rows)
        self.attrs = dict(attrs)
        self.format_version = check_format_version(self.attrs, str(path))
        self.encoding, r = encoding_of(self.attrs, self.dtype, (n, columns), str(path))
        self.n, self.r, self.columns = n, r, columns
        self._scale = None
        self._scale_lock = threading.Lock()
        self._fits = None          # decided at the first pass (fits_in_memory)
        self._huge_maps = None     # ... and from it, huge_maps
        self._hold_maps = None     # ... and hold_maps
        self._held = {}            # chunk -> _HeldMap: maps kept across passes (hold_maps)
        self._held_chunks = None   # every chunk's rows from those maps (held_chunks)
        self._held_lock = threading.Lock()
        starts = np.arange(0, n, self.chunk_rows)
        self.chunks = [(int(a), int(min(n, a + self.chunk_rows))) for a in starts]
        self._local = threading.local()

    # -- what subclasses provide --------------------------------------------------
    fast_path = False          # True when chunks are memory-mapped without decoding
    maps_holdable = True       # False: chunk maps are never kept across passes (see hold_maps)
    slow_reason = ""           # why not, in words, for `bigsearch info` and the docs

    def _map_chunk(self, j, huge=False):
        """Return (array of the chunk's rows, release callable) on the fast path;
        ``huge``: map with transparent huge pages (see above). Rows in memory rather than
        mapped come with ``release_nothing``: they are never held across passes."""
        raise NotImplementedError

    def _decode_chunk(self, j, out):
        """Slow path: decode chunk j's rows into ``out``."""
        raise NotImplementedError

    def _advise_willneed(self, j):
        """Ask the OS to start reading chunk j into the page cache."""

    def chunk_file(self, j):
        """The local file that holds chunk j of X and nothing else, or None (an HDF5 file,
        object storage, shards): what a reader that consumes a temporary store may remove
        as it goes (ingest/cluster_order.py)."""
        return None

    def _read_optional(self, name, rows=None):
        """Array ``name`` (y or ids), or only its entries at ``rows`` (sorted, unique
        int64, or a ``slice`` of consecutive rows); None when the store has no such array."""
        raise NotImplementedError

    def read_per_row(self, name, rows=None):
        """An array stored beside X with one entry per row (y, ids, ingest's display
        records: storage/format.py), or its entries at ``rows`` (sorted, unique int64, or
        a ``slice(a, b)``: rows a to b - 1, read as one range, much faster than their
        indices); None when the store has none."""
        return self._read_optional(name, rows)

    def _read_scale(self):
        """The whole ``X_scale`` array, or None when the store has none."""
        raise NotImplementedError

    def _read_group(self, name, select=None):
        """(attributes, arrays) of the group ``name`` beside X, or None when there is none;
        ``select``: {array: slice or None} reads only those arrays (those it has), each
        sliced along its first axis (None: whole)."""
        return None

    @classmethod
    def write_group(cls, path, name, arrays, attrs):
        """Write a group of arrays beside X (replacing one of that name), its attributes
        last, in place: for a store being written, before it is published
        (``StoreWriter.before_publish``); ``publish_group`` adds one to a published store.
        The store must not be open for reading in this process (HDF5 locks it)."""
        raise NotImplementedError(f"{cls.label} stores cannot hold extra groups")

    @classmethod
    def publish_group(cls, path, name, arrays, attrs):
        """``write_group`` on a published store, atomically and durably (storage/atomic.py):
        a reader, or a crash at any moment, sees the old group (or none) or the whole new
        one, and the store is never damaged. A store in one file (HDF5) is copied with the
        group added, then swapped in: it needs free space for a second copy."""
        path = Path(path)
        remove_stale_leftovers(path, tags=(name,))
        tmp = temp_sibling(path, name)
        try:
            shutil.copyfile(path, tmp)
            shutil.copymode(path, tmp)
            cls.write_group(tmp, name, arrays, attrs)
            fsync_tree(tmp)
            publish_over(tmp, path)
        except BaseException:
            remove(tmp)
            raise

    def close(self):
        """Release what the store holds (its held chunk maps; a format also closes its files)."""
        self.release_maps()

    # -- the interface ------------------------------------------------------------
    @property
    def shape(self):
        return (self.n, self.r)

    @property
    def n_chunks(self):
        return len(self.chunks)

    @property
    def bytes_per_point(self):
        return bytes_per_point(self.encoding, self.r)

    @property
    def nbytes(self):
        return self.n * self.bytes_per_point

    def chunk_of(self, index):
        return int(index) // self.chunk_rows

    @contextlib.contextmanager
    def chunk(self, j, whole=True):
        """``with store.chunk(j) as x:`` gives chunk j's rows, read-only: an m x r array
        of floats, or for encoded stores an ``Encoded`` tuple of the stored codes (the
        kernels decode them; ``encoding.decode`` gives the float64 values). ``whole=False``
        when the caller reads only some of the rows (no huge pages: see the module's
        docstring)."""
        a, b = self.chunks[j]
        if self.fast_path and self.hold_maps:
            yield self._as_chunk(self._held_map(j), a, b)
        elif self.fast_path:
            raw, release = self._map_chunk(j, whole and self.huge_maps)
            try:
                yield self._as_chunk(raw, a, b)
            finally:
                del raw
                release()
        else:
            buf = self._buffer()[: b - a]
            self._decode_chunk(j, buf)
            yield self._as_chunk(buf, a, b)

    def _as_chunk(self, raw, a, b):
        return as_chunk(raw, self.encoding, self.scales()[a:b] if self.encoding in SCALED else None, self.r)

    def scales(self):
        """The scale of every row (float32) of an int8 or binary store, read once."""
        if self._scale is None:
            with self._scale_lock:
                if self._scale is None:
                    scale = self._read_scale()
                    if scale is None or scale.shape != (self.n,):
                        raise StoreError(f"{self.path}: an {self.encoding} store needs '{SCALE_NAME}', a "
                                         f"float32 array of {self.n} row scales"
                                         + ("" if scale is None else f" (it has shape {scale.shape})"))
                    self._scale = np.ascontiguousarray(scale, dtype=np.float32)
        return self._scale

    def _held_map(self, j):
        """Chunk j's rows from the map held for it, made by this read when there is none
        (with huge pages where passes use them, so a read of a few rows makes the map every
        later pass uses). Threads may race to map a chunk: one map is kept, the other released."""
        held = self._held.get(j)
        rows = None if held is None else held.rows
        if rows is not None:
            return rows
        rows, release = self._map_chunk(j, self.huge_maps)
        if release is release_nothing:      # rows in memory (a chunk never written), not a map
            return rows
        mine = _HeldMap(rows, release)
        with self._held_lock:
            held = self._held.setdefault(j, mine)
        if held is not mine:
            mine.release()
            rows = held.rows
        return rows if rows is not None else self._held_map(j)

    def held_chunks(self):
        """Every chunk's rows, in order, as ``chunk(j)`` gives them, from the maps held
        across passes (None when the store does not hold them): made at the first call and
        kept until ``release_maps``, so a pass over the whole store costs no Python per
        chunk, and what a pass derives from them is kept beside them (``HeldChunks``)."""
        if not (self.fast_path and self.hold_maps):
            return None
        chunks = self._held_chunks
        if chunks is None:
            chunks = HeldChunks(self._as_chunk(self._held_map(j), a, b) for j, (a, b) in enumerate(self.chunks))
            self._held_chunks = chunks
        return chunks

    def release_maps(self):
        """Unmap the chunk maps held across passes (the next pass maps them again). A map
        still in use (a view taken inside ``with store.chunk(j)``, or ``held_chunks``
        kept by a caller) is unmapped when that view is gone."""
        with self._held_lock:
            held, self._held = self._held, {}
            self._held_chunks = None
        for mapped in held.values():
            mapped.release()

    @property
    def fits_in_memory(self):
        """Whether X fits in half the memory available (``limits.MEMORY_FRACTION``),
        decided once, at the first pass: such a store maps with huge pages and holds its
        maps across passes (see the module's docstring)."""
        if self._fits is None:
            self._fits = self.nbytes <= MEMORY_FRACTION * available_memory()
        return self._fits

    @property
    def hold_maps(self):
        """Whether chunk maps are kept open across passes: a store read by maps (the
        fast path) that fits in memory, in at most ``max_held_maps()`` chunks, and whose format
        allows it (see the module's docstring)."""
        if self._hold_maps is None:
            self._hold_maps = (self.maps_holdable and self.fast_path and self.n_chunks <= max_held_maps()
                               and self.fits_in_memory)
        return self._hold_maps

    @hold_maps.setter
    def hold_maps(self, value):
        """Set by hand (benchmarks and tests compare both); turning it off releases them."""
        self._hold_maps = self.maps_holdable and self.fast_path and bool(value)
        if not self._hold_maps:
            self.release_maps()

    @property
    def huge_maps(self):
        """Whether passes map chunks with huge pages: offered here, and X fits in memory
        with room to spare (see the module's docstring)."""
        if self._huge_maps is None:
            self._huge_maps = HUGE_MAPS and self.fits_in_memory
        return self._huge_maps

    @huge_maps.setter
    def huge_maps(self, value):
        """Set by hand (benchmarks compare both); never where the system offers none."""
        self._huge_maps = HUGE_MAPS and bool(value)

    def prefetch(self, j):
        """Start reading chunk j in the background (a hint; never blocks for I/O). Not
        for a chunk whose map is held (its pages are in), nor with huge maps: that
        read-ahead fills the page cache with small folios, which every later pass must
        then map 4 KiB at a time (a warm pass 1.6x slower), while a huge-page fault reads
        2 MiB at once."""
        if 0 <= j < self.n_chunks and not self.huge_maps and j not in self._held:
            self._advise_willneed(j)

    def read_rows(self, indices):
        """Rows of X, decoded, as a float64 array (k x r), in the order given."""
        return decode(self.read_stored_rows(indices))

    def read_stored_rows(self, indices):
        """Rows of X as the kernels receive them (an array, or an ``Encoded`` tuple), in
        the order given (a copy)."""
        indices = np.asarray(indices, dtype=np.int64).reshape(-1)
        parts, picks = [], []
        for j in np.unique(indices // self.chunk_rows):
            a = self.chunks[j][0]
            pick = np.flatnonzero(indices // self.chunk_rows == j)
            with self.chunk(int(j), whole=False) as x:
                parts.append(take(x, indices[pick] - a))
            picks.append(pick)
        if not parts:
            with self.chunk(0, whole=False) as x:
                return take(x, indices)
        order = np.empty(len(indices), np.int64)
        order[np.concatenate(picks)] = np.arange(len(indices))
        return take(concat(parts, self.r), order)

    def read_group(self, name, select=None):
        """(attributes, arrays) of a group stored beside X (block summaries:
        engine/pruning/summaries.py), or None when the store has none. ``select``: {array name:
        slice or None}: only those arrays, each sliced along its first axis (None: whole)."""
        return self._read_group(name, select)

    def labels(self):
        """The stored labels (int8, -1 unknown) or None when the store has none."""
        y = self._read_optional("y")
        return None if y is None else check_labels(y, self.n, f"{self.path}")

    def ids(self, indices=None):
        """The stored ids (None if the store has none); with ``indices``, only those
        entries, in the order given, read from the chunks that hold them."""
        if indices is None:
            return self._read_optional("ids")
        indices = np.asarray(indices, dtype=np.int64).reshape(-1)
        rows, where = np.unique(indices, return_inverse=True)
        values = self._read_optional("ids", rows)
        return None if values is None else values[where]

    def describe(self):
        """A JSON-able summary (what `bigsearch info` prints)."""
        y = self.labels()
        out = {
            "path": str(self.path), "kind": self.kind, "n": self.n, "r": self.r,
            "dtype": str(self.dtype), "encoding": self.encoding, "bytes_per_point": self.bytes_per_point,
            "chunk_rows": self.chunk_rows, "n_chunks": self.n_chunks,
            "x_bytes": self.nbytes, "fast_path": self.fast_path,
            "codec": self.codec(), "bytes_on_disk": self._disk_bytes(),
            "format_version": self.format_version, "attrs": self.attrs,
        }
        if self.dataset != "X":
            out["dataset"] = self.dataset
        if not self.fast_path:
            out["slow_reason"] = self.slow_reason
        if y is not None:
            counts = {str(k): int((y == k).sum()) for k in (1, 0, -1)}
            known = counts["1"] + counts["0"]
            out["labels"] = counts
            out["prevalence"] = counts["1"] / known if known else None
        out["block_summaries"] = self._summaries_description()
        return out

    def _summaries_description(self):
        """The pruning block summaries stored beside X (engine/pruning/summaries.py): None when
        there are none; else their block size, and whether they were written whole and
        for this X as far as its fingerprint tells (a search checks more before using them)."""
        try:
            found = self.read_group(SUMMARIES_GROUP, select={})
        except StoreError as e:
            return {"complete": False, "error": str(e)}
        if found is None:
            return None
        attrs = found[0]
        if "fingerprint" not in attrs:
            return {"complete": False}
        return {"complete": True, "block_rows": attrs.get("block_rows"), "basis_dim": attrs.get("basis_dim"),
                "version": attrs.get("version"), "fingerprint_matches": attrs["fingerprint"] == store_fingerprint(self)}

    def _disk_bytes(self):
        return disk_bytes(self.path)

    def codec(self):
        """X's compression in words ("none", "blosc-lz4-5", "zstd-1", "gzip-4", ...)."""
        return None

    # -- helpers shared by subclasses -----------------------------------------------
    def _buffer(self):
        buf = getattr(self._local, "buf", None)
        if buf is None:
            buf = np.empty((self.chunk_rows, self.columns), self.dtype)
            self._local.buf = buf
        return buf

    def __reduce__(self):
        # Stores travel to dask workers as their path; each worker maps its own pages.
        from . import open_store
        return (open_store, (self.path, self.reopen_options()))

    def reopen_options(self):
        """What ``open_store`` needs besides ``reopen_path()`` to open this store again
        elsewhere (a dask worker): the options it was opened with."""
        return {}

    def location(self):
        """(path, dataset) of the file or directory holding X, to reopen it later."""
        return str(self.path), self.dataset

    def reopen_path(self):
        """What ``open_store`` reopens this store from elsewhere (a dask worker): its
        absolute path or URL (an array store: itself, pickled)."""
        return store_location(self.path)

    def __repr__(self):
        return (f"<{type(self).__name__} {self.path} n={self.n} r={self.r} {self.encoding} "
                f"chunk_rows={self.chunk_rows} fast_path={self.fast_path}>")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def disk_bytes(path):
    """Bytes the store takes on disk (a file, or every file under a directory)."""
    if os.path.isfile(path):
        return os.path.getsize(path)
    return sum(os.path.getsize(os.path.join(root, f)) for root, _, files in os.walk(path) for f in files)


def release_nothing():
    """The release of chunk rows that hold no mapping (arrays in memory, fetched bytes)."""


def map_file_array(path, offset, dtype, shape, huge=False):
    """Memory-map an array stored raw in a file at ``offset``; returns (array, release).

    ``release`` unmaps the pages, so they stop counting toward this process's memory;
    the data stays in the OS page cache for the next pass. ``huge``: ask for transparent
    huge pages, for an array that will be read whole.
    """
    dtype = np.dtype(dtype)
    length = int(np.prod(shape)) * dtype.itemsize
    start = offset - offset % mmap.ALLOCATIONGRANULARITY
    fd = os.open(path, os.O_RDONLY)
    try:
        mm = mmap.mmap(fd, length + offset - start, prot=mmap.PROT_READ, offset=start)
    finally:
        os.close(fd)
    if huge:
        with contextlib.suppress(OSError):      # a file system without them: 4 KiB pages
            mm.madvise(mmap.MADV_HUGEPAGE)
    x = np.frombuffer(mm, dtype, int(np.prod(shape)), offset - start).reshape(shape)

    def release():
        try:
            mm.close()
        except BufferError:  # a caller still holds a view: the GC unmaps it later
            pass
    return x, release


class HeldChunks(list):
    """A store's chunks from its held maps (``FeatureStore.held_chunks``), with what passes
    derive from them once (``derived``), e.g. how a kernel shares them out among threads."""

    def derived(self, key, make):
        """``make()``, computed at the first call with this key and kept with the chunks."""
        cache = self.__dict__.setdefault("_derived", {})
        if key not in cache:
            cache[key] = make()
        return cache[key]


class _HeldMap:
    """A chunk map kept across passes: its rows, and how to unmap it."""

    __slots__ = ("rows", "_release")

    def __init__(self, rows, release):
        self.rows, self._release = rows, release

    def release(self):
        self.rows = None                # the view would keep the map open
        self._release()


def advise_willneed(path, offset, length):
    """Start asynchronous read-ahead of a file range into the page cache."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.posix_fadvise(fd, offset, length, os.POSIX_FADV_WILLNEED)
    finally:
        os.close(fd)
