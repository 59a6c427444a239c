"""Which Execution API requests are state store calls, and how to label them (pure functions).

Mirrors the route table of ``airflow/api_fastapi/execution_api/routes`` (Airflow 3.3); the
tests check it against the real router. Labels never carry an id or a key.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, Final

from ..catalogue import Operation, Outcome, Store

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: (store, operation) of a state store route.
Route = tuple[str, str]

#: Where the API server's core app mounts the Execution API. An Execution API app used on its
#: own (the in-process one of ``dag.test()`` and the triggerer) serves the same routes at ``""``.
EXECUTION_API_MOUNT: Final = "/execution"
_TASK: Final = Store.TASK.tag
_ASSET: Final = Store.ASSET.tag
#: Every state store path contains this; anything else is passed on after this one test.
MARK: Final = f"{EXECUTION_API_MOUNT}/store/"
#: The task store routes: ``{TASK_PREFIX}{ti_id}`` (clear) and ``{TASK_PREFIX}{ti_id}/{key}``.
TASK_PREFIX: Final = f"{MARK}ti/"
_ASSET_ROUTES: Final[dict[tuple[str, str], Route]] = {
    (method, f"{MARK}asset/{by}/{what}"): (_ASSET, operation)
    for by in ("by-name", "by-uri")
    for method, what, operation in (
        ("GET", "value", Operation.GET.value),
        ("PUT", "value", Operation.SET.value),
        ("DELETE", "value", Operation.DELETE.value),
        ("DELETE", "clear", Operation.CLEAR.value),
    )
}
_TASK_KEY_OPERATIONS: Final = {
    "GET": Operation.GET.value,
    "PUT": Operation.SET.value,
    "DELETE": Operation.DELETE.value,
}
#: Every route, in a fixed order (the in-flight table and the docs use it).
ROUTES: Final[tuple[Route, ...]] = (
    *((store.tag, operation.value) for store in Store for operation in Operation),
)
NONE_ROUTE: Final[Route] = ("none", "none")

_SIZE_CLASSES: Final = ((1024, "le_1KiB"), (64 * 1024, "le_64KiB"), (1024 * 1024, "le_1MiB"))


def route_path(scope: Scope) -> str:
    """The path the app routes on: ``scope["path"]`` without the ``root_path`` prefix, if it has it."""
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    if root and path.startswith(root) and (len(path) == len(root) or path[len(root)] == "/"):
        return path[len(root) :]
    return path


def route_of(method: str, path: str) -> Route | None:
    """The (store, operation) of a state store route of the Execution API, or ``None``.

    Mirrors the route table of ``airflow/api_fastapi/execution_api/routes`` (Airflow 3.3):

    * ``GET|PUT|DELETE /execution/store/ti/{ti_id}/{key:path}``: task get / set / delete (the
      key may contain ``/``, and an empty key still reaches the route, which answers 422);
    * ``DELETE /execution/store/ti/{ti_id}``: task clear;
    * ``GET|PUT|DELETE /execution/store/asset/by-name/value`` and ``by-uri/value``: asset get /
      set / delete; ``DELETE .../by-name/clear`` and ``by-uri/clear``: asset clear.

    Anything else (other methods, other paths) is not a state store route.
    """
    if path.startswith(TASK_PREFIX):
        rest = path[len(TASK_PREFIX) :]
        ti_id, slash, _key = rest.partition("/")
        if not ti_id:
            return None
        if slash:
            operation = _TASK_KEY_OPERATIONS.get(method)
            return (_TASK, operation) if operation else None
        return (_TASK, Operation.CLEAR.value) if method == "DELETE" else None
    return _ASSET_ROUTES.get((method, path))


def status_class(status: int) -> str:
    """``2xx``, ``4xx``, ``5xx`` (and ``1xx``/``3xx``)."""
    return f"{status // 100}xx"


_COMPLETED: Final = {
    Operation.GET.value: Outcome.READ_FOUND.value,
    Operation.SET.value: Outcome.WRITE.value,
    Operation.DELETE.value: Outcome.DELETE.value,
    Operation.CLEAR.value: Outcome.CLEAR.value,
}


def outcome_of(operation: str, status: int) -> str:
    """The task side's outcome for a request: a GET answered 404 is an absent read.

    Any other 4xx/5xx is an error, the 410 Gone Airflow 3.4 answers a mutation from an archived
    attempt among them (the task side counts the exception its accessor raises for it).
    """
    if 200 <= status < 300:
        return _COMPLETED[operation]
    if status == 404 and operation == Operation.GET.value:
        return Outcome.READ_ABSENT.value
    return Outcome.ERROR.value


def value_size(operation: str, request_bytes: int, response_bytes: int) -> str:
    """Size class of the value a request moved: the body of a set, the response to a get."""
    if operation == Operation.SET.value:
        size = request_bytes
    elif operation == Operation.GET.value:
        size = response_bytes
    else:
        return "none"
    for bound, name in _SIZE_CLASSES:
        if size <= bound:
            return name
    return "gt_1MiB"
