"""Where a pruning's block caches live, decided once from ``backend.in_process``.

``CachesHere`` (the local backend: the per-point arrays are in this process) keeps one
cache over all of X here; a query reads blocks best bound first over all of X, each
block recomputed where its chunk is (``Backend.map_chunks``). ``CachesPerChunk`` (the
dask backend) keeps a cache per chunk in the chunk's state on its worker; a query is
one round trip returning each chunk's exact top k, merged here. The pruners of LAS,
WNAS and BLR say what their caches are and how a block is read (the method's math);
the placement does what depends on where the caches live, the same for all three:

- after a full pass, the caches reset (here: built the first time; per chunk: a new
  generation, which each chunk's step compares with its own);
- labels into the chunks' state (and, here, into the cache), and the news a cache must
  hear (a method's batches of labels or updates), heard now here or, per chunk, sent
  with the next query, numbered from the last full pass;
- a query's top k, and the rows it read counted as bytes of X read;
- where the workers find their slices of the summaries stored with the store.

Each operation takes the method's part for both placements (``here``: a function of
the cache; per chunk: a chunk step and its arguments); the placement runs the one that
applies, so the pruners never ask where they run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from ...backends import ChunkStep
from ..core.select import best_ranked
from .summaries import first_blocks, store_source


class Sent(NamedTuple):
    """What a per-chunk query step receives besides its method's arguments: the
    generation of the caches (it changes at each full pass), the news not sent yet
    ((number, *item), numbered from the last full pass) and how many were numbered."""

    generation: int
    news: list
    n_news: int


class ChunkTop(NamedTuple):
    """A chunk's part of a pruned query."""

    indices: np.ndarray  # global indices of its top k
    scores: np.ndarray
    rows_read: int  # rows of X the query read in this chunk


def labels_into_chunks(search: Any, idx: np.ndarray, lab: np.ndarray, apply: Callable[..., Any]) -> None:
    """``apply(state, idx, lab)`` on the chunks holding points ``idx`` (no read of X)."""
    store = search.store
    chunks = np.unique([store.chunk_of(i) for i in idx]).tolist()
    search.backend.map_state(apply, chunks, idx, lab)


def placement(search: Any) -> CachesHere | CachesPerChunk:
    """Where this search's pruning keeps its caches (from ``backend.in_process``)."""
    return CachesHere(search) if search.backend.in_process else CachesPerChunk(search)


class CachesHere:
    """One cache over all of X in this process (see the module)."""

    def __init__(self, search: Any) -> None:
        self.search = search
        self.cache: Any = None  # the pruning's cache over every block of X
        self.found = np.zeros(0, np.int64)  # (per chunk: the points the chunks returned last)
        self.n_news = 0  # news heard since the last full pass

    def status(self, text: str) -> str:
        return text

    def stored_slices(self, block_rows: int) -> None:
        """Where workers read their chunks' stored summaries: none here (the summaries
        are read whole, in this process)."""
        return None

    def after_full_pass(
        self,
        build: Callable[[], Any],
        reset: Callable[[Any], None],
        prepare: Callable[[], tuple[ChunkStep, tuple]] | None = None,
    ) -> None:
        """Every chunk's state is current: the cache built the first time (``build()``),
        then reset (``reset(cache)``). (``prepare`` is the workers' part.)"""
        if self.cache is None:
            self.cache = build()
        reset(self.cache)
        self.n_news = 0

    def tell(
        self, idx: np.ndarray, lab: np.ndarray, apply: Callable[..., Any], heard: Callable[[Any], None] | None = None
    ) -> None:
        """New labels into their chunks' state (``apply``), then into the cache (``heard(cache)``)."""
        labels_into_chunks(self.search, idx, lab, apply)
        if heard is not None:
            heard(self.cache)

    def hear(self, item: tuple, heard: Callable[[Any, tuple], None]) -> None:
        """News for the cache (a batch of labels, an update): heard now."""
        heard(self.cache, item)
        self.n_news += 1

    def top(
        self,
        k: int,
        here: Callable[[Any, int], tuple],
        step: ChunkStep | None = None,
        args: Callable[[], tuple] = tuple,
        lost: Callable[[], None] | None = None,
    ) -> tuple:
        """The k best points, (indices, scores), from ``here(cache, k)`` -> (indices,
        scores, rows read); the rows read counted. (``step``, ``args``, ``lost`` are the
        workers' part.)"""
        idx, sc, rows = here(self.cache, k)
        self.count(rows)
        return idx, sc

    def catch_up(
        self,
        here: Callable[[Any], int],
        step: ChunkStep | None = None,
        args: Callable[[], tuple] = tuple,
        lost: Callable[[], None] | None = None,
    ) -> int:
        """Every block brought up to date by ``here(cache)``: the rows it read (not counted)."""
        return here(self.cache)

    def read(self, step: ChunkStep, plan: dict, *args: Any) -> None:
        """Blocks recomputed where their chunks are: ``step(x, state, plan, *args)`` on
        each chunk of ``plan`` ({chunk: its part}), each chunk opened once."""
        self.search.backend.map_chunks(step, sorted(plan), plan, *args)

    def count(self, rows: int) -> None:
        self.search.count_read(int(rows) * self.search.store.bytes_per_point)


