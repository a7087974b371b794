#!/usr/bin/env python
"""Write a synthetic screening corpus: titles and abstracts of scientific records, a few of
them relevant (a systematic review's inclusions), with planted relevant topics whose
difficulty is set by flags. For screening benchmarks at any size: small sets of a few
thousand records of known difficulty, and corpora of millions of abstracts for throughput.

    python tools/make_abstracts.py easy.csv --n 3000 --preset easy
    python tools/make_abstracts.py hard.csv --n 5000 --preset hard --seed 3
    python tools/make_abstracts.py x.csv --n 3000 --overlap 0.6 --outliers 0.1 --prevalence 0.02
    python tools/make_abstracts.py wos.ris --n 80000 --cited-refs 25     # RIS + wos.labels.csv
    python tools/make_abstracts.py pubmed.csv.gz --n 10000000 --preset medium --prevalence 0.001

The model (docs/datasets.md, "Synthetic screening corpora"): a vocabulary of real English
function words, number strings and pronounceable pseudo-words; LDA-like topics, each a
Zipfian distribution over its own subset of the content words and over its own two-word
phrases (mostly of common words: the pair carries the topic more than its words do); a general
distribution (function words, numbers, the corpus's common vocabulary) shared by every
record. A record mixes a main topic and two minor ones; its title (median 13 words),
abstract (log-normal length, median 215 words; 6% empty) and keywords (words and
phrases of its main topic) are drawn from that mixture, with sentences, commas and
capitals. Relevant records have an inclusion topic as their main topic (--inclusion-topics
of them); --outliers of them only mention it (label noise: inclusions that look off-topic).
Each inclusion topic has near-miss topics that share --overlap of its vocabulary and its
phrases, and --near-miss-share of the irrelevant records are about one and mention the
inclusion topic (hard negatives: records that look relevant but are not).

Output: CSV (record_id,title,abstract,keywords,year,journal,label_included) or RIS (TY, ID,
TI, AU, AB, KW, PY, JO, VL, IS, SP, EP, SN, DO, ER; the labels in a CSV of
record_id,label_included beside it, NAME.labels.csv, and/or in an N1 note: --ris-label),
gzipped when the name ends in .gz. Records are generated in blocks of --block-records, by
--workers processes; block i is seeded from (--seed, i), so the bytes written depend on the
seed, the parameters and --block-records, never on the number of workers. Memory is bounded
(a few blocks in flight) for any --n.

Prints one JSON line: the file, its records, inclusions, size, time and rate; progress
(records written, rate, time left) goes to stderr every few seconds (--quiet: none).
"""

import argparse
import gzip
import json
import multiprocessing
import os
import sys
import time
from collections import deque
from pathlib import Path

import numpy as np

# Presets for small screening sets (2,000-5,000 records), in order of difficulty; any flag given
# overrides its preset's value. Records read to find 95% of the inclusions with TF-IDF + logistic
# regression (benchmarks/screening_synthetic.py) are in docs/datasets.md.
PRESETS = {
    "easy": dict(prevalence=0.03, overlap=0.3, near_miss_share=0.1, outliers=0.0, inclusion_topics=1, focus=0.6),
    "medium": dict(prevalence=0.03, overlap=0.65, near_miss_share=0.3, outliers=0.015, inclusion_topics=1, focus=0.5),
    "multi-topic": dict(
        prevalence=0.03, overlap=0.45, near_miss_share=0.2, outliers=0.015, inclusion_topics=3, focus=0.5
    ),
    "hard": dict(prevalence=0.02, overlap=0.75, near_miss_share=0.35, outliers=0.08, inclusion_topics=1, focus=0.45),
}
DEFAULT_PRESET = "medium"

# Real English function words, most frequent first (their order sets their Zipfian weights).
FUNCTION_WORDS = """the of and in a to was were with for from by that is as on this are be we at which an or
these not than between after have has been their its also both but it during more all other our can into
most only may one two three however while there such no each using per within among through under whereas
who when higher lower them they those via over had four five should could would first second well whether
either because before about against without although thus therefore further then here where what how any
some if so same much many very did does do up out new several""".split()

ONSETS = "b c d f g h k l m n p r s t v z br cr dr fl gr pl pr st tr ch th sp sc ph gl cl".split()
VOWELS = "a e i o u a e i o a e y ae ia io ou ei".split()
CODAS = ["", "", "", "", "n", "r", "s", "l", "t", "m", "x", "c", "nd", "st", "rm", "ng"]
SUFFIXES = ["", "", "", "", "", "", "ase", "ine", "osis", "itis", "ic", "al", "ation", "ide", "oma", "ism", "ent"]
JOURNAL_PATTERNS = (
    "Journal of {a}",
    "{a} Research",
    "International Journal of {a} {b}",
    "{a} and {b}",
    "Annals of {a}",
    "{a} Letters",
    "{a} {b} Reviews",
    "Archives of {a}",
    "{a} Reports",
    "Frontiers in {a}",
)

