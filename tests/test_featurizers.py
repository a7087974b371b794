"""Representations for discovery tasks (issue 18): fingerprints, IDF weighting and the
MinMax random-feature map, each checked against its definition or its kernel."""

import numpy as np
import pytest

from bigsearch.errors import InputError, ParameterError
from bigsearch.ingest.minmax import (
    check_minmax,
    cws_buckets,
    minmax_buckets,
    minmax_draws,
    minmax_features,
    minmax_kernel,
    minmax_params,
    pack_draws,
)
from bigsearch.ingest.weighting import apply_idf, document_frequency, idf_weights
from bigsearch.testing.minmax_reference import reference_cws_buckets

SMILES = ["CCO", "c1ccccc1O", "CC(=O)Nc1ccc(O)cc1", "CCN(CC)CC", "O=C(O)c1ccccc1OC(C)=O"]


def sparse_counts(seed, n=30, r=60):
    """Sparse non-negative count vectors with similarities from 0 to 1."""
    rng = np.random.default_rng(seed)
    A = ((rng.random((n, r)) < 0.3) * rng.integers(1, 5, (n, r))).astype(np.float64)
    A[1] = A[0]  # K = 1
    A[2] = A[0] * (rng.random(r) < 0.7)  # a subset: K high
    A[3] = 0.5 * A[4] + A[4]  # a multiple: K = 1 / 1.5
    return A


# -- the MinMax map ---------------------------------------------------------------------
@pytest.mark.parametrize("power, buckets", [(1, 16), (2, 16), (2, 2)])  # (2, 2): docs/discovery.md's recipe
def test_minmax_features_approximate_the_kernel(power, buckets):
    """E[z(x).z(x')] = K^p + (1 - K^p) / B; with D = 4000 draws the standard deviation
    of each inner product is at most 1 / (2 sqrt(D)) = 0.0079, so 0.04 is 5 of them."""
    A = sparse_counts(0)
    spec = {"samples": 4000, "buckets": buckets, "power": power, "seed": 3}
    Z = minmax_features(A, spec, minmax_params(A.shape[1], spec))
    K = minmax_kernel(A, A) ** power
    expected = K + (1.0 - K) / spec["buckets"]
    err = np.abs(Z @ Z.T - expected)
    assert err.max() < 0.04
    assert err.mean() < 0.01
    assert np.allclose(np.diag(Z @ Z.T), 1.0)  # unit rows
    assert Z.shape == (len(A), 4000 * buckets)


def test_minmax_draws_collide_with_probability_the_kernel():
    """The consistent-weighted-sampling pairs themselves (B huge: no bucket collisions)
    agree between two points with probability K(x, x') (Ioffe 2010), binomial s.d. <= 0.0079."""
    A = sparse_counts(1)
    spec = {"samples": 4000, "buckets": 2**62, "power": 1, "seed": 5}
    h = cws_buckets(A, *minmax_draws(A.shape[1], spec), 1, spec["buckets"])
    agree = (h[:, None, :] == h[None, :, :]).mean(axis=2)
    assert np.abs(agree - minmax_kernel(A, A)).max() < 0.04


def test_minmax_binary_is_tanimoto_and_the_map_is_reproducible():
    rng = np.random.default_rng(2)
    A = (rng.random((6, 40)) < 0.4).astype(np.float64)
    inter, union = A @ A.T, ((A[:, None, :] + A[None, :, :]) > 0).sum(axis=2)
    assert np.allclose(minmax_kernel(A, A), inter / union)
    spec = {"samples": 64, "buckets": 8, "power": 2, "seed": 7}
    one = minmax_features(A, spec, minmax_params(40, spec))
    halves = np.vstack(
        [minmax_features(A[:3], spec, minmax_params(40, spec)), minmax_features(A[3:], spec, minmax_params(40, spec))]
    )
    assert np.array_equal(one, halves)  # blocking does not matter
    other = minmax_features(A, {**spec, "seed": 8}, minmax_params(40, {**spec, "seed": 8}))
    assert not np.array_equal(one, other)


