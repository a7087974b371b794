"""Simulated-oracle runs: the stored labels y answer every query.

One run = a method, a seed, initial labels, then ``budget`` ask/tell rounds. The
record keeps what is needed to compare methods and to reproduce the run: parameters,
the initial labels, the queries with their answers, cumulative hits, and timings.
``hits[t]`` counts the positives among the first t + 1 queries (the initial labels are
not counted). With a batch size B > 1, each round labels the top B points of one pass
before the model is updated once.
"""

import time
from os import PathLike

import numpy as np

from ..engine.core.registry import method_spec
from ..engine.guidance.seeding import resolve_start, seeded_top, seeding
from ..errors import BigsearchError, LabelError, ParameterError
from ..storage import FeatureStore, open_store


def initial_labels(y, seed, init_index=None, init_positives=1, init_negatives=0):
    """The starting labels [(index, label)]: given indices, or random positives and
    negatives drawn from y with ``seed`` (the same for every method of a run)."""
    if init_index is not None:
        out = []
        for i in init_index:
            if not 0 <= i < len(y):
                raise LabelError(f"init_index {i} is out of range: the store has {len(y)} points")
            if y[i] < 0:
                raise LabelError(f"init_index {i}: the store has no label for point {i}")
            out.append((int(i), int(y[i])))
        return out
    rng = np.random.default_rng(seed)
    out = []
    for label, k in ((1, init_positives), (0, init_negatives)):
        pool = np.flatnonzero(y == label)
        if k > len(pool):
            raise ParameterError(f"asked for {k} initial {'positives' if label else 'negatives'} "
                                 f"but the store has {len(pool)}")
        out += [(int(i), label) for i in rng.choice(pool, size=k, replace=False)]
    return out


def check_budget(budget, left):
    """Refuse a budget larger than the ``left`` points unlabeled after the initial labels:
    it would label everything, slowly, to no purpose (``bigsearch run`` refuses the same)."""
    if budget > left:
        raise ParameterError(f"budget {budget:,} is more than the {left:,} points left unlabeled after the "
                             f"initial labels; give a budget of at most {left:,}")


def method_options(method, options, seed=None):
    """``method``'s options record (engine/core/params.py) from ``options``, a set that may
    serve several methods (each takes the names it has; None: the default), checked
    without a store; a method with a ``seed`` option (random search) gets ``seed``."""
    return method_spec(method).validate({**options, "seed": seed})


def make_search(store, method, seed=None, *, backend="local", n_threads=None, **options):
    """An ask/tell search object for ``method`` with only the options it takes (see
    :func:`method_options`), on ``backend`` with ``n_threads``."""
    return method_spec(method).create(store, method_options(method, options, seed), backend=backend,
                                      n_threads=n_threads)


