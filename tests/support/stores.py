"""An in-memory task store accessor for tests that need a store but not Airflow."""

from __future__ import annotations

from typing import Any


class DictStore:
    """An in-memory stand-in for the supervisor round trip of Airflow's task store accessor.

    A fake only for the round trip (which needs a running Airflow): the wrappers around it are
    the real ones, and test_accessors.py checks this shape against Airflow 3.3.2's accessor.
    """

    def __init__(self) -> None:
        self.data: dict[str, Any] = {}

    def get(self, key: str, default: Any = None) -> Any:
        return self.data.get(key, default)

    def set(self, key: str, value: Any, *, retention: Any = None) -> None:
        self.data[key] = value

    def delete(self, key: str) -> None:
        self.data.pop(key, None)

    def clear(self) -> None:
        self.data.clear()
