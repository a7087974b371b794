"""Store fingerprints: what identifies a store's contents without a pass over X.

A fingerprint is the shape, dtype and row chunking of X (the engine's sums run chunk by
chunk, so exact replay needs the same chunks), a SHA-256 of the store's featurization
attributes, and a SHA-256 of a few whole chunks (the first, the last and two between).
It costs those few chunk reads; a change confined to chunks outside the sample goes
unnoticed. Sessions (a session continues only on the store it began with), experiments
(results are resumed only on the same store) and the AGR anchor cache key on it.
"""

import hashlib
import json

from .encoding import chunk_bytes

SAMPLED_CHUNKS = 4


def sampled_chunks(n_chunks):
    picks = {0, n_chunks - 1, *(k * n_chunks // (SAMPLED_CHUNKS - 1) for k in range(1, SAMPLED_CHUNKS - 1))}
    return sorted(picks)


def store_fingerprint(store):
    """A JSON-able fingerprint of an open FeatureStore."""
    chunks = sampled_chunks(store.n_chunks)
    h = hashlib.sha256()
    for j in chunks:
        with store.chunk(j) as x:
            h.update(chunk_bytes(x))
    featurization = json.dumps(store.attrs.get("featurization"), sort_keys=True, default=str).encode()
    return {"n": store.n, "r": store.r, "dtype": store.dtype.name, "chunk_rows": store.chunk_rows,
            "featurization_sha256": hashlib.sha256(featurization).hexdigest(),
            "sampled_chunks": chunks, "sample_sha256": h.hexdigest()}
