"""Documents into features: TF-IDF of hashed word n-grams, projected to a dense dimension.

A document is the text of one or more columns joined by a space (title and abstract, as
screening tools join them). It becomes:

1. tokens: the text lower-cased and cut at every character that is not a letter, a digit
   or ``_``; tokens of one character are dropped (scikit-learn's default
   ``token_pattern``, ``(?u)\\b\\w\\w+\\b``);
2. terms: the tokens and the n-grams of consecutive tokens up to ``ngram_max``, each
   hashed to one of 2^bits term ids (murmurhash3 of the token, as scikit-learn's
   HashingVectorizer; n-grams by mixing their tokens' hashes);
3. TF-IDF: (1 + ln count) x (ln((1 + n) / (1 + df)) + 1) per term (scikit-learn's
   ``sublinear_tf=True, smooth_idf=True``), terms in more than ``max_df`` of the documents
   dropped, the vector scaled to unit length: the linear similarity of two documents is
   the cosine of their TF-IDF vectors, what screening tools rank by;
4. a projection to ``dim`` dense features (the store's r), one of
   - ``svd``: the leading right singular vectors of the TF-IDF matrix of a sample of the
     documents (latent semantic analysis), fitted after the first pass; with as many
     features as documents (``dim`` "auto" up to EXACT_UP_TO documents) the documents'
     cosines are kept exactly: on a screening set, truncating to 512 or 1,024 features
     reads 1.2x and 1.1x the records (docs/screening.md);
   - ``hashing``: each term added into one of ``dim`` buckets with a random sign (a sparse
     random projection: the inner products are kept in expectation).

The tokenizer reads a block's Arrow buffers: one numba kernel (kernels/text.py) cuts,
hashes, n-grams and counts every document, 16 us an abstract (pyarrow's string kernels
and NumPy, :func:`term_ids`, took 60-120 us); beyond ASCII it lower-cases and classifies
characters by tables made from pyarrow's own (:func:`unicode_tables`), so both give the
same terms.

The first pass (:func:`block_text_stats`, merged by :func:`merge_text_stats`) counts each
term's documents and keeps a sample of documents chosen by a hash of their text (the same
sample however the input is cut into blocks); :func:`fit_text_model` turns that into the
weights and the projection; :func:`text_features` makes a block's features. Both passes
run on the ingest's block threads (pipeline.py), not its worker processes: the kernels
release Python's lock, and in this process the projection is read from memory with huge
pages (1.25x faster than the workers' shared memory), never pickled, counted once.
"""

from __future__ import annotations

import functools
from dataclasses import asdict, dataclass, replace

import numpy as np

from ..engine.core.blas import one_blas_thread
from ..errors import InputError, ParameterError
from ..kernels.text import (
    document_term_counts,
    hash_strings,
    project_documents,
    sparse_times_dense,
    text_keys,
)

PROJECTIONS = ("svd", "hashing")
AUTO = 0  # dim: chosen from the number of documents (auto_dim)
EXACT_UP_TO = 4096  # svd, dim auto: up to this many documents, one feature per document
LARGE_CORPUS_DIM = 512  # beyond it (and for hashing): the store's size and a pass's time rule
SPLIT = r"[^\p{L}\p{N}_]+"  # RE2 (pyarrow): anything but letters, digits, _
GOLDEN = np.uint64(0x9E3779B97F4A7C15)
MIX = (np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB))
OVERSAMPLE = 10  # svd: columns of the randomized sketch beyond dim
EXACT_BLOCK_BYTES = 64 << 20  # svd, exact: float64 temporaries of the components at a time
PASSES = 3  # svd: products with S S^T before the Rayleigh-Ritz step (_left_singular_basis)


