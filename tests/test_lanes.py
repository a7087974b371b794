"""The test lanes of tests/conftest.py: markers from what a test uses, and skips that fail on CI."""

import pytest

from conftest import Lanes, SkipsFailOnCI

SKIPPING = """
import pytest

def test_needs_a_tool():
    pytest.skip("the tool is not installed")

@pytest.mark.skipif(True, reason="this system offers no transparent huge pages")
def test_needs_huge_pages():
    pass

@pytest.mark.xfail(reason="a known bug")
def test_known_bug():
    assert False

def test_runs():
    pass
"""

MODULE_SKIPPED = """
import pytest

pytest.importorskip("no_such_module_here")

def test_never_collected():
    pass
"""


@pytest.mark.parametrize("ci", [None, "true"])
def test_a_skip_fails_on_ci_unless_its_reason_is_acceptable(pytester, monkeypatch, ci):
    if ci:
        monkeypatch.setenv("CI", ci)
    else:
        monkeypatch.delenv("CI", raising=False)
    pytester.makepyfile(test_skipping=SKIPPING, test_module_skipped=MODULE_SKIPPED)
    result = pytester.runpytest("-p", "no:randomly", "--continue-on-collection-errors", plugins=[SkipsFailOnCI()])
    if ci:
        result.assert_outcomes(passed=1, failed=1, skipped=1, xfailed=1, errors=1)
        result.stdout.fnmatch_lines(["*skipped on CI (CI=true): the tool is not installed*",
                                     "*skipped on CI (CI=true): could not import 'no_such_module_here'*"])
    else:
        result.assert_outcomes(passed=1, skipped=3, xfailed=1)


USING = """
import subprocess
import pytest

@pytest.fixture
def client():
    yield "a cluster's client"

@pytest.fixture
def browser():
    yield "a browser"

def test_runs_the_cli():
    subprocess.run(["true"])

def test_on_a_cluster(client):
    pass

def test_plain():
    pass

def test_on_a_page(browser):
    pass
"""


@pytest.mark.parametrize("lane,passed", [("not slow", ["test_plain"]), ("cluster", ["test_on_a_cluster"]),
                                         ("cli", ["test_runs_the_cli"])])
def test_markers_follow_what_a_test_uses(pytester, lane, passed):
    pytester.makepyfile(test_using=USING)
    result = pytester.runpytest("-p", "no:randomly", "-v", "-m", lane, plugins=[Lanes()])
    result.assert_outcomes(passed=len(passed), deselected=4 - len(passed))
    result.stdout.fnmatch_lines([f"*::{name} PASSED*" for name in passed])


CASES = """
import pytest

@pytest.mark.parametrize("encoding", ["float32", "int8"])
def test_encoded_stores(encoding):
    pass

@pytest.mark.parametrize("encoding", ["float32", "int8"])
def test_a_round_trip(encoding):
    pass
"""


def test_searches_over_coded_encodings_leave_the_quick_lane(pytester):
    """SLOW_CASES: the int8 case of a search test is slow, its float32 case and the cases of
    tests the rule does not name stay quick."""
    pytester.makepyfile(test_cases=CASES)
    result = pytester.runpytest("-p", "no:randomly", "-v", "-m", "not slow", plugins=[Lanes()])
    result.assert_outcomes(passed=3, deselected=1)
    result.stdout.fnmatch_lines(["*::test_encoded_stores[[]float32[]] PASSED*"])
    result.stdout.no_fnmatch_line("*::test_encoded_stores[[]int8[]]*")


def test_cluster_and_browser_tests_form_xdist_groups(pytester):
    """ONE_AT_A_TIME: under `--dist loadgroup` the cluster test runs in the one group, the
    browser's in its own, the other quick ones in their module's (its kernels compiled by one
    worker), the other slow ones anywhere."""

    class Collected:
        @pytest.hookimpl(trylast=True)
        def pytest_collection_modifyitems(self, items):
            self.groups = {item.name: [m.args for m in item.iter_markers("xdist_group")] for item in items}

    pytester.makepyfile(test_using=USING)
    collected = Collected()
    pytester.inline_run("--collect-only", "-p", "no:randomly", plugins=[Lanes(), collected])
    assert collected.groups == {"test_runs_the_cli": [], "test_on_a_cluster": [("one_at_a_time",)],
                                "test_plain": [("test_using",)], "test_on_a_page": [("browser",)]}
