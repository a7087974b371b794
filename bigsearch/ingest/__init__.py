"""Ingest: input files (CSV, TSV, LIBSVM, NumPy, HDF5, Zarr, IDX, Parquet) -> feature stores.

``options`` holds the four validated option groups of an ingest; ``readers`` turn each
format into blocks of rows (a registry of Reader classes that declare their
capabilities); ``columns`` reads numbers and text out of a block; ``stats`` summarizes blocks for the
first pass (vocabularies, quantile sketches, label counts); ``featurize`` encodes a
block and applies normalize, bias and random Fourier features; ``labels`` makes y and
subsamples positives; ``pipeline`` runs the passes and writes the store atomically;
``prepare`` applies the feature steps to an array held in memory.
See docs/ingest.md.
"""

from .options import CODECS, FeatureOptions, LabelOptions, OutputOptions, SourceOptions
from .pipeline import Progress, ingest
from .prepare_array import prepare
from .readers import FORMATS, READERS, detect_format, register_reader

__all__ = ["ingest", "prepare", "Progress", "SourceOptions", "LabelOptions", "FeatureOptions", "OutputOptions",
           "FORMATS", "READERS", "CODECS", "detect_format", "register_reader"]
