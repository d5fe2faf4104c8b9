"""The ingestion boundary through the real jobs: what lands in a folder, or what a function
returns, is refused when it is not data of the table, with the table left exactly as it was.

An hourly table fed by landed CSV and JSON-lines files (found by its landing sensor), and a
partial-update table fed by a DataFrame: a 0-byte file that replaces a delivery, a CSV without
a header, a truncated file, a header-only delivery, a column the table does not have, and an
empty DataFrame for a partition holding rows.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import dagster as dg
import pandas as pd
import pyarrow as pa
import pytest

import paimon_core as pc
from pipelines import Column, Ingestion, LandingLocation, PaimonTableSpec, Partitions, names, paimon_definitions
from resources.keys import RUN_KEY_TAG
from tests.dagster.test_user_tables import tick_sensor
from tests.support.dagster_runs import one_line_failure

HOUR = "2024-03-01-10:00"
READINGS = "plant.readings"
DEVICES = "plant.devices"
SENSOR = names.landing_sensor("plant.readings")
JOB = names.ingestion_job("plant.readings")


def readings_spec(landing: Path, **ingestion: Any) -> PaimonTableSpec:
    return PaimonTableSpec(
        READINGS, columns=(Column("ts", "TIMESTAMP(6)"), Column("device", "STRING NOT NULL"), Column("value", "DOUBLE"),
                           Column("dt", "STRING"), Column("hh", "STRING")),
        partition_keys=("dt", "hh"),
        partitions=Partitions("hourly", start="2024-03-01-00:00", end="2024-03-02-00:00",
                              mapping={"dt": "%Y-%m-%d", "hh": "%H"}),
        ingestion=Ingestion(mode="overwrite", landing=LandingLocation(f"{landing}/readings/{{partition}}/*"),
                            **ingestion))


def devices_spec(**ingestion: Any) -> PaimonTableSpec:
    return PaimonTableSpec(
        DEVICES, columns=(Column("device", "STRING NOT NULL"), Column("status", "STRING"), Column("battery", "DOUBLE")),
        primary_key=("device",), options={"bucket": "1", "merge-engine": "partial-update"},
        ingestion=Ingestion(**{"mode": "upsert", "function": device_rows, **ingestion}))


DEVICE_FRAMES: list[pd.DataFrame] = []


def device_rows(context: dg.AssetExecutionContext) -> pd.DataFrame:
    return DEVICE_FRAMES.pop(0)


def csv_rows(count: int, *, extra: bool = False) -> str:
    header = "ts,device,value" + (",temperature" if extra else "") + "\n"
    return header + "".join(f"2024-03-01T10:{i % 60:02d}:00,d{i % 4},{i}.5" + (",20.0" if extra else "") + "\n"
                            for i in range(count))


def state(table: pc.Table) -> tuple[int | None, int]:
    latest = table.latest_snapshot()
    return (None if latest is None else latest.id), table.read().num_rows


def land(landing: Path, name: str, content: str | bytes) -> Path:
    path = landing / "readings" / HOUR / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content.encode() if isinstance(content, str) else content)
    return path


def sensor_run(defs: dg.Definitions, instance: dg.DagsterInstance, cursor: str | None) -> tuple[Any, str | None]:
    """One landing-sensor tick and the run it requests (None if it requests none)."""
    tick = tick_sensor(defs, instance, SENSOR, cursor=cursor)
    requests = tick.run_requests or []
    assert len(requests) <= 1
    if not requests:
        return None, tick.cursor
    request = requests[0]
    # Tagged with its run key as the daemon tags the runs it launches for a sensor.
    result = defs.resolve_job_def(request.job_name or JOB).execute_in_process(
        run_config=request.run_config, tags={**request.tags, RUN_KEY_TAG: request.run_key}, instance=instance,
        partition_key=request.partition_key, raise_on_error=False)
    return result, tick.cursor


def ingested(tmp_path: Path, instance: dg.DagsterInstance, **ingestion: Any
             ) -> tuple[dg.Definitions, pc.Table, str | None]:
    """A definitions object whose table holds a 70-row delivery of HOUR, landed and ingested."""
    landing = tmp_path / "landing"
    defs = paimon_definitions([readings_spec(landing, **ingestion)], warehouse=str(tmp_path / "wh"))
    land(landing, "part-0.csv", csv_rows(70))
    result, cursor = sensor_run(defs, instance, None)
    assert result is not None and result.success
    table = pc.Catalog(str(tmp_path / "wh")).get_table(READINGS)
    assert state(table)[1] == 70
    return defs, table, cursor


@pytest.mark.parametrize("bad", ["empty", "header-less", "cut"])
def test_a_broken_delivery_is_refused_by_the_sensor_launched_run(tmp_path: Path, instance: dg.DagsterInstance,
                                                                  bad: str) -> None:
    defs, table, cursor = ingested(tmp_path, instance)
    before = state(table)
    content = {"empty": b"", "header-less": csv_rows(70).split("\n", 1)[1], "cut": csv_rows(70)[:-2]}[bad]
    land(tmp_path / "landing", "part-0.csv", content)  # the upload of a new version died

    result, cursor = sensor_run(defs, instance, cursor)

    assert result is not None, "a changed delivery launches its partition"
    message = one_line_failure(result)
    assert "part-0.csv" in message and READINGS in message
    assert {"empty": "the file is empty (0 bytes)", "header-less": "a file without a header row",
            "cut": "does not end with a line break"}[bad] in message
    assert state(table) == before, "a refused delivery leaves the table as it was"
    # The next tick launches nothing and says so, naming the partition whose run failed.
    skipped = tick_sensor(defs, instance, SENSOR, cursor=cursor).skip_message or ""
    assert f"1 partition(s) with files: 0 ingested, 1 whose run failed ({HOUR}): they run again when their " \
           "files change" in skipped


def test_a_header_only_delivery_empties_a_partition_only_when_declared(tmp_path: Path,
                                                                      instance: dg.DagsterInstance) -> None:
    defs, table, cursor = ingested(tmp_path, instance)
    before = state(table)
    land(tmp_path / "landing", "part-0.csv", "ts,device,value\n")

    result, _ = sensor_run(defs, instance, cursor)

    assert result is not None
    assert "has no rows, but it holds 70 row(s) now" in one_line_failure(result)
    assert state(table) == before

    defs, table, cursor = ingested(tmp_path / "allowed", instance, allow_empty_partitions=True)
    land(tmp_path / "allowed" / "landing", "part-0.csv", "ts,device,value\n")
    result, _ = sensor_run(defs, instance, cursor)
    assert result is not None and result.success
    assert state(table)[1] == 0


@pytest.mark.parametrize("name", ["part-0.csv", "part-1.jsonl"])
def test_a_drifted_delivery_is_refused_unless_extra_columns_are_ignored(tmp_path: Path,
                                                                       instance: dg.DagsterInstance,
                                                                       name: str) -> None:
    defs, table, cursor = ingested(tmp_path, instance)
    before = state(table)
    if name.endswith(".csv"):
        land(tmp_path / "landing", name, csv_rows(70, extra=True))
    else:
        (tmp_path / "landing" / "readings" / HOUR / "part-0.csv").unlink()
        land(tmp_path / "landing", name, "".join(json.dumps({"ts": "2024-03-01T10:00:00", "device": "d1",
                                                              "value": 1.5, "temperature": 20}) + "\n"
                                                  for _ in range(70)))

    result, _ = sensor_run(defs, instance, cursor)

    assert result is not None
    message = one_line_failure(result)
    assert f"{name}: has column(s) ['temperature'] that table {READINGS} does not have" in message
    assert "extra_columns: ignore" in message
    assert state(table) == before

    defs, table, cursor = ingested(tmp_path / "ignoring", instance, extra_columns="ignore")
    land(tmp_path / "ignoring" / "landing", "part-0.csv", csv_rows(50, extra=True))
    result, _ = sensor_run(defs, instance, cursor)
    assert result is not None and result.success
    assert state(table)[1] == 50 and "temperature" not in table.read().column_names


def test_a_function_source_follows_the_same_policy(tmp_path: Path, instance: dg.DagsterInstance) -> None:
    """The same rules for a DataFrame: extra columns refused by default, an empty overwrite of a
    partition holding rows refused; an upsert of an empty frame changes nothing."""
    defs = paimon_definitions([devices_spec()], warehouse=str(tmp_path / "wh"))
    job = defs.resolve_job_def(names.ingestion_job("plant.devices"))
    DEVICE_FRAMES[:] = [pd.DataFrame({"device": ["d1", "d2"], "status": ["ok", "ok"], "battery": [0.9, 0.8]}),
                        pd.DataFrame({"device": ["d1"], "status": ["low"], "battery": [0.1], "temperature": [20.0]})]
    assert job.execute_in_process(instance=instance).success
    table = pc.Catalog(str(tmp_path / "wh")).get_table(DEVICES)
    before = state(table)
    result = job.execute_in_process(instance=instance, raise_on_error=False)
    assert "the data has column(s) ['temperature'] that the table does not have" in one_line_failure(result)
    assert state(table) == before
    assert table.read().to_pylist() == [{"device": "d1", "status": "ok", "battery": 0.9},
                                        {"device": "d2", "status": "ok", "battery": 0.8}]

    empty = paimon_definitions([devices_spec(mode="overwrite")], warehouse=str(tmp_path / "wh"))
    DEVICE_FRAMES[:] = [pd.DataFrame({"device": pd.Series([], dtype=str)})]
    result = empty.resolve_job_def(names.ingestion_job("plant.devices")).execute_in_process(instance=instance,
                                                                                  raise_on_error=False)
    assert "the overwrite of the whole table has no rows, but it holds 2 row(s)" in one_line_failure(result)
    assert state(table) == before
    assert pa.Table.from_pylist(table.read().to_pylist()).num_rows == 2


def test_a_second_upsert_of_a_lookup_changelog_table_reports_its_rows(tmp_path: Path,
                                                                      instance: dg.DagsterInstance) -> None:
    """The write-only partial-update table with a lookup changelog holds two versions of a key in
    level 0 after the second upsert: the run's metadata (a projected read of the partition's keys)
    is read through the merge, and the run succeeds without a retry."""
    spec = devices_spec()
    spec = spec.with_options(options={**spec.options, "changelog-producer": "lookup"})
    defs = paimon_definitions([spec], warehouse=str(tmp_path / "wh"))
    job = defs.resolve_job_def(names.ingestion_job("plant.devices"))
    DEVICE_FRAMES[:] = [pd.DataFrame({"device": ["d1", "d2"], "status": ["ok", "ok"], "battery": [0.9, 0.8]}),
                        pd.DataFrame({"device": ["d1"], "status": ["low"]})]
    assert job.execute_in_process(instance=instance).success
    result = job.execute_in_process(instance=instance)
    assert result.success and not [e for e in result.all_events if e.event_type_value == "STEP_RESTARTED"]
    [materialization] = result.asset_materializations_for_node("plant__devices")
    # An unpartitioned asset: the table's count, not a partition's.
    assert materialization.metadata["dagster/row_count"].value == 2
    assert "dagster/partition_row_count" not in materialization.metadata
    table = pc.Catalog(str(tmp_path / "wh")).get_table(DEVICES)
    assert sorted(table.read(columns=["device", "status"]).to_pylist(), key=lambda r: r["device"]) == [
        {"device": "d1", "status": "low"}, {"device": "d2", "status": "ok"}]


def zoned_readings(context: dg.AssetExecutionContext) -> pd.DataFrame:
    """Readings whose timestamps carry a zone (as pandas makes them from an aware source)."""
    return pd.DataFrame({"ts": pd.to_datetime(["2024-03-01 10:00", "2024-03-01 11:30"]).tz_localize("Europe/Paris"),
                         "value": [1.0, 2.0]})


def test_zoned_timestamps_are_stored_as_utc_wall_time_and_the_run_says_so(tmp_path: Path,
                                                                         instance: dg.DagsterInstance) -> None:
    spec = PaimonTableSpec("plant.zoned", columns=(Column("ts", "TIMESTAMP(6)"), Column("value", "DOUBLE")),
                           ingestion=Ingestion(mode="overwrite", function=zoned_readings))
    defs = paimon_definitions([spec], warehouse=str(tmp_path / "wh"))

    result = defs.resolve_job_def(names.ingestion_job("plant.zoned")).execute_in_process(instance=instance)

    stored = pc.Catalog(str(tmp_path / "wh")).get_table("plant.zoned").read().column("ts").to_pylist()
    assert [str(ts) for ts in stored] == ["2024-03-01 09:00:00", "2024-03-01 10:30:00"]
    said = [e.message for e in instance.all_logs(result.run_id) if "time zone Europe/Paris" in (e.message or "")]
    assert len(said) == 1 and "column ts: timestamps with time zone Europe/Paris are stored as their UTC wall " \
                              "time" in said[0]
