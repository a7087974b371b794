"""Cold starts: where the first queries go when no positive is known yet.

With no labels LAS's f equals pi everywhere and the search would propose the lowest
indices; after a few negatives it explores away from them, blindly. What a person knows
gives a better start (docs/sessions.md, "Starting from what you know"):

- ``ids``: known positives. They are told to the engine as labels (they ARE labels: the
  engine's f, J and queries are then exactly those of a dense ASG told the same labels).
- ``vector``: a feature vector (an example's embedding, a prototype): the first queries are
  the points most similar to it under the linear similarity x_i . v, best first.
- ``keyword``: the rows whose source record has the words in a text column (a store made
  by `bigsearch ingest` from CSV / TSV / Parquet keeps the records): the first queries are
  drawn from them, the engine's best (highest f) first.
- ``labels``: the decisions the store holds (its file's label column: a pilot screening, a
  review's earlier update), told as the session's first labels. For sessions: in a
  simulation the stored labels are the answers.

A vector or a keyword only chooses *which points are asked*, until the first positive
answer; nothing is told to the engine but the oracle's answers, so every score stays
exact. After the first positive the engine's own choice takes over: its scores are then
informative, which the vector's similarity or the keyword's match are not beyond a guess.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import LabelError, ParameterError
from ...storage.encoding import decode
from ...storage.format import DISPLAY_ATTR, RECORDS_NAME
from ..core.select import Ranked

STRATEGIES = ("ids", "vector", "keyword", "labels")
PYTHON_FORMS = ("ids", "vector", "keyword")  # the strategies also given as {name: value}
VECTOR_CANDIDATES = 1000  # points kept, most similar first: the seed's queries until a positive
BLOCK_ROWS = 1 << 16  # rows of ids or records read at a time


@dataclass(frozen=True)
class StartFrom:
    """A resolved start: ``positives`` to tell (ids), ``told`` (rows, labels) to tell
    (labels), or ``candidates`` to ask first, in the order given (``ordered``: vector) or by
    the engine's f (keyword)."""

    strategy: str
    source: str
    positives: np.ndarray | None = None
    candidates: np.ndarray | None = None
    ordered: bool = True
    told: tuple[np.ndarray, np.ndarray] | None = None

    def labels_to_tell(self) -> tuple[list[int], list[Any]] | None:
        """(rows, labels) that start the session as its first label group, or None."""
        if self.told is not None:
            return self.told[0].tolist(), self.told[1].tolist()
        if self.positives is not None:
            return self.positives.tolist(), [1] * len(self.positives)
        return None

    def describe(self) -> dict[str, Any]:
        """What a session or a results file records about it."""
        out: dict[str, Any] = {"strategy": self.strategy, "source": self.source}
        if self.positives is not None:
            out["positives"] = self.positives.tolist()
        if self.told is not None:
            values = self.told[1]
            out.update(
                told=int(len(values)),
                positive=int(np.count_nonzero(values == 1)),
                negative=int(np.count_nonzero(values == 0)),
            )
        if self.candidates is not None:
            out.update(candidates=int(len(self.candidates)), ordered=self.ordered)
        return out


def labels_told(described: dict[str, Any] | None) -> int:
    """How many labels a start told (the session's first group), from what
    :meth:`StartFrom.describe` recorded: the known positives of ``ids``, or ``labels``'."""
    described = described or {}
    return len(described.get("positives") or []) + described.get("told", 0)


def resolve_start(store: Any, start_from: str | dict | StartFrom | None) -> StartFrom | None:
    """A :class:`StartFrom` from a spec string (see :func:`parse_start`), from Python
    values ``{"ids": [...]}``, ``{"vector": array}`` or ``{"keyword": (column, words)}``,
    or as given."""
    if start_from is None or isinstance(start_from, StartFrom):
        return start_from
    if isinstance(start_from, dict):
        if len(start_from) != 1 or next(iter(start_from)) not in PYTHON_FORMS:
            raise ParameterError(
                f"start_from: give one of {{'ids': [...]}}, {{'vector': array}}, "
                f"{{'keyword': (column, words)}} or 'labels', got keys {sorted(start_from)}"
            )
        ((kind, value),) = start_from.items()
        if kind == "ids":
            return from_ids(store, list(value), source="ids")
        if kind == "vector":
            return from_vector(store, np.asarray(value), source="vector")
        column, words = value
        return from_keyword(store, column, words, source=f"keyword:{column}={words}")
    return parse_start(store, start_from)


