"""Testing helpers: an independent dense reference and small synthetic data."""

from ..synthetic import clustered_points
from .dense import (
    brute_force_impact,
    dense_f,
    dense_fantasized_batch,
    dense_J,
    dense_K,
    dense_las_run,
    dense_query,
    dense_wnas,
)
from .streamed import pass_per_member_batch

__all__ = ["clustered_points", "brute_force_impact", "dense_f", "dense_J", "dense_K", "dense_fantasized_batch",
           "dense_las_run", "dense_query", "dense_wnas", "pass_per_member_batch"]