def enamine_counts(bits=2048):
    """Atom-pair count fingerprints of 40 real molecules (tests/fixtures), with an all-zero
    row and a row of fractional values (as IDF weighting leaves them) appended."""
    pytest.importorskip("rdkit", reason="RDKit is the optional extra bigsearch[chem]")
    from pathlib import Path

    from bigsearch.ingest.fingerprints import fingerprints, parse_spec

    lines = (Path(__file__).parent / "fixtures" / "enamine10k_head40.csv").read_text().splitlines()[1:]
    F = fingerprints([line.split(",")[0] for line in lines], parse_spec(f"atompair:{bits}", counts=True))
    return np.vstack([F, np.zeros(bits), F[0] * np.linspace(0.01, 7.5, bits)])


@pytest.mark.parametrize(
    "power, samples, buckets, n_threads",
    [(2, 2048, 2, None), (2, 2048, 2, 1), (1, 300, 16, 3), (3, 77, 5, 2), (7, 10, 3, 4)],  # first: the recipe
)
def test_minmax_buckets_are_the_plain_loops(power, samples, buckets, n_threads):
    """The tiled, threaded kernel gives the same bucket, bit for bit, as the plain loop over
    rows, draws and features the map was first written as (same draws, same hash), on real
    fingerprints, whatever the tile width (power 3 and 7 do not divide it) and threads."""
    A = enamine_counts()
    spec = {"samples": samples, "buckets": buckets, "power": power, "seed": 11}
    draws = minmax_draws(A.shape[1], spec)
    expected = reference_cws_buckets(A, *draws, power, buckets)
    got = minmax_buckets(A, pack_draws(*draws, power), buckets, n_threads=n_threads)
    assert np.array_equal(got, expected)
    assert len(np.unique(expected)) == buckets  # every bucket is used: the comparison is not vacuous
    Z = minmax_features(A, spec, minmax_params(A.shape[1], spec))
    rows, cols = np.nonzero(Z)
    assert np.array_equal(cols.reshape(-1, samples) % buckets, expected[np.unique(rows)])
    assert not Z[40].any() and np.array_equal(np.unique(rows), np.delete(np.arange(len(A)), 40))


# sha256 of the recipe's buckets and store on the 40 molecules, as the map first wrote them
# (before the kernel's hashing was vectorized, issue 24): stores written since stay bit for bit.
RECIPE_BUCKETS_SHA256 = "b0d9890741a3f1432d3987ef11a62809d8df12ccc9eaf5ae07303f7e3cc53e05"
RECIPE_STORE_SHA256 = "95b8020053206fa6703c71b4533dfe2ffa79a3cf7008ec9662adc1c73f5e6d1d"


def recipe_features(drop, samples):
    """docs/discovery.md's molecule recipe (atom pairs, counts, MinMax B = 2, P = 2) with
    ``samples`` draws, the CSV's column ``drop`` left out."""
    from bigsearch.ingest import FeatureOptions

    return FeatureOptions(
        smiles_column="smiles",
        drop=(drop,),
        fingerprint="atompair",
        counts=True,
        minmax=samples,
        minmax_buckets=2,
        minmax_power=2,
    )


def test_the_recipe_writes_what_it_always_wrote(tmp_path):
    """docs/discovery.md's recipe (atom-pair counts, D = 2048, B = 2, p = 2, seed 0) on real
    molecules: the buckets and the whole ingested store are the committed ones, byte for byte."""
    import hashlib
    from pathlib import Path

    from bigsearch import open_store
    from bigsearch.ingest import ingest

    A = enamine_counts()
    spec = {"samples": 2048, "buckets": 2, "power": 2, "seed": 0}
    buckets = minmax_buckets(A, minmax_params(A.shape[1], spec), 2)
    assert hashlib.sha256(buckets.astype("<i8").tobytes()).hexdigest() == RECIPE_BUCKETS_SHA256
    features = recipe_features(drop="score", samples=2048)
    ingest([Path(__file__).parent / "fixtures" / "enamine10k_head40.csv"], tmp_path / "m.zarr", features=features)
    with open_store(tmp_path / "m.zarr") as store:
        X = np.ascontiguousarray(store.read_rows(np.arange(store.n)))
    assert X.shape == (40, 4096)
    assert hashlib.sha256(X.tobytes()).hexdigest() == RECIPE_STORE_SHA256


