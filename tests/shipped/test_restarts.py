"""The recorded calls across a restart of each peer, on the real peers (docs/alerts.md, "Across a
restart or upgrade").

Two feeders (``support.feeder``, no Airflow) make the same pass of calls through the instrumented
wrappers, on command: one sends DogStatsD, fanned out byte for byte to statsd_exporter (the Airflow
chart's pin, with the exported mappings) and to the Collector's StatsD receiver (the newest pin, the
shipped config with a 1 s ``aggregation_interval`` instead of 10 s, to keep the test short); the
other serves its counters on a Prometheus endpoint (the ``otel`` backend's exporter: what an API
server worker serves with ``count_at = api_server``). Prometheus 3 (the newest pin) scrapes the three
as three deployments (``cluster``) and evaluates every exported rule file, every second.

Each peer is restarted in turn, each time between two passes, and the test waits (bounded) for the
restarted peer's first scrape without the old series, then for the rules to read the next pass:

* statsd_exporter, the Collector, the feeder serving its endpoint (an API server worker): the calls
  recorded over the run are the calls made, per series, though the restarted peer's counters come
  back at exactly their old values (one pass each: growth 0, the case a "lower than before" reset
  check misses);
* Prometheus, on the same TSDB, with a pass made while it is down: counted once when it is back;
* a fresh Prometheus (new TSDB) against peers whose counters hold every pass: nothing recorded and no
  alert at all until the next pass, which is then recorded exactly.

No alert fires at any time (``ALERTS``, over the whole run); the alerts pending are those the calls
themselves hold up (the failing DAG's error ratio, the never-read tasks) and StateStoreMetricsMissing
while a restarted peer serves none of the counters.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from support import e2e
from support.feeder import Feeder
from support.peer_servers import Collector, StatsdExporter, UdpFanout
from support.prometheus import PrometheusServer
from testbed.ports import free_port

pytestmark = [pytest.mark.prometheus, pytest.mark.slow, pytest.mark.peers]

STATSD, COLLECTOR, WORKER = "statsd_exporter", "otelcol", "api-server-worker"
CLUSTERS = (STATSD, COLLECTOR, WORKER)
JOBS = {
    STATSD: "store-metrics-statsd-exporter",
    COLLECTOR: "store-metrics-otel-collector",
    WORKER: "store-metrics-api-server",
}
#: The alerts a pass's calls hold pending (never firing in this test: their ``for`` is minutes), and
#: StateStoreMetricsMissing while a restarted peer serves none of the counters (it fires only if that
#: lasts ``missing_for``).
PENDING = {
    ("StateStoreErrorRateHigh", e2e.ERRORS_DAG),
    ("StateStoreTaskStateNeverRead", e2e.ERRORS_DAG),
    ("StateStoreTaskStateNeverRead", "state_store_metrics_03"),
    ("StateStoreMetricsMissing", ""),
}
#: The rule files loaded: every exported one but the footprint's (no inventory runs here).
RULE_FILES = ("rules.yml", "watcher-rules.yml", "server-rules.yml")
WAIT = 30.0


class Peers:
    """The feeders, the fan-out, statsd_exporter and the Collector, with their scrape targets."""

    def __init__(self, tmp: Path, exported: Path) -> None:
        self.tmp = tmp
        self.closers: list[Any] = []
        mappings = yaml.safe_load((exported / "collector" / "statsd-mapping.yml").read_text())["mappings"]
        self.statsd = self._keep(StatsdExporter(tmp, "chart", mappings))
        shipped = yaml.safe_load((exported / "collector" / "otel-collector.yaml").read_text())
        shipped["receivers"]["statsd"]["aggregation_interval"] = "1s"
        (tmp / "otel-collector.yaml").write_text(yaml.safe_dump(shipped, sort_keys=False))
        self.collector = self._keep(Collector(tmp, "newest", tmp / "otel-collector.yaml"))
        self.fanout = self._keep(UdpFanout([self.statsd.udp_port, self.collector.statsd_port]))
        self.sender = self._keep(Feeder(self.fanout.port, tmp, dogstatsd=True))
        self.worker_port = free_port()
        self.worker = Feeder(self.worker_port, tmp)
        self.targets = {
            STATSD: self.statsd.target,
            COLLECTOR: self.collector.target(),
            WORKER: f"127.0.0.1:{self.worker_port}",
        }

    def _keep(self, closer: Any) -> Any:
        self.closers.append(closer)
        return closer

    def one_pass(self) -> None:
        assert self.sender.command("pass") == "done"
        assert self.worker.command("pass") == "done"

    def restart_worker(self) -> None:
        self.worker.stop()
        self.worker = Feeder(self.worker_port, self.tmp)

    def close(self) -> None:
        for closer in [self.worker, *reversed(self.closers)]:
            with contextlib.suppress(Exception):
                closer.stop() if hasattr(closer, "stop") else closer.close()


def prometheus(tmp: Path, exported: Path, peers: Peers) -> PrometheusServer:
    """Prometheus 3 (newest) with the exported jobs aimed at the peers (a ``cluster`` each) and
    the exported rule files, scraping and evaluating every second."""
    collector = exported / "collector"
    base = yaml.safe_load((collector / "prometheus.yml").read_text())
    jobs = {job["job_name"]: job for job in base["scrape_configs"]}
    config = {
        "global": {
            **base["global"],
            "scrape_interval": "1s",
            "scrape_timeout": "900ms",
            "evaluation_interval": "1s",
        },
        "rule_files": [str(collector / name) for name in RULE_FILES],
        "scrape_configs": [
            {**jobs[JOBS[c]], "static_configs": [{"targets": [peers.targets[c]], "labels": {"cluster": c}}]}
            for c in CLUSTERS
        ],
    }
    tmp.mkdir(exist_ok=True)
    return PrometheusServer(tmp, config, "--storage.tsdb.retention.time=1h", role="newest")


# -- what Prometheus holds and did --------------------------------------------------------------------


def recorded(prom: PrometheusServer, cluster: str, since: float) -> dict[Any, float]:
    """The calls the rules recorded for ``cluster`` since ``since``, per series, keyed as the model is."""
    rng = f"{int(time.time() - since) + 2}s"
    out: dict[Any, float] = {}
    for sample in prom.query(f'sum_over_time({e2e.CALLS}{{cluster="{cluster}"}}[{rng}])'):
        value = float(sample["value"][1])
        if value:
            out[e2e.model_key(sample["metric"], ("job", "cluster"))] = value
    return out


def held(prom: PrometheusServer, cluster: str) -> float:
    """The sum of the state store counters Prometheus last scraped from ``cluster``."""
    return (
        prom.scalar(f'sum({{__name__=~"airflow_(task|asset)_state_store_.+_total",cluster="{cluster}"}})')
        or 0.0
    )


def last_evaluation(prom: PrometheusServer) -> float:
    """When the group recording the calls last ran (the rules API's ``lastEvaluation``)."""
    for group in prom.api("rules")["groups"]:
        if any(rule.get("name") == e2e.CALLS for rule in group["rules"]):
            stamp = group["lastEvaluation"]
            if stamp.startswith("0001-"):
                return 0.0
            head, _, frac = stamp.rstrip("Z").partition(".")
            return datetime.fromisoformat(head + "+00:00").timestamp() + float(f"0.{frac or 0}")
    raise AssertionError("no rule group records the calls")


def read_by_the_rules(prom: PrometheusServer, condition: Callable[[], bool], what: str) -> None:
    """Wait until ``condition`` holds (what Prometheus scraped), then until the rules have evaluated
    twice past ``rule_offset`` after it: every evaluation that can record it has run."""
    e2e.wait_for(condition, WAIT, what)
    seen = time.time()
    e2e.wait_for(lambda: last_evaluation(prom) > seen + 2.5, WAIT, f"two rule evaluations after {what}")


def scraped_without_series(prom: PrometheusServer, cluster: str, since: float) -> None:
    """Wait until ``cluster``'s target was scraped successfully after ``since`` and served none of the
    state store counters (a restarted peer before its first calls)."""
    e2e.wait_for(
        lambda: (
            (prom.scalar(f'timestamp(up{{cluster="{cluster}"}} == 1)') or 0.0) > since
            and not held(prom, cluster)
        ),
        WAIT,
        f"a scrape of the restarted {cluster} without the old series",
    )


def alerts_over(prom: PrometheusServer, since: float) -> set[tuple[str, str, str, str]]:
    """Every (alertstate, alertname, cluster, dag_id) ``ALERTS`` held since ``since``."""
    rng = f"{int(time.time() - since) + 2}s"
    return {
        (
            s["metric"]["alertstate"],
            s["metric"]["alertname"],
            s["metric"].get("cluster", ""),
            s["metric"].get("dag_id", ""),
        )
        for s in prom.query(f"max_over_time(ALERTS[{rng}])")
    }


def assert_only_pending(alerts: set[tuple[str, str, str, str]]) -> None:
    assert not {a for a in alerts if a[0] == "firing"}, alerts
    assert {(name, dag) for _, name, _, dag in alerts} <= PENDING, alerts


# -- the run -------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def peers(tmp_path_factory: pytest.TempPathFactory, e2e_export: Path) -> Iterator[Peers]:
    started = Peers(tmp_path_factory.mktemp("restarts"), e2e_export)
    try:
        yield started
    finally:
        started.close()


def test_each_restart_counts_the_calls_once_and_history_never(peers: Peers, e2e_export: Path) -> None:
    per_pass = sum(e2e.feeder_passes(1).values())
    serving = dict.fromkeys(CLUSTERS, 0.0)  # what each peer's counters hold
    done = 0

    def one_pass() -> None:
        nonlocal done
        peers.one_pass()
        done += 1
        for cluster in CLUSTERS:
            serving[cluster] += per_pass

    def all_recorded(prom: PrometheusServer, since: float, calls: int) -> None:
        read_by_the_rules(
            prom, lambda: all(held(prom, c) == serving[c] for c in CLUSTERS), f"pass {done} scraped"
        )
        for cluster in CLUSTERS:
            assert recorded(prom, cluster, since) == e2e.feeder_passes(calls), (cluster, done)

    prom = prometheus(peers.tmp / "prometheus", e2e_export, peers)
    try:
        e2e.wait_for(lambda: len(prom.query("up == 1")) == 3, WAIT, "a first scrape of every peer")
        one_pass()
        all_recorded(prom, prom.started, done)
        # Each peer restarted in turn: its counters come back holding one pass, as before the restart.
        for cluster, restart in (
            (STATSD, peers.statsd.restart),
            (COLLECTOR, peers.collector.restart),
            (WORKER, peers.restart_worker),
        ):
            at = time.time()
            restart()
            serving[cluster] = 0.0
            scraped_without_series(prom, cluster, at)
            one_pass()
            all_recorded(prom, prom.started, done)
        assert_only_pending(alerts_over(prom, prom.started))

        # Prometheus down (a pass made meanwhile), back on the same TSDB within counter_lookback.
        prom.stop()
        one_pass()
        prom.restart()
        all_recorded(prom, prom.started, done)
        assert_only_pending(alerts_over(prom, prom.started))
    finally:
        prom.stop()

    # A fresh Prometheus (new TSDB): every counter already holds calls -- history, never counted.
    fresh = prometheus(peers.tmp / "prometheus-fresh", e2e_export, peers)
    try:
        read_by_the_rules(
            fresh,
            lambda: all(held(fresh, c) == serving[c] for c in CLUSTERS),
            "a first scrape of the history",
        )
        for cluster in CLUSTERS:
            assert recorded(fresh, cluster, fresh.started) == {}, cluster
        assert alerts_over(fresh, fresh.started) == set()
        one_pass()
        all_recorded(fresh, fresh.started, 1)
        alerts = alerts_over(fresh, fresh.started)
        assert_only_pending(alerts)
        assert (
            "pending",
            "StateStoreErrorRateHigh",
            STATSD,
            e2e.ERRORS_DAG,
        ) in alerts  # the rules see new calls
    finally:
        fresh.stop()


# -- a rollout: a new worker on a new address while the old one stops ------------------------------

ROLLOUT = "rollout"


def _discover(path: Path, ports: list[int]) -> None:
    """Write the file service discovery reads: the workers Prometheus scrapes now (as Kubernetes
    lists a rollout's pods), written whole and renamed so Prometheus never reads half a file."""
    targets = [{"targets": [f"127.0.0.1:{port}" for port in ports], "labels": {"cluster": ROLLOUT}}]
    part = path.with_suffix(".part")
    part.write_text(json.dumps(targets))
    part.replace(path)


def test_a_new_worker_on_a_new_address_counts_in_full(tmp_path: Path, e2e_export: Path) -> None:
    """An API server worker replaced by one on another address (a rolled-out pod): the new one's
    calls, made before Prometheus first scraped it, count in full; the old one's once."""
    discovered = tmp_path / "workers.json"
    old_port, new_port = free_port(), free_port()
    old = Feeder(old_port, tmp_path)
    new: Feeder | None = None
    _discover(discovered, [old_port])
    base = yaml.safe_load((e2e_export / "collector" / "prometheus.yml").read_text())
    (job,) = [j for j in base["scrape_configs"] if j["job_name"] == JOBS[WORKER]]
    del job["static_configs"]
    job["file_sd_configs"] = [{"files": [str(discovered)], "refresh_interval": "1s"}]
    config = {
        "global": {
            **base["global"],
            "scrape_interval": "1s",
            "scrape_timeout": "900ms",
            "evaluation_interval": "1s",
        },
        "rule_files": [str(e2e_export / "collector" / "rules.yml")],
        "scrape_configs": [job],
    }
    (tmp_path / "prometheus").mkdir()
    prom = PrometheusServer(
        tmp_path / "prometheus", config, "--storage.tsdb.retention.time=1h", role="newest"
    )
    per_pass = sum(e2e.feeder_passes(1).values())
    try:
        e2e.wait_for(
            lambda: prom.scalar(f'up{{instance="127.0.0.1:{old_port}"}}') == 1, WAIT, "the old worker scraped"
        )
        assert old.command("pass") == "done"
        read_by_the_rules(prom, lambda: held(prom, ROLLOUT) == per_pass, "the old worker's pass scraped")
        assert recorded(prom, ROLLOUT, prom.started) == e2e.feeder_passes(1)

        # The new worker starts and makes its pass before Prometheus knows it; then the rollout
        # swaps the targets and the old worker stops.
        new = Feeder(new_port, tmp_path)
        assert new.command("pass") == "done"
        _discover(discovered, [new_port])
        old.stop()
        read_by_the_rules(
            prom,
            lambda: (
                prom.scalar(f'up{{instance="127.0.0.1:{new_port}"}}') == 1
                and not prom.query(f'up{{instance="127.0.0.1:{old_port}"}}')
                and held(prom, ROLLOUT) == per_pass
            ),
            "the new worker scraped, the old one gone",
        )
        # Its first scrape already held its pass (made before it was discovered): counted in full.
        assert recorded(prom, ROLLOUT, prom.started) == e2e.feeder_passes(2)

        # And its growth after, once.
        assert new.command("pass") == "done"
        read_by_the_rules(prom, lambda: held(prom, ROLLOUT) == 2 * per_pass, "the new worker's second pass")
        assert recorded(prom, ROLLOUT, prom.started) == e2e.feeder_passes(3)
        assert_only_pending(alerts_over(prom, prom.started))
    finally:
        prom.stop()
        old.stop()
        if new is not None:
            new.stop()
