"""Documents for screening (issue 38), in the library: the RIS reader against rispy itself on
files as reference managers and databases write them, the Excel reader against openpyxl,
document_roles, the label words, the records kept and the export written back. The CLI,
sessions and errors in a subprocess: tests/test_documents_cli.py."""

import gzip
import io
import json
import random

import numpy as np
import pytest

from bigsearch.errors import InputError, ParameterError
from bigsearch.ingest import FeatureOptions, LabelOptions, SourceOptions, ingest
from bigsearch.ingest.documents import document_roles
from bigsearch.ingest.readers import detect_format, open_reader
from bigsearch.ingest.readers.ris import entry_of
from bigsearch.session.export_records import write_records
from bigsearch.storage import open_store

from conftest import FIXTURES

rispy = pytest.importorskip("rispy")
openpyxl = pytest.importorskip("openpyxl")

RIS_FIXTURES = ["zotero_export.ris", "endnote_export.ris", "wos_export.ris"]


def rispy_entries(path):
    """rispy's own reading of a whole file (what the reader must give back, entry for entry)."""
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8-sig") as fh:
        entries = rispy.load(fh, enforce_list_tags=False)
    return [{k: dict(v) if k == "unknown_tag" else v for k, v in e.items()} for e in entries]


def read_rows(path, block_bytes=1 << 20, options=None):
    reader = open_reader(path, options=options)
    if reader.needs_scan():
        reader.scan(block_bytes)
    rows = [row for block in reader.blocks(block_bytes) for row in block.table.to_pylist()]
    return reader, rows


def write_ris(path, n, seed=0, abstract_words=160):
    """n journal articles as a database exports them (authors, keywords, a wrapped-free
    abstract in 6 of 7, a Web of Science accession number and journal abbreviation)."""
    rng = random.Random(seed)
    words = [f"term{i}" for i in range(3000)]
    with open(path, "w", encoding="utf-8", newline="") as fh:
        for i in range(n):
            authors = "".join(
                f"AU  - Author{rng.randrange(9999)}, {chr(65 + rng.randrange(26))}.\n"
                for _ in range(rng.randrange(1, 6))
            )
            keywords = "".join(f"KW  - {rng.choice(words)} {rng.choice(words)}\n" for _ in range(rng.randrange(6)))
            abstract = "" if i % 7 == 0 else "AB  - " + " ".join(rng.choices(words, k=abstract_words)) + "\n"
            fh.write(
                f"TY  - JOUR\n{authors}TI  - {' '.join(rng.choices(words, k=12))}\nT2  - Journal "
                f"{rng.randrange(300)}\n{abstract}{keywords}PY  - {1980 + rng.randrange(45)}\n"
                f"DO  - 10.{1000 + rng.randrange(9000)}/x{i}\nAN  - WOS:{i:015d}\nJ9  - J ABBR {rng.randrange(30)}\n"
                "ER  - \n\n"
            )
    return path


# -- the RIS reader ------------------------------------------------------------------------
@pytest.mark.parametrize("name", RIS_FIXTURES)
def test_ris_records_are_rispys_entries(name):
    """Zotero's, EndNote's (BOM, CRLF, multi-line notes) and Web of Science's exports (a
    repeated SN, tags rispy does not map, a wrapped title): every record's columns give
    back rispy's entry exactly, in order, whatever the block size."""
    path = FIXTURES / name
    expected = rispy_entries(path)
    for block_bytes in (1, 700, 1 << 20):
        reader, rows = read_rows(path, block_bytes)
        assert [entry_of(row) for row in rows] == expected
    names = [c.name for c in reader.columns]
    assert names[:2] == ["title", "abstract"] and not any(c.numeric for c in reader.columns)
    assert {"authors", "year", "journal", "doi", "type"} <= set(names)


