"""The base install (``pip install bigsearch``, no extras) imports every module it needs: each
module of the package is imported in a fresh interpreter that can see only the standard library
and the distributions the base requirements bring (transitively); everything else installed here
for the tests (SciPy before it was declared, pandas, Flask, ...) is hidden. The README's first
command failed on a fresh machine when a module the engine imports came only with the test extra.

Modules that belong to an extra may fail, but only for want of that extra's own packages."""

import json
import subprocess
import sys
import textwrap
from importlib import metadata

from packaging.requirements import Requirement

# Modules whose import needs an extra (the extra named in their error messages).
NEEDS_EXTRA = {
    "bigsearch.serve.app": "serve",
    "bigsearch.serve.server": "serve",
    "bigsearch.testing.store_suite": "test",  # the shared store suite is a pytest module
}


def base_distributions():
    """The base requirements of bigsearch and, transitively, theirs (extras they ask for included)."""
    seen, todo = set(), [(r, "") for r in metadata.requires("bigsearch") or []]
    while todo:
        text, extra = todo.pop()
        req = Requirement(text)
        if req.marker is not None and not req.marker.evaluate({"extra": extra}):
            continue
        name = req.name.lower().replace("_", "-")
        for wanted in [""] + sorted(req.extras):
            if (name, wanted) in seen:
                continue
            seen.add((name, wanted))
            try:
                todo += [(r, wanted) for r in metadata.requires(name) or []]
            except metadata.PackageNotFoundError:
                pass
    return {name for name, _ in seen}


def hidden_modules():
    """Top-level modules installed here that no base distribution provides."""
    allowed = base_distributions() | {"bigsearch"}
    hidden = []
    for module, dists in metadata.packages_distributions().items():
        if not any(d.lower().replace("_", "-") in allowed for d in dists):
            hidden.append(module)
    return sorted(hidden)


CHILD = textwrap.dedent(
    """
    import importlib, json, pkgutil, sys
    hidden = set(json.loads(sys.argv[1]))

    class Hide:
        def find_spec(self, name, path=None, target=None):
            if name.partition(".")[0] in hidden:
                raise ModuleNotFoundError(f"No module named {name!r} (hidden: not in the base install)", name=name)
            return None

    sys.meta_path.insert(0, Hide())
    import bigsearch
    failures = {}
    names = ["bigsearch"] + [m.name for m in pkgutil.walk_packages(bigsearch.__path__, "bigsearch.")
                             if not m.name.endswith("__main__")]
    for name in names:
        try:
            importlib.import_module(name)
        except ImportError as exc:
            failures[name] = f"{type(exc).__name__}: {exc}"
    print(json.dumps({"imported": len(names), "failures": failures}))
    """
)


def test_every_module_imports_with_only_the_base_install():
    hidden = hidden_modules()
    assert "pandas" in hidden and "flask" in hidden  # the check hides what the extras bring
    assert "numba" not in hidden and "zarr" not in hidden
    out = subprocess.run([sys.executable, "-c", CHILD, json.dumps(hidden)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["imported"] > 100
    unexpected = {m: why for m, why in report["failures"].items() if m not in NEEDS_EXTRA}
    assert not unexpected, f"modules the base install cannot import: {unexpected}"
    for module, why in report["failures"].items():
        missing = why.split("'")[1].partition(".")[0]
        assert missing in extra_modules(NEEDS_EXTRA[module]), (
            f"{module} needs {missing}, not in [{NEEDS_EXTRA[module]}]"
        )


def extra_modules(extra):
    """Top-level modules the distributions of one extra provide."""
    names = set()
    for text in metadata.requires("bigsearch") or []:
        req = Requirement(text)
        if req.marker is not None and req.marker.evaluate({"extra": extra}):
            names.add(req.name.lower().replace("_", "-"))
    return {m for m, dists in metadata.packages_distributions().items() if any(d.lower() in names for d in dists)}
