"""Shared fixtures: small stores of every kind, dtype and chunking, written to disk."""

import os
import pty
import resource
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pytest

import bigsearch
from bigsearch import datasets
from bigsearch.storage import STORE_FORMATS, store_format
from bigsearch.testing import clustered_points, store_suite
from bigsearch.testing.forked_cli import close_forked_cli, shared_forked_cli
from bigsearch.testing.serve import ServerProcess
from bigsearch.testing.store_suite import DTYPES, read_all  # noqa: F401 (read_all: for the tests)

pytest_plugins = ["pytester"]   # tests/test_lanes.py runs pytest on small test files

FIXTURES = Path(__file__).resolve().parent / "fixtures"
# The project's copy of the public data sets beside a worktree (as in CI): the default mirror
# of `bigsearch datasets`. A clone without it skips the tests that need whole data sets.
SHARED = Path(__file__).resolve().parents[2] / "shared" / "datasets"
if SHARED.is_dir():
    os.environ.setdefault(datasets.MIRROR_ENV, str(SHARED))
KINDS = list(STORE_FORMATS)     # every store format: tests parametrized by kind run on each


def dataset_files(name, *files):
    """Paths of files of a public data set (bigsearch/datasets.py), fetched from the mirror
    into the cache on first use; skips the calling test when the data set cannot be had."""
    if not datasets.is_fetched(name):
        if not os.environ.get(datasets.MIRROR_ENV):
            pytest.skip(f"data set {name} is not here: run `bigsearch datasets fetch {name}` or set "
                        f"{datasets.MIRROR_ENV} to a mirror (CI: ../shared/datasets)")
        datasets.fetch(name)
    folder = datasets.path(name)
    return [folder / f for f in files]


def chunkings(n):
    """Chunk sizes the engine must be exact for: one row, a size not dividing n, all rows."""
    return [1, 7, n]


@pytest.fixture(scope="session")
def small_data():
    """80 points, 6 features, ~20% positives: small enough for brute-force references."""
    X, y = clustered_points(80, 6, prevalence=0.2, seed=11, spread=0.8)
    return X, y


@pytest.fixture(scope="session")
def client():
    """A dask Client on a real LocalCluster of two single-threaded worker processes, one for
    the whole run (the tests that use it are one xdist group, so one worker process starts it:
    its workers import bigsearch and load the kernels once, not once per module). A test that
    kills or stops workers starts a cluster of its own (test_distributed_loss.py's,
    test_pruning_distributed.py's), and so may a module whose workers need something set
    before they start (test_object_store.py's: the S3 server's address)."""
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster) as c:
        yield c


def tight_blocks(n, r, prevalence, seed):
    """Clustered points with rows sorted so that consecutive rows (blocks) are tight: what
    the pruned engines' bounds are tested on."""
    X, y = clustered_points(n, r, prevalence=prevalence, seed=seed, spread=0.5)
    order = np.lexsort((X[:, 1], X[:, 0]))
    return X[order], y[order]


def ask_in_step(pairs, y, queries):
    """Each (engine, reference) pair asked ``queries`` times in turn, told y's answer each
    time: their queries must be the same (a fork against its original's twin, say)."""
    for engine, ref in pairs:
        for _ in range(queries):
            i = engine.ask()
            assert i == ref.ask()
            engine.tell(i, int(y[i]))
            ref.tell(i, int(y[i]))


def store_path(folder, name, kind):
    """``folder/name`` with the suffix of store format ``kind`` (.zarr, .h5, ...)."""
    return folder / f"{name}{store_format(kind).suffixes[0]}"


def write_store(tmp_path, X, y=None, kind="zarr", dtype="float32", chunk_rows=7, name="s"):
    path = store_path(tmp_path, name, kind)
    bigsearch.create_store(path, X, y, dtype=dtype, chunk_rows=chunk_rows, kind=kind)
    return path


@pytest.fixture
def store_factory(tmp_path):
    counter = iter(range(10**6))

    def make(X, y=None, kind="zarr", dtype="float32", chunk_rows=7):
        return write_store(tmp_path, X, y, kind, dtype, chunk_rows, name=f"s{next(counter)}")
    return make


