"""Kernels: pure numba functions over arrays (a chunk of X, its per-point state, small
global state), with no I/O and no global Python state, so any backend can map them."""

import contextlib
import hashlib
from pathlib import Path

STAMP = "bigsearch-kernels.sources"


def drop_stale_cache(sources: Path, cache: Path) -> bool:
    """Remove numba's cache indexes in ``cache`` unless they were written for the current
    ``sources/*.py``; returns True when it removed them.

    numba checks a cached function against its own file only: after an edit of
    common.py, the cached LAS kernel in las.py kept the old row_dots it was compiled
    with (a benchmark measured a 1.4x slower kernel that way). One digest of all the
    kernels' sources guards them together. Best effort: an unwritable cache is numba's
    to handle.
    """
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in sorted(sources.glob("*.py")))).hexdigest()
    stamp = cache / STAMP
    with contextlib.suppress(OSError):
        if stamp.read_text() == digest:
            return False
    with contextlib.suppress(OSError):
        for index in cache.glob("*.nbi"):
            index.unlink(missing_ok=True)
        cache.mkdir(exist_ok=True)
        stamp.write_text(digest)      # not durable data: a torn stamp only drops the indexes again
        return True
    return False


drop_stale_cache(Path(__file__).parent, Path(__file__).parent / "__pycache__")
