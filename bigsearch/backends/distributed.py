"""The dask.distributed backend: chunk steps mapped over the workers of a dask cluster.

Where the state lives. The chunks are split into contiguous shards, one per worker.
A shard is a dask Actor on its worker: a LocalBackend over its chunks (the same thread
pool and the same kernels), holding their per-point arrays (labels, degrees, J, f, the
impact factor) in the worker's memory between iterations, and reading its rows of X
from the store, which the worker opens by path, or from memory (``persist=True``).

One iteration is one actor call per shard, all sent at once: the O(r^2) arguments go
out, each shard runs the step over its chunks, and the chunks' small partials come
back, in chunk order, to be summed on the driver as with the local backend. Actor calls
go from the client to the worker without the scheduler's task machinery: about 2 ms
per round trip here, against 12-14 ms for one task per worker
(benchmarks/cluster_overhead.py).

Worker loss. When a call fails and the scheduler no longer lists the shard's worker
(or the scheduler drops the worker while the driver waits for it), that shard's state
is gone. Its chunks are split over the live workers into new shards
(with freshly allocated arrays), which are rebuilt: the initialization passes that
compute a chunk's state from scratch are run again; any other step is replaced by the
engine's rebuild recipe, which recomputes the chunks' state from the engine's current
global state and returns the partials the lost call would have returned. The search
then continues with the same queries.

Security. A dask client runs what its scheduler sends it (results are pickles), and a
worker runs what the scheduler tells it to, so every link is authenticated: a
LocalCluster started here (``local_workers``) listens on the loopback interface over
TLS with a certificate authority made for it alone (``Security.temporary()``: in
memory, never on disk), so no other process can join it or talk to it; a running
cluster is reached with the ``security`` given (its CA, and this client's certificate
and key) or with dask's own TLS configuration. docs/cluster.md has the trust model.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
from distributed import Client, LocalCluster, get_worker
from distributed.security import Security
from numpy.typing import ArrayLike, DTypeLike

from ..errors import BigsearchError, ClusterError
from ..storage import open_store
from ..storage.encoding import copy_chunk
from .base import ChunkStep, StepCall
from .local import LocalBackend

T = TypeVar("T")

WORKER_WAIT_SECONDS = 60    # how long to wait for a worker to join (start-up, after losing all)
LOSS_GRACE_SECONDS = 10     # after a failed call, how long the scheduler has to notice a dead worker
PLACE_ATTEMPTS = 5          # shard placements tried when target workers die meanwhile
POLL_SECONDS = 0.5          # while waiting for a shard, how often to check that its worker is alive


@dataclass(frozen=True)
class Distributed:
    """``backend=Distributed(client, persist=True)``: the dask.distributed backend with
    its options. A bare ``distributed.Client`` as ``backend`` means ``persist=False``.

    persist: each worker keeps its chunks of X in memory instead of re-reading them
    from the store every iteration (for stores on slow shared filesystems).
    """
    client: Client
    persist: bool = False


def as_distributed(backend):
    """``backend`` as a :class:`Distributed` spec, or None when it is not one."""
    if isinstance(backend, Client):
        return Distributed(backend)
    return backend if isinstance(backend, Distributed) else None


@contextlib.contextmanager
def connect(scheduler=None, local_workers=None, persist=False, security=None):
    """The backend for given cluster options, as a context manager.

    ``scheduler``: the address of a running dask scheduler, or its scheduler file;
    ``local_workers``: the number of worker processes of a new LocalCluster. Yields
    "local" when neither is given, else a :class:`Distributed` spec; the client (and the
    LocalCluster) are closed on exit. ``security``: a ``distributed.security.Security``
    (see :func:`tls_security`); by default a new LocalCluster gets temporary TLS
    credentials of its own, and a running scheduler is reached with dask's configuration
    (``distributed.comm.tls.*``).
    """
    if scheduler and local_workers:
        raise ClusterError("give a scheduler address or a number of local workers, not both")
    if not (scheduler or local_workers):
        if persist:
            raise ClusterError("persist keeps X in a cluster's memory: it needs a scheduler or local workers")
        yield "local"
        return
    with contextlib.ExitStack() as stack:
        if local_workers:
            threads = max(1, (os.cpu_count() or 1) // local_workers)
            # CRITICAL: the workers write to our stderr, and at ERROR they log what we report
            # anyway (a task's error) or a race of the shutdown (a heartbeat to the scheduler
            # just closed), each with a traceback
            cluster = stack.enter_context(LocalCluster(
                n_workers=local_workers, threads_per_worker=threads, processes=True, host="127.0.0.1",
                dashboard_address=None, silence_logs=logging.CRITICAL,
                security=security or Security.temporary()))
            client = stack.enter_context(Client(cluster, direct_to_workers=True))
        else:
            client = stack.enter_context(_client(scheduler, security or Security()))
        yield Distributed(client, persist)


def _client(scheduler, security):
    """A client of a running scheduler (an address or a scheduler file, as on HPC systems)."""
    try:
        if os.path.isfile(scheduler):
            return Client(scheduler_file=scheduler, security=security)
        return Client(scheduler, security=security)
    except (OSError, TypeError, ValueError, RuntimeError) as e:
        # TypeError: a tls:// address without credentials; RuntimeError: credentials
        # (require_encryption) for a tcp:// address, which cannot authenticate the scheduler
        if str(scheduler).startswith("tls://") and not security.tls_ca_file:
            hint = ("; it speaks TLS: give its CA and this client's certificate and key (tls_ca_file, tls_cert, "
                    "tls_key)")
        elif security.require_encryption and "encryption required" in str(e):
            hint = ("; TLS credentials were given but the scheduler's address is plain TCP: give its tls:// address "
                    "(or drop the TLS options on a trusted network, docs/cluster.md)")
        else:
            hint = ""
        raise ClusterError(f"cannot connect to the dask scheduler at {scheduler}: {str(e).splitlines()[0]}"
                           f"{hint}") from None


def tls_security(ca_file=None, cert=None, key=None):
    """The ``Security`` of a client that trusts the scheduler only when its certificate is
    signed by ``ca_file``, and shows it ``cert`` (with ``key``); None when none is given."""
    given = {"tls_ca_file": ca_file, "tls_cert": cert, "tls_key": key}
    if not any(given.values()):
        return None
    missing = [name for name, value in given.items() if not value and name != "tls_key"]
    if missing:
        raise ClusterError(f"TLS to a scheduler needs {' and '.join(missing)} as well (docs/cluster.md)")
    for name, value in given.items():
        if value and not os.path.isfile(value):
            raise ClusterError(f"{name} {value}: no such file")
    return Security(tls_ca_file=ca_file, tls_client_cert=cert, tls_client_key=key, require_encryption=True)


class DistributedBackend:
    """The :class:`~bigsearch.backends.Backend` with each chunk's state on a dask worker.

    Parameters
    ----------
    store : FeatureStore
        Opened here for its shape; every worker opens the same path itself.
    client : distributed.Client
    persist : bool
        Keep X in the workers' memory (read once, when a shard is placed).
    """

    name = "distributed"
    in_process = False

    def __init__(self, store: Any, client: Client, persist: bool = False) -> None:
        if client.status != "running":
            raise ClusterError(f"the dask client is {client.status}; connect a running one")
        self.store, self.client, self.persist = store, client, bool(persist)
        self.rebuild: Callable[[], StepCall] | None = None
        self.recoveries: list[dict[str, Any]] = []   # one record per lost shard: {"worker", "chunks", "to"}
        self._allocs: list[tuple[str, Any, Any]] = []  # (name, dtype, fill), replayed on every new shard
        self._source = {"path": store.reopen_path(), "options": store.reopen_options(),
                        "shape": (store.n, store.r), "chunk_rows": store.chunk_rows}
        self.shards = self._place(range(store.n_chunks))

    def set_rebuild(self, recipe: Callable[[], StepCall]) -> None:
        """Register ``recipe() -> (step, args)``: how a lost chunk's state is rebuilt."""
        self.rebuild = recipe

    # -- the backend interface ------------------------------------------------------
    def alloc(self, name: str, dtype: DTypeLike, fill: Any) -> None:
        self._allocs.append((name, dtype, fill))
        self._each(lambda s: [("alloc", (name, dtype, fill))], lambda s: [])

    def assign(self, name: str, values: ArrayLike) -> None:
        values = np.asarray(values)
        ops = lambda s: [("assign", (name, values[s.rows]))]  # noqa: E731
        self._each(ops, ops)

    def gather(self, name: str) -> np.ndarray:
        parts = self._each(lambda s: [("gather", (name,))],
                           lambda s: [self._rebuild_op(), ("gather", (name,))])
        out = np.concatenate(parts)
        out.flags.writeable = False
        return out

    def map(self, step: ChunkStep, *args: Any) -> list[Any]:
        """``[step(x_j, state_j, *args) for every chunk j]``, in chunk order."""
        def redo(shard):
            # A step declared ``from_scratch`` computes a chunk's whole state and is simply
            # run again on the new shard; any other step updates state it did not create,
            # so the engine's rebuild recipe replaces it (backends/base.py).
            return [("map", (step, *args)) if step.from_scratch else self._rebuild_op()]
        return [p for part in self._each(lambda s: [("map", (step, *args))], redo) for p in part]

    def map_chunks(self, step: ChunkStep, chunk_ids: Sequence[int], *args: Any) -> list[Any]:
        """``[step(x_j, state_j, *args) for j in chunk_ids]``, on the workers holding them
        (a lost worker's chunks are rebuilt by the engine's recipe first)."""
        return self._on_holders("map_chunks_by_id", step, chunk_ids, args)

    def map_state(self, fn: Callable[..., T], chunk_ids: Sequence[int], *args: Any) -> list[T]:
        """``[fn(state_j, *args) for j in chunk_ids]`` (no reads of X)."""
        return self._on_holders("map_state_by_id", fn, chunk_ids, args)

    def _on_holders(self, op, fn, chunk_ids, args):
        """``op`` (a ShardBackend method taking fn, chunk ids, args) on the shards holding
        those chunks; the results in the order of ``chunk_ids``."""
        ops = lambda s: [(op, (fn, chunk_ids, *args))]  # noqa: E731
        holders = [s for s in self.shards if any(j in s.chunks for j in chunk_ids)]
        found = {}
        for part in self._each(ops, lambda s: [self._rebuild_op(), *ops(s)], holders):
            found.update(part)
        return [found[j] for j in chunk_ids]

    def persisted_chunks(self) -> dict[str, dict[int, np.ndarray]]:
        """{worker address: {chunk j: its rows of X}} that this backend's shards hold in
        their workers' memory (``persist=True``), read on the workers; empty dicts where
        they read the store instead (tests show X is where it should be with this)."""
        keys = {shard.future.key for shard in self.shards}

        def held(dask_worker: Any) -> dict[int, np.ndarray]:
            chunks: dict[int, np.ndarray] = {}
            for key, actor in dask_worker.state.actors.items():
                if key in keys and isinstance(actor.local.store, PersistedChunks):
                    chunks.update({j: np.array(x) for j, x in actor.local.store.rows.items()})
            return chunks

        return self.client.run(held)

    def close(self) -> None:
        for shard in self.shards:
            shard.future.release()
        self.shards = []

    # -- calls and recovery ---------------------------------------------------------
    def _each(self, ops, redo, shards=None):
        """Send ``ops(shard)`` to the given shards (default all) at once; their results
        in chunk order. A shard whose worker is lost is replaced by new shards, which
        run ``redo(new_shard)`` instead."""
        shards = list(self.shards if shards is None else shards)
        calls = [_call(s.actor, "run", ops(s)) for s in shards]
        out = []
        for shard, call in zip(shards, calls):
            try:
                out.append(self._wait(shard, call))
            except Exception as e:
                if not self._lost(shard, e):
                    raise
                out.extend(self._each(redo, redo, self._replace(shard)))
        return out

    def _rebuild_op(self):
        if self.rebuild is None:
            raise ClusterError("a worker was lost and the engine gave no recipe to rebuild its chunks")
        step, args = self.rebuild()
        return ("map", (step, *args))

    def _wait(self, shard, call):
        """The call's result. While waiting, check now and then that the shard's worker is
        still in the cluster: a call sent to a worker that just died can otherwise hang
        until the connect timeout (30 s by default)."""
        if isinstance(call, Exception):
            raise call
        while not call.done():
            try:
                return call.result(timeout=POLL_SECONDS)
            except TimeoutError:     # the wait's, or the call's own when it is done
                if not call.done() and shard.address not in self._workers():
                    raise WorkerLost(shard.address) from None
        return call.result()

    def _lost(self, shard, error):
        """Whether ``error`` means that the shard's worker is gone (as opposed to an
        error in the step, which is raised as it is)."""
        if isinstance(error, WorkerLost):
            return True
        if isinstance(error, BigsearchError) or not isinstance(error, (OSError, RuntimeError)):
            return False
        deadline = time.monotonic() + LOSS_GRACE_SECONDS
        while shard.address in self._workers():
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True

    def _replace(self, lost):
        """New shards for a lost shard's chunks, spread over the live workers."""
        new = self._place(lost.chunks, exclude={lost.address})
        i = self.shards.index(lost)
        self.shards[i:i + 1] = new
        record = {"worker": lost.address, "chunks": [lost.chunks.start, lost.chunks.stop],
                  "to": [s.address for s in new]}
        self.recoveries.append(record)
        warnings.warn(f"dask worker {lost.address} was lost; rebuilding its chunks {lost.chunks.start}.."
                      f"{lost.chunks.stop - 1} on {', '.join(record['to'])}", RuntimeWarning, stacklevel=2)
        return new

    # -- placing shards -------------------------------------------------------------
    def _workers(self):
        """The workers the scheduler lists now: {address: info}."""
        return self.client.scheduler_info()["workers"]

    def _live_workers(self, exclude):
        deadline = time.monotonic() + WORKER_WAIT_SECONDS
        while True:
            live = sorted(set(self._workers()) - set(exclude))
            if live:
                return live
            if time.monotonic() > deadline:
                raise ClusterError(f"the dask cluster at {self.client.scheduler.address} has no workers "
                                   f"(waited {WORKER_WAIT_SECONDS} s); start or scale up its workers")
            time.sleep(0.1)

    def _place(self, chunks, exclude=()):
        """Shards for a range of chunks, one contiguous piece per live worker."""
        exclude = set(exclude)
        for _ in range(PLACE_ATTEMPTS):
            workers = self._live_workers(exclude)
            pieces = split(chunks, len(workers))
            futures = [self.client.submit(Shard, self._source, piece, self.persist, list(self._allocs),
                                          actor=True, workers=[w], allow_other_workers=True, pure=False)
                       for piece, w in zip(pieces, workers)]
            try:
                actors = [f.result() for f in futures]
                addresses = [_result(_call(a, "address")) for a in actors]
            except BigsearchError:
                raise
            except Exception:
                gone = set(workers) - set(self._workers())
                if not gone:
                    raise
                exclude |= gone
                continue
            return [ShardHandle(piece, self._rows(piece), f, a, address)
                    for piece, f, a, address in zip(pieces, futures, actors, addresses)]
        raise ClusterError(f"could not place chunks {chunks.start}..{chunks.stop - 1}: "
                           f"workers kept dying ({PLACE_ATTEMPTS} attempts)")

    def _rows(self, chunks):
        return slice(self.store.chunks[chunks.start][0], self.store.chunks[chunks.stop - 1][1])


