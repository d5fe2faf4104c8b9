"""Definitions built from a project's declarations (the fixture project's YAML tables): assets,
checks, jobs, schedules, sensors, and composing several declarations."""

import dataclasses
import datetime as dt_
import logging
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
import yaml

from pipelines import names
from pipelines.code_location import REPO_ROOT
from pipelines.errors import TableDefinitionError
from pipelines.factory import paimon_definitions
from pipelines.maintenance.verdicts import ORPHANS_CHECK, RETENTION_CHECK
from pipelines.runtime_bounds import MAINTENANCE_S
from resources import keys
from resources.keys import TABLE_TAG
from tests.dagster.conftest import EVENTS_JOB, ORDERS_JOB, TOTALS_JOB
from tests.support.dagster_runs import asset_spec, causes_of, partitions_of, plain
from tests.support.fixture_project import sources as fixture_sources
from tests.support.fixture_project.definitions import defs, load
from tests.support.fixture_project.sources import resources as fixture_resources
from tests.support.fixture_project.tables import (
    DECLARATION,
    EVENTS_KEY,
    EVENTS_TABLE,
    ORDERS_KEY,
    ORDERS_TABLE,
    REVENUE_KEY,
    REVENUE_TABLE,
    TOTALS_KEY,
    TOTALS_TABLE,
    declared,
)
from tests.support.fixture_project.tables import spec as spec_of

SOURCES = Path(fixture_sources.__file__)
REVENUE_JOB = names.ingestion_job(REVENUE_TABLE)
# table -> (asset key, ingestion job)
TABLES = {
    EVENTS_TABLE: (EVENTS_KEY, EVENTS_JOB),
    ORDERS_TABLE: (ORDERS_KEY, ORDERS_JOB),
    TOTALS_TABLE: (TOTALS_KEY, TOTALS_JOB),
    REVENUE_TABLE: (REVENUE_KEY, REVENUE_JOB),
}
LSM_AND_MAINTENANCE_CHECKS = {names.LEVEL0_CHECK, names.SMALL_FILES_CHECK, RETENTION_CHECK, ORPHANS_CHECK,
                              names.INSTANCE_CHECK}


# ---- the assets -----------------------------------------------------------------------------


def test_sales_assets_are_daily_and_grouped() -> None:
    graph = defs.resolve_asset_graph()

    for key in (ORDERS_KEY, TOTALS_KEY):
        assert partitions_of(defs, key).get_first_partition_key() == "2024-01-01"
        assert partitions_of(defs, key).get_last_partition_key() == "2024-01-03"
        assert graph.get(key).group_name == "sales"
    assert graph.get(REVENUE_KEY).partitions_def is None  # fed by the changelog, not by days
    assert graph.get(REVENUE_KEY).group_name == "sales"
    assert graph.get(EVENTS_KEY).group_name == "app"
    assert graph.get(TOTALS_KEY).parent_keys == {ORDERS_KEY}
    assert graph.get(REVENUE_KEY).parent_keys == {ORDERS_KEY}  # a consumer of sales.orders' changes
    assert "aggregation" in (graph.get(TOTALS_KEY).description or "")


@pytest.mark.parametrize(("table", "data_check"), [
    (EVENTS_TABLE, True), (ORDERS_TABLE, True), (TOTALS_TABLE, False), (REVENUE_TABLE, False),
])
def test_each_table_has_its_checks(table: str, data_check: bool) -> None:
    key, _ = TABLES[table]

    checks = {check.name for check in defs.resolve_asset_graph().get_check_keys_for_assets({key})}

    assert checks == LSM_AND_MAINTENANCE_CHECKS | ({names.DATA_CHECK} if data_check else set())


def test_ingestion_is_one_op_per_asset_in_the_tables_pool() -> None:
    graph = defs.resolve_asset_graph()

    for table, (key, _) in TABLES.items():
        asset = graph.get(key).assets_def
        assert asset.node_def.name == "__".join(key.path)  # sales__orders: the key, not the job
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

    logs = plain(asset_spec(defs, EVENTS_KEY).metadata["dagster/column_schema"])
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
    assert asset_spec(loaded, EVENTS_KEY).owners == ["team:platform"]
    assert asset_spec(loaded, ORDERS_KEY).owners == ["team:sales"]
    assert asset_spec(loaded, TOTALS_KEY).owners == []
    assert not warehouse.exists(), "loading the definitions writes nothing"


