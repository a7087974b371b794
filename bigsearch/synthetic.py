"""Synthetic feature stores with rare, clustered positives (for the demo, tests and benchmarks).

Points are drawn around cluster centres in d = r - 1 dimensions: a few centres for the
positives, more for the negatives, with isotropic noise of relative size ``spread``.
Rows are unit-normalized and a constant feature is appended, then scaled by 1/sqrt(2),
so every similarity is (cos + 1) / 2 in [0, 1] and every degree is positive, as LAS
needs. Generation streams in blocks, so stores of any size fit in bounded memory, and
is reproducible from ``seed``.
"""

import numpy as np

from .storage import StoreWriter

BLOCK_ROWS = 1 << 16


def cluster_centres(r, seed, n_positive=3, n_negative=20):
    rng = np.random.default_rng([seed, 0])
    d = r - 1
    return rng.normal(size=(n_positive, d)) / np.sqrt(d), rng.normal(size=(n_negative, d)) / np.sqrt(d)


def draw_clusters(rng, centres, n_rows, prevalence):
    """(y int8, cluster int64) of a block: each row's label and generating cluster
    (positives' clusters first: 0 .. len(pos) - 1, then the negatives'). Draws before the
    noise, so the clusters of a block cost a fraction of generating it."""
    pos, neg = centres
    y = (rng.random(n_rows) < prevalence).astype(np.int8)
    pos_pick = rng.integers(0, len(pos), n_rows)
    neg_pick = rng.integers(0, len(neg), n_rows)
    return y, np.where(y == 1, pos_pick, len(pos) + neg_pick)


def clustered_block(rng, centres, n_rows, prevalence, spread, clusters=False):
    """(X float64 (n_rows, r), y int8 (n_rows,)) drawn from the cluster model, and each
    row's generating cluster if ``clusters``."""
    d = centres[0].shape[1]
    y, cluster = draw_clusters(rng, centres, n_rows, prevalence)
    Z = np.vstack(centres)[cluster] + spread * rng.normal(size=(n_rows, d)) / np.sqrt(d)
    Z /= np.linalg.norm(Z, axis=1, keepdims=True)
    X = np.hstack([Z, np.ones((n_rows, 1))]) / np.sqrt(2.0)
    return (X, y, cluster) if clusters else (X, y)


def clustered_points(n, r, prevalence=0.01, seed=0, spread=1.0):
    """A synthetic data set in memory: (X float64 (n, r), y int8 (n,))."""
    centres = cluster_centres(r, seed)
    return clustered_block(np.random.default_rng([seed, 1]), centres, n, prevalence, spread)


def make_clustered_store(path, n, r, *, prevalence=0.01, seed=0, spread=1.0, dtype="float32",
                         chunk_rows=None, kind=None, overwrite=False, progress=None, compressors=None,
                         order="rows", summaries=None):
    """Write a synthetic store of n points and r features; returns its path.

    ``order="generated"`` writes the same rows grouped by their generating cluster (for
    pruned queries), with ``ids`` holding each row's number in the default order: row p
    of that store is row ``ids[p]`` of the default one. It streams too: one cheap pass
    draws the clusters to size their regions, then each block is generated once and its
    rows go to their cluster's region (memory: one to two chunks per cluster; 1.7 GB
    peak for 60M x 128 float32 with 32 MiB chunks and 23 clusters).

    ``progress(rows_written)`` is called after each block, if given; ``compressors``
    goes to the store writer (None: uncompressed, the fast read path). ``summaries``: a
    dict, filled with what ``engine.pruning.summaries.write_block_summaries`` wrote: the pruning
    block summaries, computed on the complete store before it is published (three passes
    over it; None: not written).
    """
    if r < 2:
        raise ValueError("a synthetic store needs r >= 2 (features plus the constant one)")
    if order not in ("rows", "generated"):
        raise ValueError(f"order must be 'rows' or 'generated', got {order!r}")
    centres = cluster_centres(r, seed)
    attrs = {"provenance": {"generator": "bigsearch.synthetic.make_clustered_store", "n": n, "r": r,
                            "prevalence": prevalence, "seed": seed, "spread": spread, "order": order},
             "featurization": {"steps": ["normalize", "bias", "scale 1/sqrt(2)"]}}
    with StoreWriter(path, r, dtype=dtype, chunk_rows=chunk_rows, kind=kind, labels=True,
                     ids_dtype=np.int64 if order == "generated" else None,
                     attrs=attrs, overwrite=overwrite, compressors=compressors) as w:
        if summaries is not None:
            w.before_publish = lambda tmp: summaries.update(_block_summaries(tmp))
        blocks = _blocks(n, seed, centres, prevalence, spread)
        if order == "generated":
            _write_grouped(w, blocks, _cluster_sizes(n, seed, centres, prevalence), progress)
        else:
            for a, X, y, _ in blocks:
                w.append(X, y)
                if progress:
                    progress(w.rows_appended)
    return path


def _block_summaries(path):
    from .engine.pruning.summaries import write_block_summaries
    return write_block_summaries(path, in_place=True) or {}


def _blocks(n, seed, centres, prevalence, spread):
    """(first row, X, y, clusters) of each generated block, in row order."""
    for b, a in enumerate(range(0, n, BLOCK_ROWS)):
        rng = np.random.default_rng([seed, 2, b])
        yield (a, *clustered_block(rng, centres, min(BLOCK_ROWS, n - a), prevalence, spread, clusters=True))


def _cluster_sizes(n, seed, centres, prevalence):
    sizes = np.zeros(sum(len(c) for c in centres), np.int64)
    for b, a in enumerate(range(0, n, BLOCK_ROWS)):
        rng = np.random.default_rng([seed, 2, b])
        sizes += np.bincount(draw_clusters(rng, centres, min(BLOCK_ROWS, n - a), prevalence)[1],
                             minlength=len(sizes))
    return sizes


def _write_grouped(w, blocks, sizes, progress):
    """Each cluster's rows, in row order, fill its region of the store [start, start + size):
    a buffer per cluster is written when it reaches a chunk boundary, so the regions grow
    in whole chunks (only the chunks two regions share are written twice)."""
    cursor = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    pending = [[] for _ in sizes]
    written = 0

    def flush(c, final):
        nonlocal written
        X, y, ids = (np.concatenate([p[i] for p in pending[c]]) for i in range(3))
        stop = len(X) if final else (cursor[c] + len(X)) // w.chunk_rows * w.chunk_rows - cursor[c]
        if stop > 0:
            w.write_at(cursor[c], X[:stop], y[:stop], ids[:stop])
            cursor[c] += stop
            written += stop
        pending[c] = [(X[stop:], y[stop:], ids[stop:])] if stop < len(X) else []

    for a, X, y, cluster in blocks:
        for c in np.unique(cluster):
            rows = np.flatnonzero(cluster == c)
            pending[c].append((X[rows].astype(w.dtype), y[rows], a + rows))
            if sum(len(p[0]) for p in pending[c]) >= w.chunk_rows:
                flush(c, final=False)
        if progress:
            progress(written)
    for c in range(len(sizes)):
        if pending[c]:
            flush(c, final=True)
    if progress:
        progress(written)
