"""The package's shape, read from the source with ``ast``: layers, circles, privacy, size.

helix is layered; a module may import its own layer and the layers below it, never
one above it, and never a sibling package of its own layer:

    cli                          the click skin (and ``python -m helix``)
    claude | run | demo | mcp    Claude Code adapters, ``helix run``, ``helix demo``, ``helix mcp``
    loop                         one attempt: inject, prompt, verify, credit, learn
    judge                        the judge's snapshot, its constructed tree, VERIFY in a sandbox
    memory | tasks               the insight memory; the task graph (strangers to each other)
    store                        engines, migrations, roles, and the tables that are not
                                 insights: attempts, settlements, spawns, tasks, fleet runs
    ground                       errors, config, files, installation, jsontext, processes,
                                 reaper, render, repository, vocab

Every import counts, including those inside functions and ``if TYPE_CHECKING:``:
a circle that only a type checker follows is still a circle in the design.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "helix"
MAX_LINES = 800

# Lowest first. A module's layer is that of its first package below ``helix``.
LAYERS: list[set[str]] = [
    {"ground"},
    {"store"},
    {"memory", "tasks"},
    {"judge"},
    {"loop"},
    {"claude", "run", "demo"},
    {"service"},
    {"mcp", "ui"},
    {"cli"},
]
# The modules directly in ``helix/`` that form the ground layer.
GROUND = {
    "__init__",
    "errors",
    "config",
    "installation",
    "files",
    "jsontext",
    "processes",
    "reaper",
    "render",
    "repository",
    "vocab",
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


MODULES = modules()


def is_package(name: str) -> bool:
    return MODULES[name].name == "__init__.py"


def resolve(name: str, importer: str, level: int) -> str:
    """The absolute name of a (possibly relative) ``from`` import."""
    if not level:
        return name
    base = importer.split(".")
    if not is_package(importer):
        base = base[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join([*base, name] if name else base)


def imports(name: str) -> list[tuple[str, str | None, int]]:
    """(module imported, name taken from it or None, line) for every import."""
    tree = ast.parse(MODULES[name].read_text(encoding="utf-8"))
    out: list[tuple[str, str | None, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(alias.name, None, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            source = resolve(node.module or "", name, node.level)
            out += [(source, alias.name, node.lineno) for alias in node.names]
    return [item for item in out if item[0] == "helix" or item[0].startswith("helix.")]


def edges(name: str) -> set[str]:
    """The helix modules ``name`` depends on: ``from helix.x import y`` means the
    module ``helix.x.y`` when there is one, else ``helix.x``."""
    out = set()
    for source, taken, _ in imports(name):
        target = f"{source}.{taken}" if taken and f"{source}.{taken}" in MODULES else source
        while target not in MODULES and "." in target:
            target = target.rsplit(".", 1)[0]
        if target in MODULES and target != name and not name.startswith(f"{target}."):
            out.add(target)  # a package's own __init__ is not a dependency of its children
    return out


def layer_of(name: str) -> int | None:
    parts = name.split(".")
    if len(parts) == 1:
        return 0  # helix/__init__.py
    if len(parts) == 2 and not is_package(name):
        if parts[1] in GROUND:
            return 0
        if parts[1] == "__main__":
            return len(LAYERS) - 1
        return None
    for level, names in enumerate(LAYERS):
        if parts[1] in names:
            return level
    return None


def group_of(name: str) -> str:
    parts = name.split(".")
    if parts[1:] == ["__main__"]:
        return "cli"  # ``python -m helix`` is the CLI
    return parts[1] if len(parts) > 1 and layer_of(name) else "ground"


def test_every_module_has_a_layer():
    homeless = [name for name in MODULES if layer_of(name) is None]
    assert not homeless, f"modules outside every declared layer: {homeless}"


def test_no_layer_imports_one_above_it_or_a_sibling():
    bad = []
    for name in MODULES:
        mine = layer_of(name)
        for target in edges(name):
            theirs = layer_of(target)
            if mine is None or theirs is None:
                continue
            if theirs > mine:
                bad.append(f"{name} -> {target} (a layer above)")
            elif theirs == mine and mine and group_of(name) != group_of(target):
                bad.append(f"{name} -> {target} (a sibling package)")
    assert not bad, "\n".join(bad)


def circles() -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    graph = {name: edges(name) for name in MODULES}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


# Only the store layer knows its database engine: every other layer names the
# connection and its errors through helix.store.db, so a second engine is a change
# inside helix/store, not in every module that touches the store.
ENGINE_DRIVERS = ("sqlite3", "_sqlite3", "psycopg", "psycopg2", "psycopg_pool")


def test_only_the_store_layer_imports_a_database_driver():
    offenders = []
    for name, path in modules().items():
        if name.startswith("helix.store"):
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                found = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found = [node.module]
            else:
                continue
            offenders += [f"{name} imports {m}" for m in found if m.split(".")[0] in ENGINE_DRIVERS]
    assert offenders == []


# helix/memory still runs its own SQL on the insight tables (recall, feedback,
# upkeep...): moving those statements behind store objects in helix/store is the
# next step, after which only helix.store is named here.
SQL_LAYERS = ("helix.store", "helix.memory")


def test_only_the_store_and_memory_run_sql():
    """Every statement goes through helix/store (or, for the insight tables,
    helix/memory): no cursor calls elsewhere, so the layers above work unchanged
    on another engine."""
    calls = ("execute", "executemany", "executescript")
    offenders = []
    for name, path in modules().items():
        if name.startswith(SQL_LAYERS):
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in calls
            ):
                offenders.append(f"{name}:{node.lineno} calls .{node.func.attr}()")
    assert offenders == []


def test_no_import_circles():
    found = circles()
    assert not found, "import circles:\n" + "\n".join(" <-> ".join(c) for c in found)


def private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def defined_names(tree: ast.AST) -> set[str]:
    """Names a module defines anywhere: functions, classes, assigned names and
    attributes (``self._x = ...``)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            out.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            out.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            out.add(node.attr)
    return out


def test_no_module_uses_another_modules_private_names():
    trees = {name: ast.parse(path.read_text(encoding="utf-8")) for name, path in MODULES.items()}
    defined = {name: defined_names(tree) for name, tree in trees.items()}
    bad = []
    for name, tree in trees.items():
        for source, taken, line in imports(name):
            if taken and private(taken):
                bad.append(f"{name}:{line} imports {source}.{taken}")
            if any(private(part) for part in source.split(".")):
                bad.append(f"{name}:{line} imports the private module {source}")
        elsewhere = set().union(*(d for other, d in defined.items() if other != name))
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and private(node.attr)
                and isinstance(node.value, ast.Name)
                and node.value.id not in ("self", "cls")
                and node.attr not in defined[name]
                and node.attr in elsewhere
            ):
                bad.append(f"{name}:{node.lineno} uses {node.value.id}.{node.attr}")
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_module_is_too_long(name):
    lines = len(MODULES[name].read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, f"{name} has {lines} lines; split it (at most {MAX_LINES})"