# Separators written after a word: the index of each in SEPS.
SEPS = (" ", ", ", ". ", ".", "", "; ", "\nKW  - ")
SPACE, COMMA, PERIOD, END_PERIOD, NOTHING, SEMICOLON, KW_LINE = range(len(SEPS))
TITLE, ABSTRACT, KEYWORDS = range(3)

GENERAL_SHARE = {TITLE: 0.3, ABSTRACT: 0.6}  # tokens from the general distribution (the rest: topics)
FUNCTION_MASS, NUMBER_MASS = 0.7, 0.07  # of the general distribution (the rest: common words)
PHRASE_MASS = 0.12  # of a topic's distribution
COMMON_WORDS = 1500  # the corpus's common content words (the general distribution)
NEAR_MISSES = 3  # near-miss topics per inclusion topic
SLOTS = 3  # topics per record: a main one and two minor ones
FOCUS_SPREAD = 8.0  # relevant records' main-topic weight: Beta(8 focus, 8 (1 - focus))


def pseudo_words(count):
    """``count`` distinct pronounceable pseudo-words, the same for every seed and every count (the
    first k of them do not depend on ``count``); frequent ranks are shorter, as in real text."""
    rng = np.random.default_rng(20240601)
    words, seen = [], set(FUNCTION_WORDS)
    batch, drawn = 8192, 0
    while len(words) < count:
        rank = drawn + np.arange(batch)
        syllables = np.clip(np.rint(rng.normal(0.75 + 0.3 * np.log10(rank + 10), 0.6)), 1, 5).astype(int).tolist()
        onset = rng.integers(len(ONSETS), size=(batch, 5)).tolist()
        vowel = rng.integers(len(VOWELS), size=(batch, 5)).tolist()
        coda = rng.integers(len(CODAS), size=batch).tolist()
        suffix = rng.integers(len(SUFFIXES), size=batch).tolist()
        drawn += batch
        for k in range(batch):
            n = syllables[k]
            word = "".join(ONSETS[onset[k][q]] + VOWELS[vowel[k][q]] for q in range(n)) + CODAS[coda[k]]
            if n > 1:
                word += SUFFIXES[suffix[k]]
            if word not in seen:
                seen.add(word)
                words.append(word)
    return words[:count]


def number_strings():
    """Numbers as they appear in abstracts: small counts, percentages, years, decimals."""
    small = [str(i) for i in range(1, 101)]
    years = [str(y) for y in range(1990, 2025)]
    percents = [f"{p / 10:.1f}%" for p in range(5, 1000, 7)]
    decimals = [f"0.{d:02d}" for d in range(1, 100, 3)]
    return small + years + percents + decimals


def alias_table(weights):
    """Walker's alias table for ``weights`` (K,): (prob, alias); a draw is i = floor(u K), then i
    if frac(u K) < prob[i] else alias[i]."""
    K = len(weights)
    p = weights * (K / weights.sum())
    prob, alias = np.ones(K), np.arange(K)
    small, large = [i for i in range(K) if p[i] < 1.0], [i for i in range(K) if p[i] >= 1.0]
    while small and large:
        s, g = small.pop(), large[-1]
        prob[s], alias[s] = p[s], g
        p[g] -= 1.0 - p[s]
        if p[g] < 1.0:
            small.append(large.pop())
    return prob, alias


def zipf(n, exponent=1.0, offset=1.0):
    w = (np.arange(n) + offset) ** -exponent
    return w / w.sum()


def function_weights(n):
    """The function words' weights: the six most frequent as in English abstracts (the 5.0%, of 4.4%,
    and 3.6%, in 2.9%, a 1.7%, to 1.7% of the words), a Zipfian tail."""
    head = np.array([5.0, 4.4, 3.6, 2.9, 1.75, 1.7])
    tail = zipf(n - len(head), 1.0, 9.0)
    return np.concatenate([head / head.sum() * 0.47, tail * 0.53])


