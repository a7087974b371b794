"""The options of an ingest, in four frozen groups validated when they are made.

``ingest(sources, out, source=..., labels=..., features=..., output=...)`` takes one of
each (the defaults when left out); the CLI builds them from its flags. A new option goes
into the group it belongs to, with its check in that group's ``__post_init__``, so a bad
value fails before any file is opened.

- :class:`SourceOptions`: how inputs are read (format, CSV dialect, HDF5/Zarr dataset,
  LIBSVM width, block size, Excel sheet).
- :class:`LabelOptions`: where labels come from, which values are positive, subsampling.
- :class:`FeatureOptions`: which columns, how they are encoded, normalize / bias / RFF.
- :class:`OutputOptions`: the store written (format, chunks, dtype, codec, overwrite).
"""

import math
from dataclasses import dataclass, fields

from ..errors import ParameterError
from ..storage.encoding import ENCODINGS
from ..storage.registry import STORE_FORMATS, store_codecs

# Text read per parser call (docs/ingest.md has the measurements behind it).
BLOCK_BYTES = 1 << 20
CODECS = store_codecs()         # every codec some store format writes
DTYPES = ("float32", "float64")
# A title's words count three times beside the other text columns: a title says what a record
# is about in a few words. Measured (docs/screening.md, "The features: the title counted three
# times"): on the given screening set, counted 1, 2, 3, 4 times, 518, 498, 491, 503 records read
# to find 95% of the inclusions (in process); the benchmark 527 once, 497 three times.
TITLE_WEIGHT = 3


def _as_tuple(group, *names):
    """Sequences given as lists (or a single string) become tuples, so groups hash and compare."""
    for name in names:
        value = getattr(group, name)
        value = (value,) if isinstance(value, (str, int)) else tuple(value)
        object.__setattr__(group, name, value)


def _one_of(name, value, choices):
    if value is not None and value not in choices:
        raise ParameterError(f"{name} {value!r} is not one of {', '.join(choices)}")


def _at_least(name, value, low):
    if value is not None and not value >= low:
        raise ParameterError(f"{name} must be at least {low}, got {value}")


class _Group:
    def as_dict(self):
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True)
class SourceOptions(_Group):
    format: str | None = None         # None: detected per file (readers/__init__.py)
    delimiter: str | None = None      # CSV; None: detected
    header: bool | None = None        # CSV; None: detected
    names: tuple = ()                 # CSV without a header: the columns' names (else a NAME.names file's)
    dataset: str | None = None        # HDF5/Zarr input: the 2-D dataset (None: X)
    n_features: int | None = None     # LIBSVM; None: found by a first pass
    block_bytes: int = BLOCK_BYTES
    sheet: str | None = None          # Excel: the sheet to read (None: the first)

    def __post_init__(self):
        from .readers import READERS
        _as_tuple(self, "names")
        _one_of("source format", self.format, tuple(READERS))
        _at_least("n_features", self.n_features, 1)
        _at_least("block_bytes", self.block_bytes, 1)
        if self.delimiter is not None and len(self.delimiter) != 1:
            raise ParameterError(f"delimiter {self.delimiter!r}: give one character")


@dataclass(frozen=True)
class LabelOptions(_Group):
    files: tuple = ()                 # labels files, one per input, in order
    column: str | int | None = None   # the label column (name, or 0-based index)
    positive: tuple = ()              # values that mean positive
    prevalence: float | None = None   # subsample positives to this prevalence
    seed: int = 0                     # of the subsampling

    def __post_init__(self):
        _as_tuple(self, "files", "positive")
        object.__setattr__(self, "files", tuple(str(f) for f in self.files))
        if self.prevalence is not None and not 0 < self.prevalence < 1:
            raise ParameterError(f"prevalence must be in (0, 1), got {self.prevalence}")


# Options of one feature map, and the option that turns the map on: set without it, they
# would be ignored silently.
_APPLIES_ONLY_WITH = (("counts", False, "smiles_column"), ("fingerprint", "atompair", "smiles_column"),
                      ("gamma", 1.0, "rff"), ("minmax_buckets", 8, "minmax"), ("minmax_power", 1, "minmax"),
                      ("text_dim", 0, "text_columns"), ("text_projection", "svd", "text_columns"),
                      ("ngram_max", 2, "text_columns"), ("text_sample", 20_000, "text_columns"),
                      ("title_weight", TITLE_WEIGHT, "text_columns"), ("drop_duplicates", False, "text_columns"))


