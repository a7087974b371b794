"""Compact encodings (float16, int8, binary): round trips, the decoding recipe of
docs/store-format.md, kernels that read the codes, and the engine against the dense
reference run on the DECODED matrix, for both store kinds and every chunking."""

import itertools

import h5py
import numpy as np
import pytest
import zarr

import bigsearch
from bigsearch.errors import DataError, StoreError
from bigsearch.kernels.encoded import stream_dots
from bigsearch.kernels.las import degrees
from bigsearch.storage.encoding import as_chunk, binary_rows, decode, encode_rows
from bigsearch.testing import brute_force_impact, dense_J, dense_las_run, dense_wnas

from conftest import KINDS, chunkings, run_queries, store_path

ENCODINGS = ["float16", "int8", "binary"]
RTOL = 1e-9


def binary_data(n=80, r=21, seed=5, density=0.15):
    """0/1 rows times 1/sqrt(bits set): positives share a block of bits; every row has
    its first bit set (a bias), so every degree is positive."""
    rng = np.random.default_rng(seed)
    y = (rng.random(n) < 0.2).astype(np.int8)
    bits = rng.random((n, r)) < density
    bits[y == 1, 1:6] |= rng.random(((y == 1).sum(), 5)) < 0.8
    bits[:, 0] = True
    X = bits / np.sqrt(bits.sum(axis=1, keepdims=True))
    return X.astype(np.float32), y


# The engine's cases: "sparse-bits" is a binary store with few bits set, which the sparse
# kernels of kernels/encoded.py take (steps.sparse_bits); "binary" has a quarter of its
# bits set, which BLAS takes on decoded rows.
ENGINE_CASES = [*ENCODINGS, "sparse-bits"]


@pytest.fixture(scope="module")
def datasets(small_data):
    return {"float16": small_data, "int8": small_data, "binary": binary_data(),
            "sparse-bits": binary_data(r=96, density=0.02)}


def make(tmp_path, data, encoding, kind="zarr", chunk_rows=7, name="s"):
    X, y = data
    stem = f"{name}-{encoding}-{chunk_rows}"
    path = store_path(tmp_path, stem, kind)
    encoding = "binary" if encoding == "sparse-bits" else encoding
    bigsearch.create_store(path, X, y, encoding=encoding, chunk_rows=chunk_rows, kind=kind)
    return path


def test_the_binary_cases_take_both_kinds_of_kernel(datasets):
    from bigsearch.engine.core.steps import SPARSE_BITS

    def share_set(case):
        X = datasets[case][0]
        return np.count_nonzero(X) / X.size

    assert share_set("sparse-bits") <= SPARSE_BITS < share_set("binary")


def decoded(path):
    s = bigsearch.open_store(path)
    return s.read_rows(np.arange(s.n))


def rel_err(a, b):
    return np.abs(np.asarray(a) - b).max() / np.abs(b).max()