def numpy_cws_buckets(Z, gamma_r, log_c, beta, salts, power, n_buckets):
    """The buckets in plain NumPy, row by row: every (draw, feature) candidate of a row at
    once, the first smallest per draw (the lowest k on ties), then the hash over blocks."""
    import math

    def mix(h):
        h = (h ^ (h >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        h = (h ^ (h >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return h ^ (h >> np.uint64(31))

    golden, n_blocks = np.uint64(0x9E3779B97F4A7C15), gamma_r.shape[0] // power
    out = np.zeros((len(Z), n_blocks), np.int64)
    for i, x in enumerate(Z):
        k = np.flatnonzero(x > 0)
        if not len(k):
            continue
        log_x = np.array([math.log(v) for v in x[k]])  # libm's log, as the kernel's
        t = np.floor(log_x / gamma_r[:, k] + beta[:, k])
        log_a = log_c[:, k] - gamma_r[:, k] * (t - beta[:, k]) - gamma_r[:, k]
        win = np.argmin(log_a, axis=1)
        best_k, best_t = k[win].astype(np.uint64), t[np.arange(len(win)), win].astype(np.int64)
        with np.errstate(over="ignore"):
            h = np.arange(n_blocks, dtype=np.uint64) * golden
            for p in range(power):
                s = np.arange(n_blocks) * power + p
                h = mix(h ^ salts[s] ^ (best_k[s] * golden) ^ mix((best_t[s] + (1 << 40)).astype(np.uint64)))
        out[i] = (h % np.uint64(n_buckets)).astype(np.int64)
    return out


@pytest.mark.parametrize("power, samples, buckets", [(2, 2048, 2), (3, 50, 7)])
def test_minmax_buckets_match_numpy(power, samples, buckets):
    """The kernel (each distinct (feature, value) pair's candidates computed once per tile,
    batches of rows) against the definition in plain NumPy, on real fingerprints with
    repeated counts, a fractional row and an all-zero row; batches of a few rows too."""
    from bigsearch.ingest import minmax

    A = enamine_counts()
    spec = {"samples": samples, "buckets": buckets, "power": power, "seed": 4}
    draws = minmax_draws(A.shape[1], spec)
    expected = numpy_cws_buckets(A, *draws, power, buckets)
    params = pack_draws(*draws, power)
    assert np.array_equal(minmax_buckets(A, params, buckets), expected)
    batch = minmax.BATCH_ENTRIES
    try:
        minmax.BATCH_ENTRIES = 150  # about 3 rows a batch; a row longer than that is a batch alone
        assert np.array_equal(minmax_buckets(A, params, buckets, n_threads=2), expected)
    finally:
        minmax.BATCH_ENTRIES = batch


def test_minmax_ties_go_to_the_lowest_feature():
    """Features with the same draws and values tie in every lane: the lowest feature wins,
    for rows of 1 to 11 entries (four entries a sweep, and the rest one at a time), whatever
    feature the tie is placed on."""
    rng = np.random.default_rng(3)
    spec = {"samples": 40, "buckets": 5, "power": 2, "seed": 1}
    gamma_r, log_c, beta, salts = minmax_draws(12, spec)
    for twin in (0, 3, 9):
        draws = [a.copy() for a in (gamma_r, log_c, beta)]
        for a in draws:
            a[:, twin + 1 :] = a[:, [twin]]  # every feature after `twin` draws as `twin`
        A = np.zeros((11, 12))
        for n in range(1, 12):
            A[n - 1, rng.choice(12, n, replace=False)] = 2.0
        expected = numpy_cws_buckets(A, *draws, salts, 2, 5)
        got = minmax_buckets(A, pack_draws(*draws, salts, 2), 5, n_threads=1)
        assert np.array_equal(got, expected)


def test_minmax_of_entries_is_the_dense_map():
    """Fingerprints reach the map as their non-zero entries (ingest/featurize.py): the same
    features as from the dense block, in any order of the entries, zero rows and a
    fractional row included; a negative entry is named by its row."""
    from bigsearch.ingest.minmax import Entries

    A = enamine_counts()
    spec = {"samples": 300, "buckets": 2, "power": 2, "seed": 6}
    params = minmax_params(A.shape[1], spec)
    rows, columns = np.nonzero(A)
    order = np.random.default_rng(0).permutation(len(rows))
    entries = Entries(len(A), rows[order], columns[order], A[rows, columns][order])
    assert np.array_equal(minmax_features(entries, spec, params), minmax_features(A, spec, params))
    values = entries.values.copy()
    values[np.flatnonzero(entries.rows == 7)[0]] = -1.0
    with pytest.raises(InputError, match="row 7 of the block has a negative one"):
        minmax_features(Entries(len(A), entries.rows, entries.columns, values), spec, params)


@pytest.mark.parametrize("samples, power, r", [(2048, 2, 2048), (77, 3, 60), (10, 7, 40), (300, 1, 33)])
def test_minmax_params_drawn_a_tile_at_a_time_are_the_draws_packed(samples, power, r):
    """minmax_params draws and packs a tile at a time: the same tiles (padding included) and
    salts as packing minmax_draws' whole arrays, whatever the tile width."""
    spec = {"samples": samples, "buckets": 2, "power": power, "seed": 9}
    streamed, packed = minmax_params(r, spec), pack_draws(*minmax_draws(r, spec), power)
    assert np.array_equal(streamed.tiles, packed.tiles) and np.array_equal(streamed.salts, packed.salts)
    assert (streamed.power, streamed.samples) == (packed.power, packed.samples)


def test_distinct_pairs_number_every_entry():
    from bigsearch.ingest.minmax import distinct_pairs

    columns = np.array([3, 1, 3, 3, 0, 1])
    logs = np.array([0.0, 0.5, 0.0, 0.7, 0.0, 0.5])
    pair_of, pair_k, pair_log = distinct_pairs(columns, logs)
    assert list(zip(pair_k, pair_log)) == [(0, 0.0), (1, 0.5), (3, 0.0), (3, 0.7)]
    assert np.array_equal(pair_k[pair_of], columns) and np.array_equal(pair_log[pair_of], logs)


def test_minmax_zero_rows_negative_values_and_bad_options():
    spec = {"samples": 8, "buckets": 4, "power": 1, "seed": 0}
    A = np.zeros((2, 5))
    A[1, 2] = 3.0
    Z = minmax_features(A, spec, minmax_params(5, spec))
    assert not Z[0].any() and np.isclose(Z[1] @ Z[1], 1.0)
    with pytest.raises(InputError, match="non-negative"):
        minmax_features(-A, spec, minmax_params(5, spec))
    for bad in ({"samples": 0}, {"buckets": 1}, {"power": 0}):
        with pytest.raises(ParameterError):
            check_minmax({**spec, **bad})


# -- IDF --------------------------------------------------------------------------------
def test_idf_weights_match_the_definition_and_merge_over_blocks():
    rng = np.random.default_rng(4)
    A = (rng.random((50, 12)) < 0.3) * rng.integers(1, 4, (50, 12)).astype(np.float64)
    A[:, 0] = 1.0  # in every row
    df = document_frequency(A[:20]) + document_frequency(A[20:])
    assert np.array_equal(df, (A != 0).sum(axis=0))
    w = idf_weights(df, 50)
    assert np.isclose(w[0], 1.0)  # present everywhere: weight 1, not 0
    assert np.allclose(w, np.log(51.0 / (1.0 + (A != 0).sum(axis=0))) + 1.0)
    W = apply_idf(A, w)
    # The inner products are the IDF-weighted ones: sum_k w_k^2 a_ik a_jk.
    assert np.allclose(W @ W.T, (A * w**2) @ A.T)


# -- fingerprints -----------------------------------------------------------------------
def test_fingerprints_are_rdkits():
    pytest.importorskip("rdkit", reason="RDKit is the optional extra bigsearch[chem]")
    from rdkit import Chem
    from rdkit.Chem import rdFingerprintGenerator, rdMolDescriptors

    from bigsearch.ingest.fingerprints import fingerprints, parse_spec

    mols = [Chem.MolFromSmiles(s) for s in SMILES]
    bits = fingerprints(SMILES, parse_spec("atompair"))
    assert bits.shape == (5, 2048) and set(np.unique(bits)) <= {0.0, 1.0}
    for row, m in zip(bits, mols):
        fp = rdMolDescriptors.GetHashedAtomPairFingerprintAsBitVect(m, nBits=2048, minLength=1, maxLength=3)
        assert set(np.flatnonzero(row)) == set(fp.GetOnBits())
    counts = fingerprints(SMILES, parse_spec("atompair:512", counts=True))
    for row, m in zip(counts, mols):
        fp = rdMolDescriptors.GetHashedAtomPairFingerprint(m, nBits=512, minLength=1, maxLength=3)
        assert dict(zip(np.flatnonzero(row), row[row > 0])) == fp.GetNonzeroElements()
    morgan = fingerprints(SMILES, parse_spec("morgan:1024", counts=True))
    gen = rdFingerprintGenerator.GetMorganGenerator(radius=2, fpSize=1024)
    assert np.array_equal(morgan, np.array([gen.GetCountFingerprintAsNumPy(m) for m in mols]))
    assert counts.max() > 1 and morgan.max() > 1


def test_fingerprint_errors():
    pytest.importorskip("rdkit", reason="RDKit is the optional extra bigsearch[chem]")
    from bigsearch.ingest.fingerprints import fingerprints, parse_spec

    for bad in ("maccs", "morgan:x", "morgan:4"):
        with pytest.raises(ParameterError, match="^fingerprint "):
            parse_spec(bad)
    with pytest.raises(InputError, match="line 3: 'C1CC' is not a SMILES"):
        fingerprints(["CCO", "CC", "C1CC"], parse_spec("morgan"), where=lambda i: f"mols.csv, line {i + 1}")


def test_fingerprints_on_worker_processes():
    """Within fingerprint_workers, a large block is parsed by forked processes (not this
    one): the same rows as here, in order, and a bad SMILES in the second task named by
    its own row; after the block, no worker is left."""
    pytest.importorskip("rdkit", reason="RDKit is the optional extra bigsearch[chem]")
    import os
    from pathlib import Path

    from bigsearch.ingest import fingerprints as fp
    from bigsearch.ingest import workers

    lines = (Path(__file__).parent / "fixtures" / "enamine10k_head40.csv").read_text().splitlines()[1:]
    smiles = [line.split(",")[0] for line in lines] * 10  # 400: two tasks
    spec = fp.parse_spec("atompair", counts=True)
    here = fp.fingerprints(smiles, spec)
    with fp.fingerprint_workers():
        if not workers._WORKERS:
            pytest.skip("one core, or not Linux: fingerprints are parsed here")
        pool = workers._WORKERS[-1].pool
        assert pool._processes and os.getpid() not in pool._processes
        seen = pool.submit(os.getpid).result()
        assert seen in pool._processes
        assert np.array_equal(fp.fingerprints(smiles, spec), here)
        with pytest.raises(InputError, match="^line 301: 'C1CC' is not a SMILES"):
            fp.fingerprints(smiles[:300] + ["C1CC"] + smiles[300:], spec, where=lambda i: f"line {i + 1}")
    assert not workers._WORKERS and not pool._processes


def test_ingest_of_molecules_in_several_blocks_keeps_their_order(tmp_path):
    """6,000 molecules (three blocks, 24 tasks of the worker processes, featurized two
    blocks ahead): the store is the recipe computed here row by row, in input order."""
    pytest.importorskip("rdkit", reason="RDKit is the optional extra bigsearch[chem]")
    from pathlib import Path

    from bigsearch import open_store
    from bigsearch.ingest import ingest
    from bigsearch.ingest.fingerprints import fingerprints, parse_spec

    lines = (Path(__file__).parent / "fixtures" / "enamine10k_head40.csv").read_text().splitlines()
    rows = [line.split(",")[0] + "," + str(i) for i, line in enumerate(lines[1:] * 150)]
    rng = np.random.default_rng(1)
    rows = [rows[i] for i in rng.permutation(len(rows))]  # no two blocks alike
    (tmp_path / "mols.csv").write_text("\n".join(["smiles,n", *rows]) + "\n")
    features = recipe_features(drop="n", samples=64)
    ingest([tmp_path / "mols.csv"], tmp_path / "m.zarr", features=features)
    spec = {"samples": 64, "buckets": 2, "power": 2, "seed": 0}
    F = fingerprints([r.split(",")[0] for r in rows], parse_spec("atompair", counts=True))
    expected = np.vstack(
        [minmax_features(F[a : a + 500], spec, minmax_params(2048, spec)) for a in range(0, 6000, 500)]
    )
    with open_store(tmp_path / "m.zarr") as store:
        assert store.n == 6000
        assert np.array_equal(store.read_rows(np.arange(6000)), expected.astype(np.float32))


# -- the ingest options ----------------------------------------------------------------
def _molecules_csv(path, n=40):
    rng = np.random.default_rng(0)
    fragments = ["C", "CC", "O", "N", "c1ccccc1", "C(=O)", "C(Cl)", "C(F)", "C1CC1", "S", "C(N)"]
    rows = ["smiles,score"]
    for i in range(n):
        smi = "".join(rng.choice(fragments, 4)) + "C"
        rows.append(f"{smi},{-5 - rng.random() * 4:.2f}")
    path.write_text("\n".join(rows) + "\n")
    return [r.split(",")[0] for r in rows[1:]]


@pytest.mark.parametrize("chunk_rows", [1, 7, None])
def test_ingest_fingerprints_with_idf_normalize_bias(tmp_path, chunk_rows):
    """The store holds exactly: fingerprints -> IDF over all rows -> unit rows -> bias."""
    pytest.importorskip("rdkit", reason="RDKit is the optional extra bigsearch[chem]")
    from bigsearch.ingest import FeatureOptions, OutputOptions, ingest
    from bigsearch.ingest.fingerprints import fingerprints, parse_spec
    from bigsearch.storage import open_store

    smiles = _molecules_csv(tmp_path / "mols.csv")
    ingest(
        [str(tmp_path / "mols.csv")],
        tmp_path / "m.zarr",
        features=FeatureOptions(
            smiles_column="smiles", drop=("score",), fingerprint="morgan:256", idf=True, normalize=True, bias=True
        ),
        output=OutputOptions(dtype="float64", chunk_rows=chunk_rows),
    )
    F = fingerprints(smiles, parse_spec("morgan:256"))
    W = F * (np.log(41.0 / (1.0 + (F != 0).sum(axis=0))) + 1.0)
    W = np.hstack([W / np.linalg.norm(W, axis=1, keepdims=True), np.ones((len(W), 1))])
    with open_store(tmp_path / "m.zarr") as store:
        X = store.read_rows(np.arange(store.n))
        feat = store.attrs["featurization"]
    assert np.allclose(X, W, rtol=0, atol=1e-12)
    assert feat["steps"] == ["encode", "idf", "normalize", "bias"]
    assert feat["columns"][0]["fingerprint"]["kind"] == "morgan" and feat["columns"][0]["fingerprint"]["bits"] == 256
    assert feat["idf"]["rows"] == 40 and len(feat["idf"]["document_frequency"]) == 256


def test_ingest_minmax_cli(tmp_path):
    """`ingest --smiles-column --counts --minmax` from the CLI: unit rows whose inner
    products approximate the MinMax kernel of the count fingerprints."""
    pytest.importorskip("rdkit", reason="RDKit is the optional extra bigsearch[chem]")
    import json
    import subprocess
    import sys

    from bigsearch.ingest.fingerprints import fingerprints, parse_spec
    from bigsearch.storage import open_store

    smiles = _molecules_csv(tmp_path / "mols.csv", n=12)
    out = tmp_path / "m.zarr"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "bigsearch",
            "ingest",
            str(tmp_path / "mols.csv"),
            str(out),
            "--quiet",
            "--smiles-column",
            "smiles",
            "--drop",
            "score",
            "--fingerprint",
            "atompair:512",
            "--counts",
            "--minmax",
            "2000",
            "--minmax-buckets",
            "16",
            "--seed",
            "4",
        ],
        check=True,
    )
    with open_store(out) as store:
        X = store.read_rows(np.arange(store.n)).astype(np.float64)
        assert X.shape == (12, 2000 * 16)
        assert json.loads(json.dumps(store.attrs["featurization"]))["minmax"]["power"] == 1
    K = minmax_kernel(*[fingerprints(smiles, parse_spec("atompair:512", counts=True))] * 2)
    # s.d. <= 1 / (2 sqrt(2000)) = 0.011 per inner product; 0.06 is 5 of them.
    assert np.abs(X @ X.T - (K + (1 - K) / 16)).max() < 0.06
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "bigsearch",
            "ingest",
            str(tmp_path / "mols.csv"),
            str(tmp_path / "x.zarr"),
            "--smiles-column",
            "smiles",
            "--fingerprint",
            "maccs",
        ],
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2 and bad.stderr.startswith("Error: --fingerprint 'maccs'")
    assert not (tmp_path / "x.zarr").exists()


def test_ingest_states_throughput_per_stage(tmp_path):
    """`ingest`'s summary times the writing pass's stages (read, featurize, map, write)
    with rows/s and MB/s each; the map stage did nothing without a feature map."""
    pytest.importorskip("rdkit", reason="RDKit is the optional extra bigsearch[chem]")
    import re
    import subprocess
    import sys
    from pathlib import Path

    from bigsearch.ingest import FeatureOptions, ingest

    mols = str(Path(__file__).parent / "fixtures" / "enamine10k_head40.csv")
    recipe = ["--smiles-column", "smiles", "--drop", "score", "--fingerprint", "atompair", "--counts"]
    minmax = ["--minmax", "64", "--minmax-buckets", "2", "--minmax-power", "2"]
    run = subprocess.run(
        [sys.executable, "-m", "bigsearch", "ingest", mols, str(tmp_path / "m.zarr"), *recipe, *minmax],
        capture_output=True,
        text=True,
        check=True,
    )
    line = next(line for line in run.stderr.splitlines() if line.startswith("per stage: "))
    for stage in ("read", "featurize", "map", "write"):
        assert re.search(rf"\b{stage} [0-9.]+ s \([0-9,]+ rows/s, [0-9,.]+ MB/s\)", line), line
    summary = ingest(
        [mols],
        tmp_path / "plain.zarr",
        features=FeatureOptions(smiles_column="smiles", drop=("score",), fingerprint="atompair"),
    )
    stages = summary["stages"]
    assert list(stages) == ["read", "featurize", "map", "write"]
    assert stages["map"]["rows"] == 0 and stages["map"]["MB"] == 0
    assert stages["read"]["rows"] == stages["featurize"]["rows"] == stages["write"]["rows"] == 40
    assert stages["featurize"]["MB"] == 40 * 2048 * 8 / 1e6 and stages["write"]["MB"] == 40 * 2048 * 4 / 1e6
    assert all(stages[s]["seconds"] > 0 and stages[s]["rows_per_second"] > 0 for s in ("read", "featurize", "write"))


def _fingerprints_in_workers_only(real, dies_on):
    """sparse_fingerprints, except that a worker process given ``dies_on`` is killed (as by
    the OOM killer) before answering; this process (the fallback) parses it."""

    def parse(smiles, spec):
        import multiprocessing
        import os

        if dies_on in smiles and multiprocessing.parent_process() is not None:
            os._exit(1)
        return real(smiles, spec)

    return parse


def test_ingest_of_molecules_survives_a_killed_worker(tmp_path, monkeypatch):
    """A worker process killed mid-ingest (its pool broken) costs only time: the blocks
    from then on are fingerprinted and mapped here, and the store is the one written
    without the kill."""
    pytest.importorskip("rdkit", reason="RDKit is the optional extra bigsearch[chem]")
    from pathlib import Path

    from bigsearch import open_store
    from bigsearch.ingest import featurize, ingest

    lines = (Path(__file__).parent / "fixtures" / "enamine10k_head40.csv").read_text().splitlines()
    rows = [line.split(",")[0] + "," + str(i) for i, line in enumerate(lines[1:] * 50)]
    rows.insert(1200, "CCCCCCCCCCO,-1")  # in the fifth task: the workers have answered before
    (tmp_path / "mols.csv").write_text("\n".join(["smiles,n", *rows]) + "\n")
    features = recipe_features(drop="n", samples=64)
    ingest([tmp_path / "mols.csv"], tmp_path / "whole.zarr", features=features)
    monkeypatch.setattr(
        featurize, "sparse_fingerprints", _fingerprints_in_workers_only(featurize.sparse_fingerprints, "CCCCCCCCCCO")
    )
    ingest([tmp_path / "mols.csv"], tmp_path / "killed.zarr", features=features)
    with open_store(tmp_path / "whole.zarr") as whole, open_store(tmp_path / "killed.zarr") as killed:
        assert killed.n == whole.n == len(rows)
        assert np.array_equal(killed.read_rows(np.arange(killed.n)), whole.read_rows(np.arange(whole.n)))


def test_the_map_reaches_the_workers_once_as_shared_memory():
    """Within fingerprint_workers the map's random numbers are drawn into memory the workers
    share: a task carries their handles (bytes, not 200 MB), and a worker maps the same
    numbers: the buckets it computes are the ones computed here."""
    pytest.importorskip("rdkit", reason="RDKit is the optional extra bigsearch[chem]")
    import pickle
    from pathlib import Path

    from bigsearch.ingest import workers
    from bigsearch.ingest.featurize import fingerprint_buckets
    from bigsearch.ingest.fingerprints import parse_spec

    lines = (Path(__file__).parent / "fixtures" / "enamine10k_head40.csv").read_text().splitlines()[1:]
    smiles = [line.split(",")[0] for line in lines]
    spec = {"samples": 2048, "buckets": 2, "power": 2, "seed": 0}
    fp_spec = parse_spec("atompair", counts=True)
    with workers.fingerprint_workers():
        if not workers._WORKERS:
            pytest.skip("one core, or not Linux: no worker processes")
        params = minmax_params(2048, spec)
        assert params.shared is not None and len(pickle.dumps(params)) < 2000
        here = fingerprint_buckets(smiles, fp_spec, params, 2)
        there = workers.worker_map(fingerprint_buckets, [smiles], (fp_spec, params, 2))[0]
    assert np.array_equal(here[0], there[0]) and np.array_equal(here[1], there[1])
    assert here[0].dtype == np.uint8 and len(np.unique(here[0])) == 2
    plain = minmax_params(2048, spec)  # no workers: plain arrays, pickled whole
    assert plain.shared is None and np.array_equal(plain.tiles, params.tiles)


def test_molecules_parsed_before_the_map_is_drawn_are_mapped_alike(tmp_path):
    """The first blocks are parsed while the map's random numbers are still being drawn
    (a Future not done yet) and mapped after: the same features as when they are drawn
    first, as float32 or float64, and the dense map's."""
    pytest.importorskip("rdkit", reason="RDKit is the optional extra bigsearch[chem]")
    from concurrent.futures import Future
    from pathlib import Path

    from bigsearch.ingest import workers
    from bigsearch.ingest.featurize import ColumnPlan, Plan, featurize_timed, prepare
    from bigsearch.ingest.fingerprints import fingerprints, parse_spec
    from bigsearch.ingest.readers import open_reader

    class Drawing(Future):
        def done(self):
            return False

    fixture = Path(__file__).parent / "fixtures" / "enamine10k_head40.csv"
    block = next(open_reader(fixture).blocks(1 << 20))
    fp_spec = parse_spec("atompair", counts=True)
    spec = {"samples": 64, "buckets": 2, "power": 2, "seed": 0}
    plan = Plan([ColumnPlan(0, "smiles", "fingerprint", fingerprint=fp_spec)], minmax=spec)
    weights = prepare(plan)
    drawing = Drawing()
    drawing.set_result(weights)
    smiles = [line.split(",")[0] for line in fixture.read_text().splitlines()[1:]]
    dense = minmax_features(fingerprints(smiles, fp_spec), spec, weights["minmax"])
    with workers.fingerprint_workers():
        if not workers.workers_running():
            pytest.skip("one core, or not Linux: no worker processes")
        for dtype in ("float32", "float64"):
            late = featurize_timed(block, plan, drawing, dtype)[0]
            assert late.dtype == dtype and np.array_equal(late, featurize_timed(block, plan, weights, dtype)[0])
            assert np.array_equal(late, dense.astype(dtype))
    here = featurize_timed(block, plan, drawing, "float32")[0]  # no workers: mapped here, as float64
    assert here.dtype == np.float64 and np.array_equal(here, dense)


def test_row_buffers_reuse_only_arrays_nothing_else_holds():
    """The map's rows are made in kept arrays, reused (zeroed) only once nothing else
    holds them or a view of them: rows the writer still holds are never overwritten."""
    from bigsearch.ingest.featurize import RowBuffers

    buffers = RowBuffers("float32", keep=2)
    a = buffers.zeros((3, 4))
    a[:] = 1.0
    leftover = a[1:]  # as the writer keeps the rows a chunk leaves over
    b = buffers.zeros((3, 4))
    assert b is not a and not b.any() and leftover.all()
    reused = id(a)
    del a, leftover
    c = buffers.zeros((3, 4))
    assert id(c) == reused and c.dtype == np.float32 and not c.any() and len(buffers._arrays) == 2
    c[:] = 2.0
    d = buffers.zeros((3, 4))  # both kept arrays held (b, c): a fresh one, not kept
    assert d is not b and d is not c and len(buffers._arrays) == 2
    assert buffers.zeros((5, 4)).shape == (5, 4)  # another shape (a block's last rows): made fresh
