"""`bigsearch ingest` as a library call: inputs -> (statistics pass) -> store.

Pass 1 runs only when the recipe needs statistics (categories, quantile bins, label
counts for --prevalence); pass 2 featurizes block by block and appends to a
StoreWriter, which publishes the store atomically when everything succeeded. Memory is
bounded by the block size and the per-column statistics, never by the input size.
"""

import shlex
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from .. import __version__, limits
from ..errors import InputError, ParameterError, StoreExistsError
from ..storage import StoreWriter, default_chunk_rows, is_feature_store, is_url, store_format, store_kind_for
from ..storage.atomic import remove, temp_sibling
from ..storage.encoding import SCALED, stored_columns, stored_dtype
from ..storage.remote import store_exists
from ..storage.remote_options import check_writable
from .columns import resolve_columns as _resolve
from .documents import document_roles
from .duplicates import DuplicateFilter, DuplicateFinder
from .featurize import MAX_CATEGORIES, ColumnPlan, Plan, RowBuffers, featurize_timed, finish_plan, prepare
from .fingerprints import fingerprint_workers
from .labels import LabelRule, PositiveSubsample, label_block, raw_labels, vocabulary_of
from .mapping import block_mapper
from .minmax import load_kernels
from .options import BLOCK_BYTES, CODECS, FeatureOptions, LabelOptions, OutputOptions, SourceOptions
from .readers import open_reader
from .records import display_keeper, record_display
from .stats import block_stats, merge_stats

FREE_TEXT_SHARE = 0.5     # a text column with more distinct values than this share of the rows ...
FREE_TEXT_CHARS = 30      # ... is free text when its values are this long on average, else an identifier
NAMED_NOT_FEATURES = {"title": "free text", "abstract": "free text", "doi": "an identifier"}  # roles (documents.py)

# The most float64 data one transform step holds (docs/ingest.md has the measurements).
STEP_BYTES = 32 << 20
STAGES = ("read", "featurize", "map", "write")      # of the writing pass, timed for the summary
# Blocks of molecules featurized ahead of the one written: the worker processes parse (and map)
# the next blocks' SMILES while this one's rows are made and written.
FINGERPRINT_BLOCKS_AHEAD = 2
TEXT_BLOCKS_AHEAD = 2         # ... and blocks of documents featurized ahead, one a core (text.py's kernels)
# Text read per parser call when the recipe has text features and source.block_bytes is its
# default: 5,000 abstracts, a few hundred ms of a block thread's work (1 MiB, 670 abstracts,
# repeated the per-block work of both passes 1,500x on a million abstracts).
TEXT_BLOCK_BYTES = 8 << 20


class Progress:
    """What the pipeline reports; the CLI shows it as a progress bar."""

    def start(self, label, total):
        pass

    def update(self, done):
        pass

    def end(self):
        pass

    def warn(self, message):
        pass


def ingest(sources, out, *, source=None, labels=None, features=None, output=None, progress=None,
           command=None, backend="local"):
    """Turn input files into a feature store at ``out``; returns a summary dict.

    ``source``, ``labels``, ``features`` and ``output`` are the option groups of
    ingest/options.py (the defaults when None), which ``bigsearch ingest`` builds from its
    flags (docs/ingest.md). ``backend`` (an engine backend, e.g. from
    ``bigsearch.backends.distributed.connect``) says where the per-block statistics and
    featurization run (ingest/mapping.py); ``command`` is recorded in the provenance.
    """
    source, labels, features, output = _groups(source, labels, features, output)
    mapper = block_mapper(backend)
    here = features.smiles_column is not None and not mapper.remote_capable   # text runs on threads (text.py)
    kernels = load_kernels if features.minmax_spec else None     # the map runs in the workers (featurize.py)
    with fingerprint_workers(kernels) if here else nullcontext():  # before any thread starts (workers.py)
        return _ingest(sources, out, source, labels, features, output, progress, command, mapper)


