"""pypaimon 2.1.0 reads our tables after expiry, tagging and rollback (EARLIEST respected), and
our expiry keeps what pypaimon's tags need."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

import paimon_core as pc
from tests.interop.conftest import Oracle
from tests.interop.test_compaction_interop import commits
from tests.interop.test_pk_interop import SCHEMA, canonical

pytestmark = pytest.mark.interop
OPTIONS = {"bucket": "2", "rowkind.field": "rk", "num-sorted-run.compaction-trigger": "2"}


def now_ms() -> int:
    return int(time.time() * 1000) + 1


def new_table(warehouse: Path, name: str, **options: str) -> pc.Table:
    """A primary-key table with 10 commits of CDC batches (compacting writers)."""
    catalog = pc.Catalog(str(warehouse))
    catalog.create_database("db")
    table = catalog.create_table(f"db.{name}", schema=SCHEMA, primary_keys=["id"], options={**OPTIONS, **options})
    for batch in commits(len(name) + 6, 8, deletes=True):
        table.write(batch)
    return table


def test_pypaimon_reads_after_our_expiry_and_tags(tmp_path: Path, oracle: Oracle) -> None:
    table = new_table(tmp_path, "t")
    table.create_tag("mid", 5)
    done = table.expire_snapshots(dry_run=False, older_than=now_ms(), retain_min=3)
    assert done.data_files and done.earliest_after == table.snapshots()[0].id
    retained = [s.id for s in table.snapshots()]
    theirs = oracle.read_snapshots(tmp_path, "db.t", retained)
    for sid in retained:
        assert canonical(theirs[sid]) == canonical(table.read(snapshot_id=sid)), f"snapshot {sid}"
    [tagged] = oracle.run(tmp_path, [{"op": "read", "table": "db.t", "tag": "mid", "out": str(tmp_path / "tag")}])
    assert tagged["rows"] == table.read(tag="mid").num_rows
    assert canonical(oracle.load(str(tmp_path / "tag"))) == canonical(table.read(tag="mid"))
    oracle.run(tmp_path, [{"op": "read", "table": "db.t", "out": str(tmp_path / "latest")}])
    assert canonical(oracle.load(str(tmp_path / "latest"))) == canonical(table.read())


def test_pypaimon_reads_after_our_rollbacks(tmp_path: Path, oracle: Oracle) -> None:
    table = new_table(tmp_path, "r")
    table.create_tag("early", 2)
    table.rollback_to(6)
    out = str(tmp_path / "after")
    oracle.run(tmp_path, [{"op": "read", "table": "db.r", "out": out}])
    assert canonical(oracle.load(out)) == canonical(table.read(snapshot_id=6))
    table.expire_snapshots(dry_run=False, older_than=now_ms(), retain_min=1)
    table.rollback_to("early")  # its snapshot expired: restored from the tag
    assert [s.id for s in table.snapshots()] == [2]
    oracle.run(tmp_path, [{"op": "read", "table": "db.r", "out": out}])
    assert canonical(oracle.load(out)) == canonical(table.read(tag="early"))


def test_our_expiry_keeps_what_a_pypaimon_tag_needs(tmp_path: Path, oracle: Oracle) -> None:
    schema_path = oracle.save(SCHEMA.empty_table())
    steps = [{"op": "create_database", "name": "db"},
             {"op": "create_table", "table": "db.w", "schema": schema_path, "primary_keys": ["id"],
              "options": {"bucket": "2", "rowkind.field": "rk"}}]
    steps += [{"op": "write", "table": "db.w", "data": oracle.save(b)} for b in commits(9, 5, deletes=True)]
    steps.append({"op": "create_tag", "table": "db.w", "name": "theirs", "snapshot_id": 2})
    oracle.run(tmp_path, steps)
    table = pc.Catalog(str(tmp_path)).get_table("db.w")
    expected = canonical(table.read(tag="theirs"))
    table.compact(full=True)
    table.expire_snapshots(dry_run=False, older_than=now_ms(), retain_min=1)
    assert len(table.snapshots()) == 1 and canonical(table.read(tag="theirs")) == expected
    out = str(tmp_path / "tag")
    oracle.run(tmp_path, [{"op": "read", "table": "db.w", "tag": "theirs", "out": out}])
    assert canonical(oracle.load(out)) == expected


@pytest.mark.parametrize("options", [{"manifest.merge-min-count": "3"},
                                     {"manifest.full-compaction-threshold-size": "1 b"}])
def test_pypaimon_reads_after_our_manifest_merges(tmp_path: Path, oracle: Oracle, options: dict[str, str]) -> None:
    table = new_table(tmp_path, "m", **options)
    retained = [s.id for s in table.snapshots()]
    theirs = oracle.read_snapshots(tmp_path, "db.m", retained)
    for sid in retained:
        assert canonical(theirs[sid]) == canonical(table.read(snapshot_id=sid)), f"snapshot {sid}"
