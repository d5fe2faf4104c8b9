"""Primary-key tables round-trip with pypaimon 2.1.0 in both directions, at every snapshot."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import paimon_core as pc
from tests.integration.conftest import merged_view
from tests.interop.conftest import Oracle

pytestmark = pytest.mark.interop

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string()), ("n", pa.int64()),
                    ("flag", pa.bool_()), ("rk", pa.string())])
PARTITIONED = pa.schema([pa.field("dt", pa.string(), nullable=False), *SCHEMA])


def rows(ids: list[int], kinds: list[str], *, v: str = "v", dt: str | None = None,
         schema: pa.Schema = SCHEMA) -> pa.Table:
    data: dict[str, Any] = {"id": ids, "v": [f"{v}{i}" if i % 4 else None for i in ids],
                            "n": [i * 10 for i in ids], "flag": [i % 2 == 0 for i in ids], "rk": kinds}
    if dt is not None:
        data = {"dt": [dt] * len(ids), **data}
    return pa.table(data, schema=schema)


def canonical(table: pa.Table) -> list[dict[str, Any]]:
    keys = [k for k in ("dt", "id") if k in table.column_names]
    return table.sort_by([(k, "ascending") for k in keys]).to_pylist() if table.num_rows else []


def assert_every_snapshot_matches(table: pc.Table, oracle: Oracle, warehouse: Path,
                                  options: dict[str, str] | None = None) -> None:
    ids = [s.id for s in table.snapshots()]
    assert ids
    theirs = oracle.read_snapshots(warehouse, table.name, ids, options=options or {})
    for sid in ids:
        assert canonical(table.read(snapshot_id=sid)) == canonical(theirs[sid]), f"snapshot {sid} differs"


DEDUP_COMMITS = [
    (list(range(10)), ["+I"] * 10),
    ([1, 2, 2, 3, 4, 40], ["-U", "+U", "-U", "+U", "-D", "-D"]),          # updates, delete, delete of a missing key
    ([2, 5, 5, 6, 7, 7], ["+U", "+I", "-D", "+I", "-D", "+I"]),           # several versions within one commit
]


def test_deduplicate_written_by_us_read_by_pypaimon(tmp_path: Path, oracle: Oracle) -> None:
    catalog = pc.Catalog(str(tmp_path))
    catalog.create_database("db")
    table = catalog.create_table("db.t", schema=SCHEMA, primary_keys=["id"],
                                 options={"bucket": "2", "rowkind.field": "rk"})
    for i, (ids, kinds) in enumerate(DEDUP_COMMITS):
        table.write(rows(ids, kinds, v=f"c{i}-"))
    final = {r["id"]: r for r in table.read().to_pylist()}
    assert sorted(final) == [0, 2, 3, 6, 7, 8, 9]  # a newest -U or -D removes the key
    assert final[2]["v"] == "c2-2" and final[7]["v"] == "c2-7" and final[3]["v"] == "c1-3"
    assert all(f.level == 0 for f in table.files())
    assert_every_snapshot_matches(table, oracle, tmp_path)


def test_deduplicate_written_by_pypaimon_read_by_us(tmp_path: Path, oracle: Oracle) -> None:
    steps: list[dict[str, Any]] = [
        {"op": "create_database", "name": "db"},
        {"op": "create_table", "table": "db.t", "schema": oracle.save(SCHEMA.empty_table()),
         "primary_keys": ["id"], "options": {"bucket": "2", "rowkind.field": "rk"}}]
    for i, (ids, kinds) in enumerate(DEDUP_COMMITS):
        steps.append({"op": "write", "table": "db.t", "data": oracle.save(rows(ids, kinds, v=f"c{i}-"))})
    oracle.run(tmp_path, steps)
    table = pc.Catalog(str(tmp_path)).get_table("db.t")
    assert_every_snapshot_matches(table, oracle, tmp_path)
    table.write(rows([3, 11], ["+U", "+I"], v="ours-"))  # we continue pypaimon's sequence numbers
    assert {r["id"]: r["v"] for r in table.read().to_pylist()}[3] == "ours-3"
    assert_every_snapshot_matches(table, oracle, tmp_path)


@pytest.mark.parametrize("writer", ["us", "pypaimon"])
def test_partitioned_partial_update(tmp_path: Path, oracle: Oracle, writer: str) -> None:
    options = {"bucket": "2", "merge-engine": "partial-update"}
    first = rows([1, 2, 3], ["+I"] * 3, dt="d1", schema=PARTITIONED)
    second = pa.table({"dt": ["d1", "d1", "d2"], "id": [1, 2, 1], "v": [None, "new", "other"],
                       "n": [100, None, 7], "flag": [None, None, True], "rk": [None, None, None]},
                      schema=PARTITIONED)
    table = _create_and_write(tmp_path, oracle, writer, "db.pu", PARTITIONED, ["dt", "id"], ["dt"],
                              options, [first, second])
    final = {(r["dt"], r["id"]): r for r in table.read().to_pylist()}
    assert final[("d1", 1)]["v"] == "v1" and final[("d1", 1)]["n"] == 100
    assert final[("d1", 2)]["v"] == "new" and final[("d1", 2)]["n"] == 20
    assert_every_snapshot_matches(table, oracle, tmp_path)


@pytest.mark.parametrize("writer", ["us", "pypaimon"])
def test_aggregation(tmp_path: Path, oracle: Oracle, writer: str) -> None:
    options = {"bucket": "1", "merge-engine": "aggregation", "fields.n.aggregate-function": "sum",
               "fields.v.aggregate-function": "listagg", "fields.flag.aggregate-function": "bool_or"}
    batches = [rows([1, 2, 3], ["+I"] * 3), rows([1, 2, 2], ["+I"] * 3, v="w"), rows([3, 1], ["+I"] * 2, v="x")]
    table = _create_and_write(tmp_path, oracle, writer, "db.agg", SCHEMA, ["id"], [], options, batches)
    final = {r["id"]: r for r in table.read().to_pylist()}
    assert final[1]["n"] == 30 and final[1]["v"] == "v1,w1,x1" and final[2]["n"] == 60
    assert_every_snapshot_matches(table, oracle, tmp_path)


@pytest.mark.parametrize("writer", ["us", "pypaimon"])
def test_aggregation_max_min_last_non_null(tmp_path: Path, oracle: Oracle, writer: str) -> None:
    options = {"bucket": "2", "merge-engine": "aggregation", "fields.n.aggregate-function": "max",
               "fields.v.aggregate-function": "min", "fields.flag.aggregate-function": "last_non_null_value"}
    batches = [rows([1, 2, 3, 5], ["+I"] * 4, v="b"), rows([1, 2, 5], ["+I"] * 3, v="a"),
               rows([1, 3], ["+I"] * 2, v="c")]
    table = _create_and_write(tmp_path, oracle, writer, "db.agg2", SCHEMA, ["id"], [], options, batches)
    assert {r["id"]: r["v"] for r in table.read().to_pylist()}[1] == "a1"
    assert_every_snapshot_matches(table, oracle, tmp_path)


@pytest.mark.parametrize("writer", ["us", "pypaimon"])
def test_first_row(tmp_path: Path, oracle: Oracle, writer: str) -> None:
    options = {"bucket": "2", "merge-engine": "first-row"}
    batches = [rows([1, 2], ["+I"] * 2, v="first"), rows([2, 3], ["+I"] * 2, v="second")]
    table = _create_and_write(tmp_path, oracle, writer, "db.fr", SCHEMA, ["id"], [], options, batches)
    merged = {r["id"]: r["v"] for r in merged_view(table).to_pylist()}
    assert merged == {1: "first1", 2: "first2", 3: "second3"}
    assert_every_snapshot_matches(table, oracle, tmp_path)  # level 0 left out by both batch reads
    if writer == "pypaimon":  # its writer does not compact: everything is still in level 0
        assert table.read().num_rows == 0
        table.compact()
    assert {r["id"]: r["v"] for r in table.read().to_pylist()} == merged
    assert_every_snapshot_matches(table, oracle, tmp_path)


@pytest.mark.parametrize("writer", ["us", "pypaimon"])
def test_dynamic_bucket(tmp_path: Path, oracle: Oracle, writer: str) -> None:
    options = {"bucket": "-1", "dynamic-bucket.target-row-num": "3"}
    batches = [rows(list(range(8)), ["+I"] * 8, dt="d1", schema=PARTITIONED),
               rows([1, 9, 10, 11], ["+I"] * 4, v="u", dt="d1", schema=PARTITIONED),
               rows([0, 1], ["+I"] * 2, v="z", dt="d2", schema=PARTITIONED)]
    table = _create_and_write(tmp_path, oracle, writer, "db.dyn", PARTITIONED, ["dt", "id"], ["dt"],
                              options, batches)
    assert table.read().num_rows == 13
    assert_every_snapshot_matches(table, oracle, tmp_path)
    # whoever wrote the index, the other side extends it without moving keys
    table.write(rows([2, 12], ["+I"] * 2, v="next", dt="d1", schema=PARTITIONED))
    placement = {}
    for split in table.plan(filter=[("dt", "=", "d1")]):
        for key in table.read_split(split, columns=["id"])["id"].to_pylist():
            assert key not in placement, f"key {key} is in two buckets"
            placement[key] = split.bucket
    assert len(placement) == 12 and max(placement.values()) == 3  # 12 keys at 3 per bucket
    assert_every_snapshot_matches(table, oracle, tmp_path)


def test_fixed_bucket_placement_of_keys_matches(tmp_path: Path, oracle: Oracle) -> None:
    batch = rows(list(range(40)), ["+I"] * 40, dt="d1", schema=PARTITIONED)
    ours = _create_and_write(tmp_path, oracle, "us", "db.ours", PARTITIONED, ["dt", "id"], ["dt"],
                             {"bucket": "3"}, [batch])
    _create_and_write(tmp_path, oracle, "pypaimon", "db.theirs", PARTITIONED, ["dt", "id"], ["dt"],
                      {"bucket": "3"}, [batch])
    (theirs,) = oracle.run(tmp_path, [{"op": "placement", "table": "db.theirs", "column": "id"}])
    mine = {split.bucket: sorted(ours.read_split(split, columns=["id"])["id"].to_pylist()) for split in ours.plan()}
    assert mine == {p["bucket"]: p["values"] for p in theirs}


def test_schema_evolution_on_a_primary_key_table(tmp_path: Path, oracle: Oracle) -> None:
    catalog = pc.Catalog(str(tmp_path))
    catalog.create_database("db")
    table = catalog.create_table("db.evo", schema=SCHEMA, primary_keys=["id"], options={"bucket": "2"})
    table.write(rows([1, 2, 3], ["+I"] * 3))
    table.alter([pc.RenameColumn("v", "label"), pc.AddColumn("extra", pa.float64())])
    table.write(pa.table({"id": [2, 4], "label": ["two", "four"], "n": [5, 6], "flag": [True, False],
                          "rk": ["x", "y"], "extra": [0.5, None]}))
    final = {r["id"]: r for r in table.read().to_pylist()}
    assert final[1]["label"] == "v1" and final[1]["extra"] is None and final[2]["label"] == "two"
    assert_every_snapshot_matches(table, oracle, tmp_path)


def _create_and_write(tmp_path: Path, oracle: Oracle, writer: str, name: str, schema: pa.Schema,
                      primary_keys: list[str], partition_keys: list[str], options: dict[str, str],
                      batches: list[pa.Table]) -> pc.Table:
    if writer == "us":
        catalog = pc.Catalog(str(tmp_path))
        catalog.create_database("db", exist_ok=True)
        table = catalog.create_table(name, schema=schema, primary_keys=primary_keys,
                                     partition_keys=partition_keys, options=options)
        for batch in batches:
            table.write(batch)
        return table
    steps: list[dict[str, Any]] = [
        {"op": "create_database", "name": "db"},
        {"op": "create_table", "table": name, "schema": oracle.save(schema.empty_table()),
         "primary_keys": primary_keys, "partition_keys": partition_keys, "options": options}]
    steps += [{"op": "write", "table": name, "data": oracle.save(batch)} for batch in batches]
    oracle.run(tmp_path, steps)
    return pc.Catalog(str(tmp_path)).get_table(name)


def test_schema_evolution_on_a_primary_key_table_by_pypaimon(tmp_path: Path, oracle: Oracle) -> None:
    oracle.run(tmp_path, [
        {"op": "create_database", "name": "db"},
        {"op": "create_table", "table": "db.evo", "schema": oracle.save(SCHEMA.empty_table()),
         "primary_keys": ["id"], "options": {"bucket": "2"}},
        {"op": "write", "table": "db.evo", "data": oracle.save(rows([1, 2, 3], ["+I"] * 3))},
        {"op": "alter", "table": "db.evo", "changes": [{"op": "rename_column", "name": "v", "new_name": "label"},
                                                      {"op": "add_column", "name": "extra", "type": "DOUBLE"}]},
        {"op": "write", "table": "db.evo", "data": oracle.save(pa.table(
            {"id": [2, 4], "label": ["two", "four"], "n": [5, 6], "flag": [True, False], "rk": ["x", "y"],
             "extra": [0.5, None]}, schema=pa.schema([SCHEMA.field("id"), ("label", pa.string()),
                                                      *list(SCHEMA)[2:], ("extra", pa.float64())])))}])
    table = pc.Catalog(str(tmp_path)).get_table("db.evo")
    final = {r["id"]: r for r in table.read().to_pylist()}
    assert final[1]["label"] == "v1" and final[2]["label"] == "two" and final[2]["extra"] == 0.5
    assert_every_snapshot_matches(table, oracle, tmp_path)
