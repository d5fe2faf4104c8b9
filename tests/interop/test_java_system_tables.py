"""System tables against Java Paimon 0.9: Java reads ``db.t$files`` (and the others it has) through
its catalog, on tables we wrote and on tables it wrote, and shows what ``Table.system`` shows."""

from __future__ import annotations

import datetime as dt
import decimal
import itertools
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import paimon_core as pc
from paimon_core.schema import AddColumn
from tests.interop.conftest import JavaOracle
from tests.interop.java_support import assert_same_rows

pytestmark = pytest.mark.interop

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("name", pa.string()), ("amount", pa.float64()),
                    pa.field("dt", pa.string(), nullable=False)])
# $buckets is not one of Java 0.9's system tables (it came later)
JAVA_TABLES = ("snapshots", "schemas", "options", "manifests", "files", "partitions", "tags", "consumers",
               "audit_log")
TRAVELLING = ("manifests", "files", "audit_log")
_OUTS = itertools.count()


def batch(ids: list[int], day: str, name: str = "n") -> pa.Table:
    return pa.table({"id": ids, "name": [f"{name}{i}" for i in ids], "amount": [i * 1.25 for i in ids],
                     "dt": [day] * len(ids)}, schema=SCHEMA)


def _normalized(table: pa.Table, name: str) -> pa.Table:
    """JSON columns compared as JSON (Java's map order is its own)."""
    if name != "schemas":
        return table
    canonical = [json.dumps(json.loads(v), sort_keys=True) for v in table.column("options").to_pylist()]
    return table.set_column(table.schema.get_field_index("options"), "options", pa.array(canonical, pa.string()))


def java_system_tables(java: JavaOracle, warehouse: Path, table: str,
                       reads: list[tuple[str, int | None]]) -> dict[tuple[str, int | None], pa.Table]:
    outs = {key: str(java.workdir / f"system-{next(_OUTS)}.arrow") for key in reads}
    java.run(warehouse, [{"op": "system_table", "table": table, "name": name, "snapshot_id": sid, "out": out}
                         for (name, sid), out in outs.items()])
    return {key: java.load(out) for key, out in outs.items()}


def assert_system_tables_match(table: pc.Table, java: JavaOracle, warehouse: Path, travel_to: int) -> int:
    """Every system table Java 0.9 has, latest and (where it travels) at ``travel_to``: the same
    columns in the same order, and the same rows."""
    reads: list[tuple[str, int | None]] = [(n, None) for n in JAVA_TABLES] + [(n, travel_to) for n in TRAVELLING]
    theirs = java_system_tables(java, warehouse, table.name, reads)
    for (name, sid), java_table in theirs.items():
        ours = table.system(name, snapshot_id=sid)
        what = f"{table.name}${name}" + (f" at snapshot {sid}" if sid is not None else "")
        assert ours.schema.names == java_table.schema.names, what
        assert ours.num_rows > 0, what
        assert_same_rows(_normalized(ours, name), _normalized(java_table, name), what)
    return len(theirs)


def test_java_shows_our_tables_system_tables_as_we_do(tmp_path: Path, java_oracle: JavaOracle) -> None:
    catalog = pc.Catalog(str(tmp_path))
    catalog.create_database("db")
    table = catalog.create_table("db.t", schema=SCHEMA, primary_keys=["dt", "id"], partition_keys=["dt"],
                                 options={"bucket": "2"})
    table.write(pa.concat_tables([batch(list(range(1, 9)), "2024-01-01"), batch(list(range(9, 15)), "2024-01-02")]))
    first = table.write(batch([2, 3], "2024-01-01", "upd"), row_kind="+U")
    table.write(batch([4], "2024-01-01", "old"), row_kind="-U")
    table.delete(pa.table({"id": [10], "dt": ["2024-01-02"]}))
    assert first is not None
    table.create_tag("kept", first, time_retained_s=7200)
    for _ in table.stream("latest-full", consumer_id="job", until_latest=True, poll_interval_s=0):
        pass
    latest = table.latest_snapshot()
    assert latest is not None
    travel_to = latest.id
    table.alter([AddColumn("note", pa.int32())])
    table.write(batch([30], "2024-01-01").append_column("note", pa.array([1], pa.int32())))
    table.compact({"dt": "2024-01-02"}, full=True)
    assert assert_system_tables_match(table, java_oracle, tmp_path, travel_to) == len(JAVA_TABLES) + len(TRAVELLING)
    assert table.system("partitions").num_rows == 2


