"""Anchors for AGR: k-means over a store by streaming passes, cached beside the store.

k-means++ seeding draws its k centres from a random sample of rows (20 per anchor, at
least 10,000, read with ``read_rows``); then each Lloyd iteration is one pass over the
chunks through the engine's backend: every chunk assigns its rows to the nearest centre
and returns the per-centre sums and counts (k x r), which the driver adds up. X is never
held whole. A centre that loses all its points keeps its place. Iterations stop when the
total squared distance improves by less than ``KMEANS_TOLERANCE`` (relative) or after
``iterations`` passes.

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
from typing import NamedTuple

import numpy as np

from ..backends import ChunkStep
from ..errors import ParameterError
from ..kernels.agr import cluster_sums
from ..storage import local_dir_beside
from ..storage.atomic import atomic_open
from ..storage.encoding import decode, n_rows
from ..storage.fingerprint import store_fingerprint

KMEANS_VERSION = 1            # part of the cache key: bump when the algorithm changes
KMEANS_TOLERANCE = 1e-4
SAMPLE_PER_ANCHOR = 20
MIN_SAMPLE = 10_000
BLOCK_ROWS = 4096             # rows converted to float64 at a time


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
    key = {"fingerprint": store_fingerprint(store), "k": k, "seed": seed, "iterations": iterations,
           "version": KMEANS_VERSION}
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:20]
    root = cache_dir or os.environ.get("BIGSEARCH_CACHE_DIR")
    if root is None and not store.on_disk:    # an array in memory: nothing beside it to cache in
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
    except Exception as e:      # zipfile, zlib and numpy raise many kinds on damaged bytes
        warnings.warn(f"ignored the damaged AGR anchor cache {path} ({type(e).__name__}: {e}); "
                      "recomputing the anchors", RuntimeWarning, stacklevel=3)
        return None


def _save(path, anchors):
    """Write atomically; a cache that cannot be written only costs the next run time."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_open(path, "wb") as fh:
            np.savez(fh, anchors=anchors)
    except OSError as e:
        warnings.warn(f"cannot cache the AGR anchors at {path} ({e.strerror or e}); they will be "
                      "recomputed next time (set BIGSEARCH_CACHE_DIR to a writable directory)",
                      RuntimeWarning, stacklevel=3)


def kmeans(store, k, *, seed=0, iterations=20, mapper, progress=None):
    """Lloyd's k-means from k-means++ seeds, one pass over the store per iteration;
    ``progress("k-means", done, iterations)`` after the seeding and each iteration (done
    jumps to the end when it converges early)."""
    report = progress or (lambda what, done, total: None)
    rng = np.random.default_rng(seed)
    report("k-means", 0, iterations)
    centers = kmeans_plus_plus(_sample(store, k, rng), k, rng)
    previous = np.inf
    for it in range(iterations):
        parts = mapper(LLOYD, centers)
        sums = np.sum([p.sums for p in parts], axis=0)
        counts = np.sum([p.counts for p in parts], axis=0)
        inertia = sum(p.inertia for p in parts)
        centers = np.where(counts[:, None] > 0, sums / np.maximum(counts, 1)[:, None], centers)
        report("k-means", it + 1, iterations)
        if previous - inertia <= KMEANS_TOLERANCE * inertia:
            break
        previous = inertia
    report("k-means", iterations, iterations)
    return centers


def _sample(store, k, rng):
    size = min(store.n, max(SAMPLE_PER_ANCHOR * k, MIN_SAMPLE))
    return store.read_rows(np.sort(rng.choice(store.n, size=size, replace=False)))


def kmeans_plus_plus(S, k, rng):
    """k centres from the rows of S by D^2 sampling (Arthur and Vassilvitskii 2007)."""
    centers = np.empty((k, S.shape[1]))
    centers[0] = S[rng.integers(len(S))]
    d2 = ((S - centers[0]) ** 2).sum(axis=1)
    for j in range(1, k):
        total = d2.sum()
        if not total > 0:
            raise ParameterError(f"AGR: anchors={k} is more than the {j} distinct points of a sample of "
                                 f"{len(S):,} rows of the store; give anchors={j} or fewer")
        i = min(int(np.searchsorted(np.cumsum(d2), rng.random() * total, side="right")), len(S) - 1)
        centers[j] = S[i]
        d2 = np.minimum(d2, ((S - S[i]) ** 2).sum(axis=1))
    return centers


def squared_distances(xb, centers, center_sq):
    """||x - c||^2 for a float64 block of rows and every centre (clipped at 0)."""
    d = (xb * xb).sum(axis=1)[:, None] - 2.0 * (xb @ centers.T) + center_sq[None, :]
    return np.maximum(d, 0.0)


class LloydPartials(NamedTuple):
    sums: np.ndarray          # per centre, the sum of the chunk's rows nearest to it (k x r)
    counts: np.ndarray        # per centre, how many rows (k)
    inertia: float            # the chunk's total squared distance to the nearest centres


def lloyd_step(x, state, centers):
    """One chunk's part of a Lloyd iteration: per-centre sums and counts, and the chunk's
    total squared distance to the nearest centres."""
    k, r = centers.shape
    sums, counts, inertia = np.zeros((k, r)), np.zeros(k, np.int64), 0.0
    center_sq = (centers * centers).sum(axis=1)
    for a in range(0, n_rows(x), BLOCK_ROWS):
        xb = decode(x, a, a + BLOCK_ROWS)
        d = squared_distances(xb, centers, center_sq)
        labels = d.argmin(axis=1)
        inertia += float(d[np.arange(len(xb)), labels].sum())
        cluster_sums(labels, xb, sums, counts)
    return LloydPartials(sums, counts, inertia)


LLOYD = ChunkStep(lloyd_step, from_scratch=True)   # it reads only X: a lost chunk's part is recomputed
