"""Kernels of the text features (ingest/text.py): documents' tokens and term counts read
straight from Arrow's UTF-8 buffers, the hashes they need, and the sparse x dense products
of the projection and of its fit.

Integers are uint64 throughout the hashing (numba turns uint64 mixed with int64 into
float64), 32-bit values kept below 2^32 by masking."""

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from .common import FAST
from .compile_lock import lock_compiles

M32 = np.uint64(0xFFFFFFFF)
C1, C2 = np.uint64(0xCC9E2D51), np.uint64(0x1B873593)
F1, F2 = np.uint64(0x85EBCA6B), np.uint64(0xC2B2AE35)
GOLDEN = np.uint64(0x9E3779B97F4A7C15)
MIX1, MIX2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)
ADLER = np.uint64(65521)
ADLER_RUN = 5552  # bytes adler32's sums take before they must be reduced (zlib's NMAX)


def _crc_table():
    table = np.arange(256, dtype=np.uint64)
    for _ in range(8):
        table = np.where(table & np.uint64(1), np.uint64(0xEDB88320) ^ (table >> np.uint64(1)), table >> np.uint64(1))
    return table


CRC_TABLE = _crc_table()
LINE = 16  # float32 values in a cache line
AHEAD = 2  # rows of the dense matrix fetched ahead of the one added (_add_rows)
PARTS = 64  # row ranges of equal work that sparse_times_dense's threads share out
RADIX_BITS = 11  # bits of a term id sorted per pass (2 passes for 2^22 ids)
RADIX_MASK = np.uint32((1 << RADIX_BITS) - 1)


@numba.njit(nogil=True, cache=True, inline="always")
def _lower(b):
    """A byte as uint64, ASCII capitals lower-cased (bytes of multi-byte characters are
    all >= 128, so only ASCII letters change)."""
    v = np.uint64(b)
    if np.uint64(65) <= v <= np.uint64(90):
        v += np.uint64(32)
    return v


@numba.njit(nogil=True, cache=True, inline="always")
def _rotl32(x, r):
    return ((x << np.uint64(r)) | (x >> np.uint64(32 - r))) & M32


@numba.njit(nogil=True, cache=True, inline="always")
def _murmur_block(k):
    k = (k * C1) & M32
    return (_rotl32(k, 15) * C2) & M32


@numba.njit(nogil=True, cache=True)
def murmur3(data, start, end):
    """MurmurHash3 (x86, 32 bits, seed 0) of the bytes data[start:end], ASCII capitals
    lower-cased: scikit-learn's ``murmurhash3_32(word, positive=True)`` of the lower-cased
    word, as uint64."""
    h = np.uint64(0)
    n = end - start
    body = start + n // 4 * 4
    for p in range(start, body, 4):
        k = _lower(data[p]) | (_lower(data[p + 1]) << np.uint64(8))
        k |= (_lower(data[p + 2]) << np.uint64(16)) | (_lower(data[p + 3]) << np.uint64(24))
        h = _rotl32(h ^ _murmur_block(k), 13)
        h = (h * np.uint64(5) + np.uint64(0xE6546B64)) & M32
    tail = n & 3
    k = np.uint64(0)
    if tail == 3:
        k ^= _lower(data[body + 2]) << np.uint64(16)
    if tail >= 2:
        k ^= _lower(data[body + 1]) << np.uint64(8)
    if tail >= 1:
        h ^= _murmur_block(k ^ _lower(data[body]))
    h ^= np.uint64(n)
    h = ((h ^ (h >> np.uint64(16))) * F1) & M32
    h = ((h ^ (h >> np.uint64(13))) * F2) & M32
    return h ^ (h >> np.uint64(16))


@numba.njit(nogil=True, cache=True)
def hash_strings(offsets, data):
    """:func:`murmur3` of each string of an Arrow string array (its offsets and bytes)."""
    out = np.empty(len(offsets) - 1, np.uint64)
    for i in range(len(out)):
        out[i] = murmur3(data, offsets[i], offsets[i + 1])
    return out


@numba.njit(nogil=True, cache=True, inline="always")
def mix(h):
    """splitmix64's finalizer (ingest/text.py's ``_mix``, one value)."""
    h = (h ^ (h >> np.uint64(30))) * MIX1
    h = (h ^ (h >> np.uint64(27))) * MIX2
    return h ^ (h >> np.uint64(31))


@numba.njit(nogil=True, cache=True, inline="always")
def _is_word(b):
    """An ASCII letter, digit or '_' (RE2's [\\p{L}\\p{N}_] on ASCII)."""
    return (48 <= b <= 57) or (65 <= b <= 90) or (97 <= b <= 122) or b == 95


