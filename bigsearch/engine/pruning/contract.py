"""The pruning contract: what a search gives its pruning, and what a pruning offers it.

A search whose queries may be pruned (a ``PrunableSearch``, engine/core/base.py) builds
its pruning from one :class:`~bigsearch.engine.core.params.PruneOptions` and drives it
through :class:`Pruning`; the pruning reads the search only through :class:`PrunedSearch`
(public names: no ``_private`` attribute) and reaches X and the per-point state only
through the :class:`~bigsearch.backends.Backend` contract: ``map`` and ``map_chunks``
run its steps where the chunks live. Where its caches live follows from
``backend.in_process``, decided once by engine/pruning/placement.py: in this process
(the local backend: one cache over all of X, kept here) or per chunk where the chunks
live (the dask backend: each chunk keeps its own cache in its state, and a query is one
round trip returning each chunk's exact top k); the placement resets the caches, takes
labels to them, gathers a query's top k and counts the rows read, for every method.

A new method gets pruned queries by writing a class that satisfies :class:`Pruning`
over the method's public interface, and passing it to ``_start_pruning``
(docs/contributing.md, "Add a search method").
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import numpy as np

from ...backends import Backend, StepCall
from ...storage import FeatureStore
from ..core.params import PruneOptions


class PrunedSearch(Protocol):
    """What a search gives its pruning (LAS, WNAS, BLR and screen implement it; a method adds the
    few numbers its scores need, e.g. LAS's ``score_vectors()``, BLR's ``scoring_now()``)."""

    store: FeatureStore
    backend: Backend
    params: Any

    @property
    def labels(self) -> np.ndarray:
        """Per point: its label, or -1 when not labeled (read-only, always current)."""

    @property
    def n_labeled(self) -> int:
        """Labels told so far."""

    def label_values(self, idx: np.ndarray) -> np.ndarray:
        """The labels told for points ``idx`` (graded ones included, float64)."""

    def rebuild_recipe(self) -> StepCall:
        """The step that recomputes a chunk's state from the search's global state."""

    def rebuild_everywhere(self) -> None:
        """Every chunk's state recomputed by the rebuild recipe (one pass over X)."""

    def count_read(self, nbytes: int) -> None:
        """Bytes of X read towards the next query (what the pruning reads is reported here)."""


@runtime_checkable
class Pruning(Protocol):
    """What a pruning offers its search (LASPruning, WNASPruning, and over linear.py BLRPruning and ScreenPruning).

    Between two full passes the search tells its pruning the labels (``labels_told``)
    instead of passing over X, and asks it for the best points (``top``); the pruning
    reads only the blocks of rows that could hold them. After any full pass the search
    calls ``after_full_pass``. The queries are the full pass's, bit for bit."""

    options: PruneOptions
    status: str  # "on: ..." or "off: why" (``pruning_status``)
    stale: bool  # per-point values of blocks not read lag behind the labels

    @property
    def active(self) -> bool:
        """Whether queries are pruned (``status`` starts with "on")."""

    def after_full_pass(self) -> None:
        """Every chunk's per-point state is current: reset the block caches (building
        the block summaries the first time)."""

    def labels_told(self, idx: np.ndarray, lab: np.ndarray) -> bool:
        """New labels into the chunks' state and the block caches, without a pass over
        X; False when these labels need a full pass instead (the search then makes it)."""

    def top(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The k best unlabeled points and their scores, ties to the lowest index, as
        the full pass would choose them; the rows read are reported by ``count_read``."""

    def catch_up(self) -> None:
        """Every block brought up to date (before the search reads every score)."""