def test_ris_columns_are_the_reviewers():
    _, rows = read_rows(FIXTURES / "zotero_export.ris")
    first = rows[0]
    assert first["title"].startswith("Exercise therapy for chronic low back pain")
    assert first["authors"] == "Jansen, Marieke\nde Vries, Pieter\nOkafor, Chidi"  # joined by a newline
    assert first["keywords"] == "exercise therapy\nlow back pain\nrandomized controlled trial"
    assert (first["year"], first["journal"], first["doi"], first["type"]) == (
        "2021",
        "Journal of Musculoskeletal Research",
        "10.1234/jmr.2021.0042",
        "JOUR",
    )
    no_abstract = rows[3]
    assert no_abstract["title"].startswith("Cognitive functional therapy") and no_abstract["abstract"] is None
    _, wos = read_rows(FIXTURES / "wos_export.ris")
    assert wos[0]["issn"] == "1351-0000\n1470-0000" and wos[0]["J9"] == "OCCUP ENVIRON MED RES"
    assert wos[1]["title"].endswith(
        "a systematic review of randomized controlled trials with trial sequential analysis"
    )


def test_ris_gzip_bom_crlf_and_cr(tmp_path):
    text = (FIXTURES / "zotero_export.ris").read_bytes()
    expected = rispy_entries(FIXTURES / "zotero_export.ris")
    variants = {
        "z.ris.gz": gzip.compress(text),
        "bom_crlf.ris": b"\xef\xbb\xbf" + text.replace(b"\n", b"\r\n"),
        "cr.ris": text.replace(b"\n", b"\r"),
        "numbered.txt": b"1.\n" + text,
    }
    for name, data in variants.items():
        (tmp_path / name).write_bytes(data)
        assert detect_format(str(tmp_path / name)) == "ris", name
        assert [entry_of(r) for r in read_rows(tmp_path / name)[1]] == expected, name


def test_several_ris_files_share_their_columns():
    readers = [open_reader(FIXTURES / n) for n in RIS_FIXTURES]
    for r in readers:
        r.scan(1 << 20)
    type(readers[0]).align(readers)
    names = [[c.name for c in r.columns] for r in readers]
    assert names[0] == names[1] == names[2] and {"J9", "id", "custom3"} <= set(names[0])


@pytest.mark.parametrize(
    "text, words",
    [
        ("TY  - JOUR\nTI  - a\n", "line 1: the record that starts here has no end tag line"),
        ("TY  - JOUR\nTI  - a\nTY  - JOUR\nTI  - b\nER  - \n", "line 3: a record begins before the record of line 1"),
        ("TY - JOUR\nTI  - a\nER  - \n", "line 1: 'TY - JOUR' is not a RIS start tag line"),
        ("TY  - JOUR\nnot a tag\nER  - \n", "line 2: 'not a tag' is not a tag line"),
        ("title,abstract\na,b\n", "no RIS records"),
    ],
)
def test_ris_errors_name_the_line(tmp_path, text, words):
    path = tmp_path / "bad.ris"
    path.write_text(text)
    with pytest.raises(InputError) as e:
        read_rows(path)
    assert str(e.value).startswith(str(path)) and words in str(e.value) and "\n" not in str(e.value)


def test_ris_not_utf8_names_the_line(tmp_path):
    path = tmp_path / "latin1.ris"
    text = (FIXTURES / "zotero_export.ris").read_text() + "TY  - JOUR\nTI  - caf\xe9\nER  - \n"
    path.write_bytes(("\n" * 70_000).encode() + text.encode("latin-1", errors="replace"))
    line = 70_000 + text.splitlines().index("AU  - Müller, Jürgen") + 1  # past the sample checked first
    with pytest.raises(InputError, match=rf"latin1.ris, line {line}: not UTF-8 text \(byte 0xfc\)"):
        read_rows(path)


def test_ris_reader_memory_is_bounded_by_blocks(tmp_path):
    """20,000 records read in blocks of 1 MiB: the blocks stay near that size."""
    path = write_ris(tmp_path / "big.ris", 20_000, abstract_words=60)
    reader = open_reader(path)
    reader.scan(1 << 20)
    sizes, rows = [], 0
    for block in reader.blocks(1 << 20):
        sizes.append(block.table.nbytes)
        rows += len(block)
    assert rows == 20_000 and reader.estimated_rows() == 20_000
    assert max(sizes) < 3 << 20 and len(sizes) > 5


