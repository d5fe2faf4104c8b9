"""The code location as Dagster loads it: definitions, job, schedule, instance config, workspace."""

import datetime as dt_
import os
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest
import yaml

from pipelines.assets import LOG_EVENTS_KEY, RUN_TAGS
from pipelines.definitions import REPO_ROOT, WAREHOUSE_ENV, default_warehouse, defs
from pipelines.order_assets import ORDERS_KEY, ORDERS_RUN_TAGS, USER_ORDER_TOTALS_KEY

TEMPLATE = REPO_ROOT / "dagster_home" / "dagster.yaml"


def test_definitions_load() -> None:
    dg.Definitions.validate_loadable(defs)

    assets = defs.resolve_asset_graph()
    assert assets.get(LOG_EVENTS_KEY).partitions_def.get_first_partition_key() == "2024-01-01"
    assert {"catalog", "log_source", "order_source", "paimon_io_manager"} <= set(defs.resources)


def test_shop_assets_are_daily_and_grouped() -> None:
    graph = defs.resolve_asset_graph()

    for key in (ORDERS_KEY, USER_ORDER_TOTALS_KEY):
        assert graph.get(key).partitions_def.get_first_partition_key() == "2024-01-01"
        assert graph.get(key).group_name == "shop"
    assert graph.get(USER_ORDER_TOTALS_KEY).parent_keys == {ORDERS_KEY}
    assert "aggregation" in graph.get(USER_ORDER_TOTALS_KEY).description
    checks = {check.name for check in graph.get_check_keys_for_assets({ORDERS_KEY})}
    assert checks == {"orders_partition_valid", "level0_below_stop_trigger", "small_files",
                      "snapshots_within_retention", "no_orphan_files"}


def test_ingestion_is_an_op_of_the_asset_graph() -> None:
    [asset] = [a for a in defs.assets or [] if isinstance(a, dg.AssetsDefinition)
               and LOG_EVENTS_KEY in a.keys]

    assert asset.node_def.name == "logs__events"
    assert [node.name for node in asset.node_def.node_defs] == ["ingest_log_events"]
    assert asset.group_names_by_key[LOG_EVENTS_KEY] == "logs"


@pytest.mark.parametrize(("job_name", "tags"), [
    ("ingest_log_events_job", RUN_TAGS),
    ("ingest_orders_job", ORDERS_RUN_TAGS),
])
def test_job_runs_carry_the_table_tag(job_name: str, tags: dict[str, str]) -> None:
    job = defs.resolve_job_def(job_name)

    assert job.tags.items() >= tags.items()
    assert job.partitions_def is not None


def test_orders_job_selects_both_shop_assets() -> None:
    job = defs.resolve_job_def("ingest_orders_job")

    assert set(job.asset_layer.selected_asset_keys) == {ORDERS_KEY, USER_ORDER_TOTALS_KEY}


@pytest.mark.parametrize(("name", "job_name", "tags", "cron"), [
    ("ingest_log_events_daily", "ingest_log_events_job", RUN_TAGS, "0 1 * * *"),
    ("ingest_orders_daily", "ingest_orders_job", ORDERS_RUN_TAGS, "15 1 * * *"),
])
def test_schedule_requests_the_previous_day(name: str, job_name: str, tags: dict[str, str], cron: str) -> None:
    schedule = defs.resolve_schedule_def(name)
    tick = dt_.datetime(2024, 3, 5, 1, 15, tzinfo=dt_.UTC)

    [request] = schedule.evaluate_tick(dg.build_schedule_context(scheduled_execution_time=tick)).run_requests

    assert request.partition_key == "2024-03-04"
    assert request.tags.items() >= tags.items()
    assert schedule.job_name == job_name
    assert schedule.cron_schedule == cron
    assert schedule.default_status == dg.DefaultScheduleStatus.STOPPED


@pytest.mark.parametrize(("job_name", "operation"), [
    ("paimon_expire_snapshots_job", "expire-snapshots"),
    ("paimon_remove_orphan_files_job", "remove-orphan-files"),
])
def test_maintenance_jobs_have_a_schedule_per_table(job_name: str, operation: str) -> None:
    job = defs.resolve_job_def(job_name)

    assert job.tags["paimon/operation"] == operation
    for table in ("logs_events", "shop_orders", "shop_order_revenue_by_status"):
        schedule = defs.resolve_schedule_def(f"{operation.replace('-', '_')}_{table}")
        assert schedule.job_name == job_name
        assert schedule.default_status == dg.DefaultScheduleStatus.RUNNING


def test_instance_template_limits_one_run_per_table() -> None:
    overrides = yaml.safe_load(TEMPLATE.read_text())

    with dg.instance_for_test(overrides=overrides) as instance:
        queue = instance.get_concurrency_config().run_queue_config
        limits = queue.tag_concurrency_limits

    # One ingestion run and, separately, one compaction run per table at a time.
    assert limits == [{"key": key, "value": {"applyLimitPerUniqueValue": True}, "limit": 1}
                      for key in ("paimon/table", "paimon/compaction")]
    assert overrides["telemetry"] == {"enabled": False}
    assert overrides["nux"] == {"enabled": False}


@pytest.mark.parametrize(("configured", "expected"), [
    ("", str(REPO_ROOT / "warehouse")),
    ("s3://bucket/wh", "s3://bucket/wh"),
    ("rel/wh", str(Path.cwd() / "rel" / "wh")),
])
def test_default_warehouse(monkeypatch: pytest.MonkeyPatch, configured: str, expected: str) -> None:
    monkeypatch.setenv(WAREHOUSE_ENV, configured)

    assert default_warehouse() == expected


def test_workspace_loads_with_the_cli(tmp_path: Path) -> None:
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text(TEMPLATE.read_text())
    env = {**os.environ, "DAGSTER_HOME": str(home), WAREHOUSE_ENV: str(tmp_path / "warehouse")}
    dagster = Path(sys.executable).with_name("dagster")

    done = subprocess.run([str(dagster), "definitions", "validate", "-w", "workspace.yaml"],
                          cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120, check=False)

    assert done.returncode == 0, done.stderr
    assert "paimon" in done.stdout + done.stderr


@pytest.mark.parametrize("job_name", ["ingest_log_events_job", "ingest_orders_job"])
def test_ingestion_runs_leave_the_orphan_listing_to_the_cleanup_job(job_name: str) -> None:
    """no_orphan_files lists the whole table (costly on S3): not after every ingestion."""
    from pipelines.definitions import defs as code_location
    from pipelines.maintenance import ORPHANS_CHECK, RETENTION_CHECK

    checks = {key.name for key in code_location.resolve_job_def(job_name).asset_layer.asset_graph.asset_check_keys}
    assert RETENTION_CHECK in checks and ORPHANS_CHECK not in checks