@numba.njit(nogil=True, cache=True, inline="always")
def _code_point(data, p, end):
    """(the code point of the UTF-8 character at data[p], its bytes), or (-1, 1) for an
    invalid sequence."""
    b = np.int64(data[p])
    if b < 0x80:
        return b, 1
    if 0xC2 <= b <= 0xDF:
        size, cp = 2, b & 0x1F
    elif 0xE0 <= b <= 0xEF:
        size, cp = 3, b & 0x0F
    elif 0xF0 <= b <= 0xF4:
        size, cp = 4, b & 0x07
    else:
        return -1, 1
    if p + size > end:
        return -1, 1
    for q in range(p + 1, p + size):
        c = np.int64(data[q])
        if c & 0xC0 != 0x80:
            return -1, 1
        cp = (cp << 6) | (c & 0x3F)
    if cp < (0x80, 0x800, 0x10000)[size - 2] or 0xD800 <= cp <= 0xDFFF or cp > 0x10FFFF:
        return -1, 1
    return cp, size


@numba.njit(nogil=True, cache=True, inline="always")
def _put_utf8(out, k, cp):
    """The UTF-8 bytes of code point cp written at out[k:]; the index after them."""
    if cp < 0x80:
        out[k] = cp
        return k + 1
    if cp < 0x800:
        out[k], out[k + 1] = 0xC0 | (cp >> 6), 0x80 | (cp & 0x3F)
        return k + 2
    if cp < 0x10000:
        out[k], out[k + 1], out[k + 2] = 0xE0 | (cp >> 12), 0x80 | ((cp >> 6) & 0x3F), 0x80 | (cp & 0x3F)
        return k + 3
    out[k], out[k + 1] = 0xF0 | (cp >> 18), 0x80 | ((cp >> 12) & 0x3F)
    out[k + 2], out[k + 3] = 0x80 | ((cp >> 6) & 0x3F), 0x80 | (cp & 0x3F)
    return k + 4


@numba.njit(nogil=True, cache=True)
def _ascii_tokens(data, start, end, out):
    """The hashes of the tokens of data[start:end] into out, their number; -1 when the
    text is not ASCII (:func:`_tokens` reads it)."""
    n = 0
    run = -1
    for p in range(start, end):
        b = data[p]
        if b >= 128:
            return -1
        if _is_word(b):
            if run < 0:
                run = p
        elif run >= 0:
            if p - run >= 2:
                out[n] = murmur3(data, run, p)
                n += 1
            run = -1
    if run >= 0 and end - run >= 2:
        out[n] = murmur3(data, run, end)
        n += 1
    return n


@numba.njit(nogil=True, cache=True)
def _tokens(data, start, end, out, lower, word, token):
    """:func:`_ascii_tokens` for any UTF-8 text (2.5x slower): characters beyond ASCII
    lower-cased and classified by the tables ``lower`` and ``word``, each token's
    lower-cased bytes built in ``token`` and hashed. -1 for a character the tables leave
    out, or invalid UTF-8."""
    n = 0
    chars = 0  # of the token being read, 0 between tokens
    k = 0  # its lower-cased bytes in token
    p = start
    while p < end:
        b = data[p]
        if b < 0x80:
            if _is_word(b):
                token[k] = b + 32 if 65 <= b <= 90 else b
                k += 1
                chars += 1
            elif chars:
                n = _end_token(token, k, chars, out, n)
                chars = k = 0
            p += 1
            continue
        cp, size = _code_point(data, p, end)
        if cp < 0 or lower[cp] < 0:
            return -1
        if word[cp]:
            k = _put_utf8(token, k, np.int64(lower[cp]))
            chars += 1
        elif chars:
            n = _end_token(token, k, chars, out, n)
            chars = k = 0
        p += size
    return _end_token(token, k, chars, out, n) if chars else n


@numba.njit(nogil=True, cache=True, inline="always")
def _end_token(token, k, chars, out, n):
    """A token read: its hash added to out when it has two characters or more; the count."""
    if chars >= 2:
        out[n] = murmur3(token, 0, k)
        return n + 1
    return n


@numba.njit(nogil=True, cache=True)
def _grown(a, size):
    out = np.empty(max(size, 2 * len(a)), a.dtype)
    out[: len(a)] = a
    return out