@dataclass(frozen=True)
class TextSpec:
    """How documents become features (recorded in the store's featurization)."""

    columns: tuple = ()  # the input columns joined into the document (names)
    column_weights: tuple = ()  # how many times each column's words count (empty: once each)
    ngram_max: int = 2
    bits: int = 22  # 2^bits hashed term ids
    sublinear_tf: bool = True
    max_df: float = 0.95  # terms in more of the documents than this are dropped
    min_df: int = 2  # svd: terms in fewer documents of the sample than this are left out of the fit
    dim: int = AUTO  # features after the projection (r); AUTO: auto_dim
    projection: str = "svd"
    sample: int = 20_000  # svd: documents it is fitted on
    seed: int = 0

    def __post_init__(self):
        if self.projection not in PROJECTIONS:
            raise ParameterError(f"text projection must be one of {', '.join(PROJECTIONS)}, got {self.projection!r}")
        if not 1 <= self.ngram_max <= 4:
            raise ParameterError(f"text ngram_max must be 1 to 4, got {self.ngram_max}")
        if not 10 <= self.bits <= 26:
            raise ParameterError(f"text bits must be 10 to 26 (2^bits hashed terms), got {self.bits}")
        if not 0 < self.max_df <= 1:
            raise ParameterError(f"text max_df must be in (0, 1], got {self.max_df}")
        weights = self.column_weights
        if weights and (len(weights) != len(self.columns) or min(weights) < 1):
            raise ParameterError(f"text column_weights must be one count >= 1 per column, got {list(weights)}")
        if self.dim < 0 or self.min_df < 1 or self.sample < 2:
            raise ParameterError("text dim must be >= 1 (or auto), min_df >= 1 and sample >= 2")

    def describe(self):
        return asdict(self) | {"columns": list(self.columns), "column_weights": list(self.column_weights)}


# -- tokens and terms -----------------------------------------------------------------
def string_array(docs):
    """The documents as one contiguous pyarrow string array, missing ones empty."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not isinstance(docs, (pa.Array, pa.ChunkedArray)):
        docs = pa.array(docs, pa.string())
    if isinstance(docs, pa.ChunkedArray):
        docs = docs.combine_chunks()
    if docs.null_count:
        docs = pc.fill_null(docs, "")
    return docs


def utf8_buffers(docs):
    """(offsets as int64, bytes as uint8) of a pyarrow string array."""
    import pyarrow as pa

    offset_type = np.int64 if pa.types.is_large_string(docs.type) else np.int32
    _, offsets, data = docs.buffers()
    offsets = np.frombuffer(offsets, offset_type)[docs.offset : docs.offset + len(docs) + 1].astype(np.int64)
    return offsets, (np.frombuffer(data, np.uint8) if data is not None else np.zeros(0, np.uint8))


def term_ids(docs, spec):
    """(document of each term occurrence, its term id) for a pyarrow string array of
    documents: tokens and their n-grams up to ``spec.ngram_max``."""
    import pyarrow.compute as pc

    docs = string_array(docs)
    tokens = pc.split_pattern_regex(pc.utf8_lower(docs), pattern=SPLIT)
    counts = pc.list_value_length(tokens).to_numpy(zero_copy_only=False)
    flat = pc.list_flatten(tokens)
    doc = np.repeat(np.arange(len(docs), dtype=np.int64), counts)
    keep = pc.greater_equal(pc.utf8_length(flat), 2)
    flat, doc = pc.filter(flat, keep), doc[keep.to_numpy(zero_copy_only=False)]
    encoded = pc.dictionary_encode(flat)
    hashes = hash_strings(*utf8_buffers(string_array(encoded.dictionary)))
    token = hashes[encoded.indices.to_numpy(zero_copy_only=False)]
    docs_out, terms_out = [doc], [token]
    gram = token
    for n in range(2, spec.ngram_max + 1):
        same = doc[n - 1 :] == doc[: len(doc) - n + 1]
        gram = _mix(gram[:-1] * GOLDEN + token[n - 1 :] + np.uint64(n))
        docs_out.append(doc[: len(doc) - n + 1][same])
        terms_out.append(gram[same])
        gram = np.where(same, gram, np.uint64(0))
    mask = np.uint64((1 << spec.bits) - 1)
    return np.concatenate(docs_out), np.concatenate(terms_out) & mask


def _mix(h):
    """splitmix64's finalizer: every bit of h reaches every bit of the result."""
    h = (h ^ (h >> np.uint64(30))) * MIX[0]
    h = (h ^ (h >> np.uint64(27))) * MIX[1]
    return h ^ (h >> np.uint64(31))