@dataclass
class ShardHandle:
    """The driver's handle on one shard: its chunks and rows, its actor, its worker."""
    chunks: range
    rows: slice
    future: object
    actor: object
    address: str


def split(chunks, parts):
    """``chunks`` (a range) in at most ``parts`` contiguous, near-equal ranges."""
    parts = max(1, min(parts, len(chunks)))
    edges = np.linspace(chunks.start, chunks.stop, parts + 1).round().astype(int)
    return [range(a, b) for a, b in zip(edges[:-1], edges[1:])]


def _call(actor, method, *args):
    """Start an actor call; the exception instead when the actor is known to be lost."""
    try:
        return getattr(actor, method)(*args)
    except Exception as e:
        return e


def _result(call):
    if isinstance(call, Exception):
        raise call
    return call.result()


class WorkerLost(Exception):
    """A shard's worker left the cluster while the driver waited for it."""


# -- what runs on the workers ----------------------------------------------------------
class Shard:
    """A dask Actor: the per-point state of a contiguous range of chunks, on one worker.

    ``run(ops)`` applies backend operations in order, e.g. [("map", (step, *args))], and
    returns the last one's result; a recovered shard gets a rebuild and the original
    operation in one call.
    """

    def __init__(self, source, chunks, persist, allocs):
        worker = get_worker()
        self.worker_address = worker.address
        store = _open_on_worker(source, worker.address)
        # dask's memory monitor counts a worker's whole RSS, file-backed pages included:
        # maps held across passes would count X's pages against the worker's limit
        store.hold_maps = False
        if persist:
            store = PersistedChunks(store, chunks, worker.memory_manager.memory_limit)
        self.local = ShardBackend(store, chunks, worker.state.nthreads)
        for name, dtype, fill in allocs:
            self.local.alloc(name, dtype, fill)

    def address(self):
        return self.worker_address

    def run(self, ops):
        result = None
        for name, args in ops:
            result = getattr(self.local, name)(*args)
        return result


