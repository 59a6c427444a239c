"""Every statement of SECURITY.md is held by a test.

Each paragraph and list of SECURITY.md (but its reporting section) carries a ``<!-- claim: <id> -->``
mark; ``CLAIMS`` maps each id to the tests that hold it, and this file checks the mapping both
ways (no mark without tests, no mapped claim without its mark, every test named exists). The
statements that quote the code (the endpoints' defaults, the tables each part reads, the tags) are
compared with the code here.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

from sqlalchemy import CompoundSelect, Select

from store_metrics import catalogue
from store_metrics.catalogue import Store
from store_metrics.commands.cli import build_parser
from store_metrics.config.options import default
from store_metrics.inventory.queries import (
    asset_statement,
    asset_users_statement,
    dag_statement,
    dag_totals_statement,
    statement,
)
from support.sql_tables import tables
from testbed.repository import ROOT

SECURITY = ROOT / "SECURITY.md"
HERE = "tests/docs/test_security.py"
NOT_CLAIMS = ("Reporting a vulnerability",)

#: Each claim of SECURITY.md and the tests that hold it (``path::test function``).
CLAIMS: dict[str, list[str]] = {
    "tags": [f"{HERE}::test_no_metric_is_tagged_with_a_key_a_value_a_run_or_an_attempt"],
    "endpoints": [f"{HERE}::test_the_endpoints_and_their_default_addresses_are_the_codes"],
    "tables": [
        f"{HERE}::test_the_tables_named_are_those_each_part_reads",
        "tests/airflow/test_database_reads.py::test_the_state_store_views_read_six_tables_and_the_inventory_three",
        "tests/airflow/test_database_reads.py::test_count_at_api_server_reads_the_attempt_and_its_run",
        "tests/airflow/test_ui.py::test_loading_the_plugin_builds_no_app_and_reads_no_table",
        "tests/airflow/test_inventory.py::test_the_ui_reads_each_dag_and_the_deployment_exactly",
    ],
    "read-only": [
        "tests/airflow/test_database_reads.py::test_on_postgresql_the_transaction_is_read_only",
        "tests/airflow/test_database_reads.py::test_on_sqlite_only_a_deadline_bounds_it",
        "tests/airflow/test_inventory.py::test_sizes_are_computed_in_sql_for_each_dialect",
        "tests/airflow/test_inventory.py::test_a_statement_timeout_on_sqlite_costs_one_line_and_exit_code_3",
        "tests/airflow/test_inventory_postgres.py::test_a_slow_database_costs_one_line_and_the_loop_recovers",
        "tests/airflow/test_inventory_mariadb.py::test_a_slow_database_costs_one_line_and_the_loop_recovers",
    ],
    "routes": [
        "tests/airflow/test_ui_routes_access.py::test_every_route_naming_a_dag_carries_the_dag_read_check",
        "tests/airflow/test_ui_routes_access.py::test_a_route_switched_to_any_signed_in_user_is_caught",
    ],
    "page": [
        "tests/airflow/test_ui.py::test_the_deployment_page_shows_and_counts_only_the_dags_the_user_may_read",
        "tests/airflow/test_ui.py::"
        "test_a_user_who_may_not_read_assets_sees_no_asset_and_nobody_sees_a_dag_they_may_not_read",
    ],
    "problems": [
        "tests/airflow/test_ui_problems.py::"
        "test_a_database_error_shows_its_kind_in_the_json_and_its_host_and_user_only_in_the_log",
        "tests/airflow/test_ui_problems.py::"
        "test_a_prometheus_error_shows_its_kind_in_the_json_and_its_address_only_in_the_log",
    ],
    "tag-values": [
        *(
            f"tests/unit/test_statsd_lines.py::{name}"
            for name in (
                "test_every_id_airflow_accepts_is_kept_exactly",
                "test_no_two_values_share_a_label_value",
                "test_a_value_never_carries_a_separator_nor_looks_like_the_plugins_own",
                "test_the_plugins_own_values_are_no_id_airflow_accepts",
            )
        ),
        "tests/shipped/test_collector_inputs.py::test_statsd_exporter_labels_every_id_airflow_accepts_as_it_is",
        "tests/shipped/test_collector_inputs.py::test_the_collector_labels_every_id_airflow_accepts_as_it_is",
    ],
    "tab-query": [
        "tests/airflow/test_ui_deployment.py::"
        "test_two_dags_the_old_tag_rule_made_one_are_two_and_a_viewer_sees_only_the_one_it_may_read",
        "tests/airflow/test_ui_deployment.py::test_a_dag_named_unknown_is_not_shown_the_calls_nobody_could_attribute",
        "tests/airflow/test_ui.py::test_the_calls_query_sums_the_recorded_calls_the_dashboards_read_for_the_dags_series",
    ],
    "kubernetes": [
        f"tests/shipped/test_pod_security.py::{name}"
        for name in (
            "test_every_exported_pod_meets_the_restricted_profile",
            "test_the_restricted_profile_refuses_the_pod_without_each_protection",
            "test_the_inventory_pod_gives_up_what_it_does_not_need",
            "test_kube_score_finds_nothing_beyond_the_written_exceptions",
            "test_every_kube_score_exception_is_written_down_with_its_reason",
            "test_kube_score_flags_the_pod_without_its_protections",
            "test_the_network_policy_admits_only_prometheus_on_the_metrics_port",
        )
    ]
    + [
        "tests/airflow/test_inventory_postgres.py::test_the_inventory_serves_from_a_read_only_root_filesystem"
    ],
    "database-role": [
        "tests/airflow/test_inventory_postgres.py::test_the_helm_pages_read_only_role_reads_the_footprint_and_nothing_more",
        "tests/airflow/test_inventory_mariadb.py::test_the_helm_pages_read_only_user_reads_the_footprint_and_nothing_more",
        "tests/docs/test_deploy_docs.py::test_helm_page_secret_matches_the_patch_and_the_sql",
        "tests/shipped/test_pod_security.py::test_the_inventory_pod_gives_up_what_it_does_not_need",
    ],
    "temp-folders": [
        f"tests/unit/test_temp_folders.py::{name}"
        for name in (
            "test_a_planted_link_at_the_claims_folder_is_not_followed_and_the_clean_up_spares_what_it_points_to",
            "test_a_plain_file_at_the_claims_folder_still_lets_the_retry_be_counted",
            "test_a_claims_folder_that_is_not_this_users_own_is_not_trusted",
            "test_the_clean_up_removes_only_old_claims_it_made",
            "test_on_a_full_disk_no_empty_claim_is_left_and_the_retry_is_counted",
            "test_a_planted_link_at_the_slots_folder_is_not_followed",
            "test_a_foreign_world_writable_slots_folder_is_not_used",
            "test_a_link_planted_as_a_slots_file_is_not_followed",
            "test_without_a_usable_temp_directory_the_api_server_metrics_stay_on",
        )
    ],
    "prometheus": [
        f"tests/airflow/test_ui_prometheus_auth.py::{name}"
        for name in (
            "test_the_tab_reads_a_prometheus_that_wants_a_bearer_token_only_with_the_tokens_file",
            "test_the_tab_reads_a_prometheus_behind_basic_authentication",
            "test_the_tab_reads_a_prometheus_over_tls_with_the_deployments_own_ca",
            "test_a_redirect_is_not_followed_so_the_token_goes_nowhere_else",
        )
    ],
    "prometheus-deployment": [
        "tests/shipped/test_thanos_topology.py::test_the_ui_tab_on_the_querier_shows_its_own_cluster_s_calls_of_a_dag",
        "tests/airflow/test_ui.py::test_the_deployment_s_matchers_are_kept_as_given_and_added_to_every_query_of_the_tab",
        "tests/airflow/test_ui.py::test_a_bad_ui_option_is_refused_naming_it_and_what_it_accepts",
    ],
}

_MARK = re.compile(r"<!-- claim: ([a-z-]+) -->")


@cache
def sections() -> dict[str, str]:
    """SECURITY.md's ``##`` sections by title (the lines before the first one under "")."""
    out: dict[str, str] = {}
    title = ""
    for line in SECURITY.read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            title = line[3:].strip()
            out[title] = ""
        else:
            out[title] = out.get(title, "") + line + "\n"
    return out


