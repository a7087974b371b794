"""tools/make_abstracts.py, the generator of synthetic screening corpora (titles and abstracts
with planted relevant topics): reproducible whatever the workers, its CSV and RIS, the
prevalence and empty abstracts asked for, text with the statistics of real abstracts, and
presets ordered by difficulty. In process (the tool's main), on small corpora."""

import csv
import gzip
import importlib.util
import json
import re
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

TOOL = Path(__file__).resolve().parent.parent / "tools" / "make_abstracts.py"
COLUMNS = ["record_id", "title", "abstract", "keywords", "year", "journal", "label_included"]
SMALL = ["--vocabulary", "8000", "--topics", "40", "--topic-words", "200", "--journals", "100", "--quiet"]


def load_tool():
    """The tool as a module, registered so that its worker processes find it."""
    if "make_abstracts" not in sys.modules:
        spec = importlib.util.spec_from_file_location("make_abstracts", TOOL)
        module = importlib.util.module_from_spec(spec)
        sys.modules["make_abstracts"] = module
        spec.loader.exec_module(module)
    return sys.modules["make_abstracts"]


tool = load_tool()


def make(path, *args, small=True):
    """Run the tool; its JSON line."""
    return tool.main([str(path), *map(str, args), *(SMALL if small else ["--quiet"])])


def read_csv(path):
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", newline="", encoding="utf-8") as f:
        reader = csv.reader(f)
        header = next(reader)
        return header, list(reader)


def parse_ris(text):
    """Records of an RIS file as {tag: [values]}: every line `TG  - value`, ER closing a record."""
    records, record = [], {}
    for line in text.splitlines():
        if not line:
            continue
        assert re.match(r"^[A-Z][A-Z0-9]  - ", line), line
        tag, value = line[:2], line[6:]
        if tag == "ER":
            records.append(record)
            record = {}
        else:
            record.setdefault(tag, []).append(value)
    assert not record, "a record without ER"
    return records


@pytest.mark.parametrize("name", ["c.csv", "r.ris.gz"])
def test_same_seed_same_bytes_whatever_the_workers(tmp_path, name):
    runs = {}
    for workers in (1, 2):
        out = tmp_path / str(workers) / name
        out.parent.mkdir()
        report = make(out, "--n", 1000, "--block-records", 300, "--workers", workers, "--ris-label", "both")
        assert report["records"] == 1000 and report["workers"] == workers
        runs[workers] = out.read_bytes()
    assert runs[1] == runs[2]
    make(tmp_path / f"other-{name}", "--n", 1000, "--block-records", 300, "--seed", 1, "--workers", 1)
    assert (tmp_path / f"other-{name}").read_bytes() != runs[1]


def test_csv_columns_prevalence_and_empty_abstracts(tmp_path):
    out = tmp_path / "s.csv.gz"
    report = make(out, "--n", 5000, "--prevalence", 0.04, "--empty-abstracts", 0.07, "--block-records", 2000)
    header, rows = read_csv(out)
    assert header == COLUMNS and all(len(r) == len(COLUMNS) for r in rows)
    assert [int(r[0]) for r in rows] == list(range(5000))  # streamed in 3 blocks, in order
    labels = np.array([int(r[6]) for r in rows])
    assert set(labels) == {0, 1} and report["relevant"] == labels.sum()
    assert abs(labels.mean() - 0.04) < 0.003  # each block: the prevalence, rounded at random
    empty = np.mean([r[2] == "" for r in rows])
    assert abs(empty - 0.07) < 0.017 and report["empty_abstracts"] == sum(r[2] == "" for r in rows)
    years = [int(r[4]) for r in rows]
    assert 1965 <= min(years) and max(years) <= 2024 and all(r[1] and r[5] for r in rows)
    words = [len(r[2].split()) for r in rows if r[2]]
    assert 190 < np.median(words) < 240  # median 215 (default)
    assert 9 < np.median([len(r[1].split()) for r in rows]) < 16
    assert np.mean([r[3] != "" for r in rows]) > 0.7 and "; " in rows[0][3] + rows[1][3] + rows[2][3]


def test_ris_parses_back_to_the_csv(tmp_path):
    """The same seed writes the same records as CSV and as RIS (labels beside it and in N1)."""
    make(tmp_path / "s.csv", "--n", 300, "--seed", 4)
    make(tmp_path / "s.ris", "--n", 300, "--seed", 4, "--ris-label", "both", "--cited-refs", 2)
    _, rows = read_csv(tmp_path / "s.csv")
    text = (tmp_path / "s.ris").read_text()
    records = parse_ris(text)
    header, labels = read_csv(tmp_path / "s.labels.csv")
    assert header == ["record_id", "label_included"] and len(records) == len(rows) == len(labels) == 300
    for row, record, label in zip(rows, records, labels, strict=True):
        assert record["TY"] == ["JOUR"] and record["ID"] == [row[0]] and label[0] == row[0]
        assert record["TI"] == [row[1]] and record.get("AB", [""]) == [row[2]]
        assert record.get("KW", []) == (row[3].split("; ") if row[3] else [])
        assert record["PY"] == [row[4]] and record["JO"] == [row[5]] and record["AU"]
        assert record["N1"] == [f"label_included: {row[6]}"] and label[1] == row[6]
        assert record["DO"][0].endswith(f".{row[0]}")
    try:
        import rispy  # an independent parser, when installed
    except ImportError:
        return
    parsed = rispy.loads(text)
    assert [(r["id"], r["title"], r.get("abstract", ""), r.get("keywords", [])) for r in parsed] == [
        (row[0], row[1], row[2], row[3].split("; ") if row[3] else []) for row in rows
    ]


