"""Engine: the search methods (ask/tell) built on chunk steps and a backend.

Four rooms (docs/architecture.md): ``core`` (what every method shares), ``methods`` (one
module per method), ``pruning`` (pruned queries) and ``guidance`` (cold starts, estimates
of positives left). The methods are listed in ``core.registry.METHODS``. Names are
imported on first use, so that reading the registry or the parameters imports no
numerical code.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .core.registry import METHODS, MethodSpec, method_names, method_spec

if TYPE_CHECKING:
    from .core.base import ActiveSearch, ChunkedSearch
    from .core.params import LASParams, PruneOptions
    from .methods.agr import AGR
    from .methods.asg import ASG
    from .methods.blr import BLR
    from .methods.las import LAS
    from .methods.random import RandomSearch
    from .methods.rf import RandomForestSearch
    from .methods.wnas import WNAS

_LAZY = {"ActiveSearch": "core.base", "ChunkedSearch": "core.base", "AGR": "methods.agr", "ASG": "methods.asg",
         "BLR": "methods.blr", "LAS": "methods.las", "LASParams": "core.params", "PruneOptions": "core.params",
         "RandomSearch": "methods.random",
         "RandomForestSearch": "methods.rf", "WNAS": "methods.wnas"}

__all__ = ["ActiveSearch", "ChunkedSearch", "AGR", "ASG", "BLR", "LAS", "LASParams", "PruneOptions", "RandomSearch",
           "RandomForestSearch", "WNAS", "METHODS", "MethodSpec", "method_names", "method_spec"]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
