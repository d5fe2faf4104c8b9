"""Every data type, Parquet and ORC, every stats mode: Java Paimon 0.9 reads ours and we read Java's."""

from __future__ import annotations

import datetime
import decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import paimon_core as pc
from tests.interop.conftest import JavaOracle
from tests.interop.java_support import (
    BASE_TIME,
    assert_filtered_like,
    assert_reads_match,
    assert_same_rows,
    decimal_values,
)

pytestmark = pytest.mark.interop

DECIMALS = [(1, 0), (5, 2), (9, 3), (10, 0), (12, 2), (18, 6), (19, 4), (28, 10), (38, 0), (38, 18)]
TYPES = pa.schema([
    pa.field("id", pa.int64(), nullable=False), ("b", pa.bool_()), ("i8", pa.int8()), ("i16", pa.int16()),
    ("i32", pa.int32()), ("i64", pa.int64()), ("f32", pa.float32()), ("f64", pa.float64()),
    *[(f"dec_{p}_{s}", pa.decimal128(p, s)) for p, s in DECIMALS],
    ("s", pa.string()), ("bin", pa.binary()), ("d", pa.date32()), ("t", pa.time32("ms")),
    ("ts0", pa.timestamp("s")), ("ts3", pa.timestamp("ms")), ("ts6", pa.timestamp("us")),
    ("ltz3", pa.timestamp("ms", tz="UTC")), ("ltz6", pa.timestamp("us", tz="UTC")),
    ("arr", pa.list_(pa.int32())), ("arr_s", pa.list_(pa.string())), ("m", pa.map_(pa.string(), pa.int64())),
    ("r", pa.struct([("a", pa.int32()), ("b", pa.string()), ("c", pa.list_(pa.float64()))])),
    ("arr_r", pa.list_(pa.struct([("x", pa.int64()), ("y", pa.string())]))), ("dt", pa.string())])
NANOS = pa.schema([pa.field("id", pa.int64(), nullable=False), ("ts9", pa.timestamp("ns")),
                   ("ltz9", pa.timestamp("ns", tz="UTC")), ("ts6", pa.timestamp("us")), ("v", pa.string())])


def type_rows(start: int, count: int) -> pa.Table:
    ids = list(range(start, start + count))

    def maybe(values: list[Any]) -> list[Any]:
        return [None if i % 5 == 4 else v for i, v in zip(ids, values)]

    epoch_edge = datetime.datetime(1969, 12, 31, 23, 59, 58, 999000)
    columns: dict[str, Any] = {
        "id": ids, "b": maybe([i % 2 == 0 for i in ids]), "i8": maybe([[-128, 127, 0][i % 3] + (i % 3 == 2) * i % 50
                                                                      for i in ids]),
        "i16": maybe([[-32768, 32767][i % 2] if i % 7 == 0 else i * 300 - 5000 for i in ids]),
        "i32": maybe([[-(2**31), 2**31 - 1][i % 2] if i % 7 == 0 else i * 70000 - 10 for i in ids]),
        "i64": maybe([[-(2**63), 2**63 - 1][i % 2] if i % 7 == 0 else i * 7_000_000_000 for i in ids]),
        "f32": maybe([i / 4 - 3 for i in ids]), "f64": maybe([i * 1.25e10 - 3 for i in ids]),
        "s": maybe([("long-string-value-" if i % 2 else "s") + str(i) * (i % 4) + "é" for i in ids]),
        "bin": maybe([bytes([i % 256]) * (i % 12) for i in ids]),
        "d": maybe([datetime.date(1960, 1, 1) + datetime.timedelta(days=i * 400) for i in ids]),
        "t": maybe([datetime.time(i % 24, i % 60, i % 60, (i * 1000) % 1_000_000) for i in ids]),
        "ts0": maybe([(BASE_TIME + datetime.timedelta(days=i)).replace(microsecond=0) for i in ids]),
        "ts3": maybe([epoch_edge if i % 6 == 0 else BASE_TIME.replace(microsecond=123000)
                      + datetime.timedelta(minutes=i, milliseconds=i) for i in ids]),
        "ts6": maybe([BASE_TIME + datetime.timedelta(hours=i, microseconds=i) for i in ids]),
        "ltz3": maybe([(BASE_TIME.replace(microsecond=5000) + datetime.timedelta(seconds=i))
                       .replace(tzinfo=datetime.UTC) for i in ids]),
        "ltz6": maybe([(BASE_TIME + datetime.timedelta(seconds=i, microseconds=i)).replace(tzinfo=datetime.UTC)
                       for i in ids]),
        "arr": maybe([[j if j % 3 else None for j in range(i % 5)] for i in ids]),
        "arr_s": maybe([[f"e{j}" for j in range(i % 3)] for i in ids]),
        "m": maybe([[(f"k{j}", j * i if j else None) for j in range(i % 4)] for i in ids]),
        "r": maybe([{"a": i, "b": None if i % 3 == 0 else f"r{i}", "c": [i / 2] * (i % 3)} for i in ids]),
        "arr_r": maybe([[{"x": i * j, "y": f"y{j}"} for j in range(i % 3)] for i in ids]),
        "dt": ["p1" if i % 2 else "p2" for i in ids],
    }
    for p, s in DECIMALS:
        columns[f"dec_{p}_{s}"] = decimal_values(p, s, count)
    return pa.table(columns, schema=TYPES)


