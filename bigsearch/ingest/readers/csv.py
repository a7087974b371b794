"""CSV and TSV inputs, streamed with pyarrow's CSV reader.

UCI files work as published: values padded with spaces (numbers parse as they are,
text is trimmed later), leading comment lines starting with '|' or '#' (adult.test),
blank lines. Column types are inferred once from a sample of the first file and then
fixed (integers are read as float64), so a later block cannot change its mind; a
value that does not fit its column is an error naming the line.
"""

import csv as pycsv
import re
from pathlib import Path

from ...errors import InputError
from .base import Block, Column, Reader, is_gzip
from .text import check_text, count_lines, locate, read_sample

SAMPLE_BYTES = 1 << 20
COMMENT_PREFIXES = (b"#", b"|")
DELIMITERS = ("\t", ",", ";", " ")
# pyarrow words it with or without "Row #N: " (it depends on how the block was parsed).
CONVERSION = re.compile(r"In CSV column #(\d+): (?:Row #\d+: )?CSV conversion error to \w+: invalid value '(.*)'",
                        re.S)


def _pa():
    try:
        import pyarrow
        import pyarrow.csv
    except ImportError:  # pragma: no cover - exercised only without the extra
        raise InputError("reading CSV needs pyarrow: pip install 'bigsearch[ingest]'") from None
    return pyarrow


def read_csv_bytes(body, read_options=None, **options):
    """pyarrow's ``read_csv`` over bytes in memory, on the calling thread.

    Threaded, pyarrow's reader can drop its last reference to ``body`` on one of its
    workers after ``read_csv`` has returned; if that lands while Python finalizes, the
    worker cannot take the GIL and the process aborts at exit ("terminate called without
    an active exception"). The bodies read here are samples and single blocks, so the
    threads bought nothing."""
    pa = _pa()
    read_options = read_options or pa.csv.ReadOptions()
    read_options.use_threads = False
    return pa.csv.read_csv(pa.BufferReader(body), read_options=read_options, **options)


