"""Statistics of the first pass, as plain functions over blocks of rows.

``block_stats`` summarizes one block and ``merge_stats`` combines two summaries; the
result does not depend on how the rows were cut into blocks or in which order the
summaries were merged, so the pass can be mapped over workers and reduced anywhere.

Quantiles come from a value-count summary per column: exact counts of the distinct
values while a column has at most ``SKETCH_CAP`` of them; past that, values are
rounded down in magnitude to fewer mantissa bits (in steps of 4) until they fit. The
rounding level is the smallest that fits the whole column, whatever the blocking, and
the same rounding is applied to values when they are binned, so bins are consistent.
"""

from collections import Counter

import numpy as np

from .columns import documents, numeric_matrix, text_values
from .duplicates import row_keys
from .labels import label_block
from .text import block_text_stats, merge_text_stats
from .weighting import document_frequency

SKETCH_CAP = 1 << 14
LEVEL_STEP = 4
MAX_LABEL_VALUES = 20
VOCABULARY_CAP = 10_000      # distinct values counted per categorical column (then: too many to encode)


def block_stats(block, columns, label_rule, nonzero=None, texts=None, keys=None):
    """Summary of one block: rows, label counts, a vocabulary (and the characters) per
    categorical column and a value-count sketch per binned column. ``columns`` maps column
    index -> kind. ``nonzero`` (for --idf) maps the indices of number and fingerprint
    columns to None or their FingerprintSpec: per such column, how many rows have each
    feature non-zero. ``texts`` maps a text column's index to (its source columns, its
    TextSpec): the terms' document counts and the sample (ingest/text.py). ``keys`` (the DOI
    column or None, the text columns): the rows' keys, for the driver to find the records
    that repeat an earlier one ("keys", not merged: ingest/duplicates.py)."""
    stats = {"rows": len(block), "labels": Counter(), "label_values": set(), "matched": set(),
             "vocab": {}, "chars": {}, "sketch": {}, "df": {}, "text": {}}
    if keys is not None:
        stats["keys"] = row_keys(block, *keys)
    for j, (sources, spec) in (texts or {}).items():
        stats["text"][j] = block_text_stats(documents(block, sources, spec.column_weights), spec)
    for j, spec in (nonzero or {}).items():
        stats["df"][j] = document_frequency(encode_column(block, j, spec))
    if label_rule is not None:
        y, stats["label_values"], stats["matched"] = label_block(block, label_rule)
        stats["labels"] = Counter({int(k): int(v) for k, v in zip(*np.unique(y, return_counts=True))})
    binned = [j for j, kind in columns.items() if kind == "bins"]
    if binned:
        values = numeric_matrix(block, binned)
        for i, j in enumerate(binned):
            stats["sketch"][j] = sketch(values[:, i])
    for j, kind in columns.items():
        if kind == "onehot":
            values = text_values(block, j)
            stats["vocab"][j] = vocabulary(values)
            stats["chars"][j] = _characters(values)
    return stats


def _characters(values):
    import pyarrow.compute as pc
    return int(pc.sum(pc.utf8_length(values.drop_null())).as_py() or 0)


def merge_stats(a, b):
    return {
        "rows": a["rows"] + b["rows"],
        "labels": a["labels"] + b["labels"],
        "label_values": set(sorted(a["label_values"] | b["label_values"])[:MAX_LABEL_VALUES]),
        "matched": a["matched"] | b["matched"],
        "vocab": {j: _merged_vocabulary(a["vocab"].get(j, Counter()), b["vocab"].get(j, Counter()))
                  for j in a["vocab"].keys() | b["vocab"].keys()},
        "chars": {j: a["chars"].get(j, 0) + b["chars"].get(j, 0) for j in a["chars"].keys() | b["chars"].keys()},
        "text": {j: merge_text_stats(a["text"][j], b["text"][j]) for j in a["text"]},
        "df": {j: a["df"][j] + b["df"][j] for j in a["df"]},
        "sketch": {j: merge_sketches(a["sketch"][j], b["sketch"][j]) if j in a["sketch"] and j in b["sketch"]
                   else a["sketch"].get(j) or b["sketch"][j]
                   for j in a["sketch"].keys() | b["sketch"].keys()},
    }


def encode_column(block, j, spec=None, out=None):
    """Column j's features: its numbers (m, 1), or the fingerprints of its SMILES (written
    into ``out``, zeros, when given)."""
    if spec is None:
        return numeric_matrix(block, [j])
    from .fingerprints import fingerprints
    return fingerprints(text_values(block, j).to_pylist(), spec, block.where, out)


def _merged_vocabulary(a, b):
    """Two vocabularies' counts added; past VOCABULARY_CAP values a column is free text or
    an identifier (featurize drops it): only its number of distinct values is kept, as
    None (more than the cap)."""
    if a is None or b is None:
        return None
    merged = a + b
    return None if len(merged) > VOCABULARY_CAP else merged


def vocabulary(values):
    """Counts of the non-null values of a pyarrow array."""
    import pyarrow.compute as pc
    vc = pc.value_counts(values.drop_null())
    return Counter(dict(zip(vc.field("values").to_pylist(), vc.field("counts").to_pylist())))


# -- quantile sketches: (level, sorted distinct values, counts) ---------------------------
def coarsen(x, level):
    """Round float64 values toward zero to 52 - level mantissa bits (monotone in x)."""
    x = np.ascontiguousarray(x, dtype=np.float64)
    if level == 0:
        return x
    return (x.view(np.int64) & ~np.int64((1 << level) - 1)).view(np.float64)


def sketch(x):
    values, counts = np.unique(np.asarray(x, np.float64), return_counts=True)
    return _fit(0, values, counts)


def merge_sketches(a, b):
    level = max(a[0], b[0])
    values = np.concatenate([coarsen(a[1], level), coarsen(b[1], level)])
    counts = np.concatenate([a[2], b[2]])
    values, counts = _sum_counts(values, counts)
    return _fit(level, values, counts)


def _sum_counts(values, counts):
    distinct, inverse = np.unique(values, return_inverse=True)
    return distinct, np.bincount(inverse, weights=counts).astype(np.int64)


def _fit(level, values, counts):
    while len(values) > SKETCH_CAP:
        level += LEVEL_STEP
        values, counts = _sum_counts(coarsen(values, level), counts)
    return level, values, counts


def quantile_edges(sk, k):
    """Inner cut points for k quantile bins: bin(x) = number of edges below x, so the bins
    are (-inf, e1], (e1, e2], ..., (e_last, max]. Repeated cut points and cut points at the
    maximum are dropped, so every bin holds data (a column mostly 0 gets fewer bins)."""
    _, values, counts = sk
    cum = np.cumsum(counts)
    targets = cum[-1] * np.arange(1, k) / k
    cuts = values[np.searchsorted(cum, targets, side="left")]
    return [float(v) for v in np.unique(cuts) if v < values[-1]]
