"""The exactness suite of test_las_exact.py on the dask distributed backend: the same tests,
on a LocalCluster of worker processes (the `client` fixture of conftest.py)."""

import pytest
from test_las_exact import *  # noqa: F403 (the tests, collected here again)


@pytest.fixture
def backend(client):
    return client