class CachesPerChunk:
    """A cache per chunk, in its state where it lives (see the module)."""

    def __init__(self, search: Any) -> None:
        self.search = search
        self.cache = None  # (none here: each chunk keeps its own)
        self.found = np.zeros(0, np.int64)  # the points the chunks returned at the last query
        self.generation = 0  # full passes the workers' caches were told of
        self.news: list = []  # (number, *item) not sent yet
        self.n_news = 0  # news numbered since the last full pass

    def status(self, text: str) -> str:
        return text + ", each worker pruning its own chunks"

    def stored_slices(self, block_rows: int) -> tuple:
        """Where each worker reads its chunks' slices of the summaries stored with the
        store: (the store's source, each chunk's first block)."""
        store = self.search.store
        return store_source(store), first_blocks(store.chunks, block_rows)

    def after_full_pass(
        self,
        build: Callable[[], Any] | None = None,
        reset: Callable[[Any], None] | None = None,
        prepare: Callable[[], tuple[ChunkStep, tuple]] | None = None,
    ) -> None:
        """Every chunk's state is current: a new generation, no news; ``prepare()`` ->
        (a step, its arguments after the generation) resets the chunks' caches now, else
        each resets at its next query."""
        self.generation += 1
        self.news, self.n_news = [], 0
        if prepare is not None:
            step, args = prepare()
            self.search.backend.map(step, self.generation, *args)

    def tell(
        self, idx: np.ndarray, lab: np.ndarray, apply: Callable[..., Any], heard: Callable[[Any], None] | None = None
    ) -> None:
        """New labels into their chunks' state (``apply`` updates a chunk's cache too)."""
        labels_into_chunks(self.search, idx, lab, apply)

    def hear(self, item: tuple, heard: Callable[[Any, tuple], None] | None = None) -> None:
        """News for the chunks' caches: sent with the next query, numbered."""
        self.news.append((self.n_news, *item))
        self.n_news += 1

    def top(
        self,
        k: int,
        here: Callable[[Any, int], tuple] | None = None,
        step: ChunkStep | None = None,
        args: Callable[[], tuple] = tuple,
        lost: Callable[[], None] | None = None,
    ) -> tuple:
        """The k best points, (indices, scores): ``step(x, state, k, Sent, *args())`` on
        every chunk (its exact top k, a ChunkTop), merged; the rows read counted. When a
        lost worker's chunks were rebuilt (their partials are not a ChunkTop), ``lost()``
        and the query is asked again."""
        assert step is not None
        parts = self._ask(step, k, args, lost)
        self.count(sum(part.rows_read for part in parts))
        self.found = np.concatenate([p.indices for p in parts])
        return best_ranked(self.found, np.concatenate([p.scores for p in parts]), k)

    def catch_up(
        self,
        here: Callable[[Any], int] | None = None,
        step: ChunkStep | None = None,
        args: Callable[[], tuple] = tuple,
        lost: Callable[[], None] | None = None,
    ) -> int:
        """Every chunk's blocks brought up to date: ``step`` with k = 0; the rows read
        (not counted)."""
        assert step is not None
        return sum(part.rows_read for part in self._ask(step, 0, args, lost))

    def _ask(self, step: ChunkStep, k: int, args: Callable[[], tuple], lost: Callable[[], None] | None) -> list:
        """``step`` on every chunk with the news not sent yet; when a lost worker's chunks
        were rebuilt by the engine's recipe, ``lost()`` (a method whose chunks need more
        than the recipe: WNAS) and asked again (with ``args()`` anew after ``lost``)."""
        backend = self.search.backend
        called = args()
        parts = backend.map(step, k, self._sent(), *called)
        if not all(isinstance(part, ChunkTop) for part in parts):
            if lost is not None:
                lost()
                called = args()
            parts = backend.map(step, k, self._sent(), *called)
        self.news = []
        return parts

    def _sent(self) -> Sent:
        return Sent(self.generation, self.news, self.n_news)

    def read(self, step: ChunkStep, plan: dict, *args: Any) -> None:
        raise AssertionError("per chunk, blocks are read by the chunks' own steps")

    def count(self, rows: int) -> None:
        self.search.count_read(int(rows) * self.search.store.bytes_per_point)
