"""Section 8 of the page: what ``count_at = api_server`` (attribution) costs the API server."""

from __future__ import annotations

from ..count_at import CountAt
from ..results import Results, data_of
from .markdown import Rendered, join, table

READING = (
    "Reading it: a cached task instance costs a dictionary lookup and one counter add on the event loop; "
    "the whole-request difference is within the noise of a {request_ms:.1f} ms request (compare the A/A "
    "control). A task instance's first request is answered before its query runs: the query (one lookup "
    "by primary key, joined to its DAG run) runs on one of two threads of the store-metrics lookup pool, "
    'and requests of the same task instance that arrive meanwhile wait for that one query (the "misses" '
    "above), so a task instance costs one query per API server worker whatever its number of calls. The "
    "first request's extra time in process is that query's thread sharing the GIL with the end of the "
    "request (httpx's ASGI transport hands the response over only when the app returns); over HTTP, "
    "uvicorn has written the response to the socket before the query starts. Under the CeleryExecutor "
    "(tests/airflow/test_count_at_celery.py, one API server worker) 18 task instances making 156 calls cost "
    "exactly 18 queries. The hit rate of a deployment is about `1 - 1 / (calls per task instance)` per "
    "worker."
)


def _rows(r: CountAt) -> list[tuple[str, str]]:
    replay = r["replay"]
    lo, hi = r["request_added_us_iqr"]
    per = replay["requests"] // replay["instances"]
    return [
        (
            "a state store request through the real app (`GET /execution/store/ti/{id}/{key}`, found)",
            f"{r['request_ms']:.2f} ms (median)",
        ),
        (
            "added by attribution per request, cached task instance (whole request, on - off)",
            f"{r['request_added_us']:+.1f} µs (median of {r['pairs']:,} paired requests; quartiles "
            f"{lo:+.1f} / "
            f"{hi:+.1f} µs; A/A control off - off {r['request_aa_us']:+.1f} µs)",
        ),
        (
            "added by attribution per request, cached task instance (`StoreCalls.count` alone, on the loop)",
            f"{r['count_hit_ns'] / 1000:.2f} µs",
        ),
        (
            "the metadata query per new task instance (`task_instance` + `dag_run`, on a lookup thread)",
            f"{r['query_ms']:.2f} ms median, {r['query_ms_p90']:.2f} ms p90; never on the event loop",
        ),
        (
            "response time of a task instance's first request (query after the response) vs a cached one",
            f"{r['first_request_ms']:.2f} ms vs {r['cached_request_ms']:.2f} ms (medians); "
            f"{r['first_added_us']:+.1f} µs median of the pair differences",
        ),
        (
            f"{replay['instances']} task instances, {per} requests each, all instances at once",
            f"{replay['requests']} requests: {replay['hits']} hits, {replay['misses']} misses "
            f"({replay['hit_rate']:.1%} hit rate), {replay['queries']} queries = "
            f"{replay['queries_per_instance']:.2f} per task instance, {replay['failures']} failed",
        ),
        (
            f"memory of a full cache ({r['cache_size']:,} task instances)",
            f"{r['bytes_per_entry']:.0f} bytes per entry, "
            f"{r['bytes_per_entry'] * r['cache_size'] / 2**20:.1f} MiB in all",
        ),
    ]


def render(results: Results) -> Rendered:
    r: CountAt = data_of(results, "count_at")
    run = results["sections"]["count_at"]["run"]
    text = join(
        "## 8. `count_at = api_server`: what attribution costs the API server",
        "Measured by `benchmarks/count_at.py` (`python -m benchmarks --only count_at`) on "
        f"{run['date']} on this 2-core machine (shared, noisy): Airflow's real API server app (`create_app`, "
        "the plugin's root middleware, backend `none`) in process over httpx's ASGI transport, real task "
        "tokens from Airflow's JWT generator, a SQLite metadata database with "
        f"{r['instances']} real task instances from `dag.test()` runs; the machine's load average at the end "
        f"was {r['load_average'][0]:.1f} (other work shared it).",
        table(["what", "measured"], _rows(r), "ll"),
        READING.format(request_ms=r["request_ms"]),
    )
    return Rendered(text)
