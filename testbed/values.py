"""The values the stall and load benchmarks store: integer arrays of the async-routes proposal's sizes.

apache/airflow#75381 measured its routes with JSON integer arrays of about 0.4 KB, 59 KB and 689 KB;
the benchmarks use the same sizes, so their figures read against that proposal's.
"""

from __future__ import annotations

#: JSON sizes of the values, in bytes.
SIZES_BYTES: tuple[int, ...] = (400, 58_900, 688_900)
#: ``json.dumps``'s default item separator, and the compact one (what an HTTP client sends).
SPACED, COMPACT = ", ", ","


def size_label(n: int) -> str:
    return f"{n / 1000:.1f} KB"


def _json_length(n: int, separator: str) -> int:
    """Length of ``json.dumps(list(range(n)))`` with ``separator`` between items, without building it."""
    if n == 0:
        return 2
    digits, lo, width = 0, 0, 1
    while lo < n:
        hi = min(n, 10**width)
        digits += (hi - lo) * width
        lo, width = hi, width + 1
    return 2 + digits + (n - 1) * len(separator)


def int_array(json_bytes: int, separator: str = SPACED) -> list[int]:
    """An integer array whose JSON text (items joined by ``separator``) is as close as possible to
    ``json_bytes`` long, from above."""
    lo, hi = 1, max(1, json_bytes)
    while lo < hi:
        mid = (lo + hi) // 2
        if _json_length(mid, separator) < json_bytes:
            lo = mid + 1
        else:
            hi = mid
    return list(range(lo))
