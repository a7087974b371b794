"""Shared by the paper scripts: prepare stores from the public data sets (`bigsearch datasets`,
mirror: $BIGSEARCH_DATA_MIRROR, else ../shared/datasets when it is there), run the real
`bigsearch` commands, and put our numbers beside the paper's.

Stores and run directories go to $BIGSEARCH_PAPER_DATA (default /tmp/bigsearch-paper);
runs are resumable, so a rerun only computes what is missing. Reports (Markdown,
summary.json, recall.png) go to benchmarks/paper/results/<dataset>/.
"""

import json
import math
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from bigsearch.datasets import data_file  # noqa: F401  (the paper scripts import it from here)

ROOT = Path(__file__).resolve().parent
REPO = ROOT.parents[1]
if (REPO.parent / "shared" / "datasets").is_dir():
    os.environ.setdefault("BIGSEARCH_DATA_MIRROR", str(REPO.parent / "shared" / "datasets"))
DATA = Path(os.environ.get("BIGSEARCH_PAPER_DATA", "/tmp/bigsearch-paper"))
RESULTS = ROOT / "results"

# The paper's Table 1 (mean, std at T/2 and T) and Table 2 (mean positives in the top 100).
PAPER_TABLE1 = {
    "adult": {"budget": 200, "las": [(53.7, 11.7), (116.7, 13.3)], "wnas": [(46.1, 16.3), (99.4, 26.4)],
              "agr": [(23.1, 18.5), (57.1, 39.2)]},
    "mnist": {"budget": 400, "las": [(199.5, 1.0), (386.4, 4.9)], "wnas": [(193.7, 3.0), (379.8, 7.2)],
              "agr": [(192.8, 3.1), (380.1, 4.0)]},
    "covtype": {"budget": 500, "las": [(198.7, 32.0), (377.8, 55.7)], "wnas": [(188.8, 21.5), (375.7, 37.9)],
                "agr": [(27.2, 11.2), (43.5, 11.8)]},
}
PAPER_TABLE2 = {"covtype": {"las": 4.19, "wnas": 1.66}, "mnist": {"las": 94.25, "wnas": 60.68},
                "adult": {"las": 27.25, "wnas": 17.29}}


def cli(*args):
    """Run `python -m bigsearch ARGS` (the installed CLI, from this checkout); its stdout."""
    t = time.perf_counter()
    res = subprocess.run([sys.executable, "-m", "bigsearch", *map(str, args)], capture_output=True, text=True,
                         cwd=REPO)
    if res.returncode:
        sys.exit(f"bigsearch {' '.join(map(str, args))} failed:\n{res.stderr}")
    print(f"  bigsearch {' '.join(map(str, args[:2]))} ... ({time.perf_counter() - t:.0f} s)", file=sys.stderr)
    return res.stdout


def replication_ingest(name):
    """The `bigsearch ingest` arguments of docs/replication.md for adult, mnist or higgs (the
    paper's stores; other benchmarks ingest the same data the same way from here)."""
    recipes = {
        "adult": lambda: (data_file("adult", "adult.data"), data_file("adult", "adult.test"), "--label-column", 14,
                          "--positive", ">50K", "--positive", ">50K.", "--bins", 5, "--normalize",
                          "--prevalence", 0.05, "--seed", 0),
        "mnist": lambda: (data_file("mnist", "t10k-images-idx3-ubyte.gz"), "--labels",
                          data_file("mnist", "t10k-labels-idx1-ubyte.gz"), "--positive", 1, "--normalize",
                          "--prevalence", 0.01, "--seed", 0),
        "higgs": lambda: (data_file("higgs", "lightgbm_binary.train"), "--label-column", 0, "--normalize", "--bias",
                          "--rff", 290, "--gamma", 1, "--prevalence", 0.01, "--seed", 0),
    }
    return recipes[name]()


def prepare(name, *ingest_args):
    """The store DATA/<name>.zarr, ingested once with the given arguments."""
    store = DATA / f"{name}.zarr"
    if not store.exists():
        DATA.mkdir(parents=True, exist_ok=True)
        cli("ingest", *ingest_args, store, "-q")
    return store


def store_info(store):
    info = json.loads(cli("info", store, "--json"))
    return {"n": info["n"], "r": info["r"], "positives": info["labels"]["1"]}


def run(name, tag, store, budget, *, methods="las,wnas,agr,random", runs=10, seed=0, extra=()):
    """`bigsearch run` into DATA/runs/<name>/<tag> (resumed when it exists); its results."""
    out = DATA / "runs" / name / tag
    cli("run", store, "--method", methods, "--budget", budget, "--runs", runs, "--seed", seed, *extra,
        "--out", out, "-q")
    return json.loads((out / "results.json").read_text()), out


def pairs(name, tag, store, *, top=100, n_pairs=100, seed=0, methods="las,wnas", extra=()):
    out = DATA / "runs" / name / tag
    cli("pairs", store, "--method", methods, "--pairs", n_pairs, "--top", top, "--seed", seed, *extra,
        "--out", out, "-q")
    return json.loads((out / "pairs.json").read_text())


def cell(summary, method, t, plus=0):
    s = summary[method][str(t)]
    return f"{s['mean'] + plus:.1f} ± {s['std']:.1f}"


