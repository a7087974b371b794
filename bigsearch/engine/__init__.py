"""Engine: the search methods (ask/tell) built on chunk steps and a backend.

The methods are listed in ``registry.METHODS``. Names are imported on first use, so
that reading the registry or the parameters imports no numerical code.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .registry import METHODS, MethodSpec, method_names, method_spec

if TYPE_CHECKING:
    from .agr import AGR
    from .asg import ASG
    from .base import ActiveSearch, ChunkedSearch
    from .blr import BLR
    from .las import LAS
    from .params import LASParams
    from .random import RandomSearch
    from .rf import RandomForestSearch
    from .wnas import WNAS

_LAZY = {"ActiveSearch": "base", "ChunkedSearch": "base", "AGR": "agr", "ASG": "asg", "BLR": "blr", "LAS": "las",
         "LASParams": "params", "RandomSearch": "random", "RandomForestSearch": "rf",
         "WNAS": "wnas"}

__all__ = ["ActiveSearch", "ChunkedSearch", "AGR", "ASG", "BLR", "LAS", "LASParams", "RandomSearch",
           "RandomForestSearch", "WNAS", "METHODS", "MethodSpec", "method_names", "method_spec"]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
