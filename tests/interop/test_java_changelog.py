"""Changelog producers against Java Paimon 0.9: Java's streaming read of each snapshot's changes
equals ours, row kinds included, whoever wrote the table, and each side continues the other's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import paimon_core as pc
from tests.interop.conftest import JavaOracle
from tests.interop.test_changelog_interop import ordered
from tests.interop.test_compaction_interop import commits
from tests.interop.test_java_tables import partitioned
from tests.interop.test_pk_interop import PARTITIONED

pytestmark = pytest.mark.interop

PRODUCERS: dict[str, dict[str, str]] = {
    "none": {},
    "input": {"changelog-producer": "input"},
    "lookup": {"changelog-producer": "lookup"},
    "full-compaction": {"changelog-producer": "full-compaction"},
    "lookup-partial-update": {"changelog-producer": "lookup", "merge-engine": "partial-update"},
    "lookup-aggregation": {"changelog-producer": "lookup", "merge-engine": "aggregation",
                           "fields.n.aggregate-function": "sum"},
    "lookup-first-row": {"changelog-producer": "lookup", "merge-engine": "first-row"},
    "full-compaction-row-deduplicate": {"changelog-producer": "full-compaction",
                                        "changelog-producer.row-deduplicate": "true"},
    "input-deletion-vectors": {"changelog-producer": "input", "deletion-vectors.enabled": "true"},
    "lookup-deletion-vectors": {"changelog-producer": "lookup", "deletion-vectors.enabled": "true"},
}
BATCHES = partitioned(commits(21, 7, deletes=True))


def options(producer: str) -> dict[str, str]:
    base = {"bucket": "2", "rowkind.field": "rk", "num-sorted-run.compaction-trigger": "3"}
    extra = PRODUCERS[producer]
    if extra.get("merge-engine") in ("partial-update", "aggregation", "first-row"):
        base.pop("rowkind.field")  # every input an insert (rk is a plain column)
    return {**base, **extra}


def assert_changes_match(table: pc.Table, java: JavaOracle, warehouse: Path) -> int:
    """Every snapshot's changes read by us equal Java's streaming read; returns the rows compared."""
    ours = {b.snapshot_id: b.data for b in table.iter_changes() if b.data.num_rows}
    assert ours, f"{table.name} has no changes"
    latest = table.latest_snapshot().id  # type: ignore[union-attr]
    theirs = {sid: rows for sid, rows in java.read_changes(warehouse, table.name, min(ours), latest).items()
              if rows.num_rows}  # Java plans a snapshot with nothing new (an empty APPEND) as an empty batch
    assert sorted(theirs) == sorted(ours), f"snapshots with changes: Java {sorted(theirs)}, ours {sorted(ours)}"
    for sid, data in ours.items():
        mine = ordered(data.drop_columns([pc.ROW_KIND]).append_column(data.field(0), data.column(0)))
        java_rows = theirs[sid]
        assert ordered(java_rows.select(mine[0].keys() if mine else java_rows.column_names)) == mine, \
            f"changes of snapshot {sid} differ"
    return sum(t.num_rows for t in ours.values())


def java_compacts(producer: str) -> bool:
    return "full-compaction" in producer


@pytest.mark.parametrize("producer", list(PRODUCERS))
def test_java_streams_the_changes_we_produce(tmp_path: Path, java_oracle: JavaOracle, producer: str) -> None:
    catalog = pc.Catalog(str(tmp_path))
    catalog.create_database("db")
    table = catalog.create_table("db.c", schema=PARTITIONED, primary_keys=["dt", "id"], partition_keys=["dt"],
                                 options=options(producer))
    data = BATCHES
    for batch in data[:4]:
        table.write(batch)
    if java_compacts(producer):
        table.compact(full=True)
    assert assert_changes_match(table, java_oracle, tmp_path) > 0
    # Java writes on (its streaming writer, then a full compaction): we read its changes the same
    steps = [{"op": "write", "table": "db.c", "data": java_oracle.save(b), "stream": True} for b in data[4:]]
    steps.append({"op": "compact", "table": "db.c", "full": True, "stream": True})
    java_oracle.run(tmp_path, steps)
    assert assert_changes_match(table, java_oracle, tmp_path) > 0


@pytest.mark.parametrize("producer", list(PRODUCERS))
def test_we_read_the_changes_java_produces(tmp_path: Path, java_oracle: JavaOracle, producer: str) -> None:
    data = BATCHES
    steps: list[dict[str, Any]] = [
        {"op": "create_database", "name": "db"},
        {"op": "create_table", "table": "db.c", "schema": java_oracle.save(PARTITIONED.empty_table()),
         "primary_keys": ["dt", "id"], "partition_keys": ["dt"], "options": options(producer)}]
    steps += [{"op": "write", "table": "db.c", "data": java_oracle.save(b), "stream": True} for b in data[:4]]
    if java_compacts(producer):
        steps.append({"op": "compact", "table": "db.c", "full": True, "stream": True})
    java_oracle.run(tmp_path, steps)
    table = pc.Catalog(str(tmp_path)).get_table("db.c")
    assert assert_changes_match(table, java_oracle, tmp_path) > 0
    for batch in data[4:]:  # we write on: Java streams our changes the same
        table.write(batch)
    table.compact(full=True)
    assert assert_changes_match(table, java_oracle, tmp_path) > 0
