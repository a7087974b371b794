"""Labels: from a label column (or labels beside the features) to y in {1, 0, -1}, and
the subsampling of positives to a target prevalence.

Rules, so that a mistake is an error rather than a silent wrong y:
- with --positive: a value equal to one of them is 1; an empty or missing value is -1
  (unknown); any other value is 0. Numeric columns compare numerically ("1" = 1.0).
- without --positive: numeric labels must be 1 (positive) or 0 / -1 (negative), the
  two usual binary conventions; text labels must be the words of one of the vocabularies
  reviewers use (``VOCABULARIES``: yes/no, included/excluded, ..., any case; empty:
  unknown), else an error lists the values and asks for --positive. ASReview's RIS notes
  (``ASReview_relevant``, ``_irrelevant``, ``_not_seen``: what `session export` writes) are
  one of them, read from whichever line of a record's notes holds one, so an export comes
  back with its decisions and a record not seen unlabeled (with --positive too: not seen is
  no decision). Labels of an input store (its y) are kept as they are.
"""

from dataclasses import dataclass

import numba
import numpy as np

from ..errors import InputError, ParameterError
from .columns import text_values

MAX_VALUES = 20
# The words a label column may hold without labels.positive, by vocabulary (compared trimmed and
# in lower case): 1 positive, 0 negative. An empty value is unknown (-1) in every one.
VOCABULARIES = {
    "1/0": {"1": 1, "0": 0},
    "yes/no": {"yes": 1, "no": 0, "y": 1, "n": 0},
    "true/false": {"true": 1, "false": 0},
    "included/excluded": {"included": 1, "excluded": 0, "include": 1, "exclude": 0},
    "relevant/irrelevant": {"relevant": 1, "irrelevant": 0},
    "ASReview RIS note": {"asreview_relevant": 1, "asreview_irrelevant": 0, "asreview_not_seen": -1},
}
WORDS = {word: (name, y) for name, words in VOCABULARIES.items() for word, y in words.items()}
KNOWN = (
    "1/0, yes/no, y/n, true/false, included/excluded, include/exclude, relevant/irrelevant (any case); "
    "ASReview's RIS notes ASReview_relevant, ASReview_irrelevant, ASReview_not_seen"
)
# a line of a record's notes (a RIS tag's values joined by newlines) that is one of ASReview's decisions
ASREVIEW_NOTE = r"(?im)^\s*(?P<note>asreview_(?:relevant|irrelevant|not_seen))\s*$"
NOT_SEEN = "asreview_not_seen"


@dataclass(frozen=True)
class LabelRule:
    column: int | None  # index of the label column, None: labels beside the features
    name: str  # for messages
    numeric: bool
    positives: tuple = ()
    stored: bool = False  # the labels are an input store's y

    @property
    def vocabulary(self):
        """True when text labels are read by their words (no labels.positive given)."""
        return not self.positives and not self.numeric and not self.stored

    def __post_init__(self):
        if self.numeric and self.positives:
            bad = [p for p in self.positives if _number(p) is None]
            if bad:
                raise ParameterError(
                    f"labels.positive {bad[0]!r} is not a number, but label column {self.name} holds numbers"
                )


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
        return (
            col.to_numpy(zero_copy_only=False).astype(np.float64)
            if hasattr(col, "to_numpy")
            else np.asarray(col, np.float64)
        )
    return text_values(block, rule.column)


def label_block(block, rule):
    """(y int8, a few distinct values seen as text, the positives that occurred)."""
    values = raw_labels(block, rule)
    if rule.numeric:
        return _numeric_labels(block, rule, values)
    values = _asreview_notes(values)
    if rule.vocabulary:
        return _vocabulary_labels(block, rule, values)
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
        raise InputError(
            f"{block.where(i)}: label {values[i]:g} is not binary (1, or 0 / -1); "
            "say which values are positive with labels.positive VALUE"
        )
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
    # ASReview_not_seen is no decision, whichever values are positive
    undecided = pc.or_(pc.equal(values, ""), pc.equal(pc.utf8_lower(values), NOT_SEEN))
    missing = pc.fill_null(undecided, True).to_numpy(zero_copy_only=False)
    y = np.where(is_pos, 1, np.where(missing, -1, 0)).astype(np.int8)
    distinct = pc.unique(values.drop_null()).to_pylist()
    return y, set(sorted(distinct)[:MAX_VALUES]), set(rule.positives) & set(distinct)


