"""The `bigsearch` command: thin click commands that parse options and call the library.

Bad input raises a BigsearchError (or a click usage error); either becomes a one-line
message on stderr and exit status 2, never a traceback.
"""

import errno
import os
import signal
import sys

import click

from .. import __version__
from ..errors import BigsearchError
from .options import as_flags

# Parameters whose flag every command that takes them spells alike (cli/options.py).
EVERY_COMMANDS_FLAGS = {"storage_options": "--storage-option", "dataset=NAME": "--dataset NAME",
                        "tls_ca_file": "--tls-ca-file", "tls_cert": "--tls-cert", "tls_key": "--tls-key"}


class Group(click.Group):
    """A click group that turns library and usage errors into one-line messages with
    status 2 (click's own usage errors would add usage lines)."""

    def invoke(self, ctx):
        try:
            result = super().invoke(ctx)
            sys.stdout.flush()          # a closed pipe is found here, not in the flush at exit
            return result
        except click.UsageError as e:
            fail(e.format_message())
        except BigsearchError as e:
            fail(as_flags(str(e), renamed=EVERY_COMMANDS_FLAGS))
        except OSError as e:
            if e.errno == errno.EPIPE:
                closed_pipe()
            fail(f"{e.filename + ': ' if getattr(e, 'filename', None) else ''}{e.strerror or e}")
        except MemoryError as e:     # what bigsearch/limits.py did not foresee: still one line
            fail(f"out of memory ({e or 'an allocation failed'}); see docs/reliability.md for the input limits")


def closed_pipe():
    """The reader of our output went away (``... | head``): stop without a word, with the
    status a shell reports for a process killed by SIGPIPE, as ``yes | head`` does. stdout
    is pointed at /dev/null first, so the flush at exit cannot fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    sys.exit(128 + signal.SIGPIPE)


def fail(message):
    click.echo(f"Error: {printable(message)}", err=True)
    sys.exit(2)


def printable(text):
    """``text`` on one line with control and other unprintable characters escaped (a
    file's bytes or a store's ids must not drive the terminal: ESC [ 2 J clears it)."""
    text = str(text)
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="bigsearch")
def main():
    """Active Search on feature stores larger than memory (LAS, WNAS, ASG, random)."""
    # A write past the file size limit (ulimit -f) then fails with EFBIG, which the
    # writers report, instead of the signal killing the process (Python ignores it too).
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)


def register():
    """Import every module of this package: each adds its commands to ``main``."""
    import importlib
    import pkgutil
    for module in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{module.name}")


register()
