"""Text features made other ways, for the screen method's records read (docs/screening.md,
"The features: the title counted twice").

Copies a screening store made by `bigsearch ingest --text-column title,abstract` (its records,
labels and layout) with X replaced by features of the same documents made with scikit-learn's
TfidfVectorizer (1-2 word n-grams, sublinear tf, max_df 0.95, as ingest/text.py) changed as
VARIANT says, factored exactly (X X^T = the documents' cosines, one feature per document, as
ingest's exact SVD), then runs as screen_weighting.py does with its ``default``:

- ``drophap``: terms of one document left out of the vectors after they are normalized (the
  cosines between documents unchanged, a document's own square norm below 1: what ingest's
  exact SVD over the terms of 2+ documents gives); without it, every norm is 1;
- ``titleK``: the title joined K times (its words count K times);
- ``min_df=2``: terms of one document left out before normalizing; ``raw_tf``: counts, not
  1 + ln count; ``stop``: scikit-learn's English stop words left out;

combined with ``+``. Prints the difference from the source store's cosines, then (with a
destination) writes the variant store.

    python benchmarks/explorations/text_variants.py SRC.zarr title2+drophap DST.zarr
    python benchmarks/explorations/screen_weighting.py DST.zarr 672,41 default 1500
"""

import json
import shutil
import sys

import numpy as np
import scipy.linalg
import zarr
from sklearn.feature_extraction.text import TfidfVectorizer


def documents(store, title_times=1):
    """The store's records as documents: the title ``title_times`` times, then the abstract."""
    out = []
    for record in zarr.open_group(store, mode="r")["records"][:]:
        d = json.loads(record)
        out.append(((d.get("title") or "") + " ") * title_times + (d.get("abstract") or ""))
    return [doc.strip() for doc in out]


def vectorizer(variant):
    options = dict(ngram_range=(1, 2), sublinear_tf=True, max_df=0.95, min_df=1)
    for part in variant.split("+"):
        key, _, value = part.partition("=")
        if key == "raw_tf":
            options["sublinear_tf"] = False
        elif key == "stop":
            options["stop_words"] = "english"
        elif key == "min_df":
            options["min_df"] = int(value)
        elif not (key in ("base", "drophap") or key.startswith("title")):
            raise SystemExit(f"unknown variant part {part!r}")
    return TfidfVectorizer(**options)


def cosines(store, variant):
    title_times = max([int(p[5:]) for p in variant.split("+") if p.startswith("title")] or [1])
    T = vectorizer(variant).fit_transform(documents(store, title_times))
    if "drophap" in variant.split("+"):
        T = T.tocsc()
        T = T[:, np.diff(T.indptr) >= 2].tocsr()
    return (T @ T.T).toarray()


def exact_features(K):
    w, V = scipy.linalg.eigh(K)
    return (V * np.sqrt(np.clip(w, 0, None))).astype(np.float32)


if __name__ == "__main__":
    src, variant, dst = sys.argv[1:4]
    K = cosines(src, variant)
    X0 = zarr.open_group(src, mode="r")["X"][:].astype(np.float64)
    off = ~np.eye(len(K), dtype=bool)
    print(json.dumps(dict(variant=variant, max_diff_between_documents=float(np.abs(K - X0 @ X0.T)[off].max()))))
    if dst != "-":
        shutil.rmtree(dst, ignore_errors=True)
        shutil.copytree(src, dst)
        zarr.open_group(dst, mode="r+")["X"][:] = exact_features(K)