@dataclass(frozen=True)
class FeatureOptions(_Group):
    categorical: tuple = ()           # columns to one-hot encode (names or indices)
    drop: tuple = ()                  # columns to leave out
    bins: int | None = None           # K quantile bins per numeric column
    normalize: bool = False
    bias: bool = False
    rff: int | None = None            # D random Fourier features
    gamma: float = 1.0                # of the RBF kernel approximated by rff
    seed: int = 0                     # of the rff weights and the minmax map
    smiles_column: str | int | None = None   # a SMILES column turned into a fingerprint
    fingerprint: str = "atompair"     # atompair|morgan[:BITS] (ingest/fingerprints.py)
    counts: bool = False              # count fingerprints instead of bits
    idf: bool = False                 # inverse document frequency weights (ingest/weighting.py)
    minmax: int | None = None         # D draws of the MinMax-kernel feature map (ingest/minmax.py)
    minmax_buckets: int = 8           # B buckets per draw: D * B features
    minmax_power: int = 1             # p: the map approximates K^p
    text_columns: tuple = ()          # columns joined into one document, made into text features (ingest/text.py)
    text_dim: int = 0                 # text features after the projection; 0: auto (ingest/text.py)
    text_projection: str = "svd"      # svd | hashing
    ngram_max: int = 2                # word n-grams up to this length
    text_sample: int = 20_000         # documents the svd projection is fitted on
    title_weight: int = TITLE_WEIGHT  # times the title's words count beside the other text columns
    keep: tuple = ()                  # columns kept as features though they look like identifiers or free text
    drop_duplicates: bool = False     # text: leave out the records repeating an earlier one (ingest/duplicates.py)

    def __post_init__(self):
        _as_tuple(self, "categorical", "drop", "text_columns", "keep")
        if self.text_columns:
            self.text_spec                # checks the text options
        if not 1 <= self.title_weight <= 10:
            raise ParameterError(f"title_weight must be 1 to 10 (times a title's words count), got {self.title_weight}")
        if self.bins is not None and self.bins < 2:
            raise ParameterError(f"bins {self.bins}: quantile binning needs K >= 2")
        if self.rff is not None and self.rff < 1:
            raise ParameterError(f"rff {self.rff}: the number of random Fourier features needs D >= 1")
        if self.rff and not 0 < self.gamma < math.inf:
            raise ParameterError(f"gamma {self.gamma}: the RBF kernel needs a finite value > 0")
        if self.smiles_column is not None:
            from .fingerprints import parse_spec
            parse_spec(self.fingerprint, self.counts)
        if self.minmax is not None:
            from .minmax import check_minmax
            check_minmax(self.minmax_spec)
        if self.minmax and self.rff:
            raise ParameterError("minmax and rff are two feature maps; choose one")
        for option, default, needs in _APPLIES_ONLY_WITH:
            if getattr(self, option) != default and getattr(self, needs) in (None, ()):
                raise ParameterError(f"{option} applies only with {needs} "
                                     "(without it, it would be ignored)")

    @property
    def text_spec(self):
        """How the text columns become features (ingest/text.py), or None."""
        if not self.text_columns:
            return None
        from .text import TextSpec
        return TextSpec(columns=tuple(str(c) for c in self.text_columns), ngram_max=self.ngram_max, dim=self.text_dim,
                        projection=self.text_projection, sample=self.text_sample, seed=self.seed)

    @property
    def fingerprint_spec(self):
        """The fingerprint of the SMILES column, or None."""
        if self.smiles_column is None:
            return None
        from .fingerprints import parse_spec
        return parse_spec(self.fingerprint, self.counts)

    @property
    def minmax_spec(self):
        """What the plan records about the MinMax feature map, or None."""
        if self.minmax is None:
            return None
        return {"samples": int(self.minmax), "buckets": int(self.minmax_buckets), "power": int(self.minmax_power),
                "seed": int(self.seed)}

    @property
    def rff_spec(self):
        """What the plan records about the random Fourier features, or None."""
        return {"dim": int(self.rff), "gamma": float(self.gamma), "seed": int(self.seed)} if self.rff else None


@dataclass(frozen=True)
class OutputOptions(_Group):
    format: str | None = None         # a store format; None: from OUT's name (storage.store_kind_for)
    chunk_rows: int | None = None     # None: chunks of about 32 MiB
    dtype: str = "float32"
    codec: str = "none"
    overwrite: bool = False
    encoding: str | None = None       # None: dtype; else float32, float64, float16, int8, binary
    cluster_order: int | None = None  # rows grouped by k-means cluster, k clusters (0: default k)

    def __post_init__(self):
        _one_of("output format", self.format, tuple(STORE_FORMATS))
        _one_of("dtype", self.dtype, DTYPES)
        _one_of("encoding", self.encoding, ENCODINGS)
        _one_of("codec", self.codec, CODECS)
        _at_least("chunk_rows", self.chunk_rows, 1)
        _at_least("cluster_order", self.cluster_order, 0)
