"""The tests that use a pinned peer (``testbed.peers``) run after all the others.

On a cold machine ``scripts/test`` does not wait for the peers' build (a quarter of an hour of
compiling): it goes on in the background at the lowest CPU priority while the tests that need no
peer run, and a peer test that comes to a pin still being built waits for it
(``testbed.peers.wait_for_build``). That only saves time if the peer tests come last, so
they are marked (``pytestmark = pytest.mark.peers`` in their module) and sorted after the rest,
each group in its own order.

The mark is held honest: a test without it that looks up a built pin fails, naming the pin and
the mark (a pin Debian's packages provide, the minimum Prometheus, is there from the start and
needs no mark). On a warm machine the order changes nothing but where the peer tests print.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from testbed import peers

MARK = "peers"
_current: list[pytest.Item] = []


def order(items: list[pytest.Item]) -> None:
    """Stable: the unmarked tests first, then the marked ones."""
    items.sort(key=lambda item: item.get_closest_marker(MARK) is not None)


def checked(lookup: Callable[[str, str], Path]) -> Callable[[str, str], Path]:
    """``peers.binary`` that refuses, inside a test without the mark, a pin that has to be built."""

    @functools.wraps(lookup)
    def binary(program: str, role: str) -> Path:
        if _current and program in peers.PROGRAMS:
            item = _current[-1]
            pin = peers.pin_for(peers.PROGRAMS[program], role)
            if pin.builder != "system" and item.get_closest_marker(MARK) is None:
                pytest.fail(
                    f"{item.nodeid} uses {program} from {pin.key} (role {role}) without the `{MARK}` "
                    f"mark: add `pytestmark = pytest.mark.{MARK}` to its module, so that it runs after "
                    "the tests that need no peer (tests/support/peer_order.py)",
                    pytrace=False,
                )
        return lookup(program, role)

    return binary


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    _current.append(item)
    try:
        yield
    finally:
        _current.pop()


def pytest_configure(config: pytest.Config) -> None:
    peers.binary = checked(peers.binary)  # type: ignore[assignment]


def pytest_unconfigure(config: pytest.Config) -> None:
    peers.binary = getattr(peers.binary, "__wrapped__", peers.binary)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    order(items)