def term_counts(docs, spec):
    """The documents as sparse counts: (indptr, term ids, counts), terms sorted in each
    document (CSR without the matrix), counted by a numba kernel: ASCII documents first,
    then the others with :func:`unicode_tables` (made when a block needs them), what the
    kernel cannot read (invalid UTF-8) through :func:`term_ids`."""
    docs = string_array(docs)
    none = np.zeros(0, np.int32), np.zeros(0, np.uint8)
    counted = document_term_counts(*utf8_buffers(docs), spec.ngram_max, spec.bits, *none)
    for tables in (unicode_tables(), None):
        rest = np.flatnonzero(counted[3])
        if not len(rest):
            break
        part = docs.take(rest)
        if tables is None:
            sub = _arrow_term_counts(part, spec)
        else:
            sub = document_term_counts(*utf8_buffers(part), spec.ngram_max, spec.bits, *tables)
        counted = (*_with_rows(*counted[:3], rest, sub[:3]), np.zeros(len(docs), bool))
        if tables is not None:
            counted[3][rest] = sub[3]
    return counted[:3]


@functools.cache
def unicode_tables():
    """(lower, word): for every code point, pyarrow's ``utf8_lower`` of it and whether
    that is a letter, a digit or '_' for RE2 (pyarrow's regex engine), so that the numba
    tokenizer reads any text as :func:`term_ids` does (0.7 s, once a process)."""
    import pyarrow.compute as pc

    points = np.arange(0x110000, dtype=np.int64)
    points = points[(points < 0xD800) | (points > 0xDFFF)]  # surrogates are not characters
    lowered = pc.utf8_lower(_one_character_strings(points))
    single = pc.equal(pc.utf8_length(lowered), 1).to_numpy(zero_copy_only=False)
    lower = np.full(0x110000, -1, np.int32)  # -1: the kernel leaves the document to term_ids
    lower[points[single]] = _first_code_points(*utf8_buffers(lowered))[single]
    word = np.zeros(0x110000, np.uint8)
    word[points] = pc.match_substring_regex(lowered, r"[\p{L}\p{N}_]").to_numpy(zero_copy_only=False)
    return lower, word


UTF8_LEADS = (0x00, 0xC0, 0xE0, 0xF0)  # a character's first byte, by its length - 1
UTF8_LIMITS = (0x80, 0x800, 0x10000)  # the first code point of 2, 3 and 4 bytes


def _one_character_strings(points):
    """A pyarrow string array of one character per code point, encoded by NumPy."""
    import pyarrow as pa

    size = 1 + np.searchsorted(UTF8_LIMITS, points, side="right")
    offsets = np.zeros(len(points) + 1, np.int32)
    np.cumsum(size, out=offsets[1:])
    data = np.zeros(offsets[-1], np.uint8)
    for length in range(1, 5):
        at, cp = offsets[:-1][size == length], points[size == length]
        for q in range(length - 1, 0, -1):  # continuation bytes, last first
            data[at + q] = 0x80 | (cp & 0x3F)
            cp = cp >> 6
        data[at] = UTF8_LEADS[length - 1] | cp
    return pa.StringArray.from_buffers(len(points), pa.py_buffer(offsets), pa.py_buffer(data))


def _first_code_points(offsets, data):
    """The code point of the first character of each string of (offsets, bytes)."""
    starts = offsets[:-1]
    size = 1 + np.searchsorted([0x80, 0xE0, 0xF0], data[starts], side="right")  # its bytes, from the first
    cp = data[starts].astype(np.int64) & np.array([0x7F, 0x1F, 0x0F, 0x07])[size - 1]
    for q in range(1, 4):
        more = size > q
        cp[more] = (cp[more] << 6) | (data[starts[more] + q] & 0x3F)
    return cp