def seconds_per_run(results, method):
    times = [r["timings"]["total_seconds"] for r in results["runs"] if r["method"] == method]
    return sum(times) / len(times)


class Report:
    """Markdown sections for results/<name>/report.md, and the numbers for summary.json."""

    def __init__(self, name):
        self.name, self.lines, self.numbers = name, [f"# {name}: the paper's experiments", ""], {}
        self.dir = RESULTS / name
        self.dir.mkdir(parents=True, exist_ok=True)

    def add(self, *lines):
        self.lines.extend(lines)
        self.lines.append("")

    def table1(self, results, paper=None, heading="Table 1"):
        """Ours (queries only, and +1 for the initial positive) beside the paper's."""
        budget, summary = results["budget"], results["summary"]
        ts = [budget // 2, budget]
        runs = results["experiment"]["runs"]
        head = f"| method | ours {ts[0]} | ours {ts[1]} | ours +1 init, {ts[1]} |"
        sep = "|---|---:|---:|---:|"
        if paper:
            head += f" paper {paper['budget'] // 2} | paper {paper['budget']} |"
            sep += "---:|---:|"
        rows = [head, sep]
        for m in summary:
            row = f"| {m} | {cell(summary, m, ts[0])} | {cell(summary, m, ts[1])} | {cell(summary, m, ts[1], 1)} |"
            if paper:
                p = paper.get(m)
                row += (f" {p[0][0]} ± {p[0][1]} | {p[1][0]} ± {p[1][1]} |" if p else " | |")
            rows.append(row)
        self.add(f"### {heading} ({runs} runs, seeds {results['experiment']['seed']}.."
                 f"{results['experiment']['seed'] + runs - 1})", *rows)

    def spread(self, results, methods=("las", "wnas", "agr")):
        """Each run's positives at T, sorted: the mean hides a few bad starts."""
        t = results["budget"]
        lines = [f"Positives found at {t} in each run, sorted:", ""]
        for m in methods:
            found = sorted(r["hits"][t - 1] for r in results["runs"] if r["method"] == m)
            lines.append(f"- {m}: {', '.join(map(str, found))} (median {found[len(found) // 2]})")
        self.add(*lines)

    def difference(self, results, paper):
        """(ours - paper) in units of the combined standard error (the paper's from 10
        runs), counting the queries only and counting the initial positive too."""
        n = results["experiment"]["runs"]
        lines = ["| method | T | ours - paper | in s.e. | ours + 1 - paper | in s.e. |",
                 "|---|---:|---:|---:|---:|---:|"]
        for m in ("las", "wnas", "agr"):
            for k, t in enumerate((results["budget"] // 2, results["budget"])):
                ours = results["summary"][m][str(t)]
                mean, std = paper[m][k]
                se = math.sqrt(ours["std"] ** 2 / n + std ** 2 / 10)
                d = ours["mean"] - mean
                lines.append(f"| {m} | {t} | {d:+.1f} | {d / se:+.2f} | {d + 1:+.1f} | {(d + 1) / se:+.2f} |")
        self.add("Ours minus the paper's means, and in units of the standard error of the difference:", "", *lines)

    def batches(self, by_size, budget):
        """by_size: {B: results} for LAS and WNAS runs with the same starts."""
        t = [budget // 2, budget]
        rows = [f"| method | batch size | {t[0]} | {t[1]} | seconds per run |", "|---|---:|---:|---:|---:|"]
        for b, res in by_size.items():
            for m in ("las", "wnas"):
                rows.append(f"| {m} | {b} | {cell(res['summary'], m, t[0])} | {cell(res['summary'], m, t[1])} | "
                            f"{seconds_per_run(res, m):.1f} |")
                self.numbers[f"{m}_batch_{b}"] = res["summary"][m]
        self.add("### Batch size (10 runs, the same starts)", *rows)

    def table2(self, record, paper=None, heading="Table 2"):
        s = record["summary"]
        rows = ["| method | ours | paper |" if paper else "| method | ours |",
                "|---|---:|---:|" if paper else "|---|---:|"]
        for m in record["methods"]:
            row = f"| {m} | {s['methods'][m]['mean']:.2f} ± {s['methods'][m]['std']:.2f} |"
            rows.append(row + (f" {paper[m]} |" if paper else ""))
        self.add(f"### {heading}: positives in the top {record['top']} by f after one positive and one negative",
                 *rows, f"{s['counted']} pairs counted, {s['skipped']} skipped (no method found a positive).")
        self.numbers[f"table2_top{record['top']}"] = s

    def save(self):
        (self.dir / "report.md").write_text("\n".join(self.lines))
        (self.dir / "summary.json").write_text(json.dumps(self.numbers, indent=1))
        print("\n".join(self.lines))
        print(f"saved {self.dir / 'report.md'}", file=sys.stderr)

    def figure(self, run_dir, name="recall.png"):
        if self.copy_figures(run_dir):
            self.add(f"![recall]({name}) (also [PDF](recall.pdf), [SVG](recall.svg))")

    def copy_figures(self, run_dir):
        """recall.png, .pdf and .svg of a run into this report's folder; whether there were any."""
        copied = False
        for suffix in ("png", "pdf", "svg"):
            if (run_dir / f"recall.{suffix}").exists():
                self.dir.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(run_dir / f"recall.{suffix}", self.dir / f"recall.{suffix}")
                copied = True
        return copied
