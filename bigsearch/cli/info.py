"""`bigsearch info STORE`: what a feature store holds."""

import json

import click

from ..storage import open_store
from . import main


@main.command()
@click.argument("store", type=click.Path(path_type=str))
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
def info(store, as_json):
    """Shape, dtype, chunking, labels and provenance of STORE."""
    with open_store(store) as s:
        d = s.describe()
    if as_json:
        click.echo(json.dumps(d, indent=2, default=str))
        return
    click.echo(f"{d['path']} ({d['kind']}): {d['n']:,} points x {d['r']} features, {d['dtype']}, "
               f"{d['x_bytes'] / 2**20:,.1f} MiB")
    click.echo(f"chunks: {d['n_chunks']} of {d['chunk_rows']:,} rows; "
               + ("memory-mapped reads" if d["fast_path"] else f"decoded reads ({d['slow_reason']})"))
    if "labels" in d:
        c = d["labels"]
        prev = "n/a" if d["prevalence"] is None else f"{d['prevalence']:.4f}"
        click.echo(f"labels: {c['1']:,} positive, {c['0']:,} negative, {c['-1']:,} unknown (prevalence {prev})")
    else:
        click.echo("labels: none")
    for key in ("provenance", "featurization"):
        if key in d["attrs"]:
            click.echo(f"{key}: {json.dumps(d['attrs'][key], default=str)}")
