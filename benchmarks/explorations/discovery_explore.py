"""Which representation lets LAS find the docking hits? The exploration of issue 18.

The protocol of benchmarks/discovery.py (MolPAL's Enamine 10k, shuffled with seed 2017,
positives = the top 1% of scores, a random 1% start, 5 batches of 1%; the same starts),
on more starts, with every model in memory so that dozens of variants fit in a few
minutes each:

- LAS (alpha = 0) by the formulas of ../shared/docs/las-math.md, in memory: K^-1 once
  per representation, then one Woodbury update per batch of labels. On the stores of
  benchmarks/discovery.py it gives the engine's fractions found, start by start (checked
  for the cosine and IDF stores, 0/1 and graded labels, 3 starts);
- the random forest (MolPAL's: 100 trees, depth 8) and a ridge regression, greedy,
  refitted per batch, on 0/1 labels, graded labels or the scores.

Each experiment prints the fraction of the 104 positives found, mean ± s.e. over the
starts, and appends it to OUT (JSON lines). The fingerprints come from bigsearch's own
featurizer (ingest/fingerprints.py); transforms are the ingest options' (IDF, normalize,
bias) written in numpy.

    python benchmarks/explorations/discovery_explore.py --starts 8 rf ridge las:cos las:idf las:minmax-2048-2-2
"""

import argparse
import csv
import gzip
import json
import sys
import time
from pathlib import Path

import numpy as np
from scipy import linalg

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks.common import load_note, load_record  # noqa: E402
from benchmarks.discovery import DATA, grades  # noqa: E402
from bigsearch.ingest.fingerprints import fingerprints, parse_spec  # noqa: E402
from bigsearch.ingest.minmax import minmax_features, minmax_params  # noqa: E402
from bigsearch.ingest.weighting import document_frequency, idf_weights  # noqa: E402


def load(cache):
    """Shuffled (as benchmarks/discovery.py) scores and fingerprints, cached in an .npz."""
    if not cache.exists():
        with gzip.open(DATA, "rt") as fh:
            rows = list(csv.reader(fh))[1:]
        rows = [rows[i] for i in np.random.default_rng(2017).permutation(len(rows))]
        smiles = [r[0] for r in rows]
        out = {"score": np.array([float(r[1]) for r in rows])}
        for name, kind in (("atompair", "atompair"), ("morgan", "morgan")):
            for counts in (False, True):
                out[name + ("-counts" if counts else "")] = fingerprints(smiles, parse_spec(kind, counts)).astype(
                    np.float32
                )
        np.savez(cache, **out)
    return dict(np.load(cache))


def idf(Z):
    return Z * idf_weights(document_frequency(Z), len(Z))


def unit_bias(Z, weight=1.0):
    Z = Z / np.linalg.norm(Z, axis=1, keepdims=True)
    return np.hstack([Z, np.full((len(Z), 1), weight)]) if weight else Z


def representation(fp, name):
    """'cos', 'idf', 'idf-b0.3' (bias weight), 'counts-sqrt-idf', 'morgan-idf', ...; 'minmax-D-B-P':
    the MinMax map of the atom-pair counts (ingest --counts --minmax D --minmax-buckets B --minmax-power P);
    'rff-D-GAMMA' and 'whiten-A' (below)."""
    parts = name.split("-")
    if parts[0] == "minmax":
        D, B, P = map(int, parts[1:])
        spec = {"samples": D, "buckets": B, "power": P, "seed": 0}
        Z = np.asarray(fp["atompair-counts"], np.float64)
        return minmax_features(Z, spec, minmax_params(Z.shape[1], spec))
    if parts[0] == "rff":  # 'rff-D-GAMMA': RFF of the IDF unit rows, and a bias feature of weight 0.5
        D, gamma = int(parts[1]), float(parts[2])
        Z = unit_bias(idf(np.asarray(fp["atompair"], np.float64)), 0)
        rng = np.random.default_rng(0)
        W, b = rng.normal(0, np.sqrt(2 * gamma), (Z.shape[1], D)), rng.uniform(0, 2 * np.pi, D)
        return np.hstack([np.sqrt(2.0 / D) * np.cos(Z @ W + b), np.full((len(Z), 1), 0.5)])
    if parts[0] == "whiten":  # 'whiten-A': cosine rows times (C + A max eig C)^-1/2, C = Z^T Z / n; bias 1
        Z = unit_bias(np.asarray(fp["atompair"], np.float64), 0)
        ev, V = np.linalg.eigh(Z.T @ Z / len(Z))
        Zw = Z @ (V / np.sqrt(ev + float(parts[1]) * ev.max()))
        Zw /= np.sqrt((Zw**2).sum(1).mean())
        return np.hstack([Zw, np.ones((len(Z), 1))])
    kind = "morgan" if "morgan" in parts else "atompair"
    counts = any(p in parts for p in ("counts", "sqrt", "log"))
    Z = np.asarray(fp[kind + ("-counts" if counts else "")], np.float64)
    if "sqrt" in parts:
        Z = np.sqrt(Z)
    if "log" in parts:
        Z = np.log1p(Z)
    if "idf" in parts:
        Z = idf(Z)
    bias = next((float(p[1:]) for p in parts if p.startswith("b") and p[1:].replace(".", "").isdigit()), 1.0)
    return unit_bias(Z, bias)


