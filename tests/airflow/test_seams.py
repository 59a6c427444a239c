"""The package's seams: what each kind of process loads, and no import cycle between its modules.

Every Airflow process loads the plugin; most of them never run a task. So importing
``store_metrics.integration.plugin`` loads the listener and nothing else of the package, a task loads the
emitter, the accessors and one backend when its first task starts, and only the API server loads the
server side and the UI. Checked in fresh interpreters, after ``airflow.sdk`` (which a task process has
loaded before any plugin).
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from testbed.repository import ROOT

PACKAGE = ROOT / "src" / "store_metrics"

_LOADED = textwrap.dedent(
    """
    import json, sys
    import airflow.sdk
    before = set(sys.modules)
    {code}
    print(json.dumps(sorted(m for m in set(sys.modules) - before if m.startswith("store_metrics"))))
    """
)


def loaded(code: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", _LOADED.format(code=code)],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    result: list[str] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


@pytest.mark.airflow
def test_importing_the_plugin_loads_only_the_plugin_and_its_listener() -> None:
    # (Airflow itself has loaded store_metrics and store_metrics.integration.provider_info: its provider
    # info.)
    assert loaded("import store_metrics.integration.plugin") == [
        "store_metrics.integration.plugin",
        "store_metrics.integration.task_listener",
        "store_metrics.logs",
    ]


@pytest.mark.airflow
def test_a_task_loads_one_backend_and_never_the_server_the_ui_or_the_pipeline() -> None:
    modules = loaded(
        "import os\n"
        "os.environ['AIRFLOW__STORE_METRICS__BACKEND'] = 'statsd'\n"
        "from types import SimpleNamespace\n"
        "from store_metrics.integration import plugin, task_listener\n"
        "task_listener._is_task_runner_ti = lambda ti: True\n"
        "context = {'task_state_store': SimpleNamespace(get=lambda k, default=None: default)}\n"
        "ti = SimpleNamespace(stats_tags={}, dag_id='d', task_id='t', task=object(),\n"
        "                     get_template_context=lambda: context)\n"
        "plugin.listener.on_task_instance_running(None, ti)\n"
        "assert type(context['task_state_store']).__name__ != 'SimpleNamespace'\n"
    )
    backends = [m for m in modules if m.startswith("store_metrics.backends.")]
    # The statsd backend, the UDP sender it shares with dogstatsd, and the lines they both send.
    assert backends == [
        "store_metrics.backends.line_backend",
        "store_metrics.backends.statsd",
        "store_metrics.backends.statsd_lines",
    ]
    for never in (
        "store_metrics.api_server",
        "store_metrics.ui",
        "store_metrics.shipped",
        "store_metrics.integration.triggerer",
    ):
        assert not [m for m in modules if m == never or m.startswith(f"{never}.")], never


def _imports(path: Path) -> set[str]:
    """The package modules ``path`` imports, at module level or inside a function or class (an import
    inside a function runs too, only later), but not in an ``if TYPE_CHECKING:`` block (never run)."""
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in _run_statements(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = package
            for _ in range(node.level - 1):
                base = base.rpartition(".")[0]
            target = f"{base}.{node.module}" if node.level and node.module else (node.module or base)
            # `from package import module` imports the module (the package is loaded already, as the
            # parent of the importing module or by it); `from module import name` imports the module.
            modules = {f"{target}.{alias.name}" for alias in node.names} & _MODULES
            found.update(modules or {target})
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {name for name in found if name.startswith("store_metrics")}


def _module_name(path: Path) -> str:
    return ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__")


#: Every module of the package, by dotted name (the shipped templates are data, not modules).
_MODULES = {_module_name(p) for p in PACKAGE.rglob("*.py") if "templates" not in p.parts}


def _run_statements(tree: ast.AST) -> list[ast.stmt]:
    """Every import statement of a module, nested ones included, but those under ``if TYPE_CHECKING:``."""
    found: list[ast.stmt] = []
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append(node)
        stack.extend(ast.iter_child_nodes(node))
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def test_no_import_cycle_between_the_packages_modules() -> None:
    graph: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        if "templates" not in path.parts:
            graph[_module_name(path)] = _imports(path)
    cycles = []
    state: dict[str, int] = {}

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for target in sorted(graph.get(node, ())):
            if target not in graph or target == node:
                continue
            if state.get(target) == 1 and not (
                node.startswith(target + ".") or target.startswith(node + ".")
            ):
                cycles.append([*stack[stack.index(target) :], target] if target in stack else [node, target])
            elif target not in state:
                visit(target, [*stack, target])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    assert cycles == []
