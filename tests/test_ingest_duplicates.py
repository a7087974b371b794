"""Records that repeat an earlier one (ingest/duplicates.py): the keys against their
definition, the rows found against a direct search whatever the blocking, and ingest's
warning and --drop-duplicates (the rows written, their ids, labels and records)."""

import csv

import numpy as np
import pytest

from bigsearch.errors import ParameterError
from bigsearch.ingest import FeatureOptions, LabelOptions, SourceOptions, ingest
from bigsearch.ingest.duplicates import DuplicateFilter, DuplicateFinder
from bigsearch.serve.records import read_displays
from bigsearch.storage import open_store

from conftest import run_cli

pytest.importorskip("pyarrow")
pytest.importorskip("pandas")

# (title, abstract, doi, included) and, last, the row each repeats (None: none)
RECORDS = [
    ("Exercise for back pain", "A trial of 240 adults.", "10.1000/ABC", 1, None),
    ("Massage for back pain", "Five databases searched.", "", 0, None),
    ("exercise FOR back-pain!", "A trial of 240 adults", "", 1, 0),          # case and punctuation differ
    ("Yoga for neck pain", "Twelve weeks of yoga.", "https://doi.org/10.1000/abc", 0, 0),   # the DOI of row 0
    ("Editorial", "", "", 0, None),
    ("Editorial", "", "", 0, None),                  # a title alone: two works, not one
    ("Massage for back pain", "Five databases searched.", "10.1000/xyz", 0, 1),
    ("Tai chi for back pain", "Three trials.", "doi: 10.1000/XYZ", 1, 6),    # repeats row 6 (so row 1's work)
    ("Massage for back pain", "Another abstract.", "", 0, None),              # the same title, not the same text
]


def write_records(path, records=RECORDS):
    with open(path, "w", newline="", encoding="utf-8") as fh:
        out = csv.writer(fh)
        out.writerow(["title", "abstract", "doi", "included"])
        out.writerows(r[:4] for r in records)


def expected_repeats(records=RECORDS):
    rows = [i for i, r in enumerate(records) if r[4] is not None]
    return rows, [records[i][4] for i in rows]


@pytest.mark.parametrize("block_bytes", [100, 200, 1 << 20])   # blocks of a row or two, a few, all
def test_the_rows_repeating_an_earlier_record_whatever_the_blocking(tmp_path, block_bytes):
    from bigsearch.ingest.pipeline import Progress

    class Warnings(Progress):
        said = []

        def warn(self, message):
            self.said.append(message)

    write_records(tmp_path / "refs.csv")
    progress = Warnings()
    summary = ingest([tmp_path / "refs.csv"], tmp_path / "all.zarr", source=SourceOptions(block_bytes=block_bytes),
                     labels=LabelOptions(column="included", positive=("1",)),
                     features=FeatureOptions(text_columns=("title", "abstract"), drop=("doi",)), progress=progress)
    rows, firsts = expected_repeats()
    assert summary["duplicates"] == len(rows) and summary["duplicates_left_out"] == 0
    assert open_store(tmp_path / "all.zarr").n == len(RECORDS)
    [said] = [m for m in progress.said if "repeat" in m]
    assert said.startswith(f"{len(rows)} records repeat an earlier one")
    assert ", ".join(f"{r} repeats {f}" for r, f in zip(rows, firsts)) in said
    assert "drop_duplicates leaves them out" in said


def test_drop_duplicates_writes_the_first_of_each_with_its_row_number(tmp_path):
    write_records(tmp_path / "refs.csv")
    summary = ingest([tmp_path / "refs.csv"], tmp_path / "once.zarr", source=SourceOptions(block_bytes=120),
                     labels=LabelOptions(column="included", positive=("1",)),
                     features=FeatureOptions(text_columns=("title", "abstract"), drop=("doi",), drop_duplicates=True))
    repeated, _ = expected_repeats()
    kept = [i for i in range(len(RECORDS)) if i not in repeated]
    assert summary["duplicates_left_out"] == len(repeated) and summary["rows_written"] == len(kept)
    with open_store(tmp_path / "once.zarr") as store:
        assert store.n == len(kept)
        assert store.ids().tolist() == kept
        assert store.labels().tolist() == [RECORDS[i][3] for i in kept]
        shown = read_displays(store, list(range(store.n)))
        assert [d["fields"]["title"] for d in shown] == [RECORDS[i][0] for i in kept]
        assert store.attrs["provenance"]["duplicates_left_out"] == len(repeated)


