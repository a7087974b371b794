"""Text features (bigsearch/ingest/text.py) against scikit-learn's TfidfVectorizer as the
dense reference: the same cosines between documents, whatever the blocking of the first
pass; the projections against an exact SVD and in expectation."""

import numpy as np
import pyarrow as pa
import pytest
import scipy.sparse as sp
from sklearn.feature_extraction.text import TfidfVectorizer

from bigsearch.errors import ParameterError
from bigsearch.ingest.text import (
    AUTO,
    LARGE_CORPUS_DIM,
    TextSpec,
    auto_dim,
    block_text_stats,
    fit_text_model,
    merge_text_stats,
    term_frequencies,
    text_features,
    tfidf_rows,
)

CORPUS = [
    "The cat sat on the mat.",
    "A dog; a cat!  Dogs & cats: 2 of them, 22 in all",
    "Café crème, naïve façade — x y z",
    "the THE the mat mat",
    "",
    "on_the_mat under_score words words words",
    "Ünïcödé wörds and the mat, and the cat",
    "Swine influenza viruses in Northern Vietnam in 2013-2014",
    "Virus metagenomics in farm animals: a systematic review",
    "Metagenomics of swine viruses; farm animals and influenza",
]


def model_of(docs, spec):
    return fit_text_model(block_text_stats(pa.array(docs), spec), spec)


def tfidf_matrix(docs, spec):
    indptr, terms, values = tfidf_rows(pa.array(docs), model_of(docs, spec))
    return sp.csr_matrix((values, terms, indptr), shape=(len(docs), 1 << spec.bits))


@pytest.mark.parametrize("ngram_max", [1, 2, 3])
@pytest.mark.parametrize("sublinear", [True, False])
@pytest.mark.parametrize("max_df", [1.0, 0.5])
def test_cosines_are_scikit_learns(ngram_max, sublinear, max_df):
    spec = TextSpec(bits=24, ngram_max=ngram_max, sublinear_tf=sublinear, max_df=max_df, projection="hashing")
    ours = tfidf_matrix(CORPUS, spec)
    ref = TfidfVectorizer(ngram_range=(1, ngram_max), sublinear_tf=sublinear, max_df=max_df).fit_transform(CORPUS)
    assert ours.nnz == ref.nnz
    np.testing.assert_allclose((ours @ ours.T).toarray(), (ref @ ref.T).toarray(), atol=1e-14)


@pytest.mark.parametrize("cut", [[10], [1, 9], [3, 3, 4], [5, 5]])
def test_the_first_pass_does_not_depend_on_the_blocking(cut):
    spec = TextSpec(bits=16, sample=4)
    whole = block_text_stats(pa.array(CORPUS), spec)
    parts, start = [], 0
    for size in cut:
        parts.append(block_text_stats(pa.array(CORPUS[start : start + size]), spec))
        start += size
    merged = parts[0]
    for p in parts[1:]:
        merged = merge_text_stats(merged, p)
    assert merged["rows"] == whole["rows"] == len(CORPUS)
    for got, want in zip(term_frequencies(merged), term_frequencies(whole)):
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(merged["sample"][0], whole["sample"][0])
    assert merged["sample"][1] == whole["sample"][1] and len(whole["sample"][1]) == 4


def test_svd_keeps_the_cosines_when_it_spans_the_documents():
    """With every document in the sample and dim >= the rank of their TF-IDF matrix, the
    projected features have exactly the TF-IDF cosines (over the terms the fit keeps)."""
    docs = CORPUS[:4] + CORPUS[6:] + [CORPUS[7]]  # a duplicate: rank <= n - 1
    spec = TextSpec(bits=24, min_df=1, dim=len(docs) - 1, sample=len(docs), projection="svd")
    model = model_of(docs, spec)
    Z = text_features(pa.array(docs), model)
    T = tfidf_matrix(docs, spec)
    np.testing.assert_allclose(Z @ Z.T, (T @ T.T).toarray(), atol=1e-6)


