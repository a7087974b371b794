"""Option types and decorators shared by the commands."""

import contextlib
import functools
import re

import click

from ..errors import BigsearchError, ParameterError


class IndexList(click.ParamType):
    """A comma-separated list of non-negative integers, e.g. 3,17,42."""

    name = "I,J,..."

    def convert(self, value, param, ctx):
        if isinstance(value, list):
            return value
        try:
            out = [int(v) for v in str(value).split(",") if v.strip()]
        except ValueError:
            self.fail(f"{value!r} is not a comma-separated list of integers", param, ctx)
        if any(i < 0 for i in out):
            self.fail(f"{value!r} has a negative index", param, ctx)
        return out


class MethodList(click.ParamType):
    """One method or a comma-separated list of them; ``choices`` is a list, or a function
    giving it (so that the engine is imported only when a command runs)."""

    name = "METHOD[,METHOD...]"

    def __init__(self, choices):
        self._choices = choices

    @property
    def choices(self):
        return self._choices() if callable(self._choices) else self._choices

    def convert(self, value, param, ctx):
        if isinstance(value, list):
            return value
        out = [v.strip() for v in str(value).split(",") if v.strip()]
        for v in out:
            if v not in self.choices:
                self.fail(f"unknown method {v!r}; choose from {', '.join(self.choices)}", param, ctx)
        if not out:
            self.fail("no method given", param, ctx)
        return out


def as_flags(message, *parameters, renamed=None):
    """``message`` with the parameters it names (``init_index``, ``overwrite=True``) said as
    this command's flags (``--init-index``, ``--overwrite``). ``renamed`` maps parameters
    whose flag is spelled otherwise, e.g. ``{"labels.column": "--label-column"}``."""
    flags = {name: "--" + name.replace("_", "-") for name in parameters} | dict(renamed or {})
    for name, flag in flags.items():
        # whole names only: not a part of another (labels.column, n_features, --rff)
        message = re.sub(rf"(?<![\w.-]){re.escape(name)}(=True)?(?![\w-])", flag, message)
    return message


@contextlib.contextmanager
def flags_for(*parameters, renamed=None):
    """Library errors name parameters; say them as this command's flags (see as_flags)."""
    try:
        yield
    except BigsearchError as e:
        message = as_flags(str(e), *parameters, renamed=renamed)
        if message == str(e):
            raise
        raise type(e)(message) from e


dataset_option = click.option(
    "--dataset", default=None, metavar="NAME",
    help="The array holding X in the Zarr group or HDF5 file (default: X); its y and ids go with it.")


def las_options(f):
    """--pi, --eta, --w0, --alpha: the parameters of LAS (and ASG)."""
    for decorator in reversed([
        click.option("--pi", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=None,
                     help="Prior probability of a positive (default: the prevalence of the stored labels)."),
        click.option("--eta", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=0.5,
                     show_default=True, help="Transition probability into a labeled point's pseudo-node."),
        click.option("--w0", type=click.FloatRange(0, min_open=True), default=None,
                     help="Weight of an unlabeled point's pseudo-node (default 1/n)."),
        click.option("--alpha", type=click.FloatRange(0), default=0.0, show_default=True,
                     help="Weight of the rescaled impact factor in the selection."),
    ]):
        f = decorator(f)
    return f


BLR_RENAMED = {"lam": "--blr-lam", "noise": "--blr-noise"}    # BLR's options whose flags are spelled otherwise


def blr_options(f):
    """--acquisition, --beta, --blr-lam, --blr-noise: the parameters of BLR."""
    for decorator in reversed([
        click.option("--acquisition", type=click.Choice(["greedy", "ucb", "thompson"]), default=None,
                     help="BLR: greedy (the predictive mean; the default), ucb (mean + beta sd) or thompson "
                          "(one posterior draw per query)."),
        click.option("--beta", type=click.FloatRange(0), default=None, help="BLR --acquisition ucb: weight of the sd "
                     "(default 2)."),
        click.option("--blr-lam", "blr_lam", type=click.FloatRange(0, min_open=True), default=None,
                     help="BLR: prior precision of the weights (default: fitted to the labels by the evidence)."),
        click.option("--blr-noise", "blr_noise", type=click.FloatRange(0, min_open=True), default=None,
                     help="BLR: noise variance of a label (default: fitted to the labels by the evidence)."),
    ]):
        f = decorator(f)
    return f


