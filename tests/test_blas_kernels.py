"""The same answers whatever the BLAS (issue 40, item 2): LAS and BLR on a store of
duplicated points, run in fresh interpreters under OpenBLAS's core types for several CPU
generations (OPENBLAS_CORETYPE, which some machines set and CI keeps as the machine has it):
under each, every copy of a point gets the same bits of J, f and the impact factor
wherever its chunk cuts, and the queries are the lowest index among exact ties.

Before the per-row products moved to kernels/rows.py, J came from BLAS's trmm, whose value
for a row depended on the row's place in the BLAS blocking under the Haswell kernels."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from threadpoolctl import threadpool_info

import bigsearch
from bigsearch.synthetic import clustered_points

from conftest import write_store

CORE_TYPES = ["Haswell", "SkylakeX", "Sandybridge"]

CHILD = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    import bigsearch
    from threadpoolctl import threadpool_info

    path, groups_file, method = sys.argv[1:4]
    groups = np.load(groups_file)
    y = np.asarray(bigsearch.open_store(path).labels())
    if method == "las":
        s = bigsearch.LAS(path, pi=0.3, alpha=0.3)
    else:
        s = bigsearch.BLR(path, acquisition="ucb")
    first = int(np.flatnonzero(y)[0])
    s.tell(first, 1)
    queries, split = [], []
    labeled = {first}
    for _ in range(12):
        state = [np.asarray(s.f), np.asarray(s.J), np.asarray(getattr(s, "impact", s.f))]
        for g in np.unique(groups):
            members = [j for j in np.flatnonzero(groups == g) if j not in labeled]
            for v in state:
                if len(np.unique(v[members])) > 1:
                    split.append(int(g))
        i = s.ask()
        queries.append(i)
        labeled.add(i)
        s.tell(i, int(y[i]))
    core = [b.get("architecture") for b in threadpool_info() if b.get("internal_api") == "openblas"]
    print(json.dumps({"queries": queries, "split": sorted(set(split)), "core": core}))
    """
)


@pytest.fixture(scope="module")
def duplicated_store(tmp_path_factory):
    """20 distinct points, 25 copies each, shuffled, in chunks of 50 rows (copies fall at
    every place of a chunk and of BLAS's blocks)."""
    X, y = clustered_points(20, 5, prevalence=0.3, seed=4)
    groups = np.repeat(np.arange(20), 25)
    order = np.random.default_rng(0).permutation(len(groups))
    X, y, groups = np.repeat(X, 25, axis=0)[order], np.repeat(y, 25)[order], groups[order]
    folder = tmp_path_factory.mktemp("dups")
    path = write_store(folder, X, y, "zarr", "float64", 50)
    np.save(folder / "groups.npy", groups)
    return path, folder / "groups.npy", groups


def openblas():
    return any(b.get("internal_api") == "openblas" for b in threadpool_info())


@pytest.mark.skipif(not openblas(), reason="NumPy here does not use OpenBLAS: its core types cannot be chosen")
@pytest.mark.parametrize("method", ["las", "blr"])
def test_copies_of_a_point_score_alike_under_every_core_type(duplicated_store, method):
    path, groups_file, groups = duplicated_store
    first = int(np.flatnonzero(bigsearch.open_store(path).labels())[0])
    runs = {}
    for core in CORE_TYPES:
        env = dict(os.environ, OPENBLAS_CORETYPE=core)
        out = subprocess.run(
            [sys.executable, "-c", CHILD, str(path), str(groups_file), method],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
        )
        assert out.returncode == 0, out.stderr
        runs[core] = json.loads(out.stdout.strip().splitlines()[-1])
        assert runs[core]["split"] == [], f"{core}: copies of points {runs[core]['split']} got different values"
        for i in runs[core]["queries"]:
            # each query is the lowest index of its group among the unlabeled copies
            taken = set(runs[core]["queries"][: runs[core]["queries"].index(i)]) | {first}
            copies = [j for j in np.flatnonzero(groups == groups[i]) if j not in taken]
            assert i == min(copies), f"{core}: query {i}, a copy with a lower index was unlabeled"
    assert {tuple(r["core"]) for r in runs.values()} != {()}, "OpenBLAS reported no core type"


def test_products_between_passes_take_all_cores_only_when_large():
    """A product below PARALLEL_WORK multiply-adds runs on one BLAS thread (OpenBLAS's
    threads would spin on the cores the next pass needs); a larger one on every core the
    process may use; the limit comes back after either."""
    from bigsearch.engine.core.blas import PARALLEL_WORK, blas_threads

    def blas_threads_now():
        return {lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"}

    before = blas_threads_now()
    if not before:
        pytest.skip("no BLAS library that threadpoolctl can see")
    with blas_threads(PARALLEL_WORK / 2):
        assert blas_threads_now() == {1}
    assert blas_threads_now() == before
    with blas_threads(PARALLEL_WORK):
        assert blas_threads_now() == {len(os.sched_getaffinity(0))}
    assert blas_threads_now() == before