class CsvReader(Reader):
    formats = ("csv", "tsv")
    suffixes = {".csv": "csv", ".tsv": "tsv", ".tab": "tsv"}
    format = "csv"

    @classmethod
    def open(cls, path, fmt, options):
        if options is None:
            return cls(path, fmt=fmt)
        return cls(path, delimiter=options.delimiter, header=options.header, names=options.names, fmt=fmt)

    def __init__(self, path, *, delimiter=None, header=None, names=(), fmt="csv"):
        given = tuple(names)
        super().__init__(path)
        self.format = fmt
        self._invalid = []
        sample, whole = read_sample(path, SAMPLE_BYTES)
        check_text(path, sample, fmt.upper())
        lines = sample.splitlines()
        self.skip_lines = _leading_comments(lines)
        data_lines = [ln for ln in lines[self.skip_lines:] if ln]
        if not data_lines:
            raise InputError(f"{path}: empty file (no data rows)")
        self.delimiter = delimiter or ("\t" if fmt == "tsv" else _sniff(data_lines[0]))
        body = b"\n".join(lines[self.skip_lines:]) + b"\n"
        self.header = _has_header(self, body) if header is None else header
        names, numeric = self._infer(body)
        if given or not self.header:
            names = self._source_names(names, given)
        rows = len(data_lines) - int(self.header)
        self._estimate = rows if whole else (None if is_gzip(path) else int(rows * self.size / len(sample)))
        self.columns = [Column(n, t) for n, t in zip(names, numeric)]

    def _source_names(self, names, given):
        """The names ``given`` (source.names), else those of a ``NAME.names`` file beside
        a headerless file (UCI's: ``name: ...`` lines, the class last and unnamed),
        else the generated ``f0, f1, ...``."""
        if given:
            if len(given) != len(names) or len(set(given)) != len(given):
                raise InputError(f"{self.path}: source.names gives {len(given)} distinct names for "
                                 f"{len(names)} columns; give one name per column")
            return list(given)
        described = _names_file(self.path)
        if described is not None and len(described) == len(names) - 1 and "class" not in described:
            described = [*described, "class"]
        return described if described is not None and len(described) == len(names) else names

    def force_text(self, j):
        """Read column j as text (it is categorical, or text in another input)."""
        self.columns[j] = Column(self.columns[j].name, False)

    # -- reading ------------------------------------------------------------------
    def _options(self, block_bytes):
        pa = _pa()
        ro = pa.csv.ReadOptions(block_size=block_bytes, use_threads=True,
                                column_names=[c.name for c in self.columns],
                                skip_rows=self.skip_lines + int(self.header))
        types = {c.name: (pa.float64() if c.numeric else pa.string()) for c in self.columns}
        po = pa.csv.ParseOptions(delimiter=self.delimiter, invalid_row_handler=self._on_invalid)
        co = pa.csv.ConvertOptions(column_types=types, strings_can_be_null=False)
        return ro, po, co

    def _on_invalid(self, row):
        self._invalid.append(row)
        return "error"

    def _infer(self, body):
        pa = _pa()
        ro = pa.csv.ReadOptions(autogenerate_column_names=not self.header)
        po = pa.csv.ParseOptions(delimiter=self.delimiter, invalid_row_handler=self._on_invalid)
        try:
            table = read_csv_bytes(body, ro, parse_options=po)
        except (pa.ArrowInvalid, OSError) as e:
            raise self._error(e, 0) from None
        names = [str(n).strip() for n in table.column_names]
        if len(set(names)) != len(names):
            raise InputError(f"{self.path}: the header names a column twice ({', '.join(names)})")
        return names, [_is_number(t) or _mostly_numbers(table.column(j))
                       for j, t in enumerate(table.schema.types)]

    def blocks(self, block_bytes):
        pa = _pa()
        self._raw = pa.OSFile(self.path)
        stream = pa.CompressedInputStream(self._raw, "gzip") if is_gzip(self.path) else self._raw
        ro, po, co = self._options(block_bytes)
        start = 0
        try:
            reader = pa.csv.open_csv(stream, read_options=ro, parse_options=po, convert_options=co)
            while True:
                try:
                    batch = reader.read_next_batch()
                except StopIteration:
                    break
                if batch.num_rows:
                    yield Block(self, start, table=batch)
                    start += batch.num_rows
                    self.rows_read = start
        except (pa.ArrowInvalid, OSError) as e:
            raise self._error(e, start) from None
        finally:
            self.close()
        if start == 0:
            raise InputError(f"{self.path}: no data rows (only a header or comments)")

    # -- errors ---------------------------------------------------------------------
    def _error(self, e, start):
        """An InputError naming the line, from a pyarrow error met after ``start`` good rows."""
        skip = self.skip_lines + int(self.header)
        text = str(e)
        if self._invalid:
            row = self._invalid[0]
            line = locate(self.path, skip, start, lambda ln: ln.decode(errors="replace") == row.text)
            return InputError(f"{self._at(line, start)}: {row.actual_columns} fields where "
                              f"{row.expected_columns} were expected (ragged row)")
        m = CONVERSION.search(text)
        if m:
            j, value = int(m.group(1)), m.group(2)
            line = locate(self.path, skip, start, lambda ln: self._field(ln, j) == value.strip())
            return InputError(f"{self._at(line, start)}: {value.strip()!r} in numeric column {j} "
                              f"({self.columns[j].name}) is not a number")
        if "UTF8" in text or "UTF-8" in text:
            return InputError(f"{self.path}, after data row {start}: not UTF-8 text; convert the file "
                              "(e.g. iconv -f latin1 -t utf-8) or give its columns as numbers")
        if isinstance(e, OSError) or "ompress" in text:
            return InputError(f"{self.path}: the gzip data ends early or is corrupt after line "
                              f"{count_lines(self.path)} ({text})")
        if "Empty CSV file" in text:
            return InputError(f"{self.path}: empty file (no data rows)")
        return InputError(f"{self.path}, after data row {start}: {text.splitlines()[0]}")

    def _field(self, line, j):
        fields = next(pycsv.reader([line.decode(errors="replace")], delimiter=self.delimiter), [])
        return fields[j].strip() if j < len(fields) else None

    def _at(self, line, start):
        return f"{self.path}, line {line}" if line else f"{self.path}, after data row {start}"

    def estimated_rows(self):
        return self._estimate

    def where(self, row):
        line = locate(self.path, self.skip_lines + int(self.header), row)
        return f"{self.path}, line {line}" if line else super().where(row)


