"""`bigsearch datasets list | fetch NAME... | path NAME`: the public data sets the docs use."""

import click

from . import main
from .options import flags_for


@main.group()
def datasets():
    """Public data sets (Adult, MNIST, HIGGS, CoverType, ...) fetched with SHA-256 checks.

    They go into BIGSEARCH_DATA_DIR (default: the user cache directory). Without
    internet, fetch from a mirror directory holding NAME/FILE: --source DIR or
    BIGSEARCH_DATA_MIRROR=DIR.
    """


@datasets.command("list")
def list_datasets():
    """The data sets, whether each is fetched, and where they go."""
    from ..datasets import DATASETS, data_dir, is_fetched

    click.echo(f"cache: {data_dir()}")
    for name, d in DATASETS.items():
        mark = "fetched" if is_fetched(name) else "-"
        click.echo(f"{name:<18} {mark:<8} {d.title} [{d.licence}]")


@datasets.command()
@click.argument("names", nargs=-1, required=True, metavar="NAME...")
@click.option(
    "--source",
    type=click.Path(file_okay=False, path_type=str),
    default=None,
    help="A mirror directory holding NAME/FILE (default: $BIGSEARCH_DATA_MIRROR, else the internet).",
)
def fetch(names, source):
    """Fetch data sets into the cache (checked; files already there are kept)."""
    from ..datasets import dataset
    from ..datasets import fetch as fetch_dataset

    for name in names:
        dataset(name)  # every name is known before anything is fetched
    for name in names:
        with flags_for(renamed={"source=DIR": "--source DIR"}):
            click.echo(fetch_dataset(name, source=source))


@datasets.command()
@click.argument("name")
def path(name):
    """Print the directory holding a fetched data set."""
    from ..datasets import path as dataset_path

    click.echo(dataset_path(name))
