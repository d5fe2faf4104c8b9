"""The logs/events asset end to end: real Dagster runs writing a real Paimon table in tmp_path."""

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow as pa
import pyarrow.compute as pac
import pyarrow.parquet as pq
import pytest

import paimon_core as pc
from pipelines import names
from pipelines.definitions import load
from pipelines.demo.log_events import SCHEMA, TABLE, TABLE_OPTIONS, synthetic_batches
from pipelines.demo.log_source import LogEventSource
from resources import PaimonWrite, commit_user_for, keys, write_partition
from resources.keys import TABLE_TAG
from tests.dagster.conftest import LOGS_JOB, small_sources
from tests.support.metadata_values import value_of

DAY = "2024-01-03"
OTHER_DAY = "2024-01-04"
LOGS_KEY = dg.AssetKey(["logs", "events"])
DATA_CHECK = names.DATA_CHECK


def table_of(resources: dict[str, Any]) -> pc.Table:
    return resources["paimon_catalog"].table(TABLE)


def latest(table: pc.Table) -> pc.Snapshot:
    snapshot = table.latest_snapshot()
    assert snapshot is not None
    return snapshot


def metadata_of(result: dg.ExecuteInProcessResult) -> dict[str, Any]:
    """Plain values of the run's single asset materialization."""
    events = result.get_asset_materialization_events()
    assert len(events) == 1
    metadata = events[0].step_materialization_data.materialization.metadata
    return {key: value_of(value) for key, value in metadata.items()}


def evaluation_of(result: dg.ExecuteInProcessResult, name: str = DATA_CHECK) -> Any:
    [evaluation] = [e for e in result.get_asset_check_evaluations() if e.check_name == name]
    return evaluation


def step_failure(result: dg.ExecuteInProcessResult) -> str:
    failure = next(e for e in result.all_events if e.is_step_failure)
    assert failure.step_failure_data is not None and failure.step_failure_data.error is not None
    return str(failure.step_failure_data.error.message)


def retries_of(result: dg.ExecuteInProcessResult) -> int:
    return sum(1 for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_RESTARTED)


def expected_rows(resources: dict[str, Any], day: str) -> pa.Table:
    source: LogEventSource = resources["log_source"]
    return pa.Table.from_batches(synthetic_batches(day, rows=source.rows_per_partition,
                                                   batch_size=source.batch_size))


def day_rows(table: pc.Table, day: str) -> pa.Table:
    return table.read(filter=[("dt", "=", day)]).sort_by([("ts", "ascending"), ("message", "ascending")])


def landing_defs(warehouse: str, landing: Path) -> dg.Definitions:
    """The demo's definitions with the log source reading ``landing``."""
    return load(warehouse, **small_sources(log_source=LogEventSource(mode="landing", landing_dir=str(landing))))


def logs_asset(defs: dg.Definitions) -> dg.AssetsDefinition:
    """The asset as the definitions resolve it: its resources (the definitions') bound to it."""
    return defs.resolve_assets_def(LOGS_KEY)


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
    rows = resources["log_source"].rows_per_partition
    assert per_day == [{"dt": DAY, "dt_count": rows}, {"dt": OTHER_DAY, "dt_count": rows}]
    assert instance.get_materialized_partitions(LOGS_KEY) == {DAY, OTHER_DAY}


def test_materialization_metadata(materialize_day: Any, resources: dict[str, Any]) -> None:
    materialize_day(OTHER_DAY)
    result = materialize_day(DAY)

    metadata = metadata_of(result)
    table = table_of(resources)
    rows = resources["log_source"].rows_per_partition
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
    assert metadata["dagster/table_name"] == TABLE
    assert not any(key.startswith(keys.INGEST_INSERTS) for key in metadata)  # no row-kind column
    schema = metadata["dagster/column_schema"]  # as declared: Paimon types, descriptions
    assert [c.name for c in schema.columns] == SCHEMA.names
    assert {c.name: c.type for c in schema.columns}["ts"] == "TIMESTAMP(6)"
    assert {c.name: c.description for c in schema.columns}["dt"] == "The day (partition)"
    # The LSM shape after the write: one level-0 file per day (write-only: compaction runs elsewhere).
    assert metadata[keys.LSM_MAX_LEVEL0_FILES] == 1
    assert metadata[keys.lsm_level_files(0)] == metadata[keys.LSM_FILES] == 2


