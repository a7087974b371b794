"""ARFF and KEEL inputs (bigsearch/ingest/readers/arff.py): read as scipy reads them, the
KEEL fixture through the real command, and row numbers across parser blocks. The
errors are in tests/test_ingest_errors.py."""

import numpy as np
import pytest

from bigsearch.ingest import LabelOptions, SourceOptions, ingest
from bigsearch.storage import open_store

from conftest import FIXTURES, read_all, run_cli

KEEL = FIXTURES / "kddcup_keel40.dat"


def weka_file(path, rows=300, seed=3):
    """A Weka-style ARFF file: quoted names, nominal values, '?' in a nominal column, comments."""
    rng = np.random.default_rng(seed)
    lines = [
        "% made by tests/test_ingest_arff.py",
        "@RELATION toy",
        "",
        "@ATTRIBUTE 'petal length' NUMERIC",
        "@ATTRIBUTE colour {red,green,blue}",
        "@ATTRIBUTE weight REAL",
        "@ATTRIBUTE class {yes,no}",
        "",
        "@DATA",
    ]
    for i in range(rows):
        colour = "?" if i % 37 == 5 else rng.choice(["red", "green", "blue"])
        lines.append(f"{rng.normal():.6f},{colour},{rng.uniform(0, 9):.4f},{rng.choice(['yes', 'no'])}")
        if i % 50 == 7:
            lines.append("% a comment among the rows")
    path.write_text("\n".join(lines) + "\n")
    return path


def expected_from_scipy(path):
    """X and y as scipy.io.arff reads the file: numbers as they are, each nominal column
    one-hot over its sorted values seen (a missing value: all zeros), label last."""
    from scipy.io import arff

    data, meta = arff.loadarff(str(path))
    parts = []
    for name in meta.names()[:-1]:
        col = data[name]
        if meta[name][0] == "numeric":
            parts.append(col.astype(float)[:, None])
        else:
            values = np.array([v.decode() for v in col])
            seen = sorted(set(values) - {"?"})
            parts.append(np.stack([values == v for v in seen], axis=1).astype(float))
    y = np.array([v.decode() == "yes" for v in data[meta.names()[-1]]], np.int8)
    return np.hstack(parts), y


@pytest.mark.parametrize("block_bytes", [64, 1 << 20])
def test_weka_arff_reads_as_scipy_reads_it(tmp_path, block_bytes):
    src = weka_file(tmp_path / "toy.arff")
    out = ingest(
        [src],
        tmp_path / "toy.zarr",
        source=SourceOptions(block_bytes=block_bytes),
        labels=LabelOptions(column="class", positive="yes"),
    )
    X, y = expected_from_scipy(src)
    with open_store(out["out"]) as s:
        np.testing.assert_allclose(read_all(s), X, rtol=1e-6)
        np.testing.assert_array_equal(s.labels(), y)


def keel_rows():
    """The fixture's data rows, split by hand."""
    lines = KEEL.read_text().splitlines()
    body = lines[lines.index("@data") + 1 :]
    return [[v.strip() for v in ln.split(",")] for ln in body if ln.strip() and not ln.startswith("%")]


def test_the_keel_fixture_through_the_command(tmp_path):
    out = tmp_path / "kdd.h5"
    r = run_cli("ingest", KEEL, out, "--label-column", "Class", "--positive", "smurf", "--positive", "neptune")
    assert r.returncode == 0, r.stderr
    rows = keel_rows()
    with open_store(out) as s:
        X = read_all(s)
        names = s.attrs["featurization"]["feature_names"]
        assert s.n == len(rows) == 40
        np.testing.assert_array_equal(s.labels(), [int(row[-1] in ("smurf", "neptune")) for row in rows])
    # numbers by their attribute names, categories by the values seen
    assert names[0] == "Duration" and "Serror rate" in names and "Protocol_type=icmp" in names
    np.testing.assert_array_equal(X[:, names.index("Src_bytes")], [float(row[3]) for row in rows])
    http = X[:, names.index("Service=http")]
    np.testing.assert_array_equal(http, [float(row[2] == "http") for row in rows])
    missing = [i for i, row in enumerate(rows) if row[2] == "?"]
    service = [j for j, n in enumerate(names) if n.startswith("Service=")]
    assert missing and not X[missing][:, service].any(), "a missing nominal value encodes as all zeros"
