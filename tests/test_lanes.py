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

def test_runs_the_cli():
    subprocess.run(["true"])

def test_on_a_cluster(client):
    pass

def test_plain():
    pass
"""


@pytest.mark.parametrize("lane,passed", [("not slow", ["test_plain"]), ("cluster", ["test_on_a_cluster"]),
                                         ("cli", ["test_runs_the_cli"])])
def test_markers_follow_what_a_test_uses(pytester, lane, passed):
    pytester.makepyfile(test_using=USING)
    result = pytester.runpytest("-p", "no:randomly", "-v", "-m", lane, plugins=[Lanes()])
    result.assert_outcomes(passed=len(passed), deselected=3 - len(passed))
    result.stdout.fnmatch_lines([f"*::{name} PASSED*" for name in passed])
