"""Store fingerprints: a session continues only on the store it began with.

A fingerprint is the shape, dtype and row chunking of X (the engine's sums run chunk by
chunk, so exact replay needs the same chunks), a SHA-256 of the store's featurization
attributes, and a SHA-256 of a few whole chunks (the first, the last and two between). Opening
costs those few chunk reads, not a pass over X; a change confined to chunks outside
the sample goes unnoticed.
"""

import hashlib
import json

from ..errors import StoreError
from ..storage.encoding import chunk_bytes

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


def check_fingerprint(expected, store, session_dir):
    """Raise StoreError naming the first difference between the store and ``expected``."""
    actual = store_fingerprint(store)
    checks = [  # (what, value to compare, whether to show the values)
        ("its shape", lambda f: f"{f['n']} x {f['r']}", True),
        ("its dtype", lambda f: f["dtype"], True),
        ("its rows per chunk", lambda f: f["chunk_rows"], True),
        ("its featurization attributes", lambda f: f["featurization_sha256"], False),
        ("the contents of sampled chunks", lambda f: (f["sampled_chunks"], f["sample_sha256"]), False),
    ]
    for what, get, show in checks:
        if get(expected) != get(actual):
            change = f" ({get(expected)} -> {get(actual)})" if show else ""
            raise StoreError(f"{store.path} has changed since session {session_dir} began: {what} changed"
                             f"{change}; a session continues only on the store it began with")