def _is_number(t):
    pa = _pa()
    return pa.types.is_integer(t) or pa.types.is_floating(t)


NUMBER = r"^\s*[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?\s*$"
MOSTLY = 0.9


def _mostly_numbers(col):
    """A text column whose values are nearly all numbers is a numeric column with a stray
    value: reading it as numbers makes the stray value an error that names its line,
    rather than silently one-hot encoding a numeric column."""
    import pyarrow.compute as pc
    col = col.drop_null()
    if len(col) == 0 or not _pa().types.is_string(col.type):
        return False
    numbers = pc.sum(pc.match_substring_regex(col, NUMBER)).as_py() or 0
    return numbers >= MOSTLY * len(col) and numbers < len(col)


def _leading_comments(lines):
    n = 0
    while n < len(lines) and lines[n].lstrip().startswith(COMMENT_PREFIXES):
        n += 1
    return n


def _sniff(line):
    text = line.decode(errors="replace")
    return next((d for d in DELIMITERS if d in text), ",")


def _names_file(path):
    """The attribute names of a UCI ``.names`` file beside ``path`` (``adult.data`` ->
    ``adult.names``: lines ``name: values.`` after the class line), or None."""
    described = Path(str(path).removesuffix(".gz")).with_suffix(".names")
    try:
        text = described.read_text(errors="replace")
    except OSError:
        return None
    names = [m.group(1) for line in text.splitlines() if not line.lstrip().startswith("|")
             and (m := re.match(r"\s*([A-Za-z_][\w.\-]*)\s*:\s*\S", line))]
    return names or None


def _has_header(reader, body):
    """True when the first row is text in a column whose other values are numbers; in a
    file of text alone, when the first row looks like the columns' names (_names_over_text)."""
    pa = _pa()
    po = pa.csv.ParseOptions(delimiter=reader.delimiter)
    try:
        with_first = read_csv_bytes(body, pa.csv.ReadOptions(autogenerate_column_names=True), parse_options=po)
    except (pa.ArrowInvalid, OSError):
        return False  # _infer reports the problem with its line
    if with_first.num_rows == 1:     # one line: a header when no field is a number
        return not any(_is_number(t) for t in with_first.schema.types)
    try:
        without = read_csv_bytes(body, pa.csv.ReadOptions(autogenerate_column_names=True, skip_rows=1),
                                 parse_options=po)
    except (pa.ArrowInvalid, OSError):
        return False
    types = list(zip(with_first.schema.types, without.schema.types))
    if any(_is_number(b) and not _is_number(a) for a, b in types):
        return True
    if any(_is_number(b) for _, b in types):
        return False  # a number on the first line where numbers are below: data
    return _names_over_text(with_first)


NAME_CHARS = 64  # the longest field read as a column's name in a file of text alone


def _names_over_text(table):
    """A sample of text columns only (titles and abstracts): its first row is a header when
    its fields look like names (distinct, one line of 1-64 characters), none comes again
    below it, and one of them is shorter than every value under it ("title" above titles).
    A first record of short words ("Alice,Smith" above "Bob,Jones") is not."""
    first = [table.column(j)[0].as_py() for j in range(table.num_columns)]
    if len(set(first)) < len(first) or any(
        not isinstance(v, str) or not 0 < len(v.strip()) <= NAME_CHARS or "\n" in v for v in first
    ):
        return False
    below = [[v for v in table.column(j).to_pylist()[1:] if v] for j in range(table.num_columns)]
    if set(first) & set().union(*below):
        return False
    return any(values and len(name) < min(map(len, values)) for name, values in zip(first, below))