def claim_text(claim: str) -> str:
    """The blocks of SECURITY.md that carry ``claim``'s mark."""
    blocks = [b for text in sections().values() for b in text.split("\n\n")]
    return "\n".join(b for b in blocks if f"<!-- claim: {claim} -->" in b)


def test_every_statement_carries_a_claim_and_every_claim_its_tests() -> None:
    unmarked, marks = [], set()
    for title, text in sections().items():
        if not title or title in NOT_CLAIMS:
            continue
        for block in (b.strip() for b in text.split("\n\n")):
            if not block or block.startswith("|"):  # a table belongs to the statement above it
                continue
            found = _MARK.findall(block)
            marks.update(found)
            if not found:
                unmarked.append(block[:80])
    assert unmarked == []
    assert marks == set(CLAIMS)


def test_every_test_named_exists() -> None:
    missing = []
    for tests in CLAIMS.values():
        assert tests
        for ref in tests:
            path, name = ref.split("::")
            if name not in _functions(ROOT / path):
                missing.append(ref)
    assert missing == []


@cache
def _functions(path: Path) -> frozenset[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return frozenset(node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef))


# -- the statements that quote the code --------------------------------------------------------------------


def test_no_metric_is_tagged_with_a_key_a_value_a_run_or_an_attempt() -> None:
    never = {"key", "value", "run_id", "map_index", "ti_id", "task_instance_id", "try_number"}
    assert catalogue.ALL_METRICS
    for metric in catalogue.ALL_METRICS:
        assert not never & set(metric.all_tags), metric.name


