"""Do the synthetic screening corpora (tools/make_abstracts.py) look and screen like a real set?

    python benchmarks/screening_synthetic.py                  # about 15 minutes on 2 cores
    python benchmarks/screening_synthetic.py --seeds 1 --n 2304

For each preset, writes a corpus of --n records (seeds 0..--seeds-1) and measures:

- text statistics (text_stats): words per title and abstract (tokens [a-z0-9]+, as TF-IDF sees
  them), empty abstracts, vocabulary growth (Heaps' law, types = K tokens^beta, fitted over the
  records in order; and types after 500,000 tokens), the share of tokens in the 100 most
  frequent types, the share of types seen once;
- screening difficulty (records_to_recall): TF-IDF (1-2 grams) + logistic regression, one
  record at a time from 1 relevant + 1 irrelevant prior, retrained after every label; the
  records read (priors included) to find 95% of the relevant ones;
- what word pairs carry (ngram_ap): held-out average precision with 1-grams, 1-2 grams and
  2-grams alone.

The same on the real set kwok2020_virus (a systematic review's 2,304 records, 114 inclusions)
when the project's data sets are beside the checkout (../shared/datasets, or
$BIGSEARCH_DATA_MIRROR); skipped, saying so, when not.

Writes benchmarks/results/screening_synthetic.json.
"""

import argparse
import csv
import importlib.util
import math
import os
import re
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent
TOOL = ROOT.parent / "tools" / "make_abstracts.py"
REAL = "screening_kwok2020/kwok2020_virus.csv"
TOKEN = re.compile(r"[a-z0-9]+")
PRESETS = ("easy", "medium", "multi-topic", "hard")
RECALLS = (0.5, 0.8, 0.9, 0.95)


def load_tool():
    """tools/make_abstracts.py as a module (registered, so its worker processes find it)."""
    if "make_abstracts" in sys.modules:
        return sys.modules["make_abstracts"]
    spec = importlib.util.spec_from_file_location("make_abstracts", TOOL)
    module = importlib.util.module_from_spec(spec)
    sys.modules["make_abstracts"] = module
    spec.loader.exec_module(module)
    return module


def read_csv(path):
    """(titles, abstracts, labels) of a screening CSV (record_id,title,abstract,...,label_included)."""
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    return [r["title"] for r in rows], [r["abstract"] for r in rows], np.array([int(r["label_included"]) for r in rows])


