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

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from ...backends import ChunkStep
from ..core.params import PruneOptions, check_block_rows
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


Prepare = Callable[[], tuple[ChunkStep, tuple]]  # per chunk, after a full pass: (step, its arguments)
Args = Callable[[], tuple]  # a per-chunk query step's arguments after (k, Sent)


def labels_into_chunks(search: Any, idx: np.ndarray, lab: np.ndarray, apply: Callable[..., Any]) -> None:
    """``apply(state, idx, lab)`` on the chunks holding points ``idx`` (no read of X)."""
    store = search.store
    chunks = np.unique([store.chunk_of(i) for i in idx]).tolist()
    search.backend.map_state(apply, chunks, idx, lab)


def placement(search: Any) -> Caches:
    """Where this search's pruning keeps its caches (from ``backend.in_process``)."""
    return CachesHere(search) if search.backend.in_process else CachesPerChunk(search)


class PlacedPruning:
    """What the prunings of LAS, WNAS, BLR and screen share: their options, the placement of
    their caches (``caches``), ``stale`` and ``active``; each sets ``status``."""

    status: str

    def __init__(self, engine: Any, options: PruneOptions | None = None) -> None:
        self.engine = engine
        self.options = options or PruneOptions()
        self.block_rows = check_block_rows(self.options.block_rows)
        self.caches = placement(engine)
        self.stale = False  # per-point values of blocks not read lag behind the labels

    @property
    def active(self) -> bool:
        return self.status.startswith("on")


class Caches(ABC):
    """What both placements do alike (the operations they do differently follow in each)."""

    def __init__(self, search: Any) -> None:
        self.search = search
        self.cache: Any = None  # here: the pruning's cache over every block of X
        self.found = np.zeros(0, np.int64)  # per chunk: the points the chunks returned at the last query
        self.n_news = 0  # news since the last full pass

    def status(self, text: str) -> str:
        return text

    def stored_slices(self, block_rows: int) -> tuple | None:
        """Where workers read their chunks' slices of the summaries stored with the store
        (None here: they are read whole, in this process)."""
        return None

    def tell(
        self, idx: np.ndarray, lab: np.ndarray, apply: Callable[..., Any], heard: Callable[[Any], None] | None = None
    ) -> None:
        """New labels into their chunks' state (``apply``: per chunk it updates the
        chunk's cache too), then, here, into the cache (``heard(cache)``)."""
        labels_into_chunks(self.search, idx, lab, apply)

    def read(self, step: ChunkStep, plan: dict, *args: Any) -> None:
        """Blocks recomputed where their chunks are: ``step(x, state, plan, *args)`` on
        each chunk of ``plan`` ({chunk: its part}), each chunk opened once."""
        self.search.backend.map_chunks(step, sorted(plan), plan, *args)

    def count(self, rows: int) -> None:
        """Rows of X read, counted towards the next query."""
        self.search.count_read(int(rows) * self.search.store.bytes_per_point)

    @abstractmethod
    def after_full_pass(
        self, build: Callable[[], Any], reset: Callable[[Any], None], prepare: Prepare | None = None
    ) -> None:
        """Every chunk's state is current: the caches reset. ``build()``, ``reset(cache)``:
        the cache here; ``prepare()``: the chunks' caches, right away (else each resets at
        its next query)."""

    @abstractmethod
    def hear(self, item: tuple, heard: Callable[[Any, tuple], None]) -> None:
        """News for the caches (a batch of labels, an update): ``heard(cache, item)``."""

    @abstractmethod
    def top(
        self,
        k: int,
        here: Callable[[Any, int], tuple],
        step: ChunkStep,
        args: Args = tuple,
        lost: Callable[[], None] | None = None,
    ) -> tuple:
        """The k best points, (indices, scores), the rows read counted: ``here(cache, k)``
        -> (indices, scores, rows read), or per chunk ``step(x, state, k, Sent, *args())``
        -> ChunkTop on every chunk, merged; after a lost worker, ``lost()`` and again."""

    @abstractmethod
    def catch_up(
        self, here: Callable[[Any], int], step: ChunkStep, args: Args = tuple, lost: Callable[[], None] | None = None
    ) -> int:
        """Every block brought up to date (``here(cache)``, or ``step`` with k = 0 on
        every chunk): the rows read (not counted)."""


