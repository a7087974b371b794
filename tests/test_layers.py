"""The layers of docs/architecture.md point one way: a package imports only the layers
below it, also inside functions (where an import that dodges a cycle would hide)."""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "bigsearch"

# Lower ranks are lower layers. errors (and the root's __version__) are for everyone.
RANK = {"storage": 1, "kernels": 1, "backends": 2, "engine": 3, "ingest": 4, "simulate": 4, "experiments": 5,
        "session": 5, "serve": 6, "cli": 7}


def imported_layers(path):
    """(line, layer) for every import of a bigsearch package in the module at ``path``."""
    module = path.relative_to(PACKAGE.parent).with_suffix("").parts
    here = module[:-1]              # the package a relative import starts from
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = list(here[:len(here) - node.level + 1])
                target = base + (node.module.split(".") if node.module else [])
            else:
                target = (node.module or "").split(".")
            names = [target]
        elif isinstance(node, ast.Import):
            names = [a.name.split(".") for a in node.names]
        else:
            continue
        out += [(node.lineno, t[1]) for t in names if t[0] == "bigsearch" and len(t) > 1]
    return out


def layer_of(path):
    return path.relative_to(PACKAGE).with_suffix("").parts[0]


MODULES = [p for p in sorted(PACKAGE.rglob("*.py")) if layer_of(p) in RANK]


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_point_down(path):
    layer = layer_of(path)
    wrong = [f"line {line}: imports {target}" for line, target in imported_layers(path)
             if target in RANK and target != layer and RANK[target] >= RANK[layer]]
    assert not wrong, f"{path.relative_to(PACKAGE)} ({layer}) imports a layer at or above its own: {wrong}"


def test_the_check_sees_imports_inside_functions():
    module = PACKAGE / "engine" / "anchors.py"
    layers = {target for _, target in imported_layers(module)}
    assert {"storage", "kernels", "backends"} <= layers and "session" not in layers
    assert len(MODULES) > 60
