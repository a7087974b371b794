"""Streaming k-means over a store: X is never held whole.

k-means++ seeding draws its k centres from a random sample of rows (20 per centre, at
least 10,000, read with ``read_rows``); then each Lloyd iteration is one pass over the
chunks through a backend: every chunk assigns its rows to the nearest centre and returns
the per-centre sums and counts (k x r), which the driver adds up. A centre that loses
all its points keeps its place. Iterations stop when the total squared distance improves
by less than ``KMEANS_TOLERANCE`` (relative) or after ``iterations`` passes.

AGR's anchors (engine/methods/agr_anchors.py, cached beside the store) and the cluster
order of ingest (ingest/cluster_order.py) use it.
"""

from typing import NamedTuple

import numpy as np

from ...backends import ChunkStep
from ...errors import ParameterError
from ...kernels.agr import cluster_sums
from ...storage.encoding import decode, n_rows

KMEANS_VERSION = 1            # part of the cache key: bump when the algorithm changes
KMEANS_TOLERANCE = 1e-4
SAMPLE_PER_ANCHOR = 20
MIN_SAMPLE = 10_000
BLOCK_ROWS = 4096             # rows converted to float64 at a time


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
            raise ParameterError(f"AGR asks for {k} anchors, but a sample of {len(S)} rows of the store "
                                 f"has only {j} distinct points; choose fewer anchors")
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
