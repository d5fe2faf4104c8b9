"""Append tables round-trip with pypaimon 2.1.0 in both directions, at every snapshot."""

from __future__ import annotations

import datetime
import decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import paimon_core as pc
from tests.interop.conftest import Oracle

pytestmark = pytest.mark.interop

LOG_SCHEMA = pa.schema([("id", pa.int64()), ("msg", pa.string()), ("score", pa.float64()),
                        ("dt", pa.string())])


def log_rows(ids: range, dt: str) -> pa.Table:
    return pa.table({"id": list(ids), "msg": [f"message {i}" if i % 7 else None for i in ids],
                     "score": [i / 3 for i in ids], "dt": [dt] * len(ids)}, schema=LOG_SCHEMA)


def rows(table: pa.Table, key: str = "id") -> list[dict[str, Any]]:
    return table.sort_by(key).to_pylist() if table.num_rows else []


def new_catalog(path: Path) -> pc.Catalog:
    catalog = pc.Catalog(str(path))
    catalog.create_database("db", exist_ok=True)
    return catalog


def assert_every_snapshot_matches(table: pc.Table, oracle: Oracle, warehouse: Path,
                                  expected: dict[int, pa.Table] | None = None) -> None:
    """pypaimon and we read the same rows at every snapshot (and the expected ones if given)."""
    ids = [s.id for s in table.snapshots()]
    assert ids, "table has no snapshots"
    theirs = oracle.read_snapshots(warehouse, table.name, ids)
    for sid in ids:
        ours = table.read(snapshot_id=sid)
        assert rows(ours) == rows(theirs[sid]), f"snapshot {sid} differs"
        if expected is not None:
            assert rows(ours) == rows(expected[sid]), f"snapshot {sid} is not what was written"


def test_unaware_append_written_by_us_read_by_pypaimon(tmp_path: Path, oracle: Oracle) -> None:
    catalog = new_catalog(tmp_path)
    table = catalog.create_table("db.logs", schema=LOG_SCHEMA, partition_keys=["dt"])
    batches = [log_rows(range(0, 50), "2024-01-01"), log_rows(range(50, 80), "2024-01-02"),
               pa.concat_tables([log_rows(range(80, 90), "2024-01-01"),
                                 log_rows(range(90, 95), "2024-01-03")])]
    expected = {}
    for i, batch in enumerate(batches):
        sid = table.write(batch)
        expected[sid] = pa.concat_tables(batches[: i + 1])
    assert_every_snapshot_matches(table, oracle, tmp_path, expected)


def test_unaware_append_written_by_pypaimon_read_by_us(tmp_path: Path, oracle: Oracle) -> None:
    steps: list[dict[str, Any]] = [
        {"op": "create_database", "name": "db"},
        {"op": "create_table", "table": "db.logs", "schema": oracle.save(LOG_SCHEMA.empty_table()),
         "partition_keys": ["dt"], "options": {"bucket": "-1"}}]
    for start, dt in ((0, "2024-01-01"), (40, "2024-01-02"), (70, "2024-01-01")):
        steps.append({"op": "write", "table": "db.logs",
                      "data": oracle.save(log_rows(range(start, start + 30), dt))})
    oracle.run(tmp_path, steps)
    table = pc.Catalog(str(tmp_path)).get_table("db.logs")
    assert [s.id for s in table.snapshots()] == [1, 2, 3]
    assert_every_snapshot_matches(table, oracle, tmp_path)
    assert table.read().num_rows == 90


@pytest.mark.parametrize("bucket_key", ["id", "id,msg"])
def test_fixed_bucket_placement_is_identical(tmp_path: Path, oracle: Oracle, bucket_key: str) -> None:
    data = pa.concat_tables([log_rows(range(0, 200), "2024-01-01"),
                             log_rows(range(200, 260), "2024-01-02")])
    data = data.set_column(1, "msg", pa.array([f"m{i}" * (i % 5) for i in range(260)]))
    options = {"bucket": "4", "bucket-key": bucket_key}
    catalog = new_catalog(tmp_path)
    ours = catalog.create_table("db.ours", schema=LOG_SCHEMA, partition_keys=["dt"], options=options)
    ours.write(data)
    oracle.run(tmp_path, [
        {"op": "create_table", "table": "db.theirs", "schema": oracle.save(LOG_SCHEMA.empty_table()),
         "partition_keys": ["dt"], "options": options},
        {"op": "write", "table": "db.theirs", "data": oracle.save(data)}])
    our_placement = {(split.partition_values[0], split.bucket):
                     sorted(ours.read_split(split, columns=["id"])["id"].to_pylist())
                     for split in ours.plan()}
    theirs_of_ours, theirs_of_theirs = oracle.run(tmp_path, [
        {"op": "placement", "table": "db.ours", "column": "id"},
        {"op": "placement", "table": "db.theirs", "column": "id"}])
    as_map = {(p["partition"][0], p["bucket"]): p["values"] for p in theirs_of_theirs}
    assert as_map == our_placement
    assert {(p["partition"][0], p["bucket"]): p["values"] for p in theirs_of_ours} == our_placement
    assert len(our_placement) > 4, "rows should spread over several buckets"
    ours_read = catalog.get_table("db.theirs").read()
    assert rows(ours_read) == rows(data)


