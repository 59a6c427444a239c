"""Prometheus 3 (the newest pin) evaluating the exported rules over a large deployment's series.

What it scrapes is statsd_exporter's own ``/metrics`` at that size (job
``store-metrics-statsd-exporter``, as the shipped ``prometheus.yml`` names it), every series as the
exporter wrote it, served again by ``Replay`` with a timestamp on every sample. The recording
rules read each counter over the last hour (``last_over_time(...[1h] offset 90s)``, export setting
``counter_lookback``), so what one evaluation costs depends on the samples an hour holds: 240 per
series at the shipped 15 s scrape interval. Waiting an hour per size is not bounded enough for a
benchmark, so the replay answers each scrape with the next ``Replay.per_scrape`` samples of an
hour-long history 15 s apart (Prometheus keeps a scrape's own timestamps: ``honor_timestamps``), until
the history has caught up with the clock; then Prometheus is told (SIGHUP) to scrape every 15 s, as
shipped, and the replay serves the samples of the current 15 s step. The hour is then what a steady
deployment's is, and the run reads what each of the next ``EVALUATIONS`` evaluations of every rule
group took (``prometheus_rule_group_last_duration_seconds``), the TSDB head's series, Prometheus' RSS,
and how many samples one series really held in the window (``count_over_time``).
"""

from __future__ import annotations

import json
import shutil
import threading
import time
import urllib.parse
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, TypedDict

from testbed.peers import binary
from testbed.ports import free_port
from testbed.waiting import poll

from . import scale
from .scale import Peer

#: The shipped scrape interval (collector/prometheus.yml): the history's step.
STEP = 15.0
#: How far the history reaches back: the rules' hour, their offsets, and a margin.
HISTORY = 3600.0 + 150.0
#: Samples (lines) per replayed scrape at most, and the fast scrape interval while catching up.
LINES_PER_SCRAPE = 300_000
FILL_INTERVAL = "2s"
#: Evaluations of the recording group read per size.
EVALUATIONS = 2
RECORDING_GROUP = "store-metrics.rules"
RULE_FILES = ("rules.yml", "server-rules.yml", "watcher-rules.yml", "footprint-rules.yml")
JOB = "store-metrics-statsd-exporter"
#: The series whose samples in the rules' window are counted (one task's ``set`` calls).
WINDOWED = "airflow_task_state_store_write_total"


class Evaluated(TypedDict):
    dags: int
    series: int
    samples_in_window: int  # one input series' samples in the rules' [1h] window at the end
    fill_seconds: float
    fill_scrapes: int
    per_scrape: int
    durations: dict[str, list[float]]  # rule group -> its last duration (s) at each evaluation read
    recorded_series: int
    failures: int  # the recording group's failed evaluations (prometheus_rule_evaluation_failures_total)
    head_series: int
    rss: int


class Replay:
    """Serves an exposition's samples with timestamps: a 15 s-step history, then the present."""

    def __init__(self, text: str, per_scrape: int) -> None:
        self.samples = [line for line in text.splitlines() if line and not line.startswith("#")]
        self.per_scrape = per_scrape
        self.clock = time.time() - HISTORY
        self.scrapes = 0
        self._lock = threading.Lock()
        replay = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = replay.body()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.server.server_address[1]}"

    def caught_up(self) -> bool:
        return self.clock + STEP > time.time()

    def body(self) -> bytes:
        with self._lock:
            self.scrapes += 1
            now = time.time()
            stamps: list[int] = []
            while len(stamps) < self.per_scrape and self.clock + STEP <= now:
                self.clock += STEP
                stamps.append(int(self.clock * 1000))
            # Caught up: the current step again (Prometheus ignores a repeated identical sample).
            stamps = stamps or [int(self.clock * 1000)]
        return "".join(f"{line} {t}\n" for line in self.samples for t in stamps).encode("utf-8")

    def __enter__(self) -> Replay:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def write_config(path: Path, rules: list[Path], target: str, interval: str) -> None:
    """A Prometheus configuration at ``path``: ``rules`` loaded, the one job scraping ``target``."""
    files = "".join(f"  - {p}\n" for p in rules)
    path.write_text(
        "global:\n"
        f"  scrape_interval: {interval}\n"
        f"  scrape_timeout: {interval}\n"
        "  evaluation_interval: 15s\n"
        f"rule_files:\n{files}"
        "scrape_configs:\n"
        f"  - job_name: {JOB}\n"
        "    static_configs:\n"
        f"      - targets: ['{target}']\n",
        encoding="utf-8",
    )


class Prometheus(Peer):
    """Prometheus 3 (newest pin) with a throwaway TSDB, on a free port of 127.0.0.1."""

    def __init__(self, config: Path, data: Path, log: Path) -> None:
        self.port = free_port()
        shutil.rmtree(data, ignore_errors=True)
        argv = [
            str(binary("prometheus", "newest")),
            f"--config.file={config}",
            f"--storage.tsdb.path={data}",
            f"--web.listen-address=127.0.0.1:{self.port}",
        ]
        super().__init__(argv, log, f"http://127.0.0.1:{self.port}/-/ready")

    def own(self) -> str:
        return scale.fetch(f"http://127.0.0.1:{self.port}/metrics")[0].decode("utf-8")

    def query(self, expr: str) -> float:
        url = f"http://127.0.0.1:{self.port}/api/v1/query?query={urllib.parse.quote(expr)}"
        answer: dict[str, Any] = json.loads(scale.fetch(url)[0])
        result = answer["data"]["result"]
        return float(result[0]["value"][1]) if result else 0.0

    def group_values(self, metric: str) -> dict[str, float]:
        """``metric`` per rule group (its name without the file)."""
        found = scale.samples(self.own(), metric)
        return {labels.split(";")[-1].rstrip('"}'): value for labels, value in found.items()}