def nanos_rows(start: int, count: int) -> pa.Table:
    ids = list(range(start, start + count))
    base = pa.scalar(BASE_TIME, pa.timestamp("us")).cast(pa.timestamp("ns")).value
    ts9 = [None if i % 5 == 4 else base + i * 1_000_000_007 + i for i in ids]
    return pa.table({"id": ids, "ts9": pa.array(ts9, pa.timestamp("ns")),
                     "ltz9": pa.array(ts9, pa.timestamp("ns", tz="UTC")),
                     "ts6": pa.array([BASE_TIME + datetime.timedelta(microseconds=i) for i in ids],
                                     pa.timestamp("us")),
                     "v": [f"v{i}" for i in ids]}, schema=NANOS)


# (stats mode, dense store). Java 0.9 predates `_VALUE_STATS_COLS` (Paimon 1.0): it takes dense
# stats for full ones, so it can only filter on stats that cover every column (reads are unaffected).
STATS = [("none", "false"), ("none", "true"), ("counts", "true"), ("truncate(4)", "true"), ("full", "true"),
         ("full", "false")]


@pytest.mark.parametrize("file_format", ["parquet", "orc"])
@pytest.mark.parametrize(("stats_mode", "dense"), STATS)
def test_java_reads_every_type_we_write(tmp_path: Path, java_oracle: JavaOracle, file_format: str,
                                        stats_mode: str, dense: str) -> None:
    catalog = pc.Catalog(str(tmp_path))
    catalog.create_database("db")
    table = catalog.create_table("db.types", schema=TYPES, partition_keys=["dt"], options={
        "file.format": file_format, "metadata.stats-mode": stats_mode, "metadata.stats-dense-store": dense})
    table.write(type_rows(0, 40))
    table.write(type_rows(40, 35))
    assert table.compact(full=True).snapshot_id is not None  # DELETE entries in the manifests
    assert_same_rows(table.read(), pa.concat_tables([type_rows(0, 40), type_rows(40, 35)]), "our read")
    assert assert_reads_match(table, java_oracle, tmp_path) == 3
    if stats_mode == "none" and dense == "true":
        return
    # Java prunes on our stats and partitions with the same answer
    cases = [[["id", ">=", 60]], [["dt", "=", "p1"]], [["dec_18_6", ">", "0"]], [["s", "=", "sé"]],
             [["ts6", "<", (BASE_TIME + datetime.timedelta(hours=20)).isoformat()]],
             [["dec_38_18", "<", "0"], ["i32", ">", 0]]]
    filters: list[Any] = [
        [("id", ">=", 60)], [("dt", "=", "p1")], [("dec_18_6", ">", decimal.Decimal(0))], [("s", "=", "sé")],
        [("ts6", "<", BASE_TIME + datetime.timedelta(hours=20))],
        [("dec_38_18", "<", decimal.Decimal(0)), ("i32", ">", 0)]]
    outs = [str(java_oracle.workdir / f"filter-{file_format}-{stats_mode}-{dense}-{i}.arrow")
            for i in range(len(cases))]
    java_oracle.run(tmp_path, [{"op": "read", "table": "db.types", "filter": case, "out": out}
                               for case, out in zip(cases, outs)])
    for ours, out in zip(filters, outs):
        expected = table.read(filter=ours)
        assert expected.num_rows > 0
        assert_filtered_like(expected, java_oracle.load(out), ours, f"filter {ours}")


