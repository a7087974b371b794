"""Append-only journals: one JSON record per line, each with its checksum, fsync'd per record.

Each line is the record's canonical JSON with ``crc``, the CRC-32 of that JSON without
it, added. A record is acknowledged only after its line, newline included, is fsync'd,
so a last line without its newline is a write cut short that nobody was told about:
readers report it as ``torn_bytes`` and the next writer drops it. A damaged complete line
is :class:`JournalDamagedError` (what follows it cannot be trusted).

Used by sessions (session/journal.py: labels and undos, with sequence numbers) and by
experiments (experiments/resume.py: finished runs).
"""

import json
import os
import zlib
from dataclasses import dataclass


class JournalDamagedError(ValueError):
    """A complete line of a journal does not hold an intact record."""

    def __init__(self, line, reason):
        super().__init__(f"line {line} is damaged ({reason})")
        self.line, self.reason = line, reason


class JournalBrokenError(OSError):
    """An append failed and its partial line could not be removed: no more appends."""


def canonical_json(value):
    """One byte string per value: what checksums are computed over."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False).encode()


def encode_record(record):
    body = canonical_json(record)
    return body[:-1] + b',"crc":"%08x"}\n' % zlib.crc32(body)


def decode_line(line):
    """The record on one line (bytes without its newline); ValueError when damaged."""
    record = json.loads(line)
    if not isinstance(record, dict) or "crc" not in record:
        raise ValueError("no checksum")
    crc = record.pop("crc")
    if crc != f"{zlib.crc32(canonical_json(record)):08x}":
        raise ValueError("checksum mismatch")
    return record


@dataclass
class JournalContents:
    records: list
    valid_bytes: int  # length of the intact part
    torn_bytes: int  # length of a cut-short last line after it (0 if none)


def read_journal(path):
    """Every intact record of the journal at ``path``, and where a torn last line starts."""
    data = path.read_bytes()
    records, offset = [], 0
    while offset < len(data):
        end = data.find(b"\n", offset)
        if end < 0:
            return JournalContents(records, offset, len(data) - offset)
        try:
            records.append(decode_line(data[offset:end]))
        except ValueError as e:
            raise JournalDamagedError(len(records) + 1, str(e)) from None
        offset = end + 1
    return JournalContents(records, offset, 0)


class JournalWriter:
    """Appends records durably to ``path`` (created if missing); the caller makes sure it
    is the only writer (a lock). Open it after reading, and after dropping a torn tail."""

    def __init__(self, path):
        self.path = path
        self.broken = False  # a failed write could not be cut back: no more appends
        self._fh = open(path, "ab")
        self.size = self._fh.seek(0, os.SEEK_END)

    def append(self, record):
        """Write one record and fsync it; returns the record."""
        if self.broken:
            raise JournalBrokenError(f"{self.path}: an earlier write failed and could not be undone")
        line = encode_record(record)
        try:
            self._fh.write(line)
            self._fh.flush()
            os.fsync(self._fh.fileno())
        except BaseException:
            self._cut_back()
            raise
        self.size += len(line)
        return record

    def _cut_back(self):
        """After a failed append: remove whatever part of the line reached the file."""
        try:
            self._fh.close()
        except OSError:
            pass
        try:
            truncate_journal(self.path, self.size)
            self._fh = open(self.path, "ab")
        except OSError:
            self.broken = True  # the next writer drops a torn last line when it opens the journal

    def close(self):
        self._fh.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def truncate_journal(path, length):
    with open(path, "r+b") as fh:
        fh.truncate(length)
        os.fsync(fh.fileno())
