"""The repository's code location (``workspace.yaml`` -> ``pipelines.definitions``, the demo's
tables) as Dagster loads it, and the instance template ``dagster_home/dagster.yaml``."""

import os
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest
import yaml

from pipelines.definitions import ENDPOINT_ENV, REPO_ROOT, WAREHOUSE_ENV, default_warehouse, defs, load
from resources import keys
from resources.keys import TABLE_TAG
from tests.support.dagster_runs import asset_spec, partitions_of, plain

TEMPLATE = REPO_ROOT / "dagster_home" / "dagster.yaml"
LOGS_KEY = dg.AssetKey(["logs", "events"])
DEMO_KEYS = {LOGS_KEY, dg.AssetKey(["shop", "orders"]), dg.AssetKey(["shop", "user_order_totals"]),
             dg.AssetKey(["shop", "order_revenue_by_status"])}


def test_definitions_load() -> None:
    dg.Definitions.validate_loadable(defs)

    assert partitions_of(defs, LOGS_KEY).get_first_partition_key() == "2024-01-01"
    assert partitions_of(defs, LOGS_KEY).get_last_partition_key() == "2024-01-05"  # end is exclusive
    assert {"paimon_catalog", "paimon_io_manager", "log_source", "order_source"} <= set(defs.resources or {})
    assert {spec.key for spec in defs.resolve_all_asset_specs()} == DEMO_KEYS


def test_demo_ingestion_has_no_schedules() -> None:
    """The demo's partitions end where its data ends: its days are materialized by hand or ``make demo``."""
    names = {schedule.name for schedule in defs.schedules or []}

    assert not {name for name in names if name.startswith("ingest_")}


# ---- instance, environment, workspace -------------------------------------------------------


def test_instance_template_limits_one_run_per_table() -> None:
    overrides = yaml.safe_load(TEMPLATE.read_text())

    with dg.instance_for_test(overrides=overrides) as instance:
        queue = instance.get_concurrency_config().run_queue_config
        assert queue is not None
        limits = queue.tag_concurrency_limits

    # One ingestion run and, separately, one compaction run per table at a time.
    assert limits == [{"key": key, "value": {"applyLimitPerUniqueValue": True}, "limit": 1}
                      for key in (TABLE_TAG, keys.COMPACTION_TAG)]
    assert overrides["telemetry"] == {"enabled": False}
    assert overrides["nux"] == {"enabled": False}


def test_instance_template_gives_each_writer_pool_one_slot() -> None:
    """One writer of a table at a time however its run was launched (the paimon-write/<table> pools)."""
    overrides = yaml.safe_load(TEMPLATE.read_text())

    with dg.instance_for_test(overrides=overrides) as instance:
        pools = instance.get_concurrency_config().pool_config

    assert pools.default_pool_limit == 1
    assert pools.pool_granularity is not None and pools.pool_granularity.value == "run"  # held in the run queue


@pytest.mark.parametrize(("configured", "expected"), [
    ("", str(REPO_ROOT / "warehouse")),
    ("s3://bucket/wh", "s3://bucket/wh"),
    ("rel/wh", str(Path.cwd() / "rel" / "wh")),
])
def test_default_warehouse(monkeypatch: pytest.MonkeyPatch, configured: str, expected: str) -> None:
    monkeypatch.setenv(WAREHOUSE_ENV, configured)

    assert default_warehouse() == expected


def test_load_puts_the_warehouse_variable_back(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(WAREHOUSE_ENV, "/somewhere/else")

    loaded = load(str(tmp_path / "warehouse"))

    assert os.environ[WAREHOUSE_ENV] == "/somewhere/else"
    assert plain(asset_spec(loaded, LOGS_KEY).metadata["dagster/uri"]).startswith((tmp_path / "warehouse").as_uri())


def validate_workspace(tmp_path: Path) -> subprocess.CompletedProcess[str]:
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text(TEMPLATE.read_text())
    env = {**os.environ, "DAGSTER_HOME": str(home), WAREHOUSE_ENV: str(tmp_path / "warehouse")}
    dagster = Path(sys.executable).with_name("dagster")
    return subprocess.run([str(dagster), "definitions", "validate", "-w", "workspace.yaml"],
                          cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120, check=False)


def test_workspace_loads_with_the_cli(tmp_path: Path) -> None:
    done = validate_workspace(tmp_path)

    assert done.returncode == 0, done.stderr
    assert "Validation successful for code location paimon" in done.stdout + done.stderr
    assert not (tmp_path / "warehouse").exists(), "loading the code location writes nothing"


def test_an_s3_code_location_takes_its_endpoint_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENDPOINT_ENV, "http://127.0.0.1:1")

    loaded = load("s3://bucket/warehouse")

    catalog = (loaded.resources or {})["paimon_catalog"]
    assert catalog.warehouse == "s3://bucket/warehouse"
    assert catalog.storage_options.get("endpoint_url") == dg.EnvVar(ENDPOINT_ENV)
