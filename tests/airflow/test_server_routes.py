"""Which requests are state store requests, and how each is tagged: checked to the byte.

The classification is also checked against Airflow's real Execution API route table: for many
probe paths and every method, the route Starlette would pick decides what ``route_of`` must say.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from store_metrics.api_server.routes import ROUTES, outcome_of, route_of, route_path, status_class, value_size

UUID = "01a227c4-7477-73da-8ac2-9f0094c7c3ef"


@pytest.mark.parametrize(
    ("method", "path", "route"),
    [
        ("GET", f"/execution/store/ti/{UUID}/key", ("task", "get")),
        ("PUT", f"/execution/store/ti/{UUID}/key", ("task", "set")),
        ("DELETE", f"/execution/store/ti/{UUID}/key", ("task", "delete")),
        ("DELETE", f"/execution/store/ti/{UUID}", ("task", "clear")),
        ("GET", f"/execution/store/ti/{UUID}/dir/sub/key", ("task", "get")),  # {key:path}
        ("DELETE", f"/execution/store/ti/{UUID}/", ("task", "delete")),  # empty key: the route says 422
        ("GET", f"/execution/store/ti/{UUID}", None),  # no such route (405)
        ("PUT", f"/execution/store/ti/{UUID}", None),
        ("POST", f"/execution/store/ti/{UUID}/key", None),
        ("HEAD", f"/execution/store/ti/{UUID}/key", None),
        ("GET", "/execution/store/ti/", None),
        ("GET", "/execution/store/ti//key", None),
        ("GET", "/execution/store/asset/by-name/value", ("asset", "get")),
        ("PUT", "/execution/store/asset/by-name/value", ("asset", "set")),
        ("DELETE", "/execution/store/asset/by-name/value", ("asset", "delete")),
        ("DELETE", "/execution/store/asset/by-name/clear", ("asset", "clear")),
        ("GET", "/execution/store/asset/by-uri/value", ("asset", "get")),
        ("PUT", "/execution/store/asset/by-uri/value", ("asset", "set")),
        ("DELETE", "/execution/store/asset/by-uri/value", ("asset", "delete")),
        ("DELETE", "/execution/store/asset/by-uri/clear", ("asset", "clear")),
        ("GET", "/execution/store/asset/by-uri/clear", None),
        ("DELETE", "/execution/store/asset/by-name/value/", None),
        ("GET", "/execution/store/asset/by-id/value", None),
        ("GET", "/execution/task-instances/x/run", None),
        ("GET", f"/store/ti/{UUID}/key", None),  # the Execution API app alone, not mounted: not ours
        ("GET", "/api/v2/execution/store/ti/x/k", None),
    ],
)
def test_route_of(method: str, path: str, route: tuple[str, str] | None) -> None:
    assert route_of(method, path) == route


def test_route_path_strips_the_root_path_only_where_it_is_a_prefix() -> None:
    assert route_path({"path": "/execution/store/ti/x", "root_path": ""}) == "/execution/store/ti/x"
    assert route_path({"path": "/airflow/execution/store/ti/x", "root_path": "/airflow"}) == (
        "/execution/store/ti/x"
    )
    # A proxy that already stripped it, and a path that only starts with the same letters.
    assert route_path({"path": "/execution/store/ti/x", "root_path": "/airflow"}) == "/execution/store/ti/x"
    assert route_path({"path": "/airflowx/execution/store/ti/x", "root_path": "/airflow"}) == (
        "/airflowx/execution/store/ti/x"
    )
    assert route_path({"path": "/execution/store/ti/x"}) == "/execution/store/ti/x"


@pytest.mark.parametrize(
    ("status", "klass"), [(200, "2xx"), (204, "2xx"), (307, "3xx"), (404, "4xx"), (422, "4xx"), (503, "5xx")]
)
def test_status_class(status: int, klass: str) -> None:
    assert status_class(status) == klass


@pytest.mark.parametrize(
    ("operation", "status", "outcome"),
    [
        ("get", 200, "read_found"),
        ("get", 404, "read_absent"),  # the client's default is returned: an absent read
        ("get", 401, "error"),
        ("get", 500, "error"),
        ("set", 204, "write"),
        ("set", 404, "error"),  # unknown task instance or asset: not an absent read
        ("set", 422, "error"),
        ("delete", 204, "delete"),
        ("delete", 404, "error"),
        # A mutation from an attempt Airflow 3.4 archived (a retry or a clear replaced it): 410 Gone,
        # which the task side sees as the accessor's exception.
        ("set", 410, "error"),
        ("delete", 410, "error"),
        ("clear", 410, "error"),
        ("clear", 204, "clear"),
        ("clear", 500, "error"),
    ],
)
def test_outcome_mirrors_the_task_side(operation: str, status: int, outcome: str) -> None:
    assert outcome_of(operation, status) == outcome


@pytest.mark.parametrize(
    ("operation", "request_bytes", "response_bytes", "size"),
    [
        ("set", 0, 0, "le_1KiB"),
        ("set", 1024, 0, "le_1KiB"),
        ("set", 1025, 0, "le_64KiB"),
        ("set", 65536, 10**7, "le_64KiB"),  # the request body is the value of a set
        ("set", 65537, 0, "le_1MiB"),
        ("set", 1048576, 0, "le_1MiB"),
        ("set", 1048577, 0, "gt_1MiB"),
        ("get", 10**7, 400, "le_1KiB"),  # the response body is the value of a get
        ("get", 0, 688_909, "le_1MiB"),
        ("delete", 500, 0, "none"),
        ("clear", 0, 0, "none"),
    ],
)
def test_value_size(operation: str, request_bytes: int, response_bytes: int, size: str) -> None:
    assert value_size(operation, request_bytes, response_bytes) == size


_ROUTE_TABLE = textwrap.dedent(
    """
    import json
    from airflow.api_fastapi.execution_api.routes import execution_api_router
    print(json.dumps([
        {"name": r.name, "methods": sorted(r.methods), "regex": r.path_regex.pattern, "path": r.path}
        for r in execution_api_router.routes if hasattr(r, "methods")
    ]))
    """
)


@pytest.fixture(scope="module")
def airflow_routes(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, object]]:
    from testbed.airflow import clean_environ

    env = {**clean_environ(), "AIRFLOW_HOME": str(tmp_path_factory.mktemp("routes-home"))}
    done = subprocess.run(
        [sys.executable, "-c", _ROUTE_TABLE],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    routes: list[dict[str, object]] = json.loads(done.stdout.strip().splitlines()[-1])
    return routes


def _expected(name: str) -> tuple[str, str] | None:
    if "_state_store" not in name:
        return None
    operation, store = name.split("_")[:2]
    return store, operation


@pytest.mark.airflow
def test_classification_agrees_with_airflow_s_route_table(airflow_routes: list[dict[str, object]]) -> None:
    """For every probe path and method: the route Starlette picks in Airflow's table decides."""
    import re

    store_routes = {r["name"]: r for r in airflow_routes if "_state_store" in str(r["name"])}
    assert len(store_routes) == 12, sorted(store_routes)  # the four task and eight asset routes
    probes = {"/store/ti", "/store/ti/", "/store/ti//k", "/store/asset", "/store/asset/by-name"}
    for route in airflow_routes:
        for ti in (UUID, "x"):
            for key in ("k", "a/b", ""):
                path = str(route["path"]).replace("{task_instance_id}", ti).replace("{key:path}", key)
                probes |= {path, path + "/", path + "x"}
    for probe in sorted(probes):
        for method in ("GET", "PUT", "DELETE", "POST", "PATCH", "HEAD"):
            chosen = next(
                (
                    r
                    for r in airflow_routes
                    if re.fullmatch(str(r["regex"]), probe) and method in r["methods"]  # type: ignore[operator]
                ),
                None,
            )
            expected = _expected(str(chosen["name"])) if chosen else None
            assert route_of(method, "/execution" + probe) == expected, (method, probe, chosen)


def test_every_route_is_in_the_in_flight_table() -> None:
    assert set(ROUTES) == {(s, o) for s in ("task", "asset") for o in ("get", "set", "delete", "clear")}
