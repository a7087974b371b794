"""A copy of a search engine in its current state, for computing an answer ahead.

On the local backend the per-point arrays are copied in memory (a memcpy of a few
arrays of n values) and everything else is deep-copied, so no pass over X is needed;
elsewhere (a dask cluster) the labelling page copies through ``export_state`` /
``from_state``, which costs one pass. Either way the copy's next ``tell`` gives the state the original
would have reached, bit for bit (tests/test_serve.py checks it against a plain session).
"""

import copy

from ..backends.local import LocalBackend


def forkable(engine):
    """Whether :func:`fork` can copy this engine in memory (else use export/from_state)."""
    return type(engine.backend) is LocalBackend and not engine._pending


def fork(engine):
    """A new engine equal to ``engine`` (which must be :func:`forkable`)."""
    source = engine.backend
    clone = type(engine).__new__(type(engine))
    backend = LocalBackend(engine.store, source.n_threads, source.readahead)
    memo = {id(engine): clone, id(engine.store): engine.store, id(source): backend}
    for name, value in engine.__dict__.items():
        if name not in ("store", "backend"):
            setattr(clone, name, copy.deepcopy(value, memo))
    clone.store, clone.backend = engine.store, backend
    for name, values in source._arrays.items():
        backend.alloc(name, values.dtype, 0)
        backend.assign(name, values)
    backend.set_rebuild(clone.rebuild_recipe)
    return clone
