"""`bigsearch ingest --text-column` (issue 38): documents into text features, the same as
ingest/text.py's functions give in this process (the CLI's worker processes change
nothing), records without an abstract kept by their title, the documents kept for display;
and no silent one-hot of free text or identifiers: what is left out is said, with how to
keep it."""

import csv
import json
from dataclasses import replace

import numpy as np
import pyarrow as pa
import pytest

import bigsearch
from bigsearch.ingest.options import TITLE_WEIGHT
from bigsearch.ingest.text import TextSpec, block_text_stats, fit_text_model, text_features
from bigsearch.storage.format import DISPLAY_ATTR, RECORDS_NAME

from conftest import run_cli

WORDS = (
    "virus metagenomics swine farm animals influenza sequencing viral diversity cattle poultry sample "
    "surveillance outbreak genome detection faecal respiratory novel species host reservoir"
).split()


def document(row, title_times=TITLE_WEIGHT):
    """A record's document as ingest joins it: the title ``title_times`` times, then the abstract."""
    return " ".join([row["title"]] * title_times + [row["abstract"]])


def corpus(n, seed=0):
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        title = " ".join(rng.choice(WORDS, 6))
        abstract = "" if i % 7 == 3 else " ".join(rng.choice(WORDS, int(rng.integers(20, 60)))) + "."
        rows.append(
            {
                "record_id": 1000 + i,
                "title": title.capitalize(),
                "abstract": abstract,
                "label_included": int(rng.random() < 0.2),
            }
        )
    return rows


def write_csv(path, rows):
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return path


def ingest_text(data, store, *flags):
    """`bigsearch ingest` of a screening export with its title and abstract as text."""
    return run_cli("ingest", data, store, "--label-column", "label_included", "--text-column", "title,abstract", *flags)


@pytest.fixture(scope="module")
def screening_csv(tmp_path_factory):
    return write_csv(tmp_path_factory.mktemp("docs") / "export.csv", corpus(300))


def test_free_text_and_identifiers_are_left_out_and_said(screening_csv, tmp_path):
    out = run_cli("ingest", screening_csv, tmp_path / "s.zarr", "--label-column", "label_included")
    assert out.returncode == 2 and "Traceback" not in out.stderr
    said = out.stderr
    assert said.startswith("Error: no feature columns are left") and said.count("\n") == 1
    assert "record_id is not one (its name says it identifies records" in said and "--keep record_id" in said
    assert "abstract is not one (free text: 258 distinct values in 300 rows" in said
    assert "title is not one (free text" in said
    assert said.rstrip().endswith("--text-column title,abstract")
    assert not (tmp_path / "s.zarr").exists()


def test_a_store_left_with_other_columns_says_how_to_compare_the_text(tmp_path):
    """With a column of numbers beside them (a year) the store is made, and one line says
    how to read the records as documents, not only a warning per column."""
    rows = [{**r, "year": 2000 + i % 20} for i, r in enumerate(corpus(300))]
    out = run_cli(
        "ingest", write_csv(tmp_path / "y.csv", rows), tmp_path / "s.zarr", "--label-column", "label_included"
    )
    assert out.returncode == 0, out.stderr
    assert "Warning: column title is not a feature: free text" in out.stderr
    assert "Warning: to compare the records by their text: --text-column title,abstract\n" in out.stderr
    assert bigsearch.open_store(tmp_path / "s.zarr").r == 1


