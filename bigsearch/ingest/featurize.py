"""Featurization: input columns -> encoded features -> IDF -> MinMax map -> normalize -> bias -> RFF.

A :class:`Plan` is the whole recipe (it is what the store records under
``featurization``): for every input column, how it becomes features (a number kept as
it is, K quantile bins one-hot encoded, categories one-hot encoded, or a SMILES string
turned into a fingerprint), then the optional steps: inverse document frequency
weights (weighting.py) and the MinMax-kernel feature map (minmax.py) for sparse
features, then the paper's normalize, bias and RFF. ``encode`` and ``finish`` are plain functions of a
block and the plan, so they can run anywhere a block is.
"""

import sys
import threading
import time
from concurrent.futures import Future
from dataclasses import asdict, dataclass, field, replace

import numpy as np

from ..errors import InputError
from .columns import documents, numeric_matrix, text_values
from .fingerprints import fingerprint_entries, sparse_fingerprints, worker_tasks
from .minmax import Entries, entries_buckets, minmax_features, minmax_params, minmax_width, one_hot_features
from .stats import VOCABULARY_CAP, coarsen, encode_column, quantile_edges
from .text import auto_dim, fit_text_model, text_features
from .weighting import apply_idf, idf_weights
from .workers import worker_map, workers_running

MAX_CATEGORIES = VOCABULARY_CAP


@dataclass
class ColumnPlan:
    index: int                  # the column in the input
    name: str
    kind: str                   # "number", "bins", "onehot", "fingerprint" or "text"
    edges: list = None          # bins: inner cut points (after rounding to ``level``)
    level: int = 0              # bins: mantissa bits dropped before comparing with the edges
    categories: list = None     # onehot: the values, in feature order
    fingerprint: object = None  # fingerprint: its FingerprintSpec
    text: object = None         # text: its TextSpec (ingest/text.py)
    sources: list = None        # text: the input columns joined into the document
    text_model: object = None   # text: the TextModel fitted after the first pass (not recorded)

    @property
    def width(self):
        if self.kind == "number":
            return 1
        if self.kind == "fingerprint":
            return self.fingerprint.bits
        if self.kind == "text":
            return self.text.dim
        return len(self.edges) + 1 if self.kind == "bins" else len(self.categories)

    def feature_names(self):
        if self.kind == "number":
            return [self.name]
        if self.kind == "fingerprint":
            return [f"{self.name}:{self.fingerprint.kind}[{k}]" for k in range(self.width)]
        if self.kind == "text":
            return [f"{self.name}:{self.text.projection}[{k}]" for k in range(self.width)]
        if self.kind == "onehot":
            return [f"{self.name}={c}" for c in self.categories]
        bounds = ["-inf", *[f"{e:g}" for e in self.edges], "inf"]
        return [f"{self.name} in ({a}, {b}]" for a, b in zip(bounds, bounds[1:])]


@dataclass
class Plan:
    columns: list
    normalize: bool = False
    bias: bool = False
    rff: dict = None            # {"dim": D, "gamma": G, "seed": S}
    dropped: list = field(default_factory=list)
    not_features: list = field(default_factory=list)   # (column, why, how to keep it): left out by ingest
    idf: dict = None            # {"rows": n, "document_frequency": [df_k]} once pass 1 filled it in
    minmax: dict = None         # {"samples": D, "buckets": B, "power": p, "seed": S}

    @property
    def encoded_width(self):
        return sum(c.width for c in self.columns)

    @property
    def mapped_width(self):
        """Features after IDF and the MinMax map, before the bias."""
        return minmax_width(self.minmax) if self.minmax else self.encoded_width

    @property
    def width(self):
        if self.rff:
            return self.rff["dim"]
        return self.mapped_width + int(self.bias)

    def describe(self):
        steps = ["encode"] + [s for s, on in (("idf", self.idf is not None), ("minmax", bool(self.minmax)),
                                               ("normalize", self.normalize), ("bias", self.bias),
                                               ("rff", bool(self.rff))) if on]
        out = {"steps": steps, "n_features": self.width, "encoded_features": self.encoded_width,
               "columns": [_column_record(c) for c in self.columns],
               "normalize": self.normalize, "bias": self.bias, "dropped": self.dropped,
               "not_features": [{"column": n, "why": why, "how": how} for n, why, how in self.not_features]}
        if self.idf is not None:
            out["idf"] = {**self.idf, "weights": "ln((1 + rows) / (1 + document_frequency)) + 1, "
                                                 "document frequencies over every row read"}
        if self.minmax:
            out["minmax"] = {**self.minmax, "kernel": "sum_k min(x_k, x'_k) / sum_k max(x_k, x'_k), to the power p",
                             "inner_product": "K^p + (1 - K^p) / B in expectation (bigsearch/ingest/minmax.py)",
                             "rng": "numpy.random.default_rng([seed, 2])"}
        if self.rff:
            out["rff"] = {**self.rff, "kernel": "exp(-gamma ||x - x'||^2)",
                          "map": "sqrt(2/D) cos(x W + b), W = rng.normal(0, sqrt(2 gamma), (r, D)), "
                                 "b = rng.uniform(0, 2 pi, D), rng = numpy.random.default_rng([seed, 1])"}
        if not self.rff and not self.minmax and self.encoded_width <= 4096:
            out["feature_names"] = [n for c in self.columns for n in c.feature_names()] + \
                (["bias"] if self.bias else [])
        return out


