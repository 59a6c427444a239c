"""The package's seams: what each kind of process loads, and no import cycle between its modules.

Every Airflow process loads the plugin; most of them never run a task. So importing
``store_metrics.plugin`` loads the listener and nothing else of the package, a task loads the
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

PACKAGE = Path(__file__).resolve().parent.parent / "src" / "store_metrics"

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
    # (Airflow itself has loaded store_metrics and store_metrics.provider: its provider info.)
    assert loaded("import store_metrics.plugin") == [
        "store_metrics._task_listener",
        "store_metrics.logs",
        "store_metrics.plugin",
    ]


@pytest.mark.airflow
def test_a_task_loads_one_backend_and_never_the_server_the_ui_or_the_pipeline() -> None:
    modules = loaded(
        "import os\n"
        "os.environ['AIRFLOW__STORE_METRICS__BACKEND'] = 'statsd'\n"
        "from types import SimpleNamespace\n"
        "from store_metrics import _task_listener, plugin\n"
        "_task_listener._is_task_runner_ti = lambda ti: True\n"
        "context = {'task_state_store': SimpleNamespace(get=lambda k, default=None: default)}\n"
        "ti = SimpleNamespace(stats_tags={}, dag_id='d', task_id='t', task=object(),\n"
        "                     get_template_context=lambda: context)\n"
        "plugin.listener.on_task_instance_running(None, ti)\n"
        "assert type(context['task_state_store']).__name__ != 'SimpleNamespace'\n"
    )
    backends = [m for m in modules if m.startswith("store_metrics.backends.")]
    assert backends == ["store_metrics.backends.statsd", "store_metrics.backends.udp"]
    for never in (
        "store_metrics.server",
        "store_metrics.ui",
        "store_metrics.pipeline",
        "store_metrics.triggers",
    ):
        assert not [m for m in modules if m == never or m.startswith(f"{never}.")], never


def _imports(path: Path) -> set[str]:
    """The package modules ``path`` imports at module level (not inside functions, not for typing)."""
    module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__")
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.If):  # `if TYPE_CHECKING:` blocks are not run
            continue
        if isinstance(node, ast.ImportFrom):
            base = package
            for _ in range(node.level - 1):
                base = base.rpartition(".")[0]
            target = f"{base}.{node.module}" if node.level and node.module else (node.module or base)
            if node.level and not node.module:
                found.update(f"{base}.{alias.name}" for alias in node.names)
            found.add(target)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {name for name in found if name.startswith("store_metrics")}


def test_no_import_cycle_between_the_packages_modules() -> None:
    graph: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        if "templates" in path.parts:
            continue
        name = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__")
        graph[name] = _imports(path)
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
