"""Fantasized batches (issue 18): sequential greedy with fantasized soft labels, chosen
from a candidate set with a bound, equal to the naive version with full dense solves."""

import itertools

import numpy as np
import pytest

import bigsearch
from bigsearch.engine.fantasy import FantasizedBatch
from bigsearch.errors import ParameterError
from bigsearch.simulate import simulate
from bigsearch.testing import dense_fantasized_batch

from conftest import DTYPES, KINDS, chunkings

GRID = list(itertools.product(KINDS, DTYPES, chunkings(80)))


def stored_X(path):
    s = bigsearch.open_store(path)
    return s.read_rows(np.arange(s.n))


@pytest.mark.parametrize("fantasy", [0.0, "f", 0.3])
@pytest.mark.parametrize("kind,dtype,chunk_rows", GRID)
def test_fantasized_batches_match_the_naive_dense_greedy(small_data, store_factory, kind, dtype, chunk_rows, fantasy):
    X, y = small_data
    path = store_factory(X, y, kind, dtype, chunk_rows)
    Xs = stored_X(path)
    search = bigsearch.LAS(path, pi=0.2, eta=0.5, fantasy=fantasy)
    start = [int(np.flatnonzero(y)[0]), int(np.flatnonzero(y == 0)[0])]
    search.tell(start, [1, 0])
    labels = np.full(len(y), -1.0)
    labels[start] = [1, 0]
    for _ in range(3):
        batch = search.next_batch(6)
        assert batch == dense_fantasized_batch(Xs, labels, 6, pi=0.2, eta=0.5, fantasy=fantasy)
        search.tell(batch, [int(y[i]) for i in batch])  # the real answers replace the fantasies
        labels[batch] = y[batch]
    assert all(p >= 1 for p in search.fantasy_passes)


@pytest.mark.parametrize("candidates", [7, 9, 30])
def test_small_candidate_sets_rescan_and_stay_exact(small_data, store_factory, candidates):
    """With few candidates the bound fails more often; every failure costs a pass and
    the batch is still the exact fantasized greedy."""
    X, y = small_data
    path = store_factory(X, y, "zarr", "float64", 7)
    search = bigsearch.LAS(path, pi=0.2)
    search.tell([int(np.flatnonzero(y)[1]), 4], [1, 0])
    search.sync()
    labels = np.full(len(y), -1.0)
    labels[[int(np.flatnonzero(y)[1]), 4]] = [1, 0]
    chooser = FantasizedBatch(search, 0.0, candidates=candidates)
    assert chooser.choose(12) == dense_fantasized_batch(stored_X(path), labels, 12, pi=0.2)
    assert 1 <= chooser.passes <= 12
    assert search.next_batch(3) == search.top(3)[0].tolist()  # the search itself is unchanged


def test_fantasy_in_simulate_and_its_checks(small_data, store_factory):
    X, y = small_data
    path = store_factory(X, y)
    record = simulate(path, "las", 20, seed=1, batch_size=5, pi=0.2, fantasy=0.0)
    assert len(record["queries"]) == 20 and len({i for i, _ in record["queries"]}) == 20
    for bad in (1.5, "x", -1):
        with pytest.raises(ParameterError, match="fantasy"):
            bigsearch.LAS(path, pi=0.2, fantasy=bad)
    with pytest.raises(ParameterError, match="alpha = 0"):
        search = bigsearch.LAS(path, pi=0.2, alpha=0.1, fantasy=0.0)
        search.tell(0, int(y[0]))
        search.next_batch(3)


@pytest.mark.parametrize("chunk_rows", [1, 7, 80])
def test_monotone_case_non_negative_features(store_factory, chunk_rows):
    """X >= 0 (fingerprint-like rows with a bias): the fantasized-zero shortcut applies and
    the batches are still the naive dense greedy's."""
    rng = np.random.default_rng(5)
    X = (rng.random((80, 12)) < 0.3) * rng.random((80, 12))
    X = np.hstack([X / np.maximum(np.linalg.norm(X, axis=1, keepdims=True), 1e-12), np.ones((80, 1))])
    y = (rng.random(80) < 0.2).astype(np.int8)
    path = store_factory(X, y, "zarr", "float64", chunk_rows)
    search = bigsearch.LAS(path, pi=0.2)
    search.tell([0, 1, 2], [int(y[0]), int(y[1]), 1])
    search.sync()
    labels = np.full(80, -1.0)
    labels[[0, 1, 2]] = [y[0], y[1], 1]
    chooser = FantasizedBatch(search, 0.0, candidates=20)
    assert chooser.choose(10) == dense_fantasized_batch(stored_X(path), labels, 10, pi=0.2)
    assert chooser._monotone()
