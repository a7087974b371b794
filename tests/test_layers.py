"""The layers of docs/architecture.md point one way: a package imports only the layers
below it, also inside functions (where an import that dodges a cycle would hide)."""

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "bigsearch"

# Every top-level module and package of bigsearch, by layer: lower ranks are lower layers,
# and a module may import only lower ranks (and its own package). The root's lazy names
# (bigsearch/__init__.py) are for everyone.
RANK = {
    "errors": 0,
    "limits": 1,                                   # memory limits: errors only
    "storage": 2, "kernels": 2,                    # neither knows the other
    "backends": 3,
    "engine": 4,
    "ingest": 5, "synthetic": 5, "datasets": 5,    # beside the stack: write or fetch stores
    "experiments": 6, "session": 6,
    "serve": 7,
    "cli": 8, "testing": 8,                        # testing: helpers for tests and benchmarks, never the CLI's
    "__main__": 9,
}


def imported_layers(path):
    """(line, layer) for every import of a bigsearch module in the module at ``path``."""
    return layers_in(path.read_text(), module_parts(path))


def layers_in(source, module):
    """(line, layer) for every bigsearch import in ``source``, the text of ``module``
    (its dotted name as parts), wherever it stands (inside functions too)."""
    return [(line, name[1]) for line, name in names_imported(source, module)]


def names_imported(source, module):
    """(line, dotted name as parts) of every bigsearch name ``source`` imports:
    ``from ..engine.core import base`` from bigsearch/session/x.py gives
    ["bigsearch", "engine", "core", "base"], as ``import bigsearch.engine.core.base`` does."""
    here = module[:-1]              # the package a relative import starts from
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = list(here[:len(here) - node.level + 1])
                target = base + (node.module.split(".") if node.module else [])
            else:
                target = (node.module or "").split(".")
            names = [target + [a.name] for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name.split(".") for a in node.names]
        else:
            continue
        out += [(node.lineno, t) for t in names if t[0] == "bigsearch" and len(t) > 1]
    return out


def module_parts(path):
    return path.relative_to(PACKAGE.parent).with_suffix("").parts


def layer_of(path):
    return path.relative_to(PACKAGE).with_suffix("").parts[0]


def imports_of(path):
    return names_imported(path.read_text(), module_parts(path))


MODULES = [p for p in sorted(PACKAGE.rglob("*.py")) if p != PACKAGE / "__init__.py"]


def test_every_module_has_a_layer():
    assert sorted({layer_of(p) for p in MODULES} - set(RANK)) == []
    assert len(MODULES) > 60


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_point_down(path):
    layer = layer_of(path)
    wrong = [f"line {line}: imports {target}" for line, target in imported_layers(path)
             if target != layer and RANK.get(target, -1) >= RANK[layer]]
    assert not wrong, f"{path.relative_to(PACKAGE)} ({layer}) imports a layer at or above its own: {wrong}"


def test_the_check_sees_every_form_of_import():
    source = ("import bigsearch\nfrom . import base\n"
              "def f():\n    from .. import session\n    import bigsearch.serve.app\n"
              "    from bigsearch.cli import options\n    from ..storage.atomic import atomic_open\n")
    assert [t for _, t in layers_in(source, ("bigsearch", "engine", "x"))] == \
        ["engine", "session", "serve", "cli", "storage"]
    layers = {target for _, target in imported_layers(PACKAGE / "engine" / "core" / "kmeans.py")}
    assert {"storage", "kernels", "backends"} <= layers and "session" not in layers


# The rooms of engine/ point down too: the machinery every method shares (core) knows no
# method and no pruning; pruning and the sessions' helpers (guidance) build on core only;
# the methods may use all three. Only engine/__init__.py (the lazy public names) stands
# outside the rooms.
ENGINE_ROOMS = {"core": 0, "pruning": 1, "guidance": 1, "methods": 2}
ENGINE = [p for p in MODULES if layer_of(p) == "engine" and p != PACKAGE / "engine" / "__init__.py"]