def _ingest(sources, out, source, labels, features, output, progress, command, mapper):
    t0 = time.perf_counter()
    progress = progress or Progress()
    out = out if is_url(out) else Path(out)       # a URL is never a local path
    kind = store_kind_for(out, output.format)
    compressors = compressors_for(kind, output.codec)
    _check_output(out, kind, sources, output.overwrite)
    block_bytes = source.block_bytes
    readers = _open_inputs(sources, source, progress)
    label_readers = _label_readers(labels.files, readers)
    rule = _label_rule(readers, label_readers, labels.column, labels.positive)
    if labels.prevalence is not None and rule is None:
        raise ParameterError("prevalence needs labels: give labels.column (or labels.files)")
    if labels.prevalence is not None and features.drop_duplicates:
        raise ParameterError("prevalence and drop_duplicates together: subsample a store without duplicates "
                             "(ingest with drop_duplicates first, then again from it with prevalence)")
    plan = _plan(readers, rule, features)
    _check_plan_size(plan)
    if block_bytes == BLOCK_BYTES and any(c.kind == "text" for c in plan.columns):
        block_bytes = TEXT_BLOCK_BYTES
    stats = None
    passes = {}
    if _needs_statistics(plan, labels):
        started = time.perf_counter()
        stats = _first_pass(readers, label_readers, plan, rule, block_bytes, progress, mapper)
        fitting = time.perf_counter()
        _drop_free_text(plan, stats, features, readers[0])
        finish_plan(plan, stats, features.bins)
        passes = {"statistics": fitting - started, "fit": time.perf_counter() - fitting}
        _check_plan_size(plan)
        _check_positives(readers, rule, stats, progress)
    _say_not_features(plan, progress)
    repeats = (stats or {}).get("repeats", (np.zeros(0, np.int64),) * 2)    # (rows, the earlier row of each)
    duplicates = _duplicates(*repeats, features.drop_duplicates, progress)
    subsample = None
    if labels.prevalence is not None:
        subsample = PositiveSubsample(labels.prevalence, labels.seed, stats["labels"].get(1, 0),
                                      stats["labels"].get(0, 0))

    carry_ids = all(r.ids is not None for r in readers)
    # rows left out: each row written keeps its row number in the input as its id
    ids_dtype = readers[0].ids.dtype if carry_ids else (np.int64 if subsample or duplicates else None)
    encoding = output.encoding or output.dtype
    rows = _rows_to_write(readers, stats, subsample)
    if duplicates:
        rows -= len(duplicates)
    if output.codec == "none" and not is_url(out):
        limits.check_disk(out, rows, stored_columns(encoding, plan.width), stored_dtype(encoding).itemsize)
    chunk_rows = output.chunk_rows or _default_chunk_rows(rows, stored_columns(encoding, plan.width),
                                                          stored_dtype(encoding))
    final, out = out, (out if output.cluster_order is None else _unordered_path(out))
    with StoreWriter(out, plan.width, encoding=encoding if output.cluster_order is None else output.dtype,
                     chunk_rows=chunk_rows, kind=kind,
                     labels=rule is not None, ids_dtype=ids_dtype, overwrite=output.overwrite,
                     compressors=compressors) as writer:
        keeper = display_keeper(readers, writer)
        writing = time.perf_counter()
        totals = _second_pass(readers, label_readers, plan, rule, (subsample, duplicates), writer, carry_ids,
                              ids_dtype is not None, block_bytes, progress, mapper, stats is not None, keeper)
        record_display(writer, keeper)
        if stats is None:
            _check_positives(readers, rule, totals, progress)
        mapping = _label_mapping(readers, rule, totals)
        if totals["zero_rows"]:
            progress.warn(f"{totals['zero_rows']:,} rows are all zero; features.normalize leaves them zero")
        provenance = _provenance(readers, label_readers, totals, command)
        if duplicates:
            provenance["duplicates_left_out"] = len(duplicates)
        writer.set_attrs(featurization=_featurization(plan, rule, subsample, features.bins, mapping),
                         provenance=provenance)
        closing = time.perf_counter()
    totals["seconds"]["write"] += time.perf_counter() - closing     # the last chunks, the publishing
    passes["writing"] = time.perf_counter() - writing
    stages = _stages(totals["seconds"], totals["rows"], writer.n, sum(r.size for r in readers), plan, writer)
    if output.cluster_order is not None:
        out = _reorder(out, final, output, kind, compressors, encoding)
    return {"out": str(out), "kind": kind, "rows_read": totals["rows"], "rows_written": writer.n,
            "n_features": plan.width, "labels": {str(k): v for k, v in sorted(totals["labels"].items())},
            "seconds": time.perf_counter() - t0, "input_bytes": sum(r.size for r in readers),
            "blocks_on_cluster": mapper.remote, "blocks_redone_here": mapper.redone,
            "binary_possible": writer.binary_possible and encoding in ("float32", "float64"),
            "bits_set": writer.bits_set() if writer.binary_possible else None,
            "int8_exact": writer.int8_exact and encoding in ("float32", "float64"),
            "encoding": encoding, "stages": stages, "passes": passes, "label_mapping": mapping,
            "label_column_found": _label_column_found(readers, rule),
            "duplicates": len(repeats[0]),
            "duplicates_left_out": len(duplicates) if duplicates else 0}