def test_we_show_javas_tables_system_tables_as_java_does(tmp_path: Path, java_oracle: JavaOracle) -> None:
    steps: list[dict[str, Any]] = [
        {"op": "create_database", "name": "db"},
        {"op": "create_table", "table": "db.t", "schema": java_oracle.save(SCHEMA.empty_table()),
         "primary_keys": ["dt", "id"], "partition_keys": ["dt"], "options": {"bucket": "2"}},
        {"op": "write", "table": "db.t", "data": java_oracle.save(batch(list(range(1, 11)), "2024-01-01"))},
        {"op": "write", "table": "db.t", "data": java_oracle.save(batch(list(range(11, 15)), "2024-01-02"))},
        {"op": "create_tag", "table": "db.t", "name": "second"},
        {"op": "write", "table": "db.t", "data": java_oracle.save(batch([1, 12], "2024-01-01", "again"))},
        {"op": "compact", "table": "db.t"},
        {"op": "write", "table": "db.t", "data": java_oracle.save(batch([5], "2024-01-01", "last"))},
    ]
    java_oracle.run(tmp_path, steps)
    table = pc.Catalog(str(tmp_path)).get_table("db.t")
    for _ in table.stream("latest-full", consumer_id="job", until_latest=True, poll_interval_s=0):
        pass
    assert assert_system_tables_match(table, java_oracle, tmp_path, travel_to=2) == len(JAVA_TABLES) + len(TRAVELLING)


def test_values_print_as_java_prints_them_in_files_and_partitions(tmp_path: Path, java_oracle: JavaOracle) -> None:
    """Partition values and statistics of many types (DATE prints its day number in 0.9,
    DECIMAL its plain string, TIMESTAMP its LocalDateTime, FLOAT Float.toString)."""
    schema = pa.schema([("day", pa.date32()), ("hour", pa.int32()), ("price", pa.decimal128(10, 3)),
                        ("ratio", pa.float32()), ("big", pa.float64()), ("at", pa.timestamp("us")),
                        ("flag", pa.bool_()), ("label", pa.string())])
    catalog = pc.Catalog(str(tmp_path))
    catalog.create_database("db")
    table = catalog.create_table("db.events", schema=schema, partition_keys=["day", "hour"])
    base = dt.datetime(2024, 3, 1, 12, 30)
    for part in range(3):
        n = 4 + part
        table.write(pa.table({
            "day": [dt.date(2024, 3, 1 + part % 2)] * n, "hour": [part] * n,
            "price": [decimal.Decimal(f"{i}.{part}05") for i in range(n)],
            "ratio": pa.array([0.1 * (i + 1) for i in range(n)], pa.float32()),
            "big": [1.5e10 * (i + 1) if i else None for i in range(n)],
            "at": [base + dt.timedelta(seconds=i, microseconds=part * 1000) for i in range(n)],
            "flag": [bool(i % 2) for i in range(n)], "label": [f"é{i}" for i in range(n)]}, schema=schema))
    names = ("files", "partitions", "manifests", "audit_log", "snapshots")
    theirs = java_system_tables(java_oracle, tmp_path, table.name, [(n, None) for n in names])
    for (name, _), java_table in theirs.items():
        ours = table.system(name)
        assert ours.schema.names == java_table.schema.names, name
        assert ours.num_rows > 0, name
        assert_same_rows(ours, java_table, f"{table.name}${name}")
    assert "[19783, 0]" in table.system("partitions").column("partition").to_pylist()
