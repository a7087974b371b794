"""Resuming an experiment: what it is and what is done (DIR/runs.jsonl).

The journal runs.jsonl starts with a header record, ``{"experiment": identity}``: the
store's fingerprint, a SHA-256 of its labels y (the oracle), and every setting a run's
result depends on (budget, seed, initial labels, batch size, each method's options), but
not the methods or the number of runs, since each (method, run) record depends only on the
identity. Then one record per finished (method, run), fsync'd before the next run starts.
experiment.json is a readable copy of the identity (the header wins when they differ).
Running the same command again skips the finished runs; asking for more runs or other
methods adds to them, and so does changing the options of a method with no finished run
(a run that failed, e.g. for an option the data refused: the corrected command continues);
a command with a different identity on the same DIR is refused, so results never mix.

``--overwrite`` replaces only an experiment's own files, and only once the new
experiment's first run is finished: the old outputs (which the old journal can remake)
are removed, then the new journal (header and that run) is written under a temporary
name, fsync'd, and renamed over the old one in one step, so a kill at any moment leaves
either the old experiment or the new one, never neither.

runs.jsonl is a checksummed journal (storage/journal.py): a process killed while
writing leaves at most a torn last line, which is dropped; a damaged line is an error.
"""

import json
from pathlib import Path

from ..errors import ExperimentError, ExperimentExistsError
from ..storage.atomic import atomic_write_bytes, atomic_write_json
from ..storage.journal import JournalDamagedError, JournalWriter, encode_record, read_journal, truncate_journal

EXPERIMENT = "experiment.json"
JOURNAL = "runs.jsonl"
# what --overwrite replaces
OUTPUTS = ("results.json", "runs.csv", "ranking.csv", "table.md", "recall.png", "recall.pdf", "recall.svg")


class Journal:
    """The finished runs of one experiment in ``out``; refuses a different experiment.

    With ``overwrite``, the experiment in ``out`` (if any) is ignored and replaced when
    the first run of the new one is appended; nothing is deleted before.
    """

    def __init__(self, out, identity, overwrite=False):
        self.out = Path(out)
        self.path = self.out / JOURNAL
        self.identity = identity
        self._replace = False        # the journal on disk is not ours yet: the first append replaces it
        if overwrite:
            check_ours(self.out)
            self._replace, self.done = True, {}
            return
        saved, records = self._read()
        if saved is None:
            if (self.out / "results.json").exists():
                raise ExperimentExistsError(f"{self.out / 'results.json'} already exists and does not say which "
                                            "experiment made it; choose another output directory or pass "
                                            "overwrite=True")
            self._replace = True     # written with the first finished run: a failed start leaves nothing
        self.done = {(r["method"], r["run"]): r for r in records}
        if saved is not None and saved != identity:
            self._adopt(saved, identity, records)

    def _adopt(self, saved, identity, records):
        """Continue the experiment in ``out`` with ``identity`` when they differ only in the
        options of methods with no finished run (else refuse); the header then says them."""
        finished = {method for method, _ in self.done}
        options = {**saved.get("options", {}), **identity["options"]}
        merged = {**identity, "options": options}
        kept = {k: v for k, v in saved.items() if k != "options"}
        ours = {k: v for k, v in identity.items() if k != "options"}
        if kept != ours or any(saved["options"].get(m) != options.get(m) for m in finished):
            raise ExperimentExistsError(
                f"{self.out} already exists for a different experiment "
                f"({difference(saved, merged)}); rerun that command to continue it, choose another "
                "output directory, or pass overwrite=True to replace it")
        self.identity = merged
        if merged != saved:
            atomic_write_bytes(self.path, b"".join(encode_record(r) for r in [{"experiment": merged}, *records]))
            atomic_write_json(self.out / EXPERIMENT, merged)

    def _read(self):
        """(identity or None, run records), dropping a torn last line; the identity comes
        from the journal's header, else from experiment.json."""
        header, records = None, []
        if self.path.exists():
            try:
                contents = read_journal(self.path)
            except JournalDamagedError as e:
                raise ExperimentError(f"{self.path}: {e}; pass overwrite=True to start the experiment again") from None
            if contents.torn_bytes:
                truncate_journal(self.path, contents.valid_bytes)
            records = contents.records
            if records and "experiment" in records[0]:
                header = records.pop(0)["experiment"]
        saved = _read_json(self.out / EXPERIMENT)
        if header is None and (self.out / EXPERIMENT).exists():
            if saved is None:
                raise ExperimentError(f"{self.out / EXPERIMENT} is damaged; pass overwrite=True to start the "
                                      "experiment again")
            header = saved
        elif header is not None and saved != header:
            atomic_write_json(self.out / EXPERIMENT, header)     # killed between the journal and the copy
        if header is None and records:
            raise ExperimentError(f"{self.path} does not say which experiment it holds; choose another output "
                                  "directory or pass overwrite=True")
        return header, records

    def append(self, record):
        if self._replace:
            self._start(record)
        else:
            with JournalWriter(self.path) as journal:
                journal.append(record)
        self.done[(record["method"], record["run"])] = record

    def _start(self, record):
        """Drop the outputs of an experiment being replaced, then publish the new journal
        (header and first run) in one rename, then its readable identity."""
        self.out.mkdir(parents=True, exist_ok=True)
        for name in OUTPUTS:
            (self.out / name).unlink(missing_ok=True)
        atomic_write_bytes(self.path, encode_record({"experiment": self.identity}) + encode_record(record))
        atomic_write_json(self.out / EXPERIMENT, self.identity)
        self._replace = False


def check_ours(out):
    """Refuse to overwrite a directory that does not hold a bigsearch experiment."""
    out = Path(out)
    if not out.exists():
        return
    if not out.is_dir():
        raise ExperimentExistsError(f"{out} is a file, not a results directory; choose another output directory")
    names = {p.name for p in out.iterdir() if not p.name.startswith(".")}
    ours = (EXPERIMENT in names or JOURNAL in names
            or "bigsearch_version" in (_read_json(out / "results.json") or {}))
    if names and not ours:
        raise ExperimentExistsError(f"{out} is not the results of a bigsearch experiment (it holds "
                                    f"{', '.join(sorted(names)[:5])}); overwrite=True replaces only those: "
                                    "choose another output directory")


def _read_json(path):
    try:
        value = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def difference(saved, new, where=""):
    """The first setting that differs, in words: 'budget 200 there, 100 here'."""
    for key in sorted(set(saved) | set(new)):
        a, b = saved.get(key), new.get(key)
        if a != b:
            if isinstance(a, dict) and isinstance(b, dict):
                return difference(a, b, f"{where}{key}.")
            if where.startswith("store."):
                return "a different store: " + ("its contents differ" if key.endswith("sha256")
                                                else f"{key} {json.dumps(a)} there, {json.dumps(b)} here")
            return f"{where}{key} {json.dumps(a)} there, {json.dumps(b)} here"
    return "no difference"
