"""The backend contract: what the engine asks of a backend, and how it declares its steps.

A backend holds every chunk's per-point state (arrays the engine names and allocates)
and maps chunk steps over the chunks of X: ``LocalBackend`` (threads in this process)
and ``DistributedBackend`` (shards on dask workers) both satisfy :class:`Backend`, and
the engine only uses what it declares. A backend knows nothing of the methods: it runs
:class:`ChunkStep` declarations, and when it loses a chunk's state (a dead worker) it
asks the engine for a :class:`StepCall` that rebuilds it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol, TypeVar, runtime_checkable

import numpy as np
from numpy.typing import ArrayLike, DTypeLike

T = TypeVar("T")


@dataclass(frozen=True)
class ChunkStep:
    """A step a backend maps over the chunks: ``run(x, state, *args) -> partials``.

    ``x`` is one chunk of X (m x r, read-only), ``state`` that chunk's
    :class:`~bigsearch.backends.state.ChunkState` (its per-point arrays, updated in
    place), ``args`` the small global arguments; the partials are small (O(r^2)) and come
    back to the driver in chunk order. ``run`` must be a module-level function of its
    arguments only, so that dask workers can run it unchanged.

    ``from_scratch`` says how the step is redone for a chunk whose state was lost
    mid-pass: True when the step computes everything it returns and writes from X and
    its arguments alone (it is simply run again on the chunk's new, freshly allocated
    state); False when it updates state it did not create (the engine's rebuild recipe,
    a :class:`StepCall`, is run instead and must return the same partials).

    ``whole_chunk`` is False for a step that reads only some rows of its chunk (pruned
    queries): the chunk is then mapped without huge pages (storage/base.py).

    ``over_store``, optional, is the same step over every chunk at once, for a backend
    that holds every chunk and the whole per-point arrays in its process:
    ``over_store(chunks, arrays, on_threads, *args)`` with the chunks in order (a
    ``HeldChunks``, made once while the store holds its maps: a step keeps what it derives
    from them with ``chunks.derived(key, make)``), the per-point arrays by name (length
    n) and ``on_threads(fn)``, which runs ``fn()`` on each of the backend's threads at
    once and returns when all are done. It returns the
    partials of every chunk, as ``run`` would have, or None when these chunks or
    arguments need the chunk-by-chunk path (having changed nothing).
    """
    run: Callable[..., Any]
    from_scratch: bool = False
    whole_chunk: bool = True
    over_store: Callable[..., list[Any] | None] | None = None

    def __call__(self, x: Any, state: Any, *args: Any) -> Any:
        return self.run(x, state, *args)

    def __repr__(self) -> str:
        return f"ChunkStep({self.run.__qualname__}, from_scratch={self.from_scratch})"


class StepCall(NamedTuple):
    """A step with its arguments: what ``Backend.map(step, *args)`` would run."""
    step: ChunkStep
    args: tuple[Any, ...]


@runtime_checkable
class Backend(Protocol):
    """What the engine uses of a backend (LocalBackend and DistributedBackend satisfy it)."""

    name: str
    # Whether the per-point arrays live in this process (``gather`` returns them without
    # a copy or a transfer): True for the local backend, False where they are on workers.
    in_process: bool

    def set_rebuild(self, recipe: Callable[[], StepCall]) -> None:
        """Register how a lost chunk's per-point state is rebuilt from the engine's
        global state (called only by backends that can lose chunks)."""

    def alloc(self, name: str, dtype: DTypeLike, fill: Any) -> None:
        """Create per-point array ``name`` (length n, filled) in every chunk's state."""

    def assign(self, name: str, values: ArrayLike) -> None:
        """Set per-point array ``name`` from a whole array of length n."""

    def gather(self, name: str) -> np.ndarray:
        """The whole per-point array ``name`` (read-only)."""

    def map(self, step: ChunkStep, *args: Any) -> list[Any]:
        """``[step(x_j, state_j, *args) for every chunk j]``, in chunk order."""

    def map_chunks(self, step: ChunkStep, chunk_ids: Sequence[int], *args: Any) -> list[Any]:
        """``[step(x_j, state_j, *args) for j in chunk_ids]``, run where those chunks live
        (e.g. reading a few blocks of rows of some chunks: pruned queries)."""

    def map_state(self, fn: Callable[..., T], chunk_ids: Sequence[int], *args: Any) -> list[T]:
        """``[fn(state_j, *args) for j in chunk_ids]`` (no reads of X)."""

    def close(self) -> None:
        """Release threads, workers' state and memory."""
