"""The published JSON schemas (docs/schema/, issue 17 item 6) hold for real outputs: results.json
of a run, `info --json`, `session status --json`, `session next --json`, `session sample --json` and
`session export --format json`; and the exports in CSV, JSON and Parquet hold the same rows."""

import csv
import json
from pathlib import Path

import numpy as np
import pytest

import bigsearch
from bigsearch.experiments import run_methods
from bigsearch.testing import clustered_points

from conftest import run_cli

jsonschema = pytest.importorskip("jsonschema", reason="jsonschema is in the test extra: pip install -e '.[test]'")

SCHEMAS = Path(__file__).resolve().parents[1] / "docs" / "schema"


def validate(output, name):
    schema = json.loads((SCHEMAS / f"{name}.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.Draft202012Validator(schema).validate(output)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    X, y = clustered_points(200, 6, prevalence=0.1, seed=2, spread=0.8)
    path = tmp_path_factory.mktemp("schema") / "s.zarr"
    return bigsearch.create_store(path, X, y, ids=[f"r{i}" for i in range(200)], chunk_rows=30), y


def test_results_json_follows_its_schema(store, tmp_path):
    path, _ = store
    run_methods(path, ["las", "random"], 8, tmp_path / "out", runs=2, plot=False)
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    validate(results, "results")
    results["runs"][0]["hits"] = ["three"]  # the schema can fail
    with pytest.raises(jsonschema.ValidationError):
        validate(results, "results")


def test_info_and_session_json_outputs_follow_their_schemas(store, tmp_path):
    path, y = store
    res = run_cli("info", path, "--json")
    assert res.returncode == 0, res.stderr
    validate(json.loads(res.stdout), "info")
    validate(bigsearch.open_store(np.ones((4, 2))).describe(), "info")  # an array's too
    directory = tmp_path / "sess"
    with bigsearch.Session.create(path, directory, pi=0.1) as s:
        s.tell([int(np.flatnonzero(y)[0]), int(np.flatnonzero(y == 0)[0])], [1, 0])
    res = run_cli("session", "status", directory, "--json")
    assert res.returncode == 0, res.stderr
    validate(json.loads(res.stdout), "session-status")
    res = run_cli("session", "next", directory, "-k", 5, "--json")
    assert res.returncode == 0, res.stderr
    validate(json.loads(res.stdout), "session-next")
    res = run_cli("session", "sample", directory, "-m", 3, "--seed", 1, "--json")
    assert res.returncode == 0, res.stderr
    validate(json.loads(res.stdout), "session-sample")
    res = run_cli("session", "export", directory, "--out", "-", "--format", "json")
    assert res.returncode == 0, res.stderr
    rows = json.loads(res.stdout)
    validate(rows, "session-export")
    assert [r["index"] for r in rows] == [int(np.flatnonzero(y)[0]), int(np.flatnonzero(y == 0)[0])]
    assert [r["label"] for r in rows] == [1, 0] and rows[0]["id"] == f"r{rows[0]['index']}"


def test_session_export_writes_csv_json_and_parquet_alike(store, tmp_path):
    pq = pytest.importorskip("pyarrow.parquet", reason="Parquet export needs pyarrow (the ingest extra)")
    path, y = store
    directory = tmp_path / "sess"
    picks = [int(i) for i in np.flatnonzero(y)[:2]] + [int(np.flatnonzero(y == 0)[0])]
    with bigsearch.Session.create(path, directory, pi=0.1) as s:
        s.tell(picks, [1, 1, 0])
        for out, fmt in [("l.csv", None), ("l.json", None), ("l.parquet", None), ("l.txt", "json")]:
            assert s.export(tmp_path / out, fmt) == 3
        with pytest.raises(bigsearch.BigsearchError, match="already exists"):
            s.export(tmp_path / "l.json")
    with open(tmp_path / "l.csv", newline="") as fh:
        from_csv = [(int(r["index"]), r["id"], int(r["label"]), r["time"]) for r in csv.DictReader(fh)]
    from_json = [tuple(r.values()) for r in json.loads((tmp_path / "l.json").read_text())]
    table = pq.read_table(tmp_path / "l.parquet").to_pylist()
    from_parquet = [tuple(r.values()) for r in table]
    assert from_csv == from_json == from_parquet and [r[0] for r in from_csv] == picks
    assert json.loads((tmp_path / "l.txt").read_text()) == json.loads((tmp_path / "l.json").read_text())
    res = run_cli("session", "export", directory, "--out", tmp_path / "cli.parquet")
    assert res.returncode == 0, res.stderr
    assert pq.read_table(tmp_path / "cli.parquet").to_pylist() == table
    for args, message in [
        (["--out", "-", "--format", "parquet"], "Parquet is binary"),
        (["--csv", "a.csv", "--out", "b.csv"], "once"),
        (["--format", "xml", "--out", "x"], "'xml' is not one of"),
    ]:
        res = run_cli("session", "export", directory, *args, cwd=tmp_path)
        assert res.returncode == 2 and message in res.stderr and "Traceback" not in res.stderr, (args, res.stderr)


def test_the_schemas_are_published_in_the_command_reference():
    cli = (Path(__file__).resolve().parents[1] / "docs" / "cli.md").read_text()
    for schema in SCHEMAS.glob("*.json"):
        assert f"schema/{schema.name}" in cli, schema.name