def _arrow_term_counts(docs, spec):
    """:func:`term_counts` through pyarrow's string kernels (any UTF-8 text)."""
    doc, term = term_ids(docs, spec)
    key = np.unique((doc.astype(np.uint64) << np.uint64(spec.bits)) | term, return_counts=True)
    keys, counts = key
    rows = (keys >> np.uint64(spec.bits)).astype(np.int64)
    indptr = np.zeros(len(docs) + 1, np.int64)
    np.cumsum(np.bincount(rows, minlength=len(docs)), out=indptr[1:])
    return indptr, (keys & np.uint64((1 << spec.bits) - 1)).astype(np.int64), counts.astype(np.float64)


def _with_rows(indptr, terms, counts, rows, sub):
    """CSR counts (left empty at ``rows``) with those rows' counts ``sub`` put in."""
    lengths = np.diff(indptr)
    lengths[rows] = np.diff(sub[0])
    out_indptr = np.zeros(len(indptr), np.int64)
    np.cumsum(lengths, out=out_indptr[1:])
    theirs = np.zeros(len(lengths), bool)
    theirs[rows] = True
    theirs = np.repeat(theirs, lengths)
    out_terms, out_counts = np.empty(len(theirs), np.int64), np.empty(len(theirs))
    out_terms[theirs], out_counts[theirs] = sub[1], sub[2]
    out_terms[~theirs], out_counts[~theirs] = terms, counts
    return out_indptr, out_terms, out_counts


# -- the first pass ---------------------------------------------------------------------
def block_text_stats(docs, spec):
    """One block's part of the first pass: its documents' count, each term's document
    count (as term ids and counts) and its candidates for the sample: the ``spec.sample``
    documents whose texts hash lowest (the same sample however the input is cut into
    blocks or ordered)."""
    docs = string_array(docs)
    _, terms, _ = term_counts(docs, spec)
    ids, df = np.unique(terms, return_counts=True)
    keys = _mix(text_keys(*utf8_buffers(docs)) + np.uint64(spec.seed) * GOLDEN)
    order = np.lexsort((np.arange(len(docs)), keys))[: spec.sample]
    return {
        "rows": len(docs),
        "terms": ids,
        "df": df.astype(np.int64),
        "sample": (keys[order], docs.take(order).to_pylist()),
        "cap": spec.sample,
        "bits": spec.bits,
    }


def merge_text_stats(a, b):
    """Two parts of the first pass as one (the same whatever the order or the cut). The
    document counts are added into an array over every term id (:func:`document_counts`):
    a sorted merge of the ids would cost the whole vocabulary's (millions) every block.
    When ``a`` is a merge already, its array is reused (consumed): a copy a block was 6 GB
    of copying and 1.5 million page faults on a million abstracts."""
    df = document_counts(a)
    if b["terms"] is None:
        df += b["df"]
    else:
        df[b["terms"]] += b["df"]  # the ids of a part are distinct
    keys = np.concatenate([a["sample"][0], b["sample"][0]])
    texts = a["sample"][1] + b["sample"][1]
    order = np.lexsort((np.array([len(t) for t in texts]), keys))[: a["cap"]]
    return {
        "rows": a["rows"] + b["rows"],
        "terms": None,
        "df": df,
        "sample": (keys[order], [texts[i] for i in order]),
        "cap": a["cap"],
        "bits": a["bits"],
    }


def document_counts(stats):
    """Each term id's documents (2^bits counts) from the first pass's statistics."""
    if stats["terms"] is None:
        return stats["df"]
    df = np.zeros(1 << stats["bits"], np.int64)
    df[stats["terms"]] = stats["df"]
    return df


