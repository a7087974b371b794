"""Bad inputs to `bigsearch ingest`: a one-line error naming the file and the line or row,
exit status 2, no traceback, and nothing left at OUT (nor a temporary store beside it)."""

import gzip
import os

import numpy as np
import pytest

import bigsearch
from bigsearch.errors import BigsearchError

from conftest import FIXTURES, run_cli, without_file_permission_override

GOOD_ROWS = "".join(f"{i},{i % 7}.5,{i % 2}\n" for i in range(3000))


def ingest_fails(tmp_path, *args, out_name="out.zarr", prefix=()):
    """Run the CLI expecting a clean failure; returns the message."""
    out = tmp_path / out_name
    before = set(os.listdir(tmp_path))
    r = run_cli("ingest", *args, out, prefix=prefix)
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), r.stderr
    assert "Traceback" not in r.stderr
    assert set(os.listdir(tmp_path)) == before, "ingest left something behind"
    return lines[0]


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_ragged_row(tmp_path):
    lines = GOOD_ROWS.splitlines(keepends=True)
    lines[1234] = "5,6\n"
    src = write(tmp_path, "ragged.csv", "".join(lines))
    msg = ingest_fails(tmp_path, src, "--label-column", "2")
    assert "ragged.csv, line 1235:" in msg and "2 fields where 3 were expected" in msg


def test_non_numeric_value_in_a_numeric_column_early_and_late(tmp_path):
    lines = GOOD_ROWS.splitlines(keepends=True)
    lines[17] = "17,abc,1\n"
    src = write(tmp_path, "early.csv", "".join(lines))
    msg = ingest_fails(tmp_path, src, "--label-column", "2")
    assert "early.csv, line 18: 'abc' in numeric column 1 (f1) is not a number" in msg
    # past the 1 MiB sample the types are inferred from and the first 1 MiB parser blocks (3 MiB in)
    big = GOOD_ROWS * 100 + "1,x2y,0\n" + GOOD_ROWS
    src = write(tmp_path, "late.csv", big)
    msg = ingest_fails(tmp_path, src, "--label-column", "2")
    assert f"late.csv, line {3000 * 100 + 1}: 'x2y' in numeric column 1" in msg


@pytest.mark.parametrize("value,word", [("nan", "missing or NaN"), ("inf", "infinite"), ("", "missing")])
def test_nan_inf_and_missing_values(tmp_path, value, word):
    lines = GOOD_ROWS.splitlines(keepends=True)
    lines[2500] = f"2500,{value},1\n"
    src = write(tmp_path, "nan.csv", "".join(lines))
    msg = ingest_fails(tmp_path, src, "--label-column", "2")
    assert "nan.csv, line 2501: column 1 (f1) is" in msg and word in msg


def test_nan_in_a_numpy_array_names_the_row(tmp_path):
    X = np.ones((100, 3))
    X[42, 1] = np.nan
    np.save(tmp_path / "a.npy", X)
    msg = ingest_fails(tmp_path, tmp_path / "a.npy")
    assert "a.npy, row 43: column 1 (1) is missing or NaN" in msg


@pytest.mark.parametrize("name,content", [("empty.csv", b""), ("header.csv", b"a,b,c\n"),
                                          ("empty.npy", None), ("empty.gz", gzip.compress(b"", mtime=0))])
def test_empty_inputs(tmp_path, name, content):
    path = tmp_path / name
    if content is None:
        np.save(path, np.zeros((0, 3)))
    else:
        path.write_bytes(content)
    args = {"empty.gz": ["--format", "csv"], "header.csv": ["--header"]}.get(name, [])
    msg = ingest_fails(tmp_path, path, *args)
    assert name in msg and ("empty" in msg or "no data rows" in msg)


def test_missing_label_column(tmp_path):
    src = write(tmp_path, "h.csv", "a,b,label\n1,2,x\n3,4,y\n")
    msg = ingest_fails(tmp_path, src, "--label-column", "target", "--positive", "x")
    assert "h.csv: --label-column 'target': no such column (columns: a, b, label)" in msg
    msg = ingest_fails(tmp_path, src, "--label-column", "3", "--positive", "x")
    assert "h.csv: --label-column 3 is out of range: the input has 3 columns (0..2)" in msg
    msg = ingest_fails(tmp_path, src, "--label-column", "B", "--positive", "x")
    assert msg.endswith("no such column (columns: a, b, label); names are matched as written: did you mean 'b'?")


def test_positive_value_that_never_occurs(tmp_path):
    msg = ingest_fails(tmp_path, FIXTURES / "adult_head300.data", "--label-column", "14", "--positive", ">50k")
    assert "adult_head300.data: --positive >50k never occurs in label column f14 (values seen: <=50K, >50K)" in msg
    msg = ingest_fails(tmp_path, FIXTURES / "higgs_head100.test", "--label-column", "0", "--positive", "7")
    assert "higgs_head100.test: --positive 7 never occurs in label column f0 (values seen: 0, 1)" in msg