def parse_start(store: Any, spec: str) -> StartFrom:
    """``ids:A,B,C`` (or ``ids:FILE``, one id per line), ``vector:FILE.npy`` or
    ``keyword:COLUMN=WORDS`` -> a :class:`StartFrom` resolved on ``store``."""
    strategy, sep, value = str(spec).partition(":")
    if strategy == "labels" and not value:
        return from_stored_labels(store)
    if not sep or strategy not in STRATEGIES or not value or strategy == "labels":
        raise ParameterError(
            f"start_from {spec!r}: give ids:ID,ID,... (or ids:FILE), vector:FILE.npy, keyword:COLUMN=WORDS or labels"
        )
    if strategy == "ids":
        path = Path(value)
        tokens = path.read_text().split() if path.is_file() else value.split(",")
        return from_ids(store, [t.strip() for t in tokens if t.strip()], source=spec)
    if strategy == "vector":
        try:
            vector = np.load(value, allow_pickle=False)
        except (OSError, ValueError) as e:
            raise ParameterError(f"start_from {spec!r}: cannot read {value} as a .npy vector ({e})") from None
        return from_vector(store, vector, source=spec)
    column, sep, words = value.partition("=")
    if not sep or not column or not words.strip():
        raise ParameterError(f"start_from {spec!r}: give keyword:COLUMN=WORDS, e.g. keyword:title=quantum")
    return from_keyword(store, column, words, source=spec)


def from_stored_labels(store: Any) -> StartFrom:
    """The store's labels (ingest --label-column: the decisions its file holds), every
    labeled row told as it is."""
    y = store.labels()
    if y is None:
        raise LabelError(
            f"start_from labels: {store.path} has no labels: ingest its file again with its label "
            "column to keep its decisions (docs/ingest.md, Labels)"
        )
    rows = np.flatnonzero(y >= 0)
    if not len(rows):
        raise LabelError(f"start_from labels: {store.path} has labels, but every row is unlabeled (-1)")
    return StartFrom("labels", "labels", told=(rows, np.asarray(y)[rows]))


def from_ids(store: Any, ids: list[Any], source: str = "ids") -> StartFrom:
    """Known positives by the store's ids (by row index when the store has no ids)."""
    if not ids:
        raise ParameterError("start_from ids: no ids given")
    stored = store.ids(np.arange(min(store.n, 1))) if store.n else None
    if stored is None:
        indices = [_row_index(t, store.n) for t in ids]
    else:
        indices = _indices_of_ids(store, [str(t) for t in ids])
    return StartFrom("ids", source, positives=np.array(sorted(set(indices)), np.int64))


def _row_index(token: Any, n: int) -> int:
    try:
        i = int(token)
    except (TypeError, ValueError):
        raise LabelError(f"start_from ids: {token!r} is not a row index, and the store has no ids to match") from None
    if not 0 <= i < n:
        raise LabelError(f"start_from ids: index {i} is out of range: the store has {n} points (0..{n - 1})")
    return i


def _indices_of_ids(store: Any, wanted: list[str]) -> list[int]:
    """Row indices of the given ids, reading the ids a block at a time."""
    where: dict[str, int] = {}
    todo = set(wanted)
    for a in range(0, store.n, BLOCK_ROWS):
        block = store.ids(np.arange(a, min(a + BLOCK_ROWS, store.n)))
        for k, value in enumerate(block):
            key = value.decode() if isinstance(value, bytes) else str(value)
            if key in todo and key not in where:
                where[key] = a + k
        if len(where) == len(todo):
            break
    missing = [t for t in wanted if t not in where]
    if missing:
        raise LabelError(f"start_from ids: {len(missing)} id(s) not in the store, e.g. {missing[0]!r}")
    return [where[t] for t in wanted]


