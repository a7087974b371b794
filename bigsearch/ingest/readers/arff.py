"""ARFF (Weka) and KEEL inputs: a header of ``@relation`` / ``@attribute`` lines, then
``@data`` and comma-separated rows.

The column names come from the ``@attribute`` lines; a nominal attribute
(``{tcp, udp, icmp}``) is read as text and one-hot encoded, and a value outside its
braces is an error naming the line; ``numeric``, ``real`` and ``integer`` (KEEL adds a
range: ``real [0.0, 58329.0]``) are numbers; ``string`` is text. ``%`` starts a comment
line, ``?`` is a missing value (a missing number is an error, as in a CSV file; a missing
nominal value encodes as all zeros). KEEL's ``@inputs`` / ``@outputs`` lines are read
past. Sparse rows (``{0 x, 3 y}``) and ``date`` attributes are refused by name.

Data lines are cut into blocks of whole lines, comments and blank lines dropped, and
parsed by pyarrow's CSV reader with the header's names and types.
"""

import csv as pycsv
import io
import re

from ...errors import InputError
from .base import Block, Column, Reader, open_binary
from .csv import read_csv_bytes
from .text import check_text, count_lines, iter_lines, locate, read_sample

MISSING = "?"
NUMERIC_TYPES = ("numeric", "real", "integer")
# @attribute NAME TYPE: NAME quoted ('a b', "a b") or a bare word.
ATTRIBUTE = re.compile(r"""^@attribute\s+('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|\S+)\s*(.*)$""", re.I | re.S)
IGNORED = ("@relation", "@inputs", "@input", "@outputs", "@output")


def _pa():
    try:
        import pyarrow
        import pyarrow.csv
    except ImportError:  # pragma: no cover - exercised only without the extra
        raise InputError("reading ARFF needs pyarrow: pip install 'bigsearch[ingest]'") from None
    return pyarrow


def _is_data(line):
    text = line.strip()
    return bool(text) and not text.startswith(b"%")


