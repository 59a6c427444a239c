"""The tag sets of the stories, as the wrappers take them and as each wire format writes them."""

from __future__ import annotations

import functools
import random
import re
import sys

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
    "a,b",
    "a%2Cb",
    "50%",
    "[signalfx=tag]",
    "unknown",
    "<made up>",
    "other",
    "x\u2028y\x85z",
    "\ud800lone",
    "\u00e9" * 250,
    "\U0001d4d0" * 250,
]

#: Airflow's own rule for a DAG or task id (``airflow.sdk.definitions._internal.node``): ``KEY_REGEX``,
#: at most ``validate_key``'s 250 characters.
AIRFLOW_KEY = re.compile(r"^[\w.-]+$")
AIRFLOW_KEY_MAX = 250


@functools.cache
def id_characters() -> str:
    """Every character Airflow accepts in an id: ASCII ``\\w . -`` and every Unicode word character."""
    return "".join(chr(c) for c in range(sys.maxunicode + 1) if AIRFLOW_KEY.match(chr(c)))


def airflow_ids(count: int, seed: int) -> list[str]:
    """``count`` ids Airflow accepts, drawn from every character it accepts, 1 to 250 long (the
    longest and a few near it always among them), reproducible from ``seed``."""
    rng, characters = random.Random(seed), id_characters()
    lengths = [
        AIRFLOW_KEY_MAX,
        AIRFLOW_KEY_MAX - 1,
        1,
        *(rng.randint(1, AIRFLOW_KEY_MAX) for _ in range(count)),
    ]
    return ["".join(rng.choice(characters) for _ in range(n)) for n in lengths[:count]]


def any_strings(count: int, seed: int) -> list[str]:
    """``count`` strings of any code points (separators, controls, surrogates, every plane), 0 to 600
    long, reproducible from ``seed``: what a tag value from outside may be."""
    rng, characters = random.Random(seed), id_characters()
    separators = "%,=:|#[]<> \n\r\t\x00\x7f\x85\u2028\u2029\ud800\udfff"

    def one() -> str:
        draw = rng.random()
        if draw < 0.2:
            return rng.choice(separators)
        return rng.choice(characters) if draw < 0.6 else chr(rng.randint(0, sys.maxunicode))

    return ["".join(one() for _ in range(rng.randint(0, 600))) for _ in range(count)]
