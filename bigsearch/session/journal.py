"""The label journal: an append-only file, one JSON record per line, fsync'd per record.

Records (every one has ``seq``, 1, 2, 3, ... and ``time``, ISO 8601 UTC):

- ``{"op": "label", "index": [i, ...], "label": [y, ...]}``: labels told together, which
  the engine applied together (one pass over X);
- ``{"op": "undo", "count": n}``: the last n labels are withdrawn.

Each line also carries ``crc``, the CRC-32 of the record's canonical JSON without it. A
record is acknowledged only after its line, newline included, is fsync'd, so a last
line without its newline is a write cut short that nobody was told about: it is
dropped. A damaged line anywhere else is an error.

:class:`History` folds the records into the label groups the engine state follows,
with a chained digest per group, so a checkpoint can prove which prefix it holds.
"""

import hashlib
import json
import os
import zlib
from dataclasses import dataclass, field
from datetime import datetime, timezone

from ..errors import SessionCorruptError, SessionError
from .files import canonical_json


def now():
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def encode_record(record):
    body = canonical_json(record)
    return body[:-1] + b',"crc":"%08x"}\n' % zlib.crc32(body)


def decode_line(line):
    """The record on one line (bytes without its newline); ValueError when damaged."""
    record = json.loads(line)
    if not isinstance(record, dict) or "crc" not in record:
        raise ValueError("no checksum")
    crc = record.pop("crc")
    if crc != "%08x" % zlib.crc32(canonical_json(record)):
        raise ValueError("checksum mismatch")
    return record


@dataclass
class JournalContents:
    records: list
    valid_bytes: int        # length of the intact part
    torn_bytes: int         # length of a cut-short last line after it (0 if none)


def read_journal(path):
    """Parse the journal; raise SessionCorruptError for damage other than a torn tail."""
    data = path.read_bytes()
    records, offset = [], 0
    while offset < len(data):
        end = data.find(b"\n", offset)
        if end < 0:
            return JournalContents(records, offset, len(data) - offset)
        try:
            record = decode_line(data[offset:end])
        except ValueError as e:
            raise SessionCorruptError(
                f"{path}: line {len(records) + 1} is damaged ({e}); labels after it cannot be trusted") from None
        if record.get("seq") != len(records) + 1:
            raise SessionCorruptError(f"{path}: line {len(records) + 1} has seq {record.get('seq')!r}, "
                                      f"expected {len(records) + 1}: records are missing or repeated")
        records.append(record)
        offset = end + 1
    return JournalContents(records, offset, 0)


class JournalWriter:
    """Appends records durably; the caller holds the session lock."""

    def __init__(self, path, next_seq):
        self.path = path
        self.next_seq = next_seq
        self.broken = False        # a failed write could not be cut back: no more appends
        self._fh = open(path, "ab")
        self.size = self._fh.seek(0, os.SEEK_END)

    def append(self, record):
        """Write one record and fsync it; returns it with ``seq`` and ``time`` filled in."""
        if self.broken:
            raise SessionError(f"{self.path}: an earlier write failed and could not be undone; reopen the session")
        record = {"seq": self.next_seq, "time": now(), **record}
        line = encode_record(record)
        try:
            self._fh.write(line)
            self._fh.flush()
            os.fsync(self._fh.fileno())
        except BaseException:
            self._cut_back()
            raise
        self.next_seq += 1
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
            self.broken = True     # the next writer drops a torn last line when it opens the session

    def close(self):
        self._fh.close()


def truncate_journal(path, length):
    with open(path, "r+b") as fh:
        fh.truncate(length)
        os.fsync(fh.fileno())


@dataclass
class Group:
    """Labels told together (one journal record), applied in one engine pass."""
    index: list
    label: list
    time: str
    digest: str = ""


GENESIS = "0" * 64


@dataclass
class History:
    """The label groups in force after folding the journal's records in order."""
    groups: list = field(default_factory=list)
    undone: int = 0
    last_seq: int = 0

    @classmethod
    def from_records(cls, records):
        history = cls()
        for record in records:
            history.apply(record)
        return history

    def apply(self, record):
        if record["op"] == "label":
            self._push(Group(list(record["index"]), list(record["label"]), record["time"]))
        elif record["op"] == "undo":
            self._withdraw(record["count"])
        else:
            raise SessionCorruptError(f"journal record {record['seq']} has unknown op {record['op']!r}")
        self.last_seq = record["seq"]

    def _push(self, group):
        previous = self.groups[-1].digest if self.groups else GENESIS
        group.digest = hashlib.sha256(previous.encode() + canonical_json([group.index, group.label])).hexdigest()
        self.groups.append(group)

    def _withdraw(self, count):
        if not 0 < count <= self.n_labels:
            raise SessionCorruptError(f"the journal undoes {count} labels but only {self.n_labels} are in force")
        self.undone += count
        while count:
            group = self.groups.pop()
            keep = max(0, len(group.index) - count)
            count -= len(group.index) - keep
            if keep:
                self._push(Group(group.index[:keep], group.label[:keep], group.time))

    def digest(self, n_groups):
        """The chained digest of the first n_groups groups."""
        return self.groups[n_groups - 1].digest if n_groups else GENESIS

    @property
    def n_labels(self):
        return sum(len(g.index) for g in self.groups)

    def pairs(self):
        """[(index, label)] in the order told."""
        return [(i, y) for g in self.groups for i, y in zip(g.index, g.label)]

    def rows(self):
        """[(index, label, time)] in the order told."""
        return [(i, y, g.time) for g in self.groups for i, y in zip(g.index, g.label)]

    def last(self, count):
        pairs = self.pairs()
        return pairs[len(pairs) - count:]