SCREEN_RENAMED = {"ridge": "--screen-ridge", "balance": "--screen-balance", "unread": "--screen-unread",
                  "adapt": "--screen-adapt",
                  "neighbours": "--screen-neighbours", "neighbour_weight": "--screen-neighbour-weight",
                  "explore_after": "--screen-explore-after"}


def screen_options(f):
    """--screen-*: the parameters of the screening method (engine/methods/screen.py)."""
    for decorator in reversed([
        click.option("--screen-ridge", "screen_ridge", type=click.FloatRange(0, min_open=True), default=None,
                     help="screen: penalty on the classifier's weights (default 1)."),
        click.option("--screen-balance", "screen_balance", type=click.FloatRange(0, min_open=True), default=None,
                     help="screen: how many times less the negatives weigh, in all, than the positives "
                          "(default 9.8, ASReview's)."),
        click.option("--screen-unread", "screen_unread", type=click.FloatRange(0), default=None,
                     help="screen: how many negatives the records not read count for, in all (default 1,000; "
                          "0: the answers alone, docs/screening.md)."),
        click.option("--screen-adapt/--screen-no-adapt", "screen_adapt", default=None,
                     help="screen: weigh the answers-only ridge and the ridge with the unread records by how "
                          "each ranked the latest answers (default), or use the second alone."),
        click.option("--screen-neighbours", "screen_neighbours", type=click.IntRange(1, 3), default=None,
                     help="screen: nearest relevant records whose similarity is added (default 3)."),
        click.option("--screen-neighbour-weight", "screen_neighbour_weight", type=click.FloatRange(0), default=None,
                     help="screen: weight of that similarity, in standard deviations of the classifier's score "
                          "(default 0: it cost 7% more records on full-rank text features, docs/screening.md)."),
        click.option("--screen-explore-after", "screen_explore_after", type=click.IntRange(0), default=None,
                     help="screen: after this many irrelevant records in a row, as many drawn at random, then as "
                          "many ranked, by turns until one is relevant (default 100; 0: never; docs/screening.md)."),
    ]):
        f = decorator(f)
    return f


class LocalClusterSpec(click.ParamType):
    """local:N, a LocalCluster of N worker processes; returns N."""

    name = "local:N"

    def convert(self, value, param, ctx):
        if isinstance(value, int):
            return value
        kind, _, count = str(value).partition(":")
        if kind != "local" or not count.isdigit() or int(count) < 1:
            self.fail(f"{value!r} is not local:N with N >= 1 (e.g. local:4); for another cluster, "
                      "start it and pass its scheduler address with --scheduler", param, ctx)
        return int(count)


def cluster_options(f=None, *, persist=True):
    """--scheduler, --cluster, --persist: run the chunk passes on a dask cluster.

    The command receives ``scheduler``, ``cluster`` and ``persist`` and turns them into
    a backend with ``with cluster_backend(scheduler, cluster, persist) as backend:``.
    ``@cluster_options(persist=False)`` leaves out --persist (for passes that read X once).
    """
    if f is None:
        return lambda g: cluster_options(g, persist=persist)
    options = [
        click.option("--scheduler", metavar="ADDRESS|FILE", envvar="BIGSEARCH_SCHEDULER", default=None,
                     help="Run on the dask cluster whose scheduler is at ADDRESS (e.g. tcp://host:8786) or "
                          "is described by a scheduler FILE; env BIGSEARCH_SCHEDULER. Every worker must "
                          "reach the store at the same path (docs/cluster.md)."),
        click.option("--cluster", type=LocalClusterSpec(), default=None, metavar="local:N",
                     help="Run on a new LocalCluster of N worker processes on this machine."),
    ]
    if persist:
        options.append(click.option("--persist", is_flag=True,
                                    help="Keep X in the workers' memory instead of re-reading the store every pass."))
    tls = (("--tls-ca-file", "BIGSEARCH_TLS_CA_FILE", "the CA that signed the scheduler's certificate"),
           ("--tls-cert", "BIGSEARCH_TLS_CERT", "this client's certificate"),
           ("--tls-key", "BIGSEARCH_TLS_KEY", "this client's private key (if not in --tls-cert)"))
    for name, env, what in tls:
        options.append(click.option(name, envvar=env, metavar="FILE", expose_value=False, callback=_remember_tls,
                                    help=f"TLS to the --scheduler: {what} (PEM); env {env}."))
    for decorator in reversed(options):
        f = decorator(f)
    return f