# -- Excel -------------------------------------------------------------------------------------
def screening_workbook(path):
    """A reviewer's sheet: the usual column names, a year column of numbers, an empty row,
    a date, and a second sheet."""
    import datetime

    wb = openpyxl.Workbook()
    ws = wb.active
    ws.title = "Records"
    ws.append(["Article Title", "Abstract", "Author Keywords", "Publication Year", "DOI", "Included", "Screened on"])
    ws.append(
        [
            "Exercise for back pain",
            "A trial of exercise.",
            "exercise; pain",
            2021,
            "10.1/a",
            "yes",
            datetime.date(2024, 3, 1),
        ]
    )
    ws.append(["Yoga for back pain", None, "yoga", 2019, "10.1/b", "no", None])
    ws.append([None] * 7)
    ws.append(["Massage for back pain", "A review.", None, 2020, None, None, None])
    other = wb.create_sheet("Notes")
    other.append(["note", "count"])
    other.append(["kept aside", 3])
    wb.save(path)
    return path


def test_excel_reads_the_first_sheet_by_header(tmp_path):
    path = screening_workbook(tmp_path / "screening.xlsx")
    assert detect_format(str(path)) == "xlsx"
    reader, rows = read_rows(path)
    assert [(c.name, c.numeric) for c in reader.columns] == [
        ("Article Title", False),
        ("Abstract", False),
        ("Author Keywords", False),
        ("Publication Year", True),
        ("DOI", False),
        ("Included", False),
        ("Screened on", False),
    ]
    assert [r["Article Title"] for r in rows] == [
        "Exercise for back pain",
        "Yoga for back pain",
        "Massage for back pain",
    ]
    assert rows[0]["Publication Year"] == 2021.0 and rows[0]["Screened on"] == "2024-03-01T00:00:00"
    assert rows[1]["Abstract"] == "" and rows[2]["Included"] == ""
    assert reader.where(2) == f"{path}, sheet 'Records', row 5"  # the empty row 4 skipped
    other, rows = read_rows(path, options=SourceOptions(sheet="Notes"))
    assert rows == [{"note": "kept aside", "count": 3.0}]
    with pytest.raises(InputError, match=r"no sheet 'Nope' \(sheets: Records, Notes\)"):
        open_reader(path, options=SourceOptions(sheet="Nope"))


def test_excel_errors_name_the_row(tmp_path):
    wb = openpyxl.Workbook()
    ws = wb.active
    ws.append(["title", "year"])
    for i in range(1500):
        ws.append([f"t{i}", 2000 + i % 20])
    ws.append(["late", "unknown"])
    ws.append(["extra", 2001, "beyond the header"])
    wb.save(tmp_path / "bad.xlsx")
    with pytest.raises(InputError, match=r"bad.xlsx, sheet 'Sheet', row 1502: 'unknown' in numeric column 1 \(year\)"):
        read_rows(tmp_path / "bad.xlsx")
    (tmp_path / "broken.xlsx").write_bytes(b"PK\x03\x04xl/ not really a workbook")
    with pytest.raises(InputError, match="broken.xlsx: not an Excel workbook"):
        open_reader(tmp_path / "broken.xlsx")


