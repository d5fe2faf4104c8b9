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
from pipelines.assets import LOG_EVENTS_KEY, RUN_TAGS, log_events, overwrite_day
from pipelines.checks import log_events_partition_valid, maintenance_asset_checks
from pipelines.definitions import build_resources
from pipelines.jobs import ingest_log_events_job
from pipelines.log_events import SCHEMA, TABLE, TABLE_OPTIONS, synthetic_batches
from resources import LogEventSource, PaimonWrite

DAY = "2024-01-03"
OTHER_DAY = "2024-01-04"


def table_of(resources: dict[str, Any]) -> pc.Table:
    return resources["catalog"].table(TABLE)


def metadata_of(result: dg.ExecuteInProcessResult) -> dict[str, Any]:
    """Plain values of the run's single asset materialization."""
    events = result.get_asset_materialization_events()
    assert len(events) == 1
    metadata = events[0].step_materialization_data.materialization.metadata
    return {key: getattr(value, "value", value) for key, value in metadata.items()}


def expected_rows(resources: dict[str, Any], day: str) -> pa.Table:
    source: LogEventSource = resources["log_source"]
    return pa.Table.from_batches(synthetic_batches(day, rows=source.rows_per_partition,
                                                   batch_size=source.batch_size))


def day_rows(table: pc.Table, day: str) -> pa.Table:
    return table.read(filter=[("dt", "=", day)]).sort_by([("ts", "ascending"), ("message", "ascending")])


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
    assert metadata_of(second)["snapshot_id"] == snapshots[-1].id


def test_two_days_are_both_kept(materialize_day: Any, resources: dict[str, Any],
                                instance: dg.DagsterInstance) -> None:
    materialize_day(DAY)
    materialize_day(OTHER_DAY)

    table = table_of(resources)
    per_day = table.read(["dt"]).group_by("dt").aggregate([("dt", "count")]).sort_by("dt").to_pylist()
    rows = resources["log_source"].rows_per_partition
    assert per_day == [{"dt": DAY, "dt_count": rows}, {"dt": OTHER_DAY, "dt_count": rows}]
    assert instance.get_materialized_partitions(LOG_EVENTS_KEY) == {DAY, OTHER_DAY}


def test_materialization_metadata(materialize_day: Any, resources: dict[str, Any]) -> None:
    materialize_day(OTHER_DAY)
    result = materialize_day(DAY)

    metadata = metadata_of(result)
    table = table_of(resources)
    rows = resources["log_source"].rows_per_partition
    day_files = [f for f in table.files() if f.partition == f"dt={DAY}"]
    assert metadata["rows_written"] == rows
    assert metadata["dagster/partition_row_count"] == rows
    assert metadata["dagster/row_count"] == 2 * rows
    assert metadata["files"] == len(day_files) >= 1
    assert metadata["snapshot_id"] == table.latest_snapshot().id == 2
    assert metadata["commit_kind"] == "OVERWRITE"
    assert metadata["table_uri"] == metadata["dagster/uri"] == table.uri
    assert metadata["dagster/table_name"] == TABLE
    schema = metadata["dagster/column_schema"]
    assert [(c.name, c.type) for c in schema.columns] == [(f.name, str(f.type)) for f in SCHEMA]


def test_commit_records_run_and_partition(materialize_day: Any, resources: dict[str, Any]) -> None:
    result = materialize_day(DAY)

    snapshot = table_of(resources).latest_snapshot()
    assert snapshot.commit_user == f"dagster-{result.run_id}"
    assert snapshot.commit_identifier == 20240103
    assert snapshot.properties["dagster.run_id"] == result.run_id
    assert snapshot.properties["dagster.partition"] == DAY
    assert result.dagster_run.tags.items() >= RUN_TAGS.items()


def test_job_run_is_tagged_and_writes_the_day(resources: dict[str, Any],
                                              instance: dg.DagsterInstance) -> None:
    job_defs = dg.Definitions(assets=[log_events], asset_checks=[log_events_partition_valid, *maintenance_asset_checks],
                              jobs=[ingest_log_events_job], resources=resources)  # the job leaves one out by key

    result = job_defs.resolve_job_def("ingest_log_events_job").execute_in_process(
        partition_key=DAY, instance=instance)

    assert result.dagster_run.tags["paimon/table"] == TABLE
    assert result.dagster_run.tags["dagster/partition"] == DAY
    assert table_of(resources).read(["dt"]).num_rows == resources["log_source"].rows_per_partition
    evaluations = {e.check_name: e.passed for e in result.get_asset_check_evaluations()}
    assert evaluations["log_events_partition_valid"] and "no_orphan_files" not in evaluations


def test_retried_commit_in_the_same_run_is_not_applied_twice(resources: dict[str, Any]) -> None:
    catalog = resources["catalog"]
    table = catalog.ensure_table(TABLE, schema=SCHEMA, partition_keys=["dt"], options=TABLE_OPTIONS)

    first = overwrite_day(table, synthetic_batches(DAY, rows=100), day=DAY, run_id="run-1")

    def must_not_be_read() -> Iterator[pa.RecordBatch]:
        raise AssertionError("a retried step must not regenerate an already committed day")
        yield  # pragma: no cover

    retry = overwrite_day(table, must_not_be_read(), day=DAY, run_id="run-1")

    assert isinstance(first, PaimonWrite)
    assert retry.snapshot_id == first.snapshot_id and retry.rows_written == 100
    assert len(table.snapshots()) == 1
    assert table.read(["dt"]).num_rows == 100


