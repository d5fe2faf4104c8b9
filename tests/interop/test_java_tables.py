"""Every table kind, both directions with Java Paimon 0.9: Java reads what we write at every snapshot
and tag, we read what Java writes at every snapshot, and each side continues the other's table.

A scenario is a table and a sequence of steps (writes, compactions, schema changes, tags) that
either side can run; the checks are the same whoever wrote it.
"""

from __future__ import annotations

import decimal
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import paimon_core as pc
from paimon_core.types import from_arrow_type, type_to_json
from tests.interop.conftest import JavaOracle
from tests.interop.java_support import (
    BUCKET_CHECK,
    assert_java_buckets,
    assert_keys_unique,
    java_files,
    match_reads,
)
from tests.interop.test_compaction_interop import commits
from tests.interop.test_pk_interop import PARTITIONED, SCHEMA, rows

pytestmark = pytest.mark.interop

Step = tuple[Any, ...]


@dataclass(frozen=True)
class Scenario:
    schema: pa.Schema
    steps: tuple[Step, ...]
    primary_keys: tuple[str, ...] = ()
    partition_keys: tuple[str, ...] = ()
    options: dict[str, str] = field(default_factory=dict)
    # the other side's steps on top of the table
    more: tuple[Step, ...] = ()

    @property
    def keys(self) -> list[str]:
        return list(self.primary_keys)


def write(data: pa.Table) -> Step:
    return ("write", data)


def compact(full: bool = True) -> Step:
    return ("compact", full)


def partitioned(batches: list[pa.Table], days: tuple[str, ...] = ("d1", "d2")) -> list[pa.Table]:
    """The batches spread over partitions by id parity."""
    out = []
    for batch in batches:
        ids = np.array(batch["id"].to_pylist())
        dt = pa.array(np.where(ids % 2 == 0, days[0], days[1]))
        out.append(batch.add_column(0, PARTITIONED.field("dt"), dt))
    return out


def later(batches: list[pa.Table], offset: int) -> list[pa.Table]:
    """The batches with every value string marked, so a continuation changes what it touches."""
    return [b.set_column(b.schema.get_field_index("v"), "v",
                         pa.array([f"{v}-{offset}" if v else v for v in b["v"].to_pylist()])) for b in batches]


LOGS = pa.schema([("id", pa.int64()), ("msg", pa.string()), ("amount", pa.decimal128(38, 4)),
                  ("dt", pa.string())])


def logs(start: int, count: int, days: tuple[str | None, ...] = ("2024-01-01", None, "2024-01-02")) -> pa.Table:
    ids = list(range(start, start + count))
    return pa.table({"id": ids, "msg": [f"m{i}" if i % 5 else None for i in ids],
                     "amount": [None if i % 11 == 0 else decimal.Decimal(i * 1234567).scaleb(-4) * (-1 if i % 3 else 1)
                                for i in ids],
                     "dt": [days[i % len(days)] for i in ids]}, schema=LOGS)


PU = pa.schema([pa.field("id", pa.int64(), nullable=False), ("a", pa.string()), ("sa", pa.int64()),
                ("b", pa.int64()), ("sb", pa.int64()), ("rk", pa.string())])


def pu_rows(ids: list[int], *, a: str | None, sa: int | None, b: int | None, sb: int | None,
            kind: str = "+I") -> pa.Table:
    n = len(ids)
    return pa.table({"id": ids, "a": [f"{a}{i}" if a else None for i in ids], "sa": [sa] * n,
                     "b": [None if b is None else b + i for i in ids], "sb": [sb] * n, "rk": [kind] * n}, schema=PU)


EVOLVING = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string()), ("n", pa.int32()),
                      ("f", pa.float32()), ("flag", pa.bool_()), ("dt", pa.string())])


def evolving(ids: list[int], stage: int) -> pa.Table:
    """Rows of the evolving schema at each stage (0: created, 1: extra added and v renamed to label,
    2: n and f widened and flag dropped, 3: tail added)."""
    data: dict[str, Any] = {"id": ids, "v": [f"s{stage}-{i}" if i % 3 else None for i in ids],
                            "n": [i * 7 - 20 for i in ids], "f": [i / 8 for i in ids],
                            "flag": [i % 2 == 0 for i in ids], "dt": ["a" if i % 2 else "b" for i in ids],
                            "extra": [i * 0.5 for i in ids], "tail": [f"t{i}" for i in ids]}
    fields = [EVOLVING.field("id"), pa.field("v", pa.string()), pa.field("n", pa.int32()),
              pa.field("f", pa.float32()), pa.field("flag", pa.bool_()), pa.field("dt", pa.string())]
    if stage >= 1:
        data["label"] = data.pop("v")
        fields = [*fields[:1], pa.field("label", pa.string()), *fields[2:], pa.field("extra", pa.float64())]
    if stage >= 2:
        fields = [f for f in fields if f.name != "flag"]
        fields = [pa.field("n", pa.int64()) if f.name == "n" else pa.field("f", pa.float64()) if f.name == "f"
                  else f for f in fields]
    if stage >= 3:
        fields.append(pa.field("tail", pa.string()))
    schema = pa.schema(fields)
    return pa.table({name: data[name] for name in schema.names}, schema=schema)