def from_vector(store: Any, vector: np.ndarray, source: str = "vector", keep: int = VECTOR_CANDIDATES) -> StartFrom:
    """The ``keep`` points most similar to ``vector`` (x_i . v, float64), best first;
    one pass over X, chunk by chunk."""
    v = np.asarray(vector, np.float64)
    if v.ndim == 2 and 1 in v.shape:
        v = v.reshape(-1)  # a row or a column vector
    if v.shape == (store.r - 1,) and _ends_with_bias(store):
        v = np.append(v, 0.0)  # x_i . [v, c] = u_i . v + c: any c ranks alike, so the source's width will do
    if v.shape != (store.r,):
        raise ParameterError(
            f"start_from vector: expected {store.r} values, one per feature of the store (or one fewer "
            f"before the constant feature ingest's bias appends), got shape {np.shape(vector)}"
        )
    if not np.all(np.isfinite(v)):
        raise ParameterError("start_from vector: it has a non-finite value (NaN or inf)")
    best_idx, best_sim = np.empty(0, np.int64), np.empty(0, np.float64)
    for j in range(store.n_chunks):
        a, _ = store.chunks[j]
        with store.chunk(j) as x:
            sim = decode(x) @ v
        idx = np.concatenate([best_idx, a + np.arange(len(sim))])
        allsim = np.concatenate([best_sim, sim])
        order = np.lexsort((idx, -allsim))[:keep]  # best first; ties: lowest index
        best_idx, best_sim = idx[order], allsim[order]
    return StartFrom("vector", source, candidates=best_idx, ordered=True)


def _ends_with_bias(store: Any) -> bool:
    """Whether ingest appended a constant feature last (--bias, no --rff after it)."""
    feat = store.attrs.get("featurization")
    feat = json.loads(feat) if isinstance(feat, str) else feat
    return bool(feat) and list(feat.get("steps", []))[-1:] == ["bias"]


def from_keyword(store: Any, column: str, words: str, source: str = "keyword") -> StartFrom:
    """The rows whose record's ``column`` contains every word of ``words`` (case-folded,
    whole words); the engine orders them."""
    spec = store.attrs.get(DISPLAY_ATTR)
    spec = json.loads(spec) if isinstance(spec, str) else spec
    if not spec or spec.get("kind") != "fields":
        raise ParameterError(
            f"start_from keyword: {store.path} keeps no source records (ingest keeps them for "
            "CSV, TSV, Parquet and LIBSVM inputs); use ids or a vector"
        )
    if column not in spec["fields"]:
        raise ParameterError(
            f"start_from keyword: no column {column!r} in the records (columns: {', '.join(map(str, spec['fields']))})"
        )
    patterns = [re.compile(rf"\b{re.escape(w)}\b", re.IGNORECASE) for w in words.split()]
    hits = []
    for a in range(0, store.n, BLOCK_ROWS):
        rows = np.arange(a, min(a + BLOCK_ROWS, store.n))
        for k, text in enumerate(store.read_per_row(RECORDS_NAME, rows)):
            value = str(json.loads(text.decode() if isinstance(text, bytes) else str(text)).get(column, ""))
            if all(p.search(value) for p in patterns):
                hits.append(a + k)
    if not hits:
        raise ParameterError(f"start_from keyword: no record has {words!r} in column {column!r}")
    return StartFrom("keyword", source, candidates=np.array(hits, np.int64), ordered=False)


def seeding(start: StartFrom | None, labels: np.ndarray) -> bool:
    """Whether the start still chooses the queries: it has candidates, none of them is
    all labeled, and no positive is known yet."""
    if start is None or start.candidates is None or np.any(labels >= 1):
        return False
    return bool(np.any(labels[start.candidates] < 0))


def seeded_top(search: Any, start: StartFrom | None, k: int) -> Ranked:
    """The k next points to ask, best first, with the engine's selection scores: the
    start's unlabeled candidates while :func:`seeding`, then the engine's own ranking."""
    labels = search.labels
    if not seeding(start, labels):
        return search.top(k)
    assert start is not None and start.candidates is not None
    free = start.candidates[labels[start.candidates] < 0]
    f = getattr(search, "f", None)  # random search has no scores: index order
    if not start.ordered and f is not None:
        # highest f first; f equal to 12 digits (as with no label, where every f is pi up
        # to rounding) is a tie, broken by the lowest index, so the order is reproducible
        free = free[np.lexsort((free, -np.round(f[free], 12)))]
    chosen = free[:k].tolist()
    if len(chosen) < k:  # the candidates run out: the engine's best fill up
        more, _ = search.top(min(k + len(chosen), search.n - search.n_labeled))
        taken = set(chosen)
        chosen += [int(i) for i in more if int(i) not in taken][: k - len(chosen)]
    index = np.array(chosen, np.int64)
    return Ranked(index, np.full(len(index), np.nan) if f is None else np.asarray(f, np.float64)[index])
