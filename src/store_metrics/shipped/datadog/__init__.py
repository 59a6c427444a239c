"""The Datadog side, for the DogStatsD backend through a Datadog Agent: a dashboard and monitors.

The Agent's DogStatsD server adds every ``<prefix>.task_state_store.write:1|c|#dag_id:..`` line of a
flush interval into one point per tag set and submits it as a ``rate`` metric of the same name,
so every query here is ``sum:<metric>{<filters>} by {<tags>}.as_count()``: calls per interval
(timeseries) or in the selected range (``aggregator: sum``, scalar widgets), never a per-process
series.

* ``queries``: scopes, metric queries and formula requests, from the catalogue;
* ``dashboard``: ``dashboard.json``, the same questions as the Grafana dashboard, with template
  variables for the environment, ``team_name``, ``dag_id``, ``task_id``, ``operator`` and ``run_type``;
* ``monitors``: ``monitors/*.json``, one monitor per Prometheus alert, its twin (the same
  thresholds, from the same export settings).

Both are the JSON bodies of Datadog's API (``POST /api/v1/dashboard``, ``POST /api/v1/monitor``);
the dashboard also imports through the UI (New Dashboard → Import dashboard JSON).
"""
