"""bigsearch: Active Search on datasets larger than memory.

LAS (Linearized Active Search), WNAS and the paper's baselines (dense ASG, AGR, random)
over chunked Zarr or HDF5 feature stores, streaming X once per label through numba kernels.
"""

__version__ = "0.1.0"

from .engine import AGR, ASG, LAS, WNAS, RandomSearch  # noqa: E402
from .errors import BigsearchError  # noqa: E402
from .session import Session  # noqa: E402
from .storage import create_store, open_store  # noqa: E402

__all__ = ["LAS", "WNAS", "AGR", "ASG", "RandomSearch", "Session", "open_store", "create_store", "BigsearchError",
           "__version__"]
