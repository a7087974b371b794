"""`bigsearch session ...`: interactive Active Search with a person as the oracle.

Thin commands over :class:`bigsearch.Session`. Every error, usage errors included, is
one line on stderr with exit status 2; warnings about recovered damage are printed as
"Warning: ..." lines.
"""

import contextlib
import csv
import json
import math
import warnings

import click
from click.core import ParameterSource

from ..engine.core.registry import method_names, plan_methods
from ..errors import LabelError, ParameterError, SessionWarning
from . import Group, main, printable
from .ingest import BarProgress
from .options import (
    BLR_RENAMED,
    SCREEN_RENAMED,
    blr_options,
    cluster_backend,
    cluster_options,
    dataset_option,
    flags_for,
    las_options,
    object_store_options,
    screen_options,
)


def _session():
    from ..session import Session  # the engine and numba: imported when a command runs
    return Session


@contextlib.contextmanager
def session_warnings():
    """Warnings about a recovered session (SessionWarning) as "Warning: ..." lines."""
    with warnings.catch_warnings():
        warnings.simplefilter("always", SessionWarning)
        warnings.showwarning = _show_warning
        yield


class SessionGroup(Group):
    """Warnings about recovered damage as "Warning: ..." lines."""

    def invoke(self, ctx):
        with session_warnings():
            return super().invoke(ctx)


@contextlib.contextmanager
def _opening(session):
    """``session``, showing on a terminal a bar per step of loading its state (restoring
    a checkpoint reads X once; labels since it are replayed, a pass per group)."""
    bars = BarProgress(quiet=False)
    session.progress = bars.step
    try:
        with session as s:
            yield s
    finally:
        bars.end()


def _show_warning(message, category, *args, **kwargs):
    click.echo(f"Warning: {message}", err=True)


# bigsearch.session.export.EXPORT_FORMATS (importing it here would load NumPy for --help)
EXPORT_FORMATS = ("csv", "json", "parquet", "ris", "records")

store_option = click.option("--store", type=click.Path(path_type=str), default=None,
                            help="The session's store, if it has moved since the session began.")


@main.group(cls=SessionGroup)
def session():
    """Interactive sessions: you label what the engine proposes; nothing is ever lost.

    \b
    bigsearch session new STORE DIR [--method METHOD] [--pi ...]
    bigsearch session next DIR [-k K]
    bigsearch session label DIR INDEX Y [INDEX Y ...]   (Y: 0, 1 or graded in [0, 1]; or --from labels.csv)
    bigsearch session undo DIR [N]
    bigsearch session correct DIR INDEX Y   (change an answer given earlier)
    bigsearch session skip DIR INDEX [INDEX ...]   (unskip DIR [INDEX ...])
    bigsearch session status DIR [--json]
    bigsearch session sample DIR [-m M]
    bigsearch session export DIR --out FILE [--format csv|json|parquet|ris|records]
    """


@session.command()
@click.argument("store", type=click.Path(path_type=str))
@click.argument("directory", type=click.Path(path_type=str))
@click.option("--method", type=click.Choice(method_names("sessions")), default="las", show_default=True)
@las_options
@click.option("--checkpoint-every", type=click.IntRange(1), default=50, show_default=True,
              help="Write a checkpoint every this many labels (and on every clean exit).")
@click.option("--start-from", default=None, metavar="SPEC",
              help="Start from what you know: ids:ID,ID,... (known positives, recorded as labels), "
                   "vector:FILE.npy (ask the most similar first) or keyword:COLUMN=WORDS (ask matching "
                   "records first), until the first positive; labels: the decisions the store holds "
                   "(ingest --label-column: a pilot screening), recorded as labels; docs/sessions.md.")
@click.option("--prune", is_flag=True,
              help="LAS (alpha = 0), WNAS, BLR (greedy, UCB) and screen (neighbour weight 0): exact pruned queries: "
                   "read only the blocks of rows that could hold the answer.")
@blr_options
@screen_options
@click.option("--stop-at-recall", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=None,
              metavar="R", help="The protocol's stopping rule: `status` and the page say when the recall reached "
                                "is R with 95% confidence (docs/screening.md).")
