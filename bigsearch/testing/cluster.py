"""What a dask cluster's workers hold, read on the workers themselves (``Client.run``)."""

import numpy as np


def persisted_chunks(backend):
    """{worker address: {chunk j: its rows of X}} that the shards of ``backend`` (a
    distributed backend) hold in their workers' memory (``persist=True``)."""
    return backend.persisted_chunks()


def assert_persisted(backend):
    """Every chunk of the store is held, with its exact values, by exactly one worker, and
    every worker holds some: X lives in the workers' memory, spread over them."""
    held = persisted_chunks(backend)
    assert all(held.values()), f"a worker holds no rows of X: {sorted((w, sorted(c)) for w, c in held.items())}"
    owners = [j for chunks in held.values() for j in chunks]
    assert sorted(owners) == list(range(backend.store.n_chunks)), f"chunks held: {sorted(owners)}"
    for chunks in held.values():
        for j, x in chunks.items():
            with backend.store.chunk(j) as stored:
                np.testing.assert_array_equal(x, stored)