def test_overwrite_written_by_us_read_by_pypaimon(tmp_path: Path, oracle: Oracle) -> None:
    catalog = new_catalog(tmp_path)
    table = catalog.create_table("db.logs", schema=LOG_SCHEMA, partition_keys=["dt"])
    d1, d2, d3 = "2024-01-01", "2024-01-02", "2024-01-03"
    table.write(pa.concat_tables([log_rows(range(0, 10), d1), log_rows(range(10, 20), d2)]))
    table.write(log_rows(range(100, 103), d1), overwrite={"dt": d1})
    table.write(pa.concat_tables([log_rows(range(200, 205), d2), log_rows(range(300, 302), d3)]),
                overwrite=True)
    expected_last = pa.concat_tables([log_rows(range(100, 103), d1), log_rows(range(200, 205), d2),
                                      log_rows(range(300, 302), d3)])
    assert [s.commit_kind for s in table.snapshots()] == ["APPEND", "OVERWRITE", "OVERWRITE"]
    assert rows(table.read()) == rows(expected_last)
    assert_every_snapshot_matches(table, oracle, tmp_path)


def test_overwrite_written_by_pypaimon_read_by_us(tmp_path: Path, oracle: Oracle) -> None:
    d1, d2 = "2024-01-01", "2024-01-02"
    first = pa.concat_tables([log_rows(range(0, 10), d1), log_rows(range(10, 20), d2)])
    oracle.run(tmp_path, [
        {"op": "create_database", "name": "db"},
        {"op": "create_table", "table": "db.logs", "schema": oracle.save(LOG_SCHEMA.empty_table()),
         "partition_keys": ["dt"]},
        {"op": "write", "table": "db.logs", "data": oracle.save(first)},
        {"op": "write", "table": "db.logs", "data": oracle.save(log_rows(range(50, 52), d1)),
         "overwrite": {"dt": d1}},
        {"op": "write", "table": "db.logs", "data": oracle.save(log_rows(range(60, 61), d2)),
         "overwrite": {}}])
    table = pc.Catalog(str(tmp_path)).get_table("db.logs")
    assert_every_snapshot_matches(table, oracle, tmp_path)
    assert sorted(table.read()["id"].to_pylist()) == [50, 51, 60]


def test_schema_evolution_by_us_read_by_pypaimon(tmp_path: Path, oracle: Oracle) -> None:
    schema = pa.schema([("id", pa.int64()), ("v", pa.string()), ("n", pa.int32())])
    catalog = new_catalog(tmp_path)
    table = catalog.create_table("db.evo", schema=schema)
    table.write(pa.table({"id": [1, 2], "v": ["a", "b"], "n": [10, 20]}, schema=schema))
    table.alter([pc.RenameColumn("v", "v2"), pc.UpdateColumnType("n", pa.int64()),
                 pc.AddColumn("w", pa.float64())])
    table.write(pa.table({"id": [3], "v2": ["c"], "n": [2**40], "w": [1.5]}))
    table.alter([pc.DropColumn("w"), pc.AddColumn("x", pa.string())])
    table.write(pa.table({"id": [4], "v2": ["d"], "n": [7], "x": ["new"]}))
    assert rows(table.read()) == [
        {"id": 1, "v2": "a", "n": 10, "x": None}, {"id": 2, "v2": "b", "n": 20, "x": None},
        {"id": 3, "v2": "c", "n": 2**40, "x": None}, {"id": 4, "v2": "d", "n": 7, "x": "new"}]
    (latest,) = oracle.run(tmp_path, [{"op": "read", "table": "db.evo",
                                       "out": str(tmp_path / "latest.arrow")}])
    assert latest["rows"] == 4
    assert rows(Oracle.load(str(tmp_path / "latest.arrow"))) == rows(table.read())
    assert_every_snapshot_matches(table, oracle, tmp_path)


