"""`bigsearch info STORE`: what a feature store holds."""

import json
import shlex

import click

from . import main
from .options import dataset_option, object_store_options


@main.command()
@click.argument("store", type=click.Path(path_type=str))
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
@dataset_option
@object_store_options
def info(store, as_json, dataset):
    """Shape, dtype, chunking, codec, size on disk, labels, provenance and featurization of STORE."""
    from ..storage import open_store
    with open_store(store, {"dataset": dataset}) as s:
        d = s.describe()
    if as_json:
        click.echo(json.dumps(d, indent=2, default=str))
        return
    where = f"{d['path']}:{d['dataset']}" if "dataset" in d else d["path"]
    click.echo(f"{where} ({d['kind']}): {d['n']:,} points x {d['r']} features, {d['dtype']}, "
               f"{d['x_bytes'] / 2**20:,.1f} MiB")
    click.echo(f"encoding: {d['encoding']}, {d['bytes_per_point']:,} bytes per point")
    click.echo(f"chunks: {d['n_chunks']} of {d['chunk_rows']:,} rows; " + _read_path(d))
    click.echo(f"codec: {d['codec']}; {d['bytes_on_disk'] / 2**20:,.1f} MiB "
               + ("in the object store" if "cache" in d else "on disk"))
    if "labels" in d:
        c = d["labels"]
        prev = "n/a" if d["prevalence"] is None else f"{d['prevalence']:.4f}"
        click.echo(f"labels: {c['1']:,} positive, {c['0']:,} negative, {c['-1']:,} unknown (prevalence {prev})")
    else:
        click.echo("labels: none")
    attrs = d["attrs"]
    if isinstance(attrs.get("provenance"), dict) and "sources" in attrs["provenance"]:
        click.echo(f"provenance: {_provenance_text(attrs['provenance'])}")
    elif "provenance" in attrs:
        click.echo(f"provenance: {json.dumps(attrs['provenance'], default=str)}")
    if isinstance(attrs.get("featurization"), dict) and "columns" in attrs["featurization"]:
        click.echo(f"featurization: {_featurization_text(attrs['featurization'])}")
    elif "featurization" in attrs:
        click.echo(f"featurization: {json.dumps(attrs['featurization'], default=str)}")
    click.echo(f"block summaries: {_summaries_text(d['block_summaries'])}")
    click.echo("(--json shows everything)")


def _summaries_text(b):
    if b is None:
        return "none (pruned searches compute them; `bigsearch summarize` stores them)"
    if not b["complete"]:
        return f"incomplete or unreadable, not used ({b.get('error', 'a write was cut short')}); " \
               "`bigsearch summarize` writes them again"
    if not b["fingerprint_matches"]:
        return f"blocks of {b['block_rows']} rows, but X changed since they were written: not used; " \
               "`bigsearch summarize` writes them again"
    return f"blocks of {b['block_rows']} rows, basis of {b['basis_dim']} (used by --prune with that block size)"


def _read_path(d):
    if "cache" in d:        # a store at an object-store URL
        c = d["cache"]
        if not c:
            return "read from the object store on every pass (no chunk cache)"
        limit = c["limit_bytes"] / 2**30
        return f"read from the object store once, then cached in {c['dir']} (at most {limit:,.1f} GiB)"
    return "memory-mapped reads" if d["fast_path"] else f"decoded reads ({d['slow_reason']})"


def _provenance_text(p):
    sources = ", ".join(f"{s['path']} ({s['format']}, {s['rows']:,} rows)" for s in p["sources"])
    text = f"{p.get('tool', '?')} {p.get('bigsearch_version', '')} on {p.get('created', '?')} from {sources}"
    if p.get("command"):
        text += f"\n  command: {shlex.join(p['command'])}"
    return text


def _text_column_text(c):
    t = c["text"]
    how = "LSA" if t["projection"] == "svd" else "hashed"
    weights = t.get("column_weights") or [1] * len(t["columns"])
    columns = "+".join(name if w == 1 else f"{name} x{w}" for name, w in zip(t["columns"], weights))
    return (f"text {columns} ({t.get('documents', '?'):,} documents: TF-IDF of 1-{t['ngram_max']} "
            f"word n-grams, {how} to {t['dim']})")


def _featurization_text(f):
    kinds = {}
    for c in f["columns"]:
        kinds[c["kind"]] = kinds.get(c["kind"], 0) + 1
    parts = [f"{kinds['number']} numeric columns" if "number" in kinds else None,
             f"{kinds['bins']} columns in {f.get('bins')} quantile bins" if "bins" in kinds else None,
             f"{kinds['onehot']} one-hot columns" if "onehot" in kinds else None,
             *[_text_column_text(c) for c in f["columns"] if c["kind"] == "text"]]
    steps = [s for s in f["steps"] if s != "encode"]
    if "rff" in f:
        steps[steps.index("rff")] = f"rff (D={f['rff']['dim']}, gamma={f['rff']['gamma']}, seed={f['rff']['seed']})"
    text = ", ".join(p for p in parts if p) + f" -> {f['encoded_features']} features"
    if steps:
        text += "; then " + ", ".join(steps) + f" -> {f['n_features']}"
    if "label" in f:
        lab = f["label"]
        text += f"\n  label: {lab['column'] or lab['from']}, positive {lab['positive'] or ['1']}"
    if "subsample" in f:
        s = f["subsample"]
        text += (f"\n  positives subsampled to prevalence {s['prevalence']} (seed {s['seed']}): "
                 f"{s['positives_kept']:,} of {s['positives_in_input']:,} kept")
    return text
