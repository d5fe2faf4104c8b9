"""The fixture project's app/events asset end to end: real Dagster runs writing a real Paimon table in
tmp_path."""

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow as pa
import pyarrow.compute as pac
import pytest

import paimon_core as pc
from pipelines import names
from resources import PaimonWrite, commit_user_for, keys, write_partition
from resources.keys import TABLE_TAG
from tests.dagster.conftest import EVENTS_JOB
from tests.support.dagster_runs import evaluation_of, metadata_of
from tests.support.fixture_project import data
from tests.support.fixture_project.sources import EventSource
from tests.support.fixture_project.tables import EVENTS_KEY, EVENTS_OPTIONS, EVENTS_SCHEMA, EVENTS_TABLE, path
from tests.support.metadata_values import value_of

DAY = "2024-01-03"
OTHER_DAY = "2024-01-04"


def table_of(resources: dict[str, Any]) -> pc.Table:
    return resources["paimon_catalog"].table(EVENTS_TABLE)


def latest(table: pc.Table) -> pc.Snapshot:
    snapshot = table.latest_snapshot()
    assert snapshot is not None
    return snapshot


def expected_rows(resources: dict[str, Any], day: str) -> pa.Table:
    source: EventSource = resources["event_source"]
    return pa.Table.from_batches(data.events(day, rows=source.rows_per_partition,
                                                   batch_size=source.batch_size))


def day_rows(table: pc.Table, day: str) -> pa.Table:
    return table.read(filter=[("dt", "=", day)]).sort_by([("ts", "ascending"), ("message", "ascending")])


def events_asset(defs: dg.Definitions) -> dg.AssetsDefinition:
    """The asset as the definitions resolve it: its resources (the definitions') bound to it."""
    return defs.resolve_assets_def(EVENTS_KEY)


# ---- materializing days ---------------------------------------------------------------------


def test_rematerializing_a_day_replaces_it(materialize_day: Any, resources: dict[str, Any]) -> None:
    materialize_day(DAY)
    second = materialize_day(DAY)

    table = table_of(resources)
    rows = day_rows(table, DAY)
    assert rows.equals(expected_rows(resources, DAY).sort_by([("ts", "ascending"),
                                                               ("message", "ascending")]))
    snapshots = table.snapshots()
    assert [s.commit_kind for s in snapshots] == ["OVERWRITE", "OVERWRITE"]
    assert snapshots[-1].total_record_count == rows.num_rows
    assert metadata_of(second)[keys.INGEST_SNAPSHOT_ID] == snapshots[-1].id
    assert metadata_of(second)[keys.INGEST_REUSED_COMMIT] is False  # another run writes again


def test_two_days_are_both_kept(materialize_day: Any, resources: dict[str, Any],
                                instance: dg.DagsterInstance) -> None:
    materialize_day(DAY)
    materialize_day(OTHER_DAY)

    table = table_of(resources)
    per_day = table.read(["dt"]).group_by("dt").aggregate([("dt", "count")]).sort_by("dt").to_pylist()
    rows = resources["event_source"].rows_per_partition
    assert per_day == [{"dt": DAY, "dt_count": rows}, {"dt": OTHER_DAY, "dt_count": rows}]
    assert instance.get_materialized_partitions(EVENTS_KEY) == {DAY, OTHER_DAY}


def test_materialization_metadata(materialize_day: Any, resources: dict[str, Any]) -> None:
    materialize_day(OTHER_DAY)
    result = materialize_day(DAY)

    metadata = metadata_of(result)
    table = table_of(resources)
    rows = resources["event_source"].rows_per_partition
    day_files = [f for f in table.files() if f.partition == f"dt={DAY}"]
    assert metadata[keys.INGEST_ROWS_WRITTEN] == rows
    assert metadata["dagster/partition_row_count"] == rows
    assert metadata["dagster/row_count"] == 2 * rows  # an append table: the manifests count it exactly
    assert metadata[keys.INGEST_FILES] == len(day_files) >= 1
    assert metadata[keys.INGEST_SNAPSHOT_ID] == latest(table).id == 2  # shown as text: read, not plotted
    assert metadata[keys.INGEST_COMMIT_KIND] == "OVERWRITE"
    assert metadata[keys.INGEST_MODE] == "overwrite"
    assert metadata[keys.INGEST_COMMITS] == 1
    assert metadata[keys.INGEST_REUSED_COMMIT] is False
    assert metadata["dagster/uri"] == table.uri
    assert metadata["dagster/table_name"] == EVENTS_TABLE
    assert not any(key.startswith(keys.INGEST_INSERTS) for key in metadata)  # no row-kind column
    schema = metadata["dagster/column_schema"]  # as declared: Paimon types, descriptions
    assert [c.name for c in schema.columns] == EVENTS_SCHEMA.names
    assert {c.name: c.type for c in schema.columns}["ts"] == "TIMESTAMP(6)"
    assert {c.name: c.description for c in schema.columns}["dt"] == "The day (partition)"
    # The table's shape is not the write's (a compaction changes it after): the run's level-0 check
    # carries it, as of after the write: one level-0 file per day (write-only).
    assert not any(key.startswith(keys.LSM_PREFIX) for key in metadata)
    shape = evaluation_of(result, names.LEVEL0_CHECK).metadata
    assert (value_of(shape["max_level0_files"]), value_of(shape["snapshot_id"])) == (1, latest(table).id)