def test_schema_evolution_by_pypaimon_read_by_us(tmp_path: Path, oracle: Oracle) -> None:
    schema = pa.schema([("id", pa.int64()), ("v", pa.string()), ("n", pa.int32())])
    oracle.run(tmp_path, [
        {"op": "create_database", "name": "db"},
        {"op": "create_table", "table": "db.evo", "schema": oracle.save(schema.empty_table())},
        {"op": "write", "table": "db.evo",
         "data": oracle.save(pa.table({"id": [1], "v": ["a"], "n": [5]}, schema=schema))},
        {"op": "alter", "table": "db.evo", "changes": [
            {"op": "rename_column", "name": "v", "new_name": "v2"},
            {"op": "update_column_type", "name": "n", "type": "BIGINT"},
            {"op": "add_column", "name": "w", "type": "DOUBLE"}]},
        {"op": "write", "table": "db.evo", "data": oracle.save(pa.table(
            {"id": [2], "v2": ["b"], "n": pa.array([2**40], pa.int64()), "w": [0.5]}))}])
    table = pc.Catalog(str(tmp_path)).get_table("db.evo")
    assert rows(table.read()) == [{"id": 1, "v2": "a", "n": 5, "w": None},
                                  {"id": 2, "v2": "b", "n": 2**40, "w": 0.5}]
    assert_every_snapshot_matches(table, oracle, tmp_path)


ALL_TYPES = pa.schema([
    pa.field("id", pa.int64(), nullable=False), ("b", pa.bool_()), ("i8", pa.int8()),
    ("i16", pa.int16()), ("i32", pa.int32()), ("f32", pa.float32()), ("f64", pa.float64()),
    ("dec", pa.decimal128(10, 2)), ("dec38", pa.decimal128(38, 6)), ("s", pa.string()),
    ("bin", pa.binary()), ("d", pa.date32()), ("t", pa.time32("ms")), ("ts3", pa.timestamp("ms")),
    ("ts6", pa.timestamp("us")), ("ltz", pa.timestamp("us", tz="UTC")),
    ("arr", pa.list_(pa.int32())), ("m", pa.map_(pa.string(), pa.int64())),
    ("r", pa.struct([("a", pa.int32()), ("b", pa.string())])), ("dt", pa.string())])


def all_types_rows(start: int, count: int) -> pa.Table:
    ids = list(range(start, start + count))

    def maybe(values: list[Any]) -> list[Any]:
        return [None if i % 5 == 4 else v for i, v in zip(ids, values)]

    base = datetime.datetime(2024, 3, 1, 12, 30, 15, 123456)
    return pa.table({
        "id": ids, "b": maybe([i % 2 == 0 for i in ids]), "i8": maybe([i % 100 - 50 for i in ids]),
        "i16": maybe([i * 300 - 5000 for i in ids]), "i32": maybe([i * 70000 - 10 for i in ids]),
        "f32": maybe([i / 4 for i in ids]), "f64": maybe([i * 1.25 - 3 for i in ids]),
        "dec": maybe([decimal.Decimal(i * 37 - 100) / 100 for i in ids]),
        "dec38": maybe([decimal.Decimal(i) * decimal.Decimal("12345678901234567890.123456") for i in ids]),
        "s": maybe([("long-string-value-" if i % 2 else "s") + str(i) * (i % 4) for i in ids]),
        "bin": maybe([bytes([i % 256]) * (i % 12) for i in ids]),
        "d": maybe([datetime.date(2024, 1, 1) + datetime.timedelta(days=i) for i in ids]),
        "t": maybe([datetime.time(i % 24, i % 60, i % 60, (i * 1000) % 1_000_000) for i in ids]),
        "ts3": maybe([base + datetime.timedelta(minutes=i, milliseconds=i) for i in ids]),
        "ts6": maybe([base + datetime.timedelta(hours=i, microseconds=i) for i in ids]),
        "ltz": maybe([(base + datetime.timedelta(seconds=i)).replace(tzinfo=datetime.UTC)
                      for i in ids]),
        "arr": maybe([list(range(i % 4)) for i in ids]),
        "m": maybe([[(f"k{j}", j * i) for j in range(i % 3)] for i in ids]),
        "r": maybe([{"a": i, "b": f"r{i}"} for i in ids]),
        "dt": ["p1" if i % 2 else "p2" for i in ids],
    }, schema=ALL_TYPES)


