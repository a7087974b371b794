"""The label journal: an append-only file, one JSON record per line, fsync'd per record.

Records (every one has ``seq``, 1, 2, 3, ... and ``time``, ISO 8601 UTC):

- ``{"op": "label", "index": [i, ...], "label": [y, ...]}``: labels told together, which
  the engine applied together (one pass over X);
- ``{"op": "undo", "count": n}``: the last n labels are withdrawn;
- ``{"op": "skip", "index": [i]}``: the person put point i aside (the labelling page's
  skip): it is proposed after every other unlabeled point, until it is labeled or
  ``{"op": "unskip", "index": [i]}`` withdraws the skip. Skips change no engine state,
  so checkpoints and the label groups' digests ignore them;
- ``{"op": "correct", "point": i, "from": y0, "to": y1, "by": USER, "via": WHERE,
  "index": [i, ...], "label": [y1, ...], "times": [t, ...]}``: the answer for point i,
  one of the labels in force, changed from y0 to y1 (by whom, from where: the page, the
  command line, Python). The labels from i's on (``index``: i first) are withdrawn and
  told again in one group, with i's changed, each keeping the time it was first given
  (``times``), so an export shows when each answer was given and the record says when
  the correction was made; one record, so a crash cannot leave half a correction.

Lines are written and read by storage/journal.py: each carries ``crc``, the CRC-32 of
the record's canonical JSON without it; a record is acknowledged only after its line,
newline included, is fsync'd, so a last line without its newline is a write cut short
that nobody was told about: it is dropped. A damaged line anywhere else is an error.

:class:`History` folds the records into the label groups the engine state follows,
with a chained digest per group, so a checkpoint can prove which prefix it holds.
"""

import hashlib
from dataclasses import dataclass, field
from datetime import UTC, datetime

from ..errors import SessionCorruptError, SessionError
from ..storage import journal as lines
from ..storage.journal import canonical_json, truncate_journal

__all__ = ["History", "JournalWriter", "now", "read_journal", "truncate_journal"]


def now():
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def read_journal(path):
    """Parse the journal; raise SessionCorruptError for damage other than a torn tail."""
    try:
        contents = lines.read_journal(path)
    except lines.JournalDamagedError as e:
        raise SessionCorruptError(f"{path}: {e}; labels after it cannot be trusted") from None
    for number, record in enumerate(contents.records, 1):
        if record.get("seq") != number:
            raise SessionCorruptError(f"{path}: line {number} has seq {record.get('seq')!r}, "
                                      f"expected {number}: records are missing or repeated")
    return contents


class JournalWriter(lines.JournalWriter):
    """Appends records durably, numbered and timed; the caller holds the session lock."""

    def __init__(self, path, next_seq):
        super().__init__(path)
        self.next_seq = next_seq

    def append(self, record):
        """Write one record and fsync it; returns it with ``seq`` and ``time`` filled in."""
        if self.broken:
            raise SessionError(f"{self.path}: an earlier write failed and could not be undone; reopen the session")
        record = super().append({"seq": self.next_seq, "time": now(), **record})
        self.next_seq += 1
        return record


@dataclass
class Group:
    """Labels told together (one journal record), applied in one engine pass."""
    index: list
    label: list
    time: str
    digest: str = ""
    seq: int = 0          # the journal record that told them
    times: list | None = None    # each label's own time, when it differs (told again by a correction)

    def label_times(self):
        return self.times if self.times is not None else [self.time] * len(self.index)


GENESIS = "0" * 64
# What History.corrections keeps of each correct record: the point, its answer before and
# after, when (the record's time), by whom and from where, and the record's seq.
CORRECTION_KEYS = ("point", "from", "to", "time", "by", "via", "seq")


@dataclass
class History:
    """The label groups (and skips) in force after folding the journal's records in order."""
    groups: list = field(default_factory=list)
    undone: int = 0
    last_seq: int = 0
    skips: dict = field(default_factory=dict)     # {index: seq of its skip record}, oldest first
    corrections: list = field(default_factory=list)   # every correction made, oldest first (CORRECTION_KEYS)

    @classmethod
    def from_records(cls, records):
        history = cls()
        for record in records:
            history.apply(record)
        return history

    def apply(self, record):
        if record["op"] == "label":
            self._push(Group(list(record["index"]), list(record["label"]), record["time"], seq=record["seq"]))
            for i in record["index"]:
                self.skips.pop(i, None)           # a labeled point is no longer put aside
        elif record["op"] == "undo":
            self._withdraw(record["count"])
        elif record["op"] == "skip":
            for i in record["index"]:
                self.skips.pop(i, None)
                self.skips[i] = record["seq"]
        elif record["op"] == "unskip":
            for i in record["index"]:
                self.skips.pop(i, None)
        elif record["op"] == "correct":
            self._withdraw(len(record["index"]), undo=False)
            self._push(Group(list(record["index"]), list(record["label"]), record["time"], seq=record["seq"],
                             times=list(record["times"])))
            self.corrections.append({k: record.get(k) for k in CORRECTION_KEYS})
        else:
            raise SessionCorruptError(f"journal record {record['seq']} has unknown op {record['op']!r}")
        self.last_seq = record["seq"]

    def _push(self, group):
        previous = self.groups[-1].digest if self.groups else GENESIS
        group.digest = hashlib.sha256(previous.encode() + canonical_json([group.index, group.label])).hexdigest()
        self.groups.append(group)

    def _withdraw(self, count, undo=True):
        if not 0 < count <= self.n_labels:
            what = "undoes" if undo else "corrects"
            raise SessionCorruptError(f"the journal {what} {count} labels but only {self.n_labels} are in force")
        if undo:
            self.undone += count
        while count:
            group = self.groups.pop()
            keep = max(0, len(group.index) - count)
            count -= len(group.index) - keep
            if keep:
                self._push(Group(group.index[:keep], group.label[:keep], group.time, seq=group.seq,
                                 times=None if group.times is None else group.times[:keep]))

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
        """[(index, label, time)] in the order told; a label's time is when it was first
        given (a correction keeps the times of the labels it tells again)."""
        return [(i, y, t) for g in self.groups for i, y, t in zip(g.index, g.label, g.label_times())]

    def last(self, count):
        pairs = self.pairs()
        return pairs[len(pairs) - count:]

    @property
    def skipped(self):
        """The points put aside and not labeled since, in the order skipped."""
        return list(self.skips)

    def last_action(self):
        """What an undo on the labelling page withdraws: ("label", index, label) for
        the last label in force, or ("skip", index) when a skip in force is newer;
        None when there is neither."""
        label_seq = self.groups[-1].seq if self.groups else -1
        skip = next(reversed(self.skips.items()), None)
        if skip is not None and skip[1] > label_seq:
            return ("skip", skip[0])
        if self.groups:
            return ("label", self.groups[-1].index[-1], self.groups[-1].label[-1])
        return None