EVOLUTION: tuple[Step, ...] = (
    write(evolving([1, 2, 3, 4], 0)), ("tag", "created"),
    ("alter", [("add", "extra", pa.float64()), ("rename", "v", "label")]),
    write(evolving([3, 5, 6], 1)),
    ("alter", [("widen", "n", pa.int64()), ("widen", "f", pa.float64()), ("drop", "flag")]),
    write(evolving([1, 6, 7], 2)), ("tag", "widened"), compact())
EVOLUTION_MORE: tuple[Step, ...] = (("alter", [("add", "tail", pa.string())]), write(evolving([2, 7, 8], 3)),
                                    compact())
DEDUP = commits(11, 10, deletes=True)
SCENARIOS: dict[str, Scenario] = {
    "append-unaware-null-partitions": Scenario(
        LOGS, (write(logs(0, 40)), write(logs(40, 25)), compact(), write(logs(65, 10)),
               ("overwrite", logs(100, 6, ("2024-01-02",)), {"dt": "2024-01-02"})),
        partition_keys=("dt",), options={"compaction.min.file-num": "2"},
        more=(write(logs(200, 12)), compact())),
    "append-fixed-bucket-key": Scenario(
        LOGS, (write(logs(0, 60)), write(logs(60, 60)), compact(), write(logs(120, 30))),
        partition_keys=("dt",), options={"bucket": "3", "bucket-key": "msg,amount"},
        more=(write(logs(300, 40)),)),
    "append-bucket-key-decimal38": Scenario(
        LOGS, (write(logs(0, 80, ("2024-01-01",))), write(logs(80, 40, ("2024-01-01",)))),
        options={"bucket": "4", "bucket-key": "amount"}, more=(write(logs(500, 30, ("2024-01-01",))),)),
    "dedup-multi-level": Scenario(
        PARTITIONED, (*map(write, partitioned(DEDUP[:5])), compact(False), *map(write, partitioned(DEDUP[5:8])),
                      compact(), *map(write, partitioned(DEDUP[8:]))),
        primary_keys=("dt", "id"), partition_keys=("dt",),
        options={"bucket": "2", "rowkind.field": "rk", "write-only": "true", "num-sorted-run.compaction-trigger": "3"},
        more=(*map(write, partitioned(later(DEDUP[:3], 1))), compact(False),
              write(partitioned(later(DEDUP[3:4], 2))[0]), compact())),
    "dedup-small-files-upgrade": Scenario(
        SCHEMA, (*map(write, commits(3, 5, deletes=False, disjoint=True)), compact()),
        primary_keys=("id",), options={"bucket": "1", "rowkind.field": "rk", "write-only": "true",
                                       "target-file-size": "2 kb", "compaction.small-file-ratio": "0.1"},
        more=(*map(write, commits(4, 2, deletes=True)), compact())),
    "dedup-dynamic-bucket": Scenario(
        PARTITIONED, tuple(map(write, partitioned(DEDUP[:4]))), primary_keys=("dt", "id"), partition_keys=("dt",),
        options={"bucket": "-1", "dynamic-bucket.target-row-num": "7", "rowkind.field": "rk"},
        more=(*map(write, partitioned(later(DEDUP[4:7], 3))), compact())),
    "dedup-sequence-field": Scenario(
        SCHEMA, (write(rows([1, 2, 3], ["+I"] * 3, v="new")),
                 write(rows([1, 2, 4], ["+I"] * 3, v="old").set_column(2, "n", pa.array([0, 0, 40]))),
                 compact(), write(rows([3], ["-D"]).set_column(2, "n", pa.array([1])))),
        primary_keys=("id",), options={"bucket": "2", "rowkind.field": "rk", "sequence.field": "n"},
        more=(write(rows([1, 4], ["+I"] * 2, v="newest").set_column(2, "n", pa.array([99, 99]))), compact())),
    "dedup-ignore-delete": Scenario(
        SCHEMA, tuple(map(write, DEDUP[:4])), primary_keys=("id",),
        options={"bucket": "2", "rowkind.field": "rk", "ignore-delete": "true"},
        more=(*map(write, later(DEDUP[4:6], 4)), compact())),
    "partial-update-sequence-groups": Scenario(
        PU, (write(pu_rows([1, 2, 3], a="x", sa=5, b=10, sb=5)),
             write(pu_rows([1, 2], a="older", sa=1, b=None, sb=None)),   # a: older sequence, kept out
             write(pu_rows([2, 3], a=None, sa=None, b=200, sb=9)),
             compact(), write(pu_rows([1], a="newer", sa=7, b=1, sb=1))),  # a moves, b (older) stays
        primary_keys=("id",), options={"bucket": "2", "merge-engine": "partial-update",
                                       "fields.sa.sequence-group": "a", "fields.sb.sequence-group": "b"},
        more=(write(pu_rows([2, 4], a="late", sa=50, b=None, sb=None)), compact())),
    "partial-update-remove-on-delete": Scenario(
        SCHEMA, (write(rows([1, 2, 3], ["+I"] * 3)), write(rows([2], ["-D"])),
                 write(rows([3, 4], ["+I"] * 2, v="w").set_column(2, "n", pa.nulls(2, pa.int64())))),
        primary_keys=("id",), options={"bucket": "1", "merge-engine": "partial-update", "rowkind.field": "rk",
                                       "partial-update.remove-record-on-delete": "true"},
        more=(write(rows([4], ["-D"])), write(rows([5], ["+I"])))),
    "aggregation-with-retractions": Scenario(
        SCHEMA, (write(rows([1, 2, 3], ["+I"] * 3)), write(rows([1, 2], ["+I"] * 2, v="w")),
                 write(rows([1, 3], ["-U", "-D"], v="w")), compact(), write(rows([2, 5], ["+U", "+I"], v="z"))),
        primary_keys=("id",), options={
            "bucket": "2", "merge-engine": "aggregation", "rowkind.field": "rk", "fields.n.aggregate-function": "sum",
            "fields.v.aggregate-function": "last_value", "fields.flag.aggregate-function": "bool_or",
            "fields.flag.ignore-retract": "true"},
        more=(write(rows([1, 5], ["+I", "-U"], v="q")), compact())),
    "aggregation-functions": Scenario(
        SCHEMA, (write(rows([1, 2, 3, 5], ["+I"] * 4, v="b")), write(rows([1, 2, 5], ["+I"] * 3, v="a")),
                 compact(), write(rows([1, 3], ["+I"] * 2, v="c"))),
        primary_keys=("id",), options={
            "bucket": "1", "merge-engine": "aggregation", "fields.n.aggregate-function": "max",
            "fields.v.aggregate-function": "listagg", "fields.flag.aggregate-function": "bool_and"},
        more=(write(rows([2, 3], ["+I"] * 2, v="d")),)),
    "first-row": Scenario(
        SCHEMA, (write(rows([1, 2], ["+I"] * 2, v="first")), write(rows([2, 3], ["+I"] * 2, v="second")),
                 compact(), write(rows([3, 4], ["+I"] * 2, v="third"))),
        primary_keys=("id",), options={"bucket": "2", "merge-engine": "first-row"},
        more=(write(rows([1, 5], ["+I"] * 2, v="fourth")), compact())),
    "deletion-vectors": Scenario(
        PARTITIONED, tuple(map(write, partitioned(DEDUP[:5]))), primary_keys=("dt", "id"), partition_keys=("dt",),
        options={"bucket": "2", "rowkind.field": "rk", "deletion-vectors.enabled": "true"},
        more=(*map(write, partitioned(later(DEDUP[5:8], 5))), compact(False))),
    "deletion-vectors-write-only": Scenario(
        SCHEMA, (*map(write, DEDUP[:3]), compact(False), *map(write, DEDUP[3:5]), compact()),
        primary_keys=("id",), options={"bucket": "2", "rowkind.field": "rk", "deletion-vectors.enabled": "true",
                                       "write-only": "true"},
        more=(*map(write, later(DEDUP[5:7], 6)), compact(False))),
    "schema-evolution-primary-key": Scenario(
        EVOLVING, EVOLUTION, primary_keys=("id",), options={"bucket": "2"}, more=EVOLUTION_MORE),
    "schema-evolution-append": Scenario(
        EVOLVING, EVOLUTION, partition_keys=("dt",), options={"compaction.min.file-num": "2"}, more=EVOLUTION_MORE),
    "orc-deduplicate": Scenario(
        SCHEMA, (*map(write, DEDUP[:4]), compact()), primary_keys=("id",),
        options={"bucket": "2", "rowkind.field": "rk", "file.format": "orc"},
        more=(*map(write, later(DEDUP[4:6], 7)), compact())),
}