def test_text_labels_need_positive(tmp_path):
    src = write(tmp_path, "t.csv", "1,a\n2,b\n")
    msg = ingest_fails(tmp_path, src, "--label-column", "1")
    assert "t.csv, line 1: label 'a' in label column f1 is not a label word bigsearch reads on its own" in msg
    assert "values seen: 'a', 'b'; say which values are positive with --positive VALUE" in msg


def test_unknown_format(tmp_path):
    blob = tmp_path / "blob.bin"
    blob.write_bytes(bytes(range(256)) * 4)
    msg = ingest_fails(tmp_path, blob)
    assert "blob.bin: cannot tell the format" in msg and "--format" in msg
    msg = ingest_fails(tmp_path, FIXTURES / "higgs_head100.test", "--format", "xls")
    assert "--format 'xls' is not one of csv, tsv, libsvm, npy, hdf5, zarr, idx, parquet, arff, ris, xlsx" in msg


def test_existing_out_is_kept(tmp_path):
    out = tmp_path / "out.zarr"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    msg = ingest_fails(tmp_path, FIXTURES / "higgs_head100.test", "--label-column", "0")
    assert "out.zarr already exists; choose another OUT or pass --overwrite" in msg
    assert (out / "keep.txt").read_text() == "mine"
    r = run_cli("ingest", FIXTURES / "higgs_head100.test", out, "--label-column", "0", "--overwrite")
    assert r.returncode == 2 and "not a bigsearch store" in r.stderr     # --overwrite replaces only a store
    assert (out / "keep.txt").read_text() == "mine"
    (out / "keep.txt").unlink()
    out.rmdir()
    assert run_cli("ingest", FIXTURES / "higgs_head100.test", out, "--label-column", "0").returncode == 0
    r = run_cli("ingest", FIXTURES / "higgs_head100.test", out, "--label-column", "0", "--overwrite")
    assert r.returncode == 0 and bigsearch.open_store(out).n > 0


def test_unreadable_inputs(tmp_path):
    msg = ingest_fails(tmp_path, tmp_path / "nowhere.csv")
    assert "nowhere.csv: no such file" in msg
    (tmp_path / "adir").mkdir()
    msg = ingest_fails(tmp_path, tmp_path / "adir")
    assert "adir: a directory, and not a Zarr store" in msg


def test_file_without_read_permission(tmp_path):
    src = write(tmp_path, "secret.csv", GOOD_ROWS)
    src.chmod(0)
    msg = ingest_fails(tmp_path, src, prefix=without_file_permission_override())   # root too
    # click's check of the argument comes before the reader's own ("cannot be read (Permission denied)")
    assert f"Path '{src}' is not readable" in msg


