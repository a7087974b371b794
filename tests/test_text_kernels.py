"""The text kernels (bigsearch/kernels/text.py) and the fit built on them (ingest/text.py)
against references: scikit-learn's murmurhash3, zlib's checksums, the pyarrow tokenizer,
SciPy's and NumPy's products and an exact SVD."""

import zlib

import numba
import numpy as np
import pyarrow as pa
import pytest
import scipy.sparse as sp
from sklearn.utils import murmurhash3_32

from bigsearch.ingest import text
from bigsearch.ingest.text import TextSpec, block_text_stats, merge_text_stats, term_counts, utf8_buffers
from bigsearch.kernels.text import hash_strings, project_documents, sparse_times_dense, text_keys

WORDS = ["", "a", "ab", "abc", "abcd", "abcde", "hello_world", "zebra12", "x" * 37, "café", "ünïcödé", "日本語"]


def buffers(strings):
    return utf8_buffers(pa.array(strings, pa.string()))


def random_documents(rng, m, non_ascii=0.0):
    """Documents of words, digits, '_', capitals and punctuation; some with non-ASCII letters."""
    words = ["Swine", "virus", "of", "the", "a", "x_1", "2013", "influenza", "META-analysis", "B", "covid19", "ÉTUDE"]
    separators = [" ", " ", ", ", "; ", " (", ") ", "—", " -- ", "\t", ".", "!?"]
    docs = []
    for _ in range(m):
        n = rng.integers(0, 40)
        pieces = [str(rng.choice(words)) + str(rng.choice(separators)) for _ in range(n)]
        doc = "".join(pieces)
        docs.append(doc if rng.random() < non_ascii else doc.replace("—", "-").replace("É", "E"))
    return docs


def test_murmur3_is_scikit_learns():
    got = hash_strings(*buffers(WORDS))
    assert [int(h) for h in got] == [murmurhash3_32(w, seed=0, positive=True) for w in WORDS]


def test_text_keys_are_zlibs_checksums():
    strings = [*WORDS, "q" * 20_000 + "é" * 3_000]  # past adler32's 5,552-byte run
    want = [(zlib.crc32(s.encode()) << 32) | zlib.adler32(s.encode()) for s in strings]
    assert [int(k) for k in text_keys(*buffers(strings))] == want


@pytest.mark.parametrize("ngram_max", [1, 2, 3])
@pytest.mark.parametrize("non_ascii", [0.0, 0.3, 1.0])
def test_term_counts_are_the_arrow_tokenizers(ngram_max, non_ascii):
    """The numba tokenizer gives the counts of pyarrow's string kernels on every document,
    ASCII or not."""
    docs = pa.array(random_documents(np.random.default_rng(ngram_max), 300, non_ascii))
    spec = TextSpec(bits=18, ngram_max=ngram_max)
    for got, want in zip(term_counts(docs, spec), text._arrow_term_counts(docs, spec)):
        np.testing.assert_array_equal(got, want)


def test_any_script_is_read_as_pyarrow_reads_it():
    """Characters of every plane, lower-cased to other lengths (U+023A: 2 bytes -> 3),
    dotted capitals, combining marks, digits of other scripts, emoji, separators."""
    rng = np.random.default_rng(5)
    alphabet = list("aZ_9 .-–—\u00a0ÉéİIıΣσςẞßȺⱥ\u0301Ω٣௫日本語한국어ДЖ😀𝐀𝔸") + [
        chr(c) for c in rng.integers(0x80, 0x3000, 80)
    ]
    docs = ["".join(rng.choice(alphabet, rng.integers(0, 60))) for _ in range(400)]
    spec = TextSpec(bits=20, ngram_max=2)
    for got, want in zip(term_counts(pa.array(docs), spec), text._arrow_term_counts(pa.array(docs), spec)):
        np.testing.assert_array_equal(got, want)


def test_the_unicode_tables_are_pyarrows():
    lower, word = text.unicode_tables()
    assert lower[ord("É")] == ord("é") and lower[ord("Ⱥ")] == ord("ⱥ") and lower[ord("a")] == ord("a")
    assert word[ord("é")] and word[ord("٣")] and not word[ord("–")] and not word[0x301]


@pytest.mark.parametrize("missing", [None, "on the mat"])
def test_a_slice_is_read_where_it_starts(missing):
    docs = pa.array(["skip this", "The cat sat", missing, "Dogs"]).slice(1)
    spec = TextSpec(bits=18)
    want = text._arrow_term_counts(pa.array(["The cat sat", missing or "", "Dogs"]), spec)
    for got, expected in zip(term_counts(docs, spec), want):
        np.testing.assert_array_equal(got, expected)


def random_csr(rng, rows, cols, density, dtype=np.float32):
    seed = np.random.RandomState(rng.integers(1 << 31))
    A = sp.random(rows, cols, density, format="csr", dtype=dtype, random_state=seed)
    A.data[A.indptr[3] : A.indptr[4]] = 0  # an empty row
    A.eliminate_zeros()
    return A


