"""The log-event sources on their own: deterministic generation and landing-folder reading."""

import datetime as dt_
import json
from pathlib import Path

import dagster as dg
import numpy as np
import pyarrow as pa
import pyarrow.compute as pac
import pyarrow.parquet as pq
import pytest
import yaml

from pipelines.component import table_spec
from pipelines.definitions import REPO_ROOT
from pipelines.demo.landing import SourceDataError
from pipelines.demo.log_events import (
    SCHEMA,
    TABLE,
    TABLE_OPTIONS,
    event_batches,
    landing_batches,
    landing_files,
    synthetic_batches,
)
from pipelines.demo.log_source import LogEventSource

DAY = "2024-02-29"
DECLARATION = REPO_ROOT / "pipelines" / "demo" / "defs" / "tables" / "defs.yaml"


def generate(day: str, rows: int, batch_size: int = 1_000) -> pa.Table:
    return pa.Table.from_batches(synthetic_batches(day, rows=rows, batch_size=batch_size), schema=SCHEMA)


def test_synthetic_day_is_deterministic_and_days_differ() -> None:
    first, again, other = generate(DAY, 2_500), generate(DAY, 2_500), generate("2024-03-01", 2_500)

    assert first.equals(again)
    assert not first.column("message").equals(other.column("message"))


def test_synthetic_batches_are_bounded_and_shaped_like_the_table() -> None:
    batches = list(synthetic_batches(DAY, rows=2_500, batch_size=1_000))

    assert [b.num_rows for b in batches] == [1_000, 1_000, 500]
    assert all(b.schema.equals(SCHEMA) for b in batches)


def test_synthetic_events_look_like_logs() -> None:
    table = generate(DAY, 5_000)

    ts = table.column("ts").to_numpy().astype("int64")
    assert (np.diff(ts) >= 0).all()  # increasing across batch boundaries too
    bounds = pac.min_max(table.column("ts"))
    assert bounds["min"].as_py().date() == bounds["max"].as_py().date() == dt_.date(2024, 2, 29)
    assert set(table.column("level").to_pylist()) == {"DEBUG", "INFO", "WARN", "ERROR"}
    assert 60 <= pac.mean(pac.utf8_length(table.column("message"))).as_py() <= 100
    assert table.column("ts").null_count == 0
    assert 0 < table.column("user_id").null_count < table.num_rows * 0.1
    assert pac.unique(table.column("dt")).to_pylist() == [DAY]


def test_bad_day_is_rejected_before_generating() -> None:
    with pytest.raises(ValueError, match="not a YYYY-MM-DD date"):
        synthetic_batches("2024/01/01", rows=10)


def test_landing_files_come_from_the_day_folder_and_dated_names(tmp_path: Path) -> None:
    (tmp_path / DAY / "nested").mkdir(parents=True)
    for name in (f"{DAY}/b.parquet", f"{DAY}/nested/a.jsonl.gz", f"{DAY}/_SUCCESS", f"{DAY}/notes.txt",
                 f"logs-{DAY}.ndjson", "logs-2024-03-01.jsonl", f".hidden-{DAY}.jsonl"):
        (tmp_path / name).write_bytes(b"")

    found = [p.relative_to(tmp_path).as_posix() for p in landing_files(tmp_path, DAY)]

    assert found == [f"{DAY}/b.parquet", f"{DAY}/nested/a.jsonl.gz", f"logs-{DAY}.ndjson"]


def test_landing_reader_casts_and_fills_missing_columns(tmp_path: Path) -> None:
    (tmp_path / DAY).mkdir()
    pq.write_table(pa.table({"ts": pa.array(["2024-02-29 08:00:00"] * 3), "latency_ms": [1, 2, 3],
                             "level": ["INFO"] * 3}), tmp_path / DAY / "a.parquet", row_group_size=2)

    batches = list(landing_batches(tmp_path, DAY, batch_size=2))

    table = pa.Table.from_batches(batches)
    assert [b.num_rows for b in batches] == [2, 1]
    assert table.schema.equals(SCHEMA)
    assert table.column("latency_ms").to_pylist() == [1.0, 2.0, 3.0]
    assert table.column("host").null_count == 3
    assert table.column("dt").to_pylist() == [DAY] * 3


def test_landing_reader_names_the_file_that_does_not_cast(tmp_path: Path) -> None:
    path = tmp_path / f"events-{DAY}.parquet"
    pq.write_table(pa.table({"ts": ["not a time"]}), path)

    with pytest.raises(SourceDataError, match=r"'ts' of .*events-2024-02-29\.parquet"):
        list(landing_batches(tmp_path, DAY))


def test_landing_reader_rejects_bad_json(tmp_path: Path) -> None:
    (tmp_path / f"{DAY}.jsonl").write_text(json.dumps({"ts": "2024-02-29T01:00:00"}) + "\n{broken\n")

    with pytest.raises(SourceDataError, match="cannot parse JSON lines"):
        list(landing_batches(tmp_path, DAY))


def test_missing_landing_day_fails_before_reading(tmp_path: Path) -> None:
    with pytest.raises(SourceDataError, match="no Parquet or JSON-lines files for 2024-02-29"):
        landing_batches(tmp_path, DAY)


def test_source_resource_dispatches_and_validates(tmp_path: Path) -> None:
    synthetic = pa.Table.from_batches(event_batches(LogEventSource(rows_per_partition=7), DAY))

    assert synthetic.num_rows == 7
    with pytest.raises(dg.Failure, match="landing_dir is empty"):
        event_batches(LogEventSource(mode="landing"), DAY)
    with pytest.raises(dg.Failure, match="does not exist"):
        event_batches(LogEventSource(mode="landing", landing_dir=str(tmp_path / "nope")), DAY)


def test_the_generator_is_shaped_like_the_declared_table() -> None:
    """The YAML declares logs.events; the generator and the landing reader shape rows by SCHEMA."""
    [entry] = [t for t in yaml.safe_load(DECLARATION.read_text())["attributes"]["tables"] if t["table"] == TABLE]
    spec = table_spec(entry)

    assert [(f.name, f.type, f.nullable) for f in spec.arrow_schema()] == [
        (f.name, f.type, f.nullable) for f in SCHEMA]
    assert spec.partition_keys == ("dt",)
    assert spec.table_options() == TABLE_OPTIONS
