"""changelog-producer=input: pypaimon 2.1.0 streams our changelog, and we read its, identically."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import paimon_core as pc
from tests.interop.conftest import Oracle
from tests.interop.test_compaction_interop import commits
from tests.interop.test_pk_interop import PARTITIONED, SCHEMA, rows

pytestmark = pytest.mark.interop

INPUT = {"bucket": "2", "rowkind.field": "rk", "changelog-producer": "input"}


def ordered(table: pa.Table) -> list[dict[str, Any]]:
    """Change rows per key in their order (files of different buckets may interleave)."""
    keys = [k for k in ("dt", "id") if k in table.column_names]
    numbered = table.append_column("__pos", pa.array(range(table.num_rows), pa.int64()))
    ordered_rows = numbered.sort_by([(k, "ascending") for k in keys] + [("__pos", "ascending")])
    return ordered_rows.drop_columns(["__pos"]).to_pylist()


def assert_changes_match(table: pc.Table, oracle: Oracle, warehouse: Path) -> int:
    """Every snapshot's changes read by us equal pypaimon's streaming read; returns rows compared."""
    ours = {b.snapshot_id: b.data for b in table.iter_changes()}
    assert ours
    theirs = oracle.read_changes(warehouse, table.name, min(ours), max(ours))
    assert sorted(theirs) == sorted(ours)
    for sid, data in ours.items():
        assert ordered(data) == ordered(theirs[sid]), f"changes of snapshot {sid} differ"
    return sum(t.num_rows for t in ours.values())


def test_pypaimon_streams_our_input_changelog(tmp_path: Path, oracle: Oracle) -> None:
    catalog = pc.Catalog(str(tmp_path))
    catalog.create_database("db")
    table = catalog.create_table("db.t", schema=SCHEMA, primary_keys=["id"], options=INPUT)
    for batch in commits(3, 6, deletes=True):
        table.write(batch)
    # one commit updating a key twice: the changelog keeps both inputs, unmerged
    table.write(rows([5, 5, 6], ["+I", "+U", "-D"], v="twice"))
    assert assert_changes_match(table, oracle, tmp_path) > 150


def test_pypaimon_streams_our_partitioned_changelog_after_compaction(tmp_path: Path, oracle: Oracle) -> None:
    catalog = pc.Catalog(str(tmp_path))
    catalog.create_database("db")
    table = catalog.create_table("db.p", schema=PARTITIONED, primary_keys=["dt", "id"], partition_keys=["dt"],
                                 options={**INPUT, "num-sorted-run.compaction-trigger": "2"})
    for day in ("2024-01-01", "2024-01-02"):
        for i in range(3):
            table.write(rows(list(range(i * 5, i * 5 + 12)), ["+I"] * 12, v=f"{day}-{i}", dt=day,
                             schema=PARTITIONED))
    # compacting writers made COMPACT snapshots in between: they carry no input changelog
    kinds = {s.commit_kind for s in table.snapshots()}
    assert "COMPACT" in kinds
    assert assert_changes_match(table, oracle, tmp_path) == 72


def test_we_read_the_changelog_pypaimon_wrote(tmp_path: Path, oracle: Oracle) -> None:
    schema_path = oracle.save(SCHEMA.empty_table())
    steps: list[dict[str, Any]] = [
        {"op": "create_database", "name": "db"},
        {"op": "create_table", "table": "db.w", "schema": schema_path, "primary_keys": ["id"], "options": INPUT},
    ]
    steps += [{"op": "write", "table": "db.w", "data": oracle.save(batch)} for batch in commits(4, 5, deletes=True)]
    oracle.run(tmp_path, steps)
    table = pc.Catalog(str(tmp_path)).get_table("db.w")
    assert all(s.changelog_manifest_list for s in table.snapshots())
    assert assert_changes_match(table, oracle, tmp_path) > 100
    # the stream's initial full read and then nothing new
    batches = list(table.stream("latest-full", until_latest=True))
    assert [b.initial for b in batches] == [True]
    assert batches[0].data.num_rows == table.read().num_rows


@pytest.mark.parametrize("producer", ["full-compaction", "lookup"])
def test_pypaimon_streams_the_changelog_our_compactions_produce(tmp_path: Path, oracle: Oracle,
                                                                 producer: str) -> None:
    catalog = pc.Catalog(str(tmp_path))
    catalog.create_database("db")
    table = catalog.create_table("db.c", schema=SCHEMA, primary_keys=["id"], options={
        "bucket": "2", "rowkind.field": "rk", "changelog-producer": producer,
        "num-sorted-run.compaction-trigger": "3", "write-buffer-size": "4 kb"})
    for batch in commits(6, 8, deletes=True):
        table.write(batch)  # each commit is compacted right after: its changes land in a COMPACT snapshot
    kinds = {r for b in table.iter_changes() for r in b.data.column("_row_kind").to_pylist()}
    assert kinds == {"+I", "-U", "+U", "-D"}
    assert all(b.commit_kind == "COMPACT" for b in table.iter_changes())
    assert assert_changes_match(table, oracle, tmp_path) > 100