def test_java_reads_tables_whose_delete_entries_drop_their_stats(tmp_path: Path, java_oracle: JavaOracle) -> None:
    """``manifest.delete-file-drop-stats`` (Paimon 1.0) leaves DELETE entries with empty stats: Java 0.9
    reads such tables at every snapshot, but its filtered scans test every entry's stats, reading
    past the empty rows (wrong pruning or, as here, a failure)."""
    catalog = pc.Catalog(str(tmp_path))
    catalog.create_database("db")
    table = catalog.create_table("db.drop", schema=TYPES, partition_keys=["dt"],
                                 options={"manifest.delete-file-drop-stats": "true"})
    table.write(type_rows(0, 40))
    table.write(type_rows(40, 35))
    table.compact(full=True)
    assert assert_reads_match(table, java_oracle, tmp_path) == 3
    cutoff = BASE_TIME + datetime.timedelta(hours=20)
    with pytest.raises(AssertionError, match="ArrayIndexOutOfBoundsException"):
        java_oracle.run(tmp_path, [{"op": "read", "table": "db.drop", "filter": [["ts6", "<", cutoff.isoformat()]]}])
    assert table.read(filter=[("ts6", "<", cutoff)]).num_rows == 16


@pytest.mark.parametrize("file_format", ["parquet", "orc"])
def test_we_read_every_type_java_writes(tmp_path: Path, java_oracle: JavaOracle, file_format: str) -> None:
    data = pa.concat_tables([type_rows(0, 40), type_rows(40, 20)])
    java_oracle.run(tmp_path, [
        {"op": "create_database", "name": "db"},
        {"op": "create_table", "table": "db.types", "schema": java_oracle.save(TYPES.empty_table()),
         "partition_keys": ["dt"], "options": {"file.format": file_format, "metadata.stats-mode": "full"}},
        {"op": "write", "table": "db.types", "data": java_oracle.save(data.slice(0, 40))},
        {"op": "write", "table": "db.types", "data": java_oracle.save(data.slice(40))}])
    table = pc.Catalog(str(tmp_path)).get_table("db.types")
    assert_same_rows(table.read(), data, "our read of Java's table")
    assert_reads_match(table, java_oracle, tmp_path)
    assert_same_rows(table.read(filter=[("id", ">=", 45)]), data.filter(pa.compute.field("id") >= 45), "filter")
    # and our writes on top of Java's files, read back by Java
    table.write(type_rows(60, 15))
    assert assert_reads_match(table, java_oracle, tmp_path) == 3


@pytest.mark.parametrize("file_format", ["parquet", "orc"])
def test_nanosecond_timestamps_both_ways(tmp_path: Path, java_oracle: JavaOracle, file_format: str) -> None:
    """TIMESTAMP(9) (and WITH LOCAL TIME ZONE) as Java stores them: INT96 in Parquet."""
    schema = pa.schema([f for f in NANOS if f.name != "ts6"])
    catalog = pc.Catalog(str(tmp_path))
    catalog.create_database("db")
    ours = catalog.create_table("db.ours", schema=schema, primary_keys=["id"],
                                options={"file.format": file_format, "bucket": "2"})
    ours.write(nanos_rows(0, 30).select(schema.names))
    assert_same_rows(ours.read(), nanos_rows(0, 30).select(schema.names), "our read")
    assert_reads_match(ours, java_oracle, tmp_path)
    if file_format == "parquet":
        for f in ours.files():
            path = f"{ours.uri}/bucket-{f.bucket}/{f.file_name}"
            types = {c.name: c.physical_type for c in pq.ParquetFile(path).schema}
            assert types["ts9"] == types["ltz9"] == "INT96", types
    java_oracle.run(tmp_path, [
        {"op": "create_table", "table": "db.java", "schema": java_oracle.save(schema.empty_table()),
         "primary_keys": ["id"], "options": {"file.format": file_format, "bucket": "2"}},
        {"op": "write", "table": "db.java", "data": java_oracle.save(nanos_rows(0, 30).select(schema.names))}])
    theirs = catalog.get_table("db.java")
    assert_same_rows(theirs.read(), nanos_rows(0, 30).select(schema.names), "our read of Java's INT96")
    theirs.write(nanos_rows(20, 20).select(schema.names))
    assert_reads_match(theirs, java_oracle, tmp_path)
    value = nanos_rows(0, 30).column("ts9")[7]
    assert theirs.read(filter=[("ts9", "=", value)])["id"].to_pylist() == [7]


def test_mixed_precision_timestamps_need_paimon_2(tmp_path: Path, java_oracle: JavaOracle) -> None:
    """A Parquet file cannot mix INT96 (TIMESTAMP(7..9)) and INT64 timestamps through pyarrow, so a
    table with both keeps INT64 NANOS for the fine ones: Paimon 2.0 reads that (and ORC always
    works); 0.9 .. 1.4 refuse with Java's own message."""
    catalog = pc.Catalog(str(tmp_path))
    catalog.create_database("db")
    parquet = catalog.create_table("db.mixed", schema=NANOS)
    parquet.write(nanos_rows(0, 10))
    with pytest.raises(AssertionError, match="Unexpected type: INT64"):
        java_oracle.run(tmp_path, [{"op": "read", "table": "db.mixed"}])
    orc_table = catalog.create_table("db.mixed_orc", schema=NANOS, options={"file.format": "orc"})
    orc_table.write(nanos_rows(0, 10))
    assert_reads_match(orc_table, java_oracle, tmp_path)