def fnv1a_mixed(text, squeeze):
    """kernels/text.py's record_hashes of one string, computed directly."""
    mask, h, counted = (1 << 64) - 1, 0xCBF29CE484222325, 0
    for b in text.encode():
        if squeeze and b < 128 and not chr(b).isalnum():
            continue
        h = ((h ^ (b + 32 if 65 <= b <= 90 else b)) * 0x100000001B3) & mask
        counted += 1
    if not counted:
        return 0
    h = ((h ^ (h >> 30)) * 0xBF58476D1CE4E5B9) & mask
    h = ((h ^ (h >> 27)) * 0x94D049BB133111EB) & mask
    return max(h ^ (h >> 31), 1)


@pytest.mark.parametrize("squeeze", [True, False])
def test_record_hashes_against_a_direct_computation(squeeze):
    import pyarrow as pa

    from bigsearch.ingest.text import utf8_buffers
    from bigsearch.kernels.text import record_hashes

    texts = ["Exercise for back pain", "exercise FOR back-pain!", "", " -- ", "Étude: l'effet", "étude l effet",
             "10.1000/ABC", "x" * 300]
    got = record_hashes(*utf8_buffers(pa.array(texts)), squeeze).tolist()
    assert got == [fnv1a_mixed(t, squeeze) for t in texts]
    assert (got[0] == got[1]) == squeeze and got[2] == 0 and (got[3] == 0) == squeeze
    assert got[4] != got[5]          # a non-ASCII capital is not lower-cased: É and é differ


def test_the_finder_against_a_direct_search():
    """Random keys (few distinct, many absent) in random blocks, added in any order: each
    row's earliest match by either key, as a direct search finds it (a copy of a copy names
    the copy)."""
    rng = np.random.default_rng(3)
    n = 500
    keys = [rng.integers(0, 40, n).astype(np.uint64) * (rng.random(n) < 0.3) for _ in range(2)]
    cuts = np.sort(rng.choice(np.arange(1, n), 30, replace=False))
    finder = DuplicateFinder()
    blocks = list(zip(np.r_[0, cuts], np.r_[cuts, n]))
    for k in rng.permutation(len(blocks)):            # in any order, as workers may return them
        a, b = blocks[k]
        finder.add(int(a), (keys[0][a:b], keys[1][a:b]))
    rows, firsts = finder.repeats()
    direct = {}
    for i in range(n):
        earlier = [j for j in range(i) if any(k[i] and k[j] == k[i] for k in keys)]
        if earlier:
            direct[i] = min(earlier)
    assert rows.tolist() == sorted(direct) and firsts.tolist() == [direct[i] for i in sorted(direct)]
    keep = np.concatenate([DuplicateFilter(rows).keep(a, b - a) for a, b in [(0, 123), (123, 400), (400, n)]])
    assert np.flatnonzero(~keep).tolist() == rows.tolist()
    nothing = DuplicateFinder()                 # no record has a key (no DOI, no abstract)
    nothing.add(0, (np.zeros(5, np.uint64), np.zeros(5, np.uint64)))
    assert [r.tolist() for r in nothing.repeats()] == [[], []]


def test_drop_duplicates_needs_text_and_is_not_for_a_subsample(tmp_path):
    with pytest.raises(ParameterError, match="drop_duplicates applies only with text_columns"):
        FeatureOptions(drop_duplicates=True)
    write_records(tmp_path / "refs.csv")
    with pytest.raises(ParameterError, match="prevalence and drop_duplicates together"):
        ingest([tmp_path / "refs.csv"], tmp_path / "s.zarr",
               labels=LabelOptions(column="included", positive=("1",), prevalence=0.2),
               features=FeatureOptions(text_columns=("title", "abstract"), drop_duplicates=True))
    assert not (tmp_path / "s.zarr").exists()


def test_the_command_names_the_repeats_and_drops_them(tmp_path):
    write_records(tmp_path / "refs.csv")
    named = run_cli("ingest", tmp_path / "refs.csv", tmp_path / "all.zarr", "--text-column", "title,abstract",
                    "--label-column", "included", "--positive", "1")
    assert named.returncode == 0, named.stderr
    assert "Warning: 4 records repeat an earlier one" in named.stderr
    assert "(--drop-duplicates leaves them out)" in named.stderr
    dropped = run_cli("ingest", tmp_path / "refs.csv", tmp_path / "once.zarr", "--text-column", "title,abstract",
                      "--label-column", "included", "--positive", "1", "--drop-duplicates")
    assert dropped.returncode == 0, dropped.stderr
    assert "repeat an earlier one (the same" not in dropped.stderr
    assert "left out 4 records repeating an earlier one (the earliest copy of each kept)" in dropped.stderr
    assert open_store(tmp_path / "once.zarr").n == len(RECORDS) - 4
