"""Documents for screening (issue 38) through the real CLI in subprocesses: RIS and Excel
files ingested, a session labelled, the decisions exported back (RIS, CSV) and read with
rispy and csv; the label words and the hint about a label column in the summary; errors as
one line with exit status 2; the memory of a 20,000-record RIS ingest. The sessions between
the ingest and the export are made and labelled in this process (Session: what `session new`
and `session label` run, tested through the command in test_session_cli.py)."""

import csv
import gzip
import os
import subprocess
import sys

import numpy as np
import pytest
from test_ingest_documents import rispy_entries, screening_workbook, write_ris

import bigsearch
from bigsearch import Session

from conftest import FIXTURES, run_cli

rispy = pytest.importorskip("rispy")
openpyxl = pytest.importorskip("openpyxl")

RIS_FEATURES = ["--drop", "title,abstract,keywords,authors,doi,journal,notes,urls"]  # free text is no feature here


def ok(r):
    assert r.returncode == 0, r.stderr
    return r


def error_line(r, tmp_path=None, before=None):
    """The one line of a clean failure (exit status 2, no traceback, nothing left behind)."""
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and "Traceback" not in r.stderr, r.stderr
    if before is not None:
        assert set(os.listdir(tmp_path)) == before, "something was left behind"
    return lines[0]


def drop_all_but(paths, *keep):
    from bigsearch.ingest.readers import open_reader

    names = set()
    for p in paths:
        r = open_reader(p)
        if r.needs_scan():
            r.scan(1 << 20)
        names |= {c.name for c in r.columns}
    return ["--drop", ",".join(sorted(names - set(keep)))]