@dataset_option
@cluster_options
@object_store_options
@click.pass_context
def new(ctx, store, directory, method, pi, eta, w0, alpha, checkpoint_every, start_from, prune, acquisition, beta,
        blr_lam, blr_noise, screen_ridge, screen_balance, screen_unread, screen_adapt, screen_neighbours,
        screen_neighbour_weight, screen_explore_after, stop_at_recall, dataset, scheduler, cluster, persist):
    """Start a session on STORE, kept in the new directory DIRECTORY."""
    flags = {"pi": pi, "eta": eta, "w0": w0, "alpha": alpha, "prune": prune, "acquisition": acquisition, "beta": beta,
             "lam": blr_lam, "noise": blr_noise, "ridge": screen_ridge, "balance": screen_balance,
             "unread": screen_unread, "adapt": screen_adapt, "neighbours": screen_neighbours,
             "neighbour_weight": screen_neighbour_weight, "explore_after": screen_explore_after}
    source = {"lam": "blr_lam", "noise": "blr_noise",           # the option's name where the flag's differs
              **{name: flag[2:].replace("-", "_") for name, flag in SCREEN_RENAMED.items()}}
    params = {k: v for k, v in flags.items()
              if ctx.get_parameter_source(source.get(k, k)) == ParameterSource.COMMANDLINE}
    renamed = {**BLR_RENAMED, **SCREEN_RENAMED}
    with flags_for(*flags, renamed=renamed):    # the method's one check, before anything is opened or written
        plan_methods((method,), params, need="sessions", strict=True, offered=flags)
    with flags_for("pi", "start_from", "stop_at_recall"), cluster_backend(scheduler, cluster, persist) as backend, \
            _session().create(store, directory, method=method, checkpoint_every=checkpoint_every,
                              backend=backend, start_from=start_from, dataset=dataset, prior_from_labels=False,
                              stop_at_recall=stop_at_recall, **params) as s:
        st = s.status(estimate=False)
        start = s.info.get("start")
        blind = s.blind
        stored = s.search.store.labels() if blind and start is None else None
    click.echo(f"created session {directory}: {_describe_method(st)} on {st['store']} ({st['n']:,} x {st['r']})")
    if start is not None:
        click.echo(_describe_start(start))
    if blind:    # with a start, only the store's labels can leave it blind: they held no positive
        click.echo(blind_start_notice(directory, st, "no --start-from" if start is None else
                                      "the store's labels hold no positive"))
        if start is None and (offer := _stored_decisions(stored)):
            click.echo(offer)
    click.echo(f"next: bigsearch session next {directory}")


def _stored_decisions(y):
    """What the store's own labels ``y`` (None: it has none) offer a session started without
    them ("" when none): a screening export's decisions, or a simulation's truth."""
    told = 0 if y is None else int((y >= 0).sum())
    if not told:
        return ""
    return (f"the store holds {told:,} labels ({int((y >= 1).sum()):,} positive): if they are decisions "
            "already made, start the session again with --start-from labels to start from them")


def blind_start_notice(directory, st, why="no --start-from"):
    """What a session started with nothing to go on (no positive known) should be told."""
    prior = st["params"].get("pi")
    same = f"the prior, pi = {prior:g}" if isinstance(prior, (int, float)) else "the same"
    return (f"blind start: {why}, so until a first positive answer every point scores {same}, and "
            "the first queries are about as good as any (on Adult, 50 of them found no positive: "
            "docs/sessions.md). Give what you know: label a record you know is positive "
            f"(bigsearch session label {directory} INDEX 1), or start the session again with --start-from "
            "ids:ID,..., vector:FILE.npy or keyword:COLUMN=WORDS.")


verbose_option = click.option("-v", "--verbose", is_flag=True,
                              help="Also say how the engine chose (pruning, the share of X read).")