def test_text_features_are_the_text_modules(screening_csv, tmp_path):
    store = tmp_path / "s.zarr"
    out = ingest_text(screening_csv, store, "--text-dim", "24", "--text-sample", "200")
    assert out.returncode == 0, out.stderr
    assert "record_id is not a feature" in out.stderr
    s = bigsearch.open_store(store)
    assert (s.n, s.r) == (300, 24)
    rows = list(csv.DictReader(open(screening_csv, encoding="utf-8")))
    # the title's words count three times by default (--title-weight): the title joined three times
    docs = pa.array([document(r) for r in rows])
    spec = TextSpec(columns=("title", "abstract"), column_weights=(TITLE_WEIGHT, 1), dim=24, sample=200)
    expected = text_features(docs, fit_text_model(block_text_stats(docs, spec), spec)).astype(np.float32)
    np.testing.assert_array_equal(s.read_rows(np.arange(300)), expected)
    # a record without an abstract is its title's document (joined by a space)
    no_abstract = next(i for i, r in enumerate(rows) if not r["abstract"])
    assert docs[no_abstract].as_py() == " ".join([rows[no_abstract]["title"]] * 3) + " "
    described = json.loads(run_cli("info", store, "--json").stdout)
    column = described["attrs"]["featurization"]["columns"][0]
    assert column["kind"] == "text" and column["text"]["columns"] == ["title", "abstract"]
    assert column["text"]["column_weights"] == [3, 1] and column["text"]["documents"] == 300
    # --title-weight 1: the columns joined as they are
    out = ingest_text(
        screening_csv, tmp_path / "once.zarr", "--text-dim", "24", "--text-sample", "200", "--title-weight", "1"
    )
    assert out.returncode == 0, out.stderr
    docs = pa.array([document(r, 1) for r in rows])
    spec = replace(spec, column_weights=(1, 1))
    expected = text_features(docs, fit_text_model(block_text_stats(docs, spec), spec)).astype(np.float32)
    np.testing.assert_array_equal(bigsearch.open_store(tmp_path / "once.zarr").read_rows(np.arange(300)), expected)


@pytest.mark.parametrize(
    "names, weights",
    [
        (("title", "abstract"), (2, 1)),
        (("AB", "TI"), (1, 2)),
        (("Article Title", "keywords", "abstract"), (2, 1, 1)),
        (("title",), (1,)),
        (("notes", "abstract"), (1, 1)),
    ],
)
def test_the_title_counts_more_beside_other_text_columns(names, weights):
    from bigsearch.ingest.pipeline import _text_weights

    assert _text_weights(names, 2) == weights
    assert _text_weights(names, 1) == (1,) * len(names)


def test_by_default_a_feature_per_document_and_bibliographic_data_left_out(tmp_path):
    """--text-dim auto on a small set: one feature per document, the TF-IDF cosines kept
    (the features' inner products are the text module's exact ones); the other columns of
    a document (authors, year, journal) are no features, said in one line, unless kept."""
    rows = [
        r | {"authors": f"Author {i}", "year": 1990 + i % 30, "journal": f"J{i % 4}"} for i, r in enumerate(corpus(60))
    ]
    data = write_csv(tmp_path / "export.csv", rows)
    store = tmp_path / "s.zarr"
    out = ingest_text(data, store)
    assert out.returncode == 0, out.stderr
    assert "columns authors, year, journal are not features: a document's bibliographic data" in out.stderr
    assert "(--keep NAME to make it a feature too)" in out.stderr
    s = bigsearch.open_store(store)
    assert (s.n, s.r) == (60, 60)
    docs = pa.array([document(r) for r in rows])
    Z = np.asarray(s.read_rows(np.arange(60)), np.float64)
    # the store's spec: terms in 2+ documents
    kept = TextSpec(columns=("title", "abstract"), column_weights=(TITLE_WEIGHT, 1))
    Zk = text_features(docs, fit_text_model(block_text_stats(docs, kept), replace(kept, dim=60)))
    np.testing.assert_allclose(Z, Zk, atol=1e-6)  # the text module's (test_text.py: the cosines exactly)
    out = ingest_text(data, tmp_path / "k.zarr", "--keep", "year")
    assert out.returncode == 0 and "columns authors, journal are not" in out.stderr
    assert bigsearch.open_store(tmp_path / "k.zarr").r == 61
    info = run_cli("info", store).stdout
    assert "text title x3+abstract (60 documents: TF-IDF of 1-2 word n-grams, LSA to 60)" in info


