"""`bigsearch summarize STORE`: add the pruning block summaries to an existing store."""

import os
import shutil
from pathlib import Path

import click

from ..errors import ParameterError
from . import main
from .ingest import BarProgress
from .options import flags_for


@main.command()
@click.argument("store", type=click.Path(path_type=str))
@click.option(
    "--block-rows",
    type=int,
    default=None,
    help="Rows per block: a multiple of 64 (default 128, what --prune uses unless told otherwise).",
)
@click.option("--quiet", is_flag=True, help="No progress bars.")
def summarize(store, block_rows, quiet):
    """Compute STORE's pruning block summaries and store them with it, so pruned searches
    (--prune) skip the pass that computes them (docs/store-format.md). Three passes over X;
    the summaries appear whole or not at all, and replace older ones."""
    from ..engine.pruning.block_summaries import check_block_rows
    from ..engine.pruning.summaries import write_block_summaries
    from ..storage import is_url, open_store

    with flags_for("block_rows"):
        check_block_rows(block_rows)
    if is_url(store):
        raise ParameterError(
            f"{store}: summaries are added to local stores only, not in object storage; add them "
            "to the local store before uploading it (a search computes them otherwise)"
        )
    with open_store(store) as s:
        _check_writable(s)
        path = Path(s.path)
    bars = BarProgress(quiet)
    try:
        written = write_block_summaries(path, block_rows, progress=bars.step)
    finally:
        bars.end()
    if written is None:
        raise ParameterError(
            f"{store}: some point has a degree x_i . sum_j x_j <= 0 (or X is not finite), so "
            "pruned LAS cannot search it and there is nothing to summarize; see "
            "docs/store-format.md#what-las-needs-from-x"
        )
    click.echo(
        f"{store}: block summaries of {written['blocks']:,} blocks of {written['block_rows']} rows "
        f"({written['MiB']:,.1f} MiB) written in {written['seconds']:.1f} s"
    )


def _check_writable(store):
    """What the command cannot do, said before any pass: a format that holds no groups
    beside X, a store it may not write, an HDF5 file with no room for its copy."""
    from ..storage.base import FeatureStore

    if type(store).write_group.__func__ is FeatureStore.write_group.__func__:
        raise ParameterError(
            f"{store.path}: {store.label} stores cannot hold block summaries; write the data as "
            "a Zarr or HDF5 store (bigsearch ingest)"
        )
    path = Path(store.path)
    parent = path.absolute().parent
    if not os.access(path, os.W_OK) or not os.access(parent, os.W_OK):
        raise ParameterError(
            f"{path}: the store is read-only here (it and the directory holding it must be "
            "writable); copy it somewhere writable first"
        )
    if not path.is_dir():  # one file: rewritten with the group added, then swapped in
        need, free = path.stat().st_size, shutil.disk_usage(parent).free
        if free < need * 1.01 + (64 << 20):
            raise ParameterError(
                f"{path}: adding summaries to an HDF5 file rewrites it, which needs "
                f"{need / 2**30:.2f} GiB free beside it ({free / 2**30:.2f} GiB are); free space "
                "or use a Zarr store"
            )
