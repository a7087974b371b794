"""The exactness suite of test_las_exact.py on the dask distributed backend: its tests that
take a backend, on a LocalCluster of worker processes (the `client` fixture of conftest.py).

On the cluster each engine is checked against the dense reference on a covering set of
store cases instead of the whole grid: every kind with every dtype, and every chunking (one
row, rows that do not divide n, all rows) at least once. The whole grid runs on the local
backend (test_las_exact.py); what the cluster adds (shards, partials gathered from the
workers in chunk order) does not depend on which kind holds which dtype. The tests of
test_las_exact.py that take no backend (passes counted, quadratic forms, column blocks) run
there only: here they would run the same local code again."""

import functools

import pytest
from test_las_exact import (
    test_asg_equals_las,  # noqa: F401 (collected here again, on the cluster)
    test_f_and_impact_match_brute_force,
    test_initial_labels_given_before_first_ask_use_one_initialization,  # noqa: F401
    test_labels_told_together_equal_labels_told_one_by_one,  # noqa: F401
    test_no_labels_at_all,  # noqa: F401
    test_query_sequence_matches_dense,
    test_wnas_matches_definition,
)

GRID = [("zarr", "float32", 1), ("hdf5", "float64", 7), ("zarr", "float64", 80), ("hdf5", "float32", 80)]
STORE_CASES = "kind,dtype,chunk_rows"


@pytest.fixture
def backend(client):
    return client


def on_the_grid(test):
    """``test`` with its store cases replaced by GRID (its other parameters kept)."""

    @functools.wraps(test)
    def run(*args, **kwargs):
        return test(*args, **kwargs)

    marks = [m for m in test.pytestmark if m.args[0] != STORE_CASES]
    run.pytestmark = [*marks, pytest.mark.parametrize(STORE_CASES, GRID).mark]
    return run


test_f_and_impact_match_brute_force = on_the_grid(test_f_and_impact_match_brute_force)
test_query_sequence_matches_dense = on_the_grid(test_query_sequence_matches_dense)
test_wnas_matches_definition = on_the_grid(test_wnas_matches_definition)


def test_the_grid_covers_every_kind_dtype_and_chunking():
    from conftest import DTYPES, KINDS, chunkings

    assert {(k, d) for k, d, _ in GRID} == {(k, d) for k in KINDS for d in DTYPES}
    assert {c for _, _, c in GRID} == set(chunkings(80))
