"""Ingest throughput: `bigsearch ingest` against the bare parser on the same file.

Writes a HIGGS-like CSV (label + 28 values with 3 decimals) and the same rows as a
LIBSVM file, each of about --gb GB, then times, in one run and interleaved:
- the bare parser alone (pyarrow's streaming CSV reader; scikit-learn's LIBSVM reader
  over the same blocks of lines), reading every row and discarding it;
- `bigsearch ingest FILE OUT --label-column 0` (CSV) and `bigsearch ingest FILE OUT`
  (LIBSVM, with and without --n-features), the real CLI in a subprocess.
Prints MB of input per second and ingest / parser ratios (target >= 0.5).

The molecules case (issue 24) ingests SMILES with docs/discovery.md's recipe (atom-pair
counts, MinMax map D = 2048, B = 2, P = 2) from the MolPAL Enamine 10k file in ../shared,
as it is (10,449 molecules) and repeated 5 times (52,245), and prints molecules/s of the
whole command (start-up included; target >= 5,000 on 2 cores) and the per-stage rates
`ingest` states, beside RDKit's parsing and fingerprinting alone in one process:

    python benchmarks/ingest_throughput.py --only molecules
"""

import argparse
import io
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from common import ROOT, load_note, stamp

COLUMNS = 28
ENAMINE = ROOT.parent.parent / "shared" / "datasets" / "molpal_enamine10k" / "Enamine10k_scores.csv.gz"
RECIPE = ["--smiles-column", "smiles", "--drop", "score", "--fingerprint", "atompair", "--counts",
          "--minmax", "2048", "--minmax-buckets", "2", "--minmax-power", "2"]


def make_csv(path, gb, seed=0):
    import pyarrow as pa
    import pyarrow.csv as pacsv
    rng = np.random.default_rng(seed)
    with pacsv.CSVWriter(path, _schema(), write_options=pacsv.WriteOptions(include_header=False)) as w:
        while os.path.getsize(path) < gb * 1e9:
            n = 200_000
            cols = [pa.array(rng.integers(0, 2, n).astype(np.float64))]
            cols += [pa.array(np.round(rng.normal(size=n), 3)) for _ in range(COLUMNS)]
            w.write_table(pa.table(cols, schema=_schema()))


def _schema():
    import pyarrow as pa
    return pa.schema([(f"c{j}", pa.float64()) for j in range(COLUMNS + 1)])


def make_libsvm(csv_path, path):
    """The CSV's rows as 'label 1:v1 2:v2 ...' lines (pyarrow string kernels, streamed)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pacsv
    reader = pacsv.open_csv(csv_path, read_options=pacsv.ReadOptions(column_names=_schema().names))
    with open(path, "wb") as out:
        for batch in reader:
            label = pc.cast(pc.cast(batch.column(0), pa.int64()), pa.string())
            tokens = [pc.binary_join_element_wise(str(j), pc.cast(batch.column(j), pa.string()), ":")
                      for j in range(1, COLUMNS + 1)]
            lines = pc.binary_join_element_wise(label, *tokens, " ")
            out.write(("\n".join(lines.to_pylist()) + "\n").encode())


def bare_csv(path, block):
    """pyarrow's streaming reader with the options ingest gives it (float64 columns)."""
    import pyarrow as pa
    import pyarrow.csv as pacsv
    names = [f"f{j}" for j in range(COLUMNS + 1)]
    ro = pacsv.ReadOptions(block_size=block, column_names=names)
    co = pacsv.ConvertOptions(column_types={n: pa.float64() for n in names})
    return sum(b.num_rows for b in pacsv.open_csv(path, read_options=ro, convert_options=co))


def bare_libsvm(path, block, n_features):
    from sklearn.datasets import load_svmlight_file
    rows = 0
    with open(path, "rb") as fh:
        while True:
            data = fh.read(block)
            if not data:
                return rows
            data += fh.readline()
            X, _ = load_svmlight_file(io.BytesIO(data), n_features=n_features, zero_based=False)
            rows += X.shape[0]


def ingest(args, out, capture=False):
    """The real CLI in a subprocess (with ``capture``, not quiet: its summary is returned)."""
    shutil.rmtree(out, ignore_errors=True)
    return subprocess.run([sys.executable, "-m", "bigsearch", "ingest", *map(str, args), str(out),
                           *([] if capture else ["-q"]), "--overwrite"], check=True, capture_output=capture,
                          text=True)


def make_molecules(d, copies):
    """The Enamine 10k SMILES and scores as a CSV, the rows repeated ``copies`` times."""
    import gzip
    path = d / f"enamine-x{copies}.csv"
    if not path.exists():
        header, *rows = gzip.open(ENAMINE, "rt").read().splitlines()
        path.write_text("\n".join([header, *rows * copies]) + "\n")
    return path


