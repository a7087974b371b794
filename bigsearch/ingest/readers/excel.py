"""Excel workbooks (``.xlsx``), read by openpyxl in its read-only mode: the sheet's XML is
parsed as it streams, row by row, so memory holds a block of rows and the workbook's table
of shared strings (where Excel keeps the text of every cell: about the size of the text).
python-calamine reads 7x faster but holds the whole sheet (docs/ingest.md has the
measurement).

The first sheet, or the one ``source.sheet`` names; its first row names the columns. A
column whose values (in the first rows read) are all numbers is numeric; a later value that
is not a number is an error naming its row. Empty rows are skipped; dates become ISO text,
booleans TRUE / FALSE (as Excel shows them).
"""

import datetime
import math
import zipfile

from ...errors import InputError
from .base import Block, Column, Reader

SAMPLE_ROWS = 1000  # rows read to tell numeric columns from text
ZIP_MAGIC = b"PK\x03\x04"


def _openpyxl():
    try:
        import openpyxl
    except ImportError:  # pragma: no cover - exercised only without the extra
        raise InputError("reading Excel needs openpyxl: pip install 'bigsearch[ingest]'") from None
    return openpyxl


class ExcelReader(Reader):
    formats = ("xlsx",)
    suffixes = {".xlsx": "xlsx", ".xlsm": "xlsx"}
    format = "xlsx"
    header = True

    @classmethod
    def format_of_head(cls, head):
        """A zip archive holding a workbook (its parts are named xl/...)."""
        return "xlsx" if head.startswith(ZIP_MAGIC) and b"xl/" in head else None

    @classmethod
    def open(cls, path, fmt, options):
        return cls(path, sheet=getattr(options, "sheet", None))

    def __init__(self, path, *, sheet=None):
        super().__init__(path)
        self.sheet, self._book, self._ws = sheet, None, None
        ws = self._worksheet()
        self.sheet, self._rows = ws.title, self._stated_rows
        rows = ws.iter_rows(values_only=True)
        header = next(rows, None)
        names = _names(self.path, self.sheet, header)
        sample = []
        for row in rows:
            if any(_present(v) for v in row):
                sample.append(row)
                if len(sample) >= SAMPLE_ROWS:
                    break
        if not sample:
            raise InputError(f"{self.path}, sheet {self.sheet!r}: no data rows (only a header)")
        numeric = [
            all(_is_number(r[j]) for r in sample if j < len(r) and _present(r[j]))
            and any(j < len(r) and _present(r[j]) for r in sample)
            for j in range(len(names))
        ]
        self.columns = [Column(n, t) for n, t in zip(names, numeric)]
        self._skipped = []  # (data row before which, how many) empty rows were skipped

    def _worksheet(self):
        """The sheet, its workbook opened once for every pass: opening a workbook reads
        each sheet that does not state its size (openpyxl writes none) whole, to find it."""
        if self._ws is None:
            openpyxl = _openpyxl()
            try:
                self._book = openpyxl.load_workbook(self.path, read_only=True, data_only=True)
            except (zipfile.BadZipFile, KeyError, OSError, ValueError) as e:
                raise InputError(f"{self.path}: not an Excel workbook (.xlsx) that can be read ({e})") from None
            self._ws = self._sheet(self._book)
        return self._ws

    def close(self):
        if self._book is not None:
            self._book.close()
        self._book = self._ws = None

    def _sheet(self, book):
        if self.sheet is None:
            ws = book.worksheets[0]
        elif self.sheet in book.sheetnames:
            ws = book[self.sheet]
        else:
            raise InputError(f"{self.path}: no sheet {self.sheet!r} (sheets: {', '.join(book.sheetnames)})")
        if not hasattr(ws, "iter_rows"):
            raise InputError(f"{self.path}: sheet {ws.title!r} is a chart, not a table of cells")
        self._stated_rows = max(0, (ws.max_row or 1) - 1)  # what the sheet says (a guess)
        ws.reset_dimensions()  # rows as stored, whatever size the sheet says it has
        return ws

    def force_text(self, j):
        self.columns[j] = Column(self.columns[j].name, False)

    def blocks(self, block_bytes):
        import pyarrow as pa

        width = len(self.columns)
        names = [c.name for c in self.columns]
        types = [pa.float64() if c.numeric else pa.string() for c in self.columns]
        ws = self._worksheet()
        start, size, skipped = 0, 0, 0
        values = [[] for _ in range(width)]
        self._skipped = []
        try:
            rows = ws.iter_rows(values_only=True)
            next(rows, None)
            for number, row in enumerate(rows, 2):
                if not any(_present(v) for v in row):
                    skipped += 1
                    continue
                if skipped:
                    self._skipped.append((start + len(values[0]), skipped))
                    skipped = 0
                if len(row) > width and any(_present(v) for v in row[width:]):
                    j = next(j for j in range(width, len(row)) if _present(row[j]))
                    raise InputError(
                        f"{self._at(number)}: a value in column {j + 1}, beyond the header's "
                        f"{width} columns; name the column in the header row"
                    )
                for j in range(width):
                    v = row[j] if j < len(row) else None
                    values[j].append(self._cell(v, j, number))
                    size += 8 if not isinstance(v, str) else len(v) + 1
                if size >= block_bytes:
                    yield self._block(pa, values, names, types, start)
                    start += len(values[0])
                    values, size = [[] for _ in range(width)], 0
            if values[0]:
                yield self._block(pa, values, names, types, start)
                start += len(values[0])
        except (zipfile.BadZipFile, OSError, ValueError, KeyError) as e:
            raise InputError(
                f"{self.path}, sheet {self.sheet!r}, after data row {start}: the workbook cannot be read ({e})"
            ) from None
        if start == 0:
            raise InputError(f"{self.path}, sheet {self.sheet!r}: no data rows (only a header)")

    def _block(self, pa, values, names, types, start):
        arrays = [pa.array(v, t) for v, t in zip(values, types)]
        self.rows_read = start + len(values[0])
        return Block(self, start, table=pa.RecordBatch.from_arrays(arrays, names=names))

    def _cell(self, v, j, number):
        if self.columns[j].numeric:
            if not _present(v):
                return None
            if not _is_number(v):
                raise InputError(
                    f"{self._at(number)}: {_text(v)!r} in numeric column {j} ({self.columns[j].name}) is not a number"
                )
            return float(v)
        return _text(v)

    def _at(self, number):
        return f"{self.path}, sheet {self.sheet!r}, row {number}"

    def where(self, row):
        """'FILE, sheet S, row R': R as Excel numbers it (the header is row 1)."""
        return self._at(row + 2 + sum(n for before, n in self._skipped if before <= row))

    def estimated_rows(self):
        return self._rows or None

    def position(self):
        """Bytes read, estimated from the rows read (the zip's reads say nothing)."""
        return min(self.size, int(self.size * self.rows_read / self._rows)) if self._rows else 0


def _names(path, sheet, header):
    if header is None or not any(_present(v) for v in header):
        raise InputError(f"{path}, sheet {sheet!r}: the first row is empty; it must name the columns")
    cells = list(header)
    while cells and not _present(cells[-1]):
        cells.pop()
    names = [_text(v).strip() or f"column{j + 1}" for j, v in enumerate(cells)]
    if len(set(names)) != len(names):
        twice = sorted({n for n in names if names.count(n) > 1})
        raise InputError(f"{path}, sheet {sheet!r}: the header row names a column twice ({', '.join(twice)})")
    return names


def _present(v):
    return v is not None and not (isinstance(v, str) and not v.strip())


def _is_number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _text(v):
    """A cell as text: '' when empty, numbers as Python writes them (2020, not 2020.0),
    dates in ISO 8601, booleans as Excel shows them."""
    if v is None:
        return ""
    if isinstance(v, bool):
        return "TRUE" if v else "FALSE"
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    if isinstance(v, (datetime.datetime, datetime.date, datetime.time)):
        return v.isoformat()
    return str(v)
