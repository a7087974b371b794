"""The figure of docs/performance.md, from the saved results (run_scale.py, growth_r.py).

Left: per-iteration time and bare streaming pass against n (r = 128), warm and cold,
with the fitted exponents. Right: the same against r at n = 1M (warm), with the
initialization.

    python benchmarks/scale/plot.py [--out docs/performance.png]
"""

import argparse
import json

import matplotlib
import matplotlib.ticker

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from harness import REPO, RESULTS  # noqa: E402


def load(name):
    return json.loads((RESULTS / f"{name}.json").read_text())


def by_n(ax, scale):
    ns = [r["n"] for r in scale["rows"]]
    exps = scale["exponents_in_n"]
    for cache, style in (("warm", "-"), ("cold", "--")):
        if not all(f"{cache}_iter_ms" in r for r in scale["rows"]):
            continue
        ax.plot(ns, [r[f"{cache}_iter_ms"] / 1e3 for r in scale["rows"]], "o" + style, color="C0",
                label=f"LAS iteration, {cache} (n^{exps.get(f'{cache}_iter_ms', float('nan')):.2f})")
        ax.plot(ns, [r[f"{cache}_bare_ms"] / 1e3 for r in scale["rows"]], "s" + style, color="C1",
                label=f"bare pass, {cache} (n^{exps.get(f'{cache}_bare_ms', float('nan')):.2f})")
    ax.plot(ns, [r["init_s"] for r in scale["rows"]], "^-", color="C2",
            label=f"initialization, warm (n^{exps.get('init_s', float('nan')):.2f})")
    ax.set(xscale="log", yscale="log", xlabel="n (points), r = 128, float32", ylabel="seconds",
           title="Growth in n")
    ax.legend(fontsize=7)
    ax.grid(True, which="both", alpha=0.3)


def by_r(ax, growth):
    rs = [r["r"] for r in growth["rows"]]
    exps = growth["exponents_in_r"]
    ax.plot(rs, [r["iter_ms"] / 1e3 for r in growth["rows"]], "o-", color="C0",
            label=f"LAS iteration (r^{exps['iter_ms']:.2f})")
    ax.plot(rs, [r["bare_ms"] / 1e3 for r in growth["rows"]], "s-", color="C1",
            label=f"bare pass (r^{exps['bare_ms']:.2f})")
    ax.plot(rs, [r["init_s"] for r in growth["rows"]], "^-", color="C2",
            label=f"initialization (r^{exps['init_s']:.2f})")
    ax.set(xscale="log", yscale="log", xlabel=f"r (features), n = {growth['n']:,}, warm", ylabel="seconds",
           title="Growth in r")
    ax.set_xticks(rs, [str(r) for r in rs])
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())   # only the r measured
    ax.legend(fontsize=7)
    ax.grid(True, which="both", alpha=0.3)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(REPO / "docs" / "performance.png"))
    args = ap.parse_args()
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    by_n(left, load("scale"))
    by_r(right, load("scale_growth_r"))
    fig.suptitle("bigsearch LAS on 2 vCPUs: per-iteration time against one bare streaming pass over X")
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
