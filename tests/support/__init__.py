"""Helpers the tests share, one job per module; ``tests/conftest.py`` holds only fixtures.

Importable as ``support`` because ``[tool.pytest.ini_options] pythonpath`` puts ``tests/`` on
``sys.path``:

* :mod:`support.ports` -- a free port on 127.0.0.1;
* :mod:`support.cli` -- the ``store-metrics`` command in a fresh process;
* :mod:`support.waiting` -- :func:`~support.waiting.wait_until`, the bounded wait on a condition;
* :mod:`support.udp` -- :class:`~support.udp.UdpReceiver`, a real UDP socket that records datagrams;
* :mod:`support.barriers` -- one last count through the same path, proving every earlier one arrived;
* :mod:`support.otlp` -- a real OTLP/HTTP receiver, and an endpoint that accepts and never answers;
* :mod:`support.stores` -- :class:`~support.stores.DictStore`, an in-memory task store accessor;
* :mod:`support.trigger_runs` -- one trigger run through Airflow's ``TriggerRunner.run_trigger``,
  its supervisor answering from a dict;
* :mod:`support.tags` -- the tag sets of the stories, and tag values that would break a line;
* :mod:`support.lines` -- strict parsers for one StatsD counter line;
* :mod:`support.totals` -- received lines summed per series;
* :mod:`support.airflow` -- throwaway Airflow homes, ``dag.test()`` runs and ``airflow standalone``;
* :mod:`support.cluster` -- Airflow's components started one by one (executors other than Local);
* :mod:`support.celery` -- the CeleryExecutor deployment and the totals its DAG must add up to;
* :mod:`support.bench` -- one section of the benchmark page, run with ``--quick``;
* :mod:`support.promtool` -- promtool, for rule and config checks and rule tests;
* :mod:`support.dashboard` -- the committed Grafana dashboard: layout, queries, queries evaluated.

Nothing here fakes a metrics backend: receivers are real sockets and servers on 127.0.0.1.

Free ports, bounded waits and the endpoints the benchmarks use too come from :mod:`testbed` at the
repository root (one copy for both); importing ``support`` puts the root on ``sys.path`` so that
scripts run from ``tests/`` in a fresh process (feeders, probes) find it as pytest does.
"""

import sys
from pathlib import Path

_ROOT = str(Path(__file__).resolve().parent.parent.parent)
if _ROOT not in sys.path:
    sys.path.append(_ROOT)
