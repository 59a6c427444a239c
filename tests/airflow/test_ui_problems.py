"""What the State store pages tell any signed-in user of a failure: its kind, never its details.

The tab's JSON is read by whoever may read the DAG; a database's or Prometheus's own error text
names hosts, ports and database users. So the JSON's ``problem`` says what kind of thing failed,
and the API server's log (read by its operators) says exactly what.

A real PostgreSQL (a throwaway server) refusing a role that does not exist, and a Prometheus
address nothing listens on; the JSON is what the routes serve (``store_metrics.ui.payload``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import pytest
from sqlalchemy import create_engine

from store_metrics import logs
from store_metrics.config.reader import OptionValues, environment_reader, read_options
from store_metrics.inventory.database import Database
from store_metrics.ui.payload import calls_payload, dag_payload
from store_metrics.ui.sources import Sources
from testbed.databases import ThrowawayPostgres
from testbed.ports import free_port

ROLE = "reader_alice"


def settings(**env: str) -> OptionValues:
    environ = {f"AIRFLOW__STORE_METRICS__{k.upper()}": v for k, v in env.items()}
    return read_options(environment_reader(environ), environ=environ)


class Said(logging.Handler):
    """What store-metrics logs, whatever Airflow's logging set up does with it."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())

    def about(self, what: str) -> str:
        (line,) = [line for line in self.lines if what in line]
        return line


@pytest.fixture
def said() -> Iterator[Said]:
    handler = Said()
    logs.forget("ui:")
    logs.logger.addHandler(handler)
    yield handler
    logs.logger.removeHandler(handler)
    logs.forget("ui:")


def test_a_database_error_shows_its_kind_in_the_json_and_its_host_and_user_only_in_the_log(
    postgres: ThrowawayPostgres, said: Said
) -> None:
    sources = Sources(settings(ui_timeout="5"))
    url = f"postgresql+psycopg2://{ROLE}@127.0.0.1:{postgres.port}/airflow"
    sources._database = Database(create_engine(url), 5.0)

    body = json.dumps(dag_payload("orders", sources.dag("orders"), sources.options, ""))

    page = json.loads(body)
    assert page["problem"] == "the metadata database could not be reached"
    for detail in (ROLE, "127.0.0.1", str(postgres.port), "does not exist", "FATAL"):
        assert detail not in body
    line = said.about("reading the state store tables")
    assert f'role "{ROLE}" does not exist' in line and f'"127.0.0.1", port {postgres.port}' in line
    assert line.endswith(
        "the pages show the last good answer, if any, and that the metadata database could not be "
        "reached (said once until it works again)"
    )


def test_a_prometheus_error_shows_its_kind_in_the_json_and_its_address_only_in_the_log(said: Said) -> None:
    port = free_port()
    sources = Sources(settings(ui_prometheus_url=f"http://127.0.0.1:{port}", ui_timeout="2"))

    answer = sources.calls("orders", "1h")
    assert answer is not None
    body = json.dumps(calls_payload("1h", answer))

    assert json.loads(body)["problem"] == "Prometheus could not be reached"
    for detail in (str(port), "127.0.0.1", "refused", "Errno"):
        assert detail not in body
    line = said.about("querying Prometheus")
    assert f"127.0.0.1:{port}" in line and "Connection refused" in line
