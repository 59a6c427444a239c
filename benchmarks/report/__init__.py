"""The benchmark page: every target, the one verdict rule, and the Markdown of every section.

The measuring modules (``benchmarks/*.py``) return data and judge nothing. Here
:mod:`~benchmarks.report.targets` holds each target and the one rule that turns a figure into a
verdict, :mod:`~benchmarks.report.page` writes the page (head, verdicts, notes, environment, then
every section in the order of :data:`benchmarks.sections.SECTIONS`), and one module per section
renders that section's tables and text from the saved results.
"""
