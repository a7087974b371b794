"""The contracts of ingest: validated option groups, the reader registry (a reader added
from outside runs end to end), and no import cycles among the ingest modules."""

import ast
import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from bigsearch.errors import ParameterError
from bigsearch.ingest import (
    READERS,
    FeatureOptions,
    LabelOptions,
    OutputOptions,
    SourceOptions,
    detect_format,
    ingest,
    register_reader,
)
from bigsearch.ingest.readers import Block, Column, Reader, open_reader
from bigsearch.storage import open_store

INGEST = Path(__file__).resolve().parents[1] / "bigsearch" / "ingest"


@pytest.mark.parametrize(
    "make, words",
    [
        (lambda: SourceOptions(format="xls"), "source format 'xls' is not one of csv, tsv, libsvm"),
        (lambda: SourceOptions(n_features=0), "n_features must be at least 1"),
        (lambda: SourceOptions(block_bytes=0), "block_bytes must be at least 1"),
        (lambda: SourceOptions(delimiter=";;"), "give one character"),
        (lambda: LabelOptions(prevalence=1.0), "prevalence must be in (0, 1)"),
        (lambda: FeatureOptions(bins=1), "K >= 2"),
        (lambda: FeatureOptions(rff=0), "D >= 1"),
        (lambda: FeatureOptions(rff=8, gamma=0), "a finite value > 0"),
        (lambda: OutputOptions(format="parquet"), "output format 'parquet' is not one of zarr, hdf5"),
        (lambda: OutputOptions(dtype="int8"), "dtype 'int8' is not one of float32, float64"),
        (lambda: OutputOptions(codec="snappy"), "codec 'snappy' is not one of none"),
        (lambda: OutputOptions(chunk_rows=0), "chunk_rows must be at least 1"),
    ],
)
def test_bad_options_fail_when_made(make, words):
    with pytest.raises(ParameterError) as e:
        make()
    assert words in str(e.value)


def test_groups_are_frozen_and_hashable():
    labels = LabelOptions(files=[Path("a.idx")], positive=">50K")
    assert labels.files == ("a.idx",) and labels.positive == (">50K",)
    assert hash(labels) == hash(LabelOptions(files=("a.idx",), positive=(">50K",)))
    with pytest.raises(dataclasses.FrozenInstanceError):
        labels.column = 3
    assert FeatureOptions(rff=16, gamma=0.5, seed=3).rff_spec == {"dim": 16, "gamma": 0.5, "seed": 3}
    assert FeatureOptions().rff_spec is None


def test_ingest_refuses_a_group_of_the_wrong_kind(tmp_path):
    np.save(tmp_path / "a.npy", np.ones((3, 2)))
    with pytest.raises(ParameterError, match="labels must be a LabelOptions"):
        ingest([tmp_path / "a.npy"], tmp_path / "o.zarr", labels={"column": 0})
    assert not (tmp_path / "o.zarr").exists()


class JsonLinesReader(Reader):
    """A reader written outside the package: one JSON list of numbers per line."""

    formats = ("jsonl",)
    suffixes = {".jsonl": "jsonl"}
    format = "jsonl"

    def __init__(self, path):
        super().__init__(path)
        with open(path) as fh:
            self.rows = [json.loads(line) for line in fh if line.strip()]
        self.n = len(self.rows)
        self.columns = [Column(f"v{j}", True) for j in range(len(self.rows[0]))]

    def blocks(self, block_bytes):
        for a in range(0, self.n, 2):
            self.rows_read = min(self.n, a + 2)
            yield Block(self, a, matrix=np.array(self.rows[a : a + 2], np.float64))


@pytest.fixture
def jsonl_registered(monkeypatch):
    monkeypatch.setattr("bigsearch.ingest.readers.READERS", dict(READERS))
    from bigsearch.ingest import readers

    register_reader(JsonLinesReader)
    assert "jsonl" in readers.READERS
    return readers


def test_a_registered_reader_is_detected_and_ingested(tmp_path, jsonl_registered):
    rows = [[1, 0, -1], [0, 3, 1], [5, 5, 0], [1, 1, 1], [2, 0, -1]]
    src = tmp_path / "rows.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert detect_format(str(src)) == "jsonl"
    assert isinstance(open_reader(src), JsonLinesReader)
    summary = ingest(
        [src],
        tmp_path / "rows.zarr",
        labels=LabelOptions(column="v2"),
        features=FeatureOptions(categorical=["v0"]),
        output=OutputOptions(dtype="float64"),
    )
    assert summary["rows_written"] == 5
    with open_store(tmp_path / "rows.zarr") as s:
        X, y = s.read_rows(np.arange(5)), s.labels()
        names = s.attrs["featurization"]["feature_names"]
    assert names == ["v0=0", "v0=1", "v0=2", "v0=5", "v1"]
    expected = np.array([[0, 1, 0, 0, 0], [1, 0, 0, 0, 3], [0, 0, 0, 1, 5], [0, 1, 0, 0, 1], [0, 0, 1, 0, 0]])
    np.testing.assert_array_equal(X, expected)
    np.testing.assert_array_equal(y, [0, 1, 0, 1, 0])  # numeric labels: 1 positive, 0 or -1 negative


def test_the_base_class_declares_every_capability_the_pipeline_reads():
    """pipeline.py reads readers through the base class only: no hasattr/getattr probing
    and no private attributes."""
    text = (INGEST / "pipeline.py").read_text()
    assert "hasattr(" not in text and "getattr(" not in text
    tree = ast.parse(text)
    private = {
        n.attr
        for n in ast.walk(tree)
        if isinstance(n, ast.Attribute) and n.attr.startswith("_") and not n.attr.startswith("__")
    }
    assert not private, private


def _imports(path):
    """The sibling ingest modules a module imports anywhere in it (also inside functions)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
            found.add(node.module.split(".")[0])
        elif isinstance(node, ast.ImportFrom) and node.level == 1:
            found.update(a.name for a in node.names)
    return found & {p.stem for p in INGEST.glob("*.py")} | (found & {"readers"})


def _parent_imports(path):
    """The ingest modules a module of ingest/readers imports anywhere in it (``from ..options``)."""
    modules = {p.stem for p in INGEST.glob("*.py")}
    return {
        node.module.split(".")[0]
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ImportFrom) and node.level == 2 and node.module and node.module.split(".")[0] in modules
    }


def test_no_import_cycles_among_ingest_modules():
    graph = {p.stem: _imports(p) for p in INGEST.glob("*.py") if p.stem != "__init__"}
    graph["readers"] = set().union(*(_parent_imports(p) for p in (INGEST / "readers").glob("*.py")))
    state = {}

    def visit(module, path):
        if state.get(module) == "done":
            return
        assert state.get(module) != "open", f"import cycle: {' -> '.join(path + [module])}"
        state[module] = "open"
        for dep in graph.get(module, ()):
            visit(dep, path + [module])
        state[module] = "done"

    for module in graph:
        visit(module, [])