def _column_record(c):
    record = {k: v for k, v in asdict(replace(c, text_model=None)).items() if v is not None}
    if c.kind != "bins":
        record.pop("level")
    if c.fingerprint is not None:
        record["fingerprint"] = c.fingerprint.describe()
    if c.text is not None:
        record["text"] = c.text.describe() | {
            "weights": "(1 + ln count) ln((1 + n) / (1 + df)) + 1 per hashed word n-gram, unit length; "
                       "then the projection (ingest/text.py)"}
        if c.text_model is not None:
            record["text"] |= c.text_model.describe()
    return record


def document_frequencies(columns, stats):
    """Per encoded feature, the rows where it is non-zero, from the first pass: counted for
    numbers and fingerprints, the category counts for one-hot, the bin counts for bins."""
    parts = []
    for c in columns:
        if c.kind == "onehot":
            vocab = stats["vocab"][c.index]
            parts.append([vocab[v] for v in c.categories])
        elif c.kind == "bins":
            _, values, counts = stats["sketch"][c.index]
            bins = np.searchsorted(c.edges, values, side="left")
            parts.append(np.bincount(bins, weights=counts, minlength=c.width))
        elif c.kind == "text":              # already TF-IDF: a weight of 1 (df = rows)
            parts.append(np.full(c.width, stats["rows"]))
        else:
            parts.append(stats["df"][c.index])
    return np.concatenate([np.asarray(p, np.int64).ravel() for p in parts])


def finish_plan(plan, stats, bins):
    """Fill in the vocabularies, bin edges and document frequencies from the first pass's
    statistics."""
    finish_columns(plan.columns, stats, bins)
    if plan.idf is not None:
        plan.idf = {"rows": int(stats["rows"]),
                    "document_frequency": document_frequencies(plan.columns, stats).tolist()}
    return plan


def finish_columns(columns, stats, bins):
    """Fill in the vocabularies and bin edges from the first pass's statistics."""
    for c in columns:
        if c.kind == "onehot":
            vocab = stats["vocab"].get(c.index, {})
            if not vocab:
                raise InputError(f"column {c.name} has no values to encode")
            c.categories = sorted(vocab)
        elif c.kind == "bins":
            sk = stats["sketch"][c.index]
            c.level, c.edges = int(sk[0]), quantile_edges(sk, bins)
        elif c.kind == "text":
            c.text = auto_dim(c.text, stats["text"][c.index]["rows"])
            c.text_model = fit_text_model(stats["text"][c.index], c.text)
    return columns


# -- the transform ----------------------------------------------------------------------
def encode(block, plan):
    """The encoded features of a block (float64, m x plan.encoded_width)."""
    numbers = [c for c in plan.columns if c.kind in ("number", "bins")]
    values = numeric_matrix(block, [c.index for c in numbers]) if numbers else None
    if all(c.kind == "number" for c in plan.columns):
        return values
    m = len(block)
    Z = np.zeros((m, plan.encoded_width))
    rows = np.arange(m)
    offset, k = 0, 0
    for c in plan.columns:
        if c.kind == "number":
            Z[:, offset] = values[:, k]
        elif c.kind == "bins":
            Z[rows, offset + np.searchsorted(c.edges, coarsen(values[:, k], c.level), side="left")] = 1
        elif c.kind == "fingerprint":
            encode_column(block, c.index, c.fingerprint, Z[:, offset:offset + c.width])
        elif c.kind == "text":
            docs = documents(block, c.sources, c.text.column_weights)
            text_features(docs, c.text_model, Z[:, offset:offset + c.width])
        else:
            codes = _category_codes(block, c)
            hit = codes >= 0
            Z[rows[hit], offset + codes[hit]] = 1
        k += c.kind in ("number", "bins")
        offset += c.width
    return Z


def _encoded(block, plan):
    """:func:`encode`'s features, or, for one fingerprint column going straight into the
    MinMax map, their non-zero entries (:class:`Entries`): the map reads only those, so the
    dense block (16 MiB per 1,024 molecules of 2,048 bits) is never made."""
    if _fingerprints_mapped(plan):
        c = plan.columns[0]
        smiles = text_values(block, c.index).to_pylist()
        return Entries(len(block), *fingerprint_entries(smiles, c.fingerprint, block.where))
    return encode(block, plan)


