"""Expiry with tags and long-lived changelog, rollback and manifest merging against Java Paimon 0.9,
both ways: what one side expires the other still reads (every snapshot, tag and retained change)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import paimon_core as pc
from tests.interop.conftest import JavaOracle
from tests.interop.java_support import assert_reads_match
from tests.interop.test_compaction_interop import commits
from tests.interop.test_java_changelog import assert_changes_match
from tests.interop.test_pk_interop import SCHEMA

pytestmark = pytest.mark.interop

# snapshots: 3 kept; changelog: 8 kept, so expired snapshots leave changelog/changelog-N behind
LONG_LIVED = {"bucket": "2", "rowkind.field": "rk", "changelog-producer": "lookup",
              "snapshot.num-retained.min": "3", "snapshot.num-retained.max": "3",
              "changelog.num-retained.min": "8", "changelog.num-retained.max": "8"}
BATCHES = commits(31, 12, deletes=True)


def now_ms() -> int:
    return int(time.time() * 1000) + 1


def java_expire(table: str) -> dict[str, Any]:
    return {"op": "expire", "table": table, "retain_min": 3, "retain_max": 3, "changelog_retain_min": 8,
            "changelog_retain_max": 8}


def test_java_reads_after_our_expiry_with_tags_and_long_lived_changelog(tmp_path: Path,
                                                                        java_oracle: JavaOracle) -> None:
    catalog = pc.Catalog(str(tmp_path))
    catalog.create_database("db")
    table = catalog.create_table("db.t", schema=SCHEMA, primary_keys=["id"], options=LONG_LIVED)
    for batch in BATCHES[:2]:
        table.write(batch)
    table.create_tag("early", 2)
    for batch in BATCHES[2:8]:
        table.write(batch)
    table.expire_snapshots(dry_run=False, older_than=now_ms())  # the writers expired as they committed
    assert len(table.snapshots()) == 3 and table.snapshots()[0].id > 2
    assert table.change_history.earliest_id() < table.snapshots()[0].id  # long-lived changelog kept
    assert_reads_match(table, java_oracle, tmp_path)
    assert assert_changes_match(table, java_oracle, tmp_path) > 0
    # Java writes on and expires with the same retention: we read its result the same
    steps: list[dict[str, Any]] = [{"op": "write", "table": "db.t", "data": java_oracle.save(b)} for b in BATCHES[8:]]
    steps += [{"op": "create_tag", "table": "db.t", "name": "late"}, java_expire("db.t")]
    java_oracle.run(tmp_path, steps)
    assert len(table.snapshots()) == 3 and {t.name for t in table.list_tags()} == {"early", "late"}
    assert_reads_match(table, java_oracle, tmp_path)
    assert assert_changes_match(table, java_oracle, tmp_path) > 0


def test_we_read_after_java_expiry_with_tags_and_long_lived_changelog(tmp_path: Path,
                                                                      java_oracle: JavaOracle) -> None:
    steps: list[dict[str, Any]] = [
        {"op": "create_database", "name": "db"},
        {"op": "create_table", "table": "db.t", "schema": java_oracle.save(SCHEMA.empty_table()),
         "primary_keys": ["id"], "options": LONG_LIVED}]
    steps += [{"op": "write", "table": "db.t", "data": java_oracle.save(b)} for b in BATCHES[:2]]
    steps.append({"op": "create_tag", "table": "db.t", "name": "early", "snapshot_id": 2})
    steps += [{"op": "write", "table": "db.t", "data": java_oracle.save(b)} for b in BATCHES[2:8]]
    steps.append(java_expire("db.t"))
    java_oracle.run(tmp_path, steps)
    table = pc.Catalog(str(tmp_path)).get_table("db.t")
    snapshots = [s.id for s in table.snapshots()]
    assert len(snapshots) == 3 and table.change_history.earliest_id() < snapshots[0]
    assert_reads_match(table, java_oracle, tmp_path)
    assert assert_changes_match(table, java_oracle, tmp_path) > 0
    for batch in BATCHES[8:]:  # we write on and expire Java's table
        table.write(batch)
    table.create_tag("ours")
    table.expire_snapshots(dry_run=False, older_than=now_ms())
    assert len(table.snapshots()) == 3
    assert_reads_match(table, java_oracle, tmp_path)
    assert assert_changes_match(table, java_oracle, tmp_path) > 0
    table.remove_orphan_files(older_than=now_ms(), dry_run=False, force=True)
    assert_reads_match(table, java_oracle, tmp_path)  # nothing a tag or changelog of Java's needs is gone


def test_java_reads_after_our_rollback_and_manifest_merging(tmp_path: Path, java_oracle: JavaOracle) -> None:
    catalog = pc.Catalog(str(tmp_path))
    catalog.create_database("db")
    table = catalog.create_table("db.m", schema=SCHEMA, primary_keys=["id"], options={
        "bucket": "2", "rowkind.field": "rk", "manifest.merge-min-count": "3",
        "manifest.full-compaction-threshold-size": "1 kb"})
    for batch in BATCHES[:9]:
        table.write(batch)
    table.create_tag("keep", 4)
    table.rollback_to(7)
    assert_reads_match(table, java_oracle, tmp_path)
    java_oracle.run(tmp_path, [{"op": "rollback", "table": "db.m", "snapshot_id": 5},
                               {"op": "write", "table": "db.m", "data": java_oracle.save(BATCHES[9])}])
    ours_at_5 = table.snapshot(5).commit_user
    assert table.snapshot(6).commit_kind == "APPEND" and table.snapshot(6).commit_user != ours_at_5
    assert_reads_match(table, java_oracle, tmp_path)


def test_partitions_marked_done_read_the_same_on_both_sides(tmp_path: Path, java_oracle: JavaOracle) -> None:
    """Java's ``mark_partition_done`` (success-file) and ours write one ``_SUCCESS`` per partition
    that the other side reads and refreshes, keeping the first mark's time."""
    schema = pa.schema([("id", pa.int64()), ("dt", pa.string()), ("hr", pa.int32())])
    catalog = pc.Catalog(str(tmp_path))
    catalog.create_database("db")
    table = catalog.create_table("db.t", schema=schema, partition_keys=["dt", "hr"])
    table.write(pa.table({"id": [1, 2], "dt": ["2024-01-01", "2024-01-01"], "hr": [1, 2]}, schema=schema))
    ours = table.mark_partitions_done([{"dt": "2024-01-01", "hr": 1}, {"dt": "2024-01-02"}])
    java_says = java_oracle.run(tmp_path, [
        {"op": "success_file", "table": "db.t", "partition": {"dt": "2024-01-01", "hr": "1"}},
        {"op": "success_file", "table": "db.t", "partition": {"dt": "2024-01-02"}},
        {"op": "success_file", "table": "db.t", "partition": {"dt": "2024-01-01", "hr": "2"}},
        {"op": "mark_done", "table": "db.t", "partitions": [{"dt": "2024-01-01", "hr": "2"},
                                                            {"dt": "2024-01-02"}]},
    ])
    assert java_says[:3] == [{"creationTime": f.creation_time, "modificationTime": f.modification_time}
                             for f in ours.files] + [None]
    by_java = table.success_file({"dt": "2024-01-01", "hr": 2})
    refreshed = table.success_file({"dt": "2024-01-02"})
    assert by_java is not None and by_java.creation_time == by_java.modification_time >= ours.files[1].creation_time
    assert refreshed is not None and refreshed.creation_time == ours.files[1].creation_time
    assert refreshed.modification_time >= ours.files[1].modification_time
    again = table.mark_partitions_done({"dt": "2024-01-01", "hr": 2})
    assert again.files[0].creation_time == by_java.creation_time
    assert java_oracle.run(tmp_path, [{"op": "success_file", "table": "db.t",
                                       "partition": {"dt": "2024-01-01", "hr": "2"}}]) == [
        {"creationTime": by_java.creation_time, "modificationTime": again.files[0].modification_time}]


