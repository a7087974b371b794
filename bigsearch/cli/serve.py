"""`bigsearch serve SESSION`: the labelling page over a session."""

import click

from ..errors import BigsearchError
from . import main
from .options import flags_for, object_store_options
from .session import session_warnings, store_option


class ServeCommand(click.Command):
    """Warnings about a recovered session as "Warning: ..." lines, as for `session`."""

    def invoke(self, ctx):
        with session_warnings():
            return super().invoke(ctx)


@main.command(cls=ServeCommand)
@click.argument("directory", type=click.Path(path_type=str))
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on (every address asks for the access token printed at start).")
@click.option("--port", type=int, default=8765, show_default=True, help="Port (0: any free port).")
@click.option("--budget", type=click.IntRange(1), default=None,
              help="Labels planned: shown as progress, and the page ends there.")
@click.option("--count-start", is_flag=True,
              help="Count the session's starting labels (session new --start-from positives) against the budget.")
@click.option("--question", default=None, metavar="TEXT",
              help='What "positive" means, shown with every point (e.g. "Is this transaction fraud?").')
@click.option("--hide", default=None, metavar="COLS",
              help="Record fields not to show, comma-separated (the label column is never shown).")
@click.option("--highlight", default=None, metavar="TERMS",
              help="Words to mark in the records, comma-separated (a trailing * matches any ending: randomi*).")
@click.option("--token/--no-token", default=True, show_default=True,
              help="Require the access token printed at start; --no-token only on a loopback --host, on a machine "
                   "no one else uses (any local user can reach 127.0.0.1).")
@click.option("--new-token", is_flag=True,
              help="Replace the session's access token (kept in the session directory, mode 0600).")
@click.option("--no-prefetch", is_flag=True, help="Do not compute the next item ahead (for measurements).")
@store_option
@object_store_options
def serve(directory, host, port, budget, count_start, question, hide, highlight, token, new_token, no_prefetch,
          store):
    """Label the session in DIRECTORY in a web browser (docs/serve.md).

    Keys: a positive, x negative, space skip, backspace undo; a method that takes grades
    or scores (las, wnas, blr, ...) also takes a number typed in the page's field.
    Ctrl-C stops the server and writes a checkpoint; every acknowledged label is already
    in the journal.
    """
    try:
        from ..serve.server import serve as run
    except ImportError as e:
        raise BigsearchError(f"bigsearch serve needs {e.name}: pip install 'bigsearch[serve]'") from None
    hidden = tuple(c.strip() for c in hide.split(",") if c.strip()) if hide else ()
    marked = tuple(t.strip() for t in highlight.split(",") if t.strip()) if highlight else ()
    with flags_for("host", "hide", "highlight", renamed={"token=False": "--no-token"}):
        run(directory, host=host, port=port, budget=budget, store=store, prefetch=not no_prefetch,
            question=question, hide=hidden, count_start=count_start, new_token=new_token, token=token,
            highlight=marked, echo=lambda line: click.echo(line))
