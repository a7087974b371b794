"""RIS reference files (``.ris``): what reference managers (Zotero, EndNote, Mendeley) and
literature databases (Web of Science, Scopus, PubMed through a manager) export.

rispy, the parser ASReview uses, reads the records, a block of whole records at a time:
this module only cuts the text into records (a record runs from its ``TY  - `` line to its
``ER  - `` line) and turns rispy's entries into columns, so memory stays bounded by the
block size whatever the file's (rispy's own ``load`` reads a whole file into one list).

Columns are rispy's names for the tags found in the file (a first, cheap pass finds them:
``scan``), the reviewer's first (title, abstract, keywords, authors, year, journal, doi,
type, ...), two of them renamed to the word a reviewer uses (``TY`` type_of_reference ->
``type``; ``T2`` secondary_title -> ``journal``, where Zotero, EndNote, Mendeley and Web of
Science put an article's journal, a chapter's book or a paper's conference); tags rispy does
not map keep their tag as the column name (``J9``, ``UT``, ...). Every value is text. A tag
given several times (authors, keywords, notes, or any repeated tag) holds its values joined
by a newline, which no RIS value can hold (every value is one line, trimmed), so :func:`entry_of` undoes the join
exactly: the records kept beside the store give back rispy's entries as the file had them
(the RIS export, session/export_records.py).
"""

import io
import re
import zlib
from gzip import BadGzipFile

from ...errors import InputError
from .base import Block, Column, Reader, open_binary
from .text import check_text, iter_lines, read_sample

JOIN = "\n"  # between the values of a repeated tag: no RIS value holds a newline
RENAMED = {"type_of_reference": "type", "secondary_title": "journal"}
ORIGINAL = {v: k for k, v in RENAMED.items()}
# the columns a reviewer reads first, in this order (when the file has them)
FIRST = (
    "title",
    "primary_title",
    "abstract",
    "notes_abstract",
    "keywords",
    "authors",
    "first_authors",
    "year",
    "publication_year",
    "journal",
    "journal_name",
    "doi",
    "type",
)
SAMPLE_BYTES = 1 << 16
SCAN_BYTES = 1 << 20
# what may be a tag line: a newline, 2 characters (up to 8 bytes of UTF-8) and "  -"; rispy decides
TAG_LINE = re.compile(rb"\n([^\n]{2,8}?)  -")
ENDS = ("ER", "TY")  # the tags that end a record (TY: one not ended)


def _rispy():
    try:
        import rispy
    except ImportError:  # pragma: no cover - exercised only without the extra
        raise InputError("reading RIS needs rispy: pip install 'bigsearch[ingest]'") from None
    return rispy


def ris_parser():
    """rispy's parser as the reader uses it: nothing dropped (a tag rispy does not know is
    kept under its tag; a repeated tag keeps every value)."""
    return _rispy().RisParser(enforce_list_tags=False, skip_unknown_tags=False)


def tag_columns(tags):
    """The column name of each RIS tag (rispy's name for it, or the tag itself)."""
    mapping = _rispy().TAG_KEY_MAPPING
    out = {}
    for tag in tags:
        if tag in ("ER", "UK"):
            continue
        key = mapping.get(tag)
        out[tag] = tag if key is None else RENAMED.get(key, key)
    return out


def column_order(names):
    """The reviewer's columns first, then rispy's in its tag order, then unknown tags."""
    rispy = _rispy()
    known = [RENAMED.get(k, k) for k in rispy.TAG_KEY_MAPPING.values()]
    rank = {name: i for i, name in enumerate([*FIRST, *[k for k in known if k not in FIRST]])}
    return sorted(set(names), key=lambda n: (rank.get(n, len(rank)), n))


def list_keys():
    """rispy's keys whose values are always lists."""
    rispy = _rispy()
    from rispy.config import DELIMITED_TAG_MAPPING

    return {rispy.TAG_KEY_MAPPING[t] for t in [*rispy.LIST_TYPE_TAGS, *DELIMITED_TAG_MAPPING]}


def is_unknown_tag(name):
    """True for a column that holds a tag rispy does not map (its name is the tag)."""
    return len(name) == 2 and name not in _rispy().TAG_KEY_MAPPING.values()


def entry_of(fields):
    """rispy's entry from a record's fields (column -> text or None), exactly as rispy read
    it: the inverse of the reader's columns. Fields that are not RIS columns are ignored."""
    lists = list_keys()
    keys = set(_rispy().TAG_KEY_MAPPING.values())
    entry, unknown = {}, {}
    for name, value in fields.items():
        if value is None:
            continue
        value = str(value)
        key = ORIGINAL.get(name, name)
        if is_unknown_tag(name):
            unknown[name] = value.split(JOIN)
        elif key in keys:
            entry[key] = value.split(JOIN) if key in lists or JOIN in value else value
    if unknown:
        entry["unknown_tag"] = unknown
    return entry