# -- document roles ------------------------------------------------------------------------------
def test_document_roles_by_the_usual_names():
    assert document_roles(["title", "abstract", "keywords", "authors", "year", "journal", "doi", "type"]) == {
        r: r for r in ("title", "abstract", "keywords", "authors", "year", "journal", "doi", "type")
    }
    scopus = [
        "Authors",
        "Title",
        "Year",
        "Source title",
        "DOI",
        "Abstract",
        "Author Keywords",
        "Index Keywords",
        "Document Type",
    ]
    assert document_roles(scopus) == {
        "title": "Title",
        "abstract": "Abstract",
        "keywords": "Author Keywords",
        "authors": "Authors",
        "year": "Year",
        "journal": "Source title",
        "doi": "DOI",
        "type": "Document Type",
    }
    wos = ["PT", "AU", "TI", "SO", "DE", "AB", "PY", "DI"]
    assert document_roles(wos) == {
        "title": "TI",
        "abstract": "AB",
        "keywords": "DE",
        "authors": "AU",
        "year": "PY",
        "journal": "SO",
        "doi": "DI",
        "type": "PT",
    }
    endnote = ["primary_title", "notes_abstract", "first_authors", "publication_year", "label"]
    assert document_roles(endnote) == {
        "title": "primary_title",
        "abstract": "notes_abstract",
        "authors": "first_authors",
        "year": "publication_year",
        "label": "label",
    }
    # the most telling name wins; case, '_', '-' and spaces alike; one role per column
    assert document_roles(["TI", "Title", "MeSH_Terms", "label_included", "Included"]) == {
        "title": "Title",
        "keywords": "MeSH_Terms",
        "label": "Included",
    }
    assert document_roles(["Label-Included", "final included"])["label"] == "Label-Included"
    for label in ("included", "label_included", "label", "included_final", "final_included", "relevant", "decision"):
        assert document_roles(["x", label.upper()]) == {"label": label.upper()}
    assert document_roles(["f0", "f1"]) == {}


# -- labels -------------------------------------------------------------------------------------------
def labels_of(tmp_path, values, **label_options):
    src = tmp_path / "labels.csv"
    src.write_text("n,decision\n" + "".join(f"{i},{v}\n" for i, v in enumerate(values)))
    out = tmp_path / f"s{len(list(tmp_path.iterdir()))}.zarr"
    summary = ingest([src], out, labels=LabelOptions(column="decision", **label_options))
    with open_store(out) as s:
        return s.labels().tolist(), summary


@pytest.mark.parametrize(
    "values, y, vocabulary",
    [
        (["yes", "No", "", "Y", "n"], [1, 0, -1, 1, 0], "yes/no"),
        (["TRUE", "false", ""], [1, 0, -1], "true/false"),
        (["Included", "excluded", "include", "EXCLUDE", ""], [1, 0, 1, 0, -1], "included/excluded"),
        (["relevant", "irrelevant", ""], [1, 0, -1], "relevant/irrelevant"),
        (["1", "0", "", "yes"], None, None),
    ],
)
def test_label_words(tmp_path, values, y, vocabulary):
    if y is None:  # 1/0 with yes: two vocabularies
        with pytest.raises(InputError, match="mixes the label words of 1/0 and yes/no"):
            labels_of(tmp_path, values)
        return
    got, summary = labels_of(tmp_path, values)
    assert got == y and summary["label_mapping"]["vocabulary"] == vocabulary
    assert set(summary["label_mapping"]["positive"]) == {v for v, t in zip(values, y) if t == 1}


def test_label_words_unknown_and_positive(tmp_path):
    with pytest.raises(InputError) as e:
        labels_of(tmp_path, ["yes", "maybe", "no"])
    message = str(e.value)
    assert "line 3: label 'maybe' in label column decision is not a label word" in message
    assert "values seen: 'maybe', 'no', 'yes'" in message and "labels.positive VALUE" in message
    got, summary = labels_of(tmp_path, ["yes", "maybe", "no", ""], positive=["maybe"])  # as before: the words given
    assert got == [0, 1, 0, -1] and summary["label_mapping"] is None
    got, _ = labels_of(tmp_path, [1, 0, "", 1])  # numbers: as before
    assert got == [1, 0, -1, 1]
    with pytest.raises(InputError, match="label 2 is not binary"):
        labels_of(tmp_path, [1, 0, 2])


def test_a_likely_label_column_is_named_not_used(tmp_path):
    src = tmp_path / "refs.csv"
    src.write_text("year,Included\n2001,yes\n2002,no\n")
    summary = ingest([src], tmp_path / "a.zarr")
    assert summary["label_column_found"] == "Included" and summary["labels"] == {}
    summary = ingest([src], tmp_path / "b.zarr", labels=LabelOptions(column="Included"))
    assert summary["label_column_found"] is None and summary["labels"] == {"0": 1, "1": 1}


