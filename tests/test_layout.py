"""The house as built (issue 28): no import cycle, few modules at the top, short modules and functions, no private
name reached from another module, and a worker side that never imports the controller.

Every import counts, the ones inside functions and under ``TYPE_CHECKING`` too: a cycle hidden there is still a
cycle to whoever reads the code.  Importing ``a.b.c`` runs ``a/b/__init__.py`` first, so a module also depends on
the packages above what it imports (not on its own).
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "pytest_dlperf"
NAME = PACKAGE.name
#: The most modules directly in pytest_dlperf/ (its __init__.py and __main__.py counted).
MAX_TOP_MODULES = 12
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60
#: How a function longer than MAX_FUNCTION_LINES says why, on its ``def`` line or the line above it.
LONG_NOTE = "# long:"
#: What the worker side (a fresh process on each rank) may not reach: the controller and everything after it.
CONTROLLER_SIDE = ("plugin", "options", "controller", "launch", "gate", "results", "baseline",
                   "reporting", "history", "cli", "commands", "convergence")
WORKER_SIDE = ("worker", "models")


def modules() -> dict[str, Path]:
    """Every module of the package by its dotted name (a package by its own name)."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = modules()


@functools.cache
def nodes(path: Path) -> tuple[ast.AST, ...]:
    """Every node of the module at ``path``, in ``ast.walk``'s order: parsed once for the tests that read it."""
    return tuple(ast.walk(ast.parse(path.read_text(encoding="utf-8"))))


def imports(name: str, path: Path) -> Iterator[tuple[str, str, int]]:
    """(module imported, name imported from it or "", line) for every import of the package's in ``path``."""
    here = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    for node in nodes(path):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == NAME:
                    yield alias.name, "", node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[:len(here) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            if source.split(".")[0] != NAME:
                continue
            for alias in node.names:
                yield source, alias.name, node.lineno


def resolved(source: str, imported: str) -> str:
    """The module an import reaches: ``source.imported`` where that is a module, else ``source`` (or above)."""
    if f"{source}.{imported}" in MODULES:
        return f"{source}.{imported}"
    while source not in MODULES and "." in source:
        source = source.rsplit(".", 1)[0]
    return source


def graph() -> dict[str, set[str]]:
    """Each module's imports of the package's modules, with the packages each of them is in."""
    edges: dict[str, set[str]] = {name: set() for name in MODULES}
    for name, path in MODULES.items():
        for source, imported, _ in imports(name, path):
            target = resolved(source, imported)
            parts = target.split(".")
            for depth in range(1, len(parts) + 1):
                reached = ".".join(parts[:depth])
                if reached in MODULES and reached != name and not name.startswith(reached + "."):
                    edges[name].add(reached)
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    found.append(sorted(group))
    return found


def reach(edges: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for target in edges[todo.pop()] - seen:
            seen.add(target)
            todo.append(target)
    return seen


def test_no_import_cycle():
    assert cycles(graph()) == []


def test_the_cycle_finder_finds_one():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


#: The package's rooms (its top-level packages and modules), bottom floor first: a room imports the rooms below
#: it.  The worker side is low (it imports no controller room); the plugin, the CLI and collection are the top
#: (the package's ``__init__`` gathers the public names of the rooms below).
FLOORS = (
    ("atomic", "cases", "registry", "torchinfo"),
    ("environment", "jsonio", "protocol"),
    ("models",),
    ("data",),
    ("worker",),
    ("results",),
    ("gate",),
    ("launch",),  # a run far off its baseline is cut short by the gate's rule (gate/far.py)
    ("baseline",),
    ("convergence", "history"),
    ("ab", "commands"),
    ("reporting",),
    ("options",),
    ("controller",),
    ("__init__", "cli"),
    ("__main__", "plugin"),
)
#: The imports that still climb a floor (issue 50 allows two): the host facts read a worker's telemetry helper, and
#: a case's result holds the gate's evidence while the gate reads the result's records.
CLIMBS = {("environment", "worker"), ("results", "gate")}


def room(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def climbs(edges: dict[str, set[str]]) -> set[tuple[str, str]]:
    """The room-to-room imports that go up a floor (or across one, between two rooms of a floor)."""
    floor = {name: level for level, names in enumerate(FLOORS) for name in names}
    found = set()
    for source, targets in edges.items():
        for target in targets:
            here, there = room(source), room(target)
            if here != there and there != "__init__" and floor[there] >= floor[here]:
                found.add((here, there))
    return found


def test_every_room_has_a_floor():
    rooms = {room(name) for name in MODULES}
    placed = {name for names in FLOORS for name in names}
    assert rooms <= placed, f"rooms with no floor in FLOORS: {sorted(rooms - placed)}"


def test_imports_go_down_but_two():
    found = climbs(graph())
    assert found <= CLIMBS and len(CLIMBS) <= 2, f"imports that climb a floor: {sorted(found - CLIMBS)}"


def test_the_climb_finder_finds_one():
    assert climbs({"pytest_dlperf.gate.verdict": {"pytest_dlperf.controller.session"}}) == {("gate", "controller")}


def test_few_modules_at_the_top():
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(top) <= MAX_TOP_MODULES, top


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_module_over_400_lines(name):
    lines = len(MODULES[name].read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_MODULE_LINES, f"{name}: {lines} lines"


def test_no_function_over_60_lines_without_a_note():
    long = []
    for name, path in MODULES.items():
        text = path.read_text(encoding="utf-8").splitlines()
        for node in nodes(path):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                noted = any(LONG_NOTE in text[i - 1] for i in (first - 1, node.lineno) if i >= 1)
                if node.end_lineno - first + 1 > MAX_FUNCTION_LINES and not noted:
                    long.append(f"{name}.{node.name} ({node.end_lineno - first + 1} lines)")
    assert not long, long


def test_no_private_name_from_another_module():
    private = []
    for name, path in MODULES.items():
        for source, imported, line in imports(name, path):
            if imported.startswith("_") and not imported.startswith("__"):
                private.append(f"{name}:{line}: {imported} from {source}")
        aliases = {alias.asname or alias.name for node in nodes(path)
                   if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith(NAME))
                   for alias in node.names}
        for node in nodes(path):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases \
                    and node.attr.startswith("_") and not node.attr.startswith("__"):
                private.append(f"{name}:{node.lineno}: {node.value.id}.{node.attr}")
    assert not private, private


def test_the_worker_side_never_imports_the_controller():
    edges = graph()
    controller = tuple(f"{NAME}.{part}" for part in CONTROLLER_SIDE)
    for side in WORKER_SIDE:
        for name in [m for m in MODULES if m == f"{NAME}.{side}" or m.startswith(f"{NAME}.{side}.")]:
            reached = sorted(m for m in reach(edges, name) if m.startswith(controller))
            assert not reached, f"{name} reaches {reached}"


def test_no_package_name_is_shadowed_by_its_own_module():
    # A package that imports a function ``save`` and also has a module ``save.py`` exports the module: importing
    # ``pkg.save`` binds the module to the package's name after ``from .document import save`` bound the function.
    import importlib

    shadowed = []
    for name, path in MODULES.items():
        if path.name != "__init__.py":
            continue
        package = importlib.import_module(name)
        for child in path.parent.glob("*.py"):
            attribute = getattr(package, child.stem, None)
            declared = child.stem in getattr(package, "__all__", ())
            if declared and getattr(attribute, "__name__", None) == f"{name}.{child.stem}":
                shadowed.append(f"{name}.{child.stem}")
    assert not shadowed, f"names the package exports that its own modules replace: {shadowed}"
