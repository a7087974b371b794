"""Ingest: input files (CSV, TSV, LIBSVM, NumPy, HDF5, Zarr, IDX, Parquet) -> feature stores.

``readers`` turn each format into blocks of rows; ``stats`` summarizes blocks for the
first pass (vocabularies, quantile sketches, label counts); ``featurize`` encodes a
block and applies normalize, bias and random Fourier features; ``labels`` makes y and
subsamples positives; ``pipeline`` runs the passes and writes the store atomically.
See docs/ingest.md.
"""

from .pipeline import CODECS, Progress, ingest
from .readers import FORMATS, detect_format

__all__ = ["ingest", "Progress", "FORMATS", "CODECS", "detect_format"]
