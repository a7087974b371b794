"""Simulated-oracle runs: the stored labels y answer every query.

One run = a method, a seed, initial labels, then ``budget`` ask/tell rounds. The
record keeps what is needed to compare methods and to reproduce the run: parameters,
the initial labels, the queries with their answers, cumulative hits, and timings.
``hits[t]`` counts the positives among the first t + 1 queries (the initial labels are
not counted). With a batch size B > 1, each round labels the top B points of one pass
before the model is updated once.
"""

import time
from dataclasses import replace

import numpy as np

from ..engine.core.registry import MethodPlan
from ..engine.guidance.seeding import seeded_top, seeding
from ..errors import BigsearchError, LabelError
from .plan import PlanOnStore, Start, plan_runs


def simulate(store, method, budget, seed=0, init=None, progress=None, batch_size=1, answers=None, start_from=None,
             y=None, init_progress=None, backend="local", n_threads=None, stop_at_recall=None, **options):
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
    ``stop_at_recall`` R: stop before the budget is spent once the recall reached is R
    with 95% confidence (engine/guidance/stopping.py); every run records, per query, the
    estimated recall with its interval either way (``recall_estimate``).
    ``options``: the method's options (engine/core/params.py), those of other methods left
    out; ``backend``, ``n_threads``: where it runs.

    Everything is checked before the run starts, by the plan that `bigsearch run` runs by
    too (experiments/plan.py): what needs no store before the store is opened.
    """
    plan = plan_runs(store, (method,), budget, options=options, seed=seed, start=Start(init, start_from=start_from),
                     batch_size=batch_size, answers=answers, y=y, backend=backend, n_threads=n_threads,
                     stop_at_recall=stop_at_recall)
    on_store = plan.on_store(plan.open_store())
    return run_planned(on_store, on_store.methods[0], 0, progress, init_progress)


def run_planned(on_store: PlanOnStore, method: MethodPlan, run: int, progress=None, init_progress=None):
    """Run ``run`` of ``method`` (one of ``on_store.methods``) as planned; returns its record
    (see :func:`simulate`)."""
    plan, seed = on_store.plan, on_store.plan.run_seed(run)
    method = method.for_seed(seed)
    init, start, batch_size = on_store.initial[run], on_store.start, plan.batch_for(method)
    compile_seconds = warm_up(on_store.store, method, batch_size, plan.backend)
    t0 = time.perf_counter()
    search = method.create(on_store.store, backend=plan.backend, n_threads=plan.n_threads)  # the run's one engine
    search.init_progress = init_progress
    try:
        oracle = Oracle(on_store.y, on_store.answers_for(method))
        search.tell([i for i, _ in init], oracle.told(init))
        stopping = Stopping(on_store.store.n, [label for _, label in init], plan.stop_at_recall)
        asked = _ask(search, oracle, plan.budget, batch_size, start, progress, t0, stopping)
        total_seconds = time.perf_counter() - t0  # the final ranking's pass is not the run's
        # e.g. LAS: bytes of X read to choose each round's queries (copied: the ranking's pass adds to them)
        details = {k: list(v) if isinstance(v, list) else v for k, v in search.run_details().items()}
        ranking = _final_ranking(search, method.spec.ranks, on_store.store.n - len(init) - len(asked.queries))
        remaining = _remaining(search, init, asked.queries)
    finally:
        search.close()
    record = {
        "method": method.name, "seed": seed, "params": search.params.as_dict(), "init": [list(p) for p in init],
        **({"start_from": start.describe()} if start is not None else {}),
        "batch_size": batch_size, "queries": asked.queries, "hits": asked.hits,
        "recall_estimate": stopping.estimates, "stopped": stopping.stopped_at,
        "timings": {"total_seconds": total_seconds, "init_seconds": asked.init_seconds,
                    "compile_seconds": compile_seconds, "iteration_seconds": asked.iteration_seconds,
                    "elapsed_seconds": asked.elapsed},
    }
    if ranking is not None:
        record["ranking"] = ranking
    record["remaining"] = remaining
    record.update(details)
    return record


class Oracle:
    """The answers to queries: the stored labels ``y``, or the ``answers`` (graded labels or
    scores) told instead when given; hits count the stored positives either way."""

    def __init__(self, y, answers=None):
        self.y, self.answers = y, answers

    def labels(self, batch):
        """The stored labels of ``batch``; every point must have one."""
        labels = [int(self.y[i]) for i in batch]
        unknown = [i for i, label in zip(batch, labels) if label < 0]
        if unknown:
            raise LabelError(f"the oracle has no label for point {unknown[0]}; "
                             "a simulation needs a fully labeled store")
        return labels

    def told(self, pairs):
        """What the search is told for (index, stored label) ``pairs``."""
        return [label if self.answers is None else float(self.answers[i]) for i, label in pairs]


class Asked:
    """A run's queries [index, stored label], cumulative hits and timings, as they come."""

    def __init__(self, t0):
        self.t0 = t0
        self.queries, self.hits, self.iteration_seconds, self.elapsed = [], [], [], []
        self.init_seconds = 0.0

    def add(self, batch, labels, progress):
        for i, label in zip(batch, labels):
            self.queries.append([i, label])
            self.hits.append((self.hits[-1] if self.hits else 0) + label)
            self.elapsed.append(time.perf_counter() - self.t0)
            if progress:
                progress(len(self.queries), self.hits[-1])