def test_assets_carry_the_write_mode_options_and_consumers() -> None:
    orders = asset_spec(defs, ORDERS_KEY).metadata

    assert plain(orders[keys.WRITE_MODE_METADATA_KEY]) == "upsert"
    assert plain(orders[keys.PRIMARY_KEY_METADATA_KEY]) == "dt, order_id"
    assert plain(orders[keys.PARTITION_KEYS_METADATA_KEY]) == "dt"
    assert plain(orders[keys.CONSUMERS_METADATA_KEY]) == "revenue_by_status"
    assert plain(orders[keys.OPTIONS_METADATA_KEY])["write-only"] == "true"  # compacted by the sensor's jobs
    assert plain(orders[keys.OPTIONS_METADATA_KEY])["changelog-producer"] == "full-compaction"
    assert plain(asset_spec(defs, EVENTS_KEY).metadata[keys.WRITE_MODE_METADATA_KEY]) == "overwrite"
    assert plain(asset_spec(defs, REVENUE_KEY).metadata[keys.WRITE_MODE_METADATA_KEY]) == "append"


@pytest.mark.parametrize(("key", "function", "line"), [
    (EVENTS_KEY, "events", "def events("),
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


def test_a_scheduled_table_requests_the_day_that_just_ended(tmp_path: Path) -> None:
    logs = spec_of(EVENTS_TABLE)
    assert logs.ingestion is not None
    scheduled = logs.with_options(
        ingestion=dataclasses.replace(logs.ingestion, schedule=True, schedule_hour=1, schedule_minute=15),
        partitions=dataclasses.replace(logs.partitions, end=None))
    definitions = paimon_definitions([scheduled], warehouse=str(tmp_path / "warehouse"), resources=fixture_resources())
    schedule = definitions.resolve_schedule_def(names.ingestion_schedule(EVENTS_TABLE))
    tick = dt_.datetime(2024, 3, 5, 1, 15, tzinfo=dt_.UTC)

    [request] = schedule.evaluate_tick(dg.build_schedule_context(scheduled_execution_time=tick)).run_requests or []

    assert request.partition_key == "2024-03-04"
    assert request.tags[TABLE_TAG] == EVENTS_TABLE
    assert schedule.job_name == EVENTS_JOB
    assert schedule.cron_schedule == "15 1 * * *"
    assert schedule.default_status == dg.DefaultScheduleStatus.STOPPED


@pytest.mark.parametrize(("job_of", "schedule_of", "operation"), [
    (names.expire_job, names.expire_schedule, "expire-snapshots"),
    (names.orphans_job, names.orphans_schedule, "remove-orphan-files"),
])
def test_every_table_has_its_maintenance_jobs_and_schedules(job_of: Any, schedule_of: Any, operation: str) -> None:
    for table in TABLES:
        job = defs.resolve_job_def(job_of(table))
        # One per table at a time however launched, failed by run monitoring past its bound.
        assert job.tags == {keys.COMPACTION_TAG: table, keys.MAX_RUNTIME_TAG: str(MAINTENANCE_S)}
        assert {node.definition.tags[keys.OPERATION_TAG] for node in job.graph.nodes} == {operation}
        assert job.executor_def is dg.in_process_executor
        schedule = defs.resolve_schedule_def(schedule_of(table))
        assert schedule.job_name == job.name
        assert schedule.default_status == dg.DefaultScheduleStatus.RUNNING


def test_every_table_has_a_compaction_sensor_and_a_watchdog_and_the_revenue_a_changes_sensor() -> None:
    sensors = {sensor.name: sensor for sensor in defs.sensors or []}

    assert set(sensors) == {names.compaction_sensor(table) for table in TABLES} | {
        names.watch_sensor(table) for table in TABLES} | {names.changes_sensor(REVENUE_TABLE)}
    assert {s.default_status for s in sensors.values()} == {dg.DefaultSensorStatus.RUNNING}
    assert sensors[names.changes_sensor(REVENUE_TABLE)].job_name == REVENUE_JOB


# ---- composing definitions ------------------------------------------------------------------


def test_two_paimon_definitions_on_one_warehouse_merge(tmp_path: Path, instance: dg.DagsterInstance) -> None:
    warehouse = str(tmp_path / "warehouse")
    sources = fixture_resources()  # user resources both sides define must be the same objects too
    logs = paimon_definitions([spec_of(EVENTS_TABLE)], warehouse=warehouse, resources=sources)
    shop = paimon_definitions([s for s in declared() if s.table != EVENTS_TABLE], warehouse=warehouse,
                              resources=sources)

    merged = dg.Definitions.merge(logs, shop)

    dg.Definitions.validate_loadable(merged)
    assert {spec.key for spec in merged.resolve_all_asset_specs()} == {key for key, _ in TABLES.values()}
    jobs = {job.name for job in merged.resolve_all_job_defs()}
    own = [job(table) for table in TABLES for job in (names.ingestion_job, names.compaction_job,
                                                       names.full_compaction_job, names.expire_job, names.orphans_job)]
    assert set(own) <= jobs
    result = merged.resolve_job_def(EVENTS_JOB).execute_in_process(partition_key="2024-01-02", instance=instance)
    assert result.success
    assert merged.resources is not None
    assert merged.resources["paimon_catalog"].table(EVENTS_TABLE).read(["dt"]).num_rows > 0


def test_a_table_declared_twice_is_refused() -> None:
    logs = spec_of(EVENTS_TABLE)

    with pytest.raises(TableDefinitionError, match="declare each table once"):
        paimon_definitions([logs, logs], warehouse="/tmp/unused-warehouse")


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
    causes = causes_of(error.value)
    text = "\n".join(causes)
    assert "defs.yaml:10" in text and "mode: merge" in text
    assert "table crm.customers: ingestion.mode: 'merge' is not one of append, overwrite, upsert" in text


def no_rows(context: Any) -> Any:
    """A source function the refused declaration above names (never called)."""
    raise AssertionError("a refused declaration runs nothing")


def test_an_option_the_declaration_changed_is_said_in_the_run_and_its_metadata(
        tmp_path: Path, instance: dg.DagsterInstance) -> None:
    warehouse = str(tmp_path / "warehouse")
    declared = spec_of(ORDERS_TABLE)
    first = paimon_definitions([declared], warehouse=warehouse, resources=fixture_resources())
    assert first.resolve_job_def(ORDERS_JOB).execute_in_process(partition_key="2024-01-01", instance=instance).success
    edited = declared.with_options(options={**declared.options, "full-compaction.delta-commits": "3", "bucket": "2"})
    second = paimon_definitions([edited], warehouse=warehouse, resources=fixture_resources())

    result = second.resolve_job_def(ORDERS_JOB).execute_in_process(partition_key="2024-01-02", instance=instance)

    said = [e.message for e in instance.all_logs(result.run_id) if e.level >= logging.WARNING]
    assert any(f"table {ORDERS_TABLE}: options changed by its declaration: full-compaction.delta-commits 5 -> 3"
               in line for line in said), said
    assert any("keeping them: bucket='4' (wanted '2')" in line for line in said), said
    [materialization] = result.get_asset_materialization_events()
    changed = materialization.materialization.metadata[keys.INGEST_OPTIONS_CHANGED].value
    assert "full-compaction.delta-commits 5 -> 3" in changed and "bucket='4' (wanted '2')" in changed


def test_a_run_on_an_instance_without_the_limits_says_what_it_lacks(tmp_path: Path) -> None:
    definitions = paimon_definitions([spec_of(EVENTS_TABLE)], warehouse=str(tmp_path / "warehouse"),
                                     resources=fixture_resources())
    template = yaml.safe_load((REPO_ROOT / "dagster_home" / "dagster.yaml").read_text())
    said: dict[str, list[str]] = {}
    shipped = {key: template[key] for key in ("concurrency", "run_monitoring", "run_retries")}
    for name, overrides in (("bare", None), ("template", shipped)):
        with dg.instance_for_test(overrides=overrides) as instance:
            result = definitions.resolve_job_def(EVENTS_JOB).execute_in_process(partition_key="2024-01-01",
                                                                                instance=instance)
            said[name] = [e.message for e in instance.all_logs(result.run_id) if e.level >= logging.WARNING]

    [line] = [m for m in said["bare"] if "lacks what the Paimon tables rely on" in m]
    assert f"key: {keys.TABLE_TAG}" in line and "concurrency.pools.default_limit: 1" in line
    assert "run_monitoring: {enabled: true}" in line and "run_retries: {enabled: true" in line
    assert not [m for m in said["template"] if "lacks what the Paimon tables rely on" in m]
