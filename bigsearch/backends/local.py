"""The local backend: chunk steps mapped over a thread pool in this process.

Kernels release the GIL, so ``n_threads`` chunks are computed at once; each task first
asks the OS to read ahead the chunk ``n_threads`` places further on, so reading the
next chunks overlaps computing the current ones. Per-point state is held as whole
arrays of length n; each chunk's state is a set of views into them.

While chunks run in parallel, BLAS (the O(m r^2) products of initialization) is held
to one thread per call: a BLAS that starts its own threads under each of ours
oversubscribes the cores, and on a busy machine its spinning threads made
initialization 10-17x slower (benchmarks/scale/, docs/performance.md).
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
from numpy.typing import ArrayLike, DTypeLike

from .base import ChunkStep, StepCall
from .state import ChunkState, point_array

if TYPE_CHECKING:
    from ..storage import FeatureStore

T = TypeVar("T")

try:
    from threadpoolctl import ThreadpoolController
except ImportError:            # without it, BLAS keeps its own threads
    ThreadpoolController = None


# progress(done, total), if set in the calling context, hears of each chunk a pass over X
# has finished (from the pool's threads, one call at a time): what shows a long pass moving
PASS_PROGRESS: contextvars.ContextVar[Callable[[int, int], None] | None] = contextvars.ContextVar(
    "bigsearch_pass_progress", default=None)


@contextlib.contextmanager
def pass_progress(report: Callable[[int, int], None]) -> Any:
    """``with pass_progress(report):`` the passes of this context report their chunks."""
    token = PASS_PROGRESS.set(report)
    try:
        yield
    finally:
        PASS_PROGRESS.reset(token)


class LocalBackend:
    """The :class:`~bigsearch.backends.Backend` of one process: per-point arrays of
    length n, chunks mapped over ``n_threads`` threads."""

    name = "local"
    in_process = True

    def __init__(self, store: FeatureStore, n_threads: int | None = None, readahead: bool = True) -> None:
        self.store = store
        self.n_threads = max(1, int(n_threads or os.cpu_count() or 1))
        self.readahead = readahead
        self.states = [ChunkState(j, a, b) for j, (a, b) in enumerate(store.chunks)]
        self._arrays: dict[str, np.ndarray] = {}
        self.rebuild: Callable[[], StepCall] | None = None   # the engine's recipe (unused here)
        self._pool = ThreadPoolExecutor(self.n_threads, thread_name_prefix="bigsearch")
        self._blas = ThreadpoolController() if ThreadpoolController and self.n_threads > 1 else None

    def set_rebuild(self, recipe: Callable[[], StepCall]) -> None:
        """Register ``recipe() -> (step, args)`` that rebuilds a chunk's per-point state
        from the engine's global state. Chunks are never lost here, so it is not called;
        the distributed backend uses it when a worker dies."""
        self.rebuild = recipe

    def alloc(self, name: str, dtype: DTypeLike, fill: Any) -> None:
        """Create per-point array ``name`` over the chunks' rows in every chunk's state."""
        first = self.states[0].start
        full = point_array(self.states[-1].stop - first, fill, dtype)
        self._arrays[name] = full
        for st in self.states:
            setattr(st, name, full[st.start - first:st.stop - first])

    def assign(self, name: str, values: ArrayLike) -> None:
        """Set per-point array ``name`` from a whole array of length n."""
        self._arrays[name][:] = values

    def array_names(self) -> list[str]:
        """The per-point arrays allocated, in the order they were."""
        return list(self._arrays)

    def assign_rows(self, name: str, rows: np.ndarray, values: np.ndarray) -> None:
        """Set rows ``rows`` of per-point array ``name`` to ``values[rows]`` (``values``: length n)."""
        self._arrays[name][rows] = values[rows]

    def gather(self, name: str) -> np.ndarray:
        """The whole per-point array ``name`` (a read-only view; no copy)."""
        view = self._arrays[name].view()
        view.flags.writeable = False
        return view

    def map(self, step: ChunkStep, *args: Any) -> list[Any]:
        """``[step(x_j, state_j, *args) for every chunk j]``, in chunk order."""
        report = PASS_PROGRESS.get()
        if report is None and step.over_store is not None:
            out = self._over_store(step, args)
            if out is not None:
                return out
        if report is None:
            task = lambda st: self._run(step, st, args)  # noqa: E731
        else:
            done, lock = [0], threading.Lock()

            def task(st: ChunkState) -> Any:
                out = self._run(step, st, args)
                with lock:
                    done[0] += 1
                    report(done[0], len(self.states))
                return out
        with self._one_blas_thread():
            return list(self._pool.map(task, self.states))

    def _over_store(self, step: ChunkStep, args: tuple[Any, ...]) -> list[Any] | None:
        """The step over every chunk in one call (``ChunkStep.over_store``) when the store
        holds its chunk maps: no Python per chunk, and every thread busy to the end of the
        pass (the step shares its work out in small items). None: map chunk by chunk."""
        chunks = self.store.held_chunks()   # None when the store holds no maps
        if chunks is None:
            return None
        assert step.over_store is not None
        return step.over_store(chunks, self._arrays, self._on_every_thread, *args)

    def _on_every_thread(self, fn: Callable[[], Any]) -> None:
        """``fn()`` on ``n_threads`` threads at once (this one and the pool's), returning
        when all have finished; an error of any is raised here."""
        futures = [self._pool.submit(fn) for _ in range(self.n_threads - 1)]
        try:
            fn()
        finally:
            wait(futures)
        for future in futures:
            future.result()

    def _one_blas_thread(self) -> contextlib.AbstractContextManager[Any]:
        # chunks in parallel, one BLAS thread each; a single chunk keeps BLAS's threads
        if self._blas is None or len(self.states) == 1:
            return contextlib.nullcontext()
        return self._blas.limit(limits=1, user_api="blas")

    def map_chunks(self, step: ChunkStep, chunk_ids: Sequence[int], *args: Any) -> list[Any]:
        """``[step(x_j, state_j, *args) for j in chunk_ids]``, one after the other."""
        first = self.states[0].chunk_id
        return [self._run(step, self.states[j - first], args) for j in chunk_ids]

    def map_state(self, fn: Callable[..., T], chunk_ids: Sequence[int], *args: Any) -> list[T]:
        """``[fn(state_j, *args) for j in chunk_ids]`` (no reads of X)."""
        return [fn(self.states[j], *args) for j in chunk_ids]

    def _run(self, step: ChunkStep, st: ChunkState, args: tuple[Any, ...]) -> Any:
        if self.readahead and step.whole_chunk:
            self.store.prefetch(st.chunk_id + self.n_threads)
        with self.store.chunk(st.chunk_id, whole=step.whole_chunk) as x:
            return step.run(x, st, *args)

    def close(self) -> None:
        self._pool.shutdown(wait=True)
