"""A cold machine's peer build in the background, and the tests that wait for it.

``scripts/test`` leaves ``python -m testbed.peers build`` running while the tests that need no peer
run; a test that then looks up a pin (``peers.binary``) that the build has still to make waits for
it, and one the build does not make fails at once, naming the setup command. Here a real second
process plays the build (it announces its pins as the build does, then puts a pin in the cache or
exits without it) in a cache of the test's own: nothing is compiled.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from support import peer_order
from testbed import peers
from testbed.repository import ROOT
from testbed.waiting import wait_until

PIN = peers.pin_for("statsd_exporter", "chart")
# The locator itself, not the suite's check that only tests marked `peers` use it (support.peer_order).
binary = getattr(peers.binary, "__wrapped__", peers.binary)
OTHER = peers.pin_for("statsd_exporter", "minimum")

# The build's stand-in: announces PIN, waits for the test's word, then builds it (a stamp and an
# executable, as ensure() leaves them) or exits without it.
BUILD = """
import json, os, sys, time
from pathlib import Path
from testbed import peers
pin = peers.pin_for("statsd_exporter", "chart")
go = Path(sys.argv[1])
with peers._announced([pin]):
    print("announced", flush=True)
    while not go.exists():
        time.sleep(0.01)
    if go.read_text() == "build":
        bin_dir = peers.pin_dir(pin) / "bin"
        bin_dir.mkdir(parents=True)
        program = bin_dir / "statsd_exporter"
        program.write_text("#!/bin/sh\\n")
        program.chmod(0o755)
        (peers.pin_dir(pin) / "stamp.json").write_text(json.dumps({"recipe": peers.recipe_digest(pin)}))
"""


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "peers"
    monkeypatch.setenv(peers.ENV_CACHE, str(root))
    return root


@pytest.fixture
def build(cache: Path, tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], Path]]:
    go = tmp_path / "go"
    env = {**os.environ, peers.ENV_CACHE: str(cache), "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-c", BUILD, str(go)], cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "announced"
    yield proc, go
    if proc.poll() is None:
        go.write_text("stop")
    proc.wait(30)


def looked_up(program: str, role: str) -> tuple[threading.Thread, dict[str, object]]:
    """``peers.binary(program, role)`` in a thread (it may wait); the dict gets its path or error."""
    got: dict[str, object] = {}

    def look() -> None:
        try:
            got["path"] = binary(program, role)
        except peers.PeerMissing as missing:
            got["error"] = missing

    thread = threading.Thread(target=look, daemon=True)
    thread.start()
    return thread, got


def test_a_running_build_is_seen_with_its_pins(build: tuple[subprocess.Popen[str], Path]) -> None:
    proc, _ = build
    running = peers.running_build()
    assert running == {"pid": str(proc.pid), "pins": [PIN.key]}


def test_no_build_running_means_none(cache: Path) -> None:
    assert peers.running_build() is None


def test_a_test_needing_a_pin_the_build_still_makes_waits_for_it_then_gets_its_path(
    build: tuple[subprocess.Popen[str], Path], cache: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    proc, go = build
    thread, got = looked_up("statsd_exporter", "chart")
    wait_until(lambda: "peers: waiting for the build" in capfd.readouterr().err, timeout=30)
    assert thread.is_alive() and not got  # still waiting: the pin is not there yet
    go.write_text("build")
    thread.join(30)
    assert got == {"path": cache / PIN.key / "bin" / "statsd_exporter"}
    assert proc.wait(30) == 0


def test_a_build_that_ends_without_the_pin_ends_the_wait_with_the_setup_command(
    build: tuple[subprocess.Popen[str], Path], capfd: pytest.CaptureFixture[str]
) -> None:
    proc, go = build
    thread, got = looked_up("statsd_exporter", "chart")
    wait_until(lambda: "peers: waiting for the build" in capfd.readouterr().err, timeout=30)
    go.write_text("stop")
    thread.join(60)
    assert not thread.is_alive()
    assert proc.wait(30) == 0
    assert "scripts/setup dev" in str(got["error"])
    assert peers.running_build() is None


def test_a_pin_the_running_build_does_not_make_fails_at_once(
    build: tuple[subprocess.Popen[str], Path],
) -> None:
    assert not peers.wait_for_build(OTHER)
    with pytest.raises(peers.PeerMissing, match=rf"{OTHER.version}.*scripts/setup dev"):
        binary("statsd_exporter", "minimum")
    assert peers.running_build() is not None  # the build goes on


def test_the_build_order_starts_with_what_the_first_peer_tests_use() -> None:
    ordered = [pin.key for pin in peers.build_order(peers.PINS)]
    assert ordered[:3] == ["prometheus-3.16.0", "statsd_exporter-0.28.0", "otelcol-0.165.0"]
    assert sorted(ordered) == sorted(pin.key for pin in peers.PINS)
    assert set(peers.BUILD_ORDER) <= {pin.key for pin in peers.PINS}


# --- the order of the suite --------------------------------------------------------------------


class _Item:
    def __init__(self, name: str, marked: bool) -> None:
        self.nodeid = name
        self.marked = marked

    def get_closest_marker(self, name: str) -> object | None:
        return object() if self.marked and name == peer_order.MARK else None


def test_the_peer_tests_run_last_each_group_in_its_own_order() -> None:
    items = [_Item("a", True), _Item("b", False), _Item("c", True), _Item("d", False)]
    peer_order.order(items)  # type: ignore[arg-type]
    assert [item.nodeid for item in items] == ["b", "d", "a", "c"]


def test_an_unmarked_test_that_uses_a_built_pin_fails_naming_the_mark(tmp_path: Path) -> None:
    found = tmp_path / "promtool"
    lookup = peer_order.checked(lambda program, role: found)
    peer_order._current.append(_Item("tests/x.py::test_unmarked", False))  # type: ignore[arg-type]
    try:
        with pytest.raises(
            pytest.fail.Exception, match=r"test_unmarked uses promtool from prometheus-3\.16\.0"
        ):
            lookup("promtool", "newest")
        # Debian's minimum Prometheus is there from the start: no mark needed.
        assert lookup("promtool", "minimum") == found
        peer_order._current.append(_Item("tests/x.py::test_marked", True))  # type: ignore[arg-type]
        assert lookup("promtool", "newest") == found
    finally:
        del peer_order._current[-2:]


def test_a_second_setup_leaves_the_build_to_the_one_running(
    build: tuple[subprocess.Popen[str], Path], cache: Path
) -> None:
    """scripts/setup started again while a build runs (a second terminal, a developer's second
    scripts/test) leaves the build to the one running: the second start builds nothing."""
    proc, _ = build
    second = subprocess.run(
        [sys.executable, "-m", "testbed.peers", "build", "--unless-running", "statsd_exporter:chart"],
        cwd=ROOT,
        env={**os.environ, peers.ENV_CACHE: str(cache)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert second.returncode == 0, second.stderr
    assert second.stdout == f"peers: a build is already running (pid {proc.pid}): {PIN.key}\n"
    assert not (cache / ".logs").exists()  # nothing was built
