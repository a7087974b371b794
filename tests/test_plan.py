"""An experiment is resolved once, into a frozen plan: every check before any store is
opened (the store's own in one step after), each made once however many runs there are;
the CLI, sessions and simulate plan alike (experiments/plan.py, the registry's
plan_methods)."""

import dataclasses
import inspect
import json

import numpy as np
import pytest

import bigsearch
from bigsearch import simulate
from bigsearch.cli.run import experiment_from_flags, run
from bigsearch.engine import METHODS, MethodSpec
from bigsearch.engine.core.params import WNASOptions
from bigsearch.engine.core.registry import plan_methods
from bigsearch.errors import ExperimentExistsError, LabelError, ParameterError, SessionExistsError
from bigsearch.experiments import Experiment, plan_runs, run_experiment, run_methods
from bigsearch.experiments.plan import Start
from bigsearch.session.session import plan_session
from bigsearch.testing import clustered_points

from conftest import run_cli


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    X, y = clustered_points(400, 6, prevalence=0.05, seed=8, spread=0.8)
    return str(bigsearch.create_store(tmp_path_factory.mktemp("plan") / "s.zarr", X, y, chunk_rows=90))


# Each experiment that cannot run, and what it is told: in the library's words (the CLI's below).
REFUSED = [
    (dict(runs=0), "runs must be >= 1, got 0"),
    (dict(budget=-1), "budget must be >= 0, got -1"),
    (dict(batch_size=0), "batch_size must be >= 1, got 0"),
    (dict(init_index=[1, 2], runs=2), "init_index gives every run the same start.*use init_positives"),
    (dict(init_index=[1], start_from="ids:1"), "give init_index or start_from, not both"),
    (dict(start_from="ids:1", runs=2), "start_from gives every run the same start.*give runs=1"),
    (dict(alpha=-1), "alpha = -1.0 is outside its range"),
    (dict(anchors=0), "anchors must be >= 1, got 0"),
    (dict(fantasy=0.5), "fantasy chooses the points of each batch: it needs batch_size > 1"),
    (dict(graded=("scores.npy", "raw", 1.0)), "regression targets, which none of las, agr takes"),
    (dict(methods=["las", "nope"]), "unknown method 'nope'; choose from las, wnas"),
]


@pytest.mark.parametrize("settings, message", REFUSED, ids=[m.split(",")[0][:40] for _, m in REFUSED])
def test_an_experiment_that_cannot_run_is_refused_before_its_store_is_opened(tmp_path, settings, message):
    """The store does not exist: each error is the experiment's own, and nothing is written."""
    settings = {"methods": ["las", "agr"], "budget": 5, **settings}
    missing, out = str(tmp_path / "nowhere.zarr"), tmp_path / "out"
    with pytest.raises(ParameterError, match=message):
        run_methods(missing, out=out, **settings)
    with pytest.raises(ParameterError, match=message):
        Experiment.of(missing, **settings)
    assert not out.exists()


def test_the_cli_says_the_same_refusals_with_its_flags(tmp_path):
    missing = tmp_path / "nowhere.zarr"
    for flags, error in (
        (["--fantasy", 0.5], "Error: --fantasy chooses the points of each batch: it needs --batch-size > 1\n"),
        (
            ["--agr-anchors", 2],
            "Error: AGR needs 1 <= --agr-neighbors <= --agr-anchors, got --agr-neighbors=3 and --agr-anchors=2\n",
        ),
        (
            ["--runs", 2, "--start-from", "ids:1"],
            "Error: --start-from gives every run the same start, so several "
            "runs would repeat each other; give runs=1\n",
        ),
    ):
        res = run_cli("run", missing, "--method", "las,agr", "--budget", 5, "--out", tmp_path / "o", *flags)
        assert res.returncode == 2 and res.stderr == error, res.stderr
    assert not (tmp_path / "o").exists()


def test_simulate_and_sessions_refuse_before_the_store_is_opened(tmp_path, store):
    missing = str(tmp_path / "nowhere.zarr")
    for kwargs, message in (
        (dict(batch_size=0), "batch_size must be >= 1"),
        (dict(alpha=-1), "alpha = -1.0 is outside"),
        (dict(y=np.ones(5)), "y= gives the labels of X passed as an array"),
    ):
        with pytest.raises(ParameterError, match=message):
            simulate(missing, "las", 5, **kwargs)
    with pytest.raises(ParameterError, match="alpha does not apply to wnas, which takes prune, block_rows"):
        bigsearch.Session.create(missing, tmp_path / "s", method="wnas", alpha=0.1)
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("")
    with pytest.raises(SessionExistsError, match="already exists and is not empty"):
        bigsearch.Session.create(missing, tmp_path / "full")
    assert not (tmp_path / "s").exists()


def test_what_needs_the_store_is_checked_in_one_step_before_anything_is_written(tmp_path, store):
    """ExperimentPlan.on_store: the store's labels, the starts, the budget against its size."""
    out = tmp_path / "o"
    for settings, error, message in (
        (dict(budget=400), ParameterError, "budget 400 is more than the 399 points left.*at most 399"),
        (dict(budget=5, init_index=[4000]), LabelError, "init_index 4000 is out of range"),
        (dict(budget=5, init_positives=400), ParameterError, "asked for 400 initial positives"),
        (dict(budget=5, methods=["agr"], anchors=401), ParameterError, "anchors <= n = 400"),
    ):
        exp = Experiment.of(store, settings.pop("methods", ["las"]), **settings)
        with bigsearch.open_store(store) as opened, pytest.raises(error, match=message):
            exp.plan.on_store(opened)
        with pytest.raises(error, match=message):
            run_experiment(exp, out, plot=False)
        assert not out.exists()


