"""The code location as Dagster loads it: definitions, jobs, schedules, instance config, workspace."""

import dataclasses
import datetime as dt_
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
import yaml

from pipelines import names
from pipelines.component import table_spec
from pipelines.definitions import ENDPOINT_ENV, REPO_ROOT, WAREHOUSE_ENV, default_warehouse, defs, load
from pipelines.errors import TableDefinitionError
from pipelines.factory import SHARED_JOBS, paimon_definitions
from pipelines.maintenance.verdicts import ORPHANS_CHECK, RETENTION_CHECK
from pipelines.spec.declaration import PaimonTableSpec
from resources import keys
from resources.keys import TABLE_TAG
from tests.dagster.conftest import LOGS_JOB, ORDERS_JOB, TOTALS_JOB, small_sources

TEMPLATE = REPO_ROOT / "dagster_home" / "dagster.yaml"
DECLARATION = REPO_ROOT / "pipelines" / "demo" / "defs" / "tables" / "defs.yaml"
SOURCES = REPO_ROOT / "pipelines" / "demo" / "sources.py"
LOGS_KEY = dg.AssetKey(["logs", "events"])
ORDERS_KEY = dg.AssetKey(["shop", "orders"])
TOTALS_KEY = dg.AssetKey(["shop", "user_order_totals"])
REVENUE_KEY = dg.AssetKey(["shop", "order_revenue_by_status"])
REVENUE_JOB = names.ingestion_job("shop.order_revenue_by_status")
# table -> (asset key, ingestion job)
TABLES = {
    "logs.events": (LOGS_KEY, LOGS_JOB),
    "shop.orders": (ORDERS_KEY, ORDERS_JOB),
    "shop.user_order_totals": (TOTALS_KEY, TOTALS_JOB),
    "shop.order_revenue_by_status": (REVENUE_KEY, REVENUE_JOB),
}
LSM_AND_MAINTENANCE_CHECKS = {names.LEVEL0_CHECK, names.SMALL_FILES_CHECK, RETENTION_CHECK, ORPHANS_CHECK}


def demo_specs() -> dict[str, PaimonTableSpec]:
    """The demo's tables as the YAML component declares them (``db.table`` -> spec)."""
    document = yaml.safe_load(DECLARATION.read_text())
    return {entry["table"]: table_spec(entry) for entry in document["attributes"]["tables"]}


def asset_spec(definitions: dg.Definitions, key: dg.AssetKey) -> dg.AssetSpec:
    [spec] = [s for s in definitions.resolve_all_asset_specs() if s.key == key]
    return spec


def partitions_of(definitions: dg.Definitions, key: dg.AssetKey) -> dg.PartitionsDefinition:
    partitions = definitions.resolve_asset_graph().get(key).partitions_def
    assert partitions is not None
    return partitions


def plain(value: Any) -> Any:
    return getattr(value, "value", value)


# ---- the assets -----------------------------------------------------------------------------


def test_definitions_load() -> None:
    dg.Definitions.validate_loadable(defs)

    assert partitions_of(defs, LOGS_KEY).get_first_partition_key() == "2024-01-01"
    assert partitions_of(defs, LOGS_KEY).get_last_partition_key() == "2024-01-05"  # end is exclusive
    assert {"paimon_catalog", "paimon_io_manager", "log_source", "order_source"} <= set(defs.resources or {})
    assert {spec.key for spec in defs.resolve_all_asset_specs()} == {key for key, _ in TABLES.values()}


def test_shop_assets_are_daily_and_grouped() -> None:
    graph = defs.resolve_asset_graph()

    for key in (ORDERS_KEY, TOTALS_KEY):
        assert partitions_of(defs, key).get_first_partition_key() == "2024-01-01"
        assert partitions_of(defs, key).get_last_partition_key() == "2024-01-03"
        assert graph.get(key).group_name == "shop"
    assert graph.get(REVENUE_KEY).partitions_def is None  # fed by the changelog, not by days
    assert graph.get(REVENUE_KEY).group_name == "shop"
    assert graph.get(LOGS_KEY).group_name == "logs"
    assert graph.get(TOTALS_KEY).parent_keys == {ORDERS_KEY}
    assert graph.get(REVENUE_KEY).parent_keys == {ORDERS_KEY}  # a consumer of shop.orders' changes
    assert "aggregation" in (graph.get(TOTALS_KEY).description or "")