def arrow_change(change: Step) -> Any:
    kind = change[0]
    if kind == "add":
        return pc.AddColumn(change[1], change[2])
    if kind == "rename":
        return pc.RenameColumn(change[1], change[2])
    if kind == "drop":
        return pc.DropColumn(change[1])
    return pc.UpdateColumnType(change[1], change[2])


def java_change(change: Step) -> dict[str, Any]:
    kind = change[0]
    if kind == "add":
        return {"op": "add_column", "name": change[1], "type": type_to_json(from_arrow_type(change[2], True, [1000]))}
    if kind == "rename":
        return {"op": "rename_column", "name": change[1], "new_name": change[2]}
    if kind == "drop":
        return {"op": "drop_column", "name": change[1]}
    return {"op": "update_column_type", "name": change[1],
            "type": type_to_json(from_arrow_type(change[2], True, [1000]))}


def run_ours(table: pc.Table, steps: tuple[Step, ...]) -> None:
    for step in steps:
        kind = step[0]
        if kind == "write":
            table.write(step[1])
        elif kind == "overwrite":
            table.write(step[1], overwrite=step[2])
        elif kind == "compact":
            table.compact(full=step[1])
        elif kind == "alter":
            table.alter([arrow_change(c) for c in step[1]])
        elif kind == "tag":
            table.create_tag(step[1])
        else:
            raise ValueError(kind)


