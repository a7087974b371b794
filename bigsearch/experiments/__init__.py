"""Batch experiments: many runs of several methods with paired starts, recall curves,
the paper's Table 1 and Table 2 (docs/experiments.md).

``plan`` resolves an experiment once (every check, then a frozen plan), ``runner`` runs
and resumes a plan (``resume``: the journal; ``simulate``: one run), ``reports`` turns
runs into summaries, curves, tables and CSV, ``plots`` draws the recall figure
(matplotlib, optional), ``pairs`` is the Table 2 experiment.
"""

from .pairs import pair_experiment, pairs_table, run_pairs, write_pairs
from .plan import Experiment, ExperimentPlan, plan_runs
from .reports import checkpoints, markdown_table, recall_curves, summarize
from .runner import run_experiment, run_methods

__all__ = ["Experiment", "ExperimentPlan", "plan_runs", "run_experiment", "run_methods", "pair_experiment",
           "pairs_table", "run_pairs", "write_pairs", "checkpoints", "markdown_table", "recall_curves", "summarize"]