def simulate(store, method, budget, seed=0, init=None, progress=None, batch_size=1, answers=None, start_from=None,
             y=None, init_progress=None, backend="local", n_threads=None, **options):
    """Run one simulated search; returns its record (a JSON-able dict).

    ``store``: a store's path or URL, an open store, or X as an array (NumPy,
    ``zarr.Array``, ``h5py.Dataset``, dask), whose labels are then ``y`` (n values: 1, 0,
    or -1 unknown; a store has its own).

    ``init``: the starting labels [(index, label)], default one random positive.
    ``budget``: the number of queries, at most the points left unlabeled after ``init``
    (a larger one is refused, as ``bigsearch run`` does).
    ``progress(step, hits)`` is called after every query, if given;
    ``init_progress(what, done, total)`` during the initialization (AGR's k-means).
    The kernels are compiled first, on a few of the store's rows, and timed apart:
    ``timings["compile_seconds"]``, kept out of ``init_seconds``.
    ``answers``: graded labels in [0, 1], one per point, that the oracle tells instead of
    the stored 0/1 labels (for methods that take graded labels), or any finite numbers
    (scores) for a method that regresses them (blr); hits still count the stored positives.
    ``start_from``: a cold start (engine/guidance/seeding.py), a spec string (``ids:...``,
    ``vector:FILE.npy``, ``keyword:COLUMN=WORDS``) or a ``StartFrom``: known positives are
    the initial labels (answered by the stored labels, like ``init``); a vector or keyword
    chooses the queries until the first positive, from no initial labels.
    ``batch_size`` B: each round takes the top B unlabeled points of one pass, labels
    them all, then updates once (B = 1 is the sequential algorithm). A method with no
    scores to rank by (random search) draws one at a time, so it ignores B.
    ``options``: the method's options (engine/core/params.py), those of other methods left
    out (:func:`method_options`); ``backend``, ``n_threads``: where it runs.
    """
    spec = method_spec(method)
    settings = method_options(method, options, seed)       # checked before the store is opened
    store = _open_with_labels(store, y)
    y = store.labels()
    if answers is not None:
        answers = np.asarray(answers, np.float64)
        real = method_spec(method).cls.REAL_LABELS      # a regression: any finite target
        if answers.shape != (store.n,) or not np.all(np.isfinite(answers) if real else (answers >= 0) & (answers <= 1)):
            what = "finite numbers" if real else "graded labels in [0, 1]"
            raise ParameterError(f"answers must be {store.n} {what}, one per point")
    if y is None:
        raise ParameterError(f"{store.path} has no labels (y), so no oracle can be simulated; pass "
                             "them as y=, or use an interactive session instead")
    start = resolve_start(store, start_from)
    if start is not None and init is None:
        init = [] if start.positives is None else initial_labels(y, seed, start.positives.tolist())
    init = initial_labels(y, seed) if init is None else init
    if budget < 0:
        raise ParameterError(f"budget must be >= 0, got {budget}")
    if batch_size < 1:
        raise ParameterError(f"batch_size must be >= 1, got {batch_size}")
    batch_size = int(batch_size) if spec.ranks else 1
    check_budget(budget, store.n - len(init))
    compile_seconds = warm_up(store, method, seed, batch_size, options, backend)
    t0 = time.perf_counter()
    search = spec.create(store, settings, backend=backend, n_threads=n_threads)     # the run's one engine
    search.init_progress = init_progress
    queries, hits, iteration_seconds, elapsed = [], [], [], []
    try:
        search.tell([i for i, _ in init], [lab if answers is None else float(answers[i]) for i, lab in init])
        t_start = time.perf_counter()
        batch = _next_batch(search, min(batch_size, budget), start)   # the first pays for initialization
        init_seconds = time.perf_counter() - t_start
        while len(queries) < budget:
            t = time.perf_counter()
            if queries:
                batch = _next_batch(search, min(batch_size, budget - len(queries)), start)
            labels = [int(y[i]) for i in batch]
            unknown = [i for i, label in zip(batch, labels) if label < 0]
            if unknown:
                raise LabelError(f"the oracle has no label for point {unknown[0]}; "
                                 "a simulation needs a fully labeled store")
            search.tell(batch, labels if answers is None else [float(answers[i]) for i in batch])
            if queries:
                iteration_seconds.append(time.perf_counter() - t)
            for i, label in zip(batch, labels):
                queries.append([i, label])
                hits.append((hits[-1] if hits else 0) + label)
                elapsed.append(time.perf_counter() - t0)
                if progress:
                    progress(len(queries), hits[-1])
        total_seconds = time.perf_counter() - t0        # the final ranking's pass is not the run's
        # e.g. LAS: bytes of X read to choose each round's queries (copied: the ranking's pass adds to them)
        details = {k: list(v) if isinstance(v, list) else v for k, v in search.run_details().items()}
        ranking = _final_ranking(search, spec.ranks, store.n - len(init) - len(queries))
        remaining = _remaining(search, init, queries)
    finally:
        search.close()
    record = {
        "method": method, "seed": seed, "params": search.params.as_dict(), "init": [list(p) for p in init],
        **({"start_from": start.describe()} if start is not None else {}),
        "batch_size": batch_size, "queries": queries, "hits": hits,
        "timings": {"total_seconds": total_seconds, "init_seconds": init_seconds, "compile_seconds": compile_seconds,
                    "iteration_seconds": iteration_seconds, "elapsed_seconds": elapsed},
    }
    if ranking is not None:
        record["ranking"] = ranking
    record["remaining"] = remaining
    record.update(details)
    return record


