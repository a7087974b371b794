"""A copy of a search engine in its current state, for computing an answer ahead.

On the local backend the per-point arrays are copied in memory and everything else is
deep-copied, so no pass over X is needed; elsewhere (a dask cluster) the labelling page
copies through ``export_state`` / ``from_state``, which costs one pass. Either way the
copy's next ``tell`` gives the state the original would have reached, bit for bit
(tests/test_serve.py checks it against a plain session).

A full copy of the per-point arrays is ~40 bytes a point for LAS: 400 MB at 10M, twice
per item shown. :func:`refit` instead turns an engine no longer needed (the branch not
taken, or the state before the answer) into a copy of another of the same lineage by
copying only what differs: with pruned queries, the blocks of rows either engine has
rescored since they parted and the labels either has been told, a few percent of the
rows. Which blocks differ is read from the pruner's per-block versions (engine/pruning/las.py):
a block's f and impact factor change only when a query reads it or a full pass rewrites
every block, and either gives the block a new version. Each copy gets a clock range of
its own, so the same version in two engines of a lineage means the same event, and the
block's rows are equal in both (labels aside, which are copied from the histories).
Anything else (no pruning, another lineage, a full pass since) copies every array, into
the arrays the engine already has (no fresh allocation).
"""

import copy
import itertools

import numpy as np

from ..backends import make_backend
from ..engine.pruning.las import LASPruning

CLOCK_RANGE = 1 << 40          # pruner clock ticks per copy: a copy's versions never meet another's
_ranges = itertools.count(1)
_lineages = itertools.count(1)
DIRTY_SHARE = 0.25             # above this share of blocks to copy, one copy of whole arrays is cheaper


def forkable(engine):
    """Whether :func:`fork` can copy this engine in memory (else use export/from_state)."""
    return engine.backend.name == "local" and not engine.has_pending


def fork(engine):
    """A new engine equal to ``engine`` (which must be :func:`forkable`)."""
    source = engine.backend
    clone = type(engine).__new__(type(engine))
    backend = make_backend(engine.store, "local", source.n_threads)
    backend.readahead = source.readahead
    _copy_globals(engine, clone, backend)
    for name in source.array_names():
        values = source.gather(name)
        backend.alloc(name, values.dtype, 0)
        backend.assign(name, values)
    backend.set_rebuild(clone.rebuild_recipe)
    return clone


def refit(target, source):
    """Make ``target`` (an engine from :func:`fork` or :func:`refit` that nothing else
    uses) equal to ``source`` (:func:`forkable`), reusing its arrays; returns the share
    of rows copied (1.0: every array was copied whole)."""
    if type(target) is not type(source) or target.backend.name != "local" \
            or set(target.backend.array_names()) != set(source.backend.array_names()):
        raise ValueError("refit needs two engines of the same method on the local backend")
    rows = _rows_that_differ(target, source)
    backend = target.backend
    _copy_globals(source, target, backend)
    share = 1.0
    if rows is None:
        for name in source.backend.array_names():
            backend.assign(name, source.backend.gather(name))
    else:
        for name in source.backend.array_names():
            backend.assign_rows(name, rows, source.backend.gather(name))
        share = len(rows) / source.n
    return share


def _copy_globals(engine, clone, backend):
    """Everything but the store, the backend's arrays and what never changes after the
    first pass (the pruning's block summaries), deep-copied from ``engine`` into
    ``clone``; the copy's pruner gets a clock range of its own."""
    shared = [engine.store, *_read_only(engine)]
    memo = {id(engine): clone, id(engine.backend): backend, **{id(x): x for x in shared}}
    lineage = engine.__dict__.setdefault("_fork_lineage", next(_lineages))
    values = {name: copy.deepcopy(value, memo) for name, value in engine.__dict__.items()
              if name not in ("store", "backend")}
    clone.__dict__.clear()
    clone.__dict__.update(values, store=engine.store, backend=backend, _fork_lineage=lineage)
    pruner = _pruner(clone)
    if pruner is not None:
        pruner.clock = next(_ranges) * CLOCK_RANGE


def _read_only(engine):
    pruning = getattr(engine, "pruning", None)
    if not isinstance(pruning, LASPruning):
        return []
    out = [x for x in (pruning.summaries, pruning.basis) if x is not None]
    return out + ([pruning.pruner.s] if pruning.pruner is not None else [])


def _pruner(engine):
    """LAS's pruner over all of X (the local backend: its versions say which blocks
    changed), or None."""
    pruning = getattr(engine, "pruning", None)
    return pruning.pruner if isinstance(pruning, LASPruning) else None


def _rows_that_differ(target, source):
    """The rows whose per-point state may differ (sorted), or None for all of them."""
    a, b = _pruner(target), _pruner(source)
    if a is None or b is None or a.sm is not b.sm or target.__dict__.get("_fork_lineage") is None \
            or target.__dict__.get("_fork_lineage") != source.__dict__.get("_fork_lineage"):
        return None
    blocks = np.flatnonzero(a.version != b.version)
    if len(blocks) > DIRTY_SHARE * len(a.version):
        return None
    starts, stops = a.sm.start[blocks], a.sm.stop[blocks]
    lens = stops - starts
    block_rows = np.arange(lens.sum()) + np.repeat(starts - np.concatenate([[0], np.cumsum(lens)[:-1]]), lens)
    told = _told_since_common(target.history, source.history)
    return np.union1d(block_rows, told)


def _told_since_common(h1, h2):
    """The points labeled in either history after their common beginning."""
    k = 0
    for (i, y), (j, z) in zip(h1, h2):
        if i != j or y != z:
            break
        k += 1
    return np.array(sorted({i for i, _ in h1[k:]} | {i for i, _ in h2[k:]}), np.int64)
