"""Paimon's system tables (``Table.system``) on real tables, checked against an independent decoding.

The expectations are computed here from the raw files: snapshot, schema, tag and consumer JSON
with :mod:`json`, manifest lists and manifests with :mod:`fastavro`, data files with
``os.stat`` and Parquet footers and column data; paimon_core's metadata classes are not used.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import fastavro
import pyarrow as pa
import pyarrow.compute as pac
import pyarrow.parquet as pq
import pytest

import paimon_core as pc
from paimon_core.errors import OptionError, SnapshotNotFoundError, SystemTableNotFoundError
from paimon_core.schema import AddColumn
from paimon_core.system import SYSTEM_TABLES
from paimon_core.system.render import java_duration, java_floating, java_local_date_time

ORDERS = pa.schema([pa.field("id", pa.int64(), nullable=False), ("name", pa.string()), ("amount", pa.float64()),
                    pa.field("dt", pa.string(), nullable=False)])
DAY1, DAY2 = "2024-01-01", "2024-01-02"


def orders(ids: list[int], day: str, name: str = "n") -> pa.Table:
    return pa.table({"id": ids, "name": [f"{name}{i}" for i in ids], "amount": [i + 0.5 for i in ids],
                     "dt": [day] * len(ids)}, schema=ORDERS)


@dataclass
class Scenario:
    table: pc.Table
    root: Path
    before_evolution: int  # the last snapshot of schema 0
    compacted: int  # the COMPACT snapshot of DAY2


@pytest.fixture
def scenario(catalog: pc.Catalog) -> Scenario:
    """A partitioned primary-key table with three buckets: inserts, +U, -U and -D rows, two tags,
    a consumer, a schema evolution, then a full compaction of one partition."""
    table = catalog.create_table("db.orders", schema=ORDERS, primary_keys=["dt", "id"], partition_keys=["dt"],
                                 options={"bucket": "3", "file.format": "parquet"})
    table.write(pa.concat_tables([orders(list(range(1, 7)), DAY1), orders(list(range(7, 13)), DAY2)]))
    tagged = table.write(orders([2], DAY1, "upd"), row_kind="+U")
    table.write(orders([4], DAY1, "before"), row_kind="-U")
    table.delete(pa.table({"id": [7], "dt": [DAY2]}))
    table.create_tag("t1", tagged, time_retained_s=5400.5)
    table.create_tag("t2")
    for _ in table.stream("latest-full", consumer_id="reader", until_latest=True, poll_interval_s=0):
        pass
    before = table.latest_snapshot()
    assert before is not None
    table.alter([AddColumn("note", pa.int32())])
    evolved = orders([20], DAY1).append_column("note", pa.array([7], pa.int32()))
    table.write(evolved)
    result = table.compact({"dt": DAY2}, full=True)
    assert result.snapshot_id is not None
    return Scenario(table, Path(table.path), before.id, result.snapshot_id)


# ---- independent decoding -----------------------------------------------------------------------


def read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def snapshot_docs(root: Path) -> list[dict[str, Any]]:
    return sorted((read_json(p) for p in (root / "snapshot").glob("snapshot-*")), key=lambda d: d["id"])


def snapshot_doc(root: Path, snapshot_id: int) -> dict[str, Any]:
    return dict(read_json(root / "snapshot" / f"snapshot-{snapshot_id}"))


def avro(path: Path) -> list[dict[str, Any]]:
    with path.open("rb") as f:
        return [dict(r) for r in fastavro.reader(f)]  # type: ignore[arg-type]


def manifest_list(root: Path, snapshot: dict[str, Any]) -> list[dict[str, Any]]:
    """Base list, then delta list, as the snapshot names them."""
    return [*avro(root / "manifest" / snapshot["baseManifestList"]),
            *avro(root / "manifest" / snapshot["deltaManifestList"])]


def manifest_entries(root: Path, snapshot: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for m in manifest_list(root, snapshot) for e in avro(root / "manifest" / m["_FILE_NAME"])]


def live_entries(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    live: dict[tuple[Any, ...], dict[str, Any]] = {}
    for e in entries:
        key = (e["_PARTITION"], e["_BUCKET"], e["_FILE"]["_LEVEL"], e["_FILE"]["_FILE_NAME"])
        if e["_KIND"] == 0:
            live[key] = e
        else:
            live.pop(key, None)
    return list(live.values())


def data_files(root: Path) -> dict[str, tuple[str, Path]]:
    """Data file name → (Paimon's partition string from its directory, path)."""
    out = {}
    for folder, _, names in os.walk(root):
        rel = Path(folder).relative_to(root).parts
        if not rel or not rel[-1].startswith("bucket-"):
            continue
        values = [part.split("=", 1)[1] for part in rel[:-1]]
        for name in names:
            if name.startswith("data-"):
                out[name] = ("[" + ", ".join(values) + "]", Path(folder) / name)
    return out


def wall(epoch_ms: int) -> dt.datetime:
    """An instant as local wall-clock time (what Paimon's TIMESTAMP(3) columns hold)."""
    return dt.datetime.fromtimestamp(epoch_ms // 1000) + dt.timedelta(milliseconds=epoch_ms % 1000)


def naive(value: dt.datetime | None) -> dt.datetime | None:
    return None if value is None else value.replace(tzinfo=None)


def text(value: Any) -> str:
    """Java's toString of the simple values used here."""
    if value is None:
        return "null"
    return repr(value) if isinstance(value, float) else str(value)


def tree_map(values: dict[str, Any]) -> str:
    return "{" + ", ".join(f"{k}={text(values[k])}" for k in sorted(values)) + "}"


def expected_stats(path: Path, columns: list[str]) -> tuple[str, str, str]:
    """Null counts and min/max of each table column, from the Parquet file's data (a column the
    file lacks counts every row null)."""
    data = pq.read_table(path)
    nulls: dict[str, Any] = {}
    lows: dict[str, Any] = {}
    highs: dict[str, Any] = {}
    for name in columns:
        if name not in data.column_names:
            nulls[name], lows[name], highs[name] = data.num_rows, None, None
            continue
        column = data.column(name)
        bounds = pac.min_max(column).as_py()
        nulls[name], lows[name], highs[name] = column.null_count, bounds["min"], bounds["max"]
    return tree_map(nulls), tree_map(lows), tree_map(highs)


def rows(table: pa.Table) -> list[dict[str, Any]]:
    return table.to_pylist()


# ---- metadata tables ----------------------------------------------------------------------------


def test_snapshots_match_the_snapshot_files(scenario: Scenario) -> None:
    ours = scenario.table.system("$snapshots")
    assert ours.schema.names == ["snapshot_id", "schema_id", "commit_user", "commit_identifier", "commit_kind",
                                 "commit_time", "base_manifest_list", "delta_manifest_list",
                                 "changelog_manifest_list", "total_record_count", "delta_record_count",
                                 "changelog_record_count", "watermark"]
    assert ours.schema.field("commit_time").type == pa.timestamp("ms")
    assert not ours.schema.field("snapshot_id").nullable and ours.schema.field("watermark").nullable
    expected = [{
        "snapshot_id": d["id"], "schema_id": d["schemaId"], "commit_user": d["commitUser"],
        "commit_identifier": d["commitIdentifier"], "commit_kind": d["commitKind"],
        "commit_time": wall(d["timeMillis"]),
        "base_manifest_list": d["baseManifestList"], "delta_manifest_list": d["deltaManifestList"],
        "changelog_manifest_list": d.get("changelogManifestList"), "total_record_count": d.get("totalRecordCount"),
        "delta_record_count": d.get("deltaRecordCount"), "changelog_record_count": d.get("changelogRecordCount"),
        "watermark": d.get("watermark"),
    } for d in snapshot_docs(scenario.root)]
    assert rows(ours) == expected
    assert [r["commit_kind"] for r in expected][-1] == "COMPACT" and len(expected) == scenario.compacted


def test_schemas_and_options_match_the_schema_files(scenario: Scenario) -> None:
    ours = scenario.table.system("schemas")
    assert ours.schema.names == ["schema_id", "fields", "partition_keys", "primary_keys", "options", "comment",
                                 "update_time"]
    docs = sorted((read_json(p) for p in (scenario.root / "schema").glob("schema-*")), key=lambda d: d["id"])
    assert len(docs) == 2
    for row, doc in zip(rows(ours), docs, strict=True):
        assert row["schema_id"] == doc["id"]
        assert json.loads(row["fields"]) == doc["fields"]
        assert " " not in row["partition_keys"] + row["primary_keys"]  # Jackson's compact JSON
        assert json.loads(row["partition_keys"]) == doc["partitionKeys"] == ["dt"]
        assert json.loads(row["primary_keys"]) == doc["primaryKeys"]
        assert json.loads(row["options"]) == doc["options"]
        assert row["comment"] == doc.get("comment")
        assert row["update_time"] == wall(doc["timeMillis"])
    assert [f["name"] for f in json.loads(rows(ours)[-1]["fields"])][-1] == "note"
    options = scenario.table.system("options")
    assert options.schema.names == ["key", "value"]
    assert dict(zip(options.column("key").to_pylist(), options.column("value").to_pylist())) == docs[-1]["options"]


def test_tags_match_the_tag_files(scenario: Scenario) -> None:
    ours = scenario.table.system("tags")
    assert ours.schema.names == ["tag_name", "snapshot_id", "schema_id", "commit_time", "record_count",
                                 "create_time", "time_retained"]
    expected = {}
    for path in (scenario.root / "tag").glob("tag-*"):
        doc = read_json(path)
        y, mo, d, h, mi, s, nanos = doc["tagCreateTime"]
        retained = doc.get("tagTimeRetained")
        expected[path.name[len("tag-"):]] = {
            "snapshot_id": doc["id"], "schema_id": doc["schemaId"], "commit_time": wall(doc["timeMillis"]),
            "record_count": doc["totalRecordCount"],
            "create_time": dt.datetime(y, mo, d, h, mi, s, nanos // 1_000_000 * 1000),
            "time_retained": None if retained is None else float(retained)}
    got = {r.pop("tag_name"): r for r in rows(ours)}
    assert got.keys() == expected.keys() == {"t1", "t2"}
    assert expected["t1"]["time_retained"] == 5400.5 and expected["t2"]["time_retained"] is None
    expected["t1"]["time_retained"] = "PT1H30M0.5S"  # Duration.toString() of 5400.5 s
    assert got == expected


def test_consumers_match_the_consumer_files(scenario: Scenario) -> None:
    ours = scenario.table.system("consumers")
    assert ours.schema.names == ["consumer_id", "next_snapshot_id"]
    expected = {p.name[len("consumer-"):]: read_json(p)["nextSnapshot"]
                for p in (scenario.root / "consumer").glob("consumer-*")}
    assert dict(zip(ours.column("consumer_id").to_pylist(), ours.column("next_snapshot_id").to_pylist())) == expected
    assert expected == {"reader": scenario.before_evolution + 1}


# ---- manifest tables ----------------------------------------------------------------------------


@pytest.mark.parametrize("travel", [False, True])
def test_manifests_match_the_manifest_lists(scenario: Scenario, travel: bool) -> None:
    snapshot_id = scenario.before_evolution if travel else scenario.compacted
    ours = scenario.table.system("manifests", snapshot_id=snapshot_id if travel else None)
    assert ours.schema.names == ["file_name", "file_size", "num_added_files", "num_deleted_files", "schema_id"]
    expected = [{"file_name": m["_FILE_NAME"], "file_size": m["_FILE_SIZE"], "num_added_files": m["_NUM_ADDED_FILES"],
                 "num_deleted_files": m["_NUM_DELETED_FILES"], "schema_id": m["_SCHEMA_ID"]}
                for m in manifest_list(scenario.root, snapshot_doc(scenario.root, snapshot_id))]
    assert rows(ours) == expected
    assert all(os.stat(scenario.root / "manifest" / m["file_name"]).st_size == m["file_size"] for m in expected)
    assert travel or any(m["num_deleted_files"] for m in expected)  # the compaction deleted files


def expected_files(scenario: Scenario, snapshot_id: int, columns: list[str]) -> list[dict[str, Any]]:
    located = data_files(scenario.root)
    out = []
    for entry in live_entries(manifest_entries(scenario.root, snapshot_doc(scenario.root, snapshot_id))):
        meta = entry["_FILE"]
        partition, path = located[meta["_FILE_NAME"]]
        keys = pq.read_table(path, columns=["_KEY_id"]).column(0)
        nulls, lows, highs = expected_stats(path, columns)
        out.append({
            "partition": partition, "bucket": entry["_BUCKET"], "file_path": meta["_FILE_NAME"],
            "file_format": "parquet", "schema_id": meta["_SCHEMA_ID"], "level": meta["_LEVEL"],
            "record_count": pq.ParquetFile(path).metadata.num_rows, "file_size_in_bytes": os.stat(path).st_size,
            "min_key": f"[{pac.min(keys).as_py()}]", "max_key": f"[{pac.max(keys).as_py()}]",
            "null_value_counts": nulls, "min_value_stats": lows, "max_value_stats": highs,
            "min_sequence_number": meta["_MIN_SEQUENCE_NUMBER"], "max_sequence_number": meta["_MAX_SEQUENCE_NUMBER"],
            "creation_time": naive(meta["_CREATION_TIME"]),
        })
    return out


def by_file(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {r["file_path"]: r for r in records}


def test_files_match_manifests_and_data_files(scenario: Scenario) -> None:
    ours = scenario.table.system("files")
    assert ours.schema.names == ["partition", "bucket", "file_path", "file_format", "schema_id", "level",
                                 "record_count", "file_size_in_bytes", "min_key", "max_key", "null_value_counts",
                                 "min_value_stats", "max_value_stats", "min_sequence_number",
                                 "max_sequence_number", "creation_time"]
    assert ours.schema.field("bucket").type == pa.int32() and ours.schema.field("level").type == pa.int32()
    expected = expected_files(scenario, scenario.compacted, ["id", "name", "amount", "dt", "note"])
    assert ours.num_rows == len(expected)
    assert by_file(rows(ours)) == by_file(expected)
    # the evolution shows: files written before "note" existed count all their rows null in it
    old = [r for r in expected if r["schema_id"] == 0]
    assert old and all(f"note={r['record_count']}" in r["null_value_counts"] for r in old)
    assert {r["partition"] for r in expected} == {f"[{DAY1}]", f"[{DAY2}]"}
    assert {r["level"] for r in expected if r["partition"] == f"[{DAY2}]"} == {5}


def test_files_travel_to_a_snapshot_in_its_schema(scenario: Scenario) -> None:
    ours = scenario.table.system("files", snapshot_id=scenario.before_evolution)
    expected = expected_files(scenario, scenario.before_evolution, ["id", "name", "amount", "dt"])
    assert by_file(rows(ours)) == by_file(expected)
    assert all("note" not in r["null_value_counts"] for r in rows(ours))


def expected_totals(scenario: Scenario, snapshot_id: int, per_bucket: bool) -> dict[tuple[Any, ...], dict[str, Any]]:
    """Signed sums over every manifest entry (ADD up, DELETE down) and the newest creation time of
    any entry, per partition (or bucket), keeping those with files: Paimon's PartitionEntry."""
    located = data_files(scenario.root)
    entries = manifest_entries(scenario.root, snapshot_doc(scenario.root, snapshot_id))
    names = {e["_PARTITION"]: located[e["_FILE"]["_FILE_NAME"]][0] for e in live_entries(entries)}
    totals: dict[tuple[Any, ...], dict[str, Any]] = {}
    for e in entries:
        key = (names[e["_PARTITION"]], e["_BUCKET"]) if per_bucket else (names[e["_PARTITION"]],)
        sign = -1 if e["_KIND"] == 1 else 1
        t = totals.setdefault(key, {"record_count": 0, "file_size_in_bytes": 0, "file_count": 0,
                                    "last_update_time": None})
        t["record_count"] += sign * e["_FILE"]["_ROW_COUNT"]
        t["file_size_in_bytes"] += sign * e["_FILE"]["_FILE_SIZE"]
        t["file_count"] += sign
        created = naive(e["_FILE"]["_CREATION_TIME"])
        t["last_update_time"] = max(filter(None, [t["last_update_time"], created]), default=None)
    # cross-check against the data files themselves
    live = live_entries(entries)
    for key, t in totals.items():
        mine = [located[e["_FILE"]["_FILE_NAME"]][1] for e in live
                if (names[e["_PARTITION"]], e["_BUCKET"])[:len(key)] == key]
        assert t["file_count"] == len(mine)
        assert t["record_count"] == sum(pq.ParquetFile(p).metadata.num_rows for p in mine)
        assert t["file_size_in_bytes"] == sum(os.stat(p).st_size for p in mine)
    return {k: t for k, t in totals.items() if t["file_count"] > 0}


@pytest.mark.parametrize("travel", [False, True])
def test_partitions_match_manifest_entries(scenario: Scenario, travel: bool) -> None:
    snapshot_id = scenario.before_evolution if travel else scenario.compacted
    ours = scenario.table.system("partitions", snapshot_id=snapshot_id if travel else None)
    assert ours.schema.names == ["partition", "record_count", "file_size_in_bytes", "file_count", "last_update_time"]
    got = {(r.pop("partition"),): r for r in rows(ours)}
    assert got == expected_totals(scenario, snapshot_id, per_bucket=False)
    assert list(got) == sorted(got)


def test_buckets_match_manifest_entries(scenario: Scenario) -> None:
    ours = scenario.table.system("buckets")
    assert ours.schema.names == ["partition", "bucket", "record_count", "file_size_in_bytes", "file_count",
                                 "last_update_time"]
    got = {(r.pop("partition"), r.pop("bucket")): r for r in rows(ours)}
    expected = expected_totals(scenario, scenario.compacted, per_bucket=True)
    assert got == expected
    assert len({b for _, b in got}) > 1  # several buckets are in use


# ---- audit log ------------------------------------------------------------------------------------


def audit_rows(table: pa.Table) -> Counter[tuple[Any, ...]]:
    return Counter(tuple(r.values()) for r in table.to_pylist())


def test_audit_log_keeps_the_kind_of_each_merged_row(scenario: Scenario) -> None:
    before = scenario.table.system("audit_log", snapshot_id=scenario.before_evolution)
    assert before.schema.names == ["rowkind", "id", "name", "amount", "dt"]
    expected: Counter[tuple[Any, ...]] = Counter({("+I", i, f"n{i}", i + 0.5, DAY1 if i < 7 else DAY2): 1
                                                  for i in range(1, 13) if i not in (2, 4, 7)})
    expected[("+U", 2, "upd2", 2.5, DAY1)] += 1
    expected[("-U", 4, "before4", 4.5, DAY1)] += 1
    expected[("-D", 7, None, None, DAY2)] += 1
    assert audit_rows(before) == expected
    latest = scenario.table.system("audit_log")
    assert latest.schema.names == ["rowkind", "id", "name", "amount", "dt", "note"]
    # DAY2 was fully compacted: the delete is gone there; DAY1 still merges its retractions
    expected_latest: Counter[tuple[Any, ...]] = Counter({(*k, None): n for k, n in expected.items() if k[0] != "-D"})
    expected_latest[("+I", 20, "n20", 20.5, DAY1, 7)] += 1
    assert audit_rows(latest) == expected_latest
    inserts = latest.filter(pac.is_in(latest.column("rowkind"), pa.array(["+I", "+U"]))).drop_columns(["rowkind"])
    assert audit_rows(inserts) == audit_rows(scenario.table.read())


def test_append_table(catalog: pc.Catalog) -> None:
    schema = pa.schema([("seq", pa.int64()), ("msg", pa.string())])
    table = catalog.create_table("db.logs", schema=schema)
    table.write(pa.table({"seq": [1, 2, 3], "msg": ["a", None, "c"]}, schema=schema))
    table.write(pa.table({"seq": [4], "msg": ["d"]}, schema=schema))
    root = Path(table.path)
    audit = table.system("audit_log")
    assert audit.schema.names == ["rowkind", "seq", "msg"]
    assert audit_rows(audit) == Counter(("+I", *r.values()) for r in table.read().to_pylist())
    located = data_files(root)
    latest = snapshot_docs(root)[-1]
    files = by_file(rows(table.system("files")))
    live = live_entries(manifest_entries(root, latest))
    assert files.keys() == {e["_FILE"]["_FILE_NAME"] for e in live} and len(files) == 2
    for name, row in files.items():
        partition, path = located[name]
        nulls, lows, highs = expected_stats(path, ["seq", "msg"])
        assert (row["partition"], row["min_key"], row["max_key"]) == ("[]", None, None) == (partition, None, None)
        assert (row["null_value_counts"], row["min_value_stats"], row["max_value_stats"]) == (nulls, lows, highs)
        assert row["file_size_in_bytes"] == os.stat(path).st_size
        assert row["record_count"] == pq.ParquetFile(path).metadata.num_rows
    [whole] = rows(table.system("partitions"))
    assert whole["partition"] == "[]" and whole["record_count"] == 4 and whole["file_count"] == 2
    assert whole["file_size_in_bytes"] == sum(os.stat(p).st_size for _, p in located.values())


# ---- names, errors, empty tables ------------------------------------------------------------------


def test_unknown_name_is_a_typed_error(scenario: Scenario) -> None:
    with pytest.raises(SystemTableNotFoundError) as caught:
        scenario.table.system("$snapshot")
    message = str(caught.value)
    assert "db.orders" in message and "'$snapshot'" in message
    assert all(f"${name}" in message for name in SYSTEM_TABLES)
    assert isinstance(caught.value, LookupError) and isinstance(caught.value, pc.PaimonError)
    assert scenario.table.system("FILES").num_rows == scenario.table.system("$files").num_rows > 0


def test_snapshot_id_only_where_paimon_travels(scenario: Scenario) -> None:
    with pytest.raises(OptionError, match=r"\$snapshots.*db\.orders"):
        scenario.table.system("snapshots", snapshot_id=1)
    with pytest.raises(SnapshotNotFoundError):
        scenario.table.system("files", snapshot_id=999)


def test_empty_table_gives_empty_tables_with_the_columns(catalog: pc.Catalog) -> None:
    table = catalog.create_table("db.empty", schema=ORDERS, primary_keys=["id"], options={"bucket": "2"})
    shapes = {name: table.system(name) for name in SYSTEM_TABLES}
    assert {n for n, t in shapes.items() if t.num_rows} == {"schemas", "options"}
    assert shapes["audit_log"].schema.names == ["rowkind", *ORDERS.names]
    assert shapes["files"].num_columns == 16 and shapes["partitions"].num_columns == 5


# ---- Java's spelling of values --------------------------------------------------------------------


def _java_cases() -> Iterator[tuple[str, str]]:
    # (ours, what Java prints): Double/Float.toString, Duration.toString, LocalDateTime.toString
    yield java_floating(1.0, single=False), "1.0"
    yield java_floating(1e7, single=False), "1.0E7"
    yield java_floating(1.0e-4, single=False), "1.0E-4"
    yield java_floating(0.001, single=False), "0.001"
    yield java_floating(123456.789, single=False), "123456.789"
    yield java_floating(-0.0, single=False), "-0.0"
    yield java_floating(0.1, single=True), "0.1"
    yield java_floating(float(pa.scalar(0.1, pa.float32()).as_py()), single=False), "0.10000000149011612"
    yield java_floating(1.0e10, single=True), "1.0E10"
    yield str(java_duration(0)), "PT0S"
    yield str(java_duration(3600)), "PT1H"
    yield str(java_duration(90000)), "PT25H"
    yield str(java_duration(-90)), "PT-1M-30S"
    yield str(java_duration(-0.5)), "PT-0.5S"
    yield str(java_duration("86400.000000000")), "PT24H"
    yield java_local_date_time(1_704_103_200 * 10**9), "2024-01-01T10:00"
    yield java_local_date_time(1_704_103_201 * 10**9), "2024-01-01T10:00:01"
    yield java_local_date_time(1_704_103_200 * 10**9 + 100_000_000), "2024-01-01T10:00:00.100"
    yield java_local_date_time(1_704_103_200 * 10**9 + 1_000), "2024-01-01T10:00:00.000001"
    yield java_local_date_time(1_704_103_200 * 10**9 + 1), "2024-01-01T10:00:00.000000001"


@pytest.mark.parametrize(("ours", "java"), list(_java_cases()))
def test_values_print_as_java_prints_them(ours: str, java: str) -> None:
    assert ours == java