def test_sparse_times_dense_is_the_product_on_any_number_of_threads():
    rng = np.random.default_rng(0)
    A = random_csr(rng, 300, 500, 0.05)
    B = rng.standard_normal((500, 37)).astype(np.float32)
    outs = []
    for threads in sorted({1, numba.config.NUMBA_NUM_THREADS}):
        numba.set_num_threads(threads)
        out = np.full((300, 37), np.nan, np.float32)
        sparse_times_dense(A.indptr, A.indices, A.data, B, out)
        outs.append(out)
    numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)
    np.testing.assert_allclose(outs[0], (A @ B).astype(np.float64), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(outs[0], outs[-1])
    AT = A.T.tocsr()
    out = np.empty((500, 37), np.float32)
    sparse_times_dense(AT.indptr, AT.indices, AT.data, outs[0], out)
    np.testing.assert_allclose(out, A.T @ outs[0].astype(np.float64), rtol=1e-4, atol=1e-4)


def test_project_documents_adds_the_kept_terms_rows():
    rng = np.random.default_rng(1)
    A = random_csr(rng, 50, 80, 0.1, np.float64)
    columns = rng.integers(-1, 30, A.nnz).astype(np.int32)  # -1: a term left out of the projection
    components = rng.standard_normal((30, 16)).astype(np.float32)
    want = sp.csr_matrix((np.where(columns >= 0, A.data, 0), np.maximum(columns, 0), A.indptr), shape=(50, 30))
    out = np.ones((50, 16))
    project_documents(A.indptr, columns, A.data, components, out)
    np.testing.assert_allclose(out, 1 + want @ components.astype(np.float64), rtol=1e-12, atol=1e-12)


def test_orthonormal_spans_the_columns_and_survives_rank_deficiency():
    rng = np.random.default_rng(2)
    Y = (rng.standard_normal((400, 30)) * np.logspace(0, -3, 30)).astype(np.float32)
    Q = text._orthonormal(Y)
    np.testing.assert_allclose(Q.T.astype(np.float64) @ Q, np.eye(30), atol=1e-5)
    np.testing.assert_allclose(Q @ (Q.T @ Y), Y, atol=1e-5)
    Y[:, 10:] = Y[:, :20]  # rank 20: Cholesky fails, Householder's QR takes over
    Q = text._orthonormal(Y)
    np.testing.assert_allclose(Q.T.astype(np.float64) @ Q, np.eye(30), atol=1e-5)
    np.testing.assert_allclose(Q @ (Q.T @ Y), Y, atol=1e-4)


def test_the_randomized_fit_finds_the_leading_singular_vectors():
    """On a sparse matrix with separated leading singular values (a planted low rank and
    sparse noise), the right singular vectors V = S^T left are those of a dense SVD."""
    rng = np.random.default_rng(3)
    rank = sp.random(600, 30, 0.2, random_state=np.random.RandomState(0)) @ sp.diags(0.8 ** np.arange(30))
    planted = rank @ sp.random(30, 2000, 0.05, random_state=np.random.RandomState(1))
    S = (planted * 10 + sp.random(600, 2000, 0.01, random_state=np.random.RandomState(2))).tocsr().astype(np.float32)
    left = text._left_singular_basis(S, S.T.tocsr(), 20, seed=int(rng.integers(100)))
    got = np.asarray(S.T @ left, np.float64)
    _, s, Vt = np.linalg.svd(S.toarray().astype(np.float64), full_matrices=False)
    found = np.linalg.norm(S @ got, axis=0)
    np.testing.assert_allclose(found[:15], s[:15], rtol=1e-5)
    np.testing.assert_allclose(found, s[:20], rtol=1e-2)  # the last of k, beside the oversampling
    np.testing.assert_allclose(np.abs(np.sum(got[:, :10] * Vt[:10].T, axis=0)), 1.0, atol=1e-3)
    np.testing.assert_allclose(got.T @ got, np.eye(20), atol=1e-4)


def test_the_randomized_fit_does_not_depend_on_the_blocking_or_the_threads():
    """Beyond k + oversample documents the projection is randomized: the same model (and so
    the same features) however the first pass was cut and on any number of threads."""
    rng = np.random.default_rng(4)
    docs = random_documents(rng, 400)
    spec = TextSpec(bits=16, dim=8, sample=100)
    whole = text.fit_text_model(block_text_stats(pa.array(docs), spec), spec)
    merged = block_text_stats(pa.array(docs[:150]), spec)
    for part in (docs[150:260], docs[260:]):
        merged = merge_text_stats(merged, block_text_stats(pa.array(part), spec))
    numba.set_num_threads(1)
    try:
        cut = text.fit_text_model(merged, spec)
    finally:
        numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)
    np.testing.assert_array_equal(cut.idf, whole.idf)
    np.testing.assert_array_equal(cut.columns, whole.columns)
    np.testing.assert_array_equal(cut.components, whole.components)
    Z = text.text_features(pa.array(docs), whole)
    assert np.all(np.isfinite(Z)) and np.abs(Z).sum() > 0