def test_the_documents_stay_for_the_page(screening_csv, tmp_path):
    store = tmp_path / "s.zarr"
    ingest_text(screening_csv, store, "--text-dim", "8", "--text-projection", "hashing")
    s = bigsearch.open_store(store)
    spec = s.attrs[DISPLAY_ATTR]
    assert spec["document"]["title"] == "title" and spec["document"]["abstract"] == "abstract"
    record = json.loads(s.read_per_row(RECORDS_NAME, [5])[0])
    assert record["title"] == list(csv.DictReader(open(screening_csv, encoding="utf-8")))[5]["title"]


def test_a_numeric_identifier_is_kept_when_asked(screening_csv, tmp_path):
    store = tmp_path / "s.zarr"
    out = ingest_text(screening_csv, store, "--text-dim", "8", "--text-projection", "hashing", "--keep", "record_id")
    assert "record_id" not in out.stderr
    assert bigsearch.open_store(store).r == 9


def test_a_category_asked_for_is_encoded(tmp_path):
    rows = [{"id_code": f"c{i % 4}", "x": float(i), "y": i % 2} for i in range(100)]
    path = write_csv(tmp_path / "c.csv", rows)
    out = run_cli("ingest", path, tmp_path / "c.zarr", "--label-column", "y")
    assert "not a feature" not in out.stderr
    assert bigsearch.open_store(tmp_path / "c.zarr").r == 5  # x and 4 categories


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--text-column", "nope"], "no such column"),
        (["--text-column", "title", "--drop", "title"], "both a text column and left out"),
        (["--text-dim", "8"], "--text-dim applies only with --text-column"),
        (["--text-column", "title", "--text-projection", "pca"], "projection"),
    ],
)
def test_bad_text_options_say_what_is_wrong(screening_csv, tmp_path, flags, message):
    out = run_cli(
        "ingest",
        screening_csv,
        tmp_path / "s.zarr",
        "--label-column",
        "label_included",
        *flags,
    )
    assert out.returncode == 2 and message in out.stderr and "Traceback" not in out.stderr


def test_numeric_labels_with_empty_cells_say_those_records_are_unlabeled(tmp_path):
    """Decisions as 1/0 with the records not screened yet left empty: the summary counts
    them, as it does for label words (before, 1 positive and 1 negative of 3 records, the
    third unsaid)."""
    rows = corpus(3)
    for row, decision in zip(rows, ["1", "0", ""]):
        row["label_included"] = decision
    done = ingest_text(write_csv(tmp_path / "refs.csv", rows), tmp_path / "s.zarr")
    assert done.returncode == 0, done.stderr
    assert "labels: 1 positive, 1 negative, 1 unlabeled (empty))" in done.stderr, done.stderr


def test_a_few_records_by_the_names_of_their_columns(tmp_path):
    """Five records are too few to tell free text or identifiers by their values (distinct
    in every file that small): a title, an abstract and a DOI are known by their columns'
    names, left out and said; a name with a space is quoted as the shell needs it."""
    rows = [
        {
            "Article Title": r["title"],
            "Abstract": r["abstract"],
            "DOI": f"10.1000/x{i}",
            "Year": 2000 + i,
            "Included": r["label_included"],
        }
        for i, r in enumerate(corpus(5))
    ]
    done = run_cli("ingest", write_csv(tmp_path / "wos.csv", rows), tmp_path / "s.zarr", "--label-column", "Included")
    assert done.returncode == 0, done.stderr
    assert "column Article Title is not a feature: free text" in done.stderr
    assert "(--text-column 'Article Title' to make text features of it" in done.stderr
    assert "column DOI is not a feature: an identifier" in done.stderr
    assert "to compare the records by their text: --text-column 'Article Title,Abstract'" in done.stderr
    assert "5 rows x 1 features" in done.stderr  # the year alone
