"""The commit ledger: a writer's commit is found again after expiry deleted its snapshots, so a
retried commit (same user and identifier) is not written twice, however long the retry waited."""

from __future__ import annotations

import time
from pathlib import Path

import pyarrow as pa
import pytest

import paimon_core as pc
from paimon_core.commit_ledger import user_digest
from tests.integration.conftest import events, files_under

USER = "dagster:run-1:logs/events:2024-01-01"


def expire_all_but_latest(table: pc.Table) -> None:
    table.expire_snapshots(dry_run=False, older_than=int(time.time() * 1000) + 1000, retain_min=1, retain_max=1)


def commit(table: pc.Table, ids: range, identifier: int, *, user: str = USER,
           properties: dict[str, str] | None = None) -> int | None:
    with table.new_write(commit_user=user, commit_identifier=identifier, properties=properties) as writer:
        writer.write(events(ids))
        return writer.commit()


def test_a_commit_is_found_after_its_snapshots_expired(catalog: pc.Catalog, tmp_path: Path) -> None:
    table = catalog.create_table("db.events", schema=events([]).schema, options={"write-only": "true"})
    commit(table, range(0, 10), 1, properties={"chunk": "0"})
    landed = commit(table, range(10, 20), 2, properties={"chunk": "1"})
    commit(table, range(100, 110), 1, user="another writer")  # so the user's snapshots can all expire
    expire_all_but_latest(table)
    assert [s.id for s in table.snapshots()] == [3]

    record = table.find_commit_record(USER, 1)
    assert record is not None and record.expired
    assert (record.snapshot_id, record.commit_identifier, record.commit_kind) == (landed, 2, "APPEND")
    assert record.properties["chunk"] == "1"
    assert table.find_commit(USER, 2) == landed and table.find_commit(USER, 3) is None
    assert table.find_commit("nobody", 1) is None

    # The retry of identifier 2 is a no-op; identifier 3 is new.
    assert commit(table, range(10, 20), 2) == landed
    commit(table, range(20, 30), 3)
    assert table.read().num_rows == 40
    ledger = f"commit-ledger/{user_digest(USER)}/commit-{landed}"
    assert ledger in files_under(Path(catalog.warehouse.removeprefix("file://")) / "db.db" / "events")


def test_the_newest_commit_and_its_data_snapshot_are_kept(catalog: pc.Catalog) -> None:
    """A compacting writer's COMPACT shares the write's identifier: both are recorded."""
    table = catalog.create_table("db.pk", schema=pa.schema([pa.field("k", pa.int64(), False), ("v", pa.string())]),
                                 primary_keys=["k"], options={"bucket": "1", "num-sorted-run.compaction-trigger": "2",
                                                              "full-compaction.delta-commits": "1"})
    for identifier in (1, 2):
        with table.new_write(commit_user=USER, commit_identifier=identifier, properties={"n": str(identifier)}) as w:
            w.write(pa.table({"k": [identifier], "v": ["x"]}, schema=table.arrow_schema))
            w.commit()
    kinds = [(s.commit_identifier, s.commit_kind) for s in table.snapshots()]
    assert kinds[-2:] == [(2, "APPEND"), (2, "COMPACT")]
    with table.new_write(commit_user="other") as w:
        w.write(pa.table({"k": [9], "v": ["y"]}, schema=table.arrow_schema))
        w.commit()
    expire_all_but_latest(table)
    newest = table.find_commit_record(USER, 1)
    data = table.find_commit_record(USER, 2, kinds=("APPEND", "OVERWRITE"))
    assert newest is not None and newest.commit_kind == "COMPACT" and newest.expired
    assert data is not None and data.commit_kind == "APPEND" and data.properties["n"] == "2"


def test_orphan_cleanup_keeps_the_ledger_and_a_rollback_to_an_older_tag_forgets_what_it_undid(
        catalog: pc.Catalog) -> None:
    table = catalog.create_table("db.events", schema=events([]).schema, options={"write-only": "true"})
    commit(table, range(0, 10), 1, user="early")
    table.create_tag("start")
    commit(table, range(10, 20), 1)
    commit(table, range(20, 30), 1, user="late")
    expire_all_but_latest(table)
    assert table.find_commit(USER, 1) == 2
    cleaned = table.remove_orphan_files(dry_run=False, older_than=int(time.time() * 1000) + 1000, force=True)
    assert not [p for p in cleaned.orphans if "commit-ledger" in p]
    assert table.find_commit(USER, 1) == 2

    table.rollback_to("start")  # back before snapshot 2: its commit is undone
    assert table.find_commit(USER, 1) is None
    assert table.find_commit("early", 1) == 1
    assert table.read().num_rows == 10


@pytest.mark.parametrize("kind", ["missing", "garbled"])
def test_an_unreadable_ledger_record_is_a_typed_error(catalog: pc.Catalog, kind: str) -> None:
    table = catalog.create_table("db.events", schema=events([]).schema, options={"write-only": "true"})
    landed = commit(table, range(0, 10), 1)
    commit(table, range(10, 20), 1, user="other")
    expire_all_but_latest(table)
    path = Path(table.path.removeprefix("file://")) / "commit-ledger" / user_digest(USER) / f"commit-{landed}"
    if kind == "missing":
        path.unlink()
        assert table.find_commit(USER, 1) is None
    else:
        path.write_text("{not json")
        with pytest.raises(pc.PaimonError, match="commit ledger file .* cannot be read"):
            table.find_commit(USER, 1)