@numba.njit(nogil=True, cache=True)
def document_term_counts(offsets, data, ngram_max, bits, lower, word):
    """The term counts of each document of an Arrow string array, as ingest/text.py's
    ``term_counts`` makes them (tokens lower-cased, cut at anything but letters, digits
    and '_', those of one character dropped, each hashed, n-grams mixed from their tokens'
    hashes, ids masked to ``bits``): (indptr, term ids sorted in each document, counts,
    which documents were left empty for the caller). Beyond ASCII, characters are
    lower-cased and classified by the tables ``lower`` and ``word`` (empty: documents
    beyond ASCII are left to the caller)."""
    m = len(offsets) - 1
    mask = np.uint64((1 << bits) - 1)
    indptr = np.zeros(m + 1, np.int64)
    other = np.zeros(m, np.bool_)
    terms = np.empty(max(16, (offsets[m] - offsets[0]) // 4), np.int64)
    counts = np.empty(len(terms), np.float64)
    tokens, token = np.empty(16, np.uint64), np.empty(16, np.uint8)
    ids, spare = np.empty(16, np.uint32), np.empty(16, np.uint32)
    buckets = np.empty(1 << RADIX_BITS, np.int64)
    nnz = 0
    for i in range(m):
        start, end = offsets[i], offsets[i + 1]
        if len(tokens) < (end - start + 1) // 3 + 1:
            tokens, token = np.empty((end - start + 1) // 3 + 1, np.uint64), np.empty(4 * (end - start), np.uint8)
        n = _ascii_tokens(data, start, end, tokens)
        if n < 0 and len(lower):
            n = _tokens(data, start, end, tokens, lower, word, token)
        if n < 0:
            other[i] = True
            indptr[i + 1] = nnz
            continue
        if len(ids) < n * ngram_max:
            ids, spare = np.empty(2 * n * ngram_max, np.uint32), np.empty(2 * n * ngram_max, np.uint32)
        c = _document_terms(tokens[:n], ngram_max, mask, ids)
        ordered = _radix_sort(ids, spare, c, bits, buckets)
        if nnz + c > len(terms):
            terms, counts = _grown(terms, nnz + c), _grown(counts, nnz + c)
        nnz = _count_runs(ordered[:c], terms, counts, nnz)
        indptr[i + 1] = nnz
    return indptr, terms[:nnz].copy(), counts[:nnz].copy(), other


@numba.njit(nogil=True, cache=True)
def _document_terms(tokens, ngram_max, mask, out):
    """A document's term ids into out, their number: its tokens' and their n-grams' (gram[p]
    of n tokens = mix(gram[p] of n - 1 * GOLDEN + token[p + n - 1] + n), as
    ingest/text.py's term_ids)."""
    n = len(tokens)
    gram = tokens.copy()
    for p in range(n):
        out[p] = np.uint32(tokens[p] & mask)
    c = n
    for g in range(2, ngram_max + 1):
        for p in range(n - g + 1):
            gram[p] = mix(gram[p] * GOLDEN + tokens[p + g - 1] + np.uint64(g))
            out[c] = np.uint32(gram[p] & mask)
            c += 1
    return c


@numba.njit(nogil=True, cache=True)
def _radix_sort(keys, spare, n, bits, buckets):
    """keys[:n] (below 2^bits) sorted by a least-significant-digit radix sort of RADIX_BITS a
    pass, ``spare`` its other buffer: the array holding them sorted (5x numba's np.sort on a
    document's few hundred ids)."""
    for shift in range(0, bits, RADIX_BITS):
        buckets[:] = 0
        for p in range(n):
            buckets[(keys[p] >> shift) & RADIX_MASK] += 1
        total = 0
        for b in range(len(buckets)):
            total, buckets[b] = total + buckets[b], total
        for p in range(n):
            b = (keys[p] >> shift) & RADIX_MASK
            spare[buckets[b]] = keys[p]
            buckets[b] += 1
        keys, spare = spare, keys
    return keys


@numba.njit(nogil=True, cache=True)
def _count_runs(sorted_ids, terms, counts, nnz):
    """Each distinct id of ``sorted_ids`` and its count, appended at terms[nnz:], counts[nnz:]."""
    for p in range(len(sorted_ids)):
        if p > 0 and sorted_ids[p] == sorted_ids[p - 1]:
            counts[nnz - 1] += 1.0
        else:
            terms[nnz] = np.int64(sorted_ids[p])
            counts[nnz] = 1.0
            nnz += 1
    return nnz


@numba.njit(nogil=True, cache=True)
def text_keys(offsets, data):
    """zlib's crc32 << 32 | adler32 of each string's bytes (ingest/text.py's sample keys)."""
    out = np.empty(len(offsets) - 1, np.uint64)
    for i in range(len(out)):
        crc = M32
        a, b = np.uint64(1), np.uint64(0)
        for p in range(offsets[i], offsets[i + 1]):
            v = np.uint64(data[p])
            crc = CRC_TABLE[(crc ^ v) & np.uint64(0xFF)] ^ (crc >> np.uint64(8))
            a += v
            b += a
            if (p - offsets[i]) % ADLER_RUN == ADLER_RUN - 1:
                a, b = a % ADLER, b % ADLER
        out[i] = ((crc ^ M32) << np.uint64(32)) | ((b % ADLER) << np.uint64(16)) | (a % ADLER)
    return out


@intrinsic
def _prefetch(typingctx, row, index):
    """Ask the CPU for row[index]'s cache line (a hint: nothing else changes)."""
    if not (isinstance(row, types.Array) and row.ndim == 1):
        return None

    def codegen(context, builder, signature, args):
        array = context.make_array(signature.args[0])(context, builder, args[0])
        pointer = cgutils.get_item_pointer(context, builder, signature.args[0], array, [args[1]], wraparound=False)
        i32 = ir.IntType(32)
        fetch = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(ir.VoidType(), [pointer.type, i32, i32, i32]), "llvm.prefetch.p0"
        )
        builder.call(fetch, [pointer, i32(0), i32(3), i32(1)])  # read, keep in every level, data
        return context.get_dummy_value()

    return types.void(row, index), codegen


@numba.njit(nogil=True, cache=True, fastmath=FAST, inline="always")
def _add_rows(out_row, start, end, columns, values, B):
    """out_row += values[t] * B[columns[t]] for t in start..end (columns[t] >= 0), in that
    order. The rows of B are scattered over a matrix of up to gigabytes: each is asked for
    AHEAD terms before it is added, so its cache misses overlap the arithmetic (1.2x)."""
    for t in range(start, end):
        if t + AHEAD < end and columns[t + AHEAD] >= 0:
            upcoming = B[columns[t + AHEAD]]
            for j in range(0, len(upcoming), LINE):
                _prefetch(upcoming, j)
        c = columns[t]
        if c < 0:
            continue
        v = values[t]
        b = B[c]
        for j in range(len(out_row)):
            out_row[j] += v * b[j]


@numba.njit(nogil=True, cache=True, fastmath=FAST)
def project_documents(indptr, columns, values, components, out):
    """out[i] += sum over document i's terms t (columns[t] >= 0) of values[t] * components[columns[t]]:
    each document's row of out stays in cache while its terms' rows of components (float32,
    widened) are added in the order of its terms, so a row's value does not depend on its
    block. SciPy's sparse product widened the whole float32 projection to float64 on every
    call (hundreds of MB a block of 2,000 documents) and added one column at a time."""
    for i in range(len(indptr) - 1):
        _add_rows(out[i], indptr[i], indptr[i + 1], columns, values, components)


@numba.njit(nogil=True, cache=True, fastmath=FAST, parallel=True)
def sparse_times_dense(indptr, indices, values, B, out):
    """out = A @ B for A in CSR (indptr, indices, values) and a dense B, on every core:
    each row of out gathers its entries' rows of B, in their order, so the result does not
    depend on the number of threads. The rows are cut into PARTS ranges of about equal
    entries (the threads' shares: one term's row of A^T may hold most of the documents).
    A @ B and A^T @ C are both this, A^T's CSR built once; SciPy's products run on one
    core and in float64."""
    bounds = np.searchsorted(indptr, np.linspace(0, indptr[-1], PARTS + 1)[1:-1])
    bounds = np.concatenate((np.zeros(1, np.int64), bounds.astype(np.int64), np.full(1, len(indptr) - 1)))
    for p in numba.prange(PARTS):
        for i in range(bounds[p], bounds[p + 1]):
            out[i, :] = 0
            _add_rows(out[i], indptr[i], indptr[i + 1], indices, values, B)


@numba.njit(nogil=True, cache=True)
def record_hashes(offsets, data, squeeze):
    """A 64-bit hash of each string of (offsets, bytes), 0 for an empty one (ingest/duplicates.py):
    FNV-1a over its bytes, ASCII capitals lower-cased, mixed by splitmix64's finalizer. With
    ``squeeze``, only letters and digits count (ASCII ones, and every byte of a non-ASCII
    character): two exports of one record that differ in case, spaces and punctuation hash
    alike. Also 0 where nothing counted."""
    out = np.zeros(len(offsets) - 1, np.uint64)
    for i in range(len(out)):
        h, counted = np.uint64(0xCBF29CE484222325), 0
        for p in range(offsets[i], offsets[i + 1]):
            b = data[p]
            if squeeze and b < 128 and (b == 95 or not _is_word(b)):  # '_' is punctuation here
                continue
            h = (h ^ _lower(b)) * np.uint64(0x100000001B3)
            counted += 1
        if counted:
            out[i] = max(mix(h), np.uint64(1))
    return out


lock_compiles(globals())