@pytest.mark.parametrize("precision", range(10))
def test_every_timestamp_precision_java_declares(tmp_path: Path, java_oracle: JavaOracle, precision: int) -> None:
    """TIMESTAMP(p) and TIMESTAMP(p) WITH LOCAL TIME ZONE for p in 0..9 (Java creates the table, both
    write, both read): values are truncated to the precision on both sides."""
    unit = "s" if precision == 0 else "ms" if precision <= 3 else "us" if precision <= 6 else "ns"
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("ts", pa.timestamp(unit)),
                        ("ltz", pa.timestamp(unit, tz="UTC"))])
    step = 10 ** (9 - precision)
    base = pa.scalar(BASE_TIME, pa.timestamp("us")).cast(pa.timestamp("ns")).value
    values = [(base + i * 987_654_321) // step * step for i in range(12)]

    def data(start: int) -> pa.Table:
        raw = pa.array([v + start * 1_000_000_000 for v in values], pa.timestamp("ns"))
        return pa.table({"id": [start + i for i in range(12)], "ts": raw.cast(pa.timestamp(unit)),
                         "ltz": raw.cast(pa.timestamp(unit)).cast(pa.timestamp(unit, tz="UTC"))}, schema=schema)

    java_oracle.run(tmp_path, [
        {"op": "create_database", "name": "db"},
        {"op": "create_table", "table": "db.ts", "primary_keys": ["id"], "options": {"bucket": "1"},
         "fields": [{"name": "id", "type": "BIGINT NOT NULL"}, {"name": "ts", "type": f"TIMESTAMP({precision})"},
                    {"name": "ltz", "type": f"TIMESTAMP({precision}) WITH LOCAL TIME ZONE"}]},
        {"op": "write", "table": "db.ts", "data": java_oracle.save(data(0))}])
    table = pc.Catalog(str(tmp_path)).get_table("db.ts")
    assert str(table.schema.fields[1].type) == f"TIMESTAMP({precision})"
    assert_same_rows(table.read(), data(0), f"TIMESTAMP({precision}) written by Java")
    table.write(data(100))
    assert_same_rows(table.read(), pa.concat_tables([data(0), data(100)]), "both writes")
    assert_reads_match(table, java_oracle, tmp_path)


EVERY_DECIMAL = pa.schema([pa.field("id", pa.int64(), nullable=False),
                           *[(f"d{p}", pa.decimal128(p, p // 3)) for p in range(1, 39)]])


def every_decimal_rows(start: int, count: int) -> pa.Table:
    columns: dict[str, Any] = {"id": list(range(start, start + count))}
    for p in range(1, 39):
        columns[f"d{p}"] = decimal_values(p, p // 3, count)
    return pa.table(columns, schema=EVERY_DECIMAL)


@pytest.mark.parametrize("file_format", ["parquet", "orc"])
def test_every_decimal_precision_both_ways(tmp_path: Path, java_oracle: JavaOracle, file_format: str) -> None:
    """DECIMAL(1..38): INT32 / INT64 / fixed-length bytes by precision, as primary key values and stats."""
    options = {"file.format": file_format, "bucket": "2", "metadata.stats-mode": "full"}
    catalog = pc.Catalog(str(tmp_path))
    catalog.create_database("db")
    ours = catalog.create_table("db.ours", schema=EVERY_DECIMAL, primary_keys=["id"], options=options)
    ours.write(every_decimal_rows(0, 20))
    ours.write(every_decimal_rows(10, 20))
    assert_reads_match(ours, java_oracle, tmp_path)
    java_oracle.run(tmp_path, [
        {"op": "create_table", "table": "db.java", "schema": java_oracle.save(EVERY_DECIMAL.empty_table()),
         "primary_keys": ["id"], "options": options},
        {"op": "write", "table": "db.java", "data": java_oracle.save(every_decimal_rows(0, 20))}])
    theirs = catalog.get_table("db.java")
    assert_same_rows(theirs.read(), every_decimal_rows(0, 20), "our read of Java's decimals")
    theirs.write(every_decimal_rows(10, 20))
    assert_reads_match(theirs, java_oracle, tmp_path)
    top = every_decimal_rows(0, 20).column("d38")[2].as_py()
    matching = theirs.read().filter(pa.compute.field("d38") == top)
    assert matching.num_rows >= 1 and sorted(theirs.read(filter=[("d38", "=", top)])["id"].to_pylist()) == sorted(
        matching["id"].to_pylist())