# -- records and export --------------------------------------------------------------------------
def only(paths, *keep):
    """FeatureOptions that drop every column but ``keep`` (free text is no feature here)."""
    readers = [open_reader(p) for p in paths]
    for r in readers:
        if r.needs_scan():
            r.scan(1 << 20)
    names = {c.name for r in readers for c in r.columns}
    return FeatureOptions(drop=sorted(names - set(keep)))


def test_ris_records_leave_out_missing_tags_and_export_exactly(tmp_path):
    paths = [FIXTURES / n for n in RIS_FIXTURES]
    ingest(paths, tmp_path / "refs.zarr", features=only(paths, "year", "type"))
    expected = [e for p in paths for e in rispy_entries(p)]
    with open_store(tmp_path / "refs.zarr") as store:
        first = json.loads(store.read_per_row("records", np.array([3]))[0])
        assert "abstract" not in first and first["title"].startswith("Cognitive functional therapy")
        out = io.StringIO()
        assert write_records(store, [(0, 1), (4, 0), (12, 1)], out, "ris") == len(expected)
    back = rispy.loads(out.getvalue(), enforce_list_tags=False)
    decisions = []
    for e in back:  # the decision first among the notes, the entry's own notes after it
        first, *rest = e.pop("notes")
        decisions.append(first)
        if rest:
            e["notes"] = rest
    assert decisions[0] == "ASReview_relevant" and decisions[4] == "ASReview_irrelevant"
    assert decisions[12] == "ASReview_relevant" and decisions.count("ASReview_not_seen") == len(expected) - 3
    assert [{k: dict(v) if k == "unknown_tag" else v for k, v in e.items()} for e in back] == expected


def test_records_export_from_excel(tmp_path):
    import csv

    path = screening_workbook(tmp_path / "screening.xlsx")
    ingest(
        [path],
        tmp_path / "x.zarr",
        labels=LabelOptions(column="Included"),
        features=only([path], "Publication Year", "Included"),
    )
    with open_store(tmp_path / "x.zarr") as store:
        out = io.StringIO()
        write_records(store, [(2, 1), (0, 0.4)], out, "records")
        rows = list(csv.DictReader(io.StringIO(out.getvalue())))
        assert [r["Article Title"] for r in rows] == [
            "Exercise for back pain",
            "Yoga for back pain",
            "Massage for back pain",
        ]
        assert [r["Publication Year"] for r in rows] == ["2021", "2019", "2020"]  # no 2021.0
        assert [r["Included"] for r in rows] == ["yes", "no", ""]  # the source's, as it was
        assert [r["label_included"] for r in rows] == ["0.4", "", "1"]
        ris = io.StringIO()
        with pytest.raises(ParameterError, match="point 0's label 0.4 is graded"):
            write_records(store, [(0, 0.4)], ris, "ris")
        write_records(store, [(2, 1)], ris, "ris")  # roles become RIS tags
    back = rispy.loads(ris.getvalue())
    assert back[0]["title"] == "Exercise for back pain" and back[0]["keywords"] == ["exercise", "pain"]
    assert back[0]["year"] == "2021" and back[2]["notes"] == ["ASReview_relevant"]
    assert back[0]["type_of_reference"] == "JOUR"


