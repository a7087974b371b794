"""Labels: from a label column (or labels beside the features) to y in {1, 0, -1}, and
the subsampling of positives to a target prevalence.

Rules, so that a mistake is an error rather than a silent wrong y:
- with --positive: a value equal to one of them is 1; an empty or missing value is -1
  (unknown); any other value is 0. Numeric columns compare numerically ("1" = 1.0).
- without --positive: numeric labels must be 1 (positive) or 0 / -1 (negative), the
  two usual binary conventions; text labels need --positive. Labels of an input store
  (its y) are kept as they are.
"""

from dataclasses import dataclass

import numba
import numpy as np

from ..errors import InputError, ParameterError
from .columns import text_values

MAX_VALUES = 20


@dataclass(frozen=True)
class LabelRule:
    column: int | None           # index of the label column, None: labels beside the features
    name: str                    # for messages
    numeric: bool
    positives: tuple = ()
    stored: bool = False         # the labels are an input store's y

    def __post_init__(self):
        if not self.positives and not self.numeric and not self.stored:
            raise ParameterError(f"label column {self.name} holds text; say which values are positive "
                                 "with labels.positive VALUE (repeatable)")
        if self.numeric and self.positives:
            bad = [p for p in self.positives if _number(p) is None]
            if bad:
                raise ParameterError(f"labels.positive {bad[0]!r} is not a number, but label column "
                                     f"{self.name} holds numbers")


def _number(text):
    try:
        return float(text)
    except ValueError:
        return None


def raw_labels(block, rule):
    """The block's label values: a NumPy vector (numeric) or a pyarrow string array."""
    if rule.column is None:
        values = block.labels
        if values is None:
            raise InputError(f"{block.reader.path}: no labels for these rows")
        return np.asarray(values, dtype=np.float64) if rule.numeric else values
    if rule.numeric:
        col = block.column(rule.column)
        return col.to_numpy(zero_copy_only=False).astype(np.float64) if hasattr(col, "to_numpy") \
            else np.asarray(col, np.float64)
    return text_values(block, rule.column)


def label_block(block, rule):
    """(y int8, a few distinct values seen as text, the positives that occurred)."""
    values = raw_labels(block, rule)
    if rule.numeric:
        return _numeric_labels(block, rule, values)
    return _text_labels(rule, values)


def _numeric_labels(block, rule, values):
    known = ~np.isnan(values)
    seen = {f"{v:g}" for v in np.unique(values[known])[:MAX_VALUES]}
    if rule.positives:
        pos = np.array([_number(p) for p in rule.positives])
        is_pos = np.isin(values, pos)
        y = np.where(is_pos, 1, np.where(known, 0, -1)).astype(np.int8)
        matched = {p for p, v in zip(rule.positives, pos) if np.any(values == v)}
        return y, seen, matched
    bad = known & ~np.isin(values, (-1, 0, 1))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InputError(f"{block.where(i)}: label {values[i]:g} is not binary (1, or 0 / -1); "
                         "say which values are positive with labels.positive VALUE")
    if rule.stored:  # a store's own y: -1 is unknown
        y = np.where(known, values, -1)
    else:
        y = np.where(values == 1, 1, np.where(known, 0, -1))
    return y.astype(np.int8), seen, {"1"} if np.any(values == 1) else set()


def _text_labels(rule, values):
    import pyarrow as pa
    import pyarrow.compute as pc
    positives = pa.array(list(rule.positives), pa.string())
    is_pos = pc.fill_null(pc.is_in(values, value_set=positives), False).to_numpy(zero_copy_only=False)
    missing = pc.fill_null(pc.equal(values, ""), True).to_numpy(zero_copy_only=False)
    y = np.where(is_pos, 1, np.where(missing, -1, 0)).astype(np.int8)
    distinct = pc.unique(values.drop_null()).to_pylist()
    return y, set(sorted(distinct)[:MAX_VALUES]), set(rule.positives) & set(distinct)


# -- subsampling positives -------------------------------------------------------------
class PositiveSubsample:
    """Keep k of the n_pos positives, chosen uniformly at random, so that the positives
    make up ``prevalence`` of the labeled rows; every other row is kept.

    Selection sampling (Knuth's Algorithm S): the i-th positive is kept with probability
    (still needed) / (still to come), one uniform draw per positive in file order, so the
    choice depends only on the seed, not on how the rows are cut into blocks.
    """

    def __init__(self, prevalence, seed, n_pos, n_neg):
        self.prevalence, self.seed = prevalence, seed
        self.n_pos, self.n_neg = n_pos, n_neg
        self.k = int(round(prevalence / (1 - prevalence) * n_neg))
        current = n_pos / max(1, n_pos + n_neg)
        if self.k > n_pos:
            raise ParameterError(f"prevalence {prevalence} is above the data's share of positives "
                                 f"({current:.4f}: {n_pos:,} positives, {n_neg:,} negatives); "
                                 "ingest only subsamples positives")
        if self.k < 1:
            raise ParameterError(f"prevalence {prevalence} keeps no positive of {n_pos:,} "
                                 f"(with {n_neg:,} negatives)")
        self.rng = np.random.default_rng([seed, 0])
        self.need, self.left = self.k, n_pos

    def keep(self, y):
        """Boolean mask of the rows of this block to keep (call blocks in file order)."""
        mask = np.ones(len(y), bool)
        pos = np.flatnonzero(y == 1)
        chosen, self.need, self.left = _select(self.rng.random(len(pos)), self.need, self.left)
        mask[pos[~chosen]] = False
        return mask

    def describe(self):
        return {"prevalence": self.prevalence, "seed": self.seed, "positives_kept": self.k,
                "positives_in_input": self.n_pos, "negatives": self.n_neg,
                "method": "selection sampling (Knuth's Algorithm S), numpy default_rng([seed, 0])"}


@numba.njit(cache=True)
def _select(u, need, left):
    chosen = np.zeros(len(u), np.bool_)
    for i in range(len(u)):
        if left > 0 and u[i] * left < need:
            chosen[i] = True
            need -= 1
        left -= 1
    return chosen, need, left
