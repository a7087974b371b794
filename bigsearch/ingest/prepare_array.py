"""``bigsearch.prepare``: ingest's feature steps for an array held in memory.

`bigsearch ingest --normalize --bias --rff D` prepares files; from Python, a NumPy array
(or anything NumPy reads by rows: a memory map, an h5py or zarr array) gets the same
steps from the same code (``featurize.finish``): unit-normalized rows, a constant 1
feature appended (so every similarity is cos + 1 >= 0, as LAS needs), optionally random
Fourier features. The options are checked by ingest's own :class:`FeatureOptions`.
"""

import warnings

import numpy as np

from ..errors import DataError
from .featurize import ColumnPlan, Plan, finish
from .featurize import prepare as step_weights
from .options import FeatureOptions

BLOCK_ROWS = 1 << 16  # rows transformed at a time: bounded temporaries for any n


def prepare(X, *, normalize=False, bias=False, rff=None, gamma=1.0, seed=0, dtype="float32"):
    """X (n x r) -> the features ingest would write with the same options, as an
    (n x r') array of ``dtype``: ``normalize`` divides each row by its norm (an
    all-zero row stays zero, with a warning), ``bias`` appends a constant 1 feature,
    ``rff`` (D) maps the rows through D random Fourier features of the RBF kernel
    exp(-gamma ||x - x'||^2) with the weights of ``seed``.

    >>> X = bigsearch.prepare(X, normalize=True, bias=True)     # then bigsearch.LAS(X, ...)
    """
    options = FeatureOptions(normalize=normalize, bias=bias, rff=rff, gamma=gamma, seed=seed)
    if getattr(X, "ndim", None) != 2:
        X = np.asarray(X)
        if X.ndim != 2:
            raise DataError(f"X must be 2-D (n x r), got shape {X.shape}")
    n, r = X.shape
    plan = Plan(
        [ColumnPlan(j, f"f{j}", "number") for j in range(r)],
        normalize=options.normalize,
        bias=options.bias,
        rff=options.rff_spec,
    )
    weights = step_weights(plan)
    out = np.empty((n, plan.width), dtype)
    zero_rows = 0
    for a in range(0, n, BLOCK_ROWS):
        block = np.asarray(X[a : a + BLOCK_ROWS], np.float64)
        bad = ~np.isfinite(block)
        if bad.any():
            row, col = np.argwhere(bad)[0]
            raise DataError(f"X[{a + row}, {col}] is {block[row, col]}: features must be finite numbers")
        out[a : a + len(block)], zeros = finish(block, plan, weights)
        zero_rows += zeros
    if zero_rows:
        warnings.warn(f"{zero_rows:,} rows are all zero; normalize leaves them zero", RuntimeWarning, stacklevel=2)
    return out
