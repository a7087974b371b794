"""Backends map chunk steps over the chunks of a store: here (threads) or on a cluster."""

from ..errors import ParameterError
from .local import LocalBackend
from .state import ChunkState

__all__ = ["LocalBackend", "ChunkState", "make_backend"]


def make_backend(store, backend="local", n_threads=None):
    """A backend for ``store``: "local" (threads in this process)."""
    if backend is None or backend == "local":
        return LocalBackend(store, n_threads)
    raise ParameterError(f"unknown backend {backend!r}; use 'local'")
