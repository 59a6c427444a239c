"""The tag sets of the stories, as the wrappers take them and as each wire format writes them."""

from __future__ import annotations

from store_metrics import catalogue

#: The tag set of a task in the stories.
TAGS = catalogue.task_tags(dag_id="d", task_id="t", run_type="manual", operator="X")
#: ``TAGS`` as InfluxDB-StatsD writes them (after the metric name).
WIRE_TAGS = "dag_id=d,task_id=t,run_type=manual,operator=X"
#: ``TAGS`` as DogStatsD writes them (after ``|#``).
DOG_TAGS = "dag_id:d,task_id:t,run_type:manual,operator:X"

#: Tag values that would break a line or inject a metric if written raw.
HOSTILE_VALUES = [
    "x\nairflow.evil:1|c",
    "a,b=c",
    "a|b#c:d",
    "with space",
    "tab\there",
    "cr\rlf\n",
    "caf\u00e9 \u65e5\u672c",
    "",
    "y" * 1000,
    "dag_id:d,task_id:t",
    "|#evil:1",
    "=,",
]
