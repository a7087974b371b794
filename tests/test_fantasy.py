"""Fantasized batches (issue 18): sequential greedy with fantasized soft labels, chosen
from a candidate set with a bound, equal to the naive version with full dense solves."""

import itertools

import numpy as np
import pytest

import bigsearch
from bigsearch import simulate
from bigsearch.engine.methods.fantasy import FantasizedBatch
from bigsearch.errors import ParameterError
from bigsearch.testing import dense_fantasized_batch, pass_per_member_batch

from conftest import DTYPES, KINDS, chunkings, write_store

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
    assert all(p >= 1 for p in search.fantasy_passes)  # at least the verification pass


@pytest.mark.parametrize("candidates,cap", [(1, 1), (3, 2), (30, 8)])
def test_few_candidates_take_more_verification_passes_and_stay_exact(small_data, store_factory, candidates, cap):
    """With few candidates the speculated steps fail verification more often; each
    failure costs a pass, adds the points that reached, and the batch stays exact."""
    X, y = small_data
    path = store_factory(X, y, "zarr", "float64", 7)
    search = bigsearch.LAS(path, pi=0.2)
    search.tell([int(np.flatnonzero(y)[1]), 4], [1, 0])
    search.sync()
    labels = np.full(len(y), -1.0)
    labels[[int(np.flatnonzero(y)[1]), 4]] = [1, 0]
    chooser = FantasizedBatch(search, 0.0, candidates=candidates, cap=cap)
    assert chooser.choose(12) == dense_fantasized_batch(stored_X(path), labels, 12, pi=0.2)
    assert (chooser.passes > 1) == (candidates < 12)
    assert search.next_batch(3) == search.top(3)[0].tolist()  # the search itself is unchanged


def test_fantasy_in_simulate_and_its_checks(small_data, store_factory):
    X, y = small_data
    path = store_factory(X, y)
    record = simulate(path, "las", 20, seed=1, batch_size=5, pi=0.2, fantasy=0.0)
    labels = np.full(len(y), -1.0)  # the reference: batches of 5 by dense solves on X, then y told
    for i, label in record["init"]:
        labels[i] = label
    expected = []
    for _ in range(4):
        batch = dense_fantasized_batch(stored_X(path), labels, 5, pi=0.2, fantasy=0.0)
        labels[batch] = y[batch]
        expected += batch
    assert [i for i, _ in record["queries"]] == expected
    assert [label for _, label in record["queries"]] == [int(y[i]) for i in expected]
    for bad in (1.5, "x", -1):
        with pytest.raises(ParameterError, match="fantasy"):
            bigsearch.LAS(path, pi=0.2, fantasy=bad)
    with pytest.raises(ParameterError, match="alpha = 0"):
        search = bigsearch.LAS(path, pi=0.2, alpha=0.1, fantasy=0.0)
        search.tell(0, int(y[0]))
        search.next_batch(3)


@pytest.fixture(scope="module")
def fingerprints(tmp_path_factory):
    """A docking-like store: sparse binary rows, unit-normalized, with a bias feature
    (every similarity > 0, so each fantasized 0 lowers nearly every f)."""
    rng = np.random.default_rng(5)
    X = (rng.random((1500, 40)) < rng.uniform(0.05, 0.3, 40)).astype(float)
    X = np.hstack([X / np.maximum(np.linalg.norm(X, axis=1, keepdims=True), 1e-12), np.ones((1500, 1))])
    y = (X[:, :3].sum(axis=1) > 0.9).astype(np.int8)
    return write_store(tmp_path_factory.mktemp("fp"), X, y, "zarr", "float32", 400)


@pytest.mark.parametrize("fantasy", [0.0, "f"])
def test_fingerprint_like_batches_equal_the_pass_per_member_greedy(fingerprints, fantasy):
    search = bigsearch.LAS(fingerprints, pi=0.05, fantasy=fantasy)
    y = search.store.labels()
    search.tell(list(range(30)), [int(v) for v in y[:30]])
    search.sync()
    batch = search.next_batch(25)
    assert batch == pass_per_member_batch(search, fantasy, 25)[0]
    assert search.fantasy_passes[-1] < 5  # speculate and verify: not one pass per member