class Stopping:
    """The recall reached after each query, estimated from the answers in the order read
    (engine/guidance/stopping.py): [value, low, high] per query, and, with a target, the
    query after which it is reached (``stopped_at``, None before)."""

    def __init__(self, n, initial, target=None):
        self.n, self.target = n, target
        self.given = self.read = len(initial)
        self.answers = np.empty(max(n, self.given))  # in the order read (an array: no copy a query)
        self.answers[: self.given] = initial
        self.estimates, self.stopped_at = [], None

    def add(self, labels):
        """The answers of a batch; True when the run should stop."""
        from ..engine.guidance.stopping import recall_estimate, stop_reached

        for label in labels:
            self.answers[self.read] = label
            self.read += 1
            e = recall_estimate(self.answers[: self.read], self.n, given=self.given)
            self.estimates.append([_rounded(e.recall), _rounded(e.recall_low), _rounded(e.recall_high)])
        if self.target is not None and stop_reached(e, self.target):
            self.stopped_at = self.read - self.given
        return self.stopped_at is not None


def _rounded(value):
    return None if value != value else round(float(value), 5)       # NaN: no estimate yet


def _ask(search, oracle, budget, batch_size, start, progress, t0, stopping=None):
    """``budget`` queries in batches of ``batch_size``, each answered by the oracle, until
    ``stopping`` says the target recall is reached; the first batch pays for the
    initialization (timed apart)."""
    asked = Asked(t0)
    t_start = time.perf_counter()
    batch = _next_batch(search, min(batch_size, budget), start)
    asked.init_seconds = time.perf_counter() - t_start
    while len(asked.queries) < budget:
        t = time.perf_counter()
        if asked.queries:
            batch = _next_batch(search, min(batch_size, budget - len(asked.queries)), start)
        labels = oracle.labels(batch)
        search.tell(batch, oracle.told(zip(batch, labels)))
        if asked.queries:
            asked.iteration_seconds.append(time.perf_counter() - t)
        asked.add(batch, labels, progress)
        if stopping is not None and stopping.add(labels):
            break
    return asked


RANKING_SIZE = 100
WARM_ROWS = 64


def warm_up(store, method: MethodPlan, batch_size, backend="local"):
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
    try:
        search = _on_rows(method, m).create(tiny, backend="local", n_threads=1)
        try:
            search.tell([0, m - 1], [1, 0])
            for _ in range(2):
                batch = _next_batch(search, min(batch_size, search.n - search.n_labeled))
                search.tell(batch, [0] * len(batch))
            _final_ranking(search, method.spec.ranks, search.n - search.n_labeled)
        finally:
            search.close()
    except BigsearchError:
        pass         # a few rows may not make a valid search (degrees <= 0): the run says so if X does
    return time.perf_counter() - t


def _on_rows(method, m):
    """``method``'s plan for a search on ``m`` rows: at most 4 anchors (AGR), and a prior
    (LAS's pi) when none is given, as the rows' labels cannot give one."""
    fit = {"anchors": min(m, 4), "pi": getattr(method.options, "pi", None) or 0.5}
    fit = {k: v for k, v in fit.items() if k in method.spec.settings()}
    return replace(method, options=replace(method.options, **fit)) if fit else method


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

