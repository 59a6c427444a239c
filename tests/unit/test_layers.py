"""The package's parts import each other one way only: no cycle between its packages and top modules.

A unit is a subpackage of ``store_metrics`` (``counting``, ``emitter``, ``backends``, ...) or one of
its top modules (``catalogue``, ``naming``, ``errors``, ``contracts``, ...). Every import counts:
at module level, inside a function (the lazy ones that keep importing the package cheap), and
under ``TYPE_CHECKING`` (a type named from another unit is a dependency on it too). Imports of the
package itself (``from store_metrics import __version__``) are left out: Python imports the
package before any module in it, so every module depends on it anyway; it imports its public API
lazily and only names it for type checkers.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from itertools import pairwise
from pathlib import Path

from testbed.repository import ROOT

PACKAGE = "store_metrics"
SOURCE = ROOT / "src" / PACKAGE

#: unit -> unit it imports -> where ("path:line" of each import).
Graph = dict[str, dict[str, list[str]]]


def module_name(path: Path) -> tuple[str, bool]:
    """The dotted name of a source file, and whether it is a package's ``__init__``."""
    parts = path.relative_to(SOURCE.parent).with_suffix("").parts
    if parts[-1] == "__init__":
        return ".".join(parts[:-1]), True
    return ".".join(parts), False


def is_module(name: str) -> bool:
    """Whether ``name`` (``store_metrics.x.y``) is a module or package of ours."""
    path = SOURCE.parent.joinpath(*name.split("."))
    return path.is_dir() or path.with_suffix(".py").is_file()


def unit_of(name: str) -> str | None:
    """The unit a module belongs to: ``store_metrics.X`` for any module at or below it."""
    parts = name.split(".")
    if parts[0] != PACKAGE or len(parts) < 2:
        return None
    return ".".join(parts[:2])


def imported_modules(path: Path) -> list[tuple[str, int]]:
    """Every module of ours ``path`` imports, anywhere in the file, with the import's line."""
    name, is_package = module_name(path)
    here = name if is_package else name.rpartition(".")[0]
    found: list[tuple[str, int]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here.split(".")[: len(here.split(".")) - (node.level - 1)]
                source = ".".join([*base, *([node.module] if node.module else [])])
            else:
                source = node.module or ""
            for alias in node.names:
                # ``from . import logs`` imports the module ``logs``; ``from .x import y`` module x.
                candidate = f"{source}.{alias.name}"
                found.append((candidate if is_module(candidate) else source, node.lineno))
    return [(module, line) for module, line in found if module.split(".")[0] == PACKAGE]


def import_graph() -> Graph:
    graph: Graph = defaultdict(lambda: defaultdict(list))
    for path in sorted(SOURCE.rglob("*.py")):
        source_unit = unit_of(module_name(path)[0])
        for module, line in imported_modules(path):
            target_unit = unit_of(module)
            if source_unit is None or target_unit is None or target_unit == source_unit:
                continue
            graph[source_unit][target_unit].append(f"{path.relative_to(ROOT)}:{line}")
    return graph


def strongly_connected(graph: Graph) -> list[list[str]]:
    """The groups of units that reach each other (Tarjan), only those of more than one unit."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(unit: str) -> None:
        index[unit] = low[unit] = len(index)
        stack.append(unit)
        on_stack.add(unit)
        for target in sorted(graph.get(unit, {})):
            if target not in index:
                visit(target)
                low[unit] = min(low[unit], low[target])
            elif target in on_stack:
                low[unit] = min(low[unit], index[target])
        if low[unit] == index[unit]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == unit:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for unit in sorted(graph):
        if unit not in index:
            visit(unit)
    return groups


def one_cycle(graph: Graph, group: list[str]) -> list[str]:
    """A shortest cycle through the group's first unit, as the units it passes, start repeated."""
    start = group[0]
    members = set(group)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        following = []
        for unit in frontier:
            for target in sorted(graph.get(unit, {})):
                if target == start:
                    return [*paths[unit], start]
                if target in members and target not in paths:
                    paths[target] = [*paths[unit], target]
                    following.append(target)
        frontier = following
    raise AssertionError(f"{group} is not strongly connected")


def describe(graph: Graph, groups: list[list[str]]) -> str:
    lines = []
    for group in groups:
        cycle = one_cycle(graph, group)
        lines.append(f"{', '.join(u.removeprefix(PACKAGE + '.') for u in group)} import each other, e.g.:")
        for source, target in pairwise(cycle):
            where = graph[source][target]
            more = f" (and {len(where) - 1} more)" if len(where) > 1 else ""
            lines.append(f"  {source} -> {target}: {where[0]}{more}")
    return "\n".join(lines)


def test_the_finder_names_a_cycle_and_where_each_of_its_imports_is() -> None:
    graph: Graph = {
        "store_metrics.a": {"store_metrics.b": ["src/store_metrics/a.py:3"]},
        "store_metrics.b": {"store_metrics.c": ["src/store_metrics/b/x.py:9", "src/store_metrics/b/y.py:1"]},
        "store_metrics.c": {"store_metrics.a": ["src/store_metrics/c.py:40"], "store_metrics.d": ["c.py:2"]},
    }
    groups = strongly_connected(graph)
    assert groups == [["store_metrics.a", "store_metrics.b", "store_metrics.c"]]
    assert describe(graph, groups) == (
        "a, b, c import each other, e.g.:\n"
        "  store_metrics.a -> store_metrics.b: src/store_metrics/a.py:3\n"
        "  store_metrics.b -> store_metrics.c: src/store_metrics/b/x.py:9 (and 1 more)\n"
        "  store_metrics.c -> store_metrics.a: src/store_metrics/c.py:40"
    )


def test_the_graph_sees_function_level_and_type_checking_imports() -> None:
    graph = import_graph()
    # errors names a delta only for type checkers; the plugin imports the API server's
    # middleware only inside a function.
    assert f"{PACKAGE}.deltas" in graph[f"{PACKAGE}.errors"]
    assert f"{PACKAGE}.api_server" in graph[f"{PACKAGE}.integration"]
    # ``from .. import logs`` is an import of the module logs, not of the package.
    assert f"{PACKAGE}.logs" in graph[f"{PACKAGE}.emitter"]


def test_no_two_parts_of_the_package_import_each_other() -> None:
    graph = import_graph()
    groups = strongly_connected(graph)
    assert not groups, "import cycles between the package's parts:\n" + describe(graph, groups)
