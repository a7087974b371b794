"""Backends map chunk steps over the chunks of a store: here (threads) or on a cluster.

The contract is :class:`Backend` (backends/base.py); steps are declared as
:class:`ChunkStep`. The rest of the package names no concrete backend: it asks
:func:`make_backend` for one, and reaches the cluster's helpers (``connect``,
``tls_security``, ``Distributed``) through this package, which imports dask only then.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ..errors import ParameterError
from .base import Backend, ChunkStep, StepCall
from .local import LocalBackend, pass_progress
from .state import ChunkState

if TYPE_CHECKING:
    from ..storage import FeatureStore

__all__ = ["Backend", "ChunkStep", "StepCall", "LocalBackend", "ChunkState", "make_backend", "pass_progress",
           "connect", "tls_security", "Distributed"]

_DISTRIBUTED = ("connect", "tls_security", "Distributed")    # in backends/distributed.py, which imports dask


def __getattr__(name: str) -> Any:
    if name in _DISTRIBUTED:
        return getattr(importlib.import_module(".distributed", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def make_backend(store: FeatureStore, backend: Any = "local", n_threads: int | None = None) -> Backend:
    """A backend for ``store``: "local" (threads in this process), or a dask
    ``distributed.Client`` or ``backends.distributed.Distributed(client, persist=...)``
    (chunks mapped over the cluster's workers; ``n_threads`` is then the workers' own)."""
    if backend is None or (isinstance(backend, str) and backend == "local"):
        return LocalBackend(store, n_threads)
    from .distributed import (  # imports dask: only when asked
        DistributedBackend,
        as_distributed,
    )
    spec = as_distributed(backend)
    if spec is not None:
        return DistributedBackend(store, spec.client, persist=spec.persist)
    raise ParameterError(f"unknown backend {backend!r}; use 'local', a dask distributed.Client "
                         "or bigsearch.backends.distributed.Distributed(client, persist=True)")