@pytest.mark.parametrize("stats_mode", ["none", "counts", "truncate(4)", "truncate(16)", "full"])
def test_every_type_written_by_us_read_by_pypaimon(tmp_path: Path, oracle: Oracle, stats_mode: str) -> None:
    catalog = new_catalog(tmp_path)
    table = catalog.create_table("db.types", schema=ALL_TYPES, partition_keys=["dt"],
                                 options={"metadata.stats-mode": stats_mode})
    table.write(all_types_rows(0, 30))
    table.write(all_types_rows(30, 25))
    expected = pa.concat_tables([all_types_rows(0, 30), all_types_rows(30, 25)])
    assert rows(table.read()) == rows(expected)
    assert_every_snapshot_matches(table, oracle, tmp_path)


def test_every_type_written_by_pypaimon_read_by_us(tmp_path: Path, oracle: Oracle) -> None:
    data = all_types_rows(0, 40)
    oracle.run(tmp_path, [
        {"op": "create_database", "name": "db"},
        {"op": "create_table", "table": "db.types", "schema": oracle.save(ALL_TYPES.empty_table()),
         "partition_keys": ["dt"], "options": {"metadata.stats-mode": "full"}},
        {"op": "write", "table": "db.types", "data": oracle.save(data.slice(0, 25))},
        {"op": "write", "table": "db.types", "data": oracle.save(data.slice(25))}])
    table = pc.Catalog(str(tmp_path)).get_table("db.types")
    assert rows(table.read()) == rows(data)
    assert_every_snapshot_matches(table, oracle, tmp_path)
    # our pruning on pypaimon's stats: ids 0..24 live in the first commit's files only
    assert rows(table.read(filter=[("id", ">=", 30)])) == rows(data.slice(30))
    assert len(table.plan(filter=[("id", ">=", 30)])) <= len(table.plan())
    files = sum(len(s.files) for s in table.plan(filter=[("id", ">=", 30)]))
    assert files == 2, "first-commit files hold ids < 25 and must be skipped by their stats"


def test_pypaimon_prunes_on_our_partition_and_value_stats(tmp_path: Path, oracle: Oracle) -> None:
    catalog = new_catalog(tmp_path)
    table = catalog.create_table("db.logs", schema=LOG_SCHEMA, partition_keys=["dt"])
    for start in (0, 100, 200):
        table.write(pa.concat_tables([log_rows(range(start, start + 50), "2024-01-01"),
                                      log_rows(range(start + 50, start + 100), "2024-01-02")]))
    everything, by_partition, by_value = oracle.run(tmp_path, [
        {"op": "read", "table": "db.logs"},
        {"op": "read", "table": "db.logs", "filter": [["dt", "=", "2024-01-02"]]},
        {"op": "read", "table": "db.logs", "filter": [["id", ">=", 250]]}])
    assert everything == {"rows": 300, "files": 6, "splits": everything["splits"]}
    assert by_partition["files"] == 3 and by_partition["rows"] == 150
    assert by_value["files"] == 1 and by_value["rows"] == 50
    ours = table.read(filter=[("id", ">=", 250)])
    assert sorted(ours["id"].to_pylist()) == list(range(250, 300))
    assert sum(len(s.files) for s in table.plan(filter=[("id", ">=", 250)])) == 1


def test_orc_files_written_by_us_read_by_pypaimon(tmp_path: Path, oracle: Oracle) -> None:
    catalog = new_catalog(tmp_path)
    table = catalog.create_table("db.orc", schema=ALL_TYPES, partition_keys=["dt"],
                                 options={"file.format": "orc"})
    table.write(all_types_rows(0, 20))
    assert all(f.file_name.endswith(".orc") for f in table.files())
    assert rows(table.read()) == rows(all_types_rows(0, 20))
    assert_every_snapshot_matches(table, oracle, tmp_path)