def _vocabulary_labels(block, rule, values):
    """Text labels read by their words (VOCABULARIES): an unknown word, or words of two
    vocabularies, is an error listing the values seen."""
    import pyarrow as pa
    import pyarrow.compute as pc

    words = pa.array(list(WORDS), pa.string())
    found = pc.index_in(pc.utf8_lower(values), value_set=words).to_numpy(zero_copy_only=False)
    empty = pc.fill_null(pc.equal(values, ""), True).to_numpy(zero_copy_only=False)
    distinct = sorted(pc.unique(values.drop_null()).to_pylist())
    unknown = np.flatnonzero(np.isnan(found.astype(np.float64)) & ~empty)
    if len(unknown):
        i = int(unknown[0])
        raise InputError(
            f"{block.where(i)}: label {values[i].as_py()!r} in label column {rule.name} is not a label "
            f"word bigsearch reads on its own ({KNOWN}; empty: unlabeled); values seen: "
            f"{_listed(distinct)}; say which values are positive with labels.positive VALUE "
            "(repeatable; the others are negative)"
        )
    vocabulary_of(distinct, rule.name, block.reader.path)
    ys = np.array([y for _, y in WORDS.values()], np.int8)
    index = np.where(empty, 0, np.nan_to_num(found.astype(np.float64))).astype(np.int64)
    y = np.where(empty, -1, ys[index]).astype(np.int8)
    return y, set(distinct[:MAX_VALUES]), set()


def _asreview_notes(values):
    """Each value that has a line of ASReview's decisions (among other notes: a RIS
    record's N1 values are joined by newlines) as that line; the others as they are."""
    import pyarrow as pa
    import pyarrow.compute as pc

    values = values.cast(pa.string()) if values.type != pa.string() else values
    note = pc.struct_field(pc.extract_regex(values, ASREVIEW_NOTE), [0])
    return pc.if_else(pc.is_valid(note), note, values)


def vocabulary_of(values, name, path):
    """(vocabulary, positive words, negative words, unlabeled words) of the label values
    ``values`` (all known words or empty); words of two vocabularies are an error naming
    them."""
    words = {v: WORDS[v.strip().lower()] for v in values if v.strip()}
    used = sorted({vocabulary for vocabulary, _ in words.values()})
    if len(used) > 1:
        raise InputError(
            f"{path}: label column {name} mixes the label words of {' and '.join(used)} (values seen: "
            f"{_listed(sorted(values))}); say which values are positive with labels.positive VALUE "
            "(repeatable; the others are negative)"
        )
    return (used[0] if used else None, *(sorted(v for v, (_, y) in words.items() if y == k) for k in (1, 0, -1)))


def _listed(values):
    shown = [repr(v) if v.strip() else "(empty)" for v in values[:MAX_VALUES]]
    return ", ".join(shown) + (", ..." if len(values) > MAX_VALUES else "")


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
            raise ParameterError(
                f"prevalence {prevalence} is above the data's share of positives "
                f"({current:.4f}: {n_pos:,} positives, {n_neg:,} negatives); "
                "ingest only subsamples positives"
            )
        if self.k < 1:
            raise ParameterError(f"prevalence {prevalence} keeps no positive of {n_pos:,} (with {n_neg:,} negatives)")
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
        return {
            "prevalence": self.prevalence,
            "seed": self.seed,
            "positives_kept": self.k,
            "positives_in_input": self.n_pos,
            "negatives": self.n_neg,
            "method": "selection sampling (Knuth's Algorithm S), numpy default_rng([seed, 0])",
        }


@numba.njit(cache=True)
def _select(u, need, left):
    chosen = np.zeros(len(u), np.bool_)
    for i in range(len(u)):
        if left > 0 and u[i] * left < need:
            chosen[i] = True
            need -= 1
        left -= 1
    return chosen, need, left
