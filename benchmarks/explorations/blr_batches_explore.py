"""What BLR loses in batches of 0/1 or graded labels (issue 23's quality targets), in memory.

The protocol of benchmarks/discovery.py on its bits store (MolPAL's Enamine 10k, atom-pair
2,048 bits, shuffled; a random 1% start, then 5 batches of 1%; the same starts), with the
model of engine/methods/blr.py written densely in numpy (dual form: the labeled rows'
Gram), so that variants of the evidence and of the batch run in seconds:

- ``topb``: the engine's greedy batch, the top B of mu;
- ``fant0``: B sequential greedy choices, each told a fantasized 0 before the next
  (the constant liar at the labels' floor; LAS's ``fantasy=0``);
- ``ucbB``: UCB with weight B, its members' variance shrinking (a fantasized mu);
- ``fantbar``: the same, told the labels' mean;
- lam / noise from the engine's fit (``--how evidence``: the evidence under the R2 prior,
  engine/methods/blr_evidence.py), the evidence alone (``--how alone``, the engine as first
  built) or the ridge penalty lam s2 fixed (``--how fixed300``).

    python benchmarks/explorations/blr_batches_explore.py --store /tmp/bigsearch-discovery/bits-shuffled.zarr \
        --starts 5 topb fant0 ucb0.5
"""

import argparse
import csv
import gzip
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks.discovery import DATA, grades  # noqa: E402
from bigsearch.engine.methods import blr_evidence as evidence  # noqa: E402
from bigsearch.storage.encoding import decode  # noqa: E402
from bigsearch.storage.registry import open_store  # noqa: E402


def load(store_path):
    with gzip.open(DATA, "rt") as fh:
        rows = list(csv.reader(fh))[1:]
    rows = [rows[i] for i in np.random.default_rng(2017).permutation(len(rows))]
    score = np.array([float(r[1]) for r in rows])
    hit = np.zeros(len(score), np.int8)
    hit[np.argsort(score, kind="stable")[: int(round(0.01 * len(score)))]] = 1
    st = open_store(str(store_path))
    X = decode(st.read_stored_rows(np.arange(st.n))).astype(np.float64)
    return X, score, hit


class Model:
    """The posterior of engine/methods/blr.py given labeled rows L with targets y."""

    def __init__(self, X, L, y, lam, noise):
        self.X, self.lam, self.noise = X, lam, noise
        self.xbar, self.ybar = X[L].mean(axis=0), y.mean()
        Xc = X[L] - self.xbar
        self.Xc = Xc
        self.M = np.linalg.inv(Xc @ Xc.T + lam * noise * np.eye(len(L)))
        self.w = Xc.T @ (self.M @ (y - self.ybar))

    def mu(self):
        return self.ybar + (self.X - self.xbar) @ self.w

    def var(self):
        D = self.X - self.xbar
        Kx = D @ self.Xc.T
        return (np.einsum("ij,ij->i", D, D) - np.einsum("ij,jk,ik->i", Kx, self.M, Kx)) / self.lam


def hyper(X, L, y, how):
    if how.startswith("fixed"):
        return float(how[5:]), 1.0  # the ridge penalty lam * noise: all greedy needs
    return None, None


def fit(X, L, y, how):
    lam, noise = hyper(X, L, y, how)
    if lam is not None and noise is not None:
        return lam, noise
    if np.ptp(y) == 0 or len(y) < evidence.MIN_LABELS:
        return 1.0, 1.0
    got = evidence.fit(X[L], y, lam, noise, r2_prior=how != "alone")
    return got if got is not None else (1.0, 1.0)


CANDIDATES = 1500  # a batch's members come from the best points by mu (checked: none from beyond)


def batch(X, L, y, B, how, acq):
    """B members. Fantasies in the GP form over the candidates: telling j the answer a moves
    mu by S[:, j] (a - mu_j) / (S_jj + s2) and S by its rank-one downdate, S the posterior
    covariance of b + x . w (exact for the model with lam, noise fixed)."""
    lam, noise = fit(X, L, y, how)
    mod = Model(X, L, y, lam, noise)
    mu = mod.mu()
    mu[L] = -np.inf
    if acq == "topb":
        return np.argsort(-mu, kind="stable")[:B], (lam, noise)
    C = np.argsort(-mu, kind="stable")[:CANDIDATES]
    D = X[C] - mod.xbar
    KD = mod.Xc @ D.T
    S = (D @ D.T - KD.T @ mod.M @ KD) / lam + noise / len(L)
    m = mu[C].copy()
    free = np.ones(len(C), bool)
    chosen = []
    for _ in range(B):
        if acq.startswith("fant"):
            score = m
        else:  # ucbBETA: mu + beta sd, the members' variance shrinking (a fantasized mu)
            score = mu[C] + float(acq[3:]) * np.sqrt(np.maximum(np.diag(S), 0))
        j = int(np.argmax(np.where(free, score, -np.inf)))
        chosen.append(C[j])
        free[j] = False
        col = S[:, j] / (S[j, j] + noise)
        if acq.startswith("fant"):  # fant0: the answer 0; fantbar: the labels' mean
            m += col * ((mod.ybar if acq == "fantbar" else 0.0) - m[j])
        S -= np.outer(col, S[j])
    assert max(chosen_rank := [int(np.flatnonzero(C == c)[0]) for c in chosen]) < CANDIDATES - 1, chosen_rank
    return np.array(chosen), (lam, noise)


def run(X, target, hit, init, B, rounds, how, acq):
    L = list(init)
    fits = []
    for _ in range(rounds):
        Li = np.array(L)
        b, hp = batch(X, Li, target[Li], B, how, acq)
        fits.append((*hp, int(hit[b].sum())))
        L.extend(int(i) for i in b)
    return hit[np.array(L)].sum() / hit.sum(), fits


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--store", type=Path, default=Path("/tmp/bigsearch-discovery/bits-shuffled.zarr"))
    ap.add_argument("--starts", type=int, default=5)
    ap.add_argument("--labels", default="01", help="01 or graded")
    ap.add_argument("--how", default="evidence", help="evidence, alone or fixedPENALTY")
    ap.add_argument("acq", nargs="+")
    args = ap.parse_args()
    X, score, hit = load(args.store)
    target = hit.astype(np.float64) if args.labels == "01" else grades(score)
    n = len(hit)
    B = int(round(0.01 * n))
    for acq in args.acq:
        found = []
        for start in range(args.starts):
            init = np.random.default_rng([start, 18]).choice(n, B, replace=False)
            f, fits = run(X, target, hit, init, B, 5, args.how, acq)
            found.append(f)
            print(
                f"  {acq} start {start}: {f:.3f}  fits {[(f'{a:.3g}', f'{b:.3g}', h) for a, b, h in fits]}", flush=True
            )
        found = np.array(found)
        print(f"{args.labels} {args.how} {acq}: {found.mean():.3f} ± {found.std(ddof=1) / np.sqrt(len(found)):.3f}")


if __name__ == "__main__":
    main()