class CachesHere(Caches):
    """One cache over all of X in this process (see the module)."""

    def after_full_pass(
        self, build: Callable[[], Any], reset: Callable[[Any], None], prepare: Prepare | None = None
    ) -> None:
        if self.cache is None:
            self.cache = build()
        reset(self.cache)
        self.n_news = 0

    def tell(
        self, idx: np.ndarray, lab: np.ndarray, apply: Callable[..., Any], heard: Callable[[Any], None] | None = None
    ) -> None:
        super().tell(idx, lab, apply)
        if heard is not None:
            heard(self.cache)

    def hear(self, item: tuple, heard: Callable[[Any, tuple], None]) -> None:
        heard(self.cache, item)
        self.n_news += 1

    def top(
        self,
        k: int,
        here: Callable[[Any, int], tuple],
        step: ChunkStep,
        args: Args = tuple,
        lost: Callable[[], None] | None = None,
    ) -> tuple:
        idx, sc, rows = here(self.cache, k)
        self.count(rows)
        return idx, sc

    def catch_up(
        self, here: Callable[[Any], int], step: ChunkStep, args: Args = tuple, lost: Callable[[], None] | None = None
    ) -> int:
        return here(self.cache)


class CachesPerChunk(Caches):
    """A cache per chunk, in its state where it lives (see the module)."""

    def __init__(self, search: Any) -> None:
        super().__init__(search)
        self.generation = 0  # full passes the chunks' caches were told of
        self.news: list = []  # (number, *item) not sent yet

    def status(self, text: str) -> str:
        return text + ", each worker pruning its own chunks"

    def stored_slices(self, block_rows: int) -> tuple | None:
        """(the store's source, each chunk's first block)."""
        store = self.search.store
        return store_source(store), first_blocks(store.chunks, block_rows)

    def after_full_pass(
        self, build: Callable[[], Any], reset: Callable[[Any], None], prepare: Prepare | None = None
    ) -> None:
        self.generation += 1  # (each chunk compares it with its own)
        self.news, self.n_news = [], 0
        if prepare is not None:
            step, args = prepare()
            self.search.backend.map(step, self.generation, *args)

    def hear(self, item: tuple, heard: Callable[[Any, tuple], None]) -> None:
        self.news.append((self.n_news, *item))  # sent with the next query
        self.n_news += 1

    def top(
        self,
        k: int,
        here: Callable[[Any, int], tuple],
        step: ChunkStep,
        args: Args = tuple,
        lost: Callable[[], None] | None = None,
    ) -> tuple:
        parts = self._ask(step, k, args, lost)
        self.count(sum(part.rows_read for part in parts))
        self.found = np.concatenate([p.indices for p in parts])
        return best_ranked(self.found, np.concatenate([p.scores for p in parts]), k)

    def catch_up(
        self, here: Callable[[Any], int], step: ChunkStep, args: Args = tuple, lost: Callable[[], None] | None = None
    ) -> int:
        return sum(part.rows_read for part in self._ask(step, 0, args, lost))

    def _ask(self, step: ChunkStep, k: int, args: Args, lost: Callable[[], None] | None) -> list:
        """``step`` on every chunk with the news not sent yet; when a lost worker's chunks
        were rebuilt by the engine's recipe (their partials are not a ChunkTop),
        ``lost()`` (WNAS: its chunks need more than the recipe) and asked again, with
        ``args()`` anew after ``lost``."""
        backend = self.search.backend
        called = args()
        parts = backend.map(step, k, Sent(self.generation, self.news, self.n_news), *called)
        if not all(isinstance(part, ChunkTop) for part in parts):
            if lost is not None:
                lost()
                called = args()
            parts = backend.map(step, k, Sent(self.generation, self.news, self.n_news), *called)
        self.news = []
        return parts