def _fingerprints_mapped(plan):
    """Whether the plan is one fingerprint column going straight into the MinMax map."""
    return plan.minmax and plan.idf is None and len(plan.columns) == 1 and plan.columns[0].kind == "fingerprint"


def _mapped_fingerprints(block, plan, weights, dtype):
    """A block of molecules through the MinMax map, the map run beside the fingerprints in
    the worker processes (:func:`fingerprint_buckets`), which send back only each row's
    buckets: (the one-hot rows as ``dtype``, seconds fingerprinting, seconds mapping).
    While the map's random numbers are still being drawn (``weights``, a Future: the
    first blocks), the workers parse meanwhile and map once they are drawn."""
    c = plan.columns[0]
    smiles = text_values(block, c.index).to_pylist()
    n_buckets = plan.minmax["buckets"]
    if isinstance(weights, Future) and not weights.done():
        parsed = worker_tasks(fingerprint_buckets, smiles, c.fingerprint, None, n_buckets, where=block.where)
        entries = [part[0] for _, part in parsed]
        mapped = worker_map(map_entries, entries, (weights.result()["minmax"], n_buckets))
        found = [(a, (*m[:2], part[2], m[2])) for (a, part), m in zip(parsed, mapped)]
    else:
        params = (weights.result() if isinstance(weights, Future) else weights)["minmax"]
        found = worker_tasks(fingerprint_buckets, smiles, c.fingerprint, params, n_buckets, where=block.where)
    shape = (len(smiles), plan.mapped_width)
    Z = dtype.zeros(shape) if isinstance(dtype, RowBuffers) else np.zeros(shape, dtype)
    if not found:
        return Z, 0.0, 0.0
    buckets = np.concatenate([part[0] for _, part in found])
    rows = np.concatenate([a + part[1] for a, part in found])
    one_hot_features(buckets, rows, plan.minmax, out=Z)
    return Z, sum(part[2] for _, part in found), sum(part[3] for _, part in found)


class RowBuffers:
    """Where the MinMax map's rows of molecules are made, in the store's type (``dtype``):
    arrays reused once nothing else holds them (the writer has joined or written their
    rows), since a fresh 16 MiB array a block costs its pages' faults and zeroing (11 us a
    row measured, against 2 us reused). In this process only (never sent to dask workers)."""

    def __init__(self, dtype, keep=8):
        self.dtype = np.dtype(dtype)
        self._arrays, self._keep, self._lock = [], keep, threading.Lock()

    def zeros(self, shape):
        """An array of zeros of ``shape``: a kept one that only this list holds, if any."""
        with self._lock:
            for i in range(len(self._arrays)):
                if self._arrays[i].shape == shape and sys.getrefcount(self._arrays[i]) == 2:  # the list, the call
                    self._arrays[i].fill(0)
                    return self._arrays[i]
            out = np.zeros(shape, self.dtype)
            if len(self._arrays) < self._keep:
                self._arrays.append(out)
            return out


def fingerprint_buckets(smiles, spec, params, n_buckets):
    """A task of the worker processes (workers.py) for :func:`_mapped_fingerprints`: the
    fingerprints of a list of SMILES and their MinMax map, on this one thread, up to each
    row's buckets (:func:`map_entries`): (buckets, rows with a positive entry, seconds
    fingerprinting, seconds mapping, index of the first string RDKit cannot parse or -1).
    Without ``params``, the fingerprints only: (their :class:`Entries`, None, seconds,
    0, that index)."""
    t0 = time.perf_counter()
    rows, columns, values, bad = sparse_fingerprints(smiles, spec)
    parsing = time.perf_counter() - t0
    entries = Entries(bad if bad >= 0 else len(smiles), rows, columns, values)
    if params is None:
        return entries, None, parsing, 0.0, bad
    buckets, mapped, mapping = map_entries(entries, params, n_buckets)
    return buckets, mapped, parsing, mapping, bad


def map_entries(entries, params, n_buckets):
    """A worker task: :func:`entries_buckets` on one thread, and the seconds it took."""
    t0 = time.perf_counter()
    buckets, mapped = entries_buckets(entries, params, n_buckets, n_threads=1)
    return buckets, mapped, time.perf_counter() - t0


def _category_codes(block, c):
    import pyarrow as pa
    import pyarrow.compute as pc
    values = text_values(block, c.index)
    codes = pc.index_in(values, value_set=pa.array([str(v) for v in c.categories], pa.string()))
    return pc.fill_null(codes, -1).to_numpy(zero_copy_only=False)