class ArffReader(Reader):
    formats = ("arff",)
    suffixes = {".arff": "arff"}
    format = "arff"
    header = True

    @classmethod
    def format_of_head(cls, head):
        """ARFF and KEEL files open (after comments) with ``@relation``."""
        for line in (head or b"").splitlines():
            text = line.strip()
            if text and not text.startswith(b"%"):
                return "arff" if text.lower().startswith(b"@relation") else None
        return None

    def __init__(self, path):
        super().__init__(path)
        sample, _ = read_sample(path, 1 << 20)
        check_text(path, sample, "ARFF")
        self.columns, self.nominal, self.header_lines = self._read_header(path)

    # -- the header ---------------------------------------------------------------
    def _read_header(self, path):
        columns, nominal = [], {}
        for number, raw in iter_lines(path):
            line = raw.decode("utf-8", errors="replace").strip()
            if not line or line.startswith("%"):
                continue
            word = line.split(None, 1)[0].lower()
            if word == "@data":
                if not columns:
                    raise InputError(f"{path}, line {number}: @data before any @attribute line")
                return columns, nominal, number
            if word == "@attribute":
                name, kind = self._attribute(line, number)
                if name in {c.name for c in columns}:
                    raise InputError(f"{path}, line {number}: attribute {name!r} is declared twice")
                if isinstance(kind, tuple):
                    nominal[len(columns)] = kind
                columns.append(Column(name, kind == "number"))
            elif word not in IGNORED:
                raise InputError(
                    f"{path}, line {number}: {line[:60]!r} is not an ARFF header line "
                    "(@relation, @attribute or @data expected)"
                )
        raise InputError(f"{path}: no @data line (an ARFF/KEEL header without data)")

    def _attribute(self, line, number):
        """(name, "number" | "text" | the tuple of nominal values) of one @attribute line."""
        m = ATTRIBUTE.match(line)
        if not m or not m.group(2).strip():
            raise InputError(f"{self.path}, line {number}: an @attribute line needs a name and a type")
        name, spec = m.group(1), m.group(2).strip()
        if name[0] in "'\"":
            name = name[1:-1]
        if spec.startswith("{"):
            if not spec.endswith("}"):
                raise InputError(f"{self.path}, line {number}: the values of {name!r} lack their closing brace")
            values = next(pycsv.reader([spec[1:-1]], skipinitialspace=True, quotechar="'"), [])
            return name, tuple(v.strip() for v in values)
        kind = spec.split(None, 1)[0].split("[", 1)[0].lower()
        if kind in NUMERIC_TYPES:
            return name, "number"
        if kind == "string":
            return name, "text"
        raise InputError(
            f"{self.path}, line {number}: attribute {name!r} has type {kind!r}; "
            "bigsearch reads numeric, real, integer, string and {nominal} attributes"
        )

    # -- the data -----------------------------------------------------------------
    def blocks(self, block_bytes):
        stream, self._raw = open_binary(self.path)
        start, line = 0, 0
        try:
            for _ in range(self.header_lines):
                stream.readline()
            line = self.header_lines
            while True:
                data = stream.read(block_bytes)
                if not data:
                    break
                if not data.endswith(b"\n"):
                    data += stream.readline()
                numbers = [line + 1 + i for i, ln in enumerate(data.splitlines()) if _is_data(ln)]
                line += data.count(b"\n") + (not data.endswith(b"\n"))
                if numbers:
                    table = self._parse(data, numbers)
                    yield Block(self, start, table=table)
                    start += table.num_rows
                    self.rows_read = start
        except (EOFError, OSError) as e:
            raise InputError(
                f"{self.path}: the gzip data ends early or is corrupt after line {count_lines(self.path)} ({e})"
            ) from None
        finally:
            self.close()
        if start == 0:
            raise InputError(f"{self.path}: no data rows after @data")

    def _parse(self, data, numbers):
        pa = _pa()
        body = b"\n".join(ln for ln in data.splitlines() if _is_data(ln)) + b"\n"
        if body.lstrip().startswith(b"{"):
            raise InputError(
                f"{self.path}, line {numbers[0]}: a sparse ARFF row ({{index value, ...}}); "
                "convert the file to dense rows (e.g. with Weka's SparseToNonSparse filter)"
            )
        names = [c.name for c in self.columns]
        types = {c.name: (pa.float64() if c.numeric else pa.string()) for c in self.columns}
        try:
            table = read_csv_bytes(
                body,
                pa.csv.ReadOptions(column_names=names, block_size=max(len(body), 1 << 16)),
                parse_options=pa.csv.ParseOptions(delimiter=",", quote_char="'"),
                convert_options=pa.csv.ConvertOptions(
                    column_types=types, null_values=[MISSING, " " + MISSING], strings_can_be_null=True
                ),
            )
        except (pa.ArrowInvalid, OSError) as e:
            raise self._bad_line(body, numbers, e) from None
        self._check_nominal(table, numbers)
        return table

    def _bad_line(self, body, numbers, error):
        """The first data line of a block that pyarrow refused, and why."""
        for number, fields in zip(numbers, pycsv.reader(io.StringIO(body.decode()), quotechar="'")):
            if len(fields) != len(self.columns):
                return InputError(
                    f"{self.path}, line {number}: {len(fields)} fields where "
                    f"{len(self.columns)} were expected (one per @attribute)"
                )
            for j, (column, value) in enumerate(zip(self.columns, fields)):
                if column.numeric and value.strip() != MISSING and not _is_float(value):
                    return InputError(
                        f"{self.path}, line {number}: {value.strip()!r} in numeric attribute "
                        f"{j} ({column.name}) is not a number"
                    )
        return InputError(f"{self.path}, after line {numbers[0]}: {str(error).splitlines()[0]}")

    def _check_nominal(self, table, numbers):
        """A value outside a nominal attribute's braces is an error naming its line."""
        import pyarrow.compute as pc

        pa = _pa()
        for j, values in self.nominal.items():
            column = pc.utf8_trim_whitespace(table.column(j))
            ok = pc.or_(pc.is_in(column, value_set=pa.array(values, pa.string())), pc.is_null(column))
            if not pc.all(ok).as_py():
                row = pc.index(ok, False).as_py()
                shown = ", ".join(values[:10]) + (", ..." if len(values) > 10 else "")
                raise InputError(
                    f"{self.path}, line {numbers[row]}: {column[row].as_py()!r} is not one of the "
                    f"values declared for attribute {self.columns[j].name!r} ({{{shown}}})"
                )

    def where(self, row):
        line = locate(self.path, self.header_lines, row, is_data=_is_data)
        return f"{self.path}, line {line}" if line else super().where(row)


def _is_float(text):
    try:
        float(text)
    except ValueError:
        return False
    return True