def test_commit_records_run_asset_and_partition(materialize_day: Any, resources: dict[str, Any]) -> None:
    result = materialize_day(DAY)

    snapshot = latest(table_of(resources))
    properties = dict(snapshot.properties or {})
    assert snapshot.commit_user == commit_user_for(result.run_id, "logs/events", DAY)
    assert snapshot.commit_user == f"dagster:{result.run_id}:logs/events:{DAY}"
    assert snapshot.commit_identifier == 1
    assert properties[keys.RUN_ID_PROPERTY] == result.run_id
    assert properties[keys.PARTITION_PROPERTY] == DAY
    assert properties[keys.ASSET_KEY_PROPERTY] == "logs/events"
    assert properties[keys.WRITE_MODE_PROPERTY] == "overwrite"


def test_job_run_is_tagged_and_writes_the_day(run_job: Any, resources: dict[str, Any]) -> None:
    result = run_job(LOGS_JOB, DAY)

    assert result.dagster_run.tags[TABLE_TAG] == TABLE
    assert result.dagster_run.tags["dagster/partition"] == DAY
    assert table_of(resources).read(["dt"]).num_rows == resources["log_source"].rows_per_partition
    evaluations = {e.check_name: e.passed for e in result.get_asset_check_evaluations()}
    assert evaluations == {DATA_CHECK: True, names.LEVEL0_CHECK: True, names.SMALL_FILES_CHECK: True,
                           names.RETENTION_CHECK: True}  # no_orphan_files runs with the cleanup job


def test_a_step_that_materializes_the_asset_directly_uses_the_tables_pool(
        resources: dict[str, Any], demo_defs: dg.Definitions, instance: dg.DagsterInstance) -> None:
    """Outside the job (dg.materialize, the asset page), the step still writes exactly the day."""
    result = dg.materialize([logs_asset(demo_defs)], partition_key=DAY, instance=instance)

    assert result.success
    assert logs_asset(demo_defs).op.pool == names.pool(TABLE)
    assert day_rows(table_of(resources), DAY).num_rows == resources["log_source"].rows_per_partition


def test_retried_commit_in_the_same_run_is_not_applied_twice(resources: dict[str, Any]) -> None:
    catalog = resources["paimon_catalog"]
    table = catalog.ensure_table(TABLE, schema=SCHEMA, partition_keys=["dt"], options=TABLE_OPTIONS)
    user = commit_user_for("run-1", "logs/events", DAY)

    first = write_partition(table, synthetic_batches(DAY, rows=100), mode="overwrite", partition={"dt": DAY},
                            commit_user=user)

    def must_not_be_read() -> Iterator[pa.RecordBatch]:
        raise AssertionError("a retried step must not regenerate an already committed day")
        yield  # pragma: no cover

    retry = write_partition(table, must_not_be_read(), mode="overwrite", partition={"dt": DAY}, commit_user=user)
    rerun = write_partition(table, synthetic_batches(DAY, rows=100), mode="overwrite", partition={"dt": DAY},
                            commit_user=commit_user_for("run-2", "logs/events", DAY))

    assert isinstance(first, PaimonWrite) and not first.reused and first.rows_written == 100
    assert retry.reused and retry.snapshot_id == first.snapshot_id and retry.rows_written == 0
    assert first.snapshot_id is not None and rerun.snapshot_id == first.snapshot_id + 1  # another run replaces
    assert len(table.snapshots()) == 2
    assert table.read(["dt"]).num_rows == 100


# ---- reading it back ------------------------------------------------------------------------