def _duplicates(rows, firsts, drop, progress):
    """A DuplicateFilter of the rows repeating an earlier record when ``drop``; else they are named."""
    if not len(rows):
        return None
    if drop:
        return DuplicateFilter(rows)
    shown = ", ".join(f"{r} repeats {f}" for r, f in zip(rows[:4], firsts[:4])) + (", ..." if len(rows) > 4 else "")
    progress.warn(f"{len(rows):,} records repeat an earlier one (the same DOI, or the same title and abstract; "
                  f"rows from 0: row {shown}): each would be screened twice (drop_duplicates leaves them out)")
    return None


def _needs_statistics(plan, labels):
    """A first pass is needed for --prevalence, categories, bins, --idf and text."""
    return (labels.prevalence is not None or plan.idf is not None
            or any(c.kind in ("bins", "onehot", "text") for c in plan.columns))


def _unordered_path(out):
    """Where the store is written before --cluster-order: beside a local OUT; for a URL, in
    a local temporary directory (the ordered store is what goes to the object store)."""
    if is_url(out):
        import tempfile
        return temp_sibling(Path(tempfile.gettempdir()) / "bigsearch.zarr", "unordered")
    return temp_sibling(out, "unordered")


def _reorder(unordered, out, output, kind, compressors, encoding):
    """Rewrite the new (float) store in cluster order (ingest/cluster_order.py) at ``out``,
    encoded then; the unordered copy is removed whatever happens."""
    from .cluster_order import cluster_order
    try:
        cluster_order(unordered, out, clusters=output.cluster_order or None, kind=kind, compressors=compressors,
                      overwrite=output.overwrite, encoding=encoding, discard_source=True)
    finally:
        remove(unordered)
    return out


def _groups(source, labels, features, output):
    """The four option groups, defaults filled in; anything else is a mistake worth naming."""
    groups = []
    for name, value, cls in (("source", source, SourceOptions), ("labels", labels, LabelOptions),
                             ("features", features, FeatureOptions), ("output", output, OutputOptions)):
        if value is None:
            value = cls()
        if not isinstance(value, cls):
            raise ParameterError(f"{name} must be a {cls.__name__} (bigsearch.ingest), got {type(value).__name__}")
        groups.append(value)
    return groups


# -- setting up ---------------------------------------------------------------------------
def compressors_for(kind, codec):
    """What the writer of store format ``kind`` takes for a codec name."""
    if codec not in CODECS:
        raise ParameterError(f"unknown codec {codec!r}; choose one of {', '.join(CODECS)}")
    return store_format(kind).compressors(codec)


def _rows_to_write(readers, stats, subsample):
    """Rows the store will get: exact after a first pass or for binary inputs, estimated
    from the first MiB for text (5% added), None when unknown (gzipped text)."""
    if stats is not None:
        return stats["rows"] - (subsample.n_pos - subsample.k if subsample else 0)
    estimates = [r.estimated_rows() for r in readers]
    if any(e is None for e in estimates):
        return None
    exact = all(r.n is not None for r in readers)
    return sum(estimates) if exact else int(sum(estimates) * 1.05) + 1