def test_commit_records_run_asset_and_partition(materialize_day: Any, resources: dict[str, Any]) -> None:
    result = materialize_day(DAY)

    snapshot = latest(table_of(resources))
    properties = dict(snapshot.properties or {})
    assert snapshot.commit_user == commit_user_for(result.run_id, path(EVENTS_TABLE), DAY)
    assert snapshot.commit_user == f"dagster:{result.run_id}:{path(EVENTS_TABLE)}:{DAY}"
    assert snapshot.commit_identifier == 1
    assert properties[keys.RUN_ID_PROPERTY] == result.run_id
    assert properties[keys.PARTITION_PROPERTY] == DAY
    assert properties[keys.ASSET_KEY_PROPERTY] == path(EVENTS_TABLE)
    assert properties[keys.WRITE_MODE_PROPERTY] == "overwrite"


def test_job_run_is_tagged_and_writes_the_day(run_job: Any, resources: dict[str, Any]) -> None:
    result = run_job(EVENTS_JOB, DAY)

    assert result.dagster_run.tags[TABLE_TAG] == EVENTS_TABLE
    assert result.dagster_run.tags["dagster/partition"] == DAY
    assert table_of(resources).read(["dt"]).num_rows == resources["event_source"].rows_per_partition
    evaluations = {e.check_name: e.passed for e in result.get_asset_check_evaluations()}
    assert evaluations == {names.DATA_CHECK: True, names.LEVEL0_CHECK: True, names.SMALL_FILES_CHECK: True,
                           names.RETENTION_CHECK: True}  # no_orphan_files runs with the cleanup job


def test_a_step_that_materializes_the_asset_directly_uses_the_tables_pool(
        resources: dict[str, Any], project_defs: dg.Definitions, instance: dg.DagsterInstance) -> None:
    """Outside the job (dg.materialize, the asset page), the step still writes exactly the day."""
    result = dg.materialize([events_asset(project_defs)], partition_key=DAY, instance=instance)

    assert result.success
    assert events_asset(project_defs).op.pool == names.pool(EVENTS_TABLE)
    assert day_rows(table_of(resources), DAY).num_rows == resources["event_source"].rows_per_partition


def test_retried_commit_in_the_same_run_is_not_applied_twice(resources: dict[str, Any]) -> None:
    catalog = resources["paimon_catalog"]
    table = catalog.ensure_table(EVENTS_TABLE, schema=EVENTS_SCHEMA, partition_keys=["dt"], options=EVENTS_OPTIONS)
    user = commit_user_for("run-1", path(EVENTS_TABLE), DAY)

    first = write_partition(table, data.events(DAY, rows=100), mode="overwrite", partition={"dt": DAY},
                            commit_user=user)

    def must_not_be_read() -> Iterator[pa.RecordBatch]:
        raise AssertionError("a retried step must not regenerate an already committed day")
        yield  # pragma: no cover

    retry = write_partition(table, must_not_be_read(), mode="overwrite", partition={"dt": DAY}, commit_user=user)
    rerun = write_partition(table, data.events(DAY, rows=100), mode="overwrite", partition={"dt": DAY},
                            commit_user=commit_user_for("run-2", path(EVENTS_TABLE), DAY))

    assert isinstance(first, PaimonWrite) and not first.reused and first.rows_written == 100
    assert retry.reused and retry.snapshot_id == first.snapshot_id and retry.rows_written == 0
    assert first.snapshot_id is not None and rerun.snapshot_id == first.snapshot_id + 1  # another run replaces
    assert len(table.snapshots()) == 2
    assert table.read(["dt"]).num_rows == 100


