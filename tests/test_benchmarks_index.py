"""benchmarks/README.md is the index of benchmarks/: every script is in it and every script it
names exists; every script's imports resolve as `python benchmarks/X.py` runs it; and the
harness of benchmarks/common.py measures in a fresh process and writes its JSON with the
idle check, the load and lscpu's model name."""

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
INDEX = BENCHMARKS / "README.md"
ROW = re.compile(r"^\| `([^`]+\.py)` \|", re.MULTILINE)  # a table row naming a script in its first cell


def scripts():
    """The .py files committed under benchmarks/, relative to it (git ls-files: work in progress
    that is not yet added does not count; every file below it outside a git checkout)."""
    listed = subprocess.run(["git", "ls-files", "-z", "--", "*.py"], cwd=BENCHMARKS, capture_output=True, text=True)
    if listed.returncode == 0:
        return sorted(p for p in listed.stdout.split("\0") if p and (BENCHMARKS / p).exists())
    return sorted(p.relative_to(BENCHMARKS).as_posix() for p in BENCHMARKS.rglob("*.py"))


def indexed():
    return ROW.findall(INDEX.read_text())


def test_every_script_is_in_the_index():
    missing = sorted(set(scripts()) - set(indexed()))
    assert not missing, f"benchmarks/README.md has no row for {missing}: add one (see its Index)"


def test_every_script_the_index_names_exists():
    gone = sorted(p for p in indexed() if not (BENCHMARKS / p).is_file())
    assert not gone, f"benchmarks/README.md names scripts that are not there: {gone}"


def test_explorations_are_listed_apart():
    rows = indexed()
    explorations = [p for p in scripts() if p.startswith("explorations/")]
    section = INDEX.read_text().split("## Explorations", 1)[-1]
    assert all(f"`{p}`" in section for p in explorations), "each exploration has its line under ## Explorations"
    assert len(rows) == len(set(rows)), "a script has one row"


# Each script's top level (its imports, by the paths it sets up itself) in one fresh process,
# as `python benchmarks/X.py` would run it: sys.path[0] its own folder, and no module of
# benchmarks/ left over from the script before (ruff's import order once put `from common`
# before the `from harness` that puts benchmarks/ on sys.path, in three scale scripts).
IMPORT_CHECK = r"""
import runpy, sys
from pathlib import Path
bench, base, failures = Path(sys.argv[1]), list(sys.path[1:]), []
for script in sys.argv[2:]:
    path = bench / script
    for name, module in list(sys.modules.items()):
        where = str(getattr(module, "__file__", None) or "")
        if name.partition(".")[0] == "benchmarks" or where.startswith(str(bench)):
            del sys.modules[name]
    sys.path[:] = [str(path.parent), *base]
    try:
        runpy.run_path(str(path), run_name="__import_check__")  # not "__main__": nothing runs
    except BaseException as e:
        failures.append(f"{script}: {type(e).__name__}: {e}")
print("\n".join(failures))
"""


def test_every_script_imports_from_its_own_folder(tmp_path):
    """... and fetches nothing there: a data set fetched at import fails on a machine whose
    cache is empty and that has no mirror (a fresh clone's CI), whatever this machine's cache holds."""
    fetched = tmp_path / "datasets"
    fetched.mkdir()
    env = {**os.environ, "BIGSEARCH_BENCH_DATA": str(tmp_path), "BIGSEARCH_DATA_DIR": str(fetched)}
    done = subprocess.run(
        [sys.executable, "-c", IMPORT_CHECK, str(BENCHMARKS), *scripts()],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert not done.stdout.strip(), f"scripts whose imports fail:\n{done.stdout}"
    assert not any(fetched.iterdir()), f"data sets fetched at import: {sorted(p.name for p in fetched.iterdir())}"


@pytest.fixture
def common(tmp_path, monkeypatch):
    """benchmarks/common.py, its results going to tmp_path."""
    spec = importlib.util.spec_from_file_location("benchmarks_common_under_test", BENCHMARKS / "common.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(module, "RESULTS", tmp_path)
    return module


WORKER = r"""
import os, sys
from common import interleave, report
rounds = int(sys.argv[1])
times = interleave({"small": lambda: sum(range(1000)), "large": lambda: sum(range(100000))}, rounds)
print("a line before the result passes through")
report({"pid": os.getpid(), "times": times, "argv": sys.argv[1:]})
"""


def test_the_harness_measures_in_a_fresh_process_and_writes_the_host(common, tmp_path, capsys):
    check = common.preflight()  # on any load: it records and flags, it does not refuse
    assert isinstance(check["idle"], bool) and len(check["load"]) == 3
    assert check["idle"] == (check["load"][0] < common.LOADED and not check["busy_processes"])
    out = common.run_fresh(WORKER, 3)
    assert out["pid"] != os.getpid() and out["argv"] == ["3"] and out["worker_seconds"] > 0
    assert [len(out["times"][v]) for v in ("small", "large")] == [3, 3]
    assert all(t >= 0 for v in out["times"].values() for t in v)
    assert "a line before the result passes through" in capsys.readouterr().out
    common.save("smoke", {"measured": out})
    record = json.loads((tmp_path / "smoke.json").read_text())
    assert record["benchmark"] == "smoke" and record["measured"]["times"] == out["times"]
    assert record["machine"]["cpu"] == common.cpu_model() and common.cpu_model() not in ("", "?")
    assert record["machine"]["cpus"] == os.cpu_count()
    assert record["idle_before"]["load"] == check["load"] and "busy_processes" in record["idle_before"]
    assert record["load_average"]["first"] >= 0 and record["load_average"]["limit"] == common.LOADED


def test_a_failing_worker_raises(common):
    with pytest.raises(RuntimeError, match="failed with status 3"):
        common.run_fresh("raise SystemExit(3)")
    with pytest.raises(RuntimeError, match="no JSON object"):
        common.run_fresh("print('done')")


def test_interleave_times_every_variant_once_a_round(common):
    order = []
    times = common.interleave({"a": lambda: order.append("a"), "b": lambda: order.append("b")}, 3)
    assert order == ["a", "b"] * 3 and [len(times["a"]), len(times["b"])] == [3, 3]


def test_back_to_back_calls_follow_each_other_and_split_into_first_and_warm(common):
    order, clock = [], iter(range(100))
    times = common.interleave(
        {"a": lambda: order.append("a"), "b": lambda: order.append("b")},
        2,
        back_to_back=3,
        clock=lambda: next(clock),
    )
    assert order == ["a"] * 3 + ["b"] * 3 + ["a"] * 3 + ["b"] * 3
    assert times["a"] == [1, 1, 1, 1, 1, 1]  # every call timed by itself
    first, warm = common.first_and_warm([10, 11, 12, 20, 21, 22], 3)
    assert first == [10, 20] and warm == [11, 12, 21, 22]
