"""A session continues only on the store it began with: its fingerprint
(storage/fingerprint.py) is recorded at creation and checked on every opening.
"""

from ..errors import StoreError
from ..storage.fingerprint import store_fingerprint


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
