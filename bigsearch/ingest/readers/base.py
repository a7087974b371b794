"""What every reader gives the pipeline: named columns and blocks of rows.

A reader streams one input file. ``columns`` says what each column holds (numbers or
text); ``blocks()`` yields :class:`Block` objects of a bounded size, each remembering
where it starts in the file so that any error can name the file and the line or row.
"""

import gzip
import os
from dataclasses import dataclass, replace

from ...errors import InputError

GZIP_MAGIC = b"\x1f\x8b"


@dataclass(frozen=True)
class Column:
    name: str
    numeric: bool


@dataclass
class Block:
    """Rows ``start .. start + len - 1`` of one reader (0-based data rows of that file).

    Exactly one of ``table`` (a pyarrow RecordBatch) and ``matrix`` (a NumPy array or a
    SciPy CSR matrix, one column per reader column) holds the rows. ``labels`` are labels
    that come beside the features (LIBSVM, --labels files, a store's y); ``ids`` are
    identifiers the input carries.
    """

    reader: "Reader"
    start: int
    table: object = None
    matrix: object = None
    labels: object = None
    ids: object = None

    def __len__(self):
        return self.table.num_rows if self.table is not None else self.matrix.shape[0]

    def column(self, j):
        """Column j as a pyarrow array (tables) or a NumPy vector (matrices)."""
        if self.table is not None:
            return self.table.column(j)
        col = self.matrix[:, j]
        return col.toarray().ravel() if hasattr(col, "toarray") else col

    def rows(self, a, b):
        """The sub-block of rows a..b-1 (views, no copies)."""
        def cut(v):
            return None if v is None else v[a:b]
        return replace(self, start=self.start + a,
                       table=None if self.table is None else self.table.slice(a, b - a),
                       matrix=cut(self.matrix), labels=cut(self.labels), ids=cut(self.ids))

    def where(self, i):
        """'FILE, line L' (text) or 'FILE, row R' for row i of this block."""
        return self.reader.where(self.start + i)


class Reader:
    """Base class of the input readers, and what each one declares about itself.

    A subclass sets ``columns`` and implements ``blocks``; the class attributes and the
    methods with defaults below are its capabilities, which the pipeline reads instead of
    probing for attributes. ``formats`` are the --format names it reads; ``open`` builds
    it from :class:`~bigsearch.ingest.options.SourceOptions` (each reader takes the
    options it understands; None: the defaults). Register a new reader in readers/__init__.py.
    """

    formats = ()                # the format names this class reads ("csv", "tsv", ...)
    suffixes = {}               # file name ending -> format (".csv": "csv", ...)
    format = "?"
    labels_are_stored = False   # True when ``Block.labels`` already are store labels (1, 0, -1)
    has_labels = False          # True when every block carries ``labels``
    label_column_allowed = True  # False when the label has a fixed place in each row (LIBSVM)
    header = False              # True when the column names come from the input
    n = None                    # the exact number of rows, when known before reading
    ids = None                  # identifiers the input carries (an array-like of n), or None

    def __init__(self, path):
        self.path = str(path)
        self.size = os.path.getsize(path) if os.path.isfile(path) else _tree_size(path)
        self.columns = []
        self.rows_read = 0
        self._raw = None            # the file object whose position measures progress

    @classmethod
    def open(cls, path, fmt, options):
        """The reader of ``path`` in format ``fmt`` with the source options it uses."""
        return cls(path)

    @classmethod
    def format_of_head(cls, head):
        """The format whose signature a file's first bytes (decompressed) carry, or None."""
        return None

    @classmethod
    def format_of_name(cls, name):
        """The format a file name (lower case, without .gz) means, or None."""
        return next((fmt for suffix, fmt in cls.suffixes.items() if name.endswith(suffix)), None)

    @classmethod
    def align(cls, readers):
        """Make several inputs of this class agree on their columns (called before
        the columns are compared); nothing to do for most formats."""

    def blocks(self, block_bytes):
        raise NotImplementedError

    def needs_scan(self):
        """True when the columns are known only after a first read (``scan``)."""
        return False

    def scan(self, block_bytes):
        """Read the input once to find its columns (when ``needs_scan``)."""

    def force_text(self, j):
        """Read column j as text. Readers of numbers only have nothing to do."""

    def position(self):
        """Bytes of the file consumed so far (for progress bars)."""
        try:
            return self._raw.tell() if self._raw is not None and not self._raw.closed else self.size
        except (OSError, ValueError):
            return self.size

    def where(self, row):
        return f"{self.path}, row {row + 1}"

    def estimated_rows(self):
        """The number of rows when known or estimated cheaply, else None."""
        return self.n

    def describe(self):
        return {"path": self.path, "format": self.format, "bytes": self.size, "rows": self.rows_read}

    def close(self):
        if self._raw is not None:
            self._raw.close()


def is_gzip(path):
    with open(path, "rb") as fh:
        return fh.read(2) == GZIP_MAGIC


def open_binary(path):
    """(stream, raw file): the file's bytes, decompressed when it is gzip."""
    raw = open(path, "rb")
    if raw.read(2) == GZIP_MAGIC:
        raw.seek(0)
        return gzip.GzipFile(fileobj=raw, mode="rb"), raw
    raw.seek(0)
    return raw, raw


def read_exactly(stream, n, path, what):
    """Read n bytes or fail with a message saying the file ends early."""
    try:
        data = stream.read(n)
    except (EOFError, OSError, gzip.BadGzipFile) as e:
        raise InputError(f"{path}: the data ends early or is corrupt while reading {what} ({e})") from None
    if len(data) != n:
        raise InputError(f"{path}: the file ends early while reading {what} (truncated?)")
    return data


def _tree_size(path):
    total = 0
    for root, _, files in os.walk(path):
        total += sum(os.path.getsize(os.path.join(root, f)) for f in files)
    return total
