"""Resuming an experiment: what it is (DIR/experiment.json) and what is done (DIR/runs.jsonl).

experiment.json holds the experiment's identity: the store's fingerprint and every
setting a run's result depends on (budget, seed, initial labels, batch size, method
parameters), but not the methods or the number of runs, since each (method, run) record
depends only on the identity. runs.jsonl gets one line per finished (method, run),
fsync'd before the next run starts. Running the same command again skips the finished
runs; asking for more runs or other methods adds to them; a command with a different
identity on the same DIR is refused, so results never mix.

runs.jsonl is a checksummed journal (storage/journal.py): a process killed while
writing leaves at most a torn last line, which is dropped; a damaged line is an error.
"""

import json
from pathlib import Path

from ..errors import ExperimentError, ExperimentExistsError
from ..storage.atomic import atomic_write_json
from ..storage.journal import JournalDamagedError, JournalWriter, read_journal, truncate_journal

EXPERIMENT = "experiment.json"
JOURNAL = "runs.jsonl"
OUTPUTS = ("results.json", "runs.csv", "table.md", "recall.png")   # what --overwrite replaces


class Journal:
    """The finished runs of one experiment in ``out``; refuses a different experiment."""

    def __init__(self, out, identity, overwrite=False):
        self.out = Path(out)
        self.path = self.out / JOURNAL
        self._new_identity = None
        if overwrite:
            for name in (EXPERIMENT, JOURNAL, *OUTPUTS):
                (self.out / name).unlink(missing_ok=True)
        self._check_identity(identity)
        self.done = self._read()

    def _check_identity(self, identity):
        saved_path = self.out / EXPERIMENT
        if saved_path.exists():
            try:
                saved = json.loads(saved_path.read_text())
            except ValueError:
                raise ExperimentError(f"{saved_path} is damaged; pass overwrite=True to start the experiment "
                                      "again") from None
            if saved != identity:
                raise ExperimentExistsError(
                    f"{self.out} already exists for a different experiment "
                    f"({difference(saved, identity)}); rerun that command to continue it, choose another "
                    "output directory, or pass overwrite=True to replace it")
            return
        if (self.out / "results.json").exists() or self.path.exists():
            raise ExperimentExistsError(f"{self.out / 'results.json'} already exists and does not say which "
                                        "experiment made it; choose another output directory or pass overwrite=True")
        self._new_identity = identity     # written with the first finished run: a failed start leaves nothing

    def _read(self):
        """{(method, run): record} from the journal, dropping a torn last line."""
        if not self.path.exists():
            return {}
        try:
            contents = read_journal(self.path)
        except JournalDamagedError as e:
            raise ExperimentError(f"{self.path}: {e}; pass overwrite=True to start the experiment again") from None
        if contents.torn_bytes:
            truncate_journal(self.path, contents.valid_bytes)
        return {(record["method"], record["run"]): record for record in contents.records}

    def append(self, record):
        if self._new_identity is not None:
            self.out.mkdir(parents=True, exist_ok=True)
            atomic_write_json(self.out / EXPERIMENT, self._new_identity)
            self._new_identity = None
        with JournalWriter(self.path) as journal:
            journal.append(record)
        self.done[(record["method"], record["run"])] = record


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