def test_a_placeholder_for_a_missing_abstract_reads_as_an_empty_one(tmp_path):
    """Scopus writes "[No abstract available]" where a record has none: its features are
    those of the record with an empty abstract (the title alone), and the records without
    one do not share three words that make them alike."""
    rng = random.Random(0)
    words = "virus swine farm influenza sequencing cattle poultry genome outbreak host reservoir".split()
    rows = [(" ".join(rng.choices(words, k=6)), " ".join(rng.choices(words, k=40))) for _ in range(40)]
    placeholders = ["[No abstract available]", "No abstract available.", "Abstract not available"]
    stores = []
    for name, missing in (("empty", lambda k: ""), ("placeholder", lambda k: placeholders[k % 3])):
        src = tmp_path / f"{name}.csv"
        with open(src, "w", encoding="utf-8") as fh:
            fh.write("title,abstract\n")
            for k, (title, abstract) in enumerate(rows):
                fh.write(f'"{title}","{missing(k) if k % 4 == 1 else abstract}"\n')
        ingest([src], tmp_path / f"{name}.zarr", features=FeatureOptions(text_columns=["title", "abstract"]))
        with open_store(tmp_path / f"{name}.zarr") as s:
            stores.append(s.read_rows(np.arange(s.n)))
    np.testing.assert_array_equal(stores[0], stores[1])


@pytest.mark.parametrize(
    "text, header",
    [
        (
            'title,abstract\n"Swine virus in farms","We sequenced viral genomes from swine farms."\n'
            '"Cattle genome","A reference genome of cattle, from long reads."\n',
            True,
        ),
        (
            "Title;Abstract;Keywords\nSwine virus;We sequenced viral genomes.;virus\nCattle genome;A genome.;cattle\n",
            True,
        ),
        ("Alice,Smith\nBob,Jones\nCarol,Lee\n", False),  # a first record of short words
        ("red,blue\ngreen,red\nblue,green\n", False),  # its words come again below
        (
            '"Swine virus in farms","We sequenced viral genomes from swine farms over two years, at '
            'eleven sites, and report forty new species."\n"Cattle genome","A reference genome."\n',
            False,
        ),
    ],
)
def test_a_file_of_text_alone_has_its_header_found(tmp_path, text, header):
    """With no numbers to tell a header from data, a first row of short distinct names, each
    new in its column and one shorter than every value below it, is the header: a screening
    export of titles and abstracts alone read its names as a record before."""
    src = tmp_path / "refs.csv"
    src.write_text(text)
    reader = open_reader(src)
    assert reader.header is header
    assert [c.name for c in reader.columns][:2] == (
        ["title", "abstract"] if header and "title" in text else ["Title", "Abstract"] if header else ["f0", "f1"]
    )


def test_the_columns_a_reviewer_names_by_their_role(tmp_path):
    """An EndNote or Ovid export writes the title as T1 and the abstract as N2 (read as
    primary_title and notes_abstract), another file writes Title and Included: `--text-column
    title,abstract` and `--label-column included` name the columns playing those roles
    (before, no such column)."""
    ris = tmp_path / "endnote.ris"
    ris.write_text(
        "TY  - JOUR\nT1  - Swine virus in farms\nN2  - We sequenced viral genomes from swine farms.\nER  - \n\n"
        "TY  - JOUR\nT1  - Cattle genome\nN2  - A reference genome of cattle, from long reads.\nER  - \n\n"
        "TY  - JOUR\nT1  - Poultry outbreak\nER  - \n"
    )
    ingest([ris], tmp_path / "a.zarr", features=FeatureOptions(text_columns=["title", "abstract"]))
    with open_store(tmp_path / "a.zarr") as s:
        text = s.attrs["featurization"]["columns"][0]["text"]
        assert text["columns"] == ["primary_title", "notes_abstract"] and text["column_weights"] == [3, 1]
    src = tmp_path / "refs.csv"
    src.write_text(
        "Title,Abstract,Included\nSwine virus genome,We sequenced the virus genome.,1\n"
        "Cattle virus genome,A genome of the cattle virus.,0\n"
        "Poultry outbreak,Surveillance of poultry farms.,0\n"
    )
    ingest(
        [src],
        tmp_path / "b.zarr",
        features=FeatureOptions(text_columns=["title", "abstract"]),
        labels=LabelOptions(column="included"),
    )
    with open_store(tmp_path / "b.zarr") as s:
        assert s.attrs["featurization"]["columns"][0]["text"]["columns"] == ["Title", "Abstract"]
        assert s.labels().tolist() == [1, 0, 0]