def test_truncated_gzip_csv_and_idx(tmp_path):
    data = gzip.compress((GOOD_ROWS * 200).encode())
    (tmp_path / "cut.csv.gz").write_bytes(data[: len(data) // 2])
    msg = ingest_fails(tmp_path, tmp_path / "cut.csv.gz", "--label-column", "2")
    assert "cut.csv.gz: the gzip data ends early or is corrupt after line" in msg
    images = np.random.default_rng(0).integers(0, 256, (300, 28, 28), dtype=np.uint8)   # an MNIST-like IDX file
    idx = gzip.compress(bytes([0, 0, 8, 3]) + np.array([300, 28, 28], ">i4").tobytes() + images.tobytes())
    (tmp_path / "cut-idx3-ubyte.gz").write_bytes(idx[: len(idx) // 3])
    msg = ingest_fails(tmp_path, tmp_path / "cut-idx3-ubyte.gz")
    assert "cut-idx3-ubyte.gz: the data ends early or is corrupt while reading rows" in msg


def test_bad_libsvm_line(tmp_path):
    src = write(tmp_path, "d.svm", "1 1:0.5 3:1\n-1 2:1\n1 2:x\n")
    msg = ingest_fails(tmp_path, src)
    assert "d.svm, line 3: could not convert string to float" in msg


def test_labels_file_of_the_wrong_length(tmp_path):
    np.save(tmp_path / "x.npy", np.ones((50, 2)))
    np.save(tmp_path / "y.npy", np.ones(49))
    msg = ingest_fails(tmp_path, tmp_path / "x.npy", "--labels", tmp_path / "y.npy")
    assert "y.npy: 49 labels, but" in msg and "x.npy has more rows" in msg


@pytest.mark.parametrize("flags, options, library, cli", [
    (["--rff", "0"], {"features": {"rff": 0}},
     "rff 0: the number of random Fourier features needs D >= 1",
     "--rff 0: the number of random Fourier features needs D >= 1"),
    (["--prevalence", "0.1"], {"labels": {"prevalence": 0.1}},
     "prevalence needs labels: give labels.column (or labels.files)",
     "--prevalence needs labels: give --label-column (or --labels)"),
])
def test_the_library_names_parameters_and_the_cli_flags(tmp_path, flags, options, library, cli):
    from bigsearch.ingest import FeatureOptions, LabelOptions, ingest
    src = write(tmp_path, "rows.csv", "".join(GOOD_ROWS.splitlines(keepends=True)[:50]))
    groups = {"features": FeatureOptions, "labels": LabelOptions}
    with pytest.raises(BigsearchError) as e:
        ingest([src], tmp_path / "lib.zarr", **{k: groups[k](**v) for k, v in options.items()})
    assert str(e.value) == library
    assert ingest_fails(tmp_path, src, *flags) == f"Error: {cli}"


ARFF_HEAD = "@relation r\n@attribute a real\n@attribute kind {x, y}\n@attribute label {p, n}\n@data\n"
ARFF_ROWS = "".join(f"{i}.5, {'xy'[i % 2]}, {'pn'[i % 3 == 0]}\n" for i in range(200))


@pytest.mark.parametrize("change,expected", [
    (lambda rows: rows[:120] + ["1.5, x\n"] + rows[120:], "line 126: 2 fields where 3 were expected"),
    (lambda rows: rows[:30] + ["abc, x, p\n"] + rows[30:], "line 36: 'abc' in numeric attribute 0 (a) is not a number"),
    (lambda rows: rows[:50] + ["1.0, z, p\n"] + rows[50:], "line 56: 'z' is not one of the values declared for "
                                                           "attribute 'kind' ({x, y})"),
    (lambda rows: rows[:10] + ["?, x, p\n"] + rows[10:], "line 16: column 0 (a) is missing or NaN"),
    (lambda rows: ["{0 1.5, 2 p}\n"] + rows, "line 6: a sparse ARFF row"),
])
def test_bad_arff_rows_name_their_line(tmp_path, change, expected):
    rows = change(ARFF_ROWS.splitlines(keepends=True))
    src = write(tmp_path, "bad.arff", ARFF_HEAD + "".join(rows))
    msg = ingest_fails(tmp_path, src, "--label-column", "label", "--positive", "p")
    assert f"bad.arff, {expected}" in msg, msg


@pytest.mark.parametrize("head,expected", [
    ("@relation r\n@attribute a real\n", "no @data line"),
    ("@relation r\n@attribute when date 'yyyy-MM-dd'\n@data\n", "line 2: attribute 'when' has type 'date'"),
    ("@relation r\n@attribute a real\n@attribute a real\n@data\n", "line 3: attribute 'a' is declared twice"),
    ("@relation r\n@attribute\n@data\n", "line 2: an @attribute line needs a name and a type"),
    ("@relation r\n@data\n1\n", "line 2: @data before any @attribute line"),
    ("@relation r\n@attribute a real\n@data\n% only a comment\n", "no data rows after @data"),
])
def test_bad_arff_headers(tmp_path, head, expected):
    src = write(tmp_path, "head.dat", head)
    msg = ingest_fails(tmp_path, src)
    assert f"head.dat{':' if expected.startswith('no') else ','} {expected}" in msg, msg


IN_MEMORY_READS = """
import os, sys
import pyarrow as pa, pyarrow.csv
from bigsearch.ingest.readers.arff import ArffReader
from bigsearch.ingest.readers.csv import CsvReader
# pyarrow's own start-up threads (allocator, signals) start with a first serial read
pa.csv.read_csv(pa.BufferReader(b"a,b\\n1,2\\n"), read_options=pa.csv.ReadOptions(use_threads=False))
threads = lambda: len(os.listdir("/proc/self/task"))
before = threads()
CsvReader(sys.argv[1])
for _ in ArffReader(sys.argv[2]).blocks(1 << 20):
    pass
print(before, threads())
"""


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="counts threads in /proc (Linux)")
def test_in_memory_csv_reads_start_no_pyarrow_workers(tmp_path):
    """Inference and ARFF blocks parse bytes held by Python. On pyarrow's worker threads
    the last reference to those bytes could be dropped while Python finalizes, which
    aborted 1 in 12 failing `ingest` runs at exit (after the right one-line error)."""
    import subprocess
    import sys

    csv_path = write(tmp_path, "in.csv", "a,b,label\n1,2,1\n3,4,0\n")
    arff = write(tmp_path, "in.arff", "@relation r\n@attribute a numeric\n@attribute c {x,y}\n@data\n1,x\n2,y\n")
    r = subprocess.run([sys.executable, "-c", IN_MEMORY_READS, csv_path, arff],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    before, after = map(int, r.stdout.split())
    assert after == before, f"pyarrow started {after - before} worker threads"
