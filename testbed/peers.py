"""The real programs users run beside store-metrics ("peers"), built from their Go modules.

statsd_exporter, the OpenTelemetry Collector, Prometheus (with promtool), Alertmanager (with
amtool), VictoriaMetrics (single-node, vmagent, vmalert, vmalert-tool) and Thanos (sidecar, query,
rule: the global layers of docs/scaling-out.md) are not packaged where the tests run, and their code
may not be committed here; nor are the two checkers the exported Kubernetes manifests are judged
by (Kubernetes' Pod Security evaluator, through ``testbed/podsecurity/main.go``, and kube-score).
This module holds, in one place:

* the pin table (``PINS``): each peer's Go module, version and the reason for that version,
  with the roles the tests ask for (``chart``, ``minimum``, ``lts``, ``newest``, ``current``);
* the builder: a small ``go.mod`` of our own, written at build time in a temporary directory, that
  requires the pinned module (``go install module@version`` refuses modules whose ``go.mod`` has
  ``replace``/``exclude`` directives; ours copies those directives, so the build resolves the same
  dependencies the project's own build does), then ``go build`` of the command packages with the
  project's own flags (``CGO_ENABLED=0``, tag ``netgo``, the version through ``-ldflags``) -- or, for
  the Collector, its own builder (ocb) from ``testbed/otelcol-builder.yaml``;
* the cache, outside the repository: ``$STORE_METRICS_PEERS`` or ``~/.cache/store-metrics/peers``,
  one ``<peer>-<version>/`` per pin with ``bin/`` and a ``stamp.json``; a warm run only checks it;
* the locator the tests and benchmarks use: ``binary("promtool", "lts")`` -> ``Path``,
  raising ``PeerMissing`` (naming ``scripts/setup dev``) when a pin is not built; while a build
  on this machine still has the pin to make, it waits for it (``wait_for_build``): on a cold
  machine ``scripts/test`` starts the tests beside the build, in ``BUILD_ORDER``, and runs the
  peer tests last (``tests/support/peer_order.py``).

What differs from the projects' release builds: no web UI assets (Prometheus is built without its
``builtinassets`` tag, so its UI pages are not served; Alertmanager's embedded UI is a placeholder
page); Prometheus 3 with its ``remove_all_sd`` tag (static, file and http service discovery only:
the cloud and Kubernetes SDKs nearly double a cold build's CPU time and triple its peak memory);
no ``-a`` (a full rebuild of the standard library gives the same program); the revision reported is
the module version (there is no git checkout). The APIs, PromQL, the TSDB, ``promtool`` and
``amtool`` are the projects' own code at the pinned version. The minimum Prometheus is Debian's 2.42
package (``builder="system"``).

Command line (stdlib only, so ``scripts/setup`` can run it with any Python 3.10+)::

    python -m testbed.peers build [PEER | PEER-VERSION | PEER:ROLE ...] [-j N]
                                  [--no-system | --system] [--unless-running]
    python -m testbed.peers list
    python -m testbed.peers path PROGRAM ROLE
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from testbed.waiting import poll

ENV_CACHE = "STORE_METRICS_PEERS"
DEFAULT_CACHE = Path("~/.cache/store-metrics/peers")
SETUP_HINT = "scripts/setup dev"
# Bump when the way a pin is built changes: every cached build is then rebuilt once.
RECIPE_REVISION = 1
OCB_MODULE = "go.opentelemetry.io/collector/cmd/builder"
#: The contrib loadbalancing exporter (the scaled-out Collector tier's front).
LOADBALANCING = "github.com/open-telemetry/opentelemetry-collector-contrib/exporter/loadbalancingexporter"
OCB_TEMPLATE = Path(__file__).with_name("otelcol-builder.yaml")
OTELCOL_DIST = "otelcol-store-metrics"
BUILD_TIMEOUT = 3600.0
ROLES = ("chart", "minimum", "lts", "newest", "current")
PLACEHOLDER_PAGE = "<!doctype html><title>UI not built</title><p>Built without UI assets.</p>\n"


@dataclass(frozen=True)
class Pin:
    """One peer at one version, and how it is built.

    ``builder`` is ``go`` (``go build``, as promu builds), ``ocb`` (the Collector's builder),
    ``ours`` (a small program of this repository's, ``testbed/<peer>/main.go``, built against the
    pinned module: a library with no command of its own) or ``system`` (a program the machine's
    packages provide: ``programs`` then names its path). ``version_package`` is where ``-ldflags -X``
    sets the version (``main`` for a program that keeps it there), ``version_args`` what makes a
    program print it; ``version_ldflags`` (with ``{version}``), when set, are the ``-X`` flags
    instead of promu's, and ``version_prefix`` the pattern before the version in what it prints
    (VictoriaMetrics prints its one ``lib/buildinfo.Version`` string, ``...-tags-v1.151.0-...``).
    ``programs`` pairs each binary's name with its Go package (empty for the ocb-built Collector);
    ``embed_placeholders`` are directories (relative to the module) that a ``//go:embed`` needs but
    the module's zip does not ship (built UI assets): the build copies the module and puts a
    placeholder page there. ``module_versions`` (ocb only) pairs a component module with the version
    the manifest takes for it instead of the release (one the module proxy does not serve at the
    release), or with ``""``: the distribution is built without that component (``omitted``).
    """

    peer: str
    version: str
    roles: tuple[str, ...]
    module: str
    module_version: str
    programs: tuple[tuple[str, str], ...]
    why: str
    builder: str = "go"
    tags: tuple[str, ...] = ("netgo",)
    embed_placeholders: tuple[str, ...] = ()
    version_package: str = "github.com/prometheus/common/version"
    version_args: tuple[str, ...] = ("--version",)
    module_versions: tuple[tuple[str, str], ...] = ()
    version_ldflags: str = ""
    version_prefix: str = r"\bversion:? "

    @property
    def key(self) -> str:
        return f"{self.peer}-{self.version}"

    @property
    def program_names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.programs)


_PIN_DEFAULTS = {f.name: f.default for f in dataclasses.fields(Pin)}
_PROM = "github.com/prometheus/prometheus"
_PROM_PROGRAMS = (("prometheus", f"{_PROM}/cmd/prometheus"), ("promtool", f"{_PROM}/cmd/promtool"))
# remove_all_sd (Prometheus' own tag, README "Service discovery plugins"): only the static, file and
# http service discoveries are compiled in, not the cloud and Kubernetes ones (their SDKs are most
# of the build: 377 instead of 729 CPU-seconds, 1.1 instead of 3.4 GB at the peak, cold, per release).
# The tests scrape static targets.
_PROM_TAGS = ("netgo", "remove_all_sd")
_STATSD = "github.com/prometheus/statsd_exporter"
_AM = "github.com/prometheus/alertmanager"
_JAEGER = "github.com/jaegertracing/jaeger"
# Where Jaeger keeps its build info (scripts/makefiles/BuildInfo.mk sets these three with -X).
JAEGER_VERSION_PACKAGE = f"{_JAEGER}/internal/version"
_VM = "github.com/VictoriaMetrics/VictoriaMetrics"
_THANOS = "github.com/thanos-io/thanos"

PINS: tuple[Pin, ...] = (
    Pin(
        peer="statsd_exporter",
        version="0.28.0",
        roles=("chart",),
        module=_STATSD,
        module_version="v0.28.0",
        programs=(("statsd_exporter", _STATSD),),
        why="images.statsd.tag (v0.28.0) in the values.yaml of the official Airflow Helm chart 1.19.0: "
        "the statsd_exporter the chart deploys",
    ),
    Pin(
        peer="statsd_exporter",
        version="0.20.0",
        roles=("minimum",),
        module=_STATSD,
        module_version="v0.20.0",
        programs=(("statsd_exporter", _STATSD),),
        why="the README's minimum: its mapper already reads every key the exported mappings use "
        "(match_metric_type, observer_type, histogram_options.buckets, ttl, help)",
    ),
    Pin(
        peer="otelcol",
        version="0.165.0",
        roles=("newest",),
        module=OCB_MODULE,
        module_version="v0.165.0",
        programs=(("otelcol", ""),),
        why="the newest Collector release (ocb v0.165.0; contrib's v0.165.1 is a patch of its own "
        "modules): every component of collector/otel-collector.yaml resolves at v0.165.0, "
        "ocb's go mod tidy included. Built without the loadbalancing exporter of the scaled-out "
        "front tier: the module proxy serves it up to v0.161.0 only, which does not build against "
        "v0.165.0 (its aws-sdk-go-v2 servicediscovery v1.48.0 is not served, and the collector "
        "module v0.161.0 it requires makes internal/statusutil ambiguous)",
        builder="ocb",
        module_versions=((LOADBALANCING, ""),),
    ),
    Pin(
        peer="otelcol",
        version="0.152.0",
        roles=("minimum",),
        module=OCB_MODULE,
        module_version="v0.152.0",
        programs=(("otelcol", ""),),
        why="the oldest release whose statsd receiver has ignore_host (contrib PR 46639), which the "
        "shipped config sets: v0.148.0 refuses the key; v0.149.0-v0.151.0 are not served",
        builder="ocb",
    ),
    Pin(
        peer="prometheus",
        version="3.16.0",
        roles=("newest",),
        module=_PROM,
        module_version="v0.316.0",
        programs=_PROM_PROGRAMS,
        why="the newest Prometheus release (module v0.316.0)",
        tags=_PROM_TAGS,
    ),
    Pin(
        peer="prometheus",
        version="3.13.5",
        roles=("lts",),
        module=_PROM,
        module_version="v0.313.5",
        programs=_PROM_PROGRAMS,
        why="the current long-term support line, 3.13 (supported until July 2027; 3.5 LTS ended "
        "2026-07-31), at its newest patch release",
        tags=_PROM_TAGS,
    ),
    Pin(
        peer="prometheus",
        version="2.42.0",
        roles=("minimum",),
        module="debian:prometheus",
        module_version="2.42.0+ds",
        programs=(("prometheus", "/usr/bin/prometheus"), ("promtool", "/usr/bin/promtool")),
        why="the README's minimum, as Debian 12 packages it (scripts/setup installs it): module "
        "v0.42.0 also builds with Go 1.26, but costs 3.3 min more of a cold setup for the same release",
        builder="system",
    ),
    Pin(
        peer="alertmanager",
        version="0.35.0",
        roles=("current",),
        module=_AM,
        module_version="v0.35.0",
        programs=(("alertmanager", f"{_AM}/cmd/alertmanager"), ("amtool", f"{_AM}/cmd/amtool")),
        why="the current Alertmanager release",
        embed_placeholders=("ui/app/dist/elm", "ui/app/dist/mantine"),
    ),
    Pin(
        peer="podsecurity",
        version="0.37.2",
        roles=("current",),
        module="k8s.io/pod-security-admission",
        module_version="v0.37.2",
        programs=(("podsecurity", ""),),
        why="Kubernetes' own Pod Security Standards evaluator (the PodSecurity admission's policy "
        "package) at the newest release the module proxy serves, Kubernetes 1.37; the module has no "
        "command, so testbed/podsecurity/main.go calls it",
        builder="ours",
        version_package="main",
    ),
    Pin(
        peer="kube-score",
        version="1.20.0",
        roles=("current",),
        module="github.com/zegl/kube-score",
        module_version="v1.20.0",
        programs=(("kube-score", "github.com/zegl/kube-score/cmd/kube-score"),),
        why="the newest kube-score release: a widely used static checker of Kubernetes objects "
        "(security contexts, resources, probes, NetworkPolicies), run on every exported manifest",
        version_package="main",
        version_args=("version",),
    ),
    Pin(
        peer="jaeger",
        version="2.12.0",
        roles=("current",),
        module=_JAEGER,
        module_version="v1.75.0",
        programs=(("jaeger", f"{_JAEGER}/cmd/jaeger"),),
        why="Jaeger v2 (built on the Collector), the approved module release v1.75.0, which Jaeger "
        "tags v2.12.0 as well (each release carries both, v1.74.0 / v2.11.0 before it): the trace "
        "backend docs/traces.md reads a task's trace back from",
        version_package=JAEGER_VERSION_PACKAGE,
    ),
    Pin(
        peer="victoriametrics",
        version="1.151.0",
        roles=("current",),
        module=_VM,
        module_version="v1.151.0",
        programs=(
            ("victoria-metrics", f"{_VM}/app/victoria-metrics"),
            ("vmagent", f"{_VM}/app/vmagent"),
            ("vmalert", f"{_VM}/app/vmalert"),
            ("vmalert-tool", f"{_VM}/app/vmalert-tool"),
        ),
        why="the global layer of issue 44: the newest VictoriaMetrics release that builds with the "
        "Go here (go.mod: go 1.26.6); single-node, vmagent, vmalert and vmalert-tool, built as the "
        "project's own `make <app>-pure` (CGO_ENABLED=0, no build tags, version in lib/buildinfo)",
        tags=(),
        version_ldflags=f"-X {_VM}/lib/buildinfo.Version=store-metrics-peers-tags-v{{version}}-0-gmodule",
        version_prefix=r"-tags-v",
        version_args=("-version",),
    ),
    Pin(
        peer="thanos",
        version="0.42.4",
        roles=("current",),
        module=_THANOS,
        module_version="v0.42.4",
        programs=(("thanos", f"{_THANOS}/cmd/thanos"),),
        why="the other global layer of issue 44 (sidecar, querier and ruler are one `thanos` program): "
        "the newest release that builds with the Go here (go.mod: go 1.26.0; v0.42.5 asks for 1.26.10). "
        "Its go.mod has replace directives, which `go install` refuses and ours copies; built as its "
        ".promu.yml builds it (tags netgo and slicelabels, version through prometheus/common/version)",
        tags=("netgo", "slicelabels"),
    ),
)

PROGRAMS: dict[str, str] = {name: pin.peer for pin in PINS for name in pin.program_names}

# The order a build takes (by pin key; pins not named go last, in table order). scripts/test starts
# the tests while a cold machine's build runs: the peer tests run last (tests/support/peer_order.py), and the
# first of them (the whole-Airflow count_at runs, the topologies, the rule tests) use the newest
# Prometheus, the chart's statsd_exporter and the newest Collector.
BUILD_ORDER = (
    "prometheus-3.16.0",
    "statsd_exporter-0.28.0",
    "otelcol-0.165.0",
    "alertmanager-0.35.0",
    "prometheus-3.13.5",
    "statsd_exporter-0.20.0",
    "otelcol-0.152.0",
    "podsecurity-0.37.2",
    "kube-score-1.20.0",
    "jaeger-2.12.0",
    "victoriametrics-1.151.0",
    "thanos-0.42.4",
)
# How long a test waits for a pin that a build on this machine has still to finish: a cold build of
# every pin, niced beside the tests, takes 15-40 min on two cores.
WAIT_FOR_BUILD = 5400.0


class PeerMissing(RuntimeError):
    """A pinned peer is not in the cache: the tests fail with this (never skip)."""


class PeerBuildError(RuntimeError):
    """Building a peer failed; the message ends with the tail of the build log."""


# ---------------------------------------------------------------------------------------------
# The cache


def cache_root() -> Path:
    """Where built peers live: ``$STORE_METRICS_PEERS`` or ``~/.cache/store-metrics/peers``."""
    configured = os.environ.get(ENV_CACHE)
    return Path(configured).expanduser() if configured else DEFAULT_CACHE.expanduser()


def pin_dir(pin: Pin) -> Path:
    return cache_root() / pin.key


def recipe_digest(pin: Pin) -> str:
    """What the build of ``pin`` depends on (not its reason or roles): a change rebuilds it."""
    fields = dataclasses.asdict(pin)
    fields.pop("why")
    fields.pop("roles")
    # Fields added after the first pins were cached: left out at their defaults, so adding them
    # rebuilt nothing.
    for name in ("version_package", "version_args", "module_versions", "version_ldflags", "version_prefix"):
        if fields[name] == _PIN_DEFAULTS[name]:
            fields.pop(name)
    fields["revision"] = RECIPE_REVISION
    if pin.builder == "ocb":
        fields["manifest"] = OCB_TEMPLATE.read_text()
    if pin.builder == "ours":
        fields["source"] = own_source(pin).read_text()
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:16]


def cached(pin: Pin) -> bool:
    """True when ``pin`` is built with its current recipe and every program is there."""
    directory = pin_dir(pin)
    try:
        stamp = json.loads((directory / "stamp.json").read_text())
    except (OSError, ValueError):
        return False
    if stamp.get("recipe") != recipe_digest(pin):
        return False
    return all(os.access(directory / "bin" / name, os.X_OK) for name in pin.program_names)


# ---------------------------------------------------------------------------------------------
# The locator


def pins_for(peer: str) -> list[Pin]:
    """Every pin of ``peer`` (``statsd_exporter``, ``otelcol``, ``prometheus``, ``alertmanager``)."""
    found = [pin for pin in PINS if pin.peer == peer]
    if not found:
        raise ValueError(f"unknown peer {peer!r}; known: {', '.join(sorted({p.peer for p in PINS}))}")
    return found


def pin_for(peer: str, role: str) -> Pin:
    """The pin of ``peer`` that plays ``role`` (``chart``, ``minimum``, ``lts``, ``newest``, ``current``)."""
    candidates = pins_for(peer)
    for pin in candidates:
        if role in pin.roles:
            return pin
    roles = sorted({r for pin in candidates for r in pin.roles})
    raise ValueError(f"{peer} has no pin with role {role!r}; its roles: {', '.join(roles)}")


def binary(program: str, role: str) -> Path:
    """Path of ``program`` (e.g. ``promtool``) in the pin of its peer that plays ``role``.

    Raises ``PeerMissing`` when that pin is not built, saying how to build it.
    """
    if program not in PROGRAMS:
        raise ValueError(f"unknown program {program!r}; known: {', '.join(sorted(PROGRAMS))}")
    pin = pin_for(PROGRAMS[program], role)
    path = pin_dir(pin) / "bin" / program
    if not cached(pin) and not wait_for_build(pin):
        raise PeerMissing(
            f"{program} from {pin.peer} {pin.version} (role {role}) is not built in {pin_dir(pin)}. "
            f"Run `{SETUP_HINT}` (it builds every pinned peer; needs Go {_go_hint()} and the Go "
            f"module proxy), or `python -m testbed.peers build {pin.peer}:{role}`. The cache is "
            f"${ENV_CACHE} or {DEFAULT_CACHE}."
        )
    return path


def wait_for_build(pin: Pin, timeout: float = WAIT_FOR_BUILD, interval: float = 2.0) -> bool:
    """Wait while a build on this machine (``python -m testbed.peers build``, e.g. the one
    ``scripts/test`` leaves running in the background) still has ``pin`` to build; True once it is
    cached. False at once when no build is running or the running one does not build ``pin``; False
    when the build ends without it or ``timeout`` passes (the caller then says how to build it)."""
    if cached(pin):
        return True
    running = running_build()
    if running is None or pin.key not in running["pins"]:
        return False
    print(
        f"peers: waiting for the build (pid {running['pid']}) to finish {pin.key}: "
        f"log {cache_root() / '.logs' / (pin.key + '.log')}",
        file=sys.stderr,
        flush=True,
    )

    def over() -> bool:
        if cached(pin):
            return True
        now = running_build()
        return now is None or pin.key not in now["pins"]

    poll(over, timeout, interval)
    return cached(pin)


def running_build() -> dict[str, Any] | None:
    """What a build running on this machine is building (its pid and pin keys), or None.

    Every build holds a shared lock on ``.locks/build.lock`` while it runs and lists its pins in
    ``.locks/build-<pid>.json``: a lock that cannot be taken exclusively means one is running."""
    locks = cache_root() / ".locks"
    try:
        handle = (locks / "build.lock").open("r")
    except OSError:
        return None
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pass
        else:
            fcntl.flock(handle, fcntl.LOCK_UN)
            return None
    pins: list[str] = []
    pids: list[int] = []
    for listed in locks.glob("build-*.json"):
        try:
            said = json.loads(listed.read_text())
        except (OSError, ValueError):
            continue
        if _alive(int(said.get("pid", 0))):
            pids.append(int(said["pid"]))
            pins.extend(str(key) for key in said.get("pins", ()))
    return {"pid": ",".join(map(str, sorted(pids))) or "?", "pins": pins}


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextlib.contextmanager
def _announced(pins: Sequence[Pin]) -> Iterator[None]:
    """Say, while ``pins`` are being built, that this process builds them (see ``running_build``)."""
    locks = cache_root() / ".locks"
    locks.mkdir(parents=True, exist_ok=True)
    listing = locks / f"build-{os.getpid()}.json"
    listing.write_text(json.dumps({"pid": os.getpid(), "pins": [pin.key for pin in pins]}))
    with (locks / "build.lock").open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_SH)
        try:
            yield
        finally:
            listing.unlink(missing_ok=True)
            fcntl.flock(handle, fcntl.LOCK_UN)


def build_order(pins: Sequence[Pin]) -> list[Pin]:
    """``pins`` in ``BUILD_ORDER`` (those it does not name last, in their own order)."""
    rank = {key: index for index, key in enumerate(BUILD_ORDER)}
    return sorted(pins, key=lambda pin: rank.get(pin.key, len(rank)))


def _go_hint() -> str:
    return "1.26+ on PATH or in /usr/local/go/bin"


# ---------------------------------------------------------------------------------------------
# Running Go


GO_INSTALL = "/usr/local/go/bin/go"


def find_go() -> str:
    """The ``go`` command: on ``PATH``, else the official install location."""
    found = shutil.which("go") or (GO_INSTALL if os.access(GO_INSTALL, os.X_OK) else None)
    if not found:
        raise PeerBuildError(f"no `go` command: install Go {_go_hint()} to build the peers")
    return found


def build_env(go: str) -> dict[str, str]:
    """The environment of every build command: the projects' static, cgo-free builds; the module
    graph may be completed in our own throwaway go.mod (``-mod=mod``); Go's own caches stay where
    Go keeps them (outside the repository)."""
    env = dict(os.environ)
    env["CGO_ENABLED"] = "0"
    env["GOFLAGS"] = (env.get("GOFLAGS", "") + " -mod=mod").strip()
    env["PATH"] = os.pathsep.join([str(Path(go).parent), env.get("PATH", "")])
    return env


@dataclass
class GoWork:
    """One build's temporary directory, ``go`` command, environment and log."""

    work: Path
    log: Path
    go: str = dataclasses.field(default_factory=find_go)
    env: dict[str, str] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        self.env = self.env or build_env(self.go)

    def run(self, *cmd: str) -> str:
        """Run a build command at low priority (the machine is shared), its stderr appended to
        the log; return its stdout; raise ``PeerBuildError`` with the log's tail on failure."""
        nice = ["nice", "-n", "10"] if shutil.which("nice") else []
        with self.log.open("a") as out:
            out.write(f"$ {' '.join(cmd)}\n")
            out.flush()
            try:
                done = subprocess.run(
                    [*nice, *cmd],
                    cwd=self.work,
                    env=self.env,
                    stdout=subprocess.PIPE,
                    stderr=out,
                    text=True,
                    timeout=BUILD_TIMEOUT,
                    check=False,
                )
            except subprocess.TimeoutExpired as exc:
                raise PeerBuildError(
                    f"{cmd[0]} timed out after {BUILD_TIMEOUT:.0f} s; log: {self.log}"
                ) from exc
            out.write(done.stdout)
        if done.returncode != 0:
            tail = self.log.read_text(errors="replace")[-3000:]
            raise PeerBuildError(f"`{' '.join(cmd)}` failed ({done.returncode}); log: {self.log}\n{tail}")
        return done.stdout

    def module_info(self, module: str, version: str) -> dict[str, str]:
        """``go mod download -json`` of one module: its source ``Dir`` and ``GoMod`` file."""
        info: dict[str, str] = json.loads(
            self.run(self.go, "mod", "download", "-json", f"{module}@{version}")
        )
        return info

    def upstream_directives(self, gomod: str) -> list[str]:
        """The ``replace`` and ``exclude`` directives of the module's own go.mod, as lines for
        ours. Replacements by a local path only make sense inside that repository: left out."""
        edit = json.loads(self.run(self.go, "mod", "edit", "-json", gomod))
        lines = []
        for rep in edit.get("Replace") or []:
            old, new = rep["Old"], rep["New"]
            if not new.get("Version"):
                continue
            left = old["Path"] + (f" {old['Version']}" if old.get("Version") else "")
            lines.append(f"replace {left} => {new['Path']} {new['Version']}")
        lines.extend(f"exclude {ex['Path']} {ex['Version']}" for ex in edit.get("Exclude") or [])
        return lines


def write_gomod(work: Path, pin: Pin, directives: Sequence[str]) -> None:
    """Our own go.mod: requires the pinned module, with the upstream directives."""
    head = [f"module peerbuild.invalid/{pin.peer}", "", "go 1.26", ""]
    text = "\n".join([*head, f"require {pin.module} {pin.module_version}", "", *directives, ""])
    (work / "go.mod").write_text(text)


def _local_copy(info: dict[str, str], pin: Pin, work: Path) -> str:
    """Copy the module (Go's module cache is read-only and may not be overlaid) and put a
    placeholder page where its ``//go:embed`` expects built UI assets; return the replace line."""
    source = work / "src"
    shutil.copytree(info["Dir"], source)
    for path in source.rglob("*"):
        path.chmod(path.stat().st_mode | 0o200)
    for relative in pin.embed_placeholders:
        target = source / relative
        target.mkdir(parents=True, exist_ok=True)
        (target / "index.html").write_text(PLACEHOLDER_PAGE)
    return f"replace {pin.module} => ./src"


def ldflags(pin: Pin) -> str:
    """The version variables promu sets, so ``--version`` and ``/api/v1/status/buildinfo`` report
    the pinned release."""
    values = {
        "Version": pin.version,
        "Revision": pin.module_version,
        "Branch": "module",
        "BuildUser": "store-metrics@peers",
        "BuildDate": time.strftime("%Y%m%d-%H:%M:%S", time.gmtime()),
    }
    if pin.version_package == JAEGER_VERSION_PACKAGE:
        # Jaeger's own names (BuildInfo.mk); its tags carry the "v" (``jaeger --version`` says
        # "jaeger version v2.12.0"), and the commit is the module version (no git checkout).
        jaeger = {
            "latestVersion": f"v{pin.version}",
            "commitSHA": pin.module_version,
            "date": values["BuildDate"],
        }
        return " ".join(f"-X {pin.version_package}.{name}={value}" for name, value in jaeger.items())
    if pin.version_ldflags:
        return pin.version_ldflags.format(version=pin.version)
    if pin.version_package == "main":
        # A program that keeps its version in package main (kube-score's goreleaser, ours): only
        # ``version`` is set; the other -X targets do not exist there.
        return f"-X main.version={pin.version}"
    return " ".join(f"-X {pin.version_package}.{name}={value}" for name, value in values.items())


def build_go(pin: Pin, go: GoWork, out: Path) -> None:
    """The promu way: ``go build`` of the command packages with the project's tags and ldflags."""
    write_gomod(go.work, pin, [])
    info = go.module_info(pin.module, pin.module_version)
    directives = go.upstream_directives(info["GoMod"])
    if pin.embed_placeholders:
        directives.append(_local_copy(info, pin, go.work))
    write_gomod(go.work, pin, directives)
    packages = [package for _, package in pin.programs]
    tags = ",".join(pin.tags)
    go.run(go.go, "build", "-trimpath", "-tags", tags, "-ldflags", ldflags(pin), "-o", f"{out}/", *packages)


def own_source(pin: Pin) -> Path:
    """The ``main.go`` of a program of ours (``builder="ours"``): ``testbed/<peer>/main.go``."""
    return Path(__file__).with_name(pin.peer) / "main.go"


def build_ours(pin: Pin, go: GoWork, out: Path) -> None:
    """A program of this repository's against the pinned module: our go.mod requires it (with its
    own directives), ``go build -mod=mod`` resolves the rest by minimal version selection."""
    write_gomod(go.work, pin, [])
    info = go.module_info(pin.module, pin.module_version)
    write_gomod(go.work, pin, go.upstream_directives(info["GoMod"]))
    shutil.copy2(own_source(pin), go.work / "main.go")
    tags = ",".join(pin.tags)
    go.run(
        go.go, "build", "-trimpath", "-tags", tags, "-ldflags", ldflags(pin), "-o", str(out / pin.peer), "."
    )


def ocb_manifest(pin: Pin, output_path: Path) -> str:
    """``testbed/otelcol-builder.yaml`` filled in for ``pin``, with its ``module_versions``."""
    manifest = OCB_TEMPLATE.read_text().format(
        name=OTELCOL_DIST, output_path=output_path, version=pin.version, release=pin.module_version
    )
    for module, version in pin.module_versions:
        line = f"  - gomod: {module} {pin.module_version}\n"
        if line not in manifest:
            raise PeerBuildError(f"{OCB_TEMPLATE.name} has no {module} to take at {version or 'none'}")
        manifest = manifest.replace(line, f"  - gomod: {module} {version}\n" if version else "")
    return manifest


def omitted(pin: Pin) -> set[str]:
    """The component modules ``pin``'s distribution is built without (``module_versions``)."""
    return {module for module, version in pin.module_versions if not version}


def build_ocb(pin: Pin, go: GoWork, out: Path) -> None:
    """The Collector's way: build its builder (ocb) at the pinned release, then let ocb generate
    and compile a distribution from ``testbed/otelcol-builder.yaml`` (ocb sets ``CGO_ENABLED=0``,
    ``-trimpath`` and strips the binary, as the official distributions are built).

    ocb's own ``go mod tidy`` also resolves the test-only modules of every component, and at some
    releases the module proxy does not serve all of those (0.152.0: service/telemetry/telemetrytest,
    extension/zpagesextension ...). Then the go.mod ocb generated before tidying (every component
    at its pinned version) is compiled as it stands (``--skip-generate --skip-get-modules``):
    ``go build -mod=mod`` resolves exactly the modules the program imports, by the same minimal
    version selection; only tidy's extra checks are lost. The log says which way was taken.
    """
    write_gomod(go.work, pin, [])
    go.run(go.go, "build", "-trimpath", "-o", str(go.work / "ocb"), OCB_MODULE)
    manifest = ocb_manifest(pin, go.work / "dist")
    (go.work / "manifest.yaml").write_text(manifest)
    ocb = [str(go.work / "ocb"), "--config", str(go.work / "manifest.yaml")]
    try:
        go.run(*ocb)
    except PeerBuildError:
        if not (go.work / "dist" / "go.mod").exists():
            raise
        with go.log.open("a") as log:
            log.write("ocb's go mod tidy failed: compiling its generated go.mod without tidying\n")
        go.run(*ocb, "--skip-generate", "--skip-get-modules")
    shutil.copy2(go.work / "dist" / OTELCOL_DIST, out / "otelcol")


# ---------------------------------------------------------------------------------------------
# Building into the cache


def reported_version(path: Path, args: Sequence[str] = ("--version",)) -> str:
    """What ``<program> --version`` (or ``args``) prints (stdout and stderr: kingpin used both over time)."""
    done = subprocess.run([str(path), *args], capture_output=True, text=True, timeout=60, check=False)
    return (done.stdout + done.stderr).strip()


def reports_version(text: str, version: str, prefix: str = r"\bversion:? ") -> bool:
    """True when ``text`` says ``version <version>`` (or ``version: <version>``, as kube-score
    does; ``version v2.12.0``, as Jaeger does; or ``prefix`` then the version) exactly: ``3.1.0`` is
    not ``3.1.0-rc.1`` nor ``3.1.0.1``; build metadata after ``+`` (Debian's ``2.42.0+ds``) is not part
    of the version. VictoriaMetrics' ``...-tags-v1.151.0-0-g<commit>`` is followed by its
    ``git describe`` count."""
    return re.search(rf"{prefix}v?{re.escape(version)}(?![\w.]|-(?!\d+-g))", text) is not None


@contextlib.contextmanager
def _locked(pin: Pin) -> Iterator[None]:
    """One build of a pin at a time on this machine (several worktrees share the cache)."""
    locks = cache_root() / ".locks"
    locks.mkdir(parents=True, exist_ok=True)
    with (locks / f"{pin.key}.lock").open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def link_system(pin: Pin, out: Path) -> None:
    """A pin the machine's packages already provide (``programs`` name absolute paths): linked
    into the cache, so the locator and the version check treat it like a built one."""
    for name, path in pin.programs:
        if not os.access(path, os.X_OK):
            raise PeerBuildError(f"{path} is not installed (scripts/setup dev installs it from Debian)")
        (out / name).symlink_to(path)


def _build_into(pin: Pin, staging: Path, log: Path) -> None:
    """Build ``pin`` into ``staging/bin`` and check each program reports the pinned version."""
    out = staging / "bin"
    out.mkdir(parents=True)
    if pin.builder == "system":
        link_system(pin, out)
    else:
        with tempfile.TemporaryDirectory(prefix=f"store-metrics-peer-{pin.key}-") as tmp:
            builder = {"ocb": build_ocb, "ours": build_ours}.get(pin.builder, build_go)
            builder(pin, GoWork(Path(tmp), log), out)
    for name in pin.program_names:
        text = reported_version(out / name, pin.version_args)
        if not reports_version(text, pin.version, pin.version_prefix):
            raise PeerBuildError(f"{out / name} --version does not report {pin.version}: {text[:300]}")


def ensure(pin: Pin) -> tuple[str, float]:
    """Build ``pin`` unless the cache has it; return (``"cached"`` or ``"built"``, seconds)."""
    started = time.monotonic()
    if cached(pin):
        return "cached", time.monotonic() - started
    root = cache_root()
    with _locked(pin):
        if cached(pin):  # another process built it while this one waited
            return "cached", time.monotonic() - started
        logs = root / ".logs"
        logs.mkdir(parents=True, exist_ok=True)
        log = logs / f"{pin.key}.log"
        log.write_text(f"building {pin.key} from {pin.module}@{pin.module_version}\n")
        staging = root / f".staging-{pin.key}-{os.getpid()}"
        shutil.rmtree(staging, ignore_errors=True)
        try:
            _build_into(pin, staging, log)
            seconds = time.monotonic() - started
            stamp = {
                "peer": pin.peer,
                "version": pin.version,
                "module": f"{pin.module}@{pin.module_version}",
                "recipe": recipe_digest(pin),
                "go": _go_version(),
                "seconds": round(seconds, 1),
                "built": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            }
            (staging / "stamp.json").write_text(json.dumps(stamp, indent=2) + "\n")
            shutil.rmtree(pin_dir(pin), ignore_errors=True)
            staging.rename(pin_dir(pin))
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return "built", time.monotonic() - started


def _go_version() -> str:
    """The Go that built the peers (empty for a pin taken from the system's packages without Go)."""
    try:
        go = find_go()
    except PeerBuildError:
        return ""
    done = subprocess.run([go, "env", "GOVERSION"], capture_output=True, text=True, timeout=60, check=False)
    return done.stdout.strip()


# ---------------------------------------------------------------------------------------------
# Command line


def select(names: Sequence[str]) -> list[Pin]:
    """Pins named ``peer`` (all of its pins), ``peer-version`` or ``peer:role``; all when empty."""
    if not names:
        return list(PINS)
    chosen: list[Pin] = []
    for name in names:
        if ":" in name:
            found = [pin_for(*name.split(":", 1))]
        elif any(pin.key == name for pin in PINS):
            found = [pin for pin in PINS if pin.key == name]
        else:
            found = pins_for(name)
        chosen.extend(pin for pin in found if pin not in chosen)
    return chosen


def build(pins: Sequence[Pin], jobs: int = 1) -> bool:
    """Build what is missing, ``jobs`` pins at a time; print one line per pin; True if all are there."""

    def one(pin: Pin) -> bool:
        label = f"{pin.peer} {pin.version} ({', '.join(pin.roles)})"
        try:
            state, seconds = ensure(pin)
        except PeerBuildError as exc:
            print(f"peers: {label}: FAILED: {exc}", file=sys.stderr, flush=True)
            return False
        print(f"peers: {label}: {state} in {seconds:.1f} s -> {pin_dir(pin)}", flush=True)
        return True

    ordered = build_order(pins)
    with (
        _announced([pin for pin in ordered if not cached(pin)]),
        ThreadPoolExecutor(max_workers=max(1, jobs)) as pool,
    ):
        return all(list(pool.map(one, ordered)))


def list_pins() -> None:
    """Print the pin table: peer, version, roles, module, whether it is built, and why."""
    for pin in PINS:
        state = "built" if cached(pin) else "missing"
        roles = ",".join(pin.roles)
        print(f"{pin.peer:16} {pin.version:8} {roles:8} {state:8} {pin.module}@{pin.module_version}")
        print(f"{'':16} {pin.why}")
    print(f"cache: {cache_root()}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m testbed.peers", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    build_cmd = commands.add_parser("build", help="build the pinned peers that are missing")
    build_cmd.add_argument("names", nargs="*", help="peer, peer-version or peer:role (default: all)")
    build_cmd.add_argument("-j", "--jobs", type=int, default=1, help="pins built at once (default 1)")
    build_cmd.add_argument(
        "--unless-running",
        action="store_true",
        help="do nothing when a build is already running on this machine (it builds them)",
    )
    provided = build_cmd.add_mutually_exclusive_group()
    provided.add_argument(
        "--no-system", action="store_true", help="leave out the pins the system's packages provide"
    )
    provided.add_argument(
        "--system", action="store_true", help="only the pins the system's packages provide (links)"
    )
    commands.add_parser("list", help="the pin table and what is built")
    path_cmd = commands.add_parser("path", help="print the path of a built program")
    path_cmd.add_argument("program", choices=sorted(PROGRAMS))
    path_cmd.add_argument("role", choices=ROLES)
    args = parser.parse_args(argv)
    if args.command == "list":
        list_pins()
        return 0
    if args.command == "path":
        try:
            print(binary(args.program, args.role))
        except (PeerMissing, ValueError) as exc:
            print(f"peers: {exc}", file=sys.stderr)
            return 1
        return 0
    try:
        pins = [
            pin
            for pin in select(args.names)
            if not (args.no_system and pin.builder == "system")
            and not (args.system and pin.builder != "system")
        ]
    except ValueError as exc:
        parser.error(str(exc))
    if args.unless_running and (running := running_build()) is not None:
        print(f"peers: a build is already running (pid {running['pid']}): {', '.join(running['pins'])}")
        return 0
    return 0 if build(pins, args.jobs) else 1


if __name__ == "__main__":
    sys.exit(main())
