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

TEMPLATE = REPO_ROOT / "dagster_home" / "dagster.yaml"


def test_definitions_load() -> None:
    dg.Definitions.validate_loadable(defs)

    assets = defs.resolve_asset_graph()
    assert assets.get(LOG_EVENTS_KEY).partitions_def.get_first_partition_key() == "2024-01-01"
    assert {"catalog", "log_source", "paimon_io_manager"} <= set(defs.resources)


def test_ingestion_is_an_op_of_the_asset_graph() -> None:
    [asset] = [a for a in defs.assets or [] if isinstance(a, dg.AssetsDefinition)
               and LOG_EVENTS_KEY in a.keys]

    assert asset.node_def.name == "logs__events"
    assert [node.name for node in asset.node_def.node_defs] == ["ingest_log_events"]
    assert asset.group_names_by_key[LOG_EVENTS_KEY] == "logs"


def test_job_runs_carry_the_table_tag() -> None:
    job = defs.resolve_job_def("ingest_log_events_job")

    assert job.tags.items() >= RUN_TAGS.items()
    assert job.partitions_def is not None


def test_schedule_requests_the_previous_day() -> None:
    schedule = defs.resolve_schedule_def("ingest_log_events_daily")
    tick = dt_.datetime(2024, 3, 5, 1, 0, tzinfo=dt_.UTC)

    [request] = schedule.evaluate_tick(dg.build_schedule_context(scheduled_execution_time=tick)).run_requests

    assert request.partition_key == "2024-03-04"
    assert request.tags.items() >= RUN_TAGS.items()
    assert schedule.job_name == "ingest_log_events_job"
    assert schedule.cron_schedule == "0 1 * * *"


def test_instance_template_limits_one_run_per_table() -> None:
    overrides = yaml.safe_load(TEMPLATE.read_text())

    with dg.instance_for_test(overrides=overrides) as instance:
        queue = instance.get_concurrency_config().run_queue_config
        [limit] = queue.tag_concurrency_limits

    assert limit == {"key": "paimon/table", "value": {"applyLimitPerUniqueValue": True}, "limit": 1}
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