def test_downstream_asset_loads_the_partition(materialize_day: Any, resources: dict[str, Any],
                                              demo_defs: dg.Definitions, instance: dg.DagsterInstance) -> None:
    materialize_day(DAY)
    materialize_day(OTHER_DAY)
    logs = logs_asset(demo_defs)

    @dg.asset(partitions_def=logs.partitions_def,
              ins={"events": dg.AssetIn(key=LOGS_KEY, metadata={"columns": ["dt", "level"]})})
    def errors_per_day(events: pa.Table) -> int:
        return pac.sum(pac.equal(events["level"], "ERROR")).as_py() or 0

    result = dg.materialize([logs, errors_per_day], selection=[errors_per_day], partition_key=DAY,
                            resources={"io_manager": dg.mem_io_manager}, instance=instance)

    expected = expected_rows(resources, DAY)
    assert result.output_for_node("errors_per_day") == pac.sum(
        pac.equal(expected["level"], "ERROR")).as_py()


def test_io_manager_returns_only_the_requested_partition_and_columns(
        materialize_day: Any, resources: dict[str, Any], demo_defs: dg.Definitions,
        instance: dg.DagsterInstance) -> None:
    materialize_day(DAY)
    materialize_day(OTHER_DAY)
    seen: dict[str, pa.Table] = {}
    logs = logs_asset(demo_defs)

    @dg.asset(partitions_def=logs.partitions_def,
              ins={"events": dg.AssetIn(key=LOGS_KEY, metadata={"columns": ["dt", "ts"]})})
    def sink(events: pa.Table) -> None:
        seen["events"] = events

    dg.materialize([logs, sink], selection=[sink], partition_key=OTHER_DAY, instance=instance)

    events = seen["events"]
    assert events.schema.names == ["dt", "ts"]
    assert events.num_rows == resources["log_source"].rows_per_partition
    assert pac.unique(events["dt"]).to_pylist() == [OTHER_DAY]


# ---- checks ---------------------------------------------------------------------------------


def test_asset_check_passes_on_a_written_partition(materialize_day: Any) -> None:
    result = materialize_day(DAY)

    evaluation = evaluation_of(result)
    assert evaluation.passed
    assert evaluation.metadata["null_ts"].value == 0
    assert evaluation.metadata["rows"].value == 1_500


def test_the_lsm_checks_see_the_written_partition(materialize_day: Any) -> None:
    result = materialize_day(DAY)

    level0 = evaluation_of(result, names.LEVEL0_CHECK)
    assert level0.passed
    assert level0.metadata["max_level0_files"].value == 1  # write-only: the files stay in level 0
    assert evaluation_of(result, names.SMALL_FILES_CHECK).metadata["files"].value == 1


# ---- landing mode ---------------------------------------------------------------------------


def write_landing_files(root: Path) -> None:
    """One Parquet file in a day folder and one JSON-lines file named after the day."""
    (root / DAY).mkdir(parents=True)
    parquet = pa.table({
        "ts": pa.array([1_704_240_000_000_000, 1_704_240_060_000_000], pa.timestamp("us", tz="UTC")),
        "level": ["INFO", "ERROR"], "service": ["auth", "billing"], "host": ["auth-01", "billing-02"],
        "message": ["GET /login request completed status=200", "POST /pay failed status=502"],
        "user_id": pa.array([7, None], pa.int32()), "latency_ms": pa.array([12.5, 900.0], pa.float32()),
        "extra_column": ["ignored", "ignored"],
    })
    pq.write_table(parquet, root / DAY / "part-0.parquet")
    lines = [{"ts": "2024-01-03T10:00:00.250000", "level": "WARN", "service": "search",
              "host": "search-03", "message": "slow", "user_id": 42, "latency_ms": 310,
              "unknown": True},
             {"ts": "2024-01-03 11:30:00", "level": "DEBUG", "service": "auth", "host": "auth-02",
              "message": "cache", "latency_ms": 1.5}]
    (root / f"events-{DAY}.jsonl").write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    (root / "events-2024-01-04.jsonl").write_text(json.dumps(lines[0]) + "\n")  # another day
    (root / DAY / "_SUCCESS").write_text("")


