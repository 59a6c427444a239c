"""The load generator of the load benchmark, in its own process: ``httpx.AsyncClient``, closed loop.

    python -m testbed.load_client PLAN.json RESULT.json

``PLAN.json`` (written by ``benchmarks.load``): the Execution API's base URL, one client per
entry of ``clients`` (a task instance id, its Execution API token, an asset name), the fixed
request mix (``mix``), the value sizes, ``warmup`` and ``seconds``. Each client is one
coroutine that sends its next request when the previous one has been answered (fixed
concurrency); all share one ``AsyncClient`` whose pool holds one connection per client.

On stdout, for the driver: ``measuring <monotonic time>`` once the warm-up is over, then
``stopped <monotonic time>``. ``time.monotonic()`` is the same clock in every process on Linux,
so the driver can cut the record into phases (before / during / after a fault) by its own times.

``RESULT.json``: every request of the run (warm-up included) as parallel arrays: start time,
latency (ms), step of the mix, HTTP status (0: no response, with the exception's name counted in
``failures``), and the client's own counts by (store, operation, outcome), which is what the
API server's ``api_server.state_store.requests`` must add up to.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from testbed.values import COMPACT, int_array

#: One request of the mix: (store, operation, method, what, size). ``what`` says which key:
#: ``small``/``mid``/``big`` (a value of that size, set earlier in the cycle), ``absent`` (never
#: set), ``-`` (clear: no key).
Step = tuple[str, str, str, str, int]

SMALL, MID, BIG = "small", "mid", "big"


def mix(sizes: dict[str, int], big_every: int) -> tuple[list[Step], list[Step]]:
    """The fixed mix: the steps of every cycle, and those added to every ``big_every``-th cycle.

    Every cycle writes, reads back (found), reads a key never written (absent) and deletes, on the
    task store and the asset store, with the 0.4 KB and 59 KB values; every ``big_every``-th
    cycle also writes and reads back a 689 KB value and clears both stores. The outcome of every
    step is known in advance (each client has its own task instance and asset), so the client's
    counts are the same in every block of the same length and rate.
    """
    cycle: list[Step] = [
        ("task", "set", "PUT", SMALL, sizes[SMALL]),
        ("task", "get", "GET", SMALL, sizes[SMALL]),
        ("task", "get", "GET", "absent", 0),
        ("asset", "set", "PUT", SMALL, sizes[SMALL]),
        ("asset", "get", "GET", SMALL, sizes[SMALL]),
        ("asset", "get", "GET", "absent", 0),
        ("task", "set", "PUT", MID, sizes[MID]),
        ("task", "get", "GET", MID, sizes[MID]),
        ("task", "delete", "DELETE", SMALL, 0),
        ("asset", "delete", "DELETE", SMALL, 0),
    ]
    extra: list[Step] = [
        ("task", "set", "PUT", BIG, sizes[BIG]),
        ("task", "get", "GET", BIG, sizes[BIG]),
        ("task", "clear", "DELETE", "-", 0),
        ("asset", "clear", "DELETE", "-", 0),
    ]
    assert big_every >= 1
    return cycle, extra


def steps(sizes: dict[str, int], big_every: int) -> list[Step]:
    """Every distinct step, in a fixed order (their index is the ``step`` of a record)."""
    cycle, extra = mix(sizes, big_every)
    return cycle + extra


def outcome(operation: str, status: int) -> str:
    """What the task side would count for this answer (the API server's ``outcome`` tag rule)."""
    if 200 <= status < 300:
        return {"get": "read_found", "set": "write", "delete": "delete", "clear": "clear"}[operation]
    if status == 404 and operation == "get":
        return "read_absent"
    return "error"


@dataclass
class Record:
    start: list[float]
    latency_ms: list[float]
    step: list[int]
    status: list[int]


class Load:
    def __init__(self, plan: dict[str, Any]) -> None:
        self.plan = plan
        self.base = plan["base_url"].rstrip("/")
        self.sizes: dict[str, int] = plan["sizes"]
        self.cycle, self.extra = mix(self.sizes, plan["big_every"])
        self.all_steps = self.cycle + self.extra
        self.bodies = {
            name: json.dumps({"value": int_array(n, COMPACT)}, separators=(",", ":")).encode()
            for name, n in self.sizes.items()
        }
        self.record = Record([], [], [], [])
        self.counts: Counter[tuple[str, str, str]] = Counter()
        self.failures: Counter[str] = Counter()
        self.stop_at = 0.0

    def request(self, client: dict[str, str], step: Step) -> tuple[str, str, dict[str, str], bytes | None]:
        store, operation, method, what, _size = step
        if store == "task":
            ti = client["ti"]
            path = f"/store/ti/{ti}" if operation == "clear" else f"/store/ti/{ti}/{what}-key"
            params: dict[str, str] = {}
        else:
            path = "/store/asset/by-name/clear" if operation == "clear" else "/store/asset/by-name/value"
            params = {"name": client["asset"]}
            if operation != "clear":
                params["key"] = f"{what}-key"
        body = self.bodies[what] if operation == "set" else None
        return method, self.base + path, params, body

    async def client_loop(self, http: httpx.AsyncClient, client: dict[str, str]) -> None:
        headers = {"Authorization": f"Bearer {client['token']}"}
        put_headers = {**headers, "Content-Type": "application/json"}
        big_every = self.plan["big_every"]
        record, counts, failures = self.record, self.counts, self.failures
        index = {step: i for i, step in enumerate(self.all_steps)}
        cycle = 0
        while True:
            plan = self.cycle + (self.extra if cycle % big_every == big_every - 1 else [])
            cycle += 1
            for step in plan:
                if time.monotonic() >= self.stop_at:
                    return
                method, url, params, body = self.request(client, step)
                t0 = time.monotonic()
                try:
                    response = await http.request(
                        method, url, params=params, content=body, headers=put_headers if body else headers
                    )
                    await response.aread()
                    status = response.status_code
                except httpx.HTTPError as exc:
                    status = 0
                    failures[type(exc).__name__] += 1
                t1 = time.monotonic()
                record.start.append(t0)
                record.latency_ms.append((t1 - t0) * 1000.0)
                record.step.append(index[step])
                record.status.append(status)
                if status:
                    counts[(step[0], step[1], outcome(step[1], status))] += 1

    async def run(self) -> None:
        clients = self.plan["clients"]
        limits = httpx.Limits(max_connections=len(clients), max_keepalive_connections=len(clients))
        timeout = httpx.Timeout(self.plan.get("timeout", 120.0))
        async with httpx.AsyncClient(limits=limits, timeout=timeout) as http:
            started = time.monotonic()
            measuring = started + self.plan["warmup"]
            self.stop_at = measuring + self.plan["seconds"]
            tasks = [asyncio.create_task(self.client_loop(http, c)) for c in clients]
            await asyncio.sleep(max(0.0, measuring - time.monotonic()))
            print(f"measuring {measuring:.6f}", flush=True)
            await asyncio.gather(*tasks)
            print(f"stopped {time.monotonic():.6f}", flush=True)

    def result(self) -> dict[str, Any]:
        return {
            "steps": [list(s) for s in self.all_steps],
            "start": self.record.start,
            "latency_ms": self.record.latency_ms,
            "step": self.record.step,
            "status": self.record.status,
            "counts": [[*key, n] for key, n in sorted(self.counts.items())],
            "failures": dict(self.failures),
            "stop_at": self.stop_at,
            "measuring_from": self.stop_at - self.plan["seconds"],
        }


def main() -> None:
    plan = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))
    load = Load(plan)
    asyncio.run(load.run())
    Path(sys.argv[2]).write_text(json.dumps(load.result()), encoding="utf-8")


if __name__ == "__main__":
    main()
