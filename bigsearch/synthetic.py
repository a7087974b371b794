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


def clustered_block(rng, centres, n_rows, prevalence, spread):
    """(X float64 (n_rows, r), y int8 (n_rows,)) drawn from the cluster model."""
    pos, neg = centres
    d = pos.shape[1]
    y = (rng.random(n_rows) < prevalence).astype(np.int8)
    which = np.where(y == 1, rng.integers(0, len(pos), n_rows), rng.integers(0, len(neg), n_rows))
    Z = np.where(y[:, None] == 1, pos[np.minimum(which, len(pos) - 1)], neg[which])
    Z = Z + spread * rng.normal(size=(n_rows, d)) / np.sqrt(d)
    Z /= np.linalg.norm(Z, axis=1, keepdims=True)
    return np.hstack([Z, np.ones((n_rows, 1))]) / np.sqrt(2.0), y


def clustered_points(n, r, prevalence=0.01, seed=0, spread=1.0):
    """A synthetic data set in memory: (X float64 (n, r), y int8 (n,))."""
    centres = cluster_centres(r, seed)
    return clustered_block(np.random.default_rng([seed, 1]), centres, n, prevalence, spread)


def make_clustered_store(path, n, r, *, prevalence=0.01, seed=0, spread=1.0, dtype="float32",
                         chunk_rows=None, kind=None, overwrite=False, progress=None, compressors=None):
    """Write a synthetic store of n points and r features; returns its path.

    ``progress(rows_written)`` is called after each block, if given; ``compressors``
    goes to the store writer (None: uncompressed, the fast read path).
    """
    if r < 2:
        raise ValueError("a synthetic store needs r >= 2 (features plus the constant one)")
    centres = cluster_centres(r, seed)
    attrs = {"provenance": {"generator": "bigsearch.synthetic.make_clustered_store", "n": n, "r": r,
                            "prevalence": prevalence, "seed": seed, "spread": spread},
             "featurization": {"steps": ["normalize", "bias", "scale 1/sqrt(2)"]}}
    with StoreWriter(path, r, dtype=dtype, chunk_rows=chunk_rows, kind=kind, labels=True,
                     attrs=attrs, overwrite=overwrite, compressors=compressors) as w:
        for b, a in enumerate(range(0, n, BLOCK_ROWS)):
            rng = np.random.default_rng([seed, 2, b])
            X, y = clustered_block(rng, centres, min(BLOCK_ROWS, n - a), prevalence, spread)
            w.append(X, y)
            if progress:
                progress(w.rows_appended)
    return path
