"""The pure formatting, to the byte: sanitising and tag order (store_metrics.naming), line text
(store_metrics.backends.statsd_lines)."""

from __future__ import annotations

import pytest

from store_metrics import naming
from store_metrics.backends import statsd_lines
from support.lines import parse_dogstatsd, parse_influx
from support.tags import HOSTILE_VALUES

BASE = (("dag_id", "d"), ("task_id", "t"), ("run_type", "manual"), ("operator", "X"))


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("my_dag.v2-final", "my_dag.v2-final"),
        ("x\nairflow.evil:1|c", "x_airflow.evil_1_c"),
        ("a,b=c", "a_b_c"),
        ("a|b#c:d", "a_b_c_d"),
        ("with space", "with_space"),
        ("tab\there", "tab_here"),
        ("cr\rlf\n", "cr_lf_"),
        ("caf\u00e9", "caf_"),
        ("\u65e5\u672c", "__"),
        ("quote\"'", "quote__"),
        ("", "unknown"),
        (42, "42"),
        (None, "None"),
    ],
)
def test_sanitize_replaces_every_unsafe_character_by_underscore(raw: object, expected: str) -> None:
    assert naming.sanitize_tag_value(raw) == expected


def test_sanitize_cuts_long_values_safe_or_not() -> None:
    assert naming.sanitize_tag_value("y" * 1000) == "y" * naming.MAX_TAG_VALUE_LENGTH
    assert naming.sanitize_tag_value("y" * 200) == "y" * 200
    assert naming.sanitize_tag_value("\n" * 1000) == "_" * 200
    assert naming.MAX_TAG_VALUE_LENGTH == 200


def test_sanitize_never_leaves_an_unsafe_character() -> None:
    everything = "".join(chr(c) for c in range(0x2FF))
    value = naming.sanitize_tag_value(everything)
    assert set(value) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")
    assert len(value) == 200


def test_influx_counter_line_is_exact() -> None:
    assert (
        statsd_lines.influx_counter_line("airflow", "task_state_store.write", BASE, 1)
        == "airflow.task_state_store.write,dag_id=d,task_id=t,run_type=manual,operator=X:1|c"
    )
    assert (
        statsd_lines.influx_counter_line("", "task_state_store.write", (), 3) == "task_state_store.write:3|c"
    )
    assert (
        statsd_lines.influx_stat("platform.airflow", "asset_state_store.clear", BASE[:1])
        == "platform.airflow.asset_state_store.clear,dag_id=d"
    )


def test_dogstatsd_counter_line_is_exact() -> None:
    assert (
        statsd_lines.dogstatsd_counter_line("airflow", "task_state_store.write", BASE, 1)
        == "airflow.task_state_store.write:1|c|#dag_id:d,task_id:t,run_type:manual,operator:X"
    )
    assert (
        statsd_lines.dogstatsd_counter_line("", "task_state_store.write", (), 7)
        == "task_state_store.write:7|c"
    )
    assert statsd_lines.dogstatsd_tag_list(BASE) == ["dag_id:d", "task_id:t", "run_type:manual", "operator:X"]


def test_the_summed_value_goes_on_the_line() -> None:
    assert statsd_lines.influx_counter_line("airflow", "task_state_store.write", BASE, 3).endswith(":3|c")
    assert statsd_lines.dogstatsd_counter_line("airflow", "task_state_store.write", BASE, 3).startswith(
        "airflow.task_state_store.write:3|c|#"
    )


@pytest.mark.parametrize("hostile", HOSTILE_VALUES)
def test_a_hostile_value_yields_exactly_one_well_formed_line(hostile: str) -> None:
    tags = (("dag_id", hostile), *BASE[1:])
    influx = statsd_lines.influx_counter_line("airflow", "task_state_store.write", tags, 1)
    dog = statsd_lines.dogstatsd_counter_line("airflow", "task_state_store.write", tags, 1)
    expected = naming.sanitize_tag_value(hostile)
    for line, parse in ((influx, parse_influx), (dog, parse_dogstatsd)):
        assert line.splitlines() == [line]
        name, parsed_tags, value = parse(line)
        assert name == "airflow.task_state_store.write"
        assert value == 1
        assert parsed_tags == {"dag_id": expected, "task_id": "t", "run_type": "manual", "operator": "X"}


def test_normalize_tags_orders_known_keys_then_others_and_sanitises() -> None:
    tags = {
        "zeta": "z",
        "operation": "get",
        "operator": "My Op",
        "team_name": "ml",
        "alpha": "a",
        "run_type": "manual",
        "task_id": "t",
        "dag_id": "d",
    }
    assert naming.normalize_tags(tags) == (
        ("dag_id", "d"),
        ("task_id", "t"),
        ("run_type", "manual"),
        ("operator", "My_Op"),
        ("team_name", "ml"),
        ("operation", "get"),
        ("alpha", "a"),
        ("zeta", "z"),
    )


@pytest.mark.parametrize("key", ["Dag", "dag id", "", "1dag", "dag-id", "dag:id"])
def test_normalize_tags_rejects_a_bad_key(key: str) -> None:
    with pytest.raises(ValueError, match="is not a lowercase identifier"):
        naming.normalize_tags({key: "v"})


@pytest.mark.parametrize("prefix", ["airflow", "my.team", "a1.b_2", ""])
def test_valid_prefixes(prefix: str) -> None:
    assert naming.is_valid_prefix(prefix)


@pytest.mark.parametrize("prefix", ["1airflow", "a..b", ".a", "a.", "a-b", "a b", "a:b", "a\nb"])
def test_invalid_prefixes(prefix: str) -> None:
    assert not naming.is_valid_prefix(prefix)