def room_violations(imports, room):
    """The engine names (dotted) that a module of engine room ``room`` may not import:
    those of a room at or above its own (other than its own), or the engine's package
    itself (its lazy names would hide an import of a method)."""
    wrong = []
    for _, name in imports:
        if name[:2] != ["bigsearch", "engine"]:
            continue
        other = name[2] if len(name) > 2 else None
        if other != room and ENGINE_ROOMS.get(other, 99) >= ENGINE_ROOMS[room]:
            wrong.append(".".join(name))
    return wrong


def test_every_engine_module_is_in_a_room():
    assert sorted({p.relative_to(PACKAGE / "engine").parts[0] for p in ENGINE}) == sorted(ENGINE_ROOMS)


@pytest.mark.parametrize("path", ENGINE, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_engine_rooms_point_down(path):
    room = path.relative_to(PACKAGE / "engine").parts[0]
    assert room_violations(imports_of(path), room) == [], f"{path.relative_to(PACKAGE)} ({room}) imports upward"


def test_the_room_check_sees_upward_imports():
    source = ("from ..methods.las import LAS\nfrom .select import Ranked\nfrom .. import WNAS\n"
              "def f():\n    from ..pruning import las\n    from ...storage import open_store\n")
    imports = names_imported(source, ("bigsearch", "engine", "core", "x"))
    assert room_violations(imports, "core") == ["bigsearch.engine.methods.las.LAS", "bigsearch.engine.WNAS",
                                                "bigsearch.engine.pruning.las"]
    assert room_violations(imports, "methods") == ["bigsearch.engine.WNAS"]


# Only backends/ names a concrete backend: the rest asks make_backend for one (or tests
# a backend's ``name``), so a new backend changes no module outside backends/.
CONCRETE_BACKENDS = {"local", "distributed", "LocalBackend", "DistributedBackend"}


def concrete_backends_named(imports):
    return [".".join(name) for _, name in imports
            if name[:2] == ["bigsearch", "backends"] and CONCRETE_BACKENDS & set(name[2:])]


@pytest.mark.parametrize("path", [p for p in MODULES if layer_of(p) != "backends"],
                         ids=lambda p: str(p.relative_to(PACKAGE)))
def test_only_backends_name_a_concrete_backend(path):
    assert concrete_backends_named(imports_of(path)) == []


def test_the_backend_check_sees_every_form():
    source = ("from ..backends.local import pass_progress\nfrom ..backends import LocalBackend, make_backend\n"
              "import bigsearch.backends.distributed\nfrom ..backends import local\n")
    imports = names_imported(source, ("bigsearch", "ingest", "x"))
    assert concrete_backends_named(imports) == ["bigsearch.backends.local.pass_progress",
                                                "bigsearch.backends.LocalBackend",
                                                "bigsearch.backends.distributed", "bigsearch.backends.local"]


def private_imports(path):
    """Names with a leading underscore that the module at ``path`` imports from another module."""
    return sorted(a.name for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.ImportFrom)
                  for a in node.names if a.name.startswith("_") and not a.name.startswith("__"))


# Helpers one module shares with another are public names (wnas.py once imported a private
# helper of las.py).
def test_modules_share_only_public_names():
    found = {str(p.relative_to(PACKAGE)): private_imports(p) for p in MODULES}
    assert {k: v for k, v in found.items() if v} == {}


def module_graph():
    """module -> the package's modules it imports anywhere in it (inside functions too);
    package __init__ modules are left out (importing a package is not a cycle to break)."""
    names = {p: ".".join(p.relative_to(PACKAGE.parent).with_suffix("").parts) for p in PACKAGE.rglob("*.py")}
    modules = {n for p, n in names.items() if p.name != "__init__.py"}
    graph = {}
    for path, name in names.items():
        if path.name == "__init__.py":
            continue
        here = name.split(".")[:-1]
        deps = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                base = here[:len(here) - node.level + 1] if node.level else []
                target = base + (node.module.split(".") if node.module else [])
                for a in node.names:
                    whole = ".".join(target + [a.name])
                    deps.add(whole if whole in modules else ".".join(target))
        graph[name] = {d for d in deps if d in modules and d != name}
    return graph


