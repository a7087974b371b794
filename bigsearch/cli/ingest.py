"""`bigsearch ingest SRC... OUT`: input files -> a feature store (see docs/ingest.md)."""

import sys

import click

from ..errors import ParameterError
from . import main
from .options import as_flags, cluster_backend, cluster_options, flags_for, object_store_options

# The library's names for what ingest's flags set (ingest/options.py): errors speak of those.
INGEST_FLAGS = ("rff", "gamma", "bins", "minmax", "minmax_buckets", "minmax_power", "smiles_column", "fingerprint",
                "n_features", "prevalence", "cluster_order", "overwrite", "text_dim", "text_projection", "ngram_max",
                "text_sample", "title_weight", "drop_duplicates")
INGEST_RENAMED = {"labels.column": "--label-column", "labels.files": "--labels", "labels.positive": "--positive",
                  "features.drop": "--drop", "features.categorical": "--categorical",
                  "features.text_columns": "--text-column", "text_columns": "--text-column", "features.keep": "--keep",
                  "features.normalize": "--normalize", "features.bias": "--bias", "source.format": "--format",
                  "source.dataset": "--dataset", "source.sheet": "--sheet", "source.header=True": "--header",
                  "source.names": "--names", "output.encoding": "--encoding", "output.format": "--output-format"}


class TextDim(click.ParamType):
    """--text-dim: a positive number of features, or auto (0 to the library: ingest/text.py's auto_dim)."""

    name = "text_dim"

    def convert(self, value, param, ctx):
        if isinstance(value, int) or str(value).strip().lower() == "auto":
            return 0 if not isinstance(value, int) else value
        try:
            dim = int(value)
        except ValueError:
            dim = 0
        if dim < 1:
            self.fail(f"{value!r} is neither a positive number of features nor auto", param, ctx)
        return dim


class BarProgress:
    """A click progress bar per pass on stderr; hidden with --quiet or off a terminal."""

    def __init__(self, quiet, flags=lambda message: message):
        self.flags = flags         # says the parameters a library warning names as flags
        self.show = not quiet and sys.stderr.isatty()
        self.bar, self.done, self._finished = None, 0, None

    def start(self, label, total):
        self.bar = click.progressbar(length=max(1, total), label=label, file=sys.stderr,
                                     hidden=not self.show, show_percent=True, show_eta=True)
        self.bar.__enter__()
        self.done = 0

    def update(self, done):
        self.bar.update(max(0, done - self.done))
        self.done = max(self.done, done)

    def end(self):
        if self.bar is not None:
            self.bar.__exit__(None, None, None)
            self.bar = None

    def warn(self, message):
        click.echo(f"Warning: {self.flags(message)}", err=True)

    def step(self, label, done, total):
        """As a ``progress(what, done, total)`` callback: one bar per step, in turn, each
        ended when done reaches total (later reports of a finished step are ignored)."""
        if label == self._finished:
            return
        if self.bar is None or self.bar.label != label:
            self.end()
            self.start(label, total)
        self.update(done)
        if done >= total:
            self.end()
            self._finished = label


def input_rate(nbytes, seconds):
    """'120 MB/s of input'; for an input too small for a rate to mean anything (under
    10 MB: start-up dominates), its size: '38 kB of input'."""
    if nbytes >= 10e6 and seconds > 0:
        return f"{nbytes / 1e6 / seconds:,.0f} MB/s of input"
    if nbytes >= 1e6:
        return f"{nbytes / 1e6:.1f} MB of input"
    return f"{max(1, round(nbytes / 1e3)):,} kB of input" if nbytes else "an empty input"


def _split(values):
    """--categorical a,b --categorical c -> [a, b, c]."""
    return [v.strip() for value in values for v in value.split(",") if v.strip()]


def _choice(value, choices, option):
    if value is not None and value not in choices:
        raise ParameterError(f"{option} {value!r} is not one of {', '.join(choices)}")
    return value


