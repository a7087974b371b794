"""numba's cache of the kernels is dropped when any kernel source changes (numba itself
checks only the file that defines a function, not the kernels it calls)."""

import json
import os
import subprocess
import sys
import textwrap
import time

import numpy as np

from bigsearch.kernels import STAMP, drop_stale_cache


def test_indexes_are_dropped_when_any_source_changes(tmp_path):
    src, cache = tmp_path / "kernels", tmp_path / "kernels" / "__pycache__"
    src.mkdir()
    (src / "common.py").write_text("A = 1\n")
    (src / "las.py").write_text("B = 2\n")
    assert drop_stale_cache(src, cache)                  # no stamp yet: a fresh cache
    (cache / "las.update-1.py311.nbi").write_text("index")
    assert not drop_stale_cache(src, cache)              # same sources: kept
    assert (cache / "las.update-1.py311.nbi").exists()
    (src / "common.py").write_text("A = 3\n")            # a dependency of las.py changed
    assert drop_stale_cache(src, cache)
    assert not (cache / "las.update-1.py311.nbi").exists()
    assert (cache / STAMP).read_text() != ""
    assert not drop_stale_cache(src, cache)


def test_an_edited_dependency_reaches_a_cached_caller(tmp_path):
    """The failure this guards against, with numba's real cache: a cached function of one
    file keeps calling the old version of a function from another file."""
    pkg = tmp_path / "kern"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(textwrap.dedent("""
        from pathlib import Path
        from bigsearch.kernels import drop_stale_cache
        drop_stale_cache(Path(__file__).parent, Path(__file__).parent / "__pycache__")
    """))
    (pkg / "dep.py").write_text("import numba\n@numba.njit(cache=True)\ndef value():\n    return 1\n")
    (pkg / "caller.py").write_text("import numba\nfrom .dep import value\n"
                                   "@numba.njit(cache=True)\ndef call():\n    return value()\n")
    run = [sys.executable, "-c", "from kern.caller import call; print(call())"]
    # numba's cache beside the sources, where drop_stale_cache looks (not under a NUMBA_CACHE_DIR)
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    assert subprocess.run(run, cwd=tmp_path, env=env, capture_output=True, text=True, check=True).stdout.strip() == "1"
    (pkg / "dep.py").write_text("import numba\n@numba.njit(cache=True)\ndef value():\n    return 2\n")
    assert subprocess.run(run, cwd=tmp_path, env=env, capture_output=True, text=True, check=True).stdout.strip() == "2"


SCORE_A_CHUNK = textwrap.dedent("""
    import sys
    import numpy as np
    from bigsearch.kernels.blr import blr_scores
    from bigsearch.kernels.items import new_items
    from bigsearch.kernels.las import degrees, update_items, update_scores
    from bigsearch.kernels.wnas import add_similarities
    from bigsearch.kernels.common import addresses_of
    rng = np.random.default_rng(0)
    x = rng.random((37, 10)).astype("f4")
    x.flags.writeable = False
    label = np.full(37, -1, np.int8)
    label[3] = 1
    deg = x.astype(np.float64) @ np.ones(10) + 1.0
    J0 = rng.random(37) + 1.0
    las = [J0.copy(), np.zeros(37), np.zeros(37)]
    V = rng.normal(size=(3, 10)) * 0.3
    update_scores(x, V, np.array([1e-3]), 0, label, deg, *las, 0.6, 0.3, 0.05, 0.01)
    items = [J0.copy(), np.zeros(37), np.zeros(37)]   # the whole-store kernel, two chunks
    sums, vals, idx = new_items(2)
    update_items(x, addresses_of([x[:20], x[20:]]), np.array([0, 20, 37]), np.array([[0, 0, 20], [1, 0, 17]]),
                 np.zeros(1, np.int64), V, 3, np.array([1e-3]), label, deg, *items, 0.6, 0.3, 0.05, 0.01,
                 sums, vals, idx)
    blr = [J0.copy(), np.zeros(37), np.zeros(37), np.zeros(37)]
    blr_scores(x, rng.normal(size=(4, 10)) * 0.3, np.array([1e-3]), 0, label, *blr, 0.1, 0.2, 0.01, 1.5, 1.0)
    wnas = [np.zeros(37), np.zeros(37), np.zeros(37)]
    add_similarities(x, rng.random((2, 10)), np.array([1.0, -1.0]), 0, label, *wnas)
    deg_out = np.zeros(37)
    degrees(x, rng.random(10), deg_out)
    np.save(sys.argv[1], np.stack(las + items + blr + wnas + [deg_out]))
""")