def test_the_endpoints_and_their_default_addresses_are_the_codes() -> None:
    table = [line for line in sections()["What store-metrics exposes"].splitlines() if line.startswith("| ")]
    addresses = [row.split("|")[2].strip() for row in table[1:]]  # below the header
    inventory = build_parser().parse_args(["inventory"])
    demo = build_parser().parse_args(["demo"])
    host, port = default("prometheus_host"), default("prometheus_port")
    assert addresses == [
        f"**{host}**:{port}",
        f"**{host}**, from port {default('server_prometheus_port')} up",
        f"**{inventory.host}**:{default('inventory_port')}",
        f"{demo.host}:{port}",
    ]


def test_the_tables_named_are_those_each_part_reads() -> None:
    from airflow.models.taskinstance import TaskInstance

    from store_metrics.api_server import attribution

    bullets = {
        b.split("**")[1]: set(re.findall(r"`([a-z_]+)`", b.split(":", 1)[1]))
        for b in claim_text("tables").split("\n* ")
        if b.startswith("the **") or b.startswith("**")
    }
    ui = [dag_statement(), dag_totals_statement(), asset_statement(), asset_users_statement()]
    reads = [*ui, *(statement(store) for store in Store)]
    assert all(isinstance(stmt, (Select, CompoundSelect)) for stmt in reads)  # SELECTs only
    assert bullets["State store tab and page"] - {"ui"} == set().union(*map(tables, ui))
    inventory = {t for store in Store for t in tables(statement(store))}
    assert bullets["`store-metrics inventory`"] == inventory
    attempt = tables(attribution._attempt_statement(TaskInstance, TaskInstance.id))
    assert attempt < bullets["`count_at = api_server`"] - {"task_instance_history"}
