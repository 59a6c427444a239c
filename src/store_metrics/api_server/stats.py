"""What one API server worker's attribution did: requests, cache hits, queries (its shutdown line)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class AttributionStats:
    """What one worker's attribution did (``docs/performance.md`` reports them)."""

    #: Requests counted.
    requests: int = 0
    #: ... whose task instance was in the cache.
    hits: int = 0
    #: ... that waited for a metadata query (theirs, or one already running for the same instance).
    misses: int = 0
    #: ... that carried no verified task instance (401/403), or the null one (asset watchers).
    anonymous: int = 0
    #: Metadata queries made, and how many raised.
    queries: int = 0
    failures: int = 0
    #: Requests counted as unknown at once because the lookups were behind (the caps).
    over_cap: int = 0
    #: Task instances dropped from the cache (least recently used first).
    evictions: int = 0
    #: Seconds the queries took on their threads, summed.
    query_seconds: float = 0.0
    #: Retried attempts whose first read this worker counted (retry_resumed / retry_not_resumed)...
    retries_decided: int = 0
    #: ... and those it saw first but another worker of the host had already claimed.
    retries_claimed_elsewhere: int = 0

    @property
    def hit_rate(self) -> float:
        attributed = self.hits + self.misses
        return self.hits / attributed if attributed else 0.0