def test_kernels_give_the_same_bits_compiled_or_loaded_from_the_cache(tmp_path):
    """A dask worker may compile a kernel while the driver loads it from numba's cache (or
    the other way round): the numbers of LAS, BLR and WNAS must not depend on which (a
    version of LAS's per-point loop did: its impact factor moved in the last bit, and the
    cluster's queries could have left the local ones; docs/contributing.md, fast-math)."""
    script = tmp_path / "score.py"
    script.write_text(SCORE_A_CHUNK)
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache")}
    outputs = []
    for name in ("compiled", "cached"):
        out = tmp_path / f"{name}.npy"
        subprocess.run([sys.executable, str(script), str(out)], env=env, check=True, capture_output=True)
        outputs.append(np.load(out))
    assert any((tmp_path / "cache").rglob("*.nbc")), "the first run left nothing in the cache"
    np.testing.assert_array_equal(outputs[0], outputs[1])


A_SEARCH = textwrap.dedent("""
    import sys
    import numpy as np
    from numba.core import event
    import bigsearch
    from bigsearch.synthetic import clustered_points
    X, y = clustered_points(3000, 8, prevalence=0.05, seed=1)
    store = bigsearch.create_store(sys.argv[1], X, y, chunk_rows=700)
    with event.install_recorder("numba:compile") as compiled:
        for s in (bigsearch.LAS(store, pi=0.05, alpha=0.01), bigsearch.WNAS(store), bigsearch.BLR(store)):
            s.tell(int(np.flatnonzero(y)[0]), 1)
            for _ in range(3):
                i = s.ask()
                s.tell(i, int(y[i]))
            held = s.store.held_chunks() is not None
    print(held, sorted({e.data["dispatcher"].py_func.__qualname__ for _, e in compiled.buffer}))
""")


def test_a_search_with_a_warm_cache_compiles_nothing(tmp_path):
    """Every function a query runs comes from numba's cache once it is there: a command
    pays no compilation after its first run. (numba's typed List compiled its own methods
    in every process, 0.3-0.45 s of every session command, until chunks went to the
    kernel by address.)"""
    script = tmp_path / "search.py"
    script.write_text(A_SEARCH)
    runs = [subprocess.run([sys.executable, str(script), str(tmp_path / f"s{k}.zarr")], capture_output=True,
                           text=True, check=True).stdout.split(maxsplit=1) for k in range(2)]
    held, compiled = runs[1]
    assert held == "True"                     # the passes over held maps ran
    assert compiled.strip() == "[]", compiled


COMPILE_AT_A_SIGNAL = textwrap.dedent("""
    import json, sys, time
    from pathlib import Path
    import numpy as np
    from numba.core import event
    from bigsearch.kernels.stopping import remaining_hits
    go, ready = Path(sys.argv[1]), Path(sys.argv[2])
    ready.touch()
    while not go.exists():
        time.sleep(0.005)
    with event.install_recorder("numba:compile") as compiled:
        out = remaining_hits(np.array([0.0, 3.0, 7.0]), 100, 1000, 1.5, np.linspace(0, 1, 5), 0.01,
                             np.array([10.0, 50.0, 100.0]))
    print(json.dumps({"compiled": sorted({e.data["dispatcher"].py_func.__qualname__ for _, e in compiled.buffer}),
                      "out": list(out)}))
""")


def test_processes_calling_a_kernel_at_once_compile_it_once(tmp_path):
    """Two processes reach the same uncompiled kernel at the same moment (a dask cluster's
    workers, commands started together): one compiles it, the other waits for it and loads
    it from numba's cache (kernels/compile_lock.py). Without the lock both compiled it."""
    script = tmp_path / "call.py"
    script.write_text(COMPILE_AT_A_SIGNAL)
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache")}
    go = tmp_path / "go"
    ready = [tmp_path / f"ready{k}" for k in range(2)]
    procs = [subprocess.Popen([sys.executable, str(script), str(go), str(r)], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for r in ready]
    deadline = time.monotonic() + 120
    while not all(r.exists() for r in ready) and time.monotonic() < deadline:
        time.sleep(0.01)
    go.touch()                                  # both imported: they call the kernel together
    results = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        results.append(json.loads(out))
    compiled = sorted("remaining_hits" in r["compiled"] for r in results)
    assert compiled == [False, True], results
    assert results[0]["out"] == results[1]["out"]


def test_every_kernel_compiles_under_its_lock():
    """Each kernel module ends with lock_compiles(globals()): a module that forgot it would
    compile its kernels in every process again."""
    import importlib
    import pkgutil

    from numba.core.registry import CPUDispatcher

    import bigsearch.kernels

    unlocked = []
    for info in pkgutil.iter_modules(bigsearch.kernels.__path__):
        module = importlib.import_module(f"bigsearch.kernels.{info.name}")
        unlocked += [f"{info.name}.{name}" for name, value in vars(module).items()
                     if isinstance(value, CPUDispatcher) and value.py_func.__module__ == module.__name__
                     and not getattr(value.compile, "locked", False)]
    assert unlocked == []
