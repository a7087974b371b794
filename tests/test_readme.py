"""The README's promises (issue 17, item 1): its first two commands, the extras its
commands need, and its Adult recipe, run as written on the real data when it is here."""

import re
import shlex
from pathlib import Path

from conftest import dataset_files, run_cli

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def shell_commands(text, program):
    """The commands of ``program`` in the fenced bash blocks of ``text``, continuation lines
    joined and comments dropped."""
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split("  #")[0].strip()
            if line.startswith(program + " "):
                commands.append(" ".join(line.split()))
    return commands


def test_the_first_two_commands_set_up_and_test():
    first = re.search(r"```bash\n(.*?)```", README, re.S).group(1).splitlines()
    assert first[0].startswith("python -m pip install -e . && python -m bigsearch demo ")
    assert first[1].startswith('python -m pip install -e ".[test]" && python -m pytest -q ')


def test_every_extra_an_error_asks_for_is_in_the_readme():
    asked = set()
    for path in (ROOT / "bigsearch").rglob("*.py"):
        asked |= set(re.findall(r"bigsearch\[(\w+)\]", path.read_text()))
    assert {"ingest", "plots", "serve", "chem"} <= asked
    for extra in asked:
        assert f'pip install -e ".[{extra}]"' in README, extra


def test_the_adult_recipe_is_the_papers():
    ingest = [c for c in shell_commands(README, "bigsearch ingest") if "adult" in c]
    paper = [c for c in shell_commands((ROOT / "docs" / "ingest.md").read_text(), "bigsearch ingest") if "adult" in c]
    assert ingest and paper
    assert shlex.split(ingest[0]) == shlex.split(paper[0])  # --normalize included


def test_the_adult_recipe_runs_as_written(tmp_path):
    for f in dataset_files("adult", "adult.data", "adult.test"):
        (tmp_path / f.name).symlink_to(f)
    command = next(c for c in shell_commands(README, "bigsearch ingest") if "adult" in c)
    res = run_cli(*shlex.split(command)[1:], cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    info = run_cli("info", "adult.zarr", cwd=tmp_path)
    assert info.returncode == 0 and "39,111 points" in info.stdout, info.stdout  # docs/ingest.md's count
