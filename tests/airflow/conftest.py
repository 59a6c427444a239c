"""Fixtures of the Airflow tests: throwaway database servers, and the inventory's world on each.

A test module picks its world's database with ``pytest.mark.parametrize("world", [name],
indirect=True)``: ``sqlite`` (the default), ``postgres`` or ``mariadb``. Each world is built once
per session (real DAG runs and Airflow's own writes: ``support.inventory_world.build_world``),
each server started once per session.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from support.inventory_world import World, build_world
from testbed.databases import ThrowawayMariaDB, ThrowawayPostgres


@pytest.fixture(scope="session")
def postgres() -> Iterator[ThrowawayPostgres]:
    """A throwaway PostgreSQL; the test is skipped, with the reason, where none can run."""
    why_not = ThrowawayPostgres.unavailable()
    if why_not:
        pytest.skip(why_not)
    pg = ThrowawayPostgres()
    try:
        pg.init()
        yield pg
    finally:
        pg.close()


@pytest.fixture(scope="session")
def mariadb() -> Iterator[ThrowawayMariaDB]:
    """A throwaway MariaDB; the test fails, and says why, where none can run (``scripts/setup dev``
    installs it)."""
    why_not = ThrowawayMariaDB.unavailable()
    if why_not:
        pytest.fail(f"the MariaDB inventory test cannot run: {why_not}", pytrace=False)
    db = ThrowawayMariaDB()
    try:
        db.init()
        yield db
    finally:
        db.close()


@pytest.fixture(scope="session")
def _worlds() -> dict[str, World]:
    return {}


@pytest.fixture
def world(
    request: pytest.FixtureRequest, _worlds: dict[str, World], tmp_path_factory: pytest.TempPathFactory
) -> World:
    """The inventory's world on the database the test names (``sqlite`` unless parametrized)."""
    database = str(getattr(request, "param", "sqlite"))
    if database not in _worlds:
        home = tmp_path_factory.mktemp(f"inventory-{database}")
        if database == "sqlite":
            url = f"sqlite:///{home / 'airflow.db'}"
        else:
            url = request.getfixturevalue(database).url
        _worlds[database] = build_world(home, url)
    return _worlds[database]
