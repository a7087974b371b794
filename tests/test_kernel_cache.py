"""numba's cache of the kernels is dropped when any kernel source changes (numba itself
checks only the file that defines a function, not the kernels it calls)."""

import subprocess
import sys
import textwrap

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
    assert subprocess.run(run, cwd=tmp_path, capture_output=True, text=True, check=True).stdout.strip() == "1"
    (pkg / "dep.py").write_text("import numba\n@numba.njit(cache=True)\ndef value():\n    return 2\n")
    assert subprocess.run(run, cwd=tmp_path, capture_output=True, text=True, check=True).stdout.strip() == "2"
