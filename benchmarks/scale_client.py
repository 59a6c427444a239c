"""The scale benchmark's task calls over HTTP, in a process of its own (``httpx.AsyncClient``).

    python -m benchmarks.scale_client PLAN.json RESULT.json

``PLAN.json``: the Execution API's base URL, ``concurrency`` and ``tis`` (``[[id, token], ...]``).
Each task instance makes a task's three calls, in order: ``set`` a key (PUT), ``get`` it back (GET,
found), ``delete`` it (DELETE), as its own task token; ``concurrency`` task instances at a time.
``RESULT.json``: the answers by (operation, HTTP status), transport failures by exception name, and
the seconds it took.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

BODY = b'{"value":{"cursor":"2026-12-04T00:00:00+00:00","done":128}}'


async def _calls(plan: dict[str, Any]) -> dict[str, Any]:
    base = plan["base_url"].rstrip("/")
    queue: asyncio.Queue[list[str]] = asyncio.Queue()
    for entry in plan["tis"]:
        queue.put_nowait(entry)
    answers: Counter[str] = Counter()
    failures: Counter[str] = Counter()
    concurrency = int(plan["concurrency"])
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)

    async def worker(http: httpx.AsyncClient) -> None:
        while not queue.empty():
            ti, token = queue.get_nowait()
            auth = {"Authorization": f"Bearer {token}"}
            url = f"{base}/store/ti/{ti}/progress"
            for operation, method in (("set", "PUT"), ("get", "GET"), ("delete", "DELETE")):
                headers = {**auth, "Content-Type": "application/json"} if method == "PUT" else auth
                try:
                    response = await http.request(
                        method, url, content=BODY if method == "PUT" else None, headers=headers
                    )
                    answers[f"{operation} {response.status_code}"] += 1
                except httpx.HTTPError as exc:
                    failures[type(exc).__name__] += 1

    started = time.monotonic()
    async with httpx.AsyncClient(limits=limits, timeout=httpx.Timeout(120.0)) as http:
        await asyncio.gather(*(worker(http) for _ in range(concurrency)))
    return {"answers": dict(answers), "failures": dict(failures), "seconds": time.monotonic() - started}


def main() -> None:
    plan = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))
    result = asyncio.run(_calls(plan))
    Path(sys.argv[2]).write_text(json.dumps(result), encoding="utf-8")


if __name__ == "__main__":
    main()
