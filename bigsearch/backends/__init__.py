"""Backends map chunk steps over the chunks of a store: here (threads) or on a cluster."""

from ..errors import ParameterError
from .local import LocalBackend
from .state import ChunkState

__all__ = ["LocalBackend", "ChunkState", "make_backend"]


def make_backend(store, backend="local", n_threads=None):
    """A backend for ``store``: "local" (threads in this process), or a dask
    ``distributed.Client`` or ``backends.distributed.Distributed(client, persist=...)``
    (chunks mapped over the cluster's workers; ``n_threads`` is then the workers' own)."""
    if backend is None or (isinstance(backend, str) and backend == "local"):
        return LocalBackend(store, n_threads)
    from .distributed import DistributedBackend, as_distributed  # imports dask: only when asked
    spec = as_distributed(backend)
    if spec is not None:
        return DistributedBackend(store, spec.client, persist=spec.persist)
    raise ParameterError(f"unknown backend {backend!r}; use 'local', a dask distributed.Client "
                         "or bigsearch.backends.distributed.Distributed(client, persist=True)")