def test_downstream_asset_loads_the_partition(materialize_day: Any, resources: dict[str, Any],
                                              instance: dg.DagsterInstance) -> None:
    materialize_day(DAY)
    materialize_day(OTHER_DAY)

    @dg.asset(partitions_def=log_events.partitions_def,
              ins={"events": dg.AssetIn(key=LOG_EVENTS_KEY, metadata={"columns": ["dt", "level"]})})
    def errors_per_day(events: pa.Table) -> int:
        return pac.sum(pac.equal(events["level"], "ERROR")).as_py() or 0

    result = dg.materialize([log_events, errors_per_day], selection=[errors_per_day],
                            partition_key=DAY, resources=resources, instance=instance)

    expected = expected_rows(resources, DAY)
    assert result.output_for_node("errors_per_day") == pac.sum(
        pac.equal(expected["level"], "ERROR")).as_py()


def test_io_manager_returns_only_the_requested_partition_and_columns(
        materialize_day: Any, resources: dict[str, Any], instance: dg.DagsterInstance) -> None:
    materialize_day(DAY)
    materialize_day(OTHER_DAY)
    seen: dict[str, pa.Table] = {}

    @dg.asset(partitions_def=log_events.partitions_def,
              ins={"events": dg.AssetIn(key=LOG_EVENTS_KEY, metadata={"columns": ["dt", "ts"]})})
    def sink(events: pa.Table) -> None:
        seen["events"] = events

    dg.materialize([log_events, sink], selection=[sink], partition_key=OTHER_DAY,
                   resources=resources, instance=instance)

    events = seen["events"]
    assert events.schema.names == ["dt", "ts"]
    assert events.num_rows == resources["log_source"].rows_per_partition
    assert pac.unique(events["dt"]).to_pylist() == [OTHER_DAY]


def test_asset_check_passes_on_a_written_partition(materialize_day: Any) -> None:
    result = materialize_day(DAY)

    [evaluation] = result.get_asset_check_evaluations()
    assert evaluation.check_name == "log_events_partition_valid"
    assert evaluation.passed
    assert evaluation.metadata["null_ts"].value == 0
    assert evaluation.metadata["rows"].value > 0


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


def test_landing_mode_ingests_parquet_and_jsonl(materialize_day: Any, warehouse: str,
                                                tmp_path: Path) -> None:
    landing = tmp_path / "landing"
    write_landing_files(landing)
    resources = build_resources(warehouse=warehouse,
                                log_source=LogEventSource(mode="landing", landing_dir=str(landing)))

    result = materialize_day(DAY, resources=resources)

    rows = table_of(resources).read(filter=[("dt", "=", DAY)]).sort_by("ts").to_pylist()
    assert [r["level"] for r in rows] == ["INFO", "ERROR", "WARN", "DEBUG"]
    assert [r["user_id"] for r in rows] == [7, None, 42, None]
    assert [r["latency_ms"] for r in rows] == [12.5, 900.0, 310.0, 1.5]
    assert str(rows[2]["ts"]) == "2024-01-03 10:00:00.250000"
    assert {r["dt"] for r in rows} == {DAY}
    assert metadata_of(result)["rows_written"] == 4
    assert result.get_asset_check_evaluations()[0].passed


def test_check_fails_on_events_without_timestamp(materialize_day: Any, warehouse: str,
                                                 tmp_path: Path) -> None:
    landing = tmp_path / "landing"
    (landing / DAY).mkdir(parents=True)
    (landing / DAY / "events.jsonl").write_text(json.dumps({"level": "INFO", "message": "no ts"}) + "\n")
    resources = build_resources(warehouse=warehouse,
                                log_source=LogEventSource(mode="landing", landing_dir=str(landing)))

    result = materialize_day(DAY, resources=resources, raise_on_error=False)

    [evaluation] = result.get_asset_check_evaluations()
    assert not evaluation.passed
    assert evaluation.metadata["null_ts"].value == 1


def test_missing_landing_day_fails_and_keeps_the_table(materialize_day: Any, warehouse: str,
                                                       tmp_path: Path) -> None:
    materialize_day(DAY)
    landing = tmp_path / "landing"
    landing.mkdir()
    resources = build_resources(warehouse=warehouse,
                                log_source=LogEventSource(mode="landing", landing_dir=str(landing)))

    result = materialize_day(DAY, resources=resources, raise_on_error=False)

    assert not result.success
    assert len(table_of(resources).snapshots()) == 1


def test_nothing_is_pickled(materialize_day: Any, instance: dg.DagsterInstance) -> None:
    result = materialize_day(DAY)

    storage = Path(instance.storage_directory())
    stored = [p for p in storage.rglob("*") if p.is_file() and "compute_logs" not in p.parts]
    assert result.success
    assert stored == []  # the default fs_io_manager would have pickled to logs/events/<partition>


@pytest.mark.parametrize("obj", [pa.table({"a": [1]}), {"rows": 1}])
def test_io_manager_refuses_to_store_data(resources: dict[str, Any], obj: object) -> None:
    manager = resources["paimon_io_manager"]
    context = dg.build_output_context(asset_key=LOG_EVENTS_KEY)

    with pytest.raises(dg.DagsterInvariantViolationError, match="does not write data"):
        manager.handle_output(context, obj)