class ShardBackend(LocalBackend):
    """A LocalBackend over a contiguous range of chunks: per-point arrays cover only
    those chunks' rows."""

    def __init__(self, store, chunks, n_threads):
        super().__init__(store, n_threads)
        self.states = self.states[chunks.start:chunks.stop]

    def map_state(self, fn, chunk_ids, *args):
        first = self.states[0].chunk_id
        return [fn(self.states[j - first], *args) for j in chunk_ids]

    def map_state_by_id(self, fn, chunk_ids, *args):
        """{j: fn(state_j, *args)} for the chunks of ``chunk_ids`` held here."""
        held = self._held(chunk_ids)
        return dict(zip(held, self.map_state(fn, held, *args)))

    def map_chunks_by_id(self, step, chunk_ids, *args):
        """{j: step(x_j, state_j, *args)} for the chunks of ``chunk_ids`` held here."""
        held = self._held(chunk_ids)
        return dict(zip(held, self.map_chunks(step, held, *args)))

    def _held(self, chunk_ids):
        first, stop = self.states[0].chunk_id, self.states[-1].chunk_id + 1
        return [j for j in chunk_ids if first <= j < stop]


class PersistedChunks:
    """A range of chunks of X copied into this worker's memory (``persist``): the part
    of the store interface the backend reads through."""

    MEMORY_FRACTION = 0.5   # of the worker's limit; dask pauses a worker at 80%
    fast_path = hold_maps = False   # rows in memory, no chunk maps: the backend goes chunk by chunk

    def __init__(self, store, chunks, memory_limit):
        a, b = store.chunks[chunks.start][0], store.chunks[chunks.stop - 1][1]
        need = (b - a) * store.bytes_per_point
        if memory_limit and need > self.MEMORY_FRACTION * memory_limit:
            # ClusterError, not ResourceError: dask cannot carry a MemoryError subclass back
            raise ClusterError(
                f"persist: this worker's rows of X take {need / 2**30:.2f} GiB, more than half of its "
                f"memory limit ({memory_limit / 2**30:.2f} GiB); use more workers or drop persist")
        self.chunks, self.n_chunks = store.chunks, store.n_chunks
        self.rows = {}
        for j in chunks:
            with store.chunk(j) as x:
                self.rows[j] = copy_chunk(x)

    def held_chunks(self):
        """None: no held chunk maps (FeatureStore.held_chunks)."""
        return None

    @contextlib.contextmanager
    def chunk(self, j, whole=True):
        yield self.rows[j]

    def prefetch(self, j):
        pass


def _open_on_worker(source, address):
    path = source["path"]
    try:
        store, reason = open_store(path, source["options"]), None
    except (BigsearchError, OSError) as e:
        reason = str(e)
    if reason:   # raised outside the except block: dask cannot unpickle StoreNotFoundError as a context
        raise ClusterError(f"dask worker {address} cannot open the feature store: {reason}. Every worker "
                           f"must reach the store at the same path, {path} (see docs/cluster.md)")
    if (store.shape, store.chunk_rows) != (tuple(source["shape"]), source["chunk_rows"]):
        raise ClusterError(f"dask worker {address} sees a different store at {path} ({store.n} x {store.r}, "
                           f"{store.chunk_rows} rows per chunk) than the driver ({source['shape'][0]} x "
                           f"{source['shape'][1]}, {source['chunk_rows']}); give every machine the same copy")
    return store


__all__ = ["Distributed", "DistributedBackend", "as_distributed", "connect"]
