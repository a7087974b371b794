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

The tokenizer works on a whole block at once: pyarrow's string kernels lower-case and
split every document in C++, each distinct token of the block is hashed once, and the
n-grams and counts are NumPy operations on arrays of term ids (3-4x faster than
HashingVectorizer's Python loop over documents; docs/ingest.md has the figures).

The first pass (:func:`block_text_stats`, merged by :func:`merge_text_stats`) counts each
term's documents and keeps a sample of documents chosen by a hash of their row number
(the same sample however the input is cut into blocks); :func:`fit_text_model` turns that
into the weights and the projection; :func:`text_features` makes a block's features.
"""

from __future__ import annotations

import zlib
from dataclasses import asdict, dataclass, replace

import numpy as np

from ..errors import InputError, ParameterError
from ..kernels.text import project_documents

PROJECTIONS = ("svd", "hashing")
AUTO = 0  # dim: chosen from the number of documents (auto_dim)
EXACT_UP_TO = 4096  # svd, dim auto: up to this many documents, one feature per document
LARGE_CORPUS_DIM = 512  # beyond it (and for hashing): the store's size and a pass's time rule
SPLIT = r"[^\p{L}\p{N}_]+"  # RE2 (pyarrow): anything but letters, digits, _
GOLDEN = np.uint64(0x9E3779B97F4A7C15)
MIX = (np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB))


@dataclass(frozen=True)
class TextSpec:
    """How documents become features (recorded in the store's featurization)."""

    columns: tuple = ()  # the input columns joined into the document (names)
    ngram_max: int = 2
    bits: int = 22  # 2^bits hashed term ids
    sublinear_tf: bool = True
    max_df: float = 0.95  # terms in more of the documents than this are dropped
    min_df: int = 2  # svd: terms in fewer documents than this are left out of the fit
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
        if self.dim < 0 or self.min_df < 1 or self.sample < 2:
            raise ParameterError("text dim must be >= 1 (or auto), min_df >= 1 and sample >= 2")

    def describe(self):
        return asdict(self) | {"columns": list(self.columns)}


# -- tokens and terms -----------------------------------------------------------------
def term_ids(docs, spec):
    """(document of each term occurrence, its term id) for a pyarrow string array of
    documents: tokens and their n-grams up to ``spec.ngram_max``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not isinstance(docs, (pa.Array, pa.ChunkedArray)):
        docs = pa.array(docs, pa.string())
    if isinstance(docs, pa.ChunkedArray):
        docs = docs.combine_chunks()
    tokens = pc.split_pattern_regex(pc.utf8_lower(docs), pattern=SPLIT)
    counts = pc.list_value_length(tokens).to_numpy(zero_copy_only=False)
    flat = pc.list_flatten(tokens)
    doc = np.repeat(np.arange(len(docs), dtype=np.int64), counts)
    keep = pc.greater_equal(pc.utf8_length(flat), 2)
    flat, doc = pc.filter(flat, keep), doc[keep.to_numpy(zero_copy_only=False)]
    encoded = pc.dictionary_encode(flat)
    words = encoded.dictionary.to_pylist()
    hashes = np.fromiter((_murmur(w) for w in words), np.uint64, len(words))
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


def _murmur(word):
    from sklearn.utils import murmurhash3_32

    return murmurhash3_32(word, seed=0, positive=True)


def _mix(h):
    """splitmix64's finalizer: every bit of h reaches every bit of the result."""
    h = (h ^ (h >> np.uint64(30))) * MIX[0]
    h = (h ^ (h >> np.uint64(27))) * MIX[1]
    return h ^ (h >> np.uint64(31))


def term_counts(docs, spec):
    """The documents as sparse counts: (indptr, term ids, counts), terms sorted in each
    document (CSR without the matrix)."""
    doc, term = term_ids(docs, spec)
    key = np.unique((doc.astype(np.uint64) << np.uint64(spec.bits)) | term, return_counts=True)
    keys, counts = key
    rows = (keys >> np.uint64(spec.bits)).astype(np.int64)
    indptr = np.zeros(len(docs) + 1, np.int64)
    np.cumsum(np.bincount(rows, minlength=len(docs)), out=indptr[1:])
    return indptr, (keys & np.uint64((1 << spec.bits) - 1)).astype(np.int64), counts.astype(np.float64)


# -- the first pass ---------------------------------------------------------------------
def block_text_stats(docs, spec):
    """One block's part of the first pass: its documents' count, each term's document
    count (as term ids and counts) and its candidates for the sample: the ``spec.sample``
    documents whose texts hash lowest (the same sample however the input is cut into
    blocks or ordered)."""
    import pyarrow as pa

    if not isinstance(docs, (pa.Array, pa.ChunkedArray)):
        docs = pa.array(docs, pa.string())
    texts = docs.to_pylist()
    _, terms, _ = term_counts(docs, spec)
    ids, df = np.unique(terms, return_counts=True)
    keys = _mix(np.fromiter((_text_key(t) for t in texts), np.uint64, len(texts)) + np.uint64(spec.seed) * GOLDEN)
    order = np.lexsort((np.arange(len(texts)), keys))[: spec.sample]
    return {
        "rows": len(texts),
        "terms": ids,
        "df": df.astype(np.int64),
        "sample": (keys[order], [texts[i] for i in order]),
        "cap": spec.sample,
    }


def _text_key(text):
    """A 64-bit key of a text (two checksums of its bytes)."""
    data = text.encode("utf-8")
    return (zlib.crc32(data) << 32) | zlib.adler32(data)


def merge_text_stats(a, b):
    """Two parts of the first pass as one (the same whatever the order or the cut)."""
    ids, inverse = np.unique(np.concatenate([a["terms"], b["terms"]]), return_inverse=True)
    df = np.zeros(len(ids), np.int64)
    np.add.at(df, inverse, np.concatenate([a["df"], b["df"]]))
    keys = np.concatenate([a["sample"][0], b["sample"][0]])
    texts = a["sample"][1] + b["sample"][1]
    order = np.lexsort((np.array([len(t) for t in texts]), keys))[: a["cap"]]
    return {
        "rows": a["rows"] + b["rows"],
        "terms": ids,
        "df": df,
        "sample": (keys[order], [texts[i] for i in order]),
        "cap": a["cap"],
    }


@dataclass
class TextModel:
    """What :func:`text_features` needs: the spec, the IDF weight of every term id (0 for
    dropped terms) and the projection (svd: ``columns`` maps term ids to rows of
    ``components`` (terms x dim, float32), -1 for terms left out). Within the ingest's
    worker processes (workers.py) the arrays live in the memory they share, and a model
    is pickled as their handles (``shared``): 100+ MB reach each worker once."""

    spec: TextSpec
    idf: np.ndarray
    rows: int = 0
    columns: np.ndarray | None = None
    components: np.ndarray | None = None
    shared: tuple | None = None

    def describe(self):
        out = {"documents": int(self.rows), "terms_kept": int(np.count_nonzero(self.idf))}
        if self.components is not None:
            out["svd_terms"] = int(self.components.shape[0])
        return out

    def __reduce__(self):
        if self.shared is None:
            return TextModel, (self.spec, self.idf, self.rows, self.columns, self.components)
        return _attached_model, (self.spec, self.rows, self.shared)


def _attached_model(spec, rows, shared):
    arrays = [None if handle is None else handle.attach() for handle in shared]
    return TextModel(spec, arrays[0], rows, arrays[1], arrays[2], shared)


def _shared(model):
    """The model with its arrays moved into the worker processes' shared memory (the same
    model when none run)."""
    from .workers import shared_empty

    arrays, handles = [], []
    for a in (model.idf, model.columns, model.components):
        if a is None:
            arrays.append(None)
            handles.append(None)
            continue
        copy, handle = shared_empty(a.shape, a.dtype)
        copy[...] = a
        arrays.append(copy)
        handles.append(handle)
    if handles[0] is None:
        return model
    return TextModel(model.spec, arrays[0], model.rows, arrays[1], arrays[2], tuple(handles))


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
    idf = np.zeros(1 << spec.bits)
    weights = np.log((1.0 + n) / (1.0 + stats["df"])) + 1.0
    keep = stats["df"] <= spec.max_df * n if n > 1 else np.ones(len(stats["df"]), bool)
    idf[stats["terms"][keep]] = weights[keep]
    model = TextModel(spec, idf, rows=n)
    if spec.projection == "svd":
        model.columns, model.components = _svd_projection(stats, spec, idf)
    return _shared(model)


def _svd_projection(stats, spec, idf):
    """The leading ``dim`` right singular vectors of the sample's TF-IDF matrix, over the
    terms in at least ``min_df`` documents of the whole input (the rest add noise and
    memory); a sample smaller than ``dim`` gives as many vectors as it has documents,
    zero-padded."""
    import scipy.sparse as sp

    texts = stats["sample"][1]
    indptr, terms, counts = term_counts(np.asarray(texts, object), spec)
    frequent = stats["terms"][stats["df"] >= spec.min_df]
    columns = np.full(1 << spec.bits, -1, np.int64)
    used = np.intersect1d(np.unique(terms), frequent)
    used = used[idf[used] > 0]
    columns[used] = np.arange(len(used))
    values = _weights(indptr, terms, counts, idf, spec, columns >= 0)
    col = columns[terms]
    keep = col >= 0
    rows = np.repeat(np.arange(len(texts)), np.diff(indptr))[keep]
    S = sp.csr_matrix((values[keep], (rows, col[keep])), shape=(len(texts), len(used)))
    k = min(spec.dim, len(texts), len(used))
    if k < 1:
        raise InputError(
            f"too few documents or terms to fit {spec.dim} text features "
            f"({len(texts)} documents, {len(used)} terms); use a smaller dim"
        )
    components = np.zeros((len(used), spec.dim), np.float32)
    components[:, :k] = _right_singular_vectors(S, k, spec.seed)
    return columns.astype(np.int32), components


def _right_singular_vectors(S, k, seed, oversample=10, power=4):
    """The k leading right singular vectors of the sparse S (documents x terms), as
    columns (terms x k): a randomized SVD (Halko, Martinsson and Tropp 2011) that keeps its
    dense work on the documents' side (documents x (k + oversample)), since the terms far
    outnumber the documents of a sample; the terms' side is only reached through sparse
    products (scikit-learn's randomized_svd orthonormalizes terms x k matrices: 40x slower
    on 2,304 abstracts)."""
    if k + oversample >= S.shape[0]:
        return _exact_right_singular_vectors(S, k)
    rng = np.random.default_rng(seed)
    width = k + oversample
    Q = np.linalg.qr(S @ rng.standard_normal((S.shape[1], width)))[0]
    for _ in range(power):
        Q = np.linalg.qr(S @ (S.T @ Q))[0]
    # S^T Q spans the right singular vectors: with B = Q^T S, B B^T = U diag(s^2) U^T and V = B^T U / s
    P = np.asarray(S.T @ Q)  # terms x l
    w, U = np.linalg.eigh(P.T @ P)
    order = np.argsort(w)[::-1][:k]
    s = np.sqrt(np.maximum(w[order], 0.0))
    return (P @ U[:, order]) / np.where(s > 0, s, 1.0)


def _exact_right_singular_vectors(S, k):
    """The k leading right singular vectors of S exactly, from the documents' Gram matrix
    S S^T (documents x documents: when k is about the number of documents, the randomized
    sketch would be as wide as S and cost terms x documents^2; at 2,304 abstracts this takes
    seconds where that took minutes and gigabytes)."""
    gram = np.asarray((S @ S.T).todense())
    w, U = np.linalg.eigh(gram)
    order = np.argsort(w)[::-1][:k]
    s = np.sqrt(np.maximum(w[order], 0.0))
    scale = np.where(s > s[0] * 1e-6, 1.0 / np.where(s > 0, s, 1.0), 0.0)  # (numerically) zero: no direction
    return np.asarray(S.T @ (U[:, order] * scale))


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


# -- a block over the ingest's worker processes ------------------------------------------
PART_DOCUMENTS = 2_000  # documents per task: enough to amortize the hashing of distinct tokens


def _parts(texts):
    return [texts[a : a + PART_DOCUMENTS] for a in range(0, len(texts), PART_DOCUMENTS)]


def block_stats_parallel(docs, spec):
    """:func:`block_text_stats` of a block, its parts on the worker processes when they run."""
    from .workers import worker_map

    texts = docs.to_pylist() if hasattr(docs, "to_pylist") else list(docs)
    parts = worker_map(_stats_task, _parts(texts), (spec,))
    if not parts:
        return block_text_stats([], spec)
    out = parts[0]
    for p in parts[1:]:
        out = merge_text_stats(out, p)
    return out


def features_parallel(docs, model, out):
    """:func:`text_features` of a block into ``out`` (m x dim), its parts on the worker
    processes when they run (each sends back float32 features)."""
    from .workers import worker_map

    texts = docs.to_pylist() if hasattr(docs, "to_pylist") else list(docs)
    a = 0
    for part in worker_map(_features_task, _parts(texts), (model,)):
        out[a : a + len(part)] = part
        a += len(part)
    return out


def _stats_task(texts, spec):
    return block_text_stats(texts, spec)


def _features_task(texts, model):
    import pyarrow as pa

    return text_features(pa.array(texts, pa.string()), model).astype(np.float32)