def test_auto_dim_is_one_feature_per_document_up_to_the_limit(monkeypatch):
    """dim auto: as many features as documents (the cosines exactly, min_df 1: every term)
    up to EXACT_UP_TO documents, no more than the sample; beyond, LARGE_CORPUS_DIM."""
    import bigsearch.ingest.text as text

    docs = CORPUS[:4] + CORPUS[6:]
    spec = auto_dim(TextSpec(bits=24, min_df=1), len(docs))
    assert spec.dim == len(docs) and TextSpec().dim == AUTO
    Z = text_features(pa.array(docs), model_of(docs, spec))
    T = tfidf_matrix(docs, spec)
    np.testing.assert_allclose(Z @ Z.T, (T @ T.T).toarray(), atol=1e-6)
    assert auto_dim(TextSpec(sample=5), 8).dim == 5
    monkeypatch.setattr(text, "EXACT_UP_TO", 7)
    assert auto_dim(TextSpec(), 8).dim == LARGE_CORPUS_DIM
    assert auto_dim(TextSpec(projection="hashing"), 3).dim == LARGE_CORPUS_DIM
    assert auto_dim(TextSpec(dim=24), 8).dim == 24


def test_hashing_keeps_the_cosines_in_expectation():
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(3000)]
    docs = [" ".join(rng.choice(words, 60)) for _ in range(200)]
    spec = TextSpec(bits=24, dim=256, projection="hashing", ngram_max=1)
    model = model_of(docs, spec)
    Z = text_features(pa.array(docs), model)
    T = tfidf_matrix(docs, spec)
    G, R = Z @ Z.T, (T @ T.T).toarray()
    off = ~np.eye(len(docs), dtype=bool)
    assert abs(np.mean(G[off] - R[off])) < 1e-2  # unbiased (pairs share one projection)
    assert np.std(G[off] - R[off]) < 2.5 / np.sqrt(spec.dim)  # the error of a random projection
    np.testing.assert_allclose(np.diag(G), 1.0, atol=0.35)


def test_features_do_not_depend_on_the_block():
    spec = TextSpec(bits=20, dim=8, sample=10, min_df=1)
    model = model_of(CORPUS, spec)
    whole = text_features(pa.array(CORPUS), model)
    for a in range(len(CORPUS)):
        np.testing.assert_array_equal(text_features(pa.array(CORPUS[a : a + 1]), model)[0], whole[a])


def test_bad_specs_say_what_is_wrong():
    with pytest.raises(ParameterError, match="projection"):
        TextSpec(projection="pca")
    with pytest.raises(ParameterError, match="ngram_max"):
        TextSpec(ngram_max=0)


def test_the_exact_fit_makes_its_components_a_block_of_columns_at_a_time(monkeypatch):
    """Up to EXACT_UP_TO documents the fit is exact, the components terms x documents: made
    whole in float64 they were twice themselves again beside them (1.1 GB more at 2,304
    abstracts). In blocks the values are the same to the bit, and the fit's memory is the
    components and a block."""
    import tracemalloc

    import bigsearch.ingest.text as text

    rng = np.random.default_rng(1)
    words = [f"w{i}" for i in range(4000)]
    docs = [" ".join(rng.choice(words, 80)) for _ in range(300)]
    spec = auto_dim(TextSpec(bits=18, min_df=1), len(docs))  # the fit's 2^bits arrays small
    stats = block_text_stats(pa.array(docs), spec)
    whole = fit_text_model(stats, spec).components
    terms, k = whole.shape
    assert k == len(docs) and terms > 40 * k  # the float64 product whole: 8 terms k bytes
    for block_bytes in (8 * terms * 7, 1):  # 7 columns a block (300 = 42 x 7 + 6), then one
        monkeypatch.setattr(text, "EXACT_BLOCK_BYTES", block_bytes)
        tracemalloc.start()
        blocked = fit_text_model(stats, spec).components
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        np.testing.assert_array_equal(blocked, whole)
        assert peak < whole.nbytes + 8 * terms * k / 2, (peak, whole.nbytes)


def test_the_exact_fit_of_fewer_terms_than_documents_leaves_the_last_features_zero():
    """A feature per document, but fewer terms than documents (a few short titles): the
    components beyond the terms' rank are zero. Made a block at a time, the last block was
    written wider than the vectors it had (a ValueError out of `ingest`)."""
    docs = ["alpha", "beta", "gamma", "alpha", "beta", "gamma beta", "alpha", "gamma"]
    spec = auto_dim(TextSpec(bits=18, min_df=1), len(docs))
    model = fit_text_model(block_text_stats(pa.array(docs), spec), spec)
    terms, dim = model.components.shape
    assert dim == len(docs) and terms < dim
    assert np.abs(model.components[:, :terms]).sum(axis=0).min() > 0  # a direction per term
    assert not model.components[:, terms:].any()
