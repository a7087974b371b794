"""Engine: the search methods (ask/tell) built on chunk steps and a backend."""

from .agr import AGR
from .asg import ASG
from .base import ActiveSearch
from .las import LAS
from .params import LASParams
from .random import RandomSearch
from .rf import RandomForestSearch
from .wnas import WNAS

METHODS = {"las": LAS, "wnas": WNAS, "agr": AGR, "asg": ASG, "random": RandomSearch, "rf": RandomForestSearch}

__all__ = ["ActiveSearch", "AGR", "ASG", "LAS", "LASParams", "RandomSearch", "RandomForestSearch", "WNAS", "METHODS"]