def test_java_reads_and_expires_a_table_whose_commit_ledger_we_keep(tmp_path: Path, java_oracle: JavaOracle) -> None:
    """Our expiry records each writer's newest expiring commit in commit-ledger/, a directory
    Paimon does not know: Java reads every snapshot and tag beside it, expires on, and the
    record is still there for a retry of that writer."""
    catalog = pc.Catalog(str(tmp_path))
    catalog.create_database("db")
    table = catalog.create_table("db.t", schema=SCHEMA, primary_keys=["id"], options={"bucket": "2",
                                                                                     "rowkind.field": "rk"})
    for identifier, batch in enumerate(BATCHES[:4], start=1):
        with table.new_write(commit_user="job-1", commit_identifier=identifier) as writer:
            writer.write(batch)
            writer.commit()
    table.create_tag("mid")
    for batch in BATCHES[4:6]:
        table.write(batch)
    table.expire_snapshots(dry_run=False, older_than=now_ms(), retain_min=2, retain_max=2)
    assert all(s.commit_user != "job-1" for s in table.snapshots())
    found = table.find_commit_record("job-1", 4)
    assert found is not None and found.expired
    assert (Path(table.path.removeprefix("file://")) / "commit-ledger").is_dir()
    assert_reads_match(table, java_oracle, tmp_path)
    java_oracle.run(tmp_path, [{"op": "write", "table": "db.t", "data": java_oracle.save(BATCHES[6])},
                               {"op": "expire", "table": "db.t", "retain_min": 1, "retain_max": 1}])
    assert_reads_match(table, java_oracle, tmp_path)
    assert table.find_commit("job-1", 4) == found.snapshot_id