def test_deletion_vectors_written_by_pypaimon_are_applied(tmp_path: Path, oracle: Oracle) -> None:
    schema = pa.schema([("id", pa.int64()), ("v", pa.string()), ("dt", pa.string())])
    data = pa.table({"id": list(range(20)), "v": [str(i) for i in range(20)],
                     "dt": ["a"] * 10 + ["b"] * 10}, schema=schema)
    oracle.run(tmp_path, [
        {"op": "create_database", "name": "db"},
        {"op": "create_table", "table": "db.dv", "schema": oracle.save(schema.empty_table()),
         "partition_keys": ["dt"], "options": {"row-tracking.enabled": "true",
                                               "data-evolution.enabled": "true",
                                               "deletion-vectors.enabled": "true"}},
        {"op": "write", "table": "db.dv", "data": oracle.save(data)},
        {"op": "delete", "table": "db.dv", "filter": [["id", "in", [1, 4, 7, 15]]]},
        {"op": "delete", "table": "db.dv", "filter": [["id", "in", [2, 19]]]}])
    table = pc.Catalog(str(tmp_path)).get_table("db.dv")
    assert sorted(table.read()["id"].to_pylist()) == [i for i in range(20) if i not in {1, 2, 4, 7, 15, 19}]
    assert sorted(table.read(snapshot_id=2)["id"].to_pylist()) == [
        i for i in range(20) if i not in {1, 4, 7, 15}]
    streamed = pa.Table.from_batches(list(table.to_batches(batch_size=3)))
    assert sorted(streamed["id"].to_pylist()) == sorted(table.read()["id"].to_pylist())
    assert_every_snapshot_matches(table, oracle, tmp_path)
    with pytest.raises(pc.errors.UnsupportedFeatureError, match="row-tracking"):
        table.write(data)
    assert len(table.snapshots()) == 3


def test_tags_created_by_pypaimon_time_travel(tmp_path: Path, oracle: Oracle) -> None:
    oracle.run(tmp_path, [
        {"op": "create_database", "name": "db"},
        {"op": "create_table", "table": "db.logs", "schema": oracle.save(LOG_SCHEMA.empty_table()),
         "partition_keys": ["dt"]},
        {"op": "write", "table": "db.logs", "data": oracle.save(log_rows(range(0, 5), "2024-01-01"))},
        {"op": "create_tag", "table": "db.logs", "name": "first", "snapshot_id": 1},
        {"op": "write", "table": "db.logs", "data": oracle.save(log_rows(range(5, 9), "2024-01-01"))}])
    table = pc.Catalog(str(tmp_path)).get_table("db.logs")
    assert sorted(table.read(tag="first")["id"].to_pylist()) == list(range(5))
    assert table.read().num_rows == 9
    with pytest.raises(pc.errors.SnapshotNotFoundError, match="tag 'missing'"):
        table.read(tag="missing")


TYPED_PARTITIONS = pa.schema([("id", pa.int64()), ("d", pa.date32()), ("ok", pa.bool_()),
                              ("n", pa.int32())])


def typed_partition_rows() -> pa.Table:
    return pa.table({"id": list(range(8)),
                     "d": [datetime.date(2024, 1, 1 + i % 2) for i in range(8)],
                     "ok": [i % 3 == 0 for i in range(8)], "n": [i % 2 * 7 for i in range(8)]},
                    schema=TYPED_PARTITIONS)


@pytest.mark.parametrize("writer", ["us", "pypaimon"])
def test_date_boolean_and_int_partition_directories_agree(tmp_path: Path, oracle: Oracle, writer: str) -> None:
    data = typed_partition_rows()
    if writer == "us":
        table = new_catalog(tmp_path).create_table("db.parts", schema=TYPED_PARTITIONS,
                                                   partition_keys=["d", "ok", "n"])
        table.write(data)
    else:
        oracle.run(tmp_path, [
            {"op": "create_database", "name": "db"},
            {"op": "create_table", "table": "db.parts", "schema": oracle.save(TYPED_PARTITIONS.empty_table()),
             "partition_keys": ["d", "ok", "n"]},
            {"op": "write", "table": "db.parts", "data": oracle.save(data)}])
        table = pc.Catalog(str(tmp_path)).get_table("db.parts")
    directories = sorted(str(p.relative_to(tmp_path / "db.db" / "parts").parent)
                         for p in (tmp_path / "db.db" / "parts").rglob("*.parquet"))
    assert "d=19723/ok=true/n=0/bucket-0" in directories, directories  # Java's legacy partition names
    assert rows(table.read()) == rows(data)
    assert rows(table.read(filter=[("d", "=", datetime.date(2024, 1, 2)), ("ok", "=", False)])) == rows(
        data.filter(pa.compute.and_(pa.compute.equal(data["d"], datetime.date(2024, 1, 2)),
                                    pa.compute.invert(data["ok"]))))
    assert_every_snapshot_matches(table, oracle, tmp_path)