def test_landing_mode_ingests_parquet_and_jsonl(materialize_day: Any, warehouse: str, tmp_path: Path) -> None:
    landing = tmp_path / "landing"
    write_landing_files(landing)
    defs = landing_defs(warehouse, landing)

    result = materialize_day(DAY, defs=defs)

    rows = table_of(dict(defs.resources or {})).read(filter=[("dt", "=", DAY)]).sort_by("ts").to_pylist()
    assert [r["level"] for r in rows] == ["INFO", "ERROR", "WARN", "DEBUG"]
    assert [r["user_id"] for r in rows] == [7, None, 42, None]
    assert [r["latency_ms"] for r in rows] == [12.5, 900.0, 310.0, 1.5]
    assert str(rows[2]["ts"]) == "2024-01-03 10:00:00.250000"
    assert {r["dt"] for r in rows} == {DAY}
    assert metadata_of(result)[keys.INGEST_ROWS_WRITTEN] == 4
    assert evaluation_of(result).passed


def test_landing_mode_rematerializing_a_day_is_idempotent(materialize_day: Any, warehouse: str,
                                                          tmp_path: Path) -> None:
    landing = tmp_path / "landing"
    write_landing_files(landing)
    defs = landing_defs(warehouse, landing)

    materialize_day(DAY, defs=defs)
    materialize_day(DAY, defs=defs)

    table = table_of(dict(defs.resources or {}))
    assert table.read(["dt"]).num_rows == 4
    assert [s.commit_kind for s in table.snapshots()] == ["OVERWRITE", "OVERWRITE"]


def test_check_fails_on_events_without_timestamp(materialize_day: Any, warehouse: str, tmp_path: Path) -> None:
    landing = tmp_path / "landing"
    (landing / DAY).mkdir(parents=True)
    (landing / DAY / "events.jsonl").write_text(json.dumps({"level": "INFO", "message": "no ts"}) + "\n")

    result = materialize_day(DAY, defs=landing_defs(warehouse, landing), raise_on_error=False)

    evaluation = evaluation_of(result)
    assert not evaluation.passed
    assert evaluation.metadata["null_ts"].value == 1
    assert not result.success  # the data check is blocking
    assert "1 null ts" in (evaluation.description or "")


def test_missing_landing_day_fails_and_keeps_the_table(materialize_day: Any, warehouse: str,
                                                       tmp_path: Path) -> None:
    materialize_day(DAY)
    landing = tmp_path / "landing"
    landing.mkdir()
    defs = landing_defs(warehouse, landing)

    result = materialize_day(DAY, defs=defs, raise_on_error=False)

    assert not result.success
    assert "no Parquet or JSON-lines files for 2024-01-03" in step_failure(result)
    assert retries_of(result) == 0  # bad input is not retried
    assert len(table_of(dict(defs.resources or {})).snapshots()) == 1


def test_a_misconfigured_landing_source_fails_before_writing(materialize_day: Any, warehouse: str,
                                                             tmp_path: Path) -> None:
    result = materialize_day(DAY, defs=landing_defs(warehouse, tmp_path / "nope"), raise_on_error=False)

    assert not result.success
    assert "does not exist" in step_failure(result)
    assert retries_of(result) == 0
    catalog = pc.Catalog(warehouse)
    assert not catalog.table_exists(TABLE) or catalog.get_table(TABLE).latest_snapshot() is None


# ---- the IO manager ---------------------------------------------------------------------------


def test_nothing_is_pickled(materialize_day: Any, instance: dg.DagsterInstance) -> None:
    result = materialize_day(DAY)

    storage = Path(instance.storage_directory())
    stored = [p for p in storage.rglob("*") if p.is_file() and "compute_logs" not in p.parts]
    assert result.success
    assert stored == []  # the default fs_io_manager would have pickled to logs/events/<partition>


@pytest.mark.parametrize(("obj", "message"), [
    ({"rows": 1}, "cannot write a dict to table logs.events"),
    (pa.table({"a": [1]}), "writing logs.events failed"),
])
def test_io_manager_refuses_what_does_not_fit_and_commits_nothing(
        materialize_day: Any, resources: dict[str, Any], demo_defs: dg.Definitions, obj: object,
        message: str) -> None:
    materialize_day(DAY)
    manager = resources["paimon_io_manager"]
    context = dg.build_output_context(asset_key=LOGS_KEY, partition_key=DAY,
                                      asset_partitions_def=logs_asset(demo_defs).partitions_def)

    with pytest.raises(dg.Failure, match=message):
        manager.handle_output(context, obj)

    assert len(table_of(resources).snapshots()) == 1