RANKING_SIZE = 100
WARM_ROWS = 64


def warm_up(store, method, seed, batch_size, options, backend="local"):
    """Compile ``method``'s kernels for ``store``'s chunk type by a short search on a copy
    of its first rows (at most WARM_ROWS: numba compiles on first call; the kernels' disk
    cache makes later processes fast); returns the seconds it took. Skipped (0) for
    encoded stores and cluster backends, whose first round still includes it."""
    with store.chunk(0) as x:
        if not isinstance(x, np.ndarray) or backend not in (None, "local"):
            return 0.0
    t = time.perf_counter()
    m = min(store.n, WARM_ROWS)
    if m < 2:
        return 0.0
    rows = np.ascontiguousarray(store.read_stored_rows(np.arange(m)))  # its chunks are read-only, as X's are
    from ..storage.arrays import NumpyArrayStore
    tiny = NumpyArrayStore(rows, chunk_rows=max(1, m // 2))
    settings = {**options, "anchors": min(m, 4), "pi": options.get("pi") or 0.5}
    try:
        search = make_search(tiny, method, seed=seed, backend="local", n_threads=1, **settings)
        try:
            search.tell([0, m - 1], [1, 0])
            for _ in range(2):
                batch = _next_batch(search, min(batch_size, search.n - search.n_labeled))
                search.tell(batch, [0] * len(batch))
            _final_ranking(search, method_spec(method).ranks, search.n - search.n_labeled)
        finally:
            search.close()
    except BigsearchError:
        pass         # a few rows may not make a valid search (degrees <= 0): the run says so if X does
    return time.perf_counter() - t


def _open_with_labels(store, y):
    """The store to search; ``y``, the labels of X given as an array, go with it."""
    if y is None:
        return open_store(store)
    if isinstance(store, (str, PathLike, FeatureStore)):
        raise ParameterError(f"y= gives the labels of X passed as an array; the store {getattr(store, 'path', store)} "
                             "has its own (its y array)")
    return open_store(store, {"y": y})


def _final_ranking(search, ranks, unlabeled):
    """The top RANKING_SIZE unlabeled points once the budget is spent, with their
    selection scores (None for a method with no scores); one more pass over X."""
    if not ranks or unlabeled <= 0:
        return None
    index, score = search.top(min(RANKING_SIZE, unlabeled))
    return {"index": [int(i) for i in index], "score": [float(v) for v in score]}


def _remaining(search, init, queries):
    """The estimates of positives left once the budget is spent (engine/guidance/remaining.py): the
    score sum for a method whose f is a probability; the answers counted are the initial
    labels and the queries'."""
    from ..engine.guidance.remaining import remaining_summary
    f = search.f if search.PROBABILITY_SCORES else None
    answers = np.array([lab for _, lab in init] + [lab for _, lab in queries], np.float64)
    return remaining_summary(f, search.labels, answers)


def _next_batch(search, k, start=None):
    """The next k points to label: ask() for one, the top k of one pass for more (the
    start's candidates while it seeds the search, engine/guidance/seeding.py)."""
    if k >= 1 and seeding(start, search.labels):
        return [int(i) for i in seeded_top(search, start, k).indices]
    if k <= 1:
        return [search.ask()] if k == 1 else []
    return search.next_batch(k)