# ---- reading it back ------------------------------------------------------------------------


def test_downstream_asset_loads_the_partition(materialize_day: Any, resources: dict[str, Any],
                                              project_defs: dg.Definitions, instance: dg.DagsterInstance) -> None:
    materialize_day(DAY)
    materialize_day(OTHER_DAY)
    logs = events_asset(project_defs)

    @dg.asset(partitions_def=logs.partitions_def,
              ins={"events": dg.AssetIn(key=EVENTS_KEY, metadata={"columns": ["dt", "level"]})})
    def errors_per_day(events: pa.Table) -> int:
        return pac.sum(pac.equal(events["level"], "ERROR")).as_py() or 0

    result = dg.materialize([logs, errors_per_day], selection=[errors_per_day], partition_key=DAY,
                            resources={"io_manager": dg.mem_io_manager}, instance=instance)

    expected = expected_rows(resources, DAY)
    assert result.output_for_node("errors_per_day") == pac.sum(
        pac.equal(expected["level"], "ERROR")).as_py()


def test_io_manager_returns_only_the_requested_partition_and_columns(
        materialize_day: Any, resources: dict[str, Any], project_defs: dg.Definitions,
        instance: dg.DagsterInstance) -> None:
    materialize_day(DAY)
    materialize_day(OTHER_DAY)
    seen: dict[str, pa.Table] = {}
    logs = events_asset(project_defs)

    @dg.asset(partitions_def=logs.partitions_def,
              ins={"events": dg.AssetIn(key=EVENTS_KEY, metadata={"columns": ["dt", "ts"]})})
    def sink(events: pa.Table) -> None:
        seen["events"] = events

    dg.materialize([logs, sink], selection=[sink], partition_key=OTHER_DAY, instance=instance)

    events = seen["events"]
    assert events.schema.names == ["dt", "ts"]
    assert events.num_rows == resources["event_source"].rows_per_partition
    assert pac.unique(events["dt"]).to_pylist() == [OTHER_DAY]


# ---- checks ---------------------------------------------------------------------------------


def test_asset_check_passes_on_a_written_partition(materialize_day: Any) -> None:
    result = materialize_day(DAY)

    evaluation = evaluation_of(result, names.DATA_CHECK)
    assert evaluation.passed
    assert evaluation.metadata["null_ts"].value == 0
    assert evaluation.metadata["rows"].value == 1_500


def test_the_lsm_checks_see_the_written_partition(materialize_day: Any) -> None:
    result = materialize_day(DAY)

    level0 = evaluation_of(result, names.LEVEL0_CHECK)
    assert level0.passed
    assert level0.metadata["max_level0_files"].value == 1  # write-only: the files stay in level 0
    assert evaluation_of(result, names.SMALL_FILES_CHECK).metadata["files"].value == 1


# ---- the IO manager ---------------------------------------------------------------------------


def test_nothing_is_pickled(materialize_day: Any, instance: dg.DagsterInstance) -> None:
    result = materialize_day(DAY)

    storage = Path(instance.storage_directory())
    stored = [p for p in storage.rglob("*") if p.is_file() and "compute_logs" not in p.parts]
    assert result.success
    assert stored == []  # the default fs_io_manager would have pickled to app/events/<partition>


@pytest.mark.parametrize(("obj", "message"), [
    ({"rows": 1}, f"cannot write a dict to table {EVENTS_TABLE}"),
    (pa.table({"a": [1]}), f"writing {EVENTS_TABLE} failed"),
])
def test_io_manager_refuses_what_does_not_fit_and_commits_nothing(
        materialize_day: Any, resources: dict[str, Any], project_defs: dg.Definitions, obj: object,
        message: str) -> None:
    materialize_day(DAY)
    manager = resources["paimon_io_manager"]
    context = dg.build_output_context(asset_key=EVENTS_KEY, partition_key=DAY,
                                      asset_partitions_def=events_asset(project_defs).partitions_def)

    with pytest.raises(dg.Failure, match=message):
        manager.handle_output(context, obj)

    assert len(table_of(resources).snapshots()) == 1