def bare_rdkit(path):
    """RDKit alone, in this process: parse every SMILES, atom-pair count fingerprint."""
    import pyarrow.csv as pacsv
    from rdkit import Chem, RDLogger
    from rdkit.Chem import rdMolDescriptors
    RDLogger.DisableLog("rdApp.*")
    smiles = pacsv.read_csv(path).column("smiles").to_pylist()
    for s in smiles:
        rdMolDescriptors.GetHashedAtomPairFingerprint(Chem.MolFromSmiles(s), nBits=2048, minLength=1,
                                                      maxLength=3).GetNonzeroElements()
    return len(smiles)


def molecules(d, out, repeat):
    """Molecules/s of `bigsearch ingest` with the recipe, 10k and 50k molecules, with the
    stage rates it states, interleaved with RDKit alone."""
    results = {}
    for copies in (1, 5):
        path = make_molecules(d, copies)
        rows = sum(1 for _ in open(path)) - 1
        bare, full = [], []
        for _ in range(repeat):
            bare.append(timed(bare_rdkit, path))
            t = time.perf_counter()
            run = ingest([path, *RECIPE], out, capture=True)
            full.append((time.perf_counter() - t, run))
        wall, run = min(full, key=lambda w: w[0])
        stages = next(line for line in run.stderr.splitlines() if line.startswith("per stage: "))
        results[f"molecules {rows}"] = {"molecules": rows, "ingest_molecules_s": round(rows / wall),
                                        "rdkit_one_process_molecules_s": round(rows / min(bare)),
                                        "seconds": round(wall, 2), "stages": stages}
        print(f"molecules {rows:,}: ingest {rows / wall:,.0f} molecules/s ({wall:.1f} s, start-up included); "
              f"RDKit alone in one process {rows / min(bare):,.0f}/s\n  {stages}", flush=True)
    print(load_note())
    return results


def timed(f, *a):
    t = time.perf_counter()
    f(*a)
    return time.perf_counter() - t


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dir", default="/tmp/ingest-bench")
    p.add_argument("--gb", type=float, default=1.0)
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--keep", action="store_true", help="keep the generated inputs")
    p.add_argument("--only", default=None, help="run only the cases whose name starts with this")
    args = p.parse_args()
    from bigsearch.ingest.options import BLOCK_BYTES
    d = Path(args.dir)
    d.mkdir(parents=True, exist_ok=True)
    csv_path, svm_path, out = d / "higgs-like.csv", d / "higgs-like.svm", d / "out.zarr"
    if args.only == "molecules":
        results = molecules(d, out, args.repeat)
        shutil.rmtree(out, ignore_errors=True)
        print(json.dumps(stamp(results)))
        return
    if not csv_path.exists():
        make_csv(csv_path, args.gb)
    if not svm_path.exists() and args.only != "csv":
        make_libsvm(csv_path, svm_path)
    cases = {
        "csv": (csv_path, lambda: bare_csv(csv_path, BLOCK_BYTES), [csv_path, "--label-column", "0"]),
        "libsvm --n-features": (svm_path, lambda: bare_libsvm(svm_path, BLOCK_BYTES, COLUMNS),
                                [svm_path, "--n-features", COLUMNS]),
        "libsvm (width found by a first pass)": (svm_path, lambda: bare_libsvm(svm_path, BLOCK_BYTES, COLUMNS),
                                                 [svm_path]),
    }
    results = {}
    for name, (path, bare, cli) in cases.items():
        if args.only and not name.startswith(args.only):
            continue
        mb = os.path.getsize(path) / 1e6
        parser, full = [], []
        for _ in range(args.repeat):  # interleaved, so slow spells of the host hit both
            parser.append(timed(bare))
            full.append(timed(ingest, cli, out))
        tp, ti = mb / min(parser), mb / min(full)
        results[name] = {"input_mb": round(mb), "parser_mb_s": round(tp, 1), "ingest_mb_s": round(ti, 1),
                         "ratio": round(ti / tp, 2)}
        print(f"{name:40s} {mb:8.0f} MB  parser {tp:7.1f} MB/s  ingest {ti:7.1f} MB/s  ratio {ti / tp:.2f}",
              flush=True)
    shutil.rmtree(out, ignore_errors=True)
    if not args.keep:
        csv_path.unlink(missing_ok=True)
        svm_path.unlink(missing_ok=True)
    print(json.dumps(stamp(results)))


if __name__ == "__main__":
    main()