def term_frequencies(stats):
    """(term ids with documents, their documents' counts) from the first pass's statistics."""
    if stats["terms"] is not None:
        return stats["terms"], stats["df"]
    terms = np.flatnonzero(stats["df"])
    return terms, stats["df"][terms]


@dataclass
class TextModel:
    """What :func:`text_features` needs: the spec, the IDF weight of every term id (0 for
    dropped terms) and the projection (svd: ``columns`` maps term ids to rows of
    ``components`` (terms x dim, float32), -1 for terms left out)."""

    spec: TextSpec
    idf: np.ndarray
    rows: int = 0
    columns: np.ndarray | None = None
    components: np.ndarray | None = None

    def describe(self):
        out = {"documents": int(self.rows), "terms_kept": int(np.count_nonzero(self.idf))}
        if self.components is not None:
            out["svd_terms"] = int(self.components.shape[0])
        return out


def auto_dim(spec, n_documents):
    """The spec with its dimension chosen where it is AUTO: for svd, one feature per
    document up to EXACT_UP_TO documents (no more than the sample holds), LARGE_CORPUS_DIM
    beyond; for hashing, LARGE_CORPUS_DIM."""
    if spec.dim != AUTO:
        return spec
    exact = spec.projection == "svd" and n_documents <= EXACT_UP_TO
    return replace(spec, dim=max(1, min(n_documents, spec.sample)) if exact else LARGE_CORPUS_DIM)


def fit_text_model(stats, spec):
    """The IDF weights and the projection, from the first pass's statistics (``spec``'s
    dimension chosen already: auto_dim)."""
    n = stats["rows"]
    if n == 0:
        raise InputError("no documents to featurize: the text columns are empty")
    terms, df = term_frequencies(stats)
    idf = np.zeros(1 << spec.bits)
    weights = np.log((1.0 + n) / (1.0 + df)) + 1.0
    keep = df <= spec.max_df * n if n > 1 else np.ones(len(df), bool)
    idf[terms[keep]] = weights[keep]
    model = TextModel(spec, idf, rows=n)
    if spec.projection == "svd":
        model.columns, model.components = _svd_projection(stats, spec, idf)
    return model


def _svd_projection(stats, spec, idf):
    """The leading ``dim`` right singular vectors of the sample's TF-IDF matrix, over the
    terms in at least ``min_df`` documents of the sample (those in one add noise and, in a
    large input, half the vocabulary: the memory of the fit and of the projection); a
    sample smaller than ``dim`` gives as many vectors as it has documents, zero-padded:
    (columns: term id -> row of components, -1 if none; components)."""
    S, used = _sample_matrix(stats["sample"][1], spec, idf)
    k = min(spec.dim, S.shape[0], len(used))
    if k < 1:
        raise InputError(
            f"too few documents or terms to fit {spec.dim} text features "
            f"({S.shape[0]} documents, {len(used)} terms); use a smaller dim"
        )
    if k + OVERSAMPLE >= S.shape[0]:
        components = np.zeros((len(used), spec.dim), np.float32)
        _exact_right_singular_vectors(S, k, components)
    else:
        used, components = _randomized_components(S, used, k, spec)
    columns = np.full(1 << spec.bits, -1, np.int32)
    columns[used] = np.arange(len(used))
    return columns, components


def _randomized_components(S, used, k, spec):
    """(the terms in the components' order, the components): the terms in most documents
    first, so that the rows read most often share a few pages (the TLB, the caches: 1.2x
    for the projection); the terms x dim components made once the fit's terms x width
    matrix is freed (one of them held at a time)."""
    frequent_first = np.argsort(-np.bincount(S.indices, minlength=S.shape[1]), kind="stable")
    S, used = S[:, frequent_first].astype(np.float32), used[frequent_first]
    ST = S.T.tocsr()
    left = np.zeros((S.shape[0], spec.dim), np.float32)
    left[:, :k] = _left_singular_basis(S, ST, k, spec.seed)  # V = S^T left
    components = np.empty((len(used), spec.dim), np.float32)
    sparse_times_dense(ST.indptr, ST.indices, ST.data, left, components)
    return used, components