def _option_groups(o):
    """The library's option groups (ingest/options.py) from the command's flags."""
    from ..ingest import FeatureOptions, LabelOptions, OutputOptions, SourceOptions
    return {"source": SourceOptions(format=o["fmt"], delimiter=o["delimiter"], header=o["header"],
                                    names=_split(o["names"]), dataset=o["dataset"], n_features=o["n_features"],
                                    sheet=o["sheet"]),
            "labels": LabelOptions(files=o["labels"], column=o["label_column"], positive=o["positive"],
                                   prevalence=o["prevalence"], seed=o["seed"]),
            "features": FeatureOptions(categorical=_split(o["categorical"]), drop=_split(o["drop"]),
                                       bins=o["bins"], normalize=o["normalize"], bias=o["bias"], rff=o["rff"],
                                       gamma=o["gamma"], seed=o["seed"], smiles_column=o["smiles_column"],
                                       fingerprint=o["fingerprint"], counts=o["counts"], idf=o["idf"],
                                       minmax=o["minmax"], minmax_buckets=o["minmax_buckets"],
                                       minmax_power=o["minmax_power"], text_columns=_split(o["text_column"]),
                                       text_dim=o["text_dim"], text_projection=o["text_projection"],
                                       ngram_max=o["ngram_max"], text_sample=o["text_sample"],
                                       title_weight=o["title_weight"], drop_duplicates=o["drop_duplicates"],
                                       keep=_split(o["keep"])),
            "output": OutputOptions(format=o["output_format"], chunk_rows=o["chunk_rows"], dtype=o["dtype"],
                                    codec=o["codec"], overwrite=o["overwrite"], encoding=o["encoding"],
                                    cluster_order=o["cluster_order"])}


def _stage_text(name, stage):
    """'map 1.20 s (4,100 rows/s, 67 MB/s)', or 'map: none' for a stage that did nothing."""
    if not stage["rows"]:
        return f"{name}: none"
    if not stage["seconds"]:
        return f"{name} 0 s"
    return (f"{name} {stage['seconds']:.2f} s ({stage['rows_per_second']:,.0f} rows/s, "
            f"{stage['MB_per_second']:,.1f} MB/s)")


def _passes_text(passes, rows):
    """'statistics 20.1 s (49,751 rows/s); fit 9.8 s; writing 60.3 s (16,584 rows/s)'."""
    return "; ".join(f"{name} {s:.1f} s" + ("" if name == "fit" or not s else f" ({rows / s:,.0f} rows/s)")
                     for name, s in passes.items())


@main.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=str), metavar="SRC... OUT")
@click.option("--format", "fmt", default=None, metavar="FORMAT",
              help="Input format: csv, tsv, libsvm, npy, hdf5, zarr, idx, parquet, arff, ris or xlsx "
                   "(default: detected).")
@click.option("--label-column", default=None, metavar="NAME|INDEX",
              help="The column holding the labels (a 0-based index when numeric).")
@click.option("--positive", multiple=True, metavar="VALUE",
              help="A label value that means positive (repeatable); other values are negative.")
@click.option("--labels", "labels", multiple=True, type=click.Path(path_type=str), metavar="FILE",
              help="Labels in a separate file (IDX, NumPy, one-column text), one per SRC, in order.")
@click.option("--prevalence", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=None,
              help="Subsample the positives to this prevalence (original row numbers go to ids).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of --prevalence, --rff and --minmax.")
@click.option("--categorical", multiple=True, metavar="COLS",
              help="Columns to one-hot encode (names or indices, comma-separated); text columns are unless "
                   "their values are mostly distinct (free text, identifiers: left out, and said).")
@click.option("--drop", multiple=True, metavar="COLS", help="Columns to leave out (names or indices).")
@click.option("--keep", multiple=True, metavar="COLS",
              help="Columns to keep as features though they look like identifiers (e.g. named record_id).")
@click.option("--text-column", multiple=True, metavar="COLS",
              help="Text columns (e.g. title,abstract) joined into one document per row and made into text "
                   "features: TF-IDF of word n-grams, projected to --text-dim (docs/screening.md).")
@click.option("--text-dim", type=TextDim(), default="auto", show_default=True, metavar="D|auto",
              help="Text features per document; auto: one per document up to 4,096 documents (their "
                   "similarities exactly), 512 beyond.")
@click.option("--text-projection", default="svd", show_default=True, metavar="svd|hashing",
              help="How TF-IDF becomes --text-dim features: svd (latent semantic analysis, fitted on a sample) "
                   "or hashing (a random projection).")
@click.option("--ngram-max", type=click.IntRange(1, 4), default=2, show_default=True, metavar="N",
              help="Text: word n-grams up to N words.")
