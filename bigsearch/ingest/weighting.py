"""Inverse document frequency weighting of sparse features (``ingest --idf``).

For sparse binary or count features (fingerprints, one-hot text), a feature present in
most rows adds the same amount to nearly every similarity x_i . x_j, so after unit
normalization the linear similarity is dominated by what all points share. Scaling
feature k by

    idf_k = ln((1 + n) / (1 + df_k)) + 1,     df_k = the number of rows where feature k != 0

(scikit-learn's smoothed IDF) before normalization lets rare, informative features
count: measured on the docking task of docs/discovery.md. The +1 keeps features present
in every row at weight 1 rather than 0, so no row becomes all zero.

``df`` is a statistic of the first pass (``document_frequency`` per block, summed), over
every row read, before any subsampling.
"""

import numpy as np


def document_frequency(Z):
    """Per feature, the number of rows of the block where it is non-zero (int64)."""
    return np.count_nonzero(Z, axis=0).astype(np.int64)


def idf_weights(df, n_rows):
    """The smoothed inverse document frequency of each feature (float64)."""
    df = np.asarray(df, np.float64)
    return np.log((1.0 + n_rows) / (1.0 + df)) + 1.0


def apply_idf(Z, weights):
    """Z with feature k scaled by weights[k]."""
    return Z * weights