def _sample_matrix(texts, spec, idf):
    """The sample's TF-IDF matrix (documents x the terms fitted, CSR) and those terms'
    ids: in at least ``spec.min_df`` of its documents, not dropped."""
    import scipy.sparse as sp

    indptr, terms, counts = term_counts(texts, spec)
    ids, df = np.unique(terms, return_counts=True)
    used = ids[df >= spec.min_df]
    used = used[idf[used] > 0]
    columns = np.full(1 << spec.bits, -1, np.int64)
    columns[used] = np.arange(len(used))
    values = _weights(indptr, terms, counts, idf, spec, columns >= 0)
    col = columns[terms]
    keep = col >= 0
    rows = np.repeat(np.arange(len(texts)), np.diff(indptr))[keep]
    S = sp.csr_matrix((values[keep], (rows, col[keep])), shape=(len(texts), len(used)))
    return S, used


def _left_singular_basis(S, ST, k, seed):
    """U_k diag(1/s_k) for the k leading singular triplets of the sparse S (documents x
    terms; float32, CSR, and ST its transpose): V_k = S^T U_k / s_k are its right singular
    vectors. A randomized subspace iteration (Halko, Martinsson and Tropp 2011) on the
    documents' side, S S^T applied as two sparse products (numba, every core) and the
    basis kept orthonormal by Cholesky QR: the terms (10^5-10^6) are only reached
    through the products, a terms x width matrix held once. From a random start of
    documents x (k + OVERSAMPLE), PASSES products and a Rayleigh-Ritz step: at 20,000
    abstracts, 3 passes give neighbours as close to the former 4 power iterations as
    two seeds of those are to each other (the ingest's quality check)."""
    n, terms = S.shape
    width = k + OVERSAMPLE
    Q = np.random.default_rng(seed).standard_normal((n, width)).astype(np.float32)
    P, Y = np.empty((terms, width), np.float32), np.empty((n, width), np.float32)
    for i in range(PASSES + 1):
        sparse_times_dense(ST.indptr, ST.indices, ST.data, Q, P)
        sparse_times_dense(S.indptr, S.indices, S.data, P, Y)  # Y = S S^T Q
        if i < PASSES:
            Q = _orthonormal(Y, twice=i == PASSES - 1)  # the Rayleigh-Ritz basis orthonormal to rounding
    del P
    # Rayleigh-Ritz: Q^T S S^T Q = W diag(s^2) W^T, U = Q W
    M = Q.T.astype(np.float64) @ Y.astype(np.float64)
    with one_blas_thread():
        w, W = np.linalg.eigh((M + M.T) / 2)
    order = np.argsort(w)[::-1][:k]
    s = np.sqrt(np.maximum(w[order], 0.0))
    scale = np.where(s > s[0] * 1e-6, 1.0 / np.where(s > 0, s, 1.0), 0.0)  # (numerically) zero: no direction
    return (Q.astype(np.float64) @ (W[:, order] * scale)).astype(np.float32)


def _orthonormal(Y, twice=True):
    """An orthonormal basis of Y's columns (float32 out, float64 within): Cholesky QR of
    the Gram matrix, BLAS-3 only (0.4 s at 20,000 x 522 where Householder's QR took 11 s),
    ``twice`` for orthonormality to rounding (CholeskyQR2, Fukaya et al. 2014; once leaves
    eps cond(Y)^2, enough for a pass of the iteration); Householder's when Y is too
    ill-conditioned for it (a rank-deficient sample)."""
    import scipy.linalg as sla

    Q = Y.astype(np.float64)
    for _ in range(2 if twice else 1):
        G = Q.T @ Q
        with one_blas_thread():  # width x width: BLAS's threads would wait on each other (0.6 s, not 10 ms)
            R = _cholesky_factor(G)
            if R is None:
                return np.linalg.qr(Y.astype(np.float64))[0].astype(np.float32)
            R_inv = sla.solve_triangular(R, np.eye(len(R)))
        Q = Q @ R_inv
    return Q.astype(np.float32)


