"""store-metrics benchmarks: what the plugin costs, measured, and the page that says so.

``python -m benchmarks`` (see ``benchmarks.run`` and ``benchmarks/README.md``) runs the sections
listed in ``benchmarks.sections``, saves their results in ``benchmarks/results.json`` and writes
``docs/performance.md`` from them (``benchmarks.report``).
"""