def test_text_has_the_statistics_of_abstracts(tmp_path):
    """Default vocabulary: Zipfian, most words in a few types (top 100: about 45% of the words,
    as in real abstracts), vocabulary growing as Heaps' law with beta about 0.5, word lengths
    of English, and topic phrases (bigrams) recurring."""
    out = tmp_path / "s.csv"
    make(out, "--n", 1200, small=False)
    _, rows = read_csv(out)
    counts, seen, growth = Counter(), 0, []
    bigrams = Counter()
    for r in rows:
        tokens = re.findall(r"[a-z0-9]+", (r[1] + " " + r[2]).lower())
        counts.update(tokens)
        bigrams.update(zip(tokens, tokens[1:], strict=False))
        seen += len(tokens)
        growth.append((seen, len(counts)))
    growth = np.array(growth[100:], dtype=float)
    beta = np.polyfit(np.log(growth[:, 0]), np.log(growth[:, 1]), 1)[0]
    top100 = sum(c for _, c in counts.most_common(100)) / seen
    chars = sum(len(w) * c for w, c in counts.items()) / seen
    assert counts.most_common(1)[0][0] == "the"
    assert 0.38 < top100 < 0.52 and 0.4 < beta < 0.65 and 4.6 < chars < 6.2
    function = set(tool.FUNCTION_WORDS)
    content_pairs = [c for (a, b), c in bigrams.most_common(3000) if a not in function and b not in function]
    assert len(content_pairs) > 100 and content_pairs[0] > 20  # recurring two-word phrases


def test_presets_are_ordered_by_difficulty(tmp_path):
    """A quick proxy of screening effort: how well TF-IDF + logistic regression trained on half
    of a set ranks the other half's relevant records (average precision). The screening
    simulation itself (records read to 95% recall, every preset in order of difficulty) is
    benchmarks/screening_synthetic.py."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import average_precision_score
    from threadpoolctl import threadpool_limits

    scores = {}
    for preset in ("easy", "medium", "hard"):
        out = tmp_path / f"{preset}.csv"
        make(out, "--n", 2000, "--preset", preset, "--prevalence", 0.05, "--workers", 1)
        _, rows = read_csv(out)
        X = TfidfVectorizer(sublinear_tf=True, min_df=2).fit_transform([r[1] + " " + r[2] for r in rows])
        y = np.array([int(r[6]) for r in rows])
        half = np.arange(len(y)) % 2 == 0
        with threadpool_limits(1):  # BLAS threads: ten times slower on a busy machine
            model = LogisticRegression(class_weight="balanced", max_iter=300).fit(X[half], y[half])
        scores[preset] = average_precision_score(y[~half], model.decision_function(X[~half]))
    # easy is far easier; medium and hard differ less than one small set's noise in this proxy
    # (the simulation separates them: 24% and 47% of the records read to 95% recall)
    assert scores["easy"] > 0.85 and max(scores["medium"], scores["hard"]) < scores["easy"] - 0.2, scores


@pytest.mark.parametrize(
    "args, message",
    [
        (["--n", 0], "--n must be >= 1"),
        (["--n", 10, "--prevalence", 1.5], "--prevalence must be in (0, 1)"),
        (["--n", 10, "--overlap", 2], "--overlap must be in [0, 1]"),
        (["--n", 10, "--topics", 5, "--inclusion-topics", 3], "--topics must be at least"),
    ],
)
def test_bad_arguments_are_one_line_errors(tmp_path, capsys, args, message):
    with pytest.raises(SystemExit) as exit_:
        tool.main([str(tmp_path / "x.csv"), *map(str, args)])
    assert exit_.value.code == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "x.csv").exists()


def test_existing_file_needs_overwrite_and_summary_line(tmp_path, capsys):
    out = tmp_path / "x.csv"
    make(out, "--n", 50)
    line = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert line["records"] == 50 and line["bytes"] == out.stat().st_size and line["format"] == "csv"
    with pytest.raises(SystemExit):
        make(out, "--n", 50)
    assert "--overwrite" in capsys.readouterr().err
    make(out, "--n", 60, "--overwrite")
    assert len(read_csv(out)[1]) == 60
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no partial files left


def test_labels_path_beside_the_ris():
    assert tool.labels_path(Path("/d/wos.ris")) == Path("/d/wos.labels.csv")
    assert tool.labels_path(Path("/d/wos.ris.gz")) == Path("/d/wos.labels.csv.gz")