def cycles(graph):
    """The groups of modules that import each other in a circle (strongly connected)."""
    index, low, stack, found = {}, {}, [], []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while group[-1:] != [v]:
                group.append(stack.pop())
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


# Circles of imports kept apart only by an import inside a function (the review found
# ingest's featurize/stats/labels so, later engine.pruning/summaries, storage.base/remote/
# zarr_store and storage.writer/remote_writer, all broken since): none may come back.
def test_no_import_circles():
    assert cycles(module_graph()) == []
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_only_storage_calls_the_store_formats_hooks():
    """The rest of the package reads a store through FeatureStore's public methods; the
    ``_`` hooks (``_read_optional``, ``_map_chunk``, ...) are the formats' business."""
    base = ast.parse((PACKAGE / "storage" / "base.py").read_text())
    store = next(n for n in base.body if isinstance(n, ast.ClassDef) and n.name == "FeatureStore")
    hooks = {f.name for f in store.body if isinstance(f, ast.FunctionDef)
             and f.name.startswith("_") and not f.name.startswith("__")}
    assert {"_read_optional", "_map_chunk", "_decode_chunk"} <= hooks
    outside = [f"{p.relative_to(PACKAGE)}:{n.lineno} {ast.unparse(n)}" for p in MODULES if layer_of(p) != "storage"
               for n in ast.walk(ast.parse(p.read_text()))
               if isinstance(n, ast.Attribute) and n.attr in hooks and not (isinstance(n.value, ast.Name)
                                                                             and n.value.id in ("self", "cls"))]
    assert outside == []


# -- library messages name parameters, not flags (issue 15) --------------------------------
FLAG = re.compile(r"(?<![\w-])--[a-z]")
QUOTED_COMMAND = re.compile(r"`[^`]*`")    # advice to run a command: "run `bigsearch ingest --bias`"


def flags_in_strings(source):
    """(line, text) of every string of ``source`` (f-strings whole, docstrings left out)
    that names a --flag outside a quoted command."""
    tree = ast.parse(source)
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr)}
    inner = {id(v) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for v in node.values}
    out = []
    for node in ast.walk(tree):
        if id(node) in docstrings or id(node) in inner:
            continue
        if isinstance(node, ast.JoinedStr):
            text = "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
        else:
            continue
        if FLAG.search(QUOTED_COMMAND.sub("", text)):
            out.append((node.lineno, text))
    return out


# The CLI speaks flags (it translates library errors with cli/options.py's flags_for);
# testing drives the CLI and a browser.
SPEAKS_FLAGS = ("cli", "testing")
# Files that still quote flags in messages (none left: issue 15).
NOT_YET: set[str] = set()
LIBRARY = [p for p in MODULES if p.relative_to(PACKAGE).parts[0] not in SPEAKS_FLAGS
           and str(p.relative_to(PACKAGE)) not in NOT_YET]


@pytest.mark.parametrize("path", LIBRARY, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_library_messages_name_parameters_not_flags(path):
    assert flags_in_strings(path.read_text()) == [], (
        f"{path.relative_to(PACKAGE)} quotes CLI flags: name the parameter (the CLI's flags_for says it as the flag)")


def test_the_flag_scan_sees_messages_and_allows_quoted_commands():
    found = flags_in_strings(
        '"""Docstrings may say --rff."""\n'
        'def f(d):\n'
        '    """Nor here: --rff."""\n'
        '    raise ValueError(f"--rff {d} needs D >= 1")\n'
        'def g(path):\n'
        '    raise ValueError(f"{path}: run `bigsearch ingest {path} OUT --bias` to convert it")\n'
        'HINT = "use fewer features " "(--drop)"\n')
    assert sorted(line for line, _ in found) == [4, 7]