# -- storage ----------------------------------------------------------------------
@pytest.mark.parametrize("kind,encoding", list(itertools.product(KINDS, ENCODINGS)))
def test_round_trip_and_plain_decoding(tmp_path, datasets, kind, encoding):
    """What the store holds decodes, with plain zarr/h5py and the recipe of
    docs/store-format.md, to the values bigsearch reads; close to the input."""
    X, y = datasets[encoding]
    path = make(tmp_path, datasets[encoding], encoding, kind)
    store = bigsearch.open_store(path)
    assert (store.n, store.r, store.encoding) == (len(X), X.shape[1], encoding)
    got = decoded(path)
    if kind == "zarr":
        g = zarr.open_group(str(path), mode="r")
        codes, attrs = g["X"][:], dict(g.attrs)
        scale = g["X_scale"][:] if "X_scale" in g else None
    else:
        with h5py.File(path) as f:
            codes, scale = f["X"][()], f["X_scale"][()] if "X_scale" in f else None
            attrs = {"bigsearch_encoding": f.attrs["bigsearch_encoding"]}
    assert "binary" not in str(attrs) or encoding == "binary"
    if encoding == "float16":
        plain = codes.astype(np.float64)
    elif encoding == "int8":
        plain = codes.astype(np.float64) * scale[:, None].astype(np.float64)
    else:
        bits = np.unpackbits(codes, axis=1, count=X.shape[1], bitorder="little")
        plain = bits * scale[:, None].astype(np.float64)
    np.testing.assert_array_equal(got, plain)
    tol = {"float16": 1e-3, "int8": 0.5 / 127, "binary": 1e-7}[encoding]
    assert np.abs(got - X).max() <= tol * np.abs(X).max()
    np.testing.assert_array_equal(store.labels(), y)
    expected_bpp = {"float16": 2 * X.shape[1], "int8": X.shape[1] + 4, "binary": (X.shape[1] + 7) // 8 + 4}
    assert store.bytes_per_point == expected_bpp[encoding]
    assert store.describe()["encoding"] == encoding


@pytest.mark.parametrize(
    "rows, binary",
    [
        ([[0, 0.5, 0.5, 0], [0, 0, 0, 0], [-2, 0, 0, -2]], True),  # a scale per row, an all-zero row
        ([[0, 1, 2, 0]], False),
        ([[0, 0, 0, 0], [1, 0, 1, 1.0000001]], False),  # unequal as float32 too
        ([[1, 0, 1, 1 + 1e-9]], True),  # equal as float32, the precision of the scale
        ([[0, -1, 0, 1]], False),
        ([[1, 0, np.nan, 1]], False),
        ([[np.nan, 0, 0, 0]], False),
        ([[np.inf, 0, np.inf, 0]], True),
    ],
)
def test_binary_rows_is_one_number_per_row(rows, binary):
    """binary_rows(X) says whether every row is 0/1 times one number (compared as float32),
    checked against that definition row by row."""
    X = np.array(rows, np.float64)
    assert binary_rows(X) is binary
    X32 = X.astype(np.float32)
    assert binary == all(len(set(row[row != 0].tolist())) <= 1 and not np.isnan(row).any() for row in X32)


@pytest.mark.parametrize("bad_row", [None, 0, 63, 64, 150, 199])
def test_binary_rows_over_many_blocks(bad_row):
    """Wide rows are checked 1 MiB (64 rows of 4,096 float32) at a time: a bad row in any
    block, the first, a last partial one or at a block's edge, is found."""
    rng = np.random.default_rng(3)
    X = (rng.random((200, 4096)) < 0.5) * rng.uniform(0.5, 2.0, (200, 1))
    if bad_row is not None:
        X[bad_row, np.flatnonzero(X[bad_row])[-1]] *= 2
    assert binary_rows(X) is (bad_row is None)


def test_encoding_errors_leave_no_store(tmp_path):
    X = np.eye(4, dtype=np.float32) * 2
    X[2, 3] = 0.5                                            # row 2: 2 and 0.5 is not 0/1 times one number
    path = tmp_path / "b.zarr"
    with pytest.raises(DataError, match="row 3, feature 3|row 2"):
        bigsearch.create_store(path, X, encoding="binary")
    assert not path.exists() and not list(tmp_path.iterdir())
    with pytest.raises(DataError, match="float16"):
        bigsearch.create_store(tmp_path / "h.h5", np.array([[1e6, 1.0]]), encoding="float16")
    with pytest.raises(DataError, match="int8 scale"):
        bigsearch.create_store(tmp_path / "i.zarr", np.array([[1e-44, 0.0]]), encoding="int8")
    with pytest.raises(DataError, match="finite"):
        bigsearch.create_store(tmp_path / "n.zarr", np.array([[np.inf, 0.0]]), encoding="int8")
    with pytest.raises(StoreError, match="unknown encoding"):
        bigsearch.create_store(tmp_path / "u.zarr", X, encoding="int4")
    assert not list(tmp_path.iterdir())


def test_int8_codes_never_overflow():
    X = np.array([[127.0, -127.0, 1.0], [3.0, -3.0, 0.0], [0.0, 0.0, 0.0]])
    codes, scale = encode_rows(X, "int8")
    assert codes.dtype == np.int8 and np.abs(codes.astype(int)).max() <= 127
    np.testing.assert_allclose(codes * scale[:, None].astype(np.float64), X, rtol=1e-6)


def test_int8_keeps_small_integers_exactly(tmp_path):
    """Rows of integers within +-127 (fingerprint counts) get scale 1: the store decodes to
    the values themselves; other rows keep max |x| / 127."""
    X = np.array([[3.0, 0.0, 17.0, 1.0], [127.0, -5.0, 0.0, 2.0], [0.0, 0.0, 0.0, 0.0], [128.0, 1.0, 0.0, 0.0],
                  [0.5, 1.0, 2.0, 3.0]])
    codes, scale = encode_rows(X, "int8")
    assert scale[:2].tolist() == [1.0, 1.0] and np.array_equal(codes[:3].astype(np.float64), X[:3])
    assert scale[3] == np.float32(128.0 / 127) and scale[4] == np.float32(3.0 / 127)
    path = tmp_path / "counts.zarr"
    bigsearch.create_store(path, X[:3], encoding="int8")
    assert np.array_equal(bigsearch.open_store(path).read_rows(np.arange(3)), X[:3])


def test_int8_without_scale_or_attribute_is_refused(tmp_path):
    g = zarr.open_group(str(tmp_path / "raw.zarr"), mode="w")
    g.create_array("X", shape=(3, 2), dtype="int8")[:] = 1
    with pytest.raises(StoreError, match="bigsearch_encoding"):
        bigsearch.open_store(tmp_path / "raw.zarr")
    g.attrs["bigsearch_encoding"] = {"name": "int8", "n_features": 2}
    with pytest.raises(StoreError, match="X_scale"), bigsearch.open_store(tmp_path / "raw.zarr").chunk(0):
        pass


# -- kernels ------------------------------------------------------------------------
def test_float16_bit_decoding_is_exact():
    """Every finite half value, subnormals and signed zeros included."""
    patterns = np.arange(1 << 16, dtype=np.uint16)
    halves = patterns.view(np.float16)
    finite = patterns[np.isfinite(halves)].reshape(-1, 1)
    x = as_chunk(finite, "float16", None, 1)  # as the stores give it (read-only: the kernel the engine compiles)
    deg = np.empty(len(finite))
    degrees(x, np.ones(1), deg)
    np.testing.assert_array_equal(deg, finite.view(np.float16).astype(np.float64)[:, 0])


def test_float16_decoding_without_hardware_half_is_exact(monkeypatch):
    """The integer route for CPUs without half conversions (x86 without F16C)."""
    import numba

    from bigsearch.kernels import common
    monkeypatch.setattr(common, "HALF_IN_HARDWARE", False)

    @numba.njit
    def decode_all(codes):         # compiled here, so with the integer route
        return np.array([common.as_float64(h) for h in codes])

    patterns = np.arange(1 << 16, dtype=np.uint16)
    finite = patterns[np.isfinite(patterns.view(np.float16))]
    np.testing.assert_array_equal(decode_all(finite), finite.view(np.float16).astype(np.float64))


@pytest.mark.parametrize("r", [1, 8, 13, 64, 300])
@pytest.mark.parametrize("k", [1, 3, 40])
def test_binary_lookup_tables_and_expansion_match_decoded_products(r, k):
    """Lookup tables (few columns) and expanded bits (many columns: no tables) give
    the products of the decoded rows."""
    rng = np.random.default_rng(r * 100 + k)
    bits = rng.random((50, r)) < 0.3
    X = bits * rng.random((50, 1)).astype(np.float32)
    codes, scale = encode_rows(X, "binary")
    x = as_chunk(codes, "binary", scale, r)
    D = decode(x)
    V = rng.standard_normal((k, r))
    from bigsearch.kernels.wnas import add_similarities
    num, den, f = np.zeros(50), np.zeros(50), np.zeros(50)
    add_similarities(x, V, np.ones(k), 0, np.full(50, -1, np.int8), num, den, f)
    np.testing.assert_allclose(num, (D @ V.T).sum(axis=1), rtol=1e-12, atol=1e-12)
    assert stream_dots(x, V[:1]) == pytest.approx((D @ V[0]).sum(), rel=1e-12)


@pytest.mark.parametrize("encoding", ["float16", "int8"])
@pytest.mark.parametrize("r", [13, 1100])
def test_code_kernels_match_decoded_products_wherever_a_row_sits(encoding, r):
    """float16 and int8 codes go four rows at a time (kernels/common.py): every row's
    dot product is the decoded row's, and the same bits wherever the row sits in a block
    (rebuilt state stays bit-identical)."""
    rng = np.random.default_rng(r)
    codes, scale = encode_rows(rng.standard_normal((70, r)), encoding)
    x = as_chunk(codes, encoding, scale, r)
    s = rng.standard_normal(r)
    deg = np.zeros(70)
    degrees(x, s, deg)
    np.testing.assert_allclose(deg, decode(x) @ s, rtol=1e-12, atol=1e-12)
    for skip in (1, 2, 3, 66):
        part = np.zeros(70 - skip)
        degrees(as_chunk(codes[skip:], encoding, scale[skip:] if scale is not None else None, r), s, part)
        assert np.array_equal(part, deg[skip:])


# -- the engine against the dense reference on decoded values --------------------------
GRID = list(itertools.product(KINDS, ENGINE_CASES, chunkings(80)))


@pytest.mark.parametrize("kind,encoding,chunk_rows", GRID)
def test_f_and_impact_match_brute_force(tmp_path, datasets, kind, encoding, chunk_rows):
    _, y = datasets[encoding]
    path = make(tmp_path, datasets[encoding], encoding, kind, chunk_rows)
    Xd = decoded(path)
    search = bigsearch.LAS(path, pi=0.2, eta=0.5, alpha=0.01)
    start = [int(np.flatnonzero(y)[0]), int(np.flatnonzero(y == 0)[0])]
    search.tell(start, [1, 0])
    labels = np.full(len(y), -1)
    labels[start] = [1, 0]
    for _ in range(4):
        f, im = brute_force_impact(Xd, labels, pi=0.2, eta=0.5)
        assert rel_err(search.f, f) < RTOL
        assert rel_err(search.impact, im) < RTOL
        i = search.ask()
        search.tell(i, int(y[i]))
        labels[i] = y[i]


@pytest.mark.parametrize("kind,encoding,chunk_rows", GRID)
def test_query_sequences_match_dense(tmp_path, datasets, kind, encoding, chunk_rows):
    _, y = datasets[encoding]
    path = make(tmp_path, datasets[encoding], encoding, kind, chunk_rows)
    Xd = decoded(path)
    init = [int(np.flatnonzero(y)[2])]
    expected = dense_las_run(Xd, y, init, 25, pi=0.15, eta=0.6, w0=0.02, alpha=1e-2)
    las = bigsearch.LAS(path, pi=0.15, eta=0.6, w0=0.02, alpha=1e-2)
    las.tell(init[0], 1)
    assert run_queries(las, y, 25) == expected
    wnas = bigsearch.WNAS(path)
    wnas.tell(init[0], 1)
    labels = np.full(len(y), -1)
    labels[init[0]] = 1
    for _ in range(10):
        np.testing.assert_allclose(wnas.f, dense_wnas(Xd, labels), rtol=1e-12, atol=1e-12)
        i = wnas.ask()
        wnas.tell(i, int(y[i]))
        labels[i] = y[i]


@pytest.mark.parametrize("encoding", ["float32", "float64", *ENGINE_CASES])
@pytest.mark.parametrize("batch_size", [5, 30])
def test_batch_of_labels_matches_brute_force(tmp_path, datasets, encoding, batch_size):
    """Labels told together (5: the fused kernel; 30: BLAS products and the blocked
    Sherman-Morrison update): one pass, exact, for LAS and WNAS."""
    data = datasets.get(encoding, datasets["int8"])
    y = data[1]
    path = make(tmp_path, data, encoding, "hdf5", 9)
    Xd = decoded(path)
    las, wnas = bigsearch.LAS(path, pi=0.2, alpha=0.01), bigsearch.WNAS(path)
    labels = np.full(len(y), -1)
    order = np.random.default_rng(0).permutation(len(y))
    for batch in (order[:batch_size], order[batch_size:2 * batch_size]):
        las.tell(batch.tolist(), y[batch].tolist())
        wnas.tell(batch.tolist(), y[batch].tolist())
        labels[batch] = y[batch]
        f, im = brute_force_impact(Xd, labels, pi=0.2)
        assert rel_err(las.f, f) < RTOL and rel_err(las.impact, im) < RTOL
        assert rel_err(las.J, dense_J(Xd, labels)) < RTOL
        np.testing.assert_allclose(wnas.f, dense_wnas(Xd, labels), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("encoding", ["float32", "binary", "sparse-bits"])
def test_batch_at_alpha_zero_defers_J(tmp_path, datasets, encoding):
    """At alpha = 0 a batch's pass updates f only: the queries are the dense reference's,
    J and the impact factor are exact when read, and saved state restores them."""
    data = datasets.get(encoding, datasets["int8"])
    y = data[1]
    path = make(tmp_path, data, encoding, "zarr", 9)
    Xd = decoded(path)
    las = bigsearch.LAS(path, pi=0.2, alpha=0.0)
    las.sync()                      # initialized: the batch below is an update
    labels = np.full(len(y), -1)
    batch = np.random.default_rng(0).permutation(len(y))[:30]
    las.tell(batch.tolist(), y[batch].tolist())
    labels[batch] = y[batch]
    f, im = brute_force_impact(Xd, labels, pi=0.2)
    i = las.ask()                   # by f: near-ties (identical rows) may go either way
    assert las._J_stale and labels[i] < 0 and f[i] > f[labels < 0].max() - 1e-12
    las.tell(i, int(y[i]))          # a single label on top of the deferred J
    labels[i] = y[i]
    saved = las.export_state()
    f, im = brute_force_impact(Xd, labels, pi=0.2)
    for search in (las, bigsearch.LAS.from_state(path, saved)):
        assert rel_err(search.f, f) < RTOL and rel_err(search.impact, im) < RTOL and not search._J_stale
        assert rel_err(search.J, dense_J(Xd, labels)) < RTOL
        assert f[search.ask()] > f[labels < 0].max() - 1e-12


# -- the distributed backend -------------------------------------------------------------
# Each engine case once, each store kind for two of them: how a worker reads a coded chunk
# is the local backend's (checked above for both kinds and every chunking); what the cluster
# adds is the codes' kernels compiled and run in the workers, per encoding.
DISTRIBUTED_CASES = [("zarr", "float16"), ("hdf5", "int8"), ("zarr", "binary"), ("hdf5", "sparse-bits")]


def test_the_distributed_cases_cover_every_engine_case_and_kind():
    assert sorted({e for _, e in DISTRIBUTED_CASES}) == sorted(ENGINE_CASES)
    assert sorted({k for k, _ in DISTRIBUTED_CASES}) == sorted(KINDS)


@pytest.mark.parametrize("kind,encoding", DISTRIBUTED_CASES)
def test_distributed_backend_matches_dense(tmp_path, datasets, client, kind, encoding):
    _, y = datasets[encoding]
    path = make(tmp_path, datasets[encoding], encoding, kind, 9)
    init = [int(np.flatnonzero(y)[2])]
    expected = dense_las_run(decoded(path), y, init, 12, pi=0.15, eta=0.6, w0=0.02, alpha=1e-2)
    las = bigsearch.LAS(path, pi=0.15, eta=0.6, w0=0.02, alpha=1e-2, backend=client)
    las.tell(init[0], 1)
    assert run_queries(las, y, 12) == expected
    las.close()


# -- ingest and info through the real CLI ------------------------------------------------
def test_ingest_encodings_round_trip_and_info(tmp_path, datasets):
    from conftest import run_cli
    X = datasets["binary"][0]
    bits = (X > 0).astype(np.float32)
    np.save(tmp_path / "bits.npy", bits)
    plain = run_cli("ingest", tmp_path / "bits.npy", tmp_path / "plain.zarr", "--normalize")
    assert plain.returncode == 0 and "--encoding binary would store 7 bytes per point instead of 84" in plain.stderr
    share = np.count_nonzero(bits) / bits.size
    dense = f"with the same results; with {share:.0%} of the bits set, a query of a store in memory is slower"
    assert dense in plain.stderr
    sparse = (datasets["sparse-bits"][0] > 0).astype(np.float32)
    np.save(tmp_path / "sparse.npy", sparse)
    hint = run_cli("ingest", tmp_path / "sparse.npy", tmp_path / "sparse.zarr").stderr
    assert "--encoding binary would store 16 bytes per point instead of 384, with the same results\n" in hint
    for encoding in ("binary", "int8", "float16"):
        out = tmp_path / f"bits-{encoding}.h5"
        done = run_cli("ingest", tmp_path / "bits.npy", out, "--normalize", "--encoding", encoding, "-q")
        assert done.returncode == 0, done.stderr
        store = bigsearch.open_store(out)
        expected = bits / np.sqrt(bits.sum(axis=1, keepdims=True))
        tol = {"binary": 1e-7, "int8": 0.5 / 127, "float16": 1e-3}[encoding]
        assert store.encoding == encoding and np.abs(store.read_rows(np.arange(len(X))) - expected).max() < tol
        info = run_cli("info", out)
        assert f"encoding: {encoding}, {store.bytes_per_point} bytes per point" in info.stdout


def test_ingest_says_when_int8_holds_counts_exactly(tmp_path):
    """Counts (integers within +-127, not 0/1): ingest says int8 would store them exactly; with
    --encoding int8 the store reads back the counts themselves. Values beyond 127 or with a
    fraction get no such hint."""
    from conftest import run_cli
    rng = np.random.default_rng(4)
    counts = rng.poisson(2.0, size=(60, 16)).astype(np.float32)
    counts[0, 0] = 127
    np.save(tmp_path / "counts.npy", counts)
    plain = run_cli("ingest", tmp_path / "counts.npy", tmp_path / "plain.zarr")
    assert plain.returncode == 0, plain.stderr
    assert "--encoding int8 would store them exactly in 20 bytes per point instead of 64" in plain.stderr
    done = run_cli("ingest", tmp_path / "counts.npy", tmp_path / "int8.zarr", "--encoding", "int8", "-q")
    assert done.returncode == 0, done.stderr
    assert np.array_equal(bigsearch.open_store(tmp_path / "int8.zarr").read_rows(np.arange(60)), counts)
    for name, values in (("big", counts * 2), ("fractions", counts + 0.5)):
        np.save(tmp_path / f"{name}.npy", values)
        other = run_cli("ingest", tmp_path / f"{name}.npy", tmp_path / f"{name}.zarr")
        assert other.returncode == 0 and "--encoding int8" not in other.stderr


def test_ingest_binary_refuses_non_binary_values_with_one_line(tmp_path):
    from conftest import run_cli
    X = np.random.default_rng(1).random((50, 4))
    np.save(tmp_path / "x.npy", X)
    out = tmp_path / "out.zarr"
    done = run_cli("ingest", tmp_path / "x.npy", out, "--encoding", "binary", "-q")
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and done.stderr.startswith("Error: ")
    assert "binary" in done.stderr and "row 0" in done.stderr
    assert not out.exists() and [p.name for p in tmp_path.iterdir()] == ["x.npy"]
    done = run_cli("ingest", tmp_path / "x.npy", out, "--encoding", "int4", "-q")
    assert done.returncode == 2 and "--encoding" in done.stderr and not out.exists()


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("B", [1, 5, 30])
def test_batch_update_equals_sequential_sherman_morrison(B, sparse):
    """engine/core/rank_updates.py: K^-1 after batches of B labels (coefficients of both signs,
    as when 1 - eta > 1 / (1 + w0)), kept as a low-rank correction and folded in when it
    grows past fold_at, equals the rank-one updates in turn; the g_b, c_b, the K^-1 x_b
    before each batch and K^-1 [xq, xz] kept in O(r B) match; dense rows and sparse ones
    (K^-1 x_b from the rows of K^-1 at the nonzeros)."""
    from bigsearch.engine.core.rank_updates import LowRankInverse, advance_score_vectors, batch_update, fold_rank
    rng = np.random.default_rng(B)
    r = 40
    batches = 2 * fold_rank(r) // B + 1              # every run folds
    A = rng.standard_normal((r, r))
    K = A @ A.T / r + np.eye(r)
    rows = rng.standard_normal((batches * B, r)) / np.sqrt(r)
    if sparse:
        rows *= rng.random(rows.shape) < 0.1
    gamma = rng.uniform(0.05, 0.5, len(rows)) * np.where(np.arange(len(rows)) % 3 == 2, -0.2, 1.0)
    coef = rng.standard_normal((2, len(rows)))           # what the labels add to xq and xz
    Kinv = np.linalg.inv(K)
    Kinv = (Kinv + Kinv.T) / 2                 # as LAS keeps it
    xqz = rng.standard_normal((2, r))
    inverse, V = LowRankInverse(Kinv.copy()), xqz @ Kinv
    ref, folds = Kinv.copy(), 0
    for start in range(0, len(rows), B):
        part = slice(start, start + B)
        G0_ref = rows[part] @ ref
        G_ref, c_ref = [], []
        for x, g in zip(rows[part], gamma[part]):
            v = ref @ x
            c = g / (1.0 + g * (x @ v))
            ref -= c * np.outer(v, v)
            G_ref.append(v)
            c_ref.append(c)
        G, c, G0, folded = batch_update(inverse, rows[part], gamma[part], np.arange(start, start + B))
        folds += folded
        xqz = xqz + coef[:, part] @ rows[part]
        V = advance_score_vectors(V, G0, G, c, coef[:, part], xqz)
        np.testing.assert_allclose(G0, G0_ref, rtol=1e-9, atol=1e-13)
        np.testing.assert_allclose(G, np.array(G_ref), rtol=1e-9, atol=1e-13)
        np.testing.assert_allclose(c, c_ref, rtol=1e-12)
        np.testing.assert_allclose(V, xqz @ ref, rtol=1e-9, atol=1e-12)
    assert folds > 0 and (inverse.k > 0) == (B < inverse.fold_at)   # then value() applies the rest
    assert np.array_equal(inverse.base, inverse.base.T)   # a fold by syrk leaves the base symmetric to the bit
    Kinv = inverse.value()
    np.testing.assert_allclose(Kinv, ref, rtol=0, atol=1e-12 * np.abs(ref).max())
    np.testing.assert_allclose(Kinv, np.linalg.inv(K + (rows.T * gamma) @ rows), rtol=1e-9, atol=1e-12)
    assert (gamma < 0).any()