@pytest.fixture
def passes(monkeypatch):
    """Every pass over X that the local backend makes from now on, as Pass records: the
    real backend, its ``map`` only recorded (counted, not timed)."""
    from bigsearch.backends.local import LocalBackend

    seen = []
    real = LocalBackend.map

    def recorded(self, step, *args):
        seen.append(Pass(str(self.store.path), step.run.__name__, rebuilds_J(step, args)))
        return real(self, step, *args)
    monkeypatch.setattr(LocalBackend, "map", recorded)
    return seen


class Pass(NamedTuple):
    store: str          # the store's path
    step: str           # the step's function
    rebuilds_J: bool    # LAS's J from K^-1: an n r^2 pass


def rebuilds_J(step, args):
    """Whether a pass is LAS's rescore with K^-1 given (J recomputed from it)."""
    from bigsearch.engine.core.steps import LAS_REFRESH, LAS_RESCORE

    return step in (LAS_RESCORE, LAS_REFRESH) and args[3] is not None


def run_queries(search, y, steps):
    """Ask and answer from the stored labels ``steps`` times; the queries in order."""
    out = []
    for _ in range(steps):
        i = search.ask()
        out.append(i)
        search.tell(i, int(y[i]))
    return out


# The CLI's warnings off; a crash (SIGSEGV, SIGABRT: a native library's thread at exit) prints
# every thread's Python stack to the captured stderr, so a rare one can be traced.
QUIET_AND_TRACED = {"PYTHONWARNINGS": "ignore", "PYTHONFAULTHANDLER": "1"}


