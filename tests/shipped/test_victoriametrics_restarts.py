"""Two clusters scraped by agents into one VictoriaMetrics, and what a restart there costs, through
the real programs.

``east`` is Prometheus 3 (the newest pin) in agent mode, ``west`` the pinned vmagent: each scrapes its
own statsd_exporter (the Airflow chart's pin, the exported mappings, fed DogStatsD by a feeder) with
the exported job and a ``cluster`` external label, and remote-writes all of it to one VictoriaMetrics
(single-node, ``-dedup.minScrapeInterval=1ms``: one sample per series and timestamp). Two vmalerts,
an HA pair with the same flags, evaluate the exported rules (``store-metrics export --target
victoriametrics``) globally every second and write what they record back: the pair's evaluations of
the same slot are the same sample, kept once.

* the recorded calls of each cluster are exactly the calls its feeder made, through either agent,
  per cluster and summed over them, with both vmalerts writing;
* an agent restarted while its feeder makes a pass, and one vmalert of the pair down meanwhile: the
  rules bridge the scrape gap (as for a Prometheus restart) and the other vmalert evaluates every
  slot: exact;
* the storage down for longer than ``rule_offset`` after a pass: the agents keep every sample and
  deliver it once the storage is back, but both vmalerts' evaluations of those slots failed, and an
  evaluation missed is never made again: that pass's calls are not recorded. vmalert's replay of the
  window (docs/scaling-out.md, "Restarts") evaluates those slots: exact again, the slots recorded
  twice (the window reaches into evaluations that did run) kept once.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from support import e2e, global_layers
from support.exported import run_export
from support.feeder import Feeder
from support.peer_servers import StatsdExporter
from support.servers import ServerProcess
from support.victoriametrics import PrometheusAgent, VictoriaMetrics, VmAgent, VmAlert, replay

pytestmark = [pytest.mark.prometheus, pytest.mark.slow, pytest.mark.peers]

AGENTS = {"east": PrometheusAgent, "west": VmAgent}
#: rule_offset as shipped: what the rules read must be in VictoriaMetrics by then (remote write)
SETTINGS = {**e2e.E2E_SETTINGS, "rule_offset": "30s"}
OFFSET = 30.0
#: how long the storage stays down after a pass is made: past the slot that would record it
#: (rule_offset and one rule interval after its samples), with a margin for a loaded machine
OUTAGE_AFTER_PASS = OFFSET + 10.0


@dataclass
class AgentCluster:
    name: str
    statsd: StatsdExporter
    feeder: Feeder
    agent: ServerProcess


@dataclass
class Topology:
    vm: VictoriaMetrics
    vmalerts: list[VmAlert]
    clusters: dict[str, AgentCluster]
    rules: list[Path]


@pytest.fixture(scope="module")
def topology(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Topology]:
    tmp = tmp_path_factory.mktemp("vm-agents")
    done = run_export(
        tmp / "exported", "--target", "victoriametrics", *(f"--set={k}={v}" for k, v in SETTINGS.items())
    )
    assert done.returncode == 0, done.stderr
    exported = tmp / "exported"
    rules = [exported / "collector" / "rules.yml"]
    with contextlib.ExitStack() as stack:
        vm = VictoriaMetrics(tmp, "-dedup.minScrapeInterval=1ms")
        stack.callback(vm.stop)
        clusters = {}
        for name, agent_of in AGENTS.items():
            (tmp / name).mkdir()
            statsd, feeder = global_layers.fed_exporter(tmp / name, exported)
            stack.callback(statsd.stop)
            stack.callback(feeder.stop)
            agent = agent_of(tmp / name, global_layers.scraping(name, exported, statsd), vm)
            stack.callback(agent.stop)
            clusters[name] = AgentCluster(name, statsd, feeder, agent)
        vmalerts = []
        for name in ("vmalert-a", "vmalert-b"):
            vmalert = VmAlert(tmp, rules, vm, name=name)
            stack.callback(vmalert.stop)
            vmalerts.append(vmalert)
        yield Topology(vm, vmalerts, clusters, rules)


def recorded_calls(topology: Topology, since: float) -> dict[str, dict[object, float]]:
    return {name: global_layers.recorded(topology.vm.query, since, name) for name in topology.clusters}


def test_each_agent_s_calls_are_recorded_exactly(topology: Topology) -> None:
    global_layers.wait_until_scraped(topology.vm.query, set(topology.clusters))
    global_layers.make_passes_and_check_them(topology.clusters, {"east": 2, "west": 1}, topology.vm.query)


def test_an_agent_restart_and_one_vmalert_down_lose_no_call(topology: Topology) -> None:
    """Each agent stopped, its feeder's pass made meanwhile, the agent started again; the pair's first
    vmalert down all the while (then back)."""
    first = topology.vmalerts[0]
    first.stop()
    since = time.time()
    for member in topology.clusters.values():
        member.agent.stop()
        assert member.feeder.command("pass") == "done"
        member.agent.start()
    wanted = {name: e2e.feeder_passes(1) for name in topology.clusters}
    with contextlib.suppress(AssertionError):  # compared exactly below, whatever was recorded
        e2e.wait_for(
            lambda: recorded_calls(topology, since) == wanted, global_layers.WAIT, "the pass recorded"
        )
    assert recorded_calls(topology, since) == wanted
    first.start()


def test_the_storage_down_loses_its_slots_calls_until_vmalert_replays_them(topology: Topology) -> None:
    vm = topology.vm
    vm.stop()
    down = time.time()
    for member in topology.clusters.values():
        assert member.feeder.command("pass") == "done"
    passed = time.time()
    # the outage itself, not a wait for something to happen: past the slots that read the pass
    time.sleep(max(0.0, passed + OUTAGE_AFTER_PASS - time.time()))
    vm.start()
    back = time.time()
    # both vmalerts evaluate again, reading each cluster's samples from after the outage: the agents
    # send in order, so each agent's queue of the outage is delivered by then
    newest = f"max by (cluster) (timestamp({e2e.CALLS}))"
    e2e.wait_for(
        lambda: (
            {s["metric"]["cluster"] for s in vm.query(newest) if float(s["value"][1]) > back + OFFSET + 2}
            == set(topology.clusters)
        ),
        global_layers.WAIT,
        "an evaluation reading past the outage, each cluster",
    )
    # no evaluation read the pass: its slots came while the storage was down
    assert recorded_calls(topology, down) == {name: {} for name in topology.clusters}

    replayed = replay(topology.rules, vm, down - 1, back + OFFSET + 2)
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    wanted = {name: e2e.feeder_passes(1) for name in topology.clusters}
    with contextlib.suppress(AssertionError):  # compared exactly below, whatever was recorded
        e2e.wait_for(lambda: recorded_calls(topology, down) == wanted, global_layers.WAIT, "the replay")
    assert recorded_calls(topology, down) == wanted