@pytest.mark.parametrize(("table", "data_check"), [
    ("logs.events", True), ("shop.orders", True), ("shop.user_order_totals", False),
    ("shop.order_revenue_by_status", False),
])
def test_each_table_has_its_checks(table: str, data_check: bool) -> None:
    key, _ = TABLES[table]

    checks = {check.name for check in defs.resolve_asset_graph().get_check_keys_for_assets({key})}

    assert checks == LSM_AND_MAINTENANCE_CHECKS | ({names.DATA_CHECK} if data_check else set())


def test_ingestion_is_one_op_per_asset_in_the_tables_pool() -> None:
    graph = defs.resolve_asset_graph()

    for table, (key, _) in TABLES.items():
        asset = graph.get(key).assets_def
        assert asset.node_def.name == "__".join(key.path)  # shop__orders, no longer ingest_orders
        assert isinstance(asset.node_def, dg.OpDefinition)
        assert asset.op.pool == names.pool(table)
        assert asset.op.tags[keys.OPERATION_TAG].startswith("ingest-")
        assert asset.op.retry_policy is not None and asset.op.retry_policy.max_retries == 3


def test_column_schema_carries_descriptions_and_the_primary_key() -> None:
    schema = plain(asset_spec(defs, ORDERS_KEY).metadata["dagster/column_schema"])

    columns = {column.name: column for column in schema.columns}
    assert list(columns) == ["dt", "order_id", "user_id", "status", "amount", "updated_at", "op"]
    assert columns["order_id"].type == "BIGINT"  # NOT NULL is the "non-nullable" constraint
    assert columns["amount"].type == "DECIMAL(12, 2)"
    assert columns["order_id"].description == "YYYYMMDD followed by a running number"
    assert columns["user_id"].description is None
    assert columns["dt"].constraints.other == ["primary key", "partition key"]
    assert columns["order_id"].constraints.other == ["primary key"]
    assert not columns["order_id"].constraints.nullable
    assert not columns["order_id"].constraints.unique  # part of a two-column key
    assert columns["status"].constraints.other == [] and columns["status"].constraints.nullable
    assert schema.constraints is not None
    assert schema.constraints.other == ["PRIMARY KEY (dt, order_id)"]

    logs = plain(asset_spec(defs, LOGS_KEY).metadata["dagster/column_schema"])
    assert not (logs.constraints and logs.constraints.other)  # an append table has no key
    assert logs.columns[-1].constraints.other == ["partition key"]
    assert [(c.name, c.type) for c in logs.columns][:2] == [("ts", "TIMESTAMP(6)"), ("level", "STRING")]
    assert logs.columns[0].description == "When the event happened (UTC)"


def test_assets_name_their_table_uri_kinds_and_owners(tmp_path: Path) -> None:
    warehouse = tmp_path / "warehouse"
    loaded = load(str(warehouse))

    for table, (key, _) in TABLES.items():
        spec = asset_spec(loaded, key)
        database, name = table.split(".")
        assert plain(spec.metadata["dagster/table_name"]) == table
        assert plain(spec.metadata[keys.TABLE_TAG]) == table
        assert plain(spec.metadata["dagster/uri"]) == (warehouse / f"{database}.db" / name).as_uri()
        assert spec.kinds == {"paimon", "parquet", "table"}
    assert asset_spec(loaded, LOGS_KEY).owners == ["team:platform"]
    assert asset_spec(loaded, ORDERS_KEY).owners == ["team:shop"]
    assert asset_spec(loaded, TOTALS_KEY).owners == []
    assert not warehouse.exists(), "loading the definitions writes nothing"


