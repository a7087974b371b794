"""`bigsearch --version`, `--help` and `import bigsearch` import no heavy library (numba,
dask, zarr, h5py, numpy, pyarrow): they load when a command needs them. The time this
saves is measured in benchmarks/cli_startup.py, not asserted here."""

import subprocess
import sys

import pytest

HEAVY = ("numba", "dask", "distributed", "zarr", "h5py", "numpy", "pyarrow", "sklearn", "pandas", "flask")
PROBE = """
import sys
{code}
heavy = sorted({{m.split(".")[0] for m in sys.modules}} & set({heavy!r}))
print("heavy:" + ",".join(heavy))
"""


def heavy_modules_after(code):
    r = subprocess.run([sys.executable, "-c", PROBE.format(code=code, heavy=HEAVY)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip().splitlines()[-1].removeprefix("heavy:")


@pytest.mark.parametrize(
    "args",
    [["--version"], ["--help"], ["datasets", "--help"], ["run", "--help"], ["session", "--help"], ["ingest", "--help"]],
)
def test_the_cli_starts_without_heavy_imports(args):
    code = (
        f"from bigsearch.cli import main\ntry:\n    main({args!r}, prog_name='bigsearch')\nexcept SystemExit:\n    pass"
    )
    assert heavy_modules_after(code) == ""


def test_import_bigsearch_is_lazy_and_complete():
    assert heavy_modules_after("import bigsearch") == ""
    assert heavy_modules_after("import bigsearch; bigsearch.LAS") == "numba,numpy"
    import bigsearch
    from bigsearch.engine import LAS

    assert bigsearch.LAS is LAS and "Session" in dir(bigsearch)
    with pytest.raises(AttributeError):
        bigsearch.nothing_here
