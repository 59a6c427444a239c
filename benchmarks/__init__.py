"""store-metrics benchmarks: what the plugin costs, measured, and the page that says so.

``python -m benchmarks`` (see :mod:`benchmarks.run` and ``benchmarks/README.md``) runs the sections
listed in :mod:`benchmarks.sections`, saves their results in ``benchmarks/results.json`` and writes
``docs/performance.md`` from them (:mod:`benchmarks.report`).
"""