@session.command("next")
@click.argument("directory", type=click.Path(path_type=str))
@click.option("-k", "k", type=click.IntRange(1), default=1, show_default=True, help="How many candidates.")
@click.option("--json", "as_json", is_flag=True,
              help="Print JSON: a list of {rank, index, id, score, record} (record: the point's fields or image, "
                   "as the labelling page shows them; null when the store keeps none).")
@verbose_option
@store_option
@cluster_options
@object_store_options
def next_(directory, k, as_json, verbose, store, scheduler, cluster, persist):
    """Show the next K points to label, best first, each with its record (changes nothing)."""
    from ..serve.records import hidden_fields, read_display
    with cluster_backend(scheduler, cluster, persist) as backend, \
            _opening(_session().open(directory, readonly=True, store=store, backend=backend)) as s:
        rows = s.candidates(k)
        reads = s.reads()
        data = s.search.store
        hidden = hidden_fields(data)          # the label column is the answer: never shown
        for r in rows:
            r["record"] = read_display(data, r["index"], hidden)
    if reads is not None and verbose:      # on stderr: --json output stays a list
        pruned = reads["pruning"].startswith("on") and reads["bytes_read"]
        share = (f"; this query read {reads['bytes_read'][-1] / reads['x_bytes']:.1%} of X, after the pass "
                 "that opening the session costs" if pruned else "")
        click.echo(f"{s.method}: pruning {reads['pruning']}{share}", err=True)
    if as_json:
        click.echo(json.dumps(rows))
    elif not rows:
        click.echo("every point is labeled")
    else:
        for r in rows:
            _print_candidate(r)
        first = rows[0]["index"]
        click.echo(f"answer: bigsearch session label {directory} {first} 1   (1: positive, 0: negative)")


def _print_candidate(r):
    ident = "" if r["id"] is None else f", id {printable(r['id'])}"
    click.echo(f"#{r['rank']}: index {r['index']}{ident} (score {r['score']:.6g})")
    record = r["record"]
    if record is None:
        click.echo("  (the store keeps no records to show: ingest it from its source file to see them)")
    elif record["kind"] == "fields":
        width = max((len(printable(k)) for k in record["fields"]), default=0)
        for name, value in record["fields"].items():
            # a field of several values (a RIS export's authors, keywords) a line each, as on the page
            first, *more = _value(value).splitlines() or [""]
            click.echo(f"  {printable(name):<{width}}  {printable(first)}")
            for line in more:
                click.echo(f"  {'':<{width}}  {printable(line)}")
    else:
        for line in _image_lines(record):
            click.echo("  " + line)