def _remember_tls(ctx, param, value):
    """The TLS options reach cluster_backend through the click context, so commands need
    not pass them along."""
    if value:
        ctx.meta.setdefault("bigsearch_tls", {})[param.name] = value
    return value


def object_store_options(f=None, *, cache=True):
    """--storage-option KEY=VALUE (repeatable), and with ``cache`` --cache-dir and
    --cache-size: how stores at object-store URLs (s3://, gs://, az://, https://) are
    reached and cached (docs/cluster.md). The command itself does not see them: it runs
    with them as the defaults of the URLs it opens."""
    if f is None:
        return lambda g: object_store_options(g, cache=cache)

    @functools.wraps(f)
    def command(*args, storage_option=(), cache_dir=None, cache_size=None, **kwargs):
        from ..storage.chunk_cache import cache_settings
        from ..storage.remote_options import parse_storage_options, remote_defaults
        if cache_size is not None:
            cache_settings(cache_dir, cache_size)      # a bad --cache-size is an error now, remote store or not
        with remote_defaults(parse_storage_options(storage_option), cache_dir, cache_size):
            return f(*args, **kwargs)

    options = [click.option("--storage-option", "storage_option", multiple=True, metavar="KEY=VALUE",
                            help="For s3://, gs://, az:// or https:// stores: an obstore option such as "
                                 "endpoint=http://host:9000, region=eu-west-1 or retries=3 (repeatable); "
                                 "credentials come from the usual environment variables.")]
    if cache:
        options += [
            click.option("--cache-dir", type=click.Path(file_okay=False, path_type=str), default=None,
                         help="Local directory caching remote chunks, the same path on every dask worker "
                              "(default: each process's BIGSEARCH_CHUNK_CACHE, else ~/.cache/bigsearch/chunks)."),
            click.option("--cache-size", default=None, metavar="SIZE",
                         help="Most the chunk cache may hold, e.g. 50G (default: BIGSEARCH_CHUNK_CACHE_SIZE, "
                              "else 20G; 0: no cache)."),
        ]
    for decorator in reversed(options):
        command = decorator(command)
    return command


def cluster_backend(scheduler, cluster, persist=False):
    """The backend the cluster options ask for, as a context manager yielding "local" or
    a dask backend for the engines' ``backend=`` (its ``.client`` is a
    ``distributed.Client``); the client and any LocalCluster close on exit."""
    if scheduler and cluster:
        raise ParameterError("--scheduler and --cluster both given: use a running cluster or start one, not both")
    if persist and not (scheduler or cluster):
        raise ParameterError("--persist needs --scheduler or --cluster (it keeps X in the workers' memory)")
    if not (scheduler or cluster):
        return contextlib.nullcontext("local")
    from ..backends import connect, tls_security  # imports dask: only for cluster runs
    ctx = click.get_current_context(silent=True)
    tls = dict(ctx.meta.get("bigsearch_tls", {})) if ctx is not None else {}
    if tls and not scheduler:
        raise ParameterError("--tls-ca-file, --tls-cert and --tls-key are for --scheduler; a --cluster local:N "
                             "gets TLS credentials of its own")
    return connect(scheduler, cluster, persist,
                   security=tls_security(tls.get("tls_ca_file"), tls.get("tls_cert"), tls.get("tls_key")))