def build_model(p):
    """The vocabulary, topics and tables every block draws from: a function of the parameters
    (seed included) only."""
    rng = np.random.default_rng(np.random.SeedSequence(p["seed"], spawn_key=(0,)))
    n_content = p["vocabulary"] - len(FUNCTION_WORDS) - len(number_strings())
    function, numbers, content = FUNCTION_WORDS, number_strings(), pseudo_words(n_content)
    first_content = len(function) + len(numbers)
    content_weight = zipf(n_content, 1.0, 10.0)
    T, S = p["topics"], p["topic_words"]
    P = max(8, S // 25)  # phrases per topic

    # The general distribution: function words, numbers, the corpus's common content words.
    n_common = min(COMMON_WORDS, n_content)
    general_items = np.arange(first_content + n_common)
    general_weight = np.concatenate(
        [
            FUNCTION_MASS * function_weights(len(function)),
            NUMBER_MASS * zipf(len(numbers), 1.0, 3.0),
            (1 - FUNCTION_MASS - NUMBER_MASS) * zipf(n_common, 1.1, 2.0),
        ]
    )

    # Topics: S content words drawn (without replacement) with probability ~ their global weight,
    # in a random order that sets their Zipfian weight in the topic; P phrases of common words.
    phrases, topic_items = [], np.zeros((T, S + P), dtype=np.int64)
    log_w = np.log(content_weight)
    n_words = first_content + n_content  # items from n_words on are phrases
    for t in range(T):
        keys = log_w - np.log(-np.log(rng.random(n_content)))  # Gumbel top-S: weighted sampling
        words = np.argpartition(-keys, S)[:S]
        rng.shuffle(words)
        topic_items[t, :S] = first_content + words
        for j in range(P):  # a top word of the topic or a common word, then a common word
            a = words[rng.integers(min(S, 40))] if rng.random() < 0.5 else rng.integers(n_common)
            topic_items[t, S + j] = n_words + len(phrases)
            phrases.append((first_content + a, first_content + rng.integers(n_common)))
    topic_weight = np.concatenate([(1 - PHRASE_MASS) * zipf(S, 1.0, 1.0), PHRASE_MASS * zipf(P, 1.0, 1.0)])

    # Inclusion topics and their near misses: each near-miss item is, with probability
    # `overlap`, the inclusion topic's item at the same rank (same weight).
    order = rng.permutation(T)
    inclusion = order[: p["inclusion_topics"]]
    near = order[p["inclusion_topics"] : p["inclusion_topics"] * (1 + NEAR_MISSES)].reshape(-1, NEAR_MISSES)
    for c, near_c in zip(inclusion, near, strict=True):
        for nm in near_c:
            shared = rng.random(S + P) < p["overlap"]
            topic_items[nm, shared] = topic_items[c, shared]
    # Topic popularity (Zipfian, random order) for the records' main and minor topics.
    popularity = zipf(T, 0.7, 1.0)[rng.permutation(T)]
    other = popularity.copy()
    other[inclusion] = other[near.ravel()] = 0
    minor = popularity.copy()
    minor[inclusion] = 0

    # The strings: every item in lower case and capitalized, one byte buffer each.
    strings = (
        function
        + numbers
        + content
        + [f"{content[a - first_content]} {content[b - first_content]}" for a, b in phrases]
    )
    lower = [s.encode() for s in strings]
    lens = np.array([len(s) for s in lower], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(lens)[:-1]])
    buf_lower = b"".join(lower)
    buf_cap = b"".join(s[:1].upper() + s[1:] for s in lower)
    seps = [s.encode() for s in SEPS]
    sep_lens = np.array([len(s) for s in seps], dtype=np.int64)
    sep_offsets = 2 * len(buf_lower) + np.concatenate([[0], np.cumsum(sep_lens)[:-1]])
    item_words = np.ones(len(strings), dtype=np.int64)
    item_words[n_words:] = 2

    # One alias table per topic (all topics share their weights: one table, their own items),
    # and the general one last, padded to a common width.
    K = max(S + P, len(general_items))
    items, prob, alias = np.zeros((T + 1, K), dtype=np.int64), np.zeros((T + 1, K)), np.zeros((T + 1, K), dtype=int)
    items[:T, : S + P], items[T, : len(general_items)] = topic_items, general_items
    prob[:T], alias[:T] = alias_table(np.pad(topic_weight, (0, K - S - P)))
    prob[T], alias[T] = alias_table(np.pad(general_weight, (0, K - len(general_items))))
    alias_items = np.take_along_axis(items, alias, axis=1)

    # Journals: Zipfian popularity; each topic publishes mostly in a few of them.
    n_journals = p["journals"]
    names = []
    for j in range(n_journals):
        a, b = (content[i].capitalize() for i in rng.integers(0, min(n_content, 5000), 2))
        names.append(JOURNAL_PATTERNS[j % len(JOURNAL_PATTERNS)].format(a=a, b=b))
    journal_weight = zipf(n_journals, 1.0, 2.0)
    topic_journals = rng.choice(n_journals, size=(T, 6), p=journal_weight)
    surnames = [w.capitalize() for w in content[min(5000, n_content // 2) :][:5000]]

    return dict(
        T=T,
        K=K,
        prob=prob.ravel(),
        items=items.ravel(),
        alias_items=alias_items.ravel(),
        inclusion=inclusion,
        inclusion_weight=zipf(len(inclusion), 1.0, 1.0),
        near=near,
        other=other / other.sum(),
        minor=minor / minor.sum(),
        src=np.frombuffer(buf_lower + buf_cap + b"".join(seps), dtype=np.uint8),
        offsets=offsets,
        lens=lens,
        cap_shift=len(buf_lower),
        sep_offsets=sep_offsets,
        sep_lens=sep_lens,
        item_words=item_words,
        words_per_slot=1 + (1 - GENERAL_SHARE[ABSTRACT]) * PHRASE_MASS,
        words_per_title_slot=1 + (1 - GENERAL_SHARE[TITLE]) * PHRASE_MASS,
        journals=names,
        journal_weight=journal_weight,
        topic_journals=topic_journals,
        surnames=surnames,
    )


def gather(src, starts, lengths):
    """The bytes src[starts[i] : starts[i] + lengths[i]] for every i, concatenated (in 32-bit
    indexes when they fit: three times as fast)."""
    total = int(lengths.sum())
    kind = np.int32 if max(total, len(src)) < 2**31 else np.int64
    lengths = lengths.astype(kind)
    idx = np.repeat(starts.astype(kind) - (np.cumsum(lengths, dtype=kind) - lengths), lengths)
    idx += np.arange(total, dtype=kind)
    return src[idx]


def mixtures(rng, m, p, labels):
    """Each record's topics (n, SLOTS), their cumulative weights and the kind of record:
    0 irrelevant, 1 near miss, 2 relevant, 3 relevant outlier."""
    n = len(labels)
    kind = np.where(labels == 1, 2, 0)
    rel = np.flatnonzero(labels == 1)
    n_out = int(np.floor(p["outliers"] * len(rel) + rng.random()))
    kind[rng.choice(rel, n_out, replace=False)] = 3
    kind[(labels == 0) & (rng.random(n) < p["near_miss_share"])] = 1
    topics = rng.choice(m["T"], size=(n, SLOTS), p=m["minor"])
    topics[:, 0] = rng.choice(m["T"], size=n, p=m["other"])
    which = rng.choice(len(m["inclusion"]), size=n, p=m["inclusion_weight"])
    topics[kind == 1, 0] = m["near"][which, rng.integers(NEAR_MISSES, size=n)][kind == 1]
    topics[kind == 2, 0] = m["inclusion"][which][kind == 2]
    topics[kind == 3, 1] = m["inclusion"][which][kind == 3]  # an outlier only mentions its topic
    topics[kind == 1, 1] = m["inclusion"][which][kind == 1]  # a near miss mentions the inclusion topic
    # Weights: the main topic's, then the minor ones'. Relevant records' main-topic weight is
    # spread around --focus (a few relevant records are mostly about something else).
    focus = p["focus"]
    w = np.zeros((n, SLOTS))
    w[:, 0] = rng.beta(6, 3, size=n)
    w[kind == 2, 0] = rng.beta(FOCUS_SPREAD * focus, FOCUS_SPREAD * (1 - focus), size=(kind == 2).sum())
    split = rng.random(n)
    w[:, 1], w[:, 2] = (1 - w[:, 0]) * split, (1 - w[:, 0]) * (1 - split)
    near = kind == 1
    w[near, 1] = (1 - w[near, 0]) * rng.beta(4, 4, size=near.sum())  # the inclusion topic: about 15%
    w[near, 2] = 1 - w[near, 0] - w[near, 1]
    out = kind == 3
    w[out, 1] = rng.beta(2, 18, size=out.sum())  # about 10% of its topical words
    w[out, 2] = np.maximum(0, 1 - w[out, 0] - w[out, 1])
    return topics, np.cumsum(w, axis=1) / w.sum(axis=1, keepdims=True), kind


def make_block(m, p, index, start, n):
    """Records start .. start + n - 1: (the bytes to write, the label lines, counts)."""
    rng = np.random.default_rng(np.random.SeedSequence(p["seed"], spawn_key=(1, index)))
    labels = np.zeros(n, dtype=np.int64)
    labels[rng.choice(n, int(np.floor(p["prevalence"] * n + rng.random())), replace=False)] = 1
    topics, cum, kind = mixtures(rng, m, p, labels)

    counts = np.zeros((n, 3), dtype=np.int64)
    counts[:, TITLE] = np.maximum(
        3, np.rint(rng.lognormal(np.log(p["title_words"] / m["words_per_title_slot"]), 0.35, n))
    )
    abstract = rng.lognormal(np.log(p["abstract_words"] / m["words_per_slot"]), 0.35, n)
    counts[:, ABSTRACT] = np.where(rng.random(n) < p["empty_abstracts"], 0, np.maximum(5, np.rint(abstract)))
    counts[:, KEYWORDS] = np.where(rng.random(n) < 0.15, 0, rng.integers(3, 8, n))

    # Every slot's record and field, in order: record 0's title, abstract, keywords, record 1's...
    flat = counts.ravel()
    doc = np.repeat(np.repeat(np.arange(n), 3), flat)
    field = np.repeat(np.tile(np.arange(3), n), flat)
    s = len(doc)
    first = np.cumsum(flat) - flat  # first slot of each (record, field)
    has = flat > 0
    # Separators and capitals: sentences of about 24 words in abstracts, commas.
    r = rng.random(s)
    sep = np.full(s, SPACE, dtype=np.int64)
    in_abstract = field == ABSTRACT
    sep[in_abstract & (r < 0.045)] = COMMA
    sep[in_abstract & (r > 1 - 1 / 24)] = PERIOD
    sep[field == KEYWORDS] = SEMICOLON if p["format"] == "csv" else KW_LINE
    last = (first + flat - 1)[has]
    sep[last] = np.where(field[last] == ABSTRACT, END_PERIOD, NOTHING)
    starts = np.zeros(s, dtype=bool)  # a sentence's first word
    starts[first[has]] = True
    starts[1:] |= sep[:-1] == PERIOD
    cap = starts & (field != KEYWORDS)

    # Words: from the general distribution, or from the topic their sentence is about (one of
    # the record's topics, by their weights), so neighbouring content words share their topic
    # as in real text; the title and keywords are about the main topic.
    general = np.where(field == TITLE, GENERAL_SHARE[TITLE], GENERAL_SHARE[ABSTRACT])
    general[field == KEYWORDS] = 0.0
    is_general = rng.random(s) < general
    sentence = np.cumsum(starts) - 1
    v = rng.random(int(sentence[-1]) + 1 if s else 0)[sentence]
    v[field != ABSTRACT] = 0.0  # a title and keywords: the main topic's
    slot = (v >= cum[doc, 0]).astype(np.int64) + (v >= cum[doc, 1])
    table = np.where(is_general, m["T"], topics[doc, np.minimum(slot, SLOTS - 1)])
    x = rng.random(s) * m["K"]
    i = x.astype(np.int64)
    at = table * m["K"] + i
    item = np.where(x - i < m["prob"][at], m["items"][at], m["alias_items"][at])

    # Per-record fields: the four strings around each record's title, abstract and keywords.
    ids = start + np.arange(n)
    years = np.maximum(1965, 2024 - np.floor(rng.exponential(9.0, n))).astype(np.int64)
    own = m["topic_journals"][topics[:, 0], rng.integers(0, m["topic_journals"].shape[1], n)]
    journal = np.where(rng.random(n) < 0.6, own, rng.choice(len(m["journals"]), n, p=m["journal_weight"]))
    pieces = record_pieces(rng, m, p, ids, years, journal, labels, counts)
    piece_lens = np.array([len(x) for x in pieces], dtype=np.int64)
    src = np.concatenate([m["src"], np.frombuffer("".join(pieces).encode(), dtype=np.uint8)])

    # The bytes: segments in file order. Record k is: piece 0, its title's (word, separator)
    # pairs, piece 1, its abstract's, piece 2, its keywords', piece 3.
    seg_starts = np.empty(2 * s + 4 * n, dtype=np.int64)
    seg_lens = np.empty(2 * s + 4 * n, dtype=np.int64)
    at = 2 * np.arange(s) + 4 * doc + field + 1
    seg_starts[at] = m["offsets"][item] + cap * m["cap_shift"]
    seg_lens[at] = m["lens"][item]
    seg_starts[at + 1] = m["sep_offsets"][sep]
    seg_lens[at + 1] = m["sep_lens"][sep]
    group = np.append(first, s)  # first slot of each (record, field), and the end
    at = 2 * np.stack([group[0:-1:3], group[1::3], group[2::3], group[3::3]], axis=1) + 4 * np.arange(n)[:, None]
    at += np.arange(4)
    seg_starts[at.ravel()] = len(m["src"]) + np.cumsum(piece_lens) - piece_lens
    seg_lens[at.ravel()] = piece_lens
    data = gather(src, seg_starts, seg_lens).tobytes()
    label_lines = "".join(f"{i},{y}\n" for i, y in zip(ids.tolist(), labels.tolist(), strict=True)).encode()
    if p["gzip"]:
        data = gzip.compress(data, compresslevel=p["gzip_level"], mtime=0)
        label_lines = gzip.compress(label_lines, compresslevel=p["gzip_level"], mtime=0)
    words = np.bincount(field, weights=m["item_words"][item], minlength=3)
    stats = dict(
        records=n,
        relevant=int(labels.sum()),
        outliers=int((kind == 3).sum()),
        near_misses=int((kind == 1).sum()),
        empty_abstracts=int((counts[:, ABSTRACT] == 0).sum()),
        title_words=int(words[TITLE]),
        abstract_words=int(words[ABSTRACT]),
    )
    return data, label_lines, stats


def record_pieces(rng, m, p, ids, years, journal, labels, counts):
    """The four strings around each record's title, abstract and keywords."""
    names = m["journals"]
    if p["format"] == "csv":
        return [
            x
            for i, y, j, label in zip(ids.tolist(), years.tolist(), journal.tolist(), labels.tolist(), strict=True)
            for x in (f'{i},"', '","', '","', f'",{y},"{names[j]}",{label}\n')
        ]
    return ris_pieces(rng, m, p, ids, years, journal, labels, counts)


def ris_pieces(rng, m, p, ids, years, journal, labels, counts):
    """record_pieces for RIS: the tags around the title, abstract and keywords (authors, journal,
    volume, pages, ISSN, DOI; --cited-refs CR lines, as a Web of Science export's cited
    references; the label in an N1 note if asked)."""
    names, surnames, n = m["journals"], m["surnames"], len(ids)
    n_authors = np.minimum(1 + rng.geometric(0.22, n), 25)
    author = rng.integers(0, len(surnames), n_authors.sum()).tolist()
    initials = rng.integers(65, 91, (n_authors.sum(), 2)).tolist()
    authors = [f"AU  - {surnames[s]}, {chr(a)}. {chr(b)}.\n" for s, (a, b) in zip(author, initials, strict=True)]
    volume, issue, page = rng.integers(1, 120, n).tolist(), rng.integers(1, 13, n).tolist(), rng.integers(1, 9000, n)
    last_page = (page + rng.integers(4, 16, n)).tolist()
    refs = rng.poisson(p["cited_refs"], n) if p["cited_refs"] else np.zeros(n, dtype=np.int64)
    r = int(refs.sum())
    ref_of = np.repeat(np.arange(n), refs)
    ref_year = (years[ref_of] - rng.integers(0, 25, r)).tolist()
    cited = [
        f"CR  - {surnames[s]} {chr(c)}, {y}, {names[j].upper()}, V{v}, P{q}, DOI 10.5555/bsyn.{y}.{i}.{k}\n"
        for s, c, y, j, v, q, i, k in zip(
            rng.integers(0, len(surnames), r).tolist(),
            rng.integers(65, 91, r).tolist(),
            ref_year,
            rng.integers(0, len(names), r).tolist(),
            rng.integers(1, 120, r).tolist(),
            rng.integers(1, 9000, r).tolist(),
            ids[ref_of].tolist(),
            (np.arange(r) - np.repeat(np.cumsum(refs) - refs, refs)).tolist(),
            strict=True,
        )
    ]
    note = p["ris_label"] in ("note", "both")
    author_end, ref_end = np.cumsum(n_authors).tolist(), np.cumsum(refs).tolist()
    out, a, c = [], 0, 0
    for k, (i, y, j, label) in enumerate(zip(ids.tolist(), years.tolist(), journal.tolist(), labels.tolist())):
        has_abstract, has_keywords = counts[k, ABSTRACT] > 0, counts[k, KEYWORDS] > 0
        out += [
            f"TY  - JOUR\nID  - {i}\nTI  - ",
            "\n" + "".join(authors[a : author_end[k]]) + ("AB  - " if has_abstract else ""),
            ("\n" if has_abstract else "") + ("KW  - " if has_keywords else ""),
            ("\n" if has_keywords else "")
            + f"PY  - {y}\nJO  - {names[j]}\nVL  - {volume[k]}\nIS  - {issue[k]}\nSP  - {page[k]}\n"
            + f"EP  - {last_page[k]}\nSN  - {1000 + j:04d}-{j % 9973:04d}\nDO  - 10.5555/bsyn.{y}.{i}\n"
            + "".join(cited[c : ref_end[k]])
            + (f"N1  - label_included: {label}\n" if note else "")
            + "ER  - \n\n",
        ]
        a, c = author_end[k], ref_end[k]
    return out


_model = None


def _init(model):
    global _model
    _model = model


def _block(args):
    return make_block(_model, *args)


def blocks(model, p, n, block_records, workers):
    """(data, label lines, stats) of each block in order, at most 2 x workers blocks in flight."""
    tasks = ((p, b, start, min(block_records, n - start)) for b, start in enumerate(range(0, n, block_records)))
    if workers <= 1:
        for task in tasks:
            yield make_block(model, *task)
        return
    ctx = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")
    with ctx.Pool(workers, initializer=_init, initargs=(model,)) as pool:
        pending = deque()
        for task in tasks:
            pending.append(pool.apply_async(_block, (task,)))
            if len(pending) >= 2 * workers:
                yield pending.popleft().get()
        while pending:
            yield pending.popleft().get()


class Progress:
    """Records written, rate and time left, on stderr every ``every`` seconds."""

    def __init__(self, n, every=5.0):
        self.n, self.every = n, every
        self.start = self.last = time.perf_counter()

    def __call__(self, done):
        now = time.perf_counter()
        if now - self.last < self.every and done < self.n:
            return
        self.last = now
        rate = done / max(now - self.start, 1e-9)
        left = (self.n - done) / rate if rate > 0 else float("inf")
        print(
            f"make_abstracts: {done:,} / {self.n:,} records ({done / self.n:.0%}), {rate:,.0f} records/s, "
            f"{now - self.start:.0f} s elapsed, about {left:.0f} s left",
            file=sys.stderr,
            flush=True,
        )


def format_of(path, given):
    if given:
        return given
    name = path.name.lower().removesuffix(".gz")
    return "ris" if name.endswith(".ris") else "csv"


def labels_path(out):
    name = out.name.removesuffix(".gz")
    stem = name.rsplit(".", 1)[0] if "." in name else name
    return out.with_name(stem + ".labels.csv" + (".gz" if out.name.endswith(".gz") else ""))


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", help="file to write: .csv or .ris, gzipped if it ends in .gz")
    ap.add_argument("--n", type=int, required=True, help="records")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--preset",
        choices=list(PRESETS),
        default=DEFAULT_PRESET,
        help=f"difficulty: the defaults of the six flags below (default {DEFAULT_PRESET}); "
        + "; ".join(f"{k}: " + ", ".join(f"{a}={b}" for a, b in v.items()) for k, v in PRESETS.items()),
    )
    rel = ap.add_argument_group("relevance (defaults: the preset's)")
    rel.add_argument("--prevalence", type=float, help="fraction of relevant records (medium: 0.03)")
    rel.add_argument(
        "--overlap", type=float, help="fraction of an inclusion topic's words and phrases its near-miss topics share"
    )
    rel.add_argument("--near-miss-share", type=float, help="fraction of the irrelevant records about a near-miss topic")
    rel.add_argument(
        "--outliers", type=float, help="fraction of the relevant records that only mention their topic (label noise)"
    )
    rel.add_argument("--inclusion-topics", type=int, help="topics the relevant records are about")
    rel.add_argument("--focus", type=float, help="mean weight of a record's main topic among its topical words")
    text = ap.add_argument_group("text")
    text.add_argument("--vocabulary", type=int, default=50000, help="word types (default 50,000)")
    text.add_argument("--topics", type=int, default=300, help="topics (default 300)")
    text.add_argument("--topic-words", type=int, default=1000, help="content words per topic (default 1,000)")
    text.add_argument("--abstract-words", type=float, default=215, help="median words per abstract (default 215)")
    text.add_argument("--title-words", type=float, default=13, help="median words per title (default 13)")
    text.add_argument(
        "--empty-abstracts", type=float, default=0.06, help="fraction of records with no abstract (default 0.06)"
    )
    text.add_argument("--journals", type=int, default=2000, help="journal names (default 2,000)")
    out = ap.add_argument_group("output")
    out.add_argument("--format", choices=("csv", "ris"), help="default: ris for a .ris name, else csv")
    out.add_argument(
        "--ris-label",
        choices=("file", "note", "both"),
        default="file",
        help="RIS: labels in NAME.labels.csv (record_id,label_included; default), in an N1 note, or both",
    )
    out.add_argument(
        "--cited-refs", type=float, default=0, help="RIS: mean cited references (CR lines) per record (default 0)"
    )
    out.add_argument(
        "--gzip-level", type=int, default=1, help="for a .gz name (default 1: half the CPU of 6, 15%% larger)"
    )
    out.add_argument("--workers", type=int, default=2, help="processes (default 2); the output does not depend on it")
    out.add_argument("--block-records", type=int, default=4096, help="records per block (default 4,096)")
    out.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    out.add_argument("--overwrite", action="store_true")
    args = ap.parse_args(argv)
    for key, value in PRESETS[args.preset].items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    args.out = Path(args.out)
    args.format = format_of(args.out, args.format)
    if args.n < 1:
        ap.error("--n must be >= 1")
    if not 0 < args.prevalence < 1:
        ap.error("--prevalence must be in (0, 1), e.g. 0.03")
    for name in ("overlap", "near_miss_share", "outliers", "empty_abstracts"):
        if not 0 <= getattr(args, name) <= 1:
            ap.error(f"--{name.replace('_', '-')} must be in [0, 1]")
    if not 0 < args.focus < 1:
        ap.error("--focus must be in (0, 1)")
    if args.topics < 2 + 4 * args.inclusion_topics or args.inclusion_topics < 1:
        ap.error("--topics must be at least 4 per inclusion topic, plus 2 (each has 3 near-miss topics)")
    if args.vocabulary < 5000 or args.topic_words < 50 or args.topic_words > args.vocabulary // 4:
        ap.error("--vocabulary must be >= 5,000 and --topic-words in [50, vocabulary / 4]")
    if args.block_records < 1 or args.workers < 1:
        ap.error("--block-records and --workers must be >= 1")
    if not 0 <= args.gzip_level <= 9:
        ap.error("--gzip-level must be in [0, 9]")
    if not args.out.parent.is_dir():
        ap.error(f"{args.out.parent} is not a directory")
    written = [args.out] + ([labels_path(args.out)] if args.format == "ris" and args.ris_label != "note" else [])
    for path in written:
        if path.exists() and not args.overwrite:
            ap.error(f"{path} exists; pass --overwrite to replace it")
    return args


def main(argv=None):
    args = parse_args(argv)
    t = time.perf_counter()
    params = dict(
        seed=args.seed,
        prevalence=args.prevalence,
        overlap=args.overlap,
        near_miss_share=args.near_miss_share,
        outliers=args.outliers,
        inclusion_topics=args.inclusion_topics,
        focus=args.focus,
        vocabulary=args.vocabulary,
        topics=args.topics,
        topic_words=args.topic_words,
        abstract_words=args.abstract_words,
        title_words=args.title_words,
        empty_abstracts=args.empty_abstracts,
        journals=args.journals,
        format=args.format,
        ris_label=args.ris_label,
        cited_refs=args.cited_refs,
        gzip=args.out.name.endswith(".gz"),
        gzip_level=args.gzip_level,
    )
    model = build_model(params)
    label_file = labels_path(args.out) if args.format == "ris" and args.ris_label in ("file", "both") else None
    tmp = args.out.with_name(f".{args.out.name}.partial-{os.getpid()}")
    tmp_labels = label_file and label_file.with_name(f".{label_file.name}.partial-{os.getpid()}")
    totals = dict.fromkeys(("records", "relevant", "outliers", "near_misses", "empty_abstracts"), 0)
    words = dict(title_words=0, abstract_words=0)
    progress = None if args.quiet else Progress(args.n)
    try:
        with open(tmp, "wb") as f, open(tmp_labels, "wb") if label_file else open(os.devnull, "wb") as fl:
            header = b"record_id,title,abstract,keywords,year,journal,label_included\n"
            label_header = b"record_id,label_included\n"
            if params["gzip"]:
                header = gzip.compress(header, compresslevel=args.gzip_level, mtime=0)
                label_header = gzip.compress(label_header, compresslevel=args.gzip_level, mtime=0)
            if args.format == "csv":
                f.write(header)
            fl.write(label_header)
            for data, label_lines, stats in blocks(model, params, args.n, args.block_records, args.workers):
                f.write(data)
                fl.write(label_lines)
                for key in totals:
                    totals[key] += stats[key]
                for key in words:
                    words[key] += stats[key]
                if progress:
                    progress(totals["records"])
        os.replace(tmp, args.out)
        if label_file:
            os.replace(tmp_labels, label_file)
    finally:
        for leftover in (tmp, tmp_labels):
            if leftover and leftover.exists():
                leftover.unlink()
    seconds = time.perf_counter() - t
    size = args.out.stat().st_size
    n, with_abstract = totals["records"], totals["records"] - totals["empty_abstracts"]
    out = dict(
        path=str(args.out),
        format=args.format,
        gzip=params["gzip"],
        labels=str(label_file) if label_file else None,
        preset=args.preset,
        seed=args.seed,
        **totals,
        prevalence=round(totals["relevant"] / n, 5),
        title_words_mean=round(words["title_words"] / n, 1),
        abstract_words_mean=round(words["abstract_words"] / max(with_abstract, 1), 1),
        bytes=size,
        seconds=round(seconds, 2),
        records_per_s=round(n / seconds),
        MB_per_s=round(size / seconds / 1e6, 1),
        workers=args.workers,
        block_records=args.block_records,
    )
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()