def java_steps(java: JavaOracle, name: str, steps: tuple[Step, ...]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for step in steps:
        kind = step[0]
        if kind == "write":
            out.append({"op": "write", "table": name, "data": java.save(step[1])})
        elif kind == "overwrite":
            out.append({"op": "write", "table": name, "data": java.save(step[1]), "overwrite": step[2]})
        elif kind == "compact":
            out.append({"op": "compact", "table": name, "full": step[1]})
        elif kind == "alter":
            out.append({"op": "alter", "table": name, "changes": [java_change(c) for c in step[1]]})
        elif kind == "tag":
            out.append({"op": "create_tag", "table": name, "name": step[1]})
        else:
            raise ValueError(kind)
    return out


def check_table(table: pc.Table, java: JavaOracle, warehouse: Path, scenario: Scenario) -> int:
    """Java and we read the same at every snapshot and tag; keys unique; rows where Java's bucket
    function puts them. Returns the reads compared."""
    fixed = int(scenario.options.get("bucket", "-1")) > 0
    matched = match_reads(table, java, warehouse, extra=[{"op": BUCKET_CHECK, "table": table.name}] if fixed else [])
    if scenario.primary_keys:
        latest = matched.snapshots[max(matched.snapshots)]
        assert_keys_unique(latest, scenario.keys, f"Java's read of {table.name}")
    if fixed:
        assert_java_buckets(matched.extra[0], table.name)
    return matched.compared


def create_ours(warehouse: Path, name: str, scenario: Scenario) -> pc.Table:
    catalog = pc.Catalog(str(warehouse))
    catalog.create_database("db", exist_ok=True)
    return catalog.create_table(name, schema=scenario.schema, primary_keys=scenario.primary_keys,
                                partition_keys=scenario.partition_keys, options=scenario.options)


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_java_reads_what_we_write(tmp_path: Path, java_oracle: JavaOracle, name: str) -> None:
    scenario = SCENARIOS[name]
    table = create_ours(tmp_path, "db.t", scenario)
    run_ours(table, scenario.steps)
    assert table.read().num_rows > 0
    check_table(table, java_oracle, tmp_path, scenario)
    # Java continues our table (its writers restore our sequence numbers, index and levels)
    java_oracle.run(tmp_path, java_steps(java_oracle, "db.t", scenario.more))
    check_table(table, java_oracle, tmp_path, scenario)


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_we_read_what_java_writes(tmp_path: Path, java_oracle: JavaOracle, name: str) -> None:
    scenario = SCENARIOS[name]
    java_oracle.run(tmp_path, [
        {"op": "create_database", "name": "db"},
        {"op": "create_table", "table": "db.t", "schema": java_oracle.save(scenario.schema.empty_table()),
         "primary_keys": scenario.keys, "partition_keys": list(scenario.partition_keys),
         "options": scenario.options},
        *java_steps(java_oracle, "db.t", scenario.steps)])
    table = pc.Catalog(str(tmp_path)).get_table("db.t")
    assert table.read().num_rows > 0
    check_table(table, java_oracle, tmp_path, scenario)
    if scenario.primary_keys and any(s[0] == "compact" for s in scenario.steps):
        levels = {f["level"] for f in java_files(java_oracle, tmp_path, "db.t")}
        assert {f.level for f in table.files()} == levels and max(levels) > 0
    run_ours(table, scenario.more)  # we continue Java's table
    check_table(table, java_oracle, tmp_path, scenario)