class CountedOptions(WNASOptions):
    """WNAS's options record, counting how often one is made (the real record: the count is
    of checks, not of a stand-in)."""

    made = 0

    def __post_init__(self):
        super().__post_init__()
        CountedOptions.made += 1


def test_an_experiment_is_checked_once_however_many_runs(store, tmp_path, monkeypatch):
    """Its options record is made once, when it is planned: not again at the store, per run
    or for the warm-up (eight times for three runs before the plan)."""
    monkeypatch.setitem(
        METHODS, "counted", MethodSpec("counted", "bigsearch.engine.methods.wnas:WNAS", "WNAS", options=CountedOptions)
    )
    monkeypatch.setattr(CountedOptions, "made", 0)
    exp = Experiment(store, ("counted", "las"), 4, runs=3, options={"prune": True})
    assert CountedOptions.made == 1
    results, _ = run_experiment(exp, tmp_path / "o", plot=False)
    assert CountedOptions.made == 1 and len(results["runs"]) == 6
    simulate(store, "counted", 4, prune=True)
    assert CountedOptions.made == 2


def cli_experiment(*args):
    """The Experiment `bigsearch run ARGS` runs: ARGS parsed by the command's own options and
    given to the function the command plans with (what the command keeps for itself left out:
    where the results go, the cluster, the object-store settings its wrapper takes)."""
    params = run.make_context("run", [str(a) for a in args]).params
    own = set(inspect.signature(inspect.unwrap(run.callback)).parameters) | {
        "storage_option",
        "cache_dir",
        "cache_size",
    }
    flags = {k: v for k, v in params.items() if k not in own}
    return experiment_from_flags(params["store"], params["methods"], params["budget"], **flags)


def test_the_cli_a_session_and_simulate_build_the_same_plan(store, tmp_path):
    cli = cli_experiment(store, "--method", "las", "--budget", 6, "--seed", 2, "--alpha", 0.1, "--prune", "--out", "o")
    # simulate(store, "las", 6, seed=2, alpha=0.1, prune=True) plans so:
    simulated = plan_runs(store, ("las",), 6, options={"alpha": 0.1, "prune": True}, seed=2, start=Start(None))
    assert cli.plan == simulated
    session = plan_session("las", {"alpha": 0.1, "prune": True}, tmp_path / "s")
    assert session.method == cli.plan.methods[0] == simulated.methods[0]
    assert session.method.options.alpha == 0.1 and session.method.options.prune is True
    # and they run alike: the command, simulate and a session build the same search
    res = run_cli(
        "run",
        store,
        "--method",
        "las",
        "--budget",
        6,
        "--seed",
        2,
        "--alpha",
        0.1,
        "--prune",
        "--out",
        tmp_path / "o",
        "-q",
        "--no-plots",
    )
    assert res.returncode == 0, res.stderr
    (ran,) = json.loads((tmp_path / "o" / "results.json").read_text())["runs"]
    record = simulate(store, "las", 6, seed=2, alpha=0.1, prune=True)
    assert {k: ran[k] for k in ("params", "init", "queries", "ranking")} == {
        k: record[k] for k in ("params", "init", "queries", "ranking")
    }
    with bigsearch.Session.create(store, tmp_path / "s", method="las", alpha=0.1, prune=True) as s:
        assert s.info["params"] == record["params"] and s.info["engine"]["prune"]


def test_a_plan_is_immutable(store, tmp_path):
    plan = Experiment(store, ("las", "agr"), 5, options={"alpha": 0.1}).plan
    assert isinstance(plan.methods, tuple)
    with bigsearch.open_store(store) as opened:
        on_store = plan.on_store(opened)
    assert isinstance(on_store.initial, tuple) and on_store.methods[1].options.anchors == 40  # AGR: n / 10
    frozen = [
        (plan, "budget", 9),
        (plan.methods[0], "options", None),
        (plan.methods[0].options, "alpha", 1.0),
        (plan.start, "positives", 3),
        (on_store, "methods", ()),
        (plan_session("las", {}, tmp_path / "s"), "checkpoint_every", 1),
    ]
    for record, name, value in frozen:
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(record, name, value)
    assert plan.methods[0].options.alpha == 0.1 and plan.budget == 5
    # a run-level change is a new plan, checked as the first was
    with pytest.raises(ParameterError, match="budget must be >= 0"):
        Experiment(store, ("las",), -5)


def test_a_resumed_experiment_keeps_its_identity(store, tmp_path):
    """The plan changes nothing an experiment's identity records: a run of the same
    experiment continues it, a changed option is another experiment."""
    run_methods(store, ["las", "random"], 4, tmp_path / "o", runs=2, alpha=0.01, plot=False)
    identity = json.loads((tmp_path / "o" / "experiment.json").read_text())
    assert identity["options"] == {"las": {"alpha": 0.01}, "random": {}}
    results, _ = run_methods(store, ["las", "random"], 4, tmp_path / "o", runs=2, alpha=0.01, plot=False)
    assert len(results["runs"]) == 4
    with pytest.raises(ExperimentExistsError, match="options.las.alpha 0.01 there, 0.02 here"):
        run_methods(store, ["las"], 4, tmp_path / "o", alpha=0.02, plot=False)
    assert plan_methods(["random"], {}, seed=3)[0].for_seed(5).options.seed == 5
