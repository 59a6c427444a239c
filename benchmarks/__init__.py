"""store-metrics benchmarks: per-call overhead, event-loop stalls, memory, flush and exit.

Run from the repository root with ``/work/venv/bin/python -m benchmarks`` (a few minutes; writes
``docs/performance.md``) or ``python -m benchmarks --quick`` (a smoke run in seconds, prints
only). See ``benchmarks/README.md``.
"""
