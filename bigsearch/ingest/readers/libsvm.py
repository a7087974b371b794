"""LIBSVM / SVMlight inputs, parsed with scikit-learn's reader block by block.

The file is cut into blocks of whole lines and each block goes to
``sklearn.datasets.load_svmlight_file``, which gives a sparse CSR matrix and the labels.
The dense width must be known before the first row is written: ``--n-features`` gives
it, otherwise a quick first pass over the lines finds the largest feature index (and
whether indices start at 0; the format's own convention is 1).
"""

import io

from ... import limits
from ...errors import InputError
from .base import Block, Column, Reader, is_gzip, open_binary
from .text import check_text, count_lines, locate, read_sample


def _sklearn_loader():
    try:
        from sklearn.datasets import load_svmlight_file
    except ImportError:
        raise InputError("reading LIBSVM files needs scikit-learn: pip install 'bigsearch[ingest]'") from None
    return load_svmlight_file


def _index_bounds(lines):
    """(smallest, largest) feature index in a pyarrow array of LIBSVM lines, or (None, None)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    if pc.any(pc.match_substring(lines, "#")).as_py():
        lines = pc.replace_substring_regex(lines, r"#.*$", "")
    first = pc.extract_regex(lines, r"^\s*\S+\s+(?:qid:\S+\s+)?(?P<i>\d+):")
    last = pc.extract_regex(lines, r"(?P<i>\d+):\S*\s*$")
    lo = pc.min(pc.cast(pc.struct_field(first, [0]), pa.int64())).as_py()
    hi = pc.max(pc.cast(pc.struct_field(last, [0]), pa.int64())).as_py()
    return lo, hi


def _is_data(line):
    return bool(line.split(b"#", 1)[0].strip())


class LibsvmReader(Reader):
    formats = ("libsvm",)
    suffixes = {".svm": "libsvm", ".libsvm": "libsvm", ".svmlight": "libsvm"}
    format = "libsvm"
    has_labels = True
    label_column_allowed = False    # the label is the first value of each line

    @classmethod
    def open(cls, path, fmt, options):
        return cls(path, n_features=None if options is None else options.n_features)

    @classmethod
    def align(cls, readers):
        """Several LIBSVM inputs share the widest width and the same index base."""
        if len(readers) > 1:
            width = max(r.n_features for r in readers)
            zero = any(r.zero_based for r in readers)
            for r in readers:
                r.zero_based, r.n_features = zero, width + (1 if zero and not r.zero_based else 0)
                r.columns = r._named(r.n_features)

    def __init__(self, path, *, n_features=None, zero_based=False):
        super().__init__(path)
        self.zero_based = zero_based
        self.n_features = n_features
        if self.size == 0:
            raise InputError(f"{path}: empty file (no data rows)")
        check_text(path, read_sample(path, 1 << 20)[0], "LIBSVM")
        if n_features is not None:
            limits.check_features(n_features, f"{path}: n_features", "pass the number of features the data has")
        self.columns = None if n_features is None else self._named(n_features)

    def _named(self, n):
        first = 0 if self.zero_based else 1
        return [Column(str(first + j), True) for j in range(n)]

    def needs_scan(self):
        return self.columns is None

    def scan(self, block_bytes):
        """First pass: the largest index and whether 0 occurs (then indices are 0-based).

        Indices are sorted within a line (the parser checks it in the second pass), so the
        last index of a line is its largest and the first its smallest: two anchored
        regular expressions over each line, run by pyarrow (about 25x faster than parsing).
        """
        lo, hi = None, -1
        for lines in self._lines(block_bytes):
            first, last = _index_bounds(lines)
            if last is not None:
                lo = first if lo is None else min(lo, first)
                hi = max(hi, last)
        if hi < 0:
            raise InputError(f"{self.path}: no feature values in any row")
        self.zero_based = lo == 0
        self.n_features = hi + 1 if self.zero_based else hi
        limits.check_features(self.n_features, f"{self.path} (its largest feature index)",
                              "check the file (a typo in an index?), or drop the rows with huge indices")
        self.columns = self._named(self.n_features)

    def _lines(self, block_bytes):
        """The file's lines as pyarrow string arrays (pyarrow's CSV reader, one column)."""
        import pyarrow as pa
        import pyarrow.csv as pacsv
        self._raw = pa.OSFile(self.path)
        stream = pa.CompressedInputStream(self._raw, "gzip") if is_gzip(self.path) else self._raw
        try:
            reader = pacsv.open_csv(
                stream, read_options=pacsv.ReadOptions(column_names=["line"], block_size=block_bytes),
                parse_options=pacsv.ParseOptions(delimiter="\x1f", quote_char=False, escape_char=False),
                convert_options=pacsv.ConvertOptions(column_types={"line": pa.string()}))
            for batch in reader:
                yield batch.column(0)
        except (pa.ArrowInvalid, OSError) as e:
            raise InputError(f"{self.path}: cannot be read as LIBSVM text after line "
                             f"{count_lines(self.path)} ({e})") from None
        finally:
            self.close()

    def blocks(self, block_bytes):
        if self.columns is None:
            self.scan(block_bytes)
        yield from self._parse(block_bytes, self.n_features, self.zero_based, count=True)

    def _parse(self, block_bytes, n_features, zero_based, count=False):
        load = _sklearn_loader()
        stream, self._raw = open_binary(self.path)
        start, line = 0, 0
        try:
            while True:
                data = self._read_lines(stream, block_bytes, line)
                if not data:
                    break
                try:
                    X, y = load(io.BytesIO(data), n_features=n_features, zero_based=zero_based)
                except ValueError as e:
                    raise self._bad_line(data, line, n_features, zero_based, e) from None
                if X.shape[0]:
                    yield Block(self, start, matrix=X, labels=y)
                start += X.shape[0]
                line += data.count(b"\n")
                if count:
                    self.rows_read = start
        finally:
            self.close()
        if start == 0:
            raise InputError(f"{self.path}: no data rows")

    def _read_lines(self, stream, block_bytes, line):
        try:
            data = stream.read(block_bytes)
            if data and not data.endswith(b"\n"):
                data += stream.readline()
        except (EOFError, OSError) as e:
            raise InputError(f"{self.path}: the gzip data ends early or is corrupt after line "
                             f"{count_lines(self.path)} ({e})") from None
        if data and not data.endswith(b"\n"):
            data += b"\n"
        return data

    def _bad_line(self, data, first_line, n_features, zero_based, error):
        """Find the first line of a block that the parser refuses, to name it."""
        load = _sklearn_loader()
        for i, text in enumerate(data.split(b"\n")):
            try:
                load(io.BytesIO(text + b"\n"), n_features=n_features, zero_based=zero_based)
            except ValueError as e:
                reason = str(e)
                if "Invalid index 0" in reason:
                    reason += "; indices start at 1 in LIBSVM files (leave out n_features to detect 0-based files)"
                return InputError(f"{self.path}, line {first_line + i + 1}: {reason}")
        return InputError(f"{self.path}, after line {first_line}: {error}")

    def where(self, row):
        line = locate(self.path, 0, row, is_data=_is_data)
        return f"{self.path}, line {line}" if line else super().where(row)