def text_stats(titles, abstracts):
    """Words per title and abstract, empty abstracts, Heaps' law, top-100 share, hapax share."""
    title_words = np.array([len(TOKEN.findall(t.lower())) for t in titles])
    abstract_tokens = [TOKEN.findall(a.lower()) for a in abstracts]
    abstract_words = np.array([len(a) for a in abstract_tokens])
    present = abstract_words[abstract_words > 0]
    counts, seen, growth = Counter(), 0, []
    for t, a in zip(titles, abstract_tokens, strict=True):
        tokens = TOKEN.findall(t.lower()) + a
        counts.update(tokens)
        seen += len(tokens)
        growth.append((seen, len(counts)))
    growth = np.array(growth[len(growth) // 20 :], dtype=float)  # past the first 5% of the records
    beta, log_k = np.polyfit(np.log(growth[:, 0]), np.log(growth[:, 1]), 1)
    at = np.searchsorted(growth[:, 0], 500_000)
    top = sum(c for _, c in counts.most_common(100))
    return dict(
        records=len(titles),
        title_words_median=float(np.median(title_words)),
        title_words_p5_p95=[float(x) for x in np.percentile(title_words, [5, 95])],
        abstract_words_median=float(np.median(present)),
        abstract_words_p5_p95=[float(x) for x in np.percentile(present, [5, 95])],
        empty_abstracts=round(float(np.mean(abstract_words == 0)), 4),
        tokens=int(seen),
        types=len(counts),
        heaps_beta=round(float(beta), 3),
        heaps_k=round(float(math.exp(log_k)), 1),
        types_at_500k_tokens=int(growth[at, 1]) if at < len(growth) else None,
        top100_share=round(top / seen, 3),
        hapax_share_of_types=round(sum(1 for c in counts.values() if c == 1) / len(counts), 3),
        chars_per_token=round(sum(len(w) * c for w, c in counts.items()) / seen, 2),
    )


def records_to_recall(texts, labels, recall=0.95, seed=0, C=1.0):
    """Records read to find ``recall`` of the relevant ones: TF-IDF (1-2 grams, sublinear tf) +
    logistic regression, from one random relevant and one random irrelevant prior, then the
    highest-scoring unread record, one at a time, the model retrained after every label. The
    priors count as read."""
    return len(screening_order(texts, labels, recall, seed, C))


def screening_order(texts, labels, recall=0.95, seed=0, C=1.0):
    """The records read by records_to_recall, in order (the model warm-started from its last
    fit, in one thread: BLAS threads slow these small fits down tenfold on a busy machine)."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from threadpoolctl import threadpool_limits

    X = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True, min_df=2).fit_transform(texts).tocsr()
    y = np.asarray(labels)
    rng = np.random.default_rng(seed)
    read = [int(rng.choice(np.flatnonzero(y == 1))), int(rng.choice(np.flatnonzero(y == 0)))]
    target = math.ceil(recall * y.sum())
    unread = np.ones(len(y), dtype=bool)
    unread[read] = False
    found = 1
    model = LogisticRegression(C=C, class_weight="balanced", max_iter=200, warm_start=True)
    with threadpool_limits(1):
        while found < target:
            model.fit(X[read], y[read])
            candidates = np.flatnonzero(unread)
            pick = int(candidates[np.argmax(model.decision_function(X[candidates]))])
            read.append(pick)
            unread[pick] = False
            found += int(y[pick])
    return read


def ngram_ap(texts, labels):
    """How much word pairs carry: average precision on the odd records of TF-IDF + logistic
    regression trained on the even ones, with 1-grams, 1-2 grams and 2-grams alone."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import average_precision_score
    from threadpoolctl import threadpool_limits

    y = np.asarray(labels)
    even = np.arange(len(y)) % 2 == 0
    out = {}
    for lo, hi in ((1, 1), (1, 2), (2, 2)):
        X = TfidfVectorizer(ngram_range=(lo, hi), sublinear_tf=True, min_df=2).fit_transform(texts)
        with threadpool_limits(1):
            model = LogisticRegression(class_weight="balanced", max_iter=300).fit(X[even], y[even])
        out[f"{lo}-{hi}"] = round(float(average_precision_score(y[~even], model.decision_function(X[~even]))), 3)
    return out


def screen(titles, abstracts, labels, seeds):
    """records_to_recall from ``seeds`` priors, and the records read to find 50, 80, 90 and 95%
    of the relevant ones (the shape of the recall curve)."""
    texts = [f"{t} {a}" for t, a in zip(titles, abstracts, strict=True)]
    y = np.asarray(labels)
    curves = []
    for s in range(seeds):
        found = np.cumsum(y[screening_order(texts, y, seed=s)])
        curves.append([int(np.searchsorted(found, math.ceil(q * y.sum())) + 1) for q in RECALLS])
    return dict(
        relevant=int(y.sum()),
        heldout_ap_by_ngrams=ngram_ap(texts, y),
        records_to_95=[c[-1] for c in curves],
        records_to_50_80_90_95=curves,
        share_read_to_95=round(float(np.mean([c[-1] for c in curves])) / len(y), 3),
    )


def real_path():
    """The real set's file, when the project's data sets are here; else None."""
    for base in (os.environ.get("BIGSEARCH_DATA_MIRROR"), ROOT.parents[1] / "shared" / "datasets"):
        if base and (Path(base) / REAL).is_file():
            return Path(base) / REAL
    return None


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=2304, help="records per synthetic set (default 2,304: the real set's)")
    ap.add_argument("--seeds", type=int, default=5, help="corpora (seeds) per preset; priors on the real set")
    ap.add_argument("--presets", nargs="*", default=list(PRESETS))
    ap.add_argument("--no-real", action="store_true", help="leave the real set out")
    ap.add_argument("--no-save", action="store_true")
    args = ap.parse_args(argv)
    tool = load_tool()
    results = dict(n=args.n, seeds=args.seeds, presets={})
    path = None if args.no_real else real_path()
    if path:
        t0 = time.perf_counter()
        titles, abstracts, labels = read_csv(path)
        results["real"] = dict(
            name="kwok2020_virus", **text_stats(titles, abstracts), **screen(titles, abstracts, labels, args.seeds)
        )
        print(f"real: {results['real']} ({time.perf_counter() - t0:.0f} s)", file=sys.stderr, flush=True)
    elif not args.no_real:
        print("real set kwok2020_virus not here (../shared/datasets): synthetic sets only", file=sys.stderr)
    with tempfile.TemporaryDirectory() as tmp:
        for preset in args.presets:
            t0 = time.perf_counter()
            runs = []
            for seed in range(args.seeds):
                out = Path(tmp) / f"{preset}-{seed}.csv"
                tool.main([str(out), "--n", str(args.n), "--preset", preset, "--seed", str(seed), "--quiet"])
                titles, abstracts, labels = read_csv(out)
                runs.append(dict(seed=seed, **text_stats(titles, abstracts), **screen(titles, abstracts, labels, 1)))
            share = [r["share_read_to_95"] for r in runs]
            curves = np.array([r["records_to_50_80_90_95"][0] for r in runs])
            results["presets"][preset] = dict(
                share_read_to_95_mean=round(float(np.mean(share)), 3),
                share_read_to_95=share,
                records_to_50_80_90_95_mean=[round(float(x), 1) for x in curves.mean(axis=0)],
                runs=runs,
            )
            print(f"{preset}: read to 95% {share} ({time.perf_counter() - t0:.0f} s)", file=sys.stderr, flush=True)
    if not args.no_save:
        sys.path.insert(0, str(ROOT))
        from common import save  # benchmarks/common.py

        save("screening_synthetic", results)
    return results


if __name__ == "__main__":
    main()
