"""Compacted tables read the same in pypaimon 2.1.0, whichever side wrote the data."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import paimon_core as pc
from tests.interop.conftest import Oracle
from tests.interop.test_pk_interop import SCHEMA, assert_every_snapshot_matches, canonical, rows

pytestmark = pytest.mark.interop


def commits(seed: int, count: int, *, deletes: bool, disjoint: bool = False) -> list[pa.Table]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(count):
        ids = list(range(i * 60, i * 60 + 25)) if disjoint else sorted(
            int(x) for x in rng.choice(60, size=25, replace=False))
        kinds = ["-D" if deletes and i and x % 7 == i % 7 else "+I" for x in ids]
        out.append(rows(ids, kinds, v=f"c{i}-"))
    return out


ENGINES: dict[str, dict[str, str]] = {
    "deduplicate": {},
    "upgrades": {"target-file-size": "2 kb", "compaction.small-file-ratio": "0.1"},
    "partial-update": {"merge-engine": "partial-update"},
    "aggregation": {"merge-engine": "aggregation", "fields.n.aggregate-function": "sum",
                    "fields.v.aggregate-function": "listagg"},
    "first-row": {"merge-engine": "first-row"},
}


@pytest.mark.parametrize("engine", list(ENGINES))
def test_our_compacted_tables_read_the_same_in_pypaimon(tmp_path: Path, oracle: Oracle, engine: str) -> None:
    catalog = pc.Catalog(str(tmp_path))
    catalog.create_database("db")
    options = {"bucket": "2", "rowkind.field": "rk", "write-only": "true", **ENGINES[engine]}
    table = catalog.create_table("db.t", schema=SCHEMA, primary_keys=["id"], options=options)
    batches = commits(1, 9, deletes=engine == "deduplicate", disjoint=engine == "upgrades")
    for batch in batches[:6]:
        table.write(batch)
    assert table.compact().snapshot_id is not None  # into a middle level, deletes kept
    for batch in batches[6:]:
        table.write(batch)
    full = table.compact(full=True)
    assert full.snapshot_id is not None and table.lsm_state().max_level0_files == 0
    if engine == "upgrades":
        assert full.buckets and any(b.files_upgraded for b in full.buckets)
    # first-row: both leave level 0 out of batch reads, and take levels >= 1 as they are
    assert_every_snapshot_matches(table, oracle, tmp_path)


def test_we_compact_a_table_pypaimon_wrote(tmp_path: Path, oracle: Oracle) -> None:
    options = {"bucket": "2", "rowkind.field": "rk"}
    steps: list[dict[str, Any]] = [
        {"op": "create_database", "name": "db"},
        {"op": "create_table", "table": "db.t", "schema": oracle.save(SCHEMA.empty_table()),
         "primary_keys": ["id"], "options": options}]
    steps += [{"op": "write", "table": "db.t", "data": oracle.save(batch)} for batch in commits(2, 7, deletes=True)]
    oracle.run(tmp_path, steps)
    table = pc.Catalog(str(tmp_path)).get_table("db.t")
    expected = canonical(table.read())
    assert table.lsm_state().max_level0_files == 7
    assert table.compact().snapshot_id is not None
    table.compact(full=True)
    assert table.lsm_state().max_sorted_runs == 1
    assert canonical(table.read()) == expected
    # pypaimon counts no deletes in its files' metadata: the -D rows must still be dropped
    assert sum(f.row_count for f in table.files()) == len(expected)
    assert_every_snapshot_matches(table, oracle, tmp_path)
    oracle.run(tmp_path, [{"op": "write", "table": "db.t", "data": oracle.save(rows([1, 59], ["+I", "+I"], v="z"))}])
    assert {r["id"]: r["v"] for r in table.read().to_pylist()}[1] == "z1"  # their sequence continues past ours


# small files: groups worth several output files, rewritten by several writers at once
SLICED = {"target-file-size": "2 kb", "source.split.open-file-cost": "1 b"}


@pytest.mark.parametrize(("bucket", "sizes"), [("-1", {}), ("2", {}), ("-1", SLICED), ("2", SLICED)])
def test_compacted_append_tables_read_the_same_in_pypaimon(tmp_path: Path, oracle: Oracle, bucket: str,
                                                           sizes: dict[str, str]) -> None:
    schema = pa.schema([("id", pa.int64()), ("msg", pa.string()), ("dt", pa.string())])
    options = {"bucket": bucket, "write-only": "true", **({"bucket-key": "id"} if bucket != "-1" else {}), **sizes}
    steps: list[dict[str, Any]] = [
        {"op": "create_database", "name": "db"},
        {"op": "create_table", "table": "db.a", "schema": oracle.save(schema.empty_table()),
         "primary_keys": [], "partition_keys": ["dt"], "options": options}]
    for i in range(6):  # half written by pypaimon, half by us
        ids = list(range(i * 10, i * 10 + 10))
        steps.append({"op": "write", "table": "db.a", "data": oracle.save(
            pa.table({"id": ids, "msg": [f"m{x}" for x in ids], "dt": ["d1"] * 10}, schema=schema))})
    oracle.run(tmp_path, steps)
    table = pc.Catalog(str(tmp_path)).get_table("db.a")
    for i in range(6, 12):
        ids = list(range(i * 10, i * 10 + 10))
        table.write(pa.table({"id": ids, "msg": [f"m{x}" for x in ids], "dt": ["d1"] * 10}, schema=schema))
    before = table.read()
    result = table.compact(full=True)
    assert result.snapshot_id is not None and result.files_out < result.files_in
    assert not sizes or all(b.files_out >= 2 for b in result.buckets)
    assert sorted(table.read().column("id").to_pylist()) == sorted(before.column("id").to_pylist())
    latest = table.latest_snapshot().id  # type: ignore[union-attr]
    theirs = oracle.read_snapshots(tmp_path, "db.a", [latest - 1, latest])
    for sid, data in theirs.items():
        assert sorted(data.column("id").to_pylist()) == list(range(120)), sid
    if bucket != "-1":  # fixed buckets: rows of a bucket keep their order
        assert table.read().column("id").to_pylist() == theirs[latest].column("id").to_pylist()


@pytest.mark.parametrize("engine", ["deduplicate", "partial-update"])
def test_deletion_vector_tables_read_the_same_in_pypaimon(tmp_path: Path, oracle: Oracle, engine: str) -> None:
    """pypaimon reads a DV table's levels >= 1 unmerged, applying our deletion vectors."""
    catalog = pc.Catalog(str(tmp_path))
    catalog.create_database("db")
    options = {"bucket": "2", "rowkind.field": "rk", "deletion-vectors.enabled": "true", "merge-engine": engine}
    table = catalog.create_table("db.dv", schema=SCHEMA, primary_keys=["id"], options=options)
    for batch in commits(5, 7, deletes=engine == "deduplicate"):
        table.write(batch)  # a compacting writer: every commit is followed by a COMPACT snapshot
    kinds = {s.id: s.commit_kind for s in table.snapshots()}
    compacted = [sid for sid, kind in kinds.items() if kind == "COMPACT"]
    assert len(compacted) == 7 and table.lsm_state().max_level0_files == 0
    if engine == "deduplicate":
        index = table.latest_snapshot().index_manifest  # type: ignore[union-attr]
        assert index is not None  # deletion vectors were written, not whole rewrites
    theirs = oracle.read_snapshots(tmp_path, "db.dv", compacted)
    for sid in compacted:
        assert canonical(table.read(snapshot_id=sid)) == canonical(theirs[sid]), f"snapshot {sid} differs"
    assert_every_snapshot_matches(table, oracle, tmp_path)  # APPEND snapshots: level 0 left out by both


def test_large_deletion_vectors_use_bitmap_containers_pypaimon_can_read(tmp_path: Path, oracle: Oracle) -> None:
    catalog = pc.Catalog(str(tmp_path))
    catalog.create_database("db")
    table = catalog.create_table("db.big", schema=SCHEMA, primary_keys=["id"],
                                 options={"bucket": "1", "deletion-vectors.enabled": "true"})
    table.write(rows(list(range(20000)), ["+I"] * 20000))
    table.write(rows(list(range(0, 20000, 2)), ["+I"] * 10000, v="new"))  # 10,000 > 4,096 positions
    table.write(rows(list(range(1, 301, 2)), ["+I"] * 150, v="newer"))
    latest = table.latest_snapshot().id  # type: ignore[union-attr]
    theirs = oracle.read_snapshots(tmp_path, "db.big", [latest])[latest]
    ours = table.read()
    assert ours.num_rows == 20000 and canonical(ours) == canonical(theirs)