def test_ris_round_trip_through_a_session(tmp_path):
    """Zotero's, EndNote's (gzipped here) and Web of Science's exports in one store; a
    session labels three records; the RIS export read back with rispy is every entry as the
    files had it, with ASReview's note of the decision first; the CSV has every column and
    label_included."""
    (tmp_path / "endnote.ris.gz").write_bytes(gzip.compress((FIXTURES / "endnote_export.ris").read_bytes()))
    sources = [FIXTURES / "zotero_export.ris", tmp_path / "endnote.ris.gz", FIXTURES / "wos_export.ris"]
    store, session = tmp_path / "refs.zarr", tmp_path / "screening"
    r = ok(run_cli("ingest", *sources, store, *drop_all_but(sources, "year", "type")))
    assert "13 rows" in r.stderr
    with Session.create(store, session, pi=0.2) as s:
        s.tell([0, 7, 11], [1, 0, 1])
    r = ok(run_cli("session", "export", session, "--out", tmp_path / "screened.ris"))
    assert "wrote 13 records (3 with a decision)" in r.stderr
    ok(run_cli("session", "export", session, "--out", tmp_path / "screened.csv", "--format", "records"))
    shown = ok(run_cli("session", "next", session, "-k", 10)).stdout.splitlines()

    expected = [e for s in sources for e in rispy_entries(s)]
    # `next` shows a field of several values a value a line, under the first (not "a\nb")
    unlabeled = [e for i, e in enumerate(expected) if i not in (0, 7, 11)]
    authors = next(e["authors"] for e in unlabeled if len(e.get("authors", ())) > 1)
    at = next(k for k, line in enumerate(shown) if line.split(maxsplit=1) == ["authors", authors[0]])
    below = shown[at + 1 : at + len(authors)]
    assert [line.strip() for line in below] == authors[1:] and all(line.startswith("    ") for line in below)
    with open(tmp_path / "screened.ris", encoding="utf-8") as fh:
        back = rispy.load(fh, enforce_list_tags=False)
    decisions = []
    for e in back:
        first, *rest = e.pop("notes")
        decisions.append(first)
        if rest:
            e["notes"] = rest
    assert [{k: dict(v) if k == "unknown_tag" else v for k, v in e.items()} for e in back] == expected
    assert decisions == [
        "ASReview_relevant" if i in (0, 11) else "ASReview_irrelevant" if i == 7 else "ASReview_not_seen"
        for i in range(13)
    ]
    # ... and the export ingested again gives the decisions back as labels, a record not seen
    # unlabeled, the decision found among a record's other notes
    assert any(len(e.get("notes", ())) > 0 for e in back)
    again = tmp_path / "again.zarr"
    r = ok(
        run_cli(
            "ingest",
            tmp_path / "screened.ris",
            again,
            "--label-column",
            "notes",
            *drop_all_but([tmp_path / "screened.ris"], "year", "type"),
        )
    )
    assert "labels: 2 positive, 1 negative, 10 unlabeled (ASReview_relevant positive, ASReview_irrelevant " in r.stderr
    assert "ASReview_not_seen/empty unlabeled" in r.stderr
    y = np.asarray(bigsearch.open_store(again).labels())
    assert y.tolist() == [1 if i in (0, 11) else 0 if i == 7 else -1 for i in range(13)]
    # the same with the positive value named: a record not seen is still no decision
    named = tmp_path / "named.zarr"
    ok(
        run_cli(
            "ingest",
            tmp_path / "screened.ris",
            named,
            "--label-column",
            "notes",
            "--positive",
            "ASReview_relevant",
            *drop_all_but([tmp_path / "screened.ris"], "year", "type"),
        )
    )
    assert np.asarray(bigsearch.open_store(named).labels()).tolist() == y.tolist()

    with open(tmp_path / "screened.csv", newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert [r["title"] for r in rows] == [e.get("title", "") for e in expected]
    assert rows[0]["authors"].split("\n") == expected[0]["authors"]
    assert [r["label_included"] for r in rows] == ["1" if i in (0, 11) else "0" if i == 7 else "" for i in range(13)]
    assert list(rows[0])[-1] == "label_included" and {"J9", "issn", "journal", "type"} <= set(rows[0])


def test_excel_round_trip_with_a_label_column(tmp_path):
    """A reviewer's sheet whose Included column says yes / no / nothing: the summary says how
    the words were read; the exported CSV has the sheet's columns and the session's decisions."""
    path = screening_workbook(tmp_path / "screening.xlsx")
    store, session = tmp_path / "x.zarr", tmp_path / "s"
    r = ok(run_cli("ingest", path, store, "--label-column", "Included", *drop_all_but([path], "Publication Year")))
    assert (
        "labels: 1 positive, 1 negative, 1 unlabeled (yes positive, no negative, empty unlabeled: the yes/no "
        "words; --positive VALUE to choose)"
    ) in r.stderr
    with Session.create(store, session, pi=0.3) as s:
        s.tell(2, 1)
    ok(run_cli("session", "export", session, "--out", tmp_path / "back.csv", "--format", "records"))
    with open(tmp_path / "back.csv", newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    sheet = list(openpyxl.load_workbook(path, read_only=True).worksheets[0].iter_rows(values_only=True))
    assert list(rows[0]) == [*sheet[0], "label_included"]
    assert [r["Article Title"] for r in rows] == [s[0] for s in sheet[1:] if any(s)]
    assert [r["Publication Year"] for r in rows] == ["2021", "2019", "2020"]
    assert [r["label_included"] for r in rows] == ["", "", "1"]


def test_the_summary_names_a_likely_label_column(tmp_path):
    path = screening_workbook(tmp_path / "screening.xlsx")
    r = ok(run_cli("ingest", path, tmp_path / "x.zarr", *drop_all_but([path], "Publication Year", "Included")))
    assert (
        "column 'Included' looks like labels (a reviewer's decisions); it was not used as labels: to use it, "
        "--label-column Included"
    ) in r.stderr
    assert "; labels: " not in r.stderr


@pytest.mark.parametrize(
    "name, text, args, words",
    [
        (
            "cut.ris",
            "TY  - JOUR\nTI  - a\nER  - \nTY  - JOUR\nTI  - b\n",
            [],
            "cut.ris, line 4: the record that starts here has no end tag line ('ER  - '): is the file cut short?",
        ),
        (
            "merged.ris",
            "TY  - JOUR\nTI  - a\nTY  - JOUR\nER  - \n",
            [],
            "merged.ris, line 3: a record begins before the record of line 1 ended",
        ),
        (
            "words.csv",
            "year,included\n2001,yes\n2002,maybe\n",
            ["--label-column", "included"],
            "words.csv, line 3: label 'maybe' in label column included is not a label word",
        ),
        (
            "mixed.csv",
            "year,included\n2001,yes\n2002,excluded\n",
            ["--label-column", "included"],
            "label column included mixes the label words of included/excluded and yes/no",
        ),
    ],
)
def test_document_errors_are_one_line(tmp_path, name, text, args, words):
    (tmp_path / name).write_text(text)
    before = set(os.listdir(tmp_path))
    message = error_line(run_cli("ingest", tmp_path / name, tmp_path / "out.zarr", *args), tmp_path, before)
    assert words in message
    if "label" in words:
        assert "--positive VALUE" in message


def test_excel_and_export_errors_are_one_line(tmp_path):
    path = screening_workbook(tmp_path / "screening.xlsx")
    message = error_line(run_cli("ingest", path, tmp_path / "o.zarr", "--sheet", "Nope"))
    assert "screening.xlsx: no sheet 'Nope' (sheets: Records, Notes)" in message
    store, session = tmp_path / "x.zarr", tmp_path / "s"
    ok(run_cli("ingest", path, store, *drop_all_but([path], "Publication Year")))
    with Session.create(store, session, pi=0.1) as s:
        s.tell(0, 0.5)
    message = error_line(run_cli("session", "export", session, "--out", tmp_path / "o.ris"))
    assert "point 0's label 0.5 is graded" in message
    (tmp_path / "taken.csv").write_text("mine")
    message = error_line(run_cli("session", "export", session, "--out", tmp_path / "taken.csv", "--format", "records"))
    assert "taken.csv already exists" in message and (tmp_path / "taken.csv").read_text() == "mine"
    np.save(tmp_path / "x.npy", np.eye(4, dtype=np.float32))  # rows of numbers: no records kept
    ok(run_cli("ingest", tmp_path / "x.npy", tmp_path / "n.zarr"))
    Session.create(tmp_path / "n.zarr", tmp_path / "n", pi=0.1).close()
    message = error_line(run_cli("session", "export", tmp_path / "n", "--out", tmp_path / "n.ris"))
    assert "n.zarr keeps no records to export" in message and not (tmp_path / "n.ris").exists()


PEAK = """import resource, sys
from bigsearch.cli import main
try:
    main(sys.argv[1:], standalone_mode=False)
finally:
    print("PEAK_KB", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)
"""


def peak_kb(*args):
    r = subprocess.run([sys.executable, "-c", PEAK, *map(str, args)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    return int(r.stderr.split("PEAK_KB")[-1].split()[0])


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_a_large_ris_export_ingests_in_bounded_memory(tmp_path):
    """20,000 records (66 MB) against 2,000 (7 MB) of the same kind: the peak RSS of the
    ingest (the tag scan, rispy's parsing a block at a time, the records kept a chunk of
    about 4 MiB at a time) grows by less than half the extra input (measured: by 0 to 20
    MB, noise from run to run; 36 MB from 5,000 records with chunks of 4,096 records)."""
    small = write_ris(tmp_path / "small.ris", 2_000, seed=0, abstract_words=400)
    big = write_ris(tmp_path / "big.ris", 20_000, seed=1, abstract_words=400)
    drop = ["--drop", "title,abstract,keywords,authors,doi,accession_number,journal,J9", "-q"]
    base = peak_kb("ingest", small, tmp_path / "small.zarr", *drop)
    peak = peak_kb("ingest", big, tmp_path / "big.zarr", *drop)
    grown = (peak - base) * 1024
    extra = os.path.getsize(big) - os.path.getsize(small)
    assert grown < extra / 2, f"peak RSS grew by {grown / 1e6:.0f} MB for {extra / 1e6:.0f} MB more input"
    from bigsearch.storage import open_store

    with open_store(tmp_path / "big.zarr") as s:
        assert s.n == 20_000
