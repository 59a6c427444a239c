"""The pure formatting, to the byte: the tag value rule and tag order (store_metrics.naming), line
text (store_metrics.backends.statsd_lines)."""

from __future__ import annotations

import hashlib
import urllib.parse

import pytest

from store_metrics import catalogue, naming
from store_metrics.backends import statsd_lines
from support.lines import parse_dogstatsd, parse_influx
from support.tags import AIRFLOW_KEY, AIRFLOW_KEY_MAX, HOSTILE_VALUES, airflow_ids, any_strings

BASE = (("dag_id", "d"), ("task_id", "t"), ("run_type", "manual"), ("operator", "X"))


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("my_dag.v2-final", "my_dag.v2-final"),
        ("donn\u00e9es_2024", "donn\u00e9es_2024"),
        ("donn_es_2024", "donn_es_2024"),
        ("\u65e5\u672c\u306e_dag", "\u65e5\u672c\u306e_dag"),
        ("\u043e\u0442\u0447\u0451\u0442", "\u043e\u0442\u0447\u0451\u0442"),
        ("x\nairflow.evil:1|c", "x%0Aairflow.evil%3A1%7Cc"),
        ("a,b=c", "a%2Cb%3Dc"),
        ("a|b#c:d", "a%7Cb%23c%3Ad"),
        ("with space", "with%20space"),
        ("tab\there", "tab%09here"),
        ("cr\rlf\n", "cr%0Dlf%0A"),
        ("[sfx]", "%5Bsfx%5D"),
        ("50%", "50%25"),
        ("a%2Cb", "a%252Cb"),
        ("x\u2028y\x85", "x%E2%80%A8y%C2%85"),
        ("\ud800", "%ED%A0%80"),
        ("quote\"'/\\", "quote\"'/\\"),
        ("unknown", "unknown"),
        ("<unknown>", "<unknown>"),
        ("<no>", "%3Cno%3E"),
        ("", "<unknown>"),
        (42, "42"),
        (None, "None"),
    ],
)
def test_a_tag_value_keeps_its_identity_and_escapes_only_separators(raw: object, expected: str) -> None:
    assert naming.tag_value(raw) == expected


def test_every_id_airflow_accepts_is_kept_exactly() -> None:
    """Ids drawn from every character Airflow accepts, up to its 250, each checked by Airflow's own
    ``validate_key``: each is its own label value, on a line that reads back as it."""
    node = pytest.importorskip("airflow.sdk.definitions._internal.node")
    ids = airflow_ids(400, seed=43)
    for dag_id in ids:
        node.validate_key(dag_id)
        assert AIRFLOW_KEY.match(dag_id) and len(dag_id) <= AIRFLOW_KEY_MAX
        assert naming.tag_value(dag_id) == dag_id
        tags = (("dag_id", dag_id), ("task_id", dag_id[::-1]), *BASE[2:])
        for line, parse in (
            (statsd_lines.influx_counter_line("airflow", "task_state_store.write", tags, 1), parse_influx),
            (
                statsd_lines.dogstatsd_counter_line("airflow", "task_state_store.write", tags, 1),
                parse_dogstatsd,
            ),
        ):
            assert parse(line)[1] == {
                "dag_id": dag_id,
                "task_id": dag_id[::-1],
                "run_type": "manual",
                "operator": "X",
            }


def test_no_two_values_share_a_label_value() -> None:
    values = [
        *HOSTILE_VALUES,
        *any_strings(1500, seed=43),
        *airflow_ids(300, seed=44),
        *catalogue.RESERVED_VALUES,
    ]
    distinct = set(values) - {""}  # "" is <unknown>: a value nobody could know
    assert len({naming.tag_value(v) for v in distinct}) == len(distinct)


def test_an_escaped_value_reads_back_as_the_value() -> None:
    for value in [*HOSTILE_VALUES, *any_strings(500, seed=45)]:
        escaped = naming.tag_value(value)
        if not value or len(escaped) == naming.MAX_TAG_VALUE_LENGTH:
            continue
        assert urllib.parse.unquote(escaped, errors="surrogatepass") == value


def test_a_value_never_carries_a_separator_nor_looks_like_the_plugins_own() -> None:
    for value in [*HOSTILE_VALUES, *any_strings(1500, seed=46)]:
        escaped = naming.tag_value(value)
        separators = set(",=:|#[] <>\n\r\t\x85\u2028\u2029")
        assert not set(escaped) & separators or escaped in catalogue.RESERVED_VALUES
        assert 0 < len(escaped) <= naming.MAX_TAG_VALUE_LENGTH
        escaped.encode("utf-8")  # no lone surrogate left


def test_a_long_value_is_cut_with_its_digest_so_long_values_stay_apart() -> None:
    a, b = "y" * 2000, "y" * 1999 + "z"
    assert naming.MAX_TAG_VALUE_LENGTH == 1500
    assert naming.tag_value("y" * 1500) == "y" * 1500
    cut_a, cut_b = naming.tag_value(a), naming.tag_value(b)
    assert len(cut_a) == len(cut_b) == 1500
    assert cut_a.startswith("y" * 1483 + "~") and cut_a != cut_b
    assert cut_a == "y" * 1483 + "~" + hashlib.sha256(a.encode()).hexdigest()[:16]
    # escaping counts: 600 commas are 1800 characters once escaped
    assert naming.tag_value("," * 600).startswith("%2C" * 494 + "%~")


def test_the_plugins_own_values_are_no_id_airflow_accepts() -> None:
    assert {"<unknown>", "<none>", "<other>", "<overflow>"} == catalogue.RESERVED_VALUES
    for value in catalogue.RESERVED_VALUES:
        assert not AIRFLOW_KEY.match(value)
        assert naming.tag_value(value) == value


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
    tags = (("dag_id", naming.tag_value(hostile)), *BASE[1:])
    influx = statsd_lines.influx_counter_line("airflow", "task_state_store.write", tags, 1)
    dog = statsd_lines.dogstatsd_counter_line("airflow", "task_state_store.write", tags, 1)
    expected = naming.tag_value(hostile)
    for line, parse in ((influx, parse_influx), (dog, parse_dogstatsd)):
        assert line.splitlines() == [line]
        name, parsed_tags, value = parse(line)
        assert name == "airflow.task_state_store.write"
        assert value == 1
        assert parsed_tags == {"dag_id": expected, "task_id": "t", "run_type": "manual", "operator": "X"}


def test_a_line_given_a_raw_value_still_is_one_well_formed_line() -> None:
    """The backends are given values put to the rule; a raw one still cannot break a line."""
    for hostile in HOSTILE_VALUES:
        for line in (
            statsd_lines.influx_counter_line("airflow", "task_state_store.write", (("dag_id", hostile),), 1),
            statsd_lines.dogstatsd_counter_line(
                "airflow", "task_state_store.write", (("dag_id", hostile),), 1
            ),
        ):
            assert line.splitlines() == [line]
            line.encode("utf-8")


def test_normalize_tags_orders_known_keys_then_others_and_escapes() -> None:
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
        ("operator", "My%20Op"),
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