def test_assets_carry_the_write_mode_options_and_consumers() -> None:
    orders = asset_spec(defs, ORDERS_KEY).metadata

    assert plain(orders[keys.WRITE_MODE_METADATA_KEY]) == "upsert"
    assert plain(orders[keys.PRIMARY_KEY_METADATA_KEY]) == "dt, order_id"
    assert plain(orders[keys.PARTITION_KEYS_METADATA_KEY]) == "dt"
    assert plain(orders[keys.CONSUMERS_METADATA_KEY]) == "order_revenue_by_status"
    assert plain(orders[keys.OPTIONS_METADATA_KEY])["write-only"] == "true"  # compacted by the sensor's jobs
    assert plain(orders[keys.OPTIONS_METADATA_KEY])["changelog-producer"] == "full-compaction"
    assert plain(asset_spec(defs, LOGS_KEY).metadata[keys.WRITE_MODE_METADATA_KEY]) == "overwrite"
    assert plain(asset_spec(defs, REVENUE_KEY).metadata[keys.WRITE_MODE_METADATA_KEY]) == "append"


@pytest.mark.parametrize(("key", "function", "line"), [
    (LOGS_KEY, "log_events", "def log_events("),
    (ORDERS_KEY, "order_changes", "def order_changes("),
    (TOTALS_KEY, "user_totals", "def user_totals("),
])
def test_code_references_point_at_the_declaration_and_the_source(key: dg.AssetKey, function: str,
                                                                line: str) -> None:
    references = plain(asset_spec(defs, key).metadata["dagster/code_references"]).code_references

    labelled = {reference.label: reference for reference in references if reference.label}
    source = labelled[f"{function} (source)"]
    assert Path(source.file_path) == SOURCES
    assert SOURCES.read_text().splitlines()[source.line_number - 1].startswith(line)
    # Dagster's components add the YAML file's own reference (its `type:` line), once.
    assert [Path(r.file_path) for r in references if r is not source] == [DECLARATION]


# ---- jobs, schedules, sensors -----------------------------------------------------------------


@pytest.mark.parametrize("table", list(TABLES))
def test_ingestion_jobs_are_tagged_in_process_and_select_their_asset(table: str) -> None:
    key, job_name = TABLES[table]

    job = defs.resolve_job_def(job_name)

    assert job.tags[TABLE_TAG] == table
    assert job.executor_def is dg.in_process_executor
    assert set(job.asset_layer.selected_asset_keys) == {key}
    assert (job.partitions_def is not None) == (key != REVENUE_KEY)


@pytest.mark.parametrize("table", list(TABLES))
def test_ingestion_runs_leave_the_orphan_listing_to_the_cleanup_job(table: str) -> None:
    """no_orphan_files lists the whole table (costly on S3): not after every ingestion."""
    _, job_name = TABLES[table]

    checks = {key.name for key in defs.resolve_job_def(job_name).asset_layer.asset_graph.asset_check_keys}

    assert RETENTION_CHECK in checks and ORPHANS_CHECK not in checks


def test_demo_ingestion_has_no_schedules() -> None:
    """The demo's partitions end where its data ends: its days are materialized by hand or ``make demo``."""
    names = {schedule.name for schedule in defs.schedules or []}

    assert not {name for name in names if name.startswith("ingest_")}


def test_a_scheduled_table_requests_the_day_that_just_ended(tmp_path: Path) -> None:
    logs = demo_specs()["logs.events"]
    assert logs.ingestion is not None
    scheduled = logs.with_options(
        ingestion=dataclasses.replace(logs.ingestion, schedule=True, schedule_hour=1, schedule_minute=15),
        partitions=dataclasses.replace(logs.partitions, end=None))
    definitions = paimon_definitions([scheduled], warehouse=str(tmp_path / "warehouse"), resources=small_sources())
    schedule = definitions.resolve_schedule_def(names.ingestion_schedule("logs.events"))
    tick = dt_.datetime(2024, 3, 5, 1, 15, tzinfo=dt_.UTC)

    [request] = schedule.evaluate_tick(dg.build_schedule_context(scheduled_execution_time=tick)).run_requests or []

    assert request.partition_key == "2024-03-04"
    assert request.tags[TABLE_TAG] == "logs.events"
    assert schedule.job_name == LOGS_JOB
    assert schedule.cron_schedule == "15 1 * * *"
    assert schedule.default_status == dg.DefaultScheduleStatus.STOPPED


