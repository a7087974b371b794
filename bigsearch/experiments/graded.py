"""Graded answers for simulated runs: a score per point mapped to a label in [0, 1].

``run --scores FILE --grade BEST,ZERO``: FILE holds one score per point of the store, in
store order (a .npy array, or text with one number per line); ``--scores FILE:COLUMN``
takes them from a column of a table (CSV, TSV, Parquet, ... as ingest reads it; COLUMN a
name or a 0-based index, as ingest's --label-column), e.g. the CSV the store was
ingested from, one row per point. A score at or beyond BEST
answers 1, at or beyond ZERO answers 0, linearly in between:

    y = clip((score - ZERO) / (BEST - ZERO), 0, 1)

so BEST < ZERO means lower scores are better (docking energies). Methods that take
graded labels (LAS, ASG, rf) are told y; the others, and the hit counts, use the stored
0/1 labels. E.g. for MolPAL's docking task: BEST = the top-1% score, ZERO = the top-10%
score (benchmarks/discovery.py).
"""

from pathlib import Path

import numpy as np

from ..errors import ParameterError


def grade(scores, best, zero):
    """The graded label of each score (float64 in [0, 1])."""
    if best == zero:
        raise ParameterError(f"graded BEST,ZERO {best},{zero}: BEST and ZERO must differ")
    return np.clip((np.asarray(scores, np.float64) - zero) / (best - zero), 0.0, 1.0)


def load_answers(path, best, zero, n):
    """Graded answers for a store of n points from the scores in ``path`` (a file, or
    FILE:COLUMN of a table); with best = "raw", the scores times the sign ``zero`` (+1:
    higher is better, -1: lower), targets for methods that regress them."""
    scores = np.asarray(read_scores(str(path)), np.float64).reshape(-1)
    if scores.shape != (n,):
        raise ParameterError(f"graded scores {path}: {scores.size} scores for a store of {n} points")
    if not np.all(np.isfinite(scores)):
        first = int(np.flatnonzero(~np.isfinite(scores))[0])
        raise ParameterError(f"graded scores {path}: score {first} is not finite")
    return scores * zero if best == "raw" else grade(scores, best, zero)


def is_raw(graded):
    """Whether ``graded`` (an experiment's) gives raw scores as targets, not graded labels."""
    return graded is not None and graded[1] == "raw"


def read_scores(spec):
    """The scores of ``--scores SPEC``: FILE (.npy, or one number per line), or FILE:COLUMN."""
    path, column = _file_and_column(spec)
    if column is not None:
        from ..ingest.columns import numeric_column

        return numeric_column(path, column, "graded scores", "scores")
    try:
        return np.load(path) if path.suffix == ".npy" else np.loadtxt(path, ndmin=1)
    except (OSError, ValueError) as e:
        raise ParameterError(
            f"graded scores {path}: cannot read one number per point ({e}); for a column of a table, give FILE:COLUMN"
        ) from None


def _file_and_column(spec):
    """(file, column or None): SPEC names a file, or FILE:COLUMN when SPEC is no file."""
    file, sep, column = spec.rpartition(":")
    if Path(spec).exists() or not sep or not file:
        return Path(spec), None
    if not column.strip():
        raise ParameterError(f"graded scores {spec}: say which column after ':' (a name or a 0-based index)")
    return Path(file), column