@click.option("--text-sample", type=click.IntRange(2), default=20_000, show_default=True, metavar="K",
              help="Text, svd: documents the projection is fitted on.")
@click.option("--title-weight", type=click.IntRange(1, 10), default=3, show_default=True, metavar="N",
              help="Text: times a title's words count beside the other text columns (the column named "
                   "title, TI, primary_title, ...); 1: the columns joined as they are.")
@click.option("--drop-duplicates", is_flag=True,
              help="Text: leave out the records that repeat an earlier one (the same DOI, or the same title and "
                   "abstract: one search exported from several databases); without it they are named.")
@click.option("--bins", type=int, default=None, metavar="K",
              help="Cut numeric columns into K quantile bins, one-hot encoded.")
@click.option("--smiles-column", default=None, metavar="NAME|INDEX",
              help="A column of SMILES strings to encode as a molecular fingerprint (needs bigsearch[chem]).")
@click.option("--fingerprint", default="atompair", show_default=True, metavar="atompair|morgan[:BITS]",
              help="The fingerprint of --smiles-column (default 2048 bits).")
@click.option("--counts", is_flag=True, help="Count fingerprints (occurrences) instead of bits.")
@click.option("--idf", is_flag=True,
              help="Weight each feature by its inverse document frequency (before --minmax and --normalize).")
@click.option("--minmax", type=int, default=None, metavar="D",
              help="Map non-negative features to D x B random features of the MinMax (Tanimoto) kernel.")
@click.option("--minmax-buckets", type=int, default=8, show_default=True, metavar="B",
              help="--minmax: buckets per draw.")
@click.option("--minmax-power", type=int, default=1, show_default=True, metavar="P",
              help="--minmax: approximate the kernel to the power P (sharper).")
@click.option("--normalize", is_flag=True, help="Scale every row to unit norm (after encoding).")
@click.option("--bias", is_flag=True,
              help="Append a constant 1 (after --normalize): similarities cos + 1 >= 0.")
@click.option("--rff", type=int, default=None, metavar="D",
              help="Map to D random Fourier features of the RBF kernel (after --bias).")
@click.option("--gamma", type=float, default=1.0, show_default=True, help="RBF kernel exp(-gamma |x - x'|^2).")
@click.option("--n-features", type=click.IntRange(1), default=None,
              help="LIBSVM: the number of features (else found by a first pass).")
@click.option("--delimiter", default=None, help="CSV: the field separator (default: detected).")
@click.option("--header/--no-header", default=None,
              help="CSV: whether the first row names the columns (default: detected).")
@click.option("--names", multiple=True, metavar="A,B,...",
              help="CSV without a header: the columns' names (default: a NAME.names file beside it, else f0, f1, ...).")
@click.option("--dataset", default=None, help="HDF5/Zarr input: the 2-D dataset to read (default: X).")
@click.option("--sheet", default=None, help="Excel input: the sheet to read (default: the first).")
@click.option("--output-format", default=None, metavar="zarr|hdf5",
              help="Store format (default: zarr, or hdf5 when OUT ends in .h5).")
@click.option("--chunk-rows", type=click.IntRange(1), default=None,
              help="Rows per chunk (default: chunks of about 32 MiB).")
@click.option("--dtype", default="float32", show_default=True, metavar="float32|float64")
@click.option("--encoding", default=None, metavar="float32|float64|float16|int8|binary",
              help="How X is stored (default: --dtype): float16; int8 codes with a scale per row; "
                   "binary: 0/1 features packed in bits with a scale per row (docs/store-format.md).")
@click.option("--codec", default="none", show_default=True,
              help="Compression: none, lz4, zstd, gzip (Zarr); none, gzip, lzf (HDF5).")
@click.option("--cluster-order", type=click.IntRange(0), default=None, metavar="K",
              help="Write the rows grouped by k-means cluster (K clusters; 0: about n / 8,192), so pruned "
                   "queries (run --prune) read less; ids keep the original row numbers.")
