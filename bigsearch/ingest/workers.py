"""Worker processes for the per-molecule work of ingest (RDKit holds Python's lock).

:func:`fingerprint_workers` forks one process per core; :func:`worker_map` runs a
function over parts of a block on them, in order, and here when they are not running
or one was killed. :func:`shared_empty` places an array in memory the workers share, so
that large read-only inputs (the MinMax map's random numbers) reach them once.
"""

import math
import mmap
import multiprocessing
import os
import sys
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np


def worker_map(fn, parts, args):
    """fn(part, *args) for each part, in order: on the worker processes of
    :func:`fingerprint_workers` when they are running (for a single part too: this
    process has its own work, writing)."""
    if _WORKERS and parts:
        try:
            return list(_WORKERS[-1].pool.map(fn, parts, *[[a] * len(parts) for a in args]))
        except BrokenProcessPool:  # a worker was killed: do it all here
            pass
    return [fn(part, *args) for part in parts]


class _Workers:
    """A pool of forked worker processes and the memory they share with this process: a
    memory file (memfd) made before they fork, so that each holds it too. Arrays placed in
    it (:func:`shared_empty`) reach a worker as where they are, a few numbers, and the
    worker maps the same pages: the MinMax map's 200 MB of random numbers are written once
    and never copied or pickled."""

    def __init__(self, processes):
        self.fd = os.memfd_create("bigsearch-workers")
        self.size = 0
        self.pool = ProcessPoolExecutor(processes, mp_context=multiprocessing.get_context("fork"))
        self.pool.submit(int).result()  # a fork context starts every worker at the first task: now

    def empty(self, shape, dtype):
        """An uninitialized array in the shared file, and its handle (for :func:`attach`)."""
        offset = self.size
        size = max(1, math.prod(shape) * np.dtype(dtype).itemsize)
        self.size += -(-size // mmap.PAGESIZE) * mmap.PAGESIZE
        os.ftruncate(self.fd, self.size)
        view = np.frombuffer(mmap.mmap(self.fd, size, offset=offset), dtype, math.prod(shape)).reshape(shape)
        return view, SharedArray(os.getpid(), self.fd, offset, tuple(shape), np.dtype(dtype).str)

    def close(self):
        self.pool.shutdown(cancel_futures=True)
        os.close(self.fd)


@dataclass(frozen=True)
class SharedArray:
    """Where an array of :func:`shared_empty` is: its process, memory file and offset."""

    owner: int
    fd: int
    offset: int
    shape: tuple
    dtype: str

    def attach(self):
        """The array, mapped in this process (the owner or one of its workers), once per
        process; writable as numba's kernels take arrays (a private mapping of the same
        pages: never written)."""
        if self not in _ATTACHED:
            size = max(1, math.prod(self.shape) * np.dtype(self.dtype).itemsize)
            pages = mmap.mmap(self.fd, size, offset=self.offset, flags=mmap.MAP_PRIVATE)
            _ATTACHED[self] = np.frombuffer(pages, self.dtype, math.prod(self.shape)).reshape(self.shape)
        return _ATTACHED[self]


_ATTACHED = {}  # SharedArray -> its array in this process


def workers_running():
    """Whether tasks go to worker processes now (within :func:`fingerprint_workers`)."""
    return bool(_WORKERS)


def shared_empty(shape, dtype=np.float64):
    """An uninitialized array that the worker processes of :func:`fingerprint_workers` can
    read without copying (:meth:`SharedArray.attach`), and its handle; without workers, a
    plain array and None. Fill it before any task reads it."""
    if not _WORKERS:
        return np.empty(shape, dtype), None
    return _WORKERS[-1].empty(shape, dtype)


_WORKERS = []  # the pools of the fingerprint_workers blocks running now, innermost last


@contextmanager
def fingerprint_workers(before_fork=None):
    """Within this block, :func:`fingerprints` parses on one worker process per core.

    ``before_fork()``, when given, runs here first (when there are workers), so that what
    it loads (numba's compiled kernels the tasks call: 0.5 s of CPU a process) is loaded
    once and inherited by every worker.

    The workers are forked when the block starts (ingest starts it before it reads or
    writes anything, so before any thread of the store's library exists: forking a
    process with threads risks a lock held forever) and stopped when it ends. Forked, not
    spawned: a spawned worker would run the caller's script again. One core, a process that
    is itself a worker (a dask worker), or a system other than Linux (where forking is
    unavailable or unsafe) parses here."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
    if cores < 2 or multiprocessing.parent_process() is not None or not sys.platform.startswith("linux"):
        yield
        return
    if before_fork is not None:
        before_fork()
    workers = _Workers(cores)
    _WORKERS.append(workers)
    try:
        yield
    finally:
        _WORKERS.remove(workers)
        for handle in [h for h in _ATTACHED if h.fd == workers.fd and h.owner == os.getpid()]:
            del _ATTACHED[handle]
        workers.close()