@pytest.mark.parametrize(("job_name", "operation"), [
    (names.EXPIRE_JOB, "expire-snapshots"),
    (names.ORPHANS_JOB, "remove-orphan-files"),
])
def test_maintenance_jobs_have_a_schedule_per_table(job_name: str, operation: str) -> None:
    job = defs.resolve_job_def(job_name)

    assert job.tags[keys.OPERATION_TAG] == operation
    for table in TABLES:
        schedule = defs.resolve_schedule_def(f"{operation.replace('-', '_')}_{table.replace('.', '_')}")
        assert schedule.job_name == job_name
        assert schedule.default_status == dg.DefaultScheduleStatus.RUNNING


def test_every_table_has_a_compaction_sensor_and_the_revenue_a_changes_sensor() -> None:
    sensors = {sensor.name: sensor for sensor in defs.sensors or []}

    assert set(sensors) == {names.compaction_sensor(table) for table in TABLES} | {
        names.changes_sensor("shop.order_revenue_by_status")}
    assert {s.default_status for s in sensors.values()} == {dg.DefaultSensorStatus.RUNNING}
    assert sensors[names.changes_sensor("shop.order_revenue_by_status")].job_name == REVENUE_JOB


# ---- composing definitions ------------------------------------------------------------------


def test_two_paimon_definitions_on_one_warehouse_merge(tmp_path: Path, instance: dg.DagsterInstance) -> None:
    specs = demo_specs()
    warehouse = str(tmp_path / "warehouse")
    sources = small_sources()  # user resources both sides define must be the same objects too
    logs = paimon_definitions([specs["logs.events"]], warehouse=warehouse, resources=sources)
    shop = paimon_definitions([s for name, s in specs.items() if name != "logs.events"], warehouse=warehouse,
                              resources=sources)

    merged = dg.Definitions.merge(logs, shop)

    dg.Definitions.validate_loadable(merged)
    assert {spec.key for spec in merged.resolve_all_asset_specs()} == {key for key, _ in TABLES.values()}
    jobs = {job.name for job in merged.resolve_all_job_defs()}
    assert {job_name for _, job_name in TABLES.values()} | {job.name for job in SHARED_JOBS} <= jobs
    result = merged.resolve_job_def(LOGS_JOB).execute_in_process(partition_key="2024-01-02", instance=instance)
    assert result.success
    assert merged.resources is not None
    assert merged.resources["paimon_catalog"].table("logs.events").read(["dt"]).num_rows > 0


def test_a_table_declared_twice_is_refused() -> None:
    logs = demo_specs()["logs.events"]

    with pytest.raises(TableDefinitionError, match="declare each table once"):
        paimon_definitions([logs, logs], warehouse="/tmp/unused-warehouse")


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


def test_a_refused_table_in_a_defs_yaml_names_the_file_line_and_field(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    project = tmp_path / "bad_project"
    defs = project / "bad_project" / "defs" / "crm"
    defs.mkdir(parents=True)
    (project / "pyproject.toml").write_text('[tool.dg]\ndirectory_type = "project"\n\n[tool.dg.project]\n'
                                            'root_module = "bad_project"\ndefs_module = "bad_project.defs"\n')
    for package in (project / "bad_project", project / "bad_project" / "defs"):
        (package / "__init__.py").write_text("")
    (defs / "defs.yaml").write_text(
        "type: pipelines.component.PaimonTables\n"
        "attributes:\n"
        f"  warehouse: {tmp_path / 'warehouse'}\n"
        "  tables:\n"
        "    - table: crm.customers\n"
        "      columns: [{name: id, type: BIGINT NOT NULL}]\n"
        "      primary_key: [id]\n"
        "      ingestion:\n"
        "        function: tests.dagster.test_dagster_definitions:no_rows\n"
        "        mode: merge\n")
    monkeypatch.syspath_prepend(str(project))
    try:
        with pytest.raises(Exception) as error:
            dg.load_from_defs_folder(path_within_project=project)
    finally:
        for module in [m for m in sys.modules if m.split(".")[0] == "bad_project"]:
            del sys.modules[module]
    causes, cause = [], error.value
    while cause is not None:
        causes.append(str(cause))
        cause = cause.__cause__ or cause.__context__
    text = "\n".join(causes)
    assert "defs.yaml:10" in text and "mode: merge" in text
    assert "table crm.customers: ingestion.mode: 'merge' is not one of append, overwrite, upsert" in text


def no_rows(context: Any) -> Any:
    """A source function the refused declaration above names (never called)."""
    raise AssertionError("a refused declaration runs nothing")
