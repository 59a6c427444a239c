"""What every generated promtool test shares: the prefix and settings it is written for, its clock,
the labels its input series carry, the alerts it expects (rendered from the exported rule files)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction

from store_metrics import catalogue

from .. import records
from ..settings import seconds
from .annotations import Alert, alerts, render
from .document import Firing, selector
from .selector import Labels
from .timeline import EDGES, Clock

__all__ = ["PROMTOOL_MAX_SAMPLES", "Context", "Target", "TooLong", "agree", "fraction"]

#: The most samples one query may load in promtool's rule tests (``promqltest``'s
#: DefaultMaxSamplesPerQuery, the same from Prometheus 2.42 to 3.16; a running Prometheus allows
#: 50,000,000). A scenario spanning more rule intervals than that cannot run there.
PROMTOOL_MAX_SAMPLES = 10_000
#: Words the tests name their jobs with, where the selector accepts them.
JOB_WORDS = ("airflow", "statsd", "api", "triggerer", "inventory")


def fraction(duration: str) -> Fraction:
    """A Prometheus duration in seconds, exactly."""
    return Fraction(seconds(duration)).limit_denominator(1000)


class TooLong(Exception):
    """A scenario whose series span more rule intervals than promtool lets a query load."""


@dataclass(frozen=True)
class Target:
    """A scrape target: its labels (job, instance, deployment, what the selector asks for)."""

    labels: tuple[tuple[str, str], ...]

    def get(self, name: str) -> str:
        return dict(self.labels).get(name, "")

    def with_labels(self, **labels: str) -> dict[str, str]:
        """The target's labels and ``labels`` (a series' own tags), empty values left out."""
        return {k: v for k, v in (*self.labels, *labels.items()) if v != ""}

    def up(self) -> dict[str, str]:
        """The labels of its ``up`` series: job, instance and the deployment (target labels)."""
        return {k: v for k, v in self.labels if k in ("job", "instance") or v}


@dataclass
class Context:
    """One export's promtool tests: ``prefix``, the settings' ``values``, the rule files' text."""

    prefix: str
    values: Mapping[str, str]
    rule_files: Mapping[str, str]
    labels: Labels = field(init=False)

    def __post_init__(self) -> None:
        self.labels = Labels(self.values["selector"])

    # -- time ---------------------------------------------------------------------------------

    def duration(self, name: str) -> Fraction:
        return fraction(self.values[name])

    @property
    def step(self) -> Fraction:
        return self.duration("rule_interval")

    @property
    def clock(self) -> Clock:
        return Clock(self.step, self.duration("rule_offset"), self.duration("counter_lookback"))

    def steps(self, duration: Fraction) -> int:
        """How many steps ``duration`` spans (rounded up)."""
        return math.ceil(duration / self.step)

    def setting_steps(self, name: str) -> int:
        return self.steps(self.duration(name))

    def within_promtool(self, steps: int, what: str, *settings: str) -> None:
        """Raise ``TooLong`` (saying why) when a scenario of ``what`` spans more than
        ``PROMTOOL_MAX_SAMPLES`` steps: its windowed queries would load more samples than
        promtool allows."""
        if steps > PROMTOOL_MAX_SAMPLES:
            given = ", ".join(f"{name} {self.values[name]}" for name in settings)
            raise TooLong(
                f"{what}: {given} at rule_interval {self.values['rule_interval']} is a scenario of"
                f" {steps} steps; promtool's rule tests load at most {PROMTOOL_MAX_SAMPLES} samples a query"
            )

    # -- labels -------------------------------------------------------------------------------

    @property
    def cluster(self) -> str:
        return self.values["cluster_label"]

    def jobs(self, wanted: int) -> list[str]:
        return self.labels.values("job", wanted, JOB_WORDS)

    def clusters(self, wanted: int) -> list[str]:
        return self.labels.values(self.cluster, wanted, ("", "east", "west"))

    def unwatched(self, watched: set[tuple[str, str]], instance: str) -> Target | None:
        """A target of a job (in a deployment) none of ``watched`` (job, deployment) is: a job
        Prometheus never scraped before. ``None`` where the selector accepts no other."""
        for cluster in self.clusters(3):
            for job in self.jobs(len(JOB_WORDS)):
                if (job, cluster) not in watched:
                    return self.target(job, instance, cluster=cluster)
        return None

    def target(self, job: str, instance: str, cluster: str | None = None) -> Target:
        """A target of ``job``: every other label the selector names at a value it accepts."""
        pairs = {"job": job, "instance": instance}
        pairs[self.cluster] = self.clusters(1)[0] if cluster is None else cluster
        for label in self.labels.constrained():
            if label not in pairs:
                pairs[label] = self.labels.values(label, 1, ("",))[0]
        return Target(tuple(pairs.items()))

    def name(self, metric: catalogue.Metric, suffix: str = "") -> str:
        return metric.prometheus_name(self.prefix) + suffix

    def record(self, base: str) -> str:
        return records.name(base, self.prefix)

    # -- alerts -------------------------------------------------------------------------------

    def alert(self, rule_file: str, name: str) -> Alert:
        return alerts(self.rule_files[rule_file])[name]

    def firing(
        self,
        rule_file: str,
        name: str,
        labels: Mapping[str, str],
        value: float,
        external: Mapping[str, str] | None = None,
    ) -> Firing:
        """The alert ``name`` firing with ``labels`` (its expression's) and ``value``."""
        alert = self.alert(rule_file, name)
        external = external or {}
        shown = {k: v for k, v in labels.items() if v != ""}
        notes = {k: render(t, shown, value, external) for k, t in alert.annotations.items()}
        return Firing({**shown, **alert.labels}, notes)

    @staticmethod
    def sample(name: str, labels: Mapping[str, str]) -> str:
        return selector(name, labels)


def agree(per_edge: Mapping[bool, object]) -> bool:
    """Whether Prometheus 2 and 3 (a closed and a left-open window edge) give the same."""
    return all(per_edge[edge] == per_edge[EDGES[0]] for edge in EDGES)