def run_cli(*args, cwd=None, timeout=300, env=None, prefix=(), address_space=None):
    """The real `bigsearch` command in a process of its own; returns CompletedProcess. ``env``:
    variables to set (a value None removes one); ``prefix``: a command that runs it
    (e.g. WITHOUT_FILE_PERMISSION_OVERRIDE); ``address_space``: its limit of virtual memory
    in bytes. Forked from a process with the libraries imported (bigsearch/testing/forked_cli.py)
    unless a prefix, a variable read at import, another command running or BIGSEARCH_TEST_FORK=0
    asks for `python -m bigsearch` from scratch."""
    env = {k: v for k, v in {**os.environ, **QUIET_AND_TRACED, **(env or {})}.items() if v is not None}
    args = [str(a) for a in args]
    forked = None if prefix else forked_cli(env)
    done = forked.run(args, cwd or os.getcwd(), env, timeout, address_space) if forked else None
    if done is not None:
        return done
    limit = (lambda: resource.setrlimit(resource.RLIMIT_AS, (address_space,) * 2)) if address_space else None
    return subprocess.run([*prefix, sys.executable, "-m", "bigsearch", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=timeout, env=env, preexec_fn=limit)


def server_process(directory, *args, **kw):
    """`bigsearch serve` (bigsearch/testing/serve.py), forked as run_cli's commands are where
    it can be, with the environment they have."""
    env = {**os.environ, **QUIET_AND_TRACED}
    return ServerProcess(directory, *args, env=env, forked=forked_cli(env), **kw)


_STARTING_ENV = {**os.environ, **QUIET_AND_TRACED}  # before any test sets a variable


def forked_cli(env):
    """This test process's ForkedCli; None where ``env`` needs a fresh start."""
    if os.environ.get("BIGSEARCH_TEST_FORK", "1") == "0":
        return None
    forking = shared_forked_cli(_STARTING_ENV)
    return forking if forking.can_run(env) else None


def pytest_unconfigure(config):
    close_forked_cli()


def without_file_permission_override():
    """A command prefix under which file modes hold even for root (CI runs as root): the
    capabilities that let root read and write any file are dropped from the bounding set,
    so the command runs as root but is refused what its modes refuse. () when not root."""
    if os.geteuid() != 0:
        return ()
    prefix = ("setpriv", "--bounding-set=-dac_override,-dac_read_search", "--")
    if shutil.which("setpriv") is None or subprocess.run([*prefix, "true"]).returncode != 0:
        pytest.skip("running as root, and cannot drop root's file-permission override (setpriv, util-linux)")
    return prefix


def run_on_a_terminal(*args, cwd=None, env=None):
    """The real command with stderr a terminal (a pty), as a person runs it: returns the
    CompletedProcess (stdout captured) and what the terminal showed. ``env``: variables to set."""
    master, slave = pty.openpty()
    chunks = []

    def read():
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:
                return
            if not data:
                return
            chunks.append(data)
    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    env = {**os.environ, "PYTHONWARNINGS": "ignore", "COLUMNS": "120", **(env or {})}
    try:
        res = subprocess.run([sys.executable, "-m", "bigsearch", *map(str, args)], stdout=subprocess.PIPE,
                             stderr=slave, text=True, timeout=300, env=env, cwd=cwd)
    finally:
        os.close(slave)
        reader.join(timeout=10)
        os.close(master)
    return res, b"".join(chunks).decode(errors="replace")


# -- test lanes ---------------------------------------------------------------------------
# Markers applied from what a test uses (docs/contributing.md, "Test lanes"); each of them also
# marks it `slow`, so `pytest -m "not slow"` is the quick lane. By the fixtures a test asks for,
# the names its own code calls, or its module (where every test in it does so through helpers).
USES = {
    "cli": {"fixtures": {"client_for"}, "names": {"run_cli", "run_on_a_terminal", "subprocess", "ServerProcess"},
            "modules": {"test_cli_run", "test_cli_startup", "test_cli_practical", "test_quickstart",
                        "test_readme", "test_session_cli", "test_hardening", "test_kernel_cache",
                        "test_ingest_errors", "test_make_store"}},
    "cluster": {"fixtures": {"client", "cluster", "tls_cluster"}, "names": {"LocalCluster"},
                "modules": {"test_hardening_cluster", "test_ingest_cluster"}},
    "browser": {"fixtures": {"browser", "servers"}, "modules": {"test_serve_browser"}},
    "s3": {"fixtures": {"s3", "iam_s3"}, "names": {"S3Server"}},
    "kills": {"names": {"SIGKILL", "kill", "kill_worker"},
              "modules": {"test_hardening_kills", "test_distributed_loss", "test_session_crash"}},
    "large": {"fixtures": {"adult_store"}, "names": {"adult"}, "modules": {"test_out_of_core"}},   # adult: 48k rows
}
# Cases that leave the quick lane though they use nothing slow: {why: (the case's parameters ->
# whether it is one, the tests whose cases they are)}. Their siblings stay in the quick lane.
SLOW_CASES = {
    # a pass per row over hundreds of rows, each 10-25 s on 2 loaded cores
    "one-row chunks": (lambda params: params.get("chunk_rows") == 1,
                       {"test_f_and_impact_match_brute_force", "test_query_sequences_match_dense",
                        "test_pruned_queries_and_scores_are_the_full_pass", "test_pruned_wnas_is_the_full_pass",
                        "test_query_is_argmax_with_duplicate_points"}),
    # searches over stores of coded encodings: each compiles every pass kernel once more per
    # encoding (about a third of the quick lane's compiling in a fresh clone); the kernels on
    # codes stay in it (test_encodings.py's code-kernel and lookup-table tests)
    "coded encodings": (lambda params: params.get("encoding") in ("float16", "int8", "binary"),
                        {"test_f_and_impact_match_brute_force", "test_query_sequences_match_dense",
                         "test_batch_of_labels_matches_brute_force", "test_batch_at_alpha_zero_defers_J",
                         "test_encoded_stores", "test_encoded_stores_prune_to_the_full_pass"}),
}


def slow_case(item):
    """Whether ``item`` is a case of a test in SLOW_CASES that its rule picks."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    name = getattr(item, "originalname", "")
    return any(name in tests and picks(params) for picks, tests in SLOW_CASES.values())


# Under pytest-xdist (`-n 3 --dist loadgroup`: docs/contributing.md) the tests that start worker
# processes, a browser or kill processes, and time what they kill, run one at a time, on one
# worker: two at once would race for the 2 cores they were written for. The browser's tests (a
# page waited on, no worker processes, nothing timed) are a group of their own beside them: in
# one group they bounded the suite's wall time. Every quick test is in its module's group: a
# module's tests call the same kernels, and dealt out one by one they had every worker compile
# them at once in a fresh clone (the quick lane compiled 77 kernel variants twice: 59 s of its
# 124 s of compiling; by module it took 132 s where it took 152-163 s). The slow ones (commands,
# servers: seconds each) are dealt out one by one, so that no module's run is the suite's tail.
ONE_AT_A_TIME = {"cluster", "browser", "kills"}


def xdist_group(used):
    return "browser" if ONE_AT_A_TIME.intersection(used) == {"browser"} else "one_at_a_time"


def module_name(item):
    return item.module.__name__.rpartition(".")[2] if getattr(item, "module", None) else ""


class Lanes:
    """Marks each collected test with the USES markers that apply to it, and `slow` with them;
    those in ONE_AT_A_TIME also join an xdist group (``xdist_group``)."""

    @staticmethod
    def uses(item):
        fixtures = set(getattr(item, "fixturenames", ()))
        names = set(getattr(getattr(getattr(item, "function", None), "__code__", None), "co_names", ()))
        module = module_name(item)
        return [marker for marker, how in USES.items()
                if fixtures & how.get("fixtures", set()) or names & how.get("names", set())
                or module in how.get("modules", set())]

    def pytest_collection_modifyitems(self, config, items):
        for item in items:
            used = self.uses(item)
            for marker in used:
                item.add_marker(marker)
            slow = used or slow_case(item)
            if slow:
                item.add_marker("slow")
            if ONE_AT_A_TIME.intersection(used):
                item.add_marker(pytest.mark.xdist_group(xdist_group(used)))
            elif not slow and module_name(item):
                item.add_marker(pytest.mark.xdist_group(module_name(item)))


def compile_bytecode(config):
    """bigsearch's sources compiled to bytecode once, before any test (what .ci/run does): where
    PYTHONDONTWRITEBYTECODE is set (container images), each of the suite's CLI subprocesses
    would otherwise compile them again (0.16 s of CPU each, measured). In the controlling
    process only (xdist's workers start after it); up-to-date files are left as they are."""
    if hasattr(config, "workerinput"):
        return
    import compileall

    compileall.compile_dir(Path(bigsearch.__file__).parent, quiet=1)


def pytest_configure(config):
    compile_bytecode(config)
    for marker in USES:
        config.addinivalue_line("markers", f"{marker}: applied by tests/conftest.py (USES); implies slow")
    config.addinivalue_line("markers", "xdist_group(name): pytest-xdist's, given by tests/conftest.py (ONE_AT_A_TIME)")
    config.pluginmanager.register(Lanes(), "lanes")
    config.pluginmanager.register(SkipsFailOnCI(), "skips_fail_on_ci")


class SkipsFailOnCI:
    """When the environment variable CI is set (.ci/run sets it), a skipped test fails: CI is
    meant to run every test, so a skip there hides a check (Chromium missing, a data set not
    mirrored). Except the skips whose reason starts with one of ACCEPTABLE."""

    ACCEPTABLE = (
        "this system offers no transparent huge pages",   # a kernel option, not ours to install
        store_suite.LACKS,    # a case of the store suite that does not apply, by the store's declaration
    )

    @staticmethod
    def without_data():
        """The public data sets' skips, acceptable only where no mirror of them exists at all
        (a user's clone, with no ../shared beside it): where one is given, they must run."""
        if os.environ.get(datasets.MIRROR_ENV) or SHARED.is_dir():
            return ()
        return ("data set ", "no mirror of the public data sets")

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        self.fail_unless_acceptable(outcome.get_result())

    @pytest.hookimpl(hookwrapper=True)
    def pytest_make_collect_report(self, collector):
        """A whole module skipped (pytest.importorskip at its top) counts too."""
        outcome = yield
        self.fail_unless_acceptable(outcome.get_result())

    def fail_unless_acceptable(self, report):
        if not (os.environ.get("CI") and report.skipped and not hasattr(report, "wasxfail")):
            return
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        reason = reason.removeprefix("Skipped: ")
        if not reason.startswith(self.ACCEPTABLE + self.without_data()):
            report.outcome = "failed"
            report.longrepr = (f"skipped on CI (CI={os.environ['CI']}): {reason}\n"
                               "CI must run this test: give it what it needs, or add the reason to "
                               "SkipsFailOnCI.ACCEPTABLE in tests/conftest.py with why")
