"""Who made a state store request: the task instance the Execution API verified, and its tags.

For ``count_at = api_server``, which counts each state store request as the task that made it would
have (``store_calls`` counts). Every state store call of every task, whatever its SDK, arrives
at an API server worker as an Execution API request. The Execution API has already worked out who is
calling: its JWT bearer dependency validates the task token and keeps the result on the request's
ASGI scope (``scope["ti_token"]``, a ``TIToken`` whose ``id`` is the task instance id: the token's
``sub``; on the task store routes ``require_auth(scopes=["ti:self"])`` also checks that it equals
the ``{task_instance_id}`` of the path). So, once a request has been answered:

* ``requester`` reads the task instance id the Execution API verified (or ``None`` for a
  request it refused as unauthenticated, 401/403 with no valid token);
* ``StoreCalls`` turns it into the task side's tags,
  ``dag_id``, ``task_id``, ``run_type``, ``operator`` (and ``team_name`` on a multi-team
  deployment), through a bounded LRU cache keyed by task instance id
  (``lookups``); a task instance it has not seen costs one metadata query
  (``lookup_task_instance``), run on a thread of its own (never on the event loop), after the
  response has been sent, once per task instance and worker however many of its requests arrive
  while the query runs;
* and counts the request on the task side's counter, ``<prefix>.task_state_store.<outcome>`` or
  ``<prefix>.asset_state_store.<outcome>``, from the response: a GET answered with a value is
  ``read_found``, a GET answered 404 ``read_absent``, a PUT ``write``, a DELETE ``delete`` (a key)
  or ``clear`` (all keys), any other 4xx/5xx ``error{operation}``.

**Archived attempts.** A task instance id names one attempt. Airflow 3.4 keeps an attempt that a
retry or a clear replaced in ``task_instance`` with ``working_set`` NULL, and ORM queries on
``TaskInstance`` hide such rows unless they pass ``include_all_attempts`` (``models/taskinstance.py``):
the query passes it, so an archived attempt's requests count under its own DAG and task. Airflow 3.3
moves a replaced attempt to ``task_instance_history`` (same ``task_instance_id``): the query looks
there when ``task_instance`` has no such row. What Airflow answers such an attempt: a GET 404 (the
task side's ``read_absent``: the accessor returns the default), a PUT or DELETE 410 Gone on 3.4
(404 on 3.3): ``error{operation}``, as the task side counts the exception the accessor raises.

Never an id, a key or an asset in a tag: the id is only the cache key. Requests that carry no
task instance get honest tags: ``UNKNOWN_TAGS`` (refused as unauthenticated, a token whose
subject is no task instance, or a metadata database that did not answer) and ``WATCHER_TAGS``
(the null task instance id, which Airflow's in-process Execution API gives an asset watcher's
trigger; a real triggerer never sends those through the API server, it counts its own calls).
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final
from uuid import UUID

from .. import catalogue
from ..catalogue import UNKNOWN, Store, task_tags
from .routes import TASK_PREFIX, Route, Scope, route_path

#: The key under which Airflow's Execution API keeps the validated task token on the ASGI scope
#: (``airflow.api_fastapi.execution_api.security._REQUEST_SCOPE_TOKEN_KEY`` in Airflow 3.3).
TOKEN_SCOPE_KEY: Final = "ti_token"
#: The task instance id of calls that belong to no task instance (an asset watcher's trigger).
NULL_TI: Final = UUID(int=0)
Tags = Mapping[str, str]
#: A request whose caller is not known: refused as unauthenticated, or no such task instance.
UNKNOWN_TAGS: Final[Tags] = task_tags(dag_id=UNKNOWN, task_id=UNKNOWN, run_type=UNKNOWN, operator=UNKNOWN)
#: A request made as the null task instance: an asset watcher's trigger (as the triggerer tags its
#: own calls: no DAG, ``run_type="asset_watcher"``; which asset and trigger the API cannot tell).
WATCHER_TAGS: Final[Tags] = task_tags(
    dag_id=catalogue.DAG_ID_NONE,
    task_id=UNKNOWN,
    run_type=catalogue.RUN_TYPE_ASSET_WATCHER,
    operator=UNKNOWN,
)

#: Statement timeout of each task instance lookup (ms), as the inventory sets one
#: (``store_metrics.inventory.database.statement_timeout``).
LOOKUP_TIMEOUT_MS: Final = 5_000
#: Looks a task instance id up in the metadata database: its ``TaskAttempt`` (or only its tags,
#: the try then unknown), or ``None`` when there is no such task instance. Blocking: it runs on a
#: lookup thread.
Lookup = Callable[[UUID], "TaskAttempt | Tags | None"]


# -- who made the request ------------------------------------------------------------------------


def requester(scope: Scope, route: Route, status: int) -> UUID | None:
    """The task instance the Execution API verified this request as coming from, or ``None``.

    ``scope["ti_token"]`` when the Execution API validated a token (Airflow 3.3). Without it (an
    Airflow that no longer keeps the token there), a response other than 401/403 proves the route's
    auth dependency accepted the token: then the path's task instance id (task routes, where
    ``ti:self`` made them equal) or the token's subject (asset routes), read without checking the
    signature again. ``None`` for a request refused as unauthenticated.
    """
    token = scope.get(TOKEN_SCOPE_KEY)
    ident = getattr(token, "id", None)
    if isinstance(ident, UUID):
        return ident
    if status in (401, 403):
        return None
    if route[0] == Store.TASK.tag:
        return _uuid(route_path(scope)[len(TASK_PREFIX) :].partition("/")[0])
    return _uuid(_bearer_subject(scope))


def _uuid(text: str | None) -> UUID | None:
    if not text:
        return None
    try:
        return UUID(text)
    except ValueError:
        return None


def _bearer_subject(scope: Scope) -> str | None:
    """The ``sub`` claim of the request's bearer token, decoded without checking it."""
    for name, value in scope.get("headers") or ():
        if name.lower() != b"authorization":
            continue
        kind, _, token = value.decode("latin-1").partition(" ")
        if kind.lower() != "bearer" or token.count(".") != 2:
            return None
        payload = token.split(".")[1]
        try:
            claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        except (binascii.Error, ValueError):
            return None
        sub = claims.get("sub") if isinstance(claims, dict) else None
        return sub if isinstance(sub, str) else None
    return None


