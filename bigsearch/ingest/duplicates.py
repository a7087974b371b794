"""Records that repeat an earlier one: the same work exported twice (a search run in several
databases, two exports merged), which a reviewer would otherwise screen twice.

A record repeats an earlier one when it has the same DOI, or the same text in every text
column (the title and the abstract, both present), compared without case, spaces and
punctuation (two databases' exports of one record differ in those). A record without an
abstract is compared by its DOI only: two editorials, two "Reply" letters share a title, not
a work. Records are compared by 64-bit hashes of these keys (a false match among a million
records has a probability of about 3e-8).

The first pass hashes each record's keys (``row_keys``, per block, wherever the block is
read); ``DuplicateFinder`` gathers them with the blocks' row offsets and names the rows
that repeat an earlier one, whatever the blocking; ``DuplicateFilter`` leaves those rows out
of the writing pass (``ingest --drop-duplicates``).
"""

import numpy as np

from ..kernels.text import GOLDEN
from .columns import text_values

DOI_PREFIXES = r"^(?i)(?:https?://(?:dx\.)?doi\.org/|doi:\s*)"


def row_keys(block, doi_column, text_columns):
    """(DOI keys, text keys) of a block's rows: uint64 hashes, 0 where a row has none."""
    import pyarrow.compute as pc

    doi = np.zeros(len(block), np.uint64)
    if doi_column is not None:
        doi = _hashes(pc.replace_substring_regex(text_values(block, doi_column), DOI_PREFIXES, ""), squeeze=False)
    texts = [_hashes(text_values(block, j), squeeze=True) for j in text_columns]
    return doi, _combined(texts, len(block))


def _hashes(values, squeeze):
    from ..kernels.text import record_hashes
    from .text import string_array, utf8_buffers

    return record_hashes(*utf8_buffers(string_array(values)), squeeze)


def _combined(hashes, n):
    """One key from every column's hash; 0 (none) where any column is empty."""
    if not hashes:
        return np.zeros(n, np.uint64)
    key = hashes[0].copy()
    for h in hashes[1:]:
        key = key * GOLDEN ^ h              # uint64 arithmetic wraps
    key = np.maximum(key, np.uint64(1))
    key[np.any([h == 0 for h in hashes], axis=0)] = 0
    return key


class DuplicateFinder:
    """The keys of every block of the first pass, then the rows repeating an earlier row."""

    def __init__(self):
        self.parts = []

    def add(self, offset, keys):
        self.parts.append((offset, keys))

    def repeats(self):
        """(rows, firsts): the global rows that repeat an earlier row, ascending, and for
        each the earliest row it repeats."""
        if not self.parts:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        rows = np.concatenate([offset + np.arange(len(k[0])) for offset, k in self.parts])
        first = rows.copy()
        for which in range(2):            # DOI, then text
            keys = np.concatenate([k[which] for _, k in self.parts])
            present = keys != 0
            _earliest(keys[present], rows[present], first, present)
        repeated = np.flatnonzero(first < rows)
        repeated = repeated[np.argsort(rows[repeated], kind="stable")]    # in row order, however the blocks came
        return rows[repeated], first[repeated]


def _earliest(keys, rows, first, where):
    """first[where] = min(first, the earliest row with the same key), in place."""
    if not len(keys):
        return
    order = np.lexsort((rows, keys))
    keys, rows = keys[order], rows[order]
    starts = np.r_[True, keys[1:] != keys[:-1]]
    head = rows[np.flatnonzero(starts)[np.cumsum(starts) - 1]]      # each key's earliest row
    positions = np.flatnonzero(where)[order]
    first[positions] = np.minimum(first[positions], head)


class DuplicateFilter:
    """Which rows of each block the writing pass keeps: all but ``rows`` (global, sorted)."""

    def __init__(self, rows):
        self.rows = np.asarray(rows, np.int64)

    def keep(self, offset, n):
        mask = np.ones(n, bool)
        a, b = np.searchsorted(self.rows, [offset, offset + n])
        mask[self.rows[a:b] - offset] = False
        return mask

    def __len__(self):
        return len(self.rows)