def _default_chunk_rows(n_rows, width, dtype):
    """Chunks of at most about 32 MiB (DEFAULT_CHUNK_BYTES), of equal size when the row count is known: a store's
    last chunk takes a whole chunk's space on disk, so 48,842 rows of 124 features make two
    chunks of 24,421 rows rather than two of 33,825."""
    rows = default_chunk_rows(width, np.dtype(dtype).itemsize)
    if n_rows:
        rows = -(-n_rows // -(-n_rows // rows))   # ceil(n / number of chunks)
    return max(1, rows)


def _check_plan_size(plan):
    """The plan's widths must fit a one-row transform step, and the RFF weights memory."""
    known = sum(1 if c.kind in ("onehot", "bins") and c.categories is None and c.edges is None else c.width
                for c in plan.columns) + int(plan.bias)     # one-hot and bin widths come with pass 1
    limits.check_features(known, "the encoded input", "drop wide columns (features.drop) or one-hot encode fewer")
    if plan.rff:
        limits.check_rff(known, plan.rff["dim"])


def _check_output(out, kind, sources, overwrite):
    """OUT may be replaced only when it is a store, and never when it holds an input."""
    if is_url(out):
        check_writable(out, kind)           # before any pass (--cluster-order writes OUT last)
        if not overwrite and store_exists(out):
            raise StoreExistsError(f"{out} already exists; choose another OUT or pass overwrite=True")
        return
    if out.exists() and not overwrite:
        raise StoreExistsError(f"{out} already exists; choose another OUT or pass overwrite=True")
    for s in sources:
        if Path(s).resolve() == out.resolve():
            raise ParameterError(f"{out} is both an input and the output")
        if out.resolve() in Path(s).resolve().parents:
            raise ParameterError(f"{out} holds the input {s}; write the store elsewhere")
    if out.exists() and not is_feature_store(out):
        raise StoreExistsError(f"{out} is not a bigsearch store, so overwrite=True will not replace it (it replaces "
                               "only a store); choose another OUT")


def _open_inputs(sources, options, progress):
    """Readers for every input, with the same columns (e.g. LIBSVM widths found and aligned)."""
    readers = [open_reader(s, options.format, options) for s in sources]
    for r in readers:
        if r.needs_scan():
            progress.start(f"scan {Path(r.path).name}", r.size)
            r.scan(options.block_bytes)
            progress.end()
    for cls in dict.fromkeys(type(r) for r in readers):
        cls.align([r for r in readers if type(r) is cls])
    _check_same_columns(readers)
    return readers


def _label_readers(labels, readers):
    if not labels:
        return None
    if len(labels) != len(readers):
        raise ParameterError(f"{len(labels)} labels.files for {len(readers)} inputs; give one per input, in order")
    out = [open_reader(p) for p in labels]
    for lr in out:
        if len(lr.columns) != 1:
            raise InputError(f"{lr.path}: a labels file needs one value per row, found {len(lr.columns)} columns")
    return out


def _check_same_columns(readers):
    first = readers[0]
    for r in readers[1:]:
        if len(r.columns) != len(first.columns):
            raise InputError(f"{r.path}: {len(r.columns)} columns, but {first.path} has {len(first.columns)}")
        names = [c.name for c in r.columns]
        if r.header and names != [c.name for c in first.columns]:
            raise InputError(f"{r.path}: the header differs from {first.path}'s")
    for j in range(len(first.columns)):
        if not all(r.columns[j].numeric for r in readers):
            for r in readers:
                r.force_text(j)


def _label_rule(readers, label_readers, label_column, positive):
    positive = tuple(str(p).strip() for p in positive)
    if label_column is not None:
        if not readers[0].label_column_allowed:
            raise ParameterError(f"a {readers[0].format.upper()} file's label is the first value of each line; "
                                 "leave out labels.column")
        j = _resolve(readers[0], [label_column], "labels.column")[0]
        numeric = all(r.columns[j].numeric for r in readers)
        return LabelRule(j, readers[0].columns[j].name, numeric, positive)
    if label_readers:
        lr = label_readers[0]
        return LabelRule(None, lr.path, all(r.columns[0].numeric for r in label_readers), positive)
    with_labels = [r.has_labels for r in readers]
    if any(with_labels):
        if not all(with_labels):
            missing = readers[with_labels.index(False)].path
            raise InputError(f"{missing}: has no labels, but other inputs have")
        return LabelRule(None, f"of {readers[0].path}", True, positive, stored=readers[0].labels_are_stored)
    if positive:
        raise ParameterError("labels.positive needs labels: give labels.column NAME|INDEX (or labels.files FILE)")
    return None


def _plan(readers, rule, features):
    columns, notes = _column_plans(readers, rule, features)
    if not columns:
        raise ParameterError("no feature columns are left after the label and features.drop"
                             + "".join(f"; {name} is not one ({why}; {how})" for name, why, how in notes))
    dropped = [readers[0].columns[j].name for j in _resolve(readers[0], features.drop, "features.drop")]
    return Plan(columns, features.normalize, features.bias, features.rff_spec, dropped=dropped,
                idf={} if features.idf else None, minmax=features.minmax_spec, not_features=notes)


def _column_plans(readers, rule, features):
    first = readers[0]
    cat = set(_resolve(first, features.categorical, "features.categorical"))
    skip = set(_resolve(first, features.drop, "features.drop"))
    keep = set(_resolve(first, features.keep, "features.keep"))
    if rule is not None and rule.column is not None:
        skip.add(rule.column)
    smiles = None
    if features.smiles_column is not None:
        if not readers[0].label_column_allowed:
            raise ParameterError(f"smiles_column needs a file with named columns (CSV, Parquet), "
                                 f"not {readers[0].format.upper()}")
        smiles = _resolve(first, [features.smiles_column], "smiles_column")[0]
    text = _text_plan(readers, features, skip)
    metadata = _metadata_columns(first) - keep - cat if text is not None else set()
    plans, notes = [], []
    for j, col in enumerate(first.columns):
        if text is not None and j == text.sources[0]:
            plans.append(text)
        if j in skip or (text is not None and j in text.sources):
            continue
        if j in metadata:
            notes.append((col.name, "a document's bibliographic data, not its content (records are compared "
                          "by their text)", f"features.keep {_arg(col.name)} to make it a feature too"))
            continue
        if j == smiles:
            for r in readers:
                r.force_text(j)
            plans.append(ColumnPlan(j, col.name, "fingerprint", fingerprint=features.fingerprint_spec))
            continue
        if j in cat or not col.numeric:
            kind = "onehot"
            for r in readers:
                r.force_text(j)
        elif j not in keep and _identifier_name(col.name):
            notes.append((col.name, "its name says it identifies records, it measures nothing",
                          f"features.keep {_arg(col.name)} to keep it as a number"))
            continue
        else:
            kind = "bins" if features.bins else "number"
        plans.append(ColumnPlan(j, col.name, kind))
    return plans, notes


def _metadata_columns(reader):
    """Columns of bibliographic data beside a document's text: a RIS file's every tag, else
    the columns playing a role of ingest/documents.py (authors, year, journal, doi, ...)."""
    if reader.format == "ris":
        return set(range(len(reader.columns)))
    roles = document_roles([c.name for c in reader.columns])
    names = {name for role, name in roles.items() if role not in ("title", "abstract", "label")}
    return {j for j, c in enumerate(reader.columns) if c.name in names}


def _text_plan(readers, features, skip):
    """The text column's plan: the columns joined into one document (read as text)."""
    if not features.text_columns:
        return None
    first = readers[0]
    if not first.label_column_allowed:
        raise ParameterError(f"text_columns needs a file with named columns (CSV, TSV, RIS, Excel, Parquet), "
                             f"not {first.format.upper()}")
    sources = _resolve(first, features.text_columns, "text_columns")
    clash = [first.columns[j].name for j in sources if j in skip]
    if clash:
        raise ParameterError(f"column {clash[0]} is both a text column and left out (the label or features.drop)")
    for r in readers:
        for j in sources:
            r.force_text(j)
    names = tuple(first.columns[j].name for j in sources)
    spec = replace(features.text_spec, columns=names, column_weights=_text_weights(names, features.title_weight))
    return ColumnPlan(sources[0], "+".join(names), "text", text=spec, sources=list(sources))


def _text_weights(names, title_weight):
    """Times each text column's words count: the title's (the column ingest/documents.py reads
    as the title, by its name) ``title_weight`` times beside other columns, the rest once."""
    title = document_roles(names).get("title") if len(names) > 1 else None
    return tuple(title_weight if name == title else 1 for name in names)


# Names of columns that identify a record rather than describe it (compared lower-cased, with
# spaces and '-' read as '_'): a number in them is no feature (issue 38).
IDENTIFIER_NAMES = {"id", "record_id", "recordid", "pmid", "pmcid", "doi", "uuid", "guid", "key", "index", "idx",
                    "row", "row_id", "rowid", "accession", "accession_number", "eid", "ut", "wos_id", "pubmed_id",
                    "article_id", "paper_id", "document_id", "doc_id", "item_id", "sample_id", "patient_id"}


def _identifier_name(name):
    key = str(name).strip().lower().replace(" ", "_").replace("-", "_")
    return key in IDENTIFIER_NAMES or key.endswith("_id") or key.startswith("id_")


def _drop_free_text(plan, stats, features, reader):
    """Text columns read as categories whose values are mostly distinct are free text or
    identifiers, not categories: one-hot encoding them would make every record orthogonal
    to every other. They are dropped, and said (``plan.not_features``); a column that
    features.categorical names is encoded as asked, up to MAX_CATEGORIES values."""
    asked = set(_resolve(reader, features.categorical, "features.categorical"))
    rows = max(1, stats["rows"])
    roles = document_roles([c.name for c in plan.columns])
    # what a column is by its name (a title, an abstract, a DOI), however few the rows
    named = {roles.get(role): why for role, why in NAMED_NOT_FEATURES.items() if role in roles}
    for c in list(plan.columns):
        if c.kind != "onehot":
            continue
        vocab = stats["vocab"].get(c.index)
        distinct = None if vocab is None else len(vocab)
        counted = f"more than {MAX_CATEGORIES:,}" if distinct is None else f"{distinct:,}"
        if c.index in asked:
            if distinct is None or distinct > MAX_CATEGORIES:
                raise InputError(f"column {c.name} has {counted} distinct values: one-hot encoding it would "
                                 "make a feature per value; it looks like an identifier or free text: "
                                 f"features.drop {_arg(c.name)}, or features.text_columns {_arg(c.name)}")
            continue
        if c.name not in named and distinct is not None and (rows < 20 or distinct <= FREE_TEXT_SHARE * rows):
            continue
        chars = stats["chars"].get(c.index, 0) / rows
        if named.get(c.name, "free text" if chars >= FREE_TEXT_CHARS else "an identifier") == "free text":
            why, how = "free text", f"features.text_columns {_arg(c.name)} to make text features of it"
        else:
            why, how = "an identifier", f"features.drop {_arg(c.name)} to say so"
        plan.not_features.append((c.name, f"{why}: {counted} distinct values in {rows:,} rows, "
                                  f"{chars:,.0f} characters on average",
                                  f"{how}, or features.categorical {_arg(c.name)} to one-hot encode it anyway"))
        plan.columns.remove(c)
    if not plan.columns:
        texts = [name for name, why, _ in plan.not_features if why.startswith("free text")]
        hint = (f"; to make text features of the free text: features.text_columns {_arg(','.join(texts))}"
                if texts else "")
        raise ParameterError("no feature columns are left: " + "; ".join(
            f"{name} is not one ({why}; {how})" for name, why, how in plan.not_features) + hint)


def _arg(value):
    """A column's name as the shell reads it back: 'Article Title' quoted."""
    return shlex.quote(str(value))


def _say_not_features(plan, progress):
    """One line per reason: a RIS file's dozen tags are one warning, not twelve."""
    grouped = {}
    for name, why, how in plan.not_features:
        grouped.setdefault(why, []).append((name, how))
    for why, items in grouped.items():
        if len(items) == 1:
            progress.warn(f"column {items[0][0]} is not a feature: {why} ({items[0][1]})")
        else:
            names = ", ".join(name for name, _ in items)
            how = items[0][1].replace(_arg(items[0][0]), "NAME")
            progress.warn(f"columns {names} are not features: {why} ({how})")
    texts = [name for name, why, _ in plan.not_features if why.startswith("free text")]
    if len(texts) > 1:  # a title and an abstract: one document of each record, as screening reads it
        progress.warn(f"to compare the records by their text: features.text_columns {_arg(','.join(texts))}")


# -- the passes ---------------------------------------------------------------------------
def _blocks(readers, label_readers, block_bytes, progress, label):
    """Every block of every input in order, with --labels values attached; yields
    (global row offset of the block, block)."""
    total = sum(r.size for r in readers)
    progress.start(label, total)
    done, offset = 0, 0
    for i, r in enumerate(readers):
        blocks = r.blocks(block_bytes)
        if label_readers:
            blocks = _attach_labels(blocks, label_readers[i], r)
        for block in blocks:
            yield offset + block.start, block
            progress.update(done + r.position())
        done += r.size
        offset += r.rows_read
    progress.end()


def _attach_labels(blocks, label_reader, reader):
    """Give each block of ``reader`` the next len(block) values of its --labels file."""
    label_rule = LabelRule(0, "label", label_reader.columns[0].numeric, stored=True)
    pending, have = [], 0
    source = label_reader.blocks(BLOCK_BYTES)
    for block in blocks:
        while have < len(block):
            try:
                lb = next(source)
            except StopIteration:
                raise InputError(f"{label_reader.path}: {label_reader.rows_read:,} labels, "
                                 f"but {reader.path} has more rows") from None
            values = raw_labels(lb, label_rule)
            pending.append(values)
            have += len(values)
        values = _concat(pending)
        block.labels, rest = values[:len(block)], values[len(block):]
        pending, have = [rest], len(rest)
        yield block
    extra = have + sum(len(b) for b in source)
    if extra:
        raise InputError(f"{label_reader.path}: {label_reader.rows_read:,} labels, but {reader.path} "
                         f"has {reader.rows_read:,} rows")


def _concat(parts):
    if len(parts) == 1:
        return parts[0]
    if isinstance(parts[0], np.ndarray):
        return np.concatenate(parts)
    import pyarrow as pa
    return pa.concat_arrays([p.combine_chunks() if isinstance(p, pa.ChunkedArray) else p for p in parts])


def _steps(tagged_blocks, width):
    """Sub-blocks small enough that one float64 transform step stays under STEP_BYTES,
    each tagged with its global row offset."""
    rows = max(1, STEP_BYTES // (8 * max(1, width)))
    for offset, block in tagged_blocks:
        for a in range(0, len(block), rows):
            yield offset + a, block.rows(a, min(len(block), a + rows))


def _first_pass(readers, label_readers, plan, rule, block_bytes, progress, mapper):
    """The merged statistics of every block; with text columns, also "repeats": the rows
    repeating an earlier record (ingest/duplicates.py)."""
    kinds = {c.index: c.kind for c in plan.columns}
    nonzero = None
    if plan.idf is not None:
        nonzero = {c.index: c.fingerprint for c in plan.columns if c.kind in ("number", "fingerprint")}
    stats = None
    steps = _steps(_blocks(readers, label_readers, block_bytes, progress, "pass 1/2: statistics"),
                   max(len(readers[0].columns), sum(c.width for c in plan.columns if c.kind == "fingerprint"), 1))
    texts = {c.index: (c.sources, c.text) for c in plan.columns if c.kind == "text"} or None
    keys = _record_keys(plan, readers[0])
    finder = DuplicateFinder() if keys else None
    ahead = TEXT_BLOCKS_AHEAD if texts and not mapper.remote_capable else 0    # a block on every core
    for offset, _, s in mapper.imap(block_stats, steps, kinds, rule, nonzero, texts, keys, ahead=ahead):
        if finder is not None:
            finder.add(offset, s.pop("keys"))
        stats = s if stats is None else merge_stats(stats, s)
    if finder is not None:
        stats["repeats"] = finder.repeats()
    return stats


def _record_keys(plan, reader):
    """(the DOI column or None, the text columns) that say whether two records are one work;
    None without text columns (not documents)."""
    sources = [j for c in plan.columns if c.kind == "text" for j in c.sources]
    if not sources:
        return None
    names = [c.name for c in reader.columns]
    doi = document_roles(names).get("doi")
    return (None if doi is None else names.index(doi)), sources


def _second_pass(readers, label_readers, plan, rule, filters, writer, carry_ids, write_ids,
                 block_bytes, progress, mapper, stats_pass, keeper=None):
    """``filters``: (a PositiveSubsample, a DuplicateFilter), each None or what leaves rows out."""
    with ThreadPoolExecutor(1) as side:
        # here, the map's random numbers are drawn while the first blocks are parsed
        weights = prepare(plan) if mapper.remote_capable else side.submit(prepare, plan)
        return _write_blocks(readers, label_readers, plan, rule, filters, writer, carry_ids, write_ids,
                             block_bytes, progress, mapper, stats_pass, keeper, weights)


def _write_blocks(readers, label_readers, plan, rule, filters, writer, carry_ids, write_ids,
                  block_bytes, progress, mapper, stats_pass, keeper, weights):
    subsample, duplicates = filters
    seconds = dict.fromkeys(STAGES, 0.0)
    totals = {"rows": 0, "labels": Counter(), "label_values": set(), "matched": set(), "zero_rows": 0,
              "seconds": seconds}
    width = max(len(readers[0].columns), plan.encoded_width, plan.width)
    label = "pass 2/2: writing" if stats_pass else "writing"
    steps = _timed(_steps(_blocks(readers, label_readers, block_bytes, progress, label), width), seconds)
    ahead = FINGERPRINT_BLOCKS_AHEAD if any(c.kind == "fingerprint" for c in plan.columns) else 0
    if any(c.kind == "text" for c in plan.columns):
        ahead = TEXT_BLOCKS_AHEAD      # the next blocks featurized beside this one's writing
    dtype = _features_dtype(writer.encoding)
    if not mapper.remote_capable:
        dtype = RowBuffers(dtype)       # reused arrays for the map's rows (featurize.py)
    for offset, step, (X, zero_rows, spent) in mapper.imap(featurize_timed, steps, plan, weights, dtype, ahead=ahead):
        for stage, s in spent.items():
            seconds[stage] += s
        totals["zero_rows"] += zero_rows
        y = ids = None
        if rule is not None:
            y, seen, matched = label_block(step, rule)
            totals["label_values"] |= seen
            totals["matched"] |= matched
        if write_ids:
            ids = step.ids if carry_ids else offset + np.arange(len(step))
        keep = None if subsample is None else subsample.keep(y)
        if duplicates is not None:
            kept = duplicates.keep(offset, len(step))
            keep = kept if keep is None else keep & kept
        if keep is not None:
            X, y, ids = X[keep], None if y is None else y[keep], ids[keep]
        if keeper is not None:
            keeper.append(step, keep)
        if rule is not None:
            totals["labels"].update({int(k): int(v) for k, v in zip(*np.unique(y, return_counts=True))})
        totals["rows"] += len(step)
        if len(X):
            t0 = time.perf_counter()
            limits.check_values(X, _value_dtype(writer.encoding),
                                step.where if keep is None else _kept_where(step, keep))
            writer.append(X, y, ids)
            seconds["write"] += time.perf_counter() - t0
    return totals


def _timed(items, seconds):
    """``items``, the time spent producing each (reading and splitting blocks) added to
    seconds["read"]."""
    items = iter(items)
    while True:
        t0 = time.perf_counter()
        item = next(items, None)
        seconds["read"] += time.perf_counter() - t0
        if item is None:
            return
        yield item


def _stages(seconds, rows_read, rows_written, input_bytes, plan, writer):
    """Throughput per stage of the writing pass: what each handled (rows, MB: the input
    file for read, float64 features for featurize and map, stored bytes for write) and how fast."""
    stored = writer.n * stored_columns(writer.encoding, plan.width) * stored_dtype(writer.encoding).itemsize
    mapped = plan.mapped_width if plan.minmax else plan.width if plan.rff else 0
    handled = {"read": (rows_read, input_bytes), "featurize": (rows_read, rows_read * plan.encoded_width * 8),
               "map": (rows_read if mapped else 0, rows_read * mapped * 8), "write": (rows_written, stored)}
    out = {}
    for stage, (rows, size) in handled.items():
        s = seconds[stage]
        out[stage] = {"seconds": s, "rows": rows, "MB": size / 1e6, "rows_per_second": rows / s if s else None,
                      "MB_per_second": size / 1e6 / s if s else None}
    return out


def _value_dtype(encoding):
    """The float type the features must fit: the stored one, or the per-row scale's."""
    return np.dtype(np.float32) if encoding in SCALED else stored_dtype(encoding)


def _features_dtype(encoding):
    """The type a feature map may make features in: the stored one for float32 stores and
    binary ones (encoded from float32), float64 for the others (their encoding rounds from it)."""
    return "float32" if encoding in ("float32", "binary") else "float64"


def _kept_where(step, keep):
    rows = np.flatnonzero(keep)
    return lambda i: step.where(int(rows[i]))


def _label_mapping(readers, rule, totals):
    """How text labels were read without labels.positive: {"vocabulary", "positive",
    "negative", "unlabeled"} (the words seen), or None."""
    if rule is None or not rule.vocabulary:
        return None
    files = ", ".join(r.path for r in readers)
    vocabulary, positive, negative, unlabeled = vocabulary_of(sorted(totals["label_values"]), rule.name, files)
    return {"vocabulary": vocabulary, "positive": positive, "negative": negative, "unlabeled": unlabeled}


def _label_column_found(readers, rule):
    """The name of a column that looks like labels (documents.document_roles) when no
    labels were asked for: ingest says so, and uses it only when told (labels.column)."""
    if rule is not None:
        return None
    return document_roles([c.name for c in readers[0].columns]).get("label")


def _check_positives(readers, rule, stats, progress):
    if rule is not None and rule.vocabulary:
        vocabulary_of(sorted(stats["label_values"]), rule.name, ", ".join(r.path for r in readers))
    if rule is None or (not rule.positives):
        return
    if not stats["matched"]:
        seen = ", ".join(sorted(stats["label_values"])) or "none"
        files = ", ".join(r.path for r in readers)
        raise InputError(f"{files}: labels.positive {' / '.join(rule.positives)} never occurs in label column "
                         f"{rule.name} (values seen: {seen})")
    for p in rule.positives:
        if p not in stats["matched"]:
            progress.warn(f"labels.positive {p!r} never occurs in label column {rule.name}")


# -- what the store records ---------------------------------------------------------------
def _featurization(plan, rule, subsample, bins, mapping=None):
    out = plan.describe()
    if bins:
        out["bins"] = bins
    if rule is not None:
        out["label"] = {"column": rule.name if rule.column is not None else None,
                        "column_index": rule.column, "positive": list(rule.positives),
                        "from": "column" if rule.column is not None else rule.name}
        if mapping is not None:
            out["label"]["vocabulary"] = mapping
    if subsample is not None:
        out["subsample"] = subsample.describe()
    return out


def _provenance(readers, label_readers, totals, command):
    out = {"tool": "bigsearch ingest", "bigsearch_version": __version__,
           "created": datetime.now(UTC).isoformat(timespec="seconds"),
           "sources": [r.describe() for r in readers], "rows_read": totals["rows"]}
    if label_readers:
        out["labels_files"] = [r.describe() for r in label_readers]
    if command:
        out["command"] = command
    if totals["labels"]:
        out["label_counts"] = {str(k): v for k, v in sorted(totals["labels"].items())}
    return out
