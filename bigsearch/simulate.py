"""The old home of one simulated search, kept so ``from bigsearch.simulate import simulate``
works: the loop lives beside the experiments it serves (experiments/simulate.py)."""

from .experiments.simulate import RANKING_SIZE, check_budget, initial_labels, make_search, simulate, warm_up

__all__ = ["RANKING_SIZE", "check_budget", "initial_labels", "make_search", "simulate", "warm_up"]
