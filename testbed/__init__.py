"""Real parts that the tests (``tests/support``) and the benchmarks (``benchmarks/``) both run with.

One small package that imports neither of them, so neither imports the other for a helper:

* :mod:`testbed.ports` -- a free port on 127.0.0.1;
* :mod:`testbed.waiting` -- bounded waits on a condition;
* :mod:`testbed.ticker` -- the 1 ms ticker that measures how long an event loop is held;
* :mod:`testbed.databases` -- throwaway database servers of their own (PostgreSQL here).

Not part of the installed package: it lives beside ``src/`` and is importable from the
repository root (``python -m benchmarks``, and pytest's ``pythonpath``).
"""