# -- the metadata query ----------------------------------------------------------------------------


def _attempt_statement(model: Any, ident: Any) -> Any:
    """``model``'s row whose ``ident`` column is ``:ti_id``, joined to its ``dag_run`` (and, multi-team,
    to its DAG bundle's team)."""
    from airflow.configuration import conf
    from airflow.models.dagrun import DagRun
    from sqlalchemy import and_, bindparam, select

    statement = select(model.dag_id, model.task_id, model.operator, DagRun.run_type, model.try_number).join(
        DagRun, and_(DagRun.dag_id == model.dag_id, DagRun.run_id == model.run_id)
    )
    if conf.getboolean("core", "multi_team", fallback=False):
        # The joins of airflow.api_fastapi.execution_api.security._team_name_for_ti_stmt, which
        # gives the task side its team_name (dag_run.team_name), as outer joins: one query.
        from airflow.models import DagModel
        from airflow.models.dagbundle import DagBundleModel
        from airflow.models.team import Team

        statement = (
            statement.add_columns(Team.name)
            .outerjoin(DagModel, DagModel.dag_id == model.dag_id)
            .outerjoin(DagBundleModel, DagBundleModel.name == DagModel.bundle_name)
            .outerjoin(DagBundleModel.teams)
        )
    return statement.where(ident == bindparam("ti_id")).limit(1)


@functools.cache
def _statement() -> Any:
    """The attempt in ``task_instance``, archived ones included (Airflow 3.4's ``include_all_attempts``;
    Airflow 3.3 ignores the option)."""
    from airflow.models.taskinstance import TaskInstance

    statement = _attempt_statement(TaskInstance, TaskInstance.id)
    return statement.execution_options(include_all_attempts=True)


@functools.cache
def _history_statement() -> Any:
    """The attempt in ``task_instance_history`` (Airflow 3.3), or ``None`` where there is no such table."""
    try:
        from airflow.models.taskinstancehistory import TaskInstanceHistory
    except ImportError:  # Airflow 3.4 keeps every attempt in task_instance
        return None
    return _attempt_statement(TaskInstanceHistory, TaskInstanceHistory.task_instance_id)


@dataclass(frozen=True)
class TaskAttempt:
    """What the API server needs to know of one attempt (one task instance id): its tags, its try."""

    tags: Tags
    #: The attempt's ``try_number`` (fixed for a task instance id: a retry gets a new id).
    #: 0 when it is not known.
    try_number: int = 0


def lookup_task_instance(ti_id: UUID) -> Tags | None:
    """The task side's tags of task instance (attempt) ``ti_id`` (``lookup_attempt``'s tags)."""
    attempt = lookup_attempt(ti_id)
    return None if attempt is None else attempt.tags


def lookup_attempt(ti_id: UUID) -> TaskAttempt | None:
    """The task side's tags of task instance (attempt) ``ti_id``, and its try, from the metadata database.

    One query; a second one (Airflow 3.3's ``task_instance_history``) only for an id that is not in
    ``task_instance``. ``operator`` is the task instance's ``operator`` column: the operator's class
    name as the DAG was serialized (``task_type``), which is what the task side reports
    (``type(ti.task).__name__``; ``_PythonDecoratedOperator`` for ``@task``), not the display name
    (``custom_operator_name``, ``@task``). ``None`` when there is no such attempt. Read-only, each statement
    cancelled after ``LOOKUP_TIMEOUT_MS`` (a lock held on the table, a database that has
    stopped answering): the request is then counted as ``unknown``.
    """
    from airflow.utils.session import create_session

    from ..inventory.database import statement_timeout, with_mysql_timeout

    ms = LOOKUP_TIMEOUT_MS
    with create_session(scoped=False) as session, statement_timeout(session.connection(), ms):
        row = session.execute(with_mysql_timeout(_statement(), ms), {"ti_id": ti_id}).first()
        history = _history_statement() if row is None else None
        if history is not None:
            row = session.execute(with_mysql_timeout(history, ms), {"ti_id": ti_id}).first()
    if row is None:
        return None
    team = row[5] if len(row) > 5 else None
    tags = task_tags(
        dag_id=str(row[0]),
        task_id=str(row[1]),
        run_type=str(row[3] or UNKNOWN),
        operator=str(row[2] or UNKNOWN),
        team_name=str(team) if team else None,
    )
    return TaskAttempt(tags, int(row[4] or 0))


# -- counting ----------------------------------------------------------------------------------