def evaluation_stamps(prometheus: Prometheus) -> dict[str, float]:
    """When each rule group last evaluated (Unix time), by group."""
    return prometheus.group_values("prometheus_rule_group_last_evaluation_timestamp_seconds")


def next_durations(prometheus: Prometheus, after: Mapping[str, float], timeout: float) -> dict[str, float]:
    """Every group's last duration once each group of ``after`` has evaluated since its stamp there."""

    def done() -> dict[str, float] | None:
        stamps = evaluation_stamps(prometheus)
        if all(stamps.get(group, 0.0) > stamp for group, stamp in after.items()):
            return prometheus.group_values("prometheus_rule_group_last_duration_seconds")
        return None

    found = poll(done, timeout, 1.0)
    if not found:
        raise RuntimeError(f"the rule groups {sorted(after)} did not all evaluate within {timeout:.0f} s")
    return found


@dataclass
class Filled:
    """Prometheus over a replayed history that has caught up with the clock, scraping as shipped."""

    prometheus: Prometheus
    replay: Replay
    #: How long the history took to catch up (s).
    seconds: float
    #: Its configuration file: rewrite it and send SIGHUP to change what it scrapes or evaluates.
    config: Path


def per_scrape(lines_per_scrape: int, series: int) -> int:
    """Samples of each series per replayed scrape while filling: ``lines_per_scrape`` at most."""
    return max(1, min(40, lines_per_scrape // max(1, series)))


@contextmanager
def filled_hour(
    text: str,
    samples: int,
    rules: list[Path],
    work: Path,
    *,
    name: str,
    fill_interval: str,
    bound: float,
    poll_every: float,
) -> Iterator[Filled]:
    """Prometheus (its TSDB and log named ``name`` in ``work``) with ``rules``, over ``text``
    replayed ``samples`` samples a scrape, scraping every ``fill_interval`` until the history has
    caught up (within ``bound`` s), then reloaded (SIGHUP) to scrape every ``STEP``, as shipped."""
    config = work / "prometheus.yml"
    with Replay(text, samples) as replay:
        write_config(config, rules, replay.target, fill_interval)
        with Prometheus(config, work / f"tsdb{name}", work / f"prometheus{name}.log") as prometheus:
            started = time.monotonic()
            if not poll(lambda: replay.caught_up() or not prometheus.alive(), bound, poll_every):
                raise RuntimeError(f"the replay did not catch up in {bound:.0f} s")
            fill = time.monotonic() - started
            write_config(config, rules, replay.target, f"{STEP:.0f}s")
            prometheus.signal(1)  # SIGHUP: reload, scrape every 15 s as shipped
            yield Filled(prometheus, replay, fill, config)


def evaluate(rules: Path, text: str, dags: int, work: Path, config_interval: float) -> Evaluated:
    """Prometheus over ``text`` (statsd_exporter's exposition at ``dags`` DAGs): fill the hour, then
    read ``EVALUATIONS`` evaluations of the rules. ``config_interval``: the recording group's
    interval (s), which bounds the wait for each evaluation."""
    series = dags * scale.SERIES_PER_DAG
    samples = per_scrape(LINES_PER_SCRAPE, series)
    with filled_hour(
        text,
        samples,
        [rules / name for name in RULE_FILES],
        work,
        name=f"-{dags}",
        fill_interval=FILL_INTERVAL,
        bound=60.0 + 4.0 * HISTORY / STEP / samples,
        poll_every=0.5,
    ) as filled:
        prometheus = filled.prometheus
        durations: dict[str, list[float]] = {}
        after = time.time()
        for _ in range(EVALUATIONS):
            last = next_durations(prometheus, {RECORDING_GROUP: after}, 3 * config_interval + 30)
            for group, seconds in last.items():
                durations.setdefault(group, []).append(round(seconds, 4))
            after = time.time()
        first = f'{{dag_id="{scale.dag_id(0)}",task_id="{scale.task_id(0)}"}}'
        window = prometheus.query(f"count_over_time({WINDOWED}{first}[1h] offset 90s)")
        own = prometheus.own()
        return Evaluated(
            dags=dags,
            series=series,
            samples_in_window=int(window),
            fill_seconds=round(filled.seconds, 1),
            fill_scrapes=filled.replay.scrapes,
            per_scrape=samples,
            durations=durations,
            # The recorded name carries the export's prefix (task:airflow_store_metrics_calls:...).
            recorded_series=int(prometheus.query(f"count(task:{scale.PREFIX}_store_metrics_calls:increase)")),
            failures=int(
                prometheus.group_values("prometheus_rule_evaluation_failures_total").get(RECORDING_GROUP, 0)
            ),
            head_series=int(scale.total(own, "prometheus_tsdb_head_series")),
            rss=scale.rss_of(prometheus.pid),
        )
