"""AGR's anchors: the k-means centres of a store (engine/core/kmeans.py), cached beside it.

The anchors depend only on the store and (k, seed, iterations), so they are cached in
``.bigsearch-cache/`` beside the store (or in $BIGSEARCH_CACHE_DIR), in a file named by a
hash of the store's fingerprint (shape, chunking, featurization attributes and a sample of
chunks; see storage/fingerprint.py) and those parameters, written atomically. The store
itself is never written to.
"""

import hashlib
import json
import os
import warnings
from pathlib import Path

import numpy as np

from ...errors import ParameterError
from ...storage import local_dir_beside
from ...storage.atomic import atomic_open
from ...storage.fingerprint import store_fingerprint
from ..core.kmeans import KMEANS_VERSION, kmeans


def anchors_for(store, k, *, seed=0, iterations=20, mapper, cache_dir=None, progress=None):
    """The k-means anchors of ``store`` (k x r, float64), from the cache when present.

    ``mapper(step, *args)`` runs ``step(x, state, *args)`` over every chunk (a backend's
    ``map``); ``progress("k-means", done, total)``, if given, hears of each iteration.
    """
    if not 1 <= k <= store.n:
        raise ParameterError(f"AGR needs 1 <= anchors <= n = {store.n}, got {k}")
    path = cache_path(store, k, seed, iterations, cache_dir)
    cached = None if path is None else _load(path, (k, store.r))
    if cached is not None:
        return cached
    anchors = kmeans(store, k, seed=seed, iterations=iterations, mapper=mapper, progress=progress)
    if path is not None:
        _save(path, anchors)
    return anchors


def cache_path(store, k, seed, iterations, cache_dir=None):
    key = {
        "fingerprint": store_fingerprint(store),
        "k": k,
        "seed": seed,
        "iterations": iterations,
        "version": KMEANS_VERSION,
    }
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:20]
    root = cache_dir or os.environ.get("BIGSEARCH_CACHE_DIR")
    if root is None and not store.on_disk:  # an array in memory: nothing beside it to cache in
        return None
    root = Path(root or local_dir_beside(store.path, ".bigsearch-cache"))
    return root / f"{Path(str(store.path)).name}.anchors-k{k}-{digest}.npz"


def _load(path, shape):
    """The cached anchors, or None when there are none or the file is damaged (then they
    are recomputed: a cache may only cost time, never change a result or stop a run)."""
    if not path.exists():
        return None
    try:
        with np.load(path, allow_pickle=False) as cached:
            anchors = np.asarray(cached["anchors"])
        if anchors.shape != shape or anchors.dtype != np.float64 or not np.isfinite(anchors).all():
            raise ValueError(f"it holds {anchors.dtype} {anchors.shape}, not float64 {shape} finite values")
        return anchors
    except Exception as e:  # zipfile, zlib and numpy raise many kinds on damaged bytes
        warnings.warn(
            f"ignored the damaged AGR anchor cache {path} ({type(e).__name__}: {e}); recomputing the anchors",
            RuntimeWarning,
            stacklevel=3,
        )
        return None


def _save(path, anchors):
    """Write atomically; a cache that cannot be written only costs the next run time."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_open(path, "wb") as fh:
            np.savez(fh, anchors=anchors)
    except OSError as e:
        warnings.warn(
            f"cannot cache the AGR anchors at {path} ({e.strerror or e}); they will be "
            "recomputed next time (set BIGSEARCH_CACHE_DIR to a writable directory)",
            RuntimeWarning,
            stacklevel=3,
        )
