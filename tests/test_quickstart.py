"""docs/quickstart.md, run as written: every fenced bash command through the real CLI in a
subprocess and every Python block as a program, in order, in one empty directory."""

import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

from conftest import FIXTURES, run_cli

ROOT = Path(__file__).resolve().parents[1]
DOC = (ROOT / "docs" / "quickstart.md").read_text()


def steps(text):
    """[("bash", command) or ("python", source)] in the order of the doc's fenced blocks."""
    out = []
    for lang, body in re.findall(r"```(bash|python)\n(.*?)```", text, re.S):
        if lang == "python":
            out.append(("python", body))
            continue
        for line in body.replace("\\\n", " ").splitlines():
            line = line.split("  #")[0].strip()
            if line:
                out.append(("bash", line))
    return out


def check_install(command):
    """`python -m pip install -e ".[a,b]"`: not rerun here (the suite runs in the installed
    checkout); the extras it names must exist and each of their packages be installed."""
    extras = re.search(r"\.\[([\w,]+)\]", command).group(1).split(",")
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for extra in extras:
        assert extra in declared, f"the quickstart installs extra {extra!r}, which pyproject.toml lacks"
        for requirement in declared[extra]:
            name = re.match(r"[A-Za-z0-9_.\-]+", requirement).group(0)
            metadata.version(name)  # raises PackageNotFoundError when it is missing


def test_the_quickstart_runs_as_written(tmp_path):
    shutil.copy(FIXTURES / "quickstart" / "transactions.csv", tmp_path)
    doc_steps = steps(DOC)
    assert [c for k, c in doc_steps if k == "bash"][0].startswith("python -m pip install")
    last_next, printed = None, iter(re.findall(r"```text\n(.*?)```", DOC, re.S))  # what each `next` prints
    for kind, text in doc_steps:
        if kind == "python":
            res = subprocess.run(
                [sys.executable, "-c", text], cwd=tmp_path, capture_output=True, text=True, timeout=300
            )
            assert res.returncode == 0, f"{text}\n{res.stderr}"
            continue
        if text.startswith("python -m pip install"):
            check_install(text)
            continue
        args = shlex.split(text)
        assert args[0] == "bigsearch", f"the quickstart runs only bigsearch and pip: {text}"
        if args[1:3] == ["session", "label"]:  # the doc answers what `next` proposed, nothing else
            assert last_next is not None and set(args[4::2]) <= last_next, text
        res = run_cli(*args[1:], cwd=tmp_path)
        assert res.returncode == 0, f"{text}\n{res.stderr}"
        if args[1:3] == ["session", "status"]:  # the honest figures first: the recent hit rate
            status = res.stdout
            assert "labels      10: 8 positive, 2 negative (1 undone)" in status, status
            assert status.index("recent      ") < status.index("left        ") < status.index("score sum")
        if args[1:3] == ["session", "next"]:
            shown = re.findall(r"^#\d+: index (\d+)", res.stdout, re.M)
            last_next = set(shown)
            assert next(printed).split() == res.stdout.split(), f"{text} printed\n{res.stdout}"
    assert (tmp_path / "found.csv").read_text().count("\n") == 11  # a header and the ten answers
    assert (tmp_path / "tx-results" / "results.json").is_file()