def rff_weights(r, rff):
    rng = np.random.default_rng([rff["seed"], 1])
    W = rng.normal(0.0, np.sqrt(2.0 * rff["gamma"]), (r, rff["dim"]))
    b = rng.uniform(0.0, 2 * np.pi, rff["dim"])
    return W, b


def prepare(plan):
    """What the steps after encoding need, computed once per ingest: IDF weights, the
    MinMax map's random numbers, the RFF weights (a dict, passed to every block)."""
    out = {}
    if plan.idf is not None:
        out["idf"] = idf_weights(plan.idf["document_frequency"], plan.idf["rows"])
    if plan.minmax:
        out["minmax"] = minmax_params(plan.encoded_width, plan.minmax)
    if plan.rff:
        out["rff"] = rff_weights(plan.mapped_width + int(plan.bias), plan.rff)
    return out


def finish(Z, plan, weights=None):
    """IDF, the MinMax map, normalize, append the bias, map through random Fourier
    features (as the plan says; ``weights`` from :func:`prepare`). Returns (features,
    number of all-zero rows that could not be normalized)."""
    Z, zero_rows, _ = _finish_timed(Z, plan, weights or {})
    return Z, zero_rows


def _finish_timed(Z, plan, weights, mapped=False):
    """:func:`finish`, and the seconds spent in the feature maps (MinMax, RFF); ``mapped``:
    Z has been through the MinMax map already."""
    zero_rows, map_seconds = 0, 0.0
    if plan.idf is not None:
        Z = apply_idf(Z, weights["idf"])
    if plan.minmax and not mapped:
        t0 = time.perf_counter()
        Z = minmax_features(Z, plan.minmax, weights["minmax"])
        map_seconds += time.perf_counter() - t0
    if plan.normalize:
        norms = row_norms(Z)
        zero = norms == 0
        zero_rows = int(zero.sum())
        Z = Z / np.where(zero, 1.0, norms)[:, None]
    if plan.bias:
        Z = np.hstack([Z, np.ones((len(Z), 1))])
    if plan.rff:
        t0 = time.perf_counter()
        W, b = weights["rff"]
        Z = np.sqrt(2.0 / plan.rff["dim"]) * np.cos(Z @ W + b)
        map_seconds += time.perf_counter() - t0
    return Z, zero_rows, map_seconds


def row_norms(Z):
    """Euclidean norms of the rows; rows whose sum of squares overflows or underflows
    (values near 1e200 or 1e-200) are scaled by their largest value first."""
    norms = np.sqrt(np.einsum("ij,ij->i", Z, Z))
    redo = ~np.isfinite(norms) | ((norms == 0) & np.any(Z != 0, axis=1))
    if redo.any():
        W = Z[redo]
        scale = np.max(np.abs(W), axis=1)
        norms[redo] = scale * np.sqrt(np.einsum("ij,ij->i", W / scale[:, None], W / scale[:, None]))
    return norms


def featurize(block, plan, weights=None):
    """A block's features as the plan says: (features, number of all-zero rows)."""
    return finish(_encoded(block, plan), plan, weights)


def featurize_timed(block, plan, weights=None, dtype="float64"):
    """:func:`featurize`, and the seconds it spent: (features, all-zero rows,
    {"featurize": everything but the feature map, "map": the MinMax or RFF map, and
    waiting for its random numbers}). ``weights`` may be a Future of :func:`prepare`'s.
    ``dtype``: the features' type when the MinMax map makes them (nothing after it), so
    that the store's type is made once, or a :class:`RowBuffers` of it to make them in.

    Molecules going straight into the MinMax map are fingerprinted and mapped in the
    worker processes, when they run: the seconds are then theirs, summed over the tasks.
    Elsewhere (a dask worker, one core) the map runs on this process's threads."""
    if _fingerprints_mapped(plan) and workers_running():
        last = not (plan.normalize or plan.bias or plan.rff)
        Z, parsing, mapping = _mapped_fingerprints(block, plan, weights, dtype if last else "float64")
        weights = weights.result() if isinstance(weights, Future) else weights
        X, zero_rows, map_seconds = _finish_timed(Z, plan, weights, mapped=True)
        return X, zero_rows, {"featurize": parsing, "map": mapping + map_seconds}
    t0 = time.perf_counter()
    Z = _encoded(block, plan)
    waited = time.perf_counter()
    if isinstance(weights, Future):     # drawn beside the first blocks' encoding (pipeline.py)
        weights = weights.result()
    waited = time.perf_counter() - waited
    X, zero_rows, map_seconds = _finish_timed(Z, plan, weights or {})
    return X, zero_rows, {"featurize": time.perf_counter() - t0 - map_seconds - waited, "map": map_seconds + waited}
