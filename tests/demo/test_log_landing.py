"""The demo's logs.events in landing mode: its source reads a landing folder's Parquet and
JSON-lines files, through real runs of its ingestion job."""

import json
from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import paimon_core as pc
from pipelines import names
from pipelines.definitions import load
from pipelines.demo.log_events import TABLE, synthetic_batches
from pipelines.demo.log_source import LogEventSource
from resources import keys
from tests.demo.conftest import LOGS_JOB, small_sources
from tests.support.dagster_runs import JobRunner, evaluation_of, metadata_of, orphans_now, retries_of, step_failure

DAY = "2024-01-03"


def table_of(resources: dict[str, Any]) -> pc.Table:
    return resources["paimon_catalog"].table(TABLE)


def landing_defs(warehouse: str, landing: Path) -> dg.Definitions:
    """The demo's definitions with the log source reading ``landing``."""
    return load(warehouse, **small_sources(log_source=LogEventSource(mode="landing", landing_dir=str(landing))))


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
    assert evaluation_of(result, names.DATA_CHECK).passed


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

    evaluation = evaluation_of(result, names.DATA_CHECK)
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


def landing_with(root: Path, landed: str) -> LogEventSource:
    """A landing folder holding ``landed`` for DAY: nothing, a file whose latency_ms column does not
    cast to the table's DOUBLE, or a file named .parquet that is not Parquet."""
    root.mkdir()
    day = pa.Table.from_batches(synthetic_batches(DAY, rows=50, batch_size=50))
    if landed == "wrong type":
        index = day.schema.get_field_index("latency_ms")
        pq.write_table(day.set_column(index, "latency_ms", pa.array(["slow"] * 50)), root / f"{DAY}.parquet")
    elif landed == "not parquet":
        (root / f"{DAY}.parquet").write_bytes(b"ts,level\n2024-01-03,INFO\n")
    return LogEventSource(mode="landing", landing_dir=str(root))


@pytest.mark.parametrize(("landed", "message"), [
    ("nothing", f"logs.events: no Parquet or JSON-lines files for {DAY}"),
    ("wrong type", "column 'latency_ms' of"),
    ("not parquet", "Parquet magic bytes not found"),
])
def test_bad_landing_input_fails_at_once_without_retries_and_commits_nothing(
        landed: str, message: str, warehouse: str, tmp_path: Path,
        instance: dg.DagsterInstance) -> None:
    defs = load(warehouse, **small_sources(log_source=landing_with(tmp_path / "landing", landed)))

    result = JobRunner(defs, instance)(LOGS_JOB, DAY, raise_on_error=False)

    assert not result.success
    assert retries_of(result) == 0
    [failure] = [e for e in result.all_events if e.is_step_failure]
    assert failure.step_key == "logs__events"
    assert message in str(failure.step_failure_data.error)
    table = defs.resources["paimon_catalog"].table(TABLE)
    assert table.snapshots() == []
    assert orphans_now(table) == set()
