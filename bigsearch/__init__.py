"""bigsearch: Active Search on datasets larger than memory.

LAS (Linearized Active Search), WNAS and the paper's baselines (dense ASG, AGR, random)
over chunked Zarr or HDF5 feature stores, streaming X once per label through numba kernels.

The names below are imported on first use (PEP 562), so that ``import bigsearch`` and
``bigsearch --version`` do not pay for numba, dask and zarr.
"""

import importlib as _importlib

__version__ = "0.1.0"

_LAZY = {"LAS": "engine", "WNAS": "engine", "BLR": "engine", "AGR": "engine", "ASG": "engine", "RandomSearch": "engine",
         "PruneOptions": "engine",
         "Session": "session", "open_store": "storage", "create_store": "storage", "BigsearchError": "errors",
         "prepare": "ingest", "simulate": "experiments.simulate"}

__all__ = ["LAS", "WNAS", "BLR", "AGR", "ASG", "RandomSearch", "PruneOptions", "Session", "open_store", "create_store",
           "BigsearchError", "prepare", "simulate", "__version__"]


def __getattr__(name):
    if name in _LAZY:
        value = getattr(_importlib.import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'bigsearch' has no attribute {name!r}")


def __dir__():
    return sorted({name for name in globals() if not name.startswith("_") or name.startswith("__")} | set(_LAZY))