class MemoryLAS:
    """LAS with alpha = 0 on an in-memory X (las-math.md): f = q + rho * X K^-1 X^T q."""

    def __init__(self, X, pi=0.01, eta=0.5, w0=None):
        self.X = np.asarray(X, np.float64)
        n, r = self.X.shape
        self.pi, self.eta, self.w0 = pi, eta, 1.0 / n if w0 is None else w0
        self.d = self.X @ self.X.sum(0)
        if self.d.min() <= 0:
            raise ValueError("LAS needs positive degrees")
        self.bU, self.bL = 1 / (1 + self.w0), 1 - eta
        K = np.eye(r) - (self.X * (self.bU / self.d)[:, None]).T @ self.X
        self.Kinv0 = linalg.inv(K)

    def run(self, answers, init, batch, rounds):
        """The labelled mask after the initial labels and ``rounds`` batches of the top f."""
        X, d, n = self.X, self.d, len(self.X)
        Kinv = self.Kinv0.copy()
        rho = self.bU / d
        q = np.full(n, self.pi * self.w0 / (1 + self.w0))
        labeled = np.zeros(n, bool)

        def tell(idx):
            nonlocal Kinv
            # K += X_B^T diag(rho_old - rho_new) X_B (Woodbury)
            U, c = X[idx].T, (self.bU - self.bL) / d[idx]
            KU = Kinv @ U
            Kinv = Kinv - KU @ linalg.solve(np.diag(1 / c) + U.T @ KU, KU.T, assume_a="pos")
            rho[idx], q[idx], labeled[idx] = self.bL / d[idx], self.eta * answers[idx], True

        tell(np.asarray(init))
        for _ in range(rounds):
            f = q + rho * (X @ (Kinv @ (X.T @ q)))
            tell(_top(f, labeled, batch))
        return labeled


def _top(score, labeled, k):
    unl = np.flatnonzero(~labeled)
    return unl[np.lexsort((unl, -score[unl]))[:k]]


def refit_run(model, X, answers, init, batch, rounds):
    labeled = np.zeros(len(X), bool)
    labeled[init] = True
    for _ in range(rounds):
        idx = np.flatnonzero(labeled)
        labeled[_top(model().fit(X[idx], answers[idx]).predict(X), labeled, batch)] = True
    return labeled


def forest():
    from sklearn.ensemble import RandomForestRegressor

    return RandomForestRegressor(100, max_depth=8, random_state=0)


def ridge(alpha):
    from sklearn.linear_model import Ridge

    return lambda: Ridge(alpha=alpha)


def experiments(spec, fp):
    """'las:REP[:pi=..,eta=..,w0=..]', 'rf', 'ridge[:ALPHA]' -> [(name, run(answers, init))]."""
    kind, _, rest = spec.partition(":")
    if kind == "las":
        rep, _, params = rest.partition(":")
        kw = {k: float(v) for k, v in (p.split("=") for p in params.split(",") if p)}
        las = MemoryLAS(representation(fp, rep), **kw)
        return lambda a, init, b, r: las.run(a, init, b, r)
    if kind == "rf":
        X = np.asarray(fp["atompair"], np.float64)
        return lambda a, init, b, r: refit_run(forest, X, a, init, b, r)
    if kind == "ridge":
        X = representation(fp, "cos")
        return lambda a, init, b, r: refit_run(ridge(float(rest or 1.0)), X, a, init, b, r)
    raise SystemExit(f"unknown experiment {spec!r}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("experiments", nargs="+", help="las:REP[:pi=P,eta=E,w0=W], rf, ridge[:ALPHA]")
    ap.add_argument("--starts", type=int, default=8)
    ap.add_argument("--labels", default="01,graded", help="01, graded, scores (comma separated)")
    ap.add_argument("--cache", type=Path, default=Path("/tmp/bigsearch-discovery/fingerprints.npz"))
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "discovery" / "explore.jsonl")
    args = ap.parse_args()
    args.cache.parent.mkdir(parents=True, exist_ok=True)
    fp = load(args.cache)
    score = fp["score"]
    n = len(score)
    batch = int(round(0.01 * n))
    hit = np.zeros(n, bool)
    hit[np.argsort(score, kind="stable")[:batch]] = True
    answers = {
        "01": hit.astype(np.float64),
        "graded": grades(score),
        "scores": (score.max() - score) / (score.max() - score.min()),
    }
    starts = [np.random.default_rng([s, 18]).choice(n, batch, replace=False) for s in range(args.starts)]
    for spec in args.experiments:
        run = experiments(spec, fp)
        for labels in args.labels.split(","):
            t = time.perf_counter()
            found = np.array([hit[run(answers[labels], init, batch, 5)].sum() / hit.sum() for init in starts])
            se = found.std(ddof=1) / np.sqrt(len(found))
            row = {
                "experiment": spec,
                "labels": labels,
                "found": found.round(4).tolist(),
                "mean": found.mean(),
                "se": se,
                "seconds": time.perf_counter() - t,
            }
            print(f"{spec:40s} {labels:7s} {found.mean():.3f} ± {se:.3f}  {np.round(found, 3)}", flush=True)
            with open(args.out, "a") as fh:
                fh.write(json.dumps({**row, "load_average": load_record()}) + "\n")
    print(load_note())


if __name__ == "__main__":
    main()