class RisReader(Reader):
    formats = ("ris",)
    suffixes = {".ris": "ris"}
    format = "ris"
    header = True

    @classmethod
    def format_of_head(cls, head):
        """RIS when the first lines that are not blank hold a ``TY  - `` line (after a
        byte order mark, and a line or two some exporters put first, as rispy's ``1.``)."""
        lines = [ln for ln in head.removeprefix(b"\xef\xbb\xbf").splitlines()[:8] if ln.strip()]
        return "ris" if any(ln.startswith(b"TY  -") for ln in lines[:3]) else None

    def __init__(self, path):
        super().__init__(path)
        sample, _ = read_sample(path, SAMPLE_BYTES)
        check_text(path, sample, "RIS")
        self.parser = ris_parser()
        self._estimate = None
        self._tags = {}

    # -- the columns: a first pass finds the tags ----------------------------------------
    def needs_scan(self):
        return True

    def scan(self, block_bytes):
        """Find the tags the file uses (and count its records), reading it once as bytes."""
        tags, records, starts = set(), 0, 0
        stream, self._raw = open_binary(self.path)
        try:
            rest = b"\n" + stream.read(3).removeprefix(b"\xef\xbb\xbf")
            while True:
                data = stream.read(max(block_bytes, SCAN_BYTES))
                text = (rest + data).replace(b"\r", b"\n")  # CR or CRLF line ends too
                cut = text.rfind(b"\n") if data else len(text)  # the last line may go on
                tags.update(TAG_LINE.findall(text, 0, cut))
                records += text.count(b"\nTY  -", 0, cut)
                starts += text.count(b"\nTY", 0, cut)  # where rispy starts a record (a bad one too)
                rest = text[cut:]
                if not data:
                    break
        except (EOFError, OSError, zlib.error, BadGzipFile) as e:
            raise InputError(f"{self.path}: the gzip data ends early or is corrupt ({e})") from None
        finally:
            self.close()
            self._raw = None
        named = {t.decode(errors="replace") for t in tags}
        self._tags = tag_columns([t for t in named if self.parser.parse_line(t + "  - ")[0] == t])
        if not starts:
            raise InputError(
                f"{self.path}: no RIS records (a record starts with a 'TY  - ' line and ends with an 'ER  - ' line)"
            )
        self._estimate = records
        self.columns = [Column(name, False) for name in column_order(self._tags.values())]

    @classmethod
    def align(cls, readers):
        """Several RIS files get the same columns: every tag any of them uses."""
        names = column_order({c.name for r in readers for c in r.columns})
        for r in readers:
            r.columns = [Column(name, False) for name in names]

    def force_text(self, j):
        """Every column is text already."""

    def estimated_rows(self):
        return self._estimate

    # -- reading ---------------------------------------------------------------------------
    def blocks(self, block_bytes):
        import pyarrow as pa

        names = [c.name for c in self.columns]
        keys = [(n, ORIGINAL.get(n, n), is_unknown_tag(n)) for n in names]
        start = 0
        try:
            for starts, offsets, lines in self._record_blocks(block_bytes):
                entries = self._parse(starts, offsets, lines, start)
                values = {n: [] for n in names}
                for entry in entries:
                    unknown = entry.get("unknown_tag") or {}
                    for name, key, is_tag in keys:
                        v = unknown.get(name) if is_tag else entry.get(key)
                        values[name].append(JOIN.join(v) if isinstance(v, list) else v)
                table = pa.RecordBatch.from_arrays([pa.array(values[n], pa.string()) for n in names], names=names)
                yield Block(self, start, table=table)
                start += len(entries)
                self.rows_read = start
        finally:
            self.close()

    def _parse(self, starts, offsets, lines, first):
        """rispy's entries of a block of whole records (record k: ``lines[offsets[k]:
        offsets[k + 1]]``, from line ``starts[k]`` of the file); a record it cannot read
        (or reads into something other than one entry) is an error naming its line."""
        try:
            entries = self.parser.parse_lines(iter(lines))
        except Exception:  # noqa: BLE001 - rispy raises what its code meets; find the record
            entries = None
        if entries is not None and len(entries) == len(starts) and all(_sound(e, self._tags) for e in entries):
            return entries
        for k, (a, b) in enumerate(zip(offsets, offsets[1:])):
            try:
                one = self.parser.parse_lines(iter(lines[a:b]))
                problem = None if len(one) == 1 and _sound(one[0], self._tags) else "not one record"
            except Exception as e:  # noqa: BLE001
                problem = f"{type(e).__name__}: {e}"
            if problem:
                raise InputError(
                    f"{self.path}, line {starts[k]}: record {first + k + 1} cannot be read as RIS "
                    f"({problem}); each line of a record is a tag, two spaces, a hyphen, a space and "
                    "the value ('AU  - Smith, J.'), or the continuation of the line before"
                )
        raise InputError(
            f"{self.path}, line {starts[0]}: rispy read {len(entries or [])} records from the "
            f"{len(starts)} starting here"
        )

    def _record_blocks(self, block_bytes):
        """([first line of each record], [where each begins in lines, and the end], the
        records' lines) for blocks of whole records of about ``block_bytes``; a record cut
        short or begun inside another is an error."""
        starts, offsets, lines, size = [], [0], [], 0
        for start, record in self._records():
            starts.append(start)
            lines += record
            offsets.append(len(lines))
            size += sum(map(len, record)) + len(record)
            if size >= block_bytes:
                yield starts, offsets, lines
                starts, offsets, lines, size = [], [0], [], 0
        if starts:
            yield starts, offsets, lines

    def _records(self, track=True):
        """(line number of its TY line, its lines without blank ones) for each record;
        ``track``: the file's position is the reader's progress."""
        parse_line = self.parser.parse_line
        stream, raw = open_binary(self.path)
        if track:
            self._raw = raw
        text = io.TextIOWrapper(stream, encoding="utf-8-sig", newline=None)
        record, start, number = None, 0, 0
        try:
            for number, line in enumerate(text, 1):
                line = line.rstrip("\n")
                if record is None:
                    if line.startswith("TY"):
                        if parse_line(line)[0] != "TY":
                            raise InputError(
                                f"{self.path}, line {number}: {_shown(line)} is not a RIS start "
                                "tag line; write it 'TY  - JOUR' (two spaces, a hyphen, a space)"
                            )
                        record, start = [line], number
                    continue  # outside records: blank lines, or the numbers some writers put
                if not line.strip():
                    continue  # blank lines hold nothing (rispy would add a space to a value)
                tag = parse_line(line)[0] if line[:2] in ENDS and line[2:5] == "  -" else None
                if tag == "ER":
                    record.append(line)
                    yield start, record
                    record = None
                elif tag == "TY":
                    raise InputError(
                        f"{self.path}, line {number}: a record begins before the record of line "
                        f"{start} ended: add its end tag line 'ER  - '"
                    )
                elif len(record) == 1 and parse_line(line)[0] is None:
                    raise InputError(
                        f"{self.path}, line {number}: {_shown(line)} is not a tag line "
                        "('AU  - Smith, J.': a tag, two spaces, a hyphen, a space), and follows "
                        "its record's TY line"
                    )
                else:
                    record.append(line)
        except UnicodeDecodeError:
            raise _not_utf8(self.path) from None
        except (EOFError, OSError, zlib.error, BadGzipFile) as e:
            raise InputError(f"{self.path}: the gzip data ends early or is corrupt after line {number} ({e})") from None
        finally:
            if not track:
                raw.close()
        if record is not None:
            raise InputError(
                f"{self.path}, line {start}: the record that starts here has no end tag line "
                "('ER  - '): is the file cut short?"
            )

    def where(self, row):
        """'FILE, record R (line L)': the line of its TY tag."""
        records = self._records(track=False)
        try:
            for k, (start, _) in enumerate(records):
                if k == row:
                    return f"{self.path}, record {row + 1} (line {start})"
        except InputError:
            pass
        finally:
            records.close()
        return f"{self.path}, record {row + 1}"


def _sound(entry, tags):
    """An entry whose every key comes from a tag of the file (rispy read a line as the
    continuation of a tag from an earlier record otherwise)."""
    unknown = entry.get("unknown_tag") or {}
    return isinstance(unknown, dict) and all(isinstance(t, str) and t in tags for t in unknown)


def _not_utf8(path):
    """The error for a file that is not UTF-8, naming the first line that is not."""
    for number, line in iter_lines(path):
        try:
            line.decode("utf-8")
        except UnicodeDecodeError as e:
            return InputError(
                f"{path}, line {number}: not UTF-8 text (byte {line[e.start]:#04x}); convert it, "
                "e.g. iconv -f latin1 -t utf-8 IN > OUT"
            )
    return InputError(f"{path}: not UTF-8 text; convert it, e.g. iconv -f latin1 -t utf-8 IN > OUT")


def _shown(line, width=60):
    return repr(line if len(line) <= width else line[:width] + "...")
