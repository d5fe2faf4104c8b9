"""Append tables end to end on real files: buckets, rolling, streaming, overwrite, reads."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pac
import pyarrow.parquet as pq
import pytest

import paimon_core as pc
from paimon_core.errors import SchemaError, SnapshotNotFoundError
from tests.integration.conftest import EVENTS, events


def random_events(n: int, seed: int, days: int = 4) -> pa.Table:
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, 1_000_000, n)
    return pa.table({"id": ids, "msg": [f"message-{i % 997}-" + "x" * (i % 40) for i in ids],
                     "dt": [f"2024-01-0{1 + int(d)}" for d in rng.integers(0, days, n)]}, schema=EVENTS)


def canonical(table: pa.Table) -> pa.Table:
    return table.sort_by([(name, "ascending") for name in table.column_names])


def test_write_read_filter_and_project(catalog: pc.Catalog) -> None:
    table = catalog.create_table("db.t", schema=EVENTS, partition_keys=["dt"])
    data = random_events(5000, seed=1)
    table.write(data)
    assert canonical(table.read()).equals(canonical(data))
    for filters in ([("dt", "=", "2024-01-02")], [("id", ">", 500_000), ("dt", "in", ["2024-01-01", "2024-01-04"])],
                    [[("id", "<", 1000)], [("msg", "=", "message-5-xxxxx")]], [("msg", "is null")]):
        expected = data.filter(pc.read.predicate.parse_filter(filters, table.schema, "t").to_expression())  # type: ignore[union-attr]
        got = table.read(filter=filters)
        assert canonical(got).equals(canonical(expected)), filters
    projected = table.read(columns=["id"], filter=[("dt", "=", "2024-01-03")])
    assert projected.column_names == ["id"]
    expression = table.read(filter=pac.field("id") < 100)
    assert sorted(expression["id"].to_pylist()) == sorted(i for i in data["id"].to_pylist() if i < 100)


def test_partition_pruning_reads_only_matching_files(catalog: pc.Catalog) -> None:
    table = catalog.create_table("db.t", schema=EVENTS, partition_keys=["dt"])
    for day in range(1, 5):
        table.write(events(range(day * 100, day * 100 + 50), f"2024-01-0{day}"))
    assert sum(len(s.files) for s in table.plan()) == 4
    assert [s.partition_values for s in table.plan(filter=[("dt", ">=", "2024-01-03")])] in (
        [("2024-01-03",), ("2024-01-04",)], [("2024-01-04",), ("2024-01-03",)])
    assert sum(len(s.files) for s in table.plan(filter=[("id", ">=", 349)])) == 2
    assert sum(len(s.files) for s in table.plan(filter=[("id", ">=", 350)])) == 1


def test_fixed_bucket_routing_and_sequence_numbers(catalog: pc.Catalog) -> None:
    table = catalog.create_table("db.t", schema=EVENTS, partition_keys=["dt"],
                                 options={"bucket": "3", "bucket-key": "id"})
    table.write(events(range(60)))
    table.write(events(range(60, 90)))
    splits = table.plan()
    assert {s.bucket for s in splits} == {0, 1, 2}
    for split in splits:
        ids = table.read_split(split, columns=["id"])["id"].to_pylist()
        from paimon_core.binary_row import encode_row, hash_bytes
        from paimon_core.types import atomic

        assert all(abs(hash_bytes(encode_row([i], [atomic("BIGINT")]))) % 3 == split.bucket for i in ids)
        ranges = sorted((f.min_sequence_number, f.max_sequence_number) for f in split.files)
        assert ranges[0][0] == 0 and ranges[1][0] == ranges[0][1] + 1, "sequence numbers continue"


def test_rolling_by_target_file_size(catalog: pc.Catalog) -> None:
    table = catalog.create_table("db.t", schema=EVENTS, options={"target-file-size": "64 kb",
                                                                 "write-buffer-size": "128 kb"})
    data = random_events(40_000, seed=2)
    table.write(data)
    files = table.files()
    assert len(files) > 3
    assert sum(f.row_count for f in files) == 40_000
    assert all(f.file_size < 64 * 1024 * 3 for f in files)
    assert table.read().num_rows == 40_000


def test_streaming_writer_bounds_its_buffer(catalog: pc.Catalog) -> None:
    table = catalog.create_table("db.t", schema=EVENTS, partition_keys=["dt"],
                                 options={"write-buffer-size": "256 kb"})
    batches = [random_events(4000, seed=s).to_batches()[0] for s in range(20)]
    reader = pa.RecordBatchReader.from_batches(EVENTS, iter(batches))
    with table.new_write() as writer:
        peak = 0
        for batch in reader:
            writer.write(batch)
            peak = max(peak, writer.buffered_bytes)
        sid = writer.commit()
    assert sid == 1 and peak <= 256 * 1024 + max(b.nbytes for b in batches)
    assert table.read().num_rows == 80_000
    row_groups = sum(pq.ParquetFile(Path(table.path) / f.partition.replace(",", "/") / "bucket-0" /
                                    f.file_name).num_row_groups for f in table.files())
    assert row_groups > len(table.files()), "the buffer must have flushed several times"


def test_streaming_reader_returns_everything_in_batches(catalog: pc.Catalog) -> None:
    table = catalog.create_table("db.t", schema=EVENTS, partition_keys=["dt"])
    table.write(random_events(3000, seed=3))
    reader = table.to_batches(batch_size=256, filter=[("dt", "!=", "2024-01-01")])
    batches = list(reader)
    assert all(b.num_rows <= 256 for b in batches)
    assert canonical(pa.Table.from_batches(batches, schema=reader.schema)).equals(
        canonical(table.read(filter=[("dt", "!=", "2024-01-01")])))


def test_overwrite_modes(catalog: pc.Catalog) -> None:
    table = catalog.create_table("db.t", schema=EVENTS, partition_keys=["dt"])
    table.write(pa.concat_tables([events(range(3), "d1"), events(range(3, 6), "d2")]))
    table.write(events([10], "d1"), overwrite={"dt": "d1"})
    assert sorted(table.read()["id"].to_pylist()) == [3, 4, 5, 10]
    table.write(pa.concat_tables([events([20], "d2"), events([30], "d3")]), overwrite=True)
    assert sorted(table.read()["id"].to_pylist()) == [10, 20, 30]
    with pytest.raises(SchemaError, match="does not belong to the overwritten partition"):
        table.write(events([40], "d2"), overwrite={"dt": "d1"})
    assert table.write(events([], "d1"), overwrite=True) is None
    whole = catalog.create_table("db.w", schema=EVENTS, partition_keys=["dt"],
                                 options={"dynamic-partition-overwrite": "false"})
    whole.write(pa.concat_tables([events([1], "d1"), events([2], "d2")]))
    whole.write(events([3], "d1"), overwrite=True)
    assert whole.read()["id"].to_pylist() == [3]
    truncated = whole.write(events([], "d1"), overwrite={})
    assert truncated == 3 and whole.read().num_rows == 0


def test_time_travel(catalog: pc.Catalog) -> None:
    table = catalog.create_table("db.t", schema=EVENTS)
    table.write(events(range(2)))
    time.sleep(0.01)
    between = int(time.time() * 1000)
    time.sleep(0.01)
    table.write(events(range(2, 5)))
    assert table.read(snapshot_id=1).num_rows == 2
    assert table.read(timestamp_ms=between).num_rows == 2
    assert table.read().num_rows == 5
    with pytest.raises(SnapshotNotFoundError, match="no snapshot at or before"):
        table.read(timestamp_ms=1)
    with pytest.raises(SnapshotNotFoundError, match="snapshot 9"):
        table.read(snapshot_id=9)


def test_schema_evolution_reads_old_files(catalog: pc.Catalog) -> None:
    table = catalog.create_table("db.t", schema=pa.schema([("id", pa.int32()), ("v", pa.string())]))
    table.write(pa.table({"id": pa.array([1], pa.int32()), "v": ["a"]}))
    table.alter([pc.UpdateColumnType("id", pa.int64()), pc.RenameColumn("v", "w"),
                 pc.AddColumn("z", pa.float64())])
    table.write(pa.table({"id": [2**40], "w": ["b"], "z": [0.5]}))
    assert table.read().sort_by("id").to_pylist() == [{"id": 1, "w": "a", "z": None},
                                                      {"id": 2**40, "w": "b", "z": 0.5}]
    assert table.read(filter=[("w", "=", "a")])["id"].to_pylist() == [1]
    old = table.read(snapshot_id=1)
    assert old.column_names == ["id", "v"] and old.schema.field("id").type == pa.int32()


def test_empty_table_reads_empty_with_schema(catalog: pc.Catalog) -> None:
    table = catalog.create_table("db.t", schema=EVENTS, partition_keys=["dt"])
    assert table.read().schema == EVENTS and table.read().num_rows == 0
    assert table.latest_snapshot() is None and table.write(events([])) is None
    assert list(table.to_batches()) == []


def test_pandas_input_and_output(catalog: pc.Catalog) -> None:
    table = catalog.create_table("db.t", schema=EVENTS, partition_keys=["dt"])
    table.write(events(range(4)).to_pandas())
    frame = table.to_pandas()
    assert sorted(frame["id"].tolist()) == [0, 1, 2, 3]


def test_null_and_blank_partition_values_use_the_default_partition(catalog: pc.Catalog) -> None:
    table = catalog.create_table("db.t", schema=EVENTS, partition_keys=["dt"])
    table.write(pa.table({"id": [1, 2, 3], "msg": ["a", "b", "c"], "dt": [None, "", "d1"]}, schema=EVENTS))
    assert sorted(f.partition for f in table.files()) == ["dt=", "dt=None", "dt=d1"]
    assert (Path(table.path) / "dt=__DEFAULT_PARTITION__").is_dir()
    assert table.read(filter=[("dt", "is null")])["id"].to_pylist() == [1]
    assert sorted(table.read()["id"].to_pylist()) == [1, 2, 3]