def _value(value):
    """A record's value as the page shows it: text trimmed, 39.0 as 39."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value).strip()


SHADES = " .:-=+*#%@"


def _image_lines(record):
    """A grey image as text, one character per pixel, darker for higher values (colour
    images: their mean over channels)."""
    shape, pixels = record["shape"], record["pixels"]
    h, w = shape[0], shape[1]
    channels = len(pixels) // (h * w) or 1
    lo, hi = record["range"]
    span = (hi - lo) or 1.0
    lines = []
    for i in range(h):
        row = pixels[i * w * channels:(i + 1) * w * channels]
        values = [sum(row[j * channels:(j + 1) * channels]) / channels for j in range(w)]
        lines.append("".join(SHADES[min(len(SHADES) - 1, int((v - lo) / span * len(SHADES)))] * 2 for v in values))
    return lines


@session.command(context_settings={"ignore_unknown_options": True})
@click.argument("directory", type=click.Path(path_type=str))
@click.argument("pairs", nargs=-1)
@click.option("--from", "from_csv", type=click.Path(dir_okay=False, path_type=str), default=None,
              help="A CSV with columns index and label (a header row names them; extra columns are ignored).")
@store_option
@cluster_options
@object_store_options
def label(directory, pairs, from_csv, store, scheduler, cluster, persist):
    """Record labels: INDEX LABEL pairs, applied together in one pass. LABEL is 1
    (positive), 0 (negative) or, for methods that take them (LAS, WNAS), a graded label
    between 0 and 1 (e.g. 0.4: how good a measured score is)."""
    if pairs and from_csv:
        raise LabelError("give INDEX LABEL pairs or --from FILE, not both")
    indices, labels, wheres = read_label_csv(from_csv) if from_csv else parse_pairs(pairs)
    with cluster_backend(scheduler, cluster, persist) as backend, \
            _opening(_session().open(directory, store=store, backend=backend)) as s:
        _check_labels(s.search, indices, labels, wheres, directory)
        s.tell(indices, labels)
        n, pos = s.n_labels, sum(y >= 0.5 for _, y in s.history)
    graded = sum(y not in (0, 1) for y in labels)
    click.echo(f"recorded {_count(len(indices), 'label')} ({sum(y >= 0.5 for y in labels)} positive"
               + (f", {graded} graded" if graded else "") + f"); the session has {_count(n, 'label')}, {pos} positive")


@session.command()
@click.argument("directory", type=click.Path(path_type=str))
@click.argument("count", default="1", required=False)
@store_option
@cluster_options
@object_store_options
def undo(directory, count, store, scheduler, cluster, persist):
    """Withdraw the last COUNT labels (default 1), exactly."""
    try:
        count = int(count)
    except ValueError:
        raise ParameterError(f"COUNT must be a positive integer, got {count!r}") from None
    with cluster_backend(scheduler, cluster, persist) as backend, \
            _opening(_session().open(directory, store=store, backend=backend)) as s:
        undone = s.undo(count)
        n = s.n_labels
    shown = ", ".join(f"{i} ({y})" for i, y in undone)
    click.echo(f"undid {_count(len(undone), 'label')}: {shown}; the session has {_count(n, 'label')}")


@session.command()
@click.argument("directory", type=click.Path(path_type=str))
@click.argument("index")
@click.argument("label")
@store_option
@cluster_options
@object_store_options
def correct(directory, index, label, store, scheduler, cluster, persist):
    """Change the answer given for INDEX to LABEL: the labels from it on are told again
    with it changed, each keeping its time; the journal records the correction (when,
    by whom, from what to what), and `status` lists it."""
    i, y = _parse_pair(index, label)
    with cluster_backend(scheduler, cluster, persist) as backend, \
            _opening(_session().open(directory, store=store, backend=backend)) as s:
        told = s.correct(i, y, via="cli")
        old = s.corrections[-1]["from"]
    again = f"; {_count(told - 1, 'later label')} told again with it" if told > 1 else ""
    click.echo(f"corrected point {i}: {old} -> {y}{again}")


@session.command()
@click.argument("directory", type=click.Path(path_type=str))
@click.option("--json", "as_json", is_flag=True, help="Print JSON (hits: positives among the first t labels).")
def status(directory, as_json):
    """Labels, positives found, hits by step, and estimates of what is left."""
    with _session().open(directory, readonly=True) as s:
        st = s.status()
    if as_json:
        click.echo(json.dumps(st))
        return
    ck = st["checkpoint"]
    click.echo(f"session     {st['directory']}: {_describe_method(st)}")
    click.echo(f"store       {st['store']} ({st['n']:,} x {st['r']})")
    click.echo(f"labels      {st['labels']}: {st['positives']} positive, {st['negatives']} negative"
               + (f" ({st['graded']} graded: positive from 0.5)" if st.get("graded") else "")
               + (f" ({st['undone']} undone)" if st["undone"] else ""))
    if st.get("corrections"):
        shown = "; ".join(f"{c['point']}: {c['from']} -> {c['to']} ({c['time']}, {c['by']}, {c['via']})"
                          for c in st["corrections"][-5:])
        more = f" (the last 5: {shown})" if len(st["corrections"]) > 5 else f": {shown}"
        click.echo(f"corrected   {_count(len(st['corrections']), 'answer')}{more}")
    if st["skipped"]:
        shown = ", ".join(map(str, st["skipped"][:10])) + (", ..." if len(st["skipped"]) > 10 else "")
        click.echo(f"skipped     {_count(len(st['skipped']), 'point')}, proposed after every other: {shown}")
    click.echo("checkpoint  " + ("none yet" if ck is None else
                                 f"after label {ck['labels']} (journal record {ck['journal_record']}, "
                                 f"{ck['created']})"))
    if st["hits"]:
        steps = _steps(len(st["hits"]))
        click.echo("hits by step (positives among the first t labels):")
        click.echo("  t     " + " ".join(f"{t:>5}" for t in steps))
        click.echo("  hits  " + " ".join(f"{st['hits'][t - 1]:>5}" for t in steps))
    for line in _remaining_lines(st["remaining"]):
        click.echo(line)


@session.command()
@click.argument("directory", type=click.Path(path_type=str))
@click.option("-m", "size", type=click.IntRange(1), default=50, show_default=True, help="Points to draw.")
@click.option("--seed", type=int, default=None, help="Seed of the draw (default: fresh).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (the indices drawn).")
def sample(directory, size, seed, as_json):
    """Draw unlabeled points at random for an estimate of the positives left: label them
    as usual, and `status` gives the estimate with its interval (replaces an earlier sample)."""
    with _session().open(directory) as s:
        drawn = s.draw_sample(size, seed)
    if as_json:
        click.echo(json.dumps(drawn))
        return
    click.echo(f"drew {_count(len(drawn), 'point')} at random from the unlabeled ones; label them as usual "
               f"(bigsearch session label {directory} INDEX 0|1 ...), then `status` estimates the positives left:")
    click.echo(" ".join(map(str, drawn)))


@session.command()
@click.argument("directory", type=click.Path(path_type=str))
@click.option("--out", "-o", "out", type=click.Path(dir_okay=False, path_type=str), default=None,
              help="Output file (a new one), or - for stdout.")
@click.option("--format", "fmt", type=click.Choice(EXPORT_FORMATS), default=None,
              help="csv, json (a list of objects) or parquet; default: from --out's suffix, else csv. ris or "
                   "records (CSV): every record with its decision, for a reference manager (docs/sessions.md).")
@click.option("--csv", "csv_out", type=click.Path(dir_okay=False, path_type=str), default=None,
              help="Same as --out FILE --format csv.")
@store_option
@cluster_options
@object_store_options
def export(directory, out, fmt, csv_out, store, scheduler, cluster, persist):
    """Write every label in force, in the order given (index, id, label, time)."""
    if (out is None) == (csv_out is None):
        raise ParameterError("give the output file once: --out FILE [--format csv|json|parquet], or --csv FILE")
    if csv_out is not None:
        if fmt not in (None, "csv"):
            raise ParameterError(f"--csv writes CSV; for {fmt} use --out FILE --format {fmt}")
        out, fmt = csv_out, "csv"
    with cluster_backend(scheduler, cluster, persist) as backend, \
            _session().open(directory, readonly=True, store=store, backend=backend) as s:
        n = s.export(out, fmt)
        decided = s.n_labels
    if out != "-":
        from ..session.export import export_format
        records = export_format(out, fmt) in ("ris", "records")     # every record, with its decision
        click.echo(f"wrote {n} records ({decided} with a decision) to {out}" if records
                   else f"wrote {n} labels to {out}", err=True)


@session.command()
@click.argument("directory", type=click.Path(path_type=str))
@store_option
@cluster_options
@object_store_options
def rebuild(directory, store, scheduler, cluster, persist):
    """Recompute the state from the journal alone, replacing every checkpoint."""
    with cluster_backend(scheduler, cluster, persist) as backend, \
            _session().rebuild(directory, store=store, backend=backend) as s:
        n = s.n_labels
    click.echo(f"rebuilt {directory} from its journal ({n} labels)")


@session.command()
@click.argument("directory", type=click.Path(path_type=str))
@click.argument("indices", nargs=-1, type=int, required=True)
def skip(directory, indices):
    """Put points aside (the labelling page's skip): they are proposed after every
    other unlabeled point until labeled or unskipped."""
    with _session().open(directory) as s:
        for index in indices:
            s.skip(index)
        n = len(s.skipped)
    click.echo(f"skipped {_count(len(indices), 'point')}; the session has {n} skipped")


@session.command()
@click.argument("directory", type=click.Path(path_type=str))
@click.argument("indices", nargs=-1, type=int)
def unskip(directory, indices):
    """Withdraw the skips of INDICES (default: the newest skip)."""
    with _session().open(directory) as s:
        done = [s.unskip(index) for index in indices] if indices else [s.unskip()]
        n = len(s.skipped)
    click.echo(f"unskipped {', '.join(map(str, done))}; the session has {n} skipped")


# -- parsing labels --------------------------------------------------------------------
def parse_pairs(tokens):
    if not tokens:
        raise LabelError("no labels given: pass INDEX LABEL pairs (e.g. 17 1 42 0) or --from FILE")
    if len(tokens) % 2:
        raise LabelError(f"labels come in INDEX LABEL pairs, but {len(tokens)} values were given")
    pairs = [_parse_pair(tokens[k], tokens[k + 1]) for k in range(0, len(tokens), 2)]
    return [i for i, _ in pairs], [y for _, y in pairs], [""] * len(pairs)


def _check_labels(engine, indices, labels, wheres, directory):
    """Each label checked by the session's method (what labels it takes), an error naming
    its line of --from; a point answered before names the command that changes an answer."""
    for i, y, where in zip(indices, labels, wheres):
        try:
            engine.validate_labels(i, y)
        except LabelError as e:
            other = 0 <= i < engine.n and engine.labels[i] >= 0 and engine.labels[i] != y
            fix = f"; to change that answer: bigsearch session correct {directory} {i} {y}" if other else ""
            raise LabelError(f"{where}{e}{fix}") from None


def _parse_pair(index, label, where=""):
    try:
        i = int(index)
    except ValueError:
        raise LabelError(f"{where}index {index!r} is not an integer") from None
    return i, _parse_label(label, i, where)


def _parse_label(label, i, where):
    """0 or 1 as an int, another number as a float: a graded label in [0, 1], or a score for
    a method that regresses them (blr); the method checks it takes it."""
    text = label.strip()
    if text in ("0", "1"):
        return int(text)
    try:
        y = float(text)
    except ValueError:
        y = float("nan")
    if not math.isfinite(y):
        raise LabelError(f"{where}label {label!r} for point {i} is not 0 (negative), 1 (positive), "
                         "a graded label in [0, 1] or (for blr) a score")
    return int(y) if y.is_integer() and abs(y) < 2**53 else y


def read_label_csv(path):
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            rows = [row for row in csv.reader(fh) if any(cell.strip() for cell in row)]
    except UnicodeDecodeError as e:
        raise LabelError(f"{path}: not UTF-8 text (byte {e.object[e.start]:#04x} at offset {e.start}); "
                         "give a CSV of index,label lines") from None
    except csv.Error as e:
        raise LabelError(f"{path}: not a CSV of index,label lines ({e})") from None
    if rows and rows[0] and not rows[0][0].strip().lstrip("-").isdigit():
        header = [c.strip().lower() for c in rows[0]]
        if "index" not in header or "label" not in header:
            raise LabelError(f"{path}: the header has no 'index' and 'label' columns ({', '.join(header)})")
        cols, start = (header.index("index"), header.index("label")), 2
        rows = rows[1:]
    else:
        cols, start = (0, 1), 1
    pairs, wheres = [], []
    for line, row in enumerate(rows, start):
        if len(row) <= max(cols):
            raise LabelError(f"{path} line {line}: expected index and label, got {','.join(row)!r}")
        wheres.append(f"{path} line {line}: ")
        pairs.append(_parse_pair(row[cols[0]].strip(), row[cols[1]], wheres[-1]))
    if not pairs:
        raise LabelError(f"{path} has no labels")
    return [i for i, _ in pairs], [y for _, y in pairs], wheres


# -- output helpers ----------------------------------------------------------------------
def _describe_start(start):
    if "positives" in start:
        return f"started from {_count(len(start['positives']), 'known positive')}, recorded as labels"
    if "told" in start:
        return (f"started from the store's {_count(start['told'], 'label')} ({start['positive']:,} positive, "
                f"{start['negative']:,} negative), recorded as labels")
    how = "most similar first" if start["ordered"] else "highest f first"
    return (f"started from {start['source']}: {start['candidates']:,} candidates, asked {how} "
            "until the first positive")


def _remaining_lines(rem):
    """What the next labels will likely yield and how many positives are left, from the
    person's own answers (docs/sessions.md); the score sum, uncalibrated, last and labelled so."""
    if rem is None:
        return []
    if "error" in rem:
        return [f"remaining   not estimated: {rem['error']}"]
    out = []
    r = rem["recent_hit_rate"]
    if r is not None:
        out.append(f"recent      {round(r['value'] * r['basis'])} positive in the last {r['basis']} labels "
                   f"({r['value']:.0%}; {r['level']:.0%} interval {r['low']:.0%}-{r['high']:.0%}): "
                   "the rate to expect of the next queries")
    sample = rem.get("sample")
    if sample is None:
        out.append("left        no estimate yet: label a random sample for one (bigsearch session sample DIR)")
    elif "error" in sample:
        out.append(f"left        not estimated: {sample['error']}")
    elif sample["estimate"] is None:
        out.append(f"left        no estimate yet: none of the {sample['drawn']} points of the sample is labeled")
    else:
        e = sample["estimate"]
        out.append(f"left        ~{e['value']:,.0f} positives unlabeled ({e['level']:.0%} interval {e['low']:,.0f}-"
                   f"{e['high']:,.0f}), from {sample['answered']} of the {sample['drawn']} random points labeled")
    s = rem["score_sum"]
    if s is not None:
        out.append(f"score sum   {s['value']:,.0f} (f summed over {rem['unlabeled']:,} unlabeled points; not a count: "
                   "f is not calibrated and overstates the positives left, tenfold on Adult: docs/sessions.md)")
    if s is None and rem.get("score_sum_left_out"):
        out.append(f"score sum   left out: {rem['score_sum_left_out']}")
    out.extend(_recall_lines(rem.get("recall")))
    return out


def _recall_lines(recall):
    """The recall reached and the stopping rule (engine/guidance/stopping.py)."""
    if not recall:
        return []
    target = recall.get("target")
    if recall["recall"] is None:
        why = "no positive yet" if not recall["found"] else f"{recall['window']} records read since the start"
        lines = [f"recall      not estimated yet ({why}; the estimate needs 100 records read past the first labels)"]
    else:
        basis = "the random sample" if recall["basis"] == "sample" else "how the hits slowed down"
        lines = [f"recall      {recall['recall']:.1%} of the positives found ({recall['level']:.0%} interval "
                 f"{recall['recall_low']:.1%}-{recall['recall_high']:.1%}; about {recall['remaining']:,.1f} left, "
                 f"at most {recall['remaining_high']:,.1f}), from {basis}"]
    if target is not None:
        lines.append(f"stop        {'yes' if recall.get('stop') else 'not yet'}: the rule is a recall of "
                     f"{target:.0%} reached with 95% confidence")
        if recall.get("stop") and recall["basis"] != "sample":
            # the rule's calibration: its misses were relevant records of a kind the search had not met
            lines.append("check       the rule models the hits found, and cannot see relevant records of a kind the "
                         "search has not met: label a random sample of the records not read to check the stop "
                         "(bigsearch session sample DIR -m 300; docs/screening.md)")
    return lines


def _describe_method(st):
    params = ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                       for k, v in sorted(st["params"].items()) if v is not None)
    return f"{st['method']}" + (f" ({params})" if params else "")


def _count(n, noun):
    return f"{n} {noun}{'s' * (n != 1)}"


def _steps(n, columns=10):
    """About ``columns`` round steps from 1 to n, n included."""
    step = next(s for m in (1, 10, 100, 1000, 10**4, 10**5, 10**6, 10**9) for s in (m, 2 * m, 5 * m)
                if n / s <= columns)
    return sorted({*range(step, n + 1, step), n})
