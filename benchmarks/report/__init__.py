"""The benchmark page: every target, the one verdict rule, and the Markdown of every section.

The measuring modules (``benchmarks/*.py``) return data and judge nothing. Here
``targets`` holds each target and the one rule that turns a figure into a
verdict, ``page`` writes the page (head, verdicts, notes, environment, then
every section in the order of ``benchmarks.sections.SECTIONS``), and one module per section
renders that section's tables and text from the saved results.
"""
