"""What a newcomer met in the first week (issue 25, items 14 and 17): through the real
command in a subprocess."""

import os
import re

import numpy as np
import pytest

import bigsearch
from bigsearch.testing import clustered_points

from conftest import FIXTURES, run_cli


@pytest.fixture
def labeled(tmp_path):
    X, y = clustered_points(300, 8, prevalence=0.1, seed=4, spread=0.8)
    return bigsearch.create_store(tmp_path / "s.zarr", X, y, chunk_rows=40), y


def one_line_error(done):
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), done.stderr
    return lines[0]


def test_a_budget_of_zero_is_refused(labeled, tmp_path):
    store, _ = labeled
    message = one_line_error(run_cli("run", store, "--budget", 0, "--out", tmp_path / "r"))
    assert message == "Error: --budget 0: a run asks at least one query; give the number of queries, e.g. --budget 100"
    assert not (tmp_path / "r").exists()


def test_results_tables_at_the_checkpoints_asked_for_and_internal_lines_only_with_verbose(labeled, tmp_path):
    store, _ = labeled
    out = tmp_path / "r"
    done = run_cli("run", store, "--budget", 8, "--out", out, "--checkpoints", "2,4,8", "--prune", "--no-plots")
    assert done.returncode == 0, done.stderr
    header = "| method | 2 queries | 4 queries | 8 queries |"
    assert header in done.stdout and (out / "table.md").read_text().startswith(header)
    assert "pruning" not in done.stderr and "read per round" not in done.stderr
    verbose = run_cli("run", store, "--budget", 8, "--out", out, "--prune", "-v", "--no-plots")
    assert verbose.returncode == 0, verbose.stderr
    assert "las: pruning on" in verbose.stderr and "X read per round" in verbose.stderr
    assert "| method | 4 queries | 8 queries |" in verbose.stdout  # the default: T/2 and T
    message = one_line_error(run_cli("run", store, "--budget", 8, "--out", out, "--checkpoints", "4,9"))
    assert message == "Error: --checkpoints 4,9: give query counts from 1 to the budget (8)"


def test_a_small_input_says_its_size_not_zero_megabytes_per_second(tmp_path):
    done = run_cli(
        "ingest", FIXTURES / "adult_head300.data", tmp_path / "a.zarr", "--label-column", 14, "--positive", ">50K"
    )
    assert done.returncode == 0, done.stderr
    # no rate of zero (the per-stage rates may well read "30.0 MB/s": a standalone zero only)
    assert not re.search(r"(?<![\d.])0(\.0+)? [kMG]?B/s", done.stderr), done.stderr
    assert "s, 37 kB of input" in done.stderr


def test_a_bad_start_id_names_the_flag(labeled, tmp_path):
    store, _ = labeled
    for command in (
        ["session", "new", store, tmp_path / "s", "--pi", 0.1],
        ["run", store, "--budget", 3, "--out", tmp_path / "r"],
    ):
        message = one_line_error(run_cli(*command, "--start-from", "ids:nope"))
        assert message.startswith("Error: --start-from ids: 'nope' is not a row index"), message


def test_the_demo_says_it_compiles_on_its_first_run_only(tmp_path):
    cache = tmp_path / "numba-cache"
    # numba's default optimization: at NUMBA_OPT=0 the kernels keep references numba cannot
    # cache (dynamic globals), so the second run compiled again, unsaid (13 s)
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache)}
    args = ("demo", "--dir", tmp_path / "d", "--n", 2000, "--budget", 3)
    first = run_cli(*args, env=env)
    assert first.returncode == 0, first.stderr
    assert first.stderr.startswith("writing") and "compiling kernels (first run only, ~25 s)..." in first.stderr
    again = run_cli(*args, env=env)
    assert again.returncode == 0 and "compiling" not in again.stderr, again.stderr


def test_without_matplotlib_the_run_says_no_figure_was_written(labeled, tmp_path):
    store, _ = labeled
    fake = tmp_path / "site" / "matplotlib"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('matplotlib is not installed')\n")
    env = {**os.environ, "PYTHONPATH": f"{fake.parent}{os.pathsep}{os.getcwd()}"}
    done = run_cli("run", store, "--budget", 3, "--out", tmp_path / "r", env=env)
    assert done.returncode == 0, done.stderr
    assert (
        "recall.png, .pdf and .svg not written: plotting needs matplotlib: pip install 'bigsearch[plots]'"
        in done.stderr
    )
    assert not (tmp_path / "r" / "recall.png").exists()


def test_the_ideal_line_is_drawn_above_the_methods():
    pytest.importorskip("matplotlib")
    from bigsearch.experiments.plots import recall_figure

    t = list(range(1, 11))
    curves = {
        "queries": t,
        "ideal": t,
        "random": [0.1 * k for k in t],
        "methods": {"las": {"mean": t, "std": [0] * 10, "runs": 1}},
    }
    fig = recall_figure(curves)
    lines = {line.get_label(): line for line in fig.axes[0].get_lines()}
    assert lines["ideal"].get_zorder() > lines["las (1 run)"].get_zorder()
    np.testing.assert_array_equal(lines["ideal"].get_ydata(), lines["las (1 run)"].get_ydata())