def _cholesky_factor(G):
    """R (upper) with R^T R = G, or None when G is not safely positive definite."""
    try:
        R = np.linalg.cholesky(G).T
    except np.linalg.LinAlgError:
        return None
    d = np.abs(np.diag(R))
    return R if d.min() > d.max() * 1e-6 else None


def _exact_right_singular_vectors(S, k, out):
    """The k leading right singular vectors of S exactly, into ``out[:, :k]`` (float32, terms
    x >= k), from the documents' Gram matrix S S^T (documents x documents: when k is about
    the number of documents, the randomized sketch would be as wide as S and cost terms x
    documents^2; at 2,304 abstracts this takes seconds where that took minutes and
    gigabytes). S^T U is made EXACT_BLOCK_BYTES of float64 columns at a time: whole, it
    was terms x k float64 beside ``out`` (1.1 GB at 2,304 abstracts and 57,379 terms; each
    value is summed in the same order either way). A block of U's columns is copied
    contiguous: read in place, each term's product strode over all of U (2.5x the time)."""
    gram = np.asarray((S @ S.T).todense())
    w, U = np.linalg.eigh(gram)
    order = np.argsort(w)[::-1][:k]
    s = np.sqrt(np.maximum(w[order], 0.0))
    scale = np.where(s > s[0] * 1e-6, 1.0 / np.where(s > 0, s, 1.0), 0.0)  # (numerically) zero: no direction
    basis = U[:, order] * scale
    ST = S.T.tocsr()
    step = max(1, EXACT_BLOCK_BYTES // (8 * ST.shape[0]))
    for start in range(0, k, step):
        stop = min(start + step, k)  # out may be wider than k: its last columns stay zero
        out[:, start:stop] = ST @ np.ascontiguousarray(basis[:, start:stop])


def _weights(indptr, terms, counts, idf, spec, kept=None):
    """TF-IDF values of the terms of each document, each document scaled to unit length
    over its kept terms."""
    tf = 1.0 + np.log(counts) if spec.sublinear_tf else counts
    values = tf * idf[terms]
    if kept is not None:
        values = np.where(kept[terms], values, 0.0)
    sq = np.add.reduceat(values * values, indptr[:-1]) if len(values) else np.zeros(0)
    lengths = np.diff(indptr)
    norms = np.zeros(len(lengths))
    norms[lengths > 0] = np.sqrt(sq[lengths > 0]) if len(values) else 0.0
    scale = np.repeat(np.where(norms > 0, 1.0 / np.where(norms > 0, norms, 1.0), 0.0), lengths)
    return values * scale


def tfidf_rows(docs, model):
    """The documents' unit TF-IDF vectors as (indptr, term ids, values)."""
    indptr, terms, counts = term_counts(docs, model.spec)
    return indptr, terms, _weights(indptr, terms, counts, model.idf, model.spec)


def text_features(docs, model, out=None):
    """A block's documents as ``dim`` features (float64, m x dim)."""
    spec = model.spec
    indptr, terms, values = tfidf_rows(docs, model)
    m = len(indptr) - 1
    out = np.zeros((m, spec.dim)) if out is None else out
    if spec.projection == "hashing":
        rows = np.repeat(np.arange(m), np.diff(indptr))
        mixed = _mix(terms.astype(np.uint64) + np.uint64(spec.seed + 1) * GOLDEN)
        bucket = (mixed % np.uint64(spec.dim)).astype(np.int64)
        sign = np.where((mixed >> np.uint64(63)) == 1, -1.0, 1.0)
        np.add.at(out, (rows, bucket), sign * values)
        return out
    project_documents(indptr, model.columns[terms], values, model.components, out)
    return out
