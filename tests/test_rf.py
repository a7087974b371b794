"""`rf`, the random-forest baseline: the same forest and queries as scikit-learn on the
whole matrix, whatever the store's chunking, kind and dtype."""

import numpy as np
import pytest

from bigsearch.engine.methods.rf import RandomForestSearch
from bigsearch.errors import ParameterError

pytest.importorskip("sklearn", reason="rf needs scikit-learn (bigsearch[ingest] or [test])")


def _reference_queries(X, y, init, rounds, batch, seed):
    from sklearn.ensemble import RandomForestRegressor

    labeled = list(init)
    queries = []
    for _ in range(rounds):
        forest = RandomForestRegressor(n_estimators=20, max_depth=4, random_state=seed, n_jobs=1)
        forest.fit(X[labeled], y[labeled].astype(np.float64))
        pred = forest.predict(X)
        unl = np.setdiff1d(np.arange(len(X)), labeled)
        chosen = unl[np.lexsort((unl, -pred[unl]))[:batch]].tolist()
        queries += chosen
        labeled += chosen
    return queries


@pytest.mark.parametrize("kind", ["zarr", "hdf5"])
@pytest.mark.parametrize("chunk_rows", [1, 7, 80])
def test_rf_queries_are_scikit_learns(small_data, store_factory, kind, chunk_rows):
    X, y = small_data
    path = store_factory(X, y, kind=kind, dtype="float64", chunk_rows=chunk_rows)
    init = [int(np.flatnonzero(y == 1)[0]), *np.flatnonzero(y == 0)[:3].tolist()]
    search = RandomForestSearch(path, n_trees=20, max_depth=4, seed=3)
    search.tell(init, [int(y[i]) for i in init])
    queries = []
    for _ in range(4):
        batch = [int(i) for i in search.top(5)[0]]
        search.tell(batch, [int(y[i]) for i in batch])
        queries += batch
    assert queries == _reference_queries(X, y, init, 4, 5, seed=3)
    assert search.fits == 4  # retrained once per batch, not per label


def test_rf_options_are_checked(small_data, store_factory):
    path = store_factory(*small_data)
    for bad in ({"n_trees": 0}, {"max_depth": 1.5}, {"min_samples_leaf": -1}):
        with pytest.raises(ParameterError, match="rf:"):
            RandomForestSearch(path, **bad)