@click.option("--overwrite", is_flag=True, help="Replace an existing OUT.")
@cluster_options(persist=False)
@object_store_options(cache=False)
@click.option("-q", "--quiet", is_flag=True, help="No progress bar or summary.")
def ingest(paths, scheduler, cluster, quiet, **flags):
    """Turn SRC files (concatenated in order) into the feature store OUT."""
    from ..ingest import CODECS, FORMATS
    from ..ingest import ingest as run_ingest
    from ..storage import STORE_FORMATS
    from ..storage.encoding import ENCODINGS
    if len(paths) < 2:
        raise ParameterError("give at least one SRC and the OUT store: bigsearch ingest SRC... OUT")
    _choice(flags["fmt"], FORMATS, "--format")
    _choice(flags["output_format"], tuple(STORE_FORMATS), "--output-format")
    _choice(flags["dtype"], ("float32", "float64"), "--dtype")
    _choice(flags["encoding"], ENCODINGS, "--encoding")
    _choice(flags["codec"], CODECS, "--codec")
    progress = BarProgress(quiet, lambda message: as_flags(message, *INGEST_FLAGS, renamed=INGEST_RENAMED))
    try:
        with flags_for(*INGEST_FLAGS, renamed=INGEST_RENAMED), cluster_backend(scheduler, cluster) as backend:
            summary = run_ingest(list(paths[:-1]), paths[-1], **_option_groups(flags), progress=progress,
                                 command=["bigsearch", "ingest", *sys.argv[2:]], backend=backend)
    finally:
        progress.end()
    if not quiet:
        labels_text = ""
        if summary["labels"]:
            c = summary["labels"]
            labels_text = f"; labels: {c.get('1', 0):,} positive, {c.get('0', 0):,} negative"
            if summary.get("label_mapping"):     # text labels read by their words (ingest/labels.py)
                m = summary["label_mapping"]
                labels_text += (f", {c.get('-1', 0):,} unlabeled ({'/'.join(m['positive']) or '-'} positive, "
                                f"{'/'.join(m['negative']) or '-'} negative, "
                                f"{'/'.join([*m.get('unlabeled', []), 'empty'])} unlabeled: the {m['vocabulary']} "
                                "words; --positive VALUE to choose)")
            elif c.get("-1", 0):                 # numbers with empty cells: those records are unlabeled
                labels_text += f", {c['-1']:,} unlabeled (empty)"
        click.echo(f"{summary['out']}: {summary['rows_written']:,} rows x {summary['n_features']} features "
                   f"({summary['rows_read']:,} rows read{labels_text}) in {summary['seconds']:.1f} s, "
                   f"{input_rate(summary['input_bytes'], summary['seconds'])}", err=True)
        click.echo("per stage: " + "; ".join(_stage_text(name, s) for name, s in summary["stages"].items()), err=True)
        if "statistics" in summary.get("passes", {}):
            click.echo("per pass: " + _passes_text(summary["passes"], summary["rows_read"]), err=True)
        if summary["duplicates_left_out"]:
            click.echo(f"left out {summary['duplicates_left_out']:,} records repeating an earlier one (the "
                       "earliest copy of each kept)", err=True)
        if summary.get("label_column_found"):
            name = summary["label_column_found"]
            click.echo(f"column {name!r} looks like labels (a reviewer's decisions); it was not used as labels: "
                       f"to use it, --label-column {name}", err=True)
        if summary["binary_possible"]:
            from ..storage.encoding import SPARSE_BITS, bytes_per_point
            r, share = summary["n_features"], summary["bits_set"]
            dense = (f"; with {share:.0%} of the bits set, a query of a store in memory is slower on bits "
                     "(2.5-3x float32's on the MinMax recipe's 4,096 features: docs/performance.md)"
                     if share > SPARSE_BITS else "")
            click.echo(f"every row is 0/1 times one number: --encoding binary would store "
                       f"{bytes_per_point('binary', r):,} bytes per point instead of "
                       f"{bytes_per_point(summary['encoding'], r):,}, with the same results{dense}", err=True)
        elif summary["int8_exact"]:
            from ..storage.encoding import bytes_per_point
            r = summary["n_features"]
            click.echo(f"every value is an integer within +-127 (counts): --encoding int8 would store them exactly in "
                       f"{bytes_per_point('int8', r):,} bytes per point instead of "
                       f"{bytes_per_point(summary['encoding'], r):,}, with the same results", err=True)
        if summary["blocks_on_cluster"] or summary["blocks_redone_here"]:
            click.echo(f"blocks featurized on the cluster: {summary['blocks_on_cluster']}"
                       f" (redone here after a worker failed: {summary['blocks_redone_here']})", err=True)
