"""Snapshot expiry, tags and rollback on real tables: nothing reachable is ever deleted, and
everything expiry frees is gone (the files on disk are exactly what is still reachable)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import paimon_core as pc
from paimon_core.cli import main
from paimon_core.errors import (
    InvalidNameError,
    OptionError,
    SnapshotExpiredError,
    SnapshotNotFoundError,
    TagExistsError,
    UnsupportedFeatureError,
)
from paimon_core.fileio import FileStatus
from paimon_core.maintenance.auto_tags import create_automatic_tags
from paimon_core.maintenance.orphans import OrphanFilesClean
from paimon_core.manifest import read_index_manifest, read_manifest_list
from paimon_core.read.changes import change_entries
from paimon_core.read.scan import PartitionDecoder, live_entries, read_manifest_metas
from paimon_core.snapshot import Snapshot
from tests.integration.conftest import files_under, reopened

SCHEMA = pa.schema([pa.field("k", pa.int64(), False), ("v", pa.string()), ("dt", pa.string())])


def rows(keys: range, tag: str, dt: str = "2024-01-01") -> pa.Table:
    return pa.table({"k": list(keys), "v": [f"{tag}-{k}" for k in keys], "dt": [dt] * len(keys)}, schema=SCHEMA)


def pk_table(catalog: pc.Catalog, name: str = "t", **options: str) -> pc.Table:
    return catalog.create_table(f"db.{name}", schema=SCHEMA, primary_keys=["dt", "k"], partition_keys=["dt"],
                                options={"bucket": "2", "num-sorted-run.compaction-trigger": "2",
                                         "changelog-producer": "input", **options})


def now_ms() -> int:
    return int(time.time() * 1000) + 1


def reachable(table: pc.Table) -> set[str]:
    """Every file (relative to the table) that a retained snapshot or a tag references (a tag its
    data only: as in Java, tags keep no changelog)."""
    root = Path(table.path)
    out = {str(p.relative_to(root)) for p in root.glob("schema/*")} | {"snapshot/LATEST", "snapshot/EARLIEST"}
    out |= {str(p.relative_to(root)) for p in root.glob("tag/*")}
    retained = {s.id for s in table.snapshots()}
    snapshots: list[Snapshot] = table.snapshots() + [
        replace(t.snapshot, changelog_manifest_list=None) for t in table.list_tags() if t.snapshot.id not in retained]
    out |= {f"snapshot/snapshot-{s.id}" for s in table.snapshots()}
    decode = PartitionDecoder(table.schema.partition_types)
    for path in sorted(root.glob("changelog/changelog-*")):  # long-lived: only their changelog remains
        kept = Snapshot.from_json(path.read_bytes())
        out.add(str(path.relative_to(root)))
        if kept.changelog_manifest_list is None:
            continue
        out.add(f"manifest/{kept.changelog_manifest_list}")
        metas = read_manifest_list(table.file_io, table.paths.manifest_file(kept.changelog_manifest_list))
        out |= {f"manifest/{m.file_name}" for m in metas}
        entries = change_entries(table.file_io, table.paths, kept, primary_key=True, producer="input")
        out |= {f"dt={decode(e.partition)[0]}/bucket-{e.bucket}/{e.file.file_name}" for e in entries}
    out |= {str(p.relative_to(root)) for p in root.glob("changelog/[EL]*") if (root / "changelog").exists()}
    for snapshot in snapshots:
        lists = [snapshot.base_manifest_list, snapshot.delta_manifest_list, snapshot.changelog_manifest_list]
        out |= {f"manifest/{name}" for name in lists if name}
        out |= {f"manifest/{m.file_name}" for m in read_manifest_metas(table.file_io, table.paths, snapshot)}
        if snapshot.changelog_manifest_list:
            metas = read_manifest_list(table.file_io, table.paths.manifest_file(snapshot.changelog_manifest_list))
            out |= {f"manifest/{m.file_name}" for m in metas}
        entries = live_entries(table.file_io, table.paths, snapshot)
        entries += change_entries(table.file_io, table.paths, snapshot, primary_key=True, producer="input")
        out |= {f"dt={decode(e.partition)[0]}/bucket-{e.bucket}/{e.file.file_name}" for e in entries}
        if snapshot.index_manifest:
            out.add(f"manifest/{snapshot.index_manifest}")
            index = read_index_manifest(table.file_io, table.paths.manifest_file(snapshot.index_manifest))
            out |= {f"index/{e.file_name}" for e in index}
    return out


def on_disk(table: pc.Table) -> set[str]:
    return files_under(Path(table.path)) - {f for f in files_under(Path(table.path)) if f.startswith("consumer/")}


def history(table: pc.Table, commits: int) -> dict[int, list[dict[str, Any]]]:
    """Commits of updates and deletes; the table's contents after each snapshot."""
    states: dict[int, list[dict[str, Any]]] = {}
    for c in range(commits):
        table.write(rows(range(c, c + 8), f"c{c}", dt=f"2024-01-0{1 + c % 2}"))
        if c % 3 == 2:
            table.delete(pa.table({"k": [c], "dt": [f"2024-01-0{1 + c % 2}"]}))
    for snapshot in table.snapshots():
        states[snapshot.id] = sorted(table.read(snapshot_id=snapshot.id).to_pylist(), key=lambda r: (r["dt"], r["k"]))
    return states


def assert_reads(table: pc.Table, states: dict[int, list[dict[str, Any]]]) -> None:
    for snapshot in table.snapshots():
        got = sorted(table.read(snapshot_id=snapshot.id).to_pylist(), key=lambda r: (r["dt"], r["k"]))
        assert got == states[snapshot.id], f"snapshot {snapshot.id} reads differently after maintenance"
    for tag in table.list_tags():
        got = sorted(table.read(tag=tag.name).to_pylist(), key=lambda r: (r["dt"], r["k"]))
        assert got == states[tag.snapshot_id], f"tag {tag.name} reads differently after maintenance"


def test_expiry_frees_exactly_what_nothing_reaches(catalog: pc.Catalog) -> None:
    table = pk_table(catalog)
    states = history(table, 10)
    table.create_tag("early", 4)
    latest = table.latest_snapshot().id
    assert on_disk(table) == reachable(table)  # nothing unreferenced before
    plan = table.expire_snapshots(older_than=now_ms(), retain_min=3)  # a dry run by default
    assert plan.dry_run and plan.snapshots == tuple(range(1, latest - 2)) and plan.data_files
    assert table.snapshot_store.earliest_id() == 1 and on_disk(table) == reachable(table)

    done = table.expire_snapshots(dry_run=False, older_than=now_ms(), retain_min=3)
    assert done.snapshots == plan.snapshots and done.data_files == plan.data_files and not done.dry_run
    assert [s.id for s in table.snapshots()] == [latest - 2, latest - 1, latest]
    assert (Path(table.path) / "snapshot" / "EARLIEST").read_text() == str(latest - 2)
    assert on_disk(table) == reachable(table), "expiry left files behind or deleted reachable ones"
    assert_reads(table, states)
    assert table.expire_snapshots(dry_run=False, older_than=now_ms(), retain_min=3).snapshots == ()


def test_time_retention_consumers_and_limits_keep_snapshots(catalog: pc.Catalog) -> None:
    table = pk_table(catalog)
    history(table, 6)
    latest = table.latest_snapshot().id
    assert table.expire_snapshots(retain_min=1).snapshots == ()  # all younger than snapshot.time-retained (1 h)
    table.stream("from-snapshot", snapshot_id=4, consumer_id="reader").checkpoint()
    assert table.consumer("reader") == 4
    assert table.expire_snapshots(older_than=now_ms(), retain_min=1).snapshots == (1, 2, 3)
    assert table.expire_snapshots(older_than=now_ms(), retain_min=1, max_deletes=2).snapshots == (1, 2)
    assert len(table.expire_snapshots(older_than=now_ms(), retain_min=latest - 1).snapshots) == 1
    with pytest.raises(OptionError, match="retain_min"):
        table.expire_snapshots(retain_min=0)


def test_a_tag_keeps_its_snapshot_readable_after_expiry_and_rollback_restores_it(catalog: pc.Catalog) -> None:
    table = pk_table(catalog)
    states = history(table, 8)
    tag = table.create_tag("v1", 3)
    assert [t.name for t in table.list_tags()] == ["v1"] and tag.snapshot_id == 3
    with pytest.raises(TagExistsError):
        table.create_tag("v1")
    with pytest.raises(InvalidNameError):
        table.create_tag("123")
    table.expire_snapshots(dry_run=False, older_than=now_ms(), retain_min=2)
    with pytest.raises(SnapshotNotFoundError):
        table.read(snapshot_id=3)
    assert sorted(table.read(tag="v1").to_pylist(), key=lambda r: (r["dt"], r["k"])) == states[3]
    assert on_disk(table) == reachable(table)

    done = table.rollback_to("v1")
    assert done.restored_from_tag == "v1" and [s.id for s in table.snapshots()] == [3]
    assert sorted(table.read().to_pylist(), key=lambda r: (r["dt"], r["k"])) == states[3]
    table.write(rows(range(100, 102), "after"))  # writing goes on from the restored snapshot
    assert table.snapshots()[1].id == 4 and table.read().num_rows == len(states[3]) + 2


def test_rollback_to_a_snapshot_removes_newer_snapshots_and_tags(catalog: pc.Catalog, capsys: Any) -> None:
    table = pk_table(catalog)
    states = history(table, 6)
    table.create_tag("old", 2)
    table.create_tag("new", 7)
    assert main(["--warehouse", str(Path(table.path).parents[1]), "rollback", "db.t", "--snapshot", "5", "--yes"]) == 0
    assert "rolled back to snapshot 5" in capsys.readouterr().out
    assert [s.id for s in table.snapshots()] == [1, 2, 3, 4, 5]
    assert [t.name for t in table.list_tags()] == ["old"]
    assert_reads(table, states)
    table.write(rows(range(50, 51), "x"))
    assert table.latest_snapshot().id == 6


def test_a_reader_whose_snapshot_expires_gets_a_clear_error(catalog: pc.Catalog) -> None:
    table = pk_table(catalog, **{"write-only": "true"})
    for c in range(4):
        table.write(rows(range(c * 100, c * 100 + 50), f"c{c}"))
    table.compact(full=True)
    batches = table.to_batches(snapshot_id=2, batch_size=10)  # planned: its files are read as it is iterated
    table.expire_snapshots(dry_run=False, older_than=now_ms(), retain_min=1)
    with pytest.raises(SnapshotExpiredError, match="snapshot 2 of table db.t was expired"):
        for _ in batches:
            pass


def test_unreadable_metadata_stops_expiry_before_anything_is_deleted(catalog: pc.Catalog) -> None:
    table = pk_table(catalog)
    history(table, 5)
    before = on_disk(table)
    snapshot = table.snapshot(3)
    (Path(table.path) / "manifest" / snapshot.delta_manifest_list).write_bytes(b"not avro")
    with pytest.raises(pc.PaimonError):
        reopened(table).expire_snapshots(dry_run=False, older_than=now_ms(), retain_min=1)
    assert on_disk(table) == before


def test_changelog_outlives_its_snapshots_when_its_retention_is_longer(catalog: pc.Catalog) -> None:
    table = pk_table(catalog, **{"snapshot.num-retained.min": "2", "changelog.num-retained.min": "6"})
    history(table, 6)
    everything = table.read_changes()
    latest = table.latest_snapshot().id
    done = table.expire_snapshots(dry_run=False, older_than=now_ms())
    assert done.snapshots == tuple(range(1, latest - 1)) and done.changelogs_kept == done.snapshots
    assert not done.changelog_files  # kept for streams
    assert [s.id for s in table.snapshots()] == [latest - 1, latest]
    with pytest.raises(SnapshotNotFoundError):
        table.read(snapshot_id=1)
    assert table.read_changes().equals(everything)  # read through changelog/changelog-N
    assert sum(b.data.num_rows for b in table.stream("from-snapshot", snapshot_id=1, until_latest=True)) == \
        everything.num_rows
    assert on_disk(table) == reachable(table)

    again = table.expire_snapshots(dry_run=False, older_than=now_ms())  # now changelog retention applies
    assert again.changelogs_expired == tuple(range(1, latest - 5)) and again.changelog_files
    assert sorted(int(p.name.split("-")[1]) for p in (Path(table.path) / "changelog").glob("changelog-*")) == \
        list(range(latest - 5, latest - 1))
    assert on_disk(table) == reachable(table)
    assert table.read_changes(latest - 6).num_rows == table.read_changes().num_rows > 0
    with pytest.raises(SnapshotNotFoundError, match="expired"):
        table.read_changes(1)
    table.remove_orphan_files(older_than=now_ms(), dry_run=False, force=True)
    assert on_disk(table) == reachable(table)


def test_expiry_refuses_to_drop_changelog_that_is_data_files(catalog: pc.Catalog) -> None:
    table = pk_table(catalog, **{"changelog.num-retained.min": "50", "changelog-producer": "none"})
    history(table, 3)
    with pytest.raises(UnsupportedFeatureError, match="changelog-producer none"):
        table.expire_snapshots(older_than=now_ms(), retain_min=1)


def test_cli_expires_and_tags(catalog: pc.Catalog, capsys: Any) -> None:
    table = pk_table(catalog)
    history(table, 4)
    warehouse = str(Path(table.path).parents[1])
    assert main(["--warehouse", warehouse, "create-tag", "db.t", "keep", "--snapshot", "2"]) == 0
    assert main(["--warehouse", warehouse, "tags", "db.t"]) == 0
    assert "keep" in capsys.readouterr().out
    assert main(["--warehouse", warehouse, "expire-snapshots", "db.t", "--retain-min", "1",
                 "--older-than", str(now_ms())]) == 0
    assert "would expire snapshots 1.." in capsys.readouterr().out
    assert main(["--warehouse", warehouse, "expire-snapshots", "db.t", "--retain-min", "1", "--execute",
                 "--older-than", str(now_ms())]) == 0
    assert "expired snapshots 1.." in capsys.readouterr().out
    assert len(table.snapshots()) == 1 and table.read(tag="keep").num_rows > 0
    assert main(["--warehouse", warehouse, "delete-tag", "db.t", "keep", "--yes"]) == 0
    assert table.list_tags() == []


@pytest.mark.parametrize("write_only", [False, True])
def test_maintaining_writers_expire_and_write_only_ones_do_not(catalog: pc.Catalog, write_only: bool) -> None:
    table = pk_table(catalog, **{"snapshot.time-retained": "1 ms", "snapshot.num-retained.min": "2",
                                 "write-only": str(write_only).lower()})
    for c in range(5):
        table.write(rows(range(c, c + 3), f"c{c}"))
        time.sleep(0.005)
    kept = len(table.snapshots())
    assert kept == 5 if write_only else kept <= 3
    assert sorted(r["k"] for r in table.read().to_pylist()) == list(range(7))
    assert on_disk(table) == reachable(table)


def test_orphan_cleanup_removes_exactly_the_unreferenced_files(catalog: pc.Catalog) -> None:
    table = pk_table(catalog)
    states = history(table, 8)
    table.create_tag("kept", 3)
    table.create_tag("dropped", 5)
    table.rollback_to(7)  # leaves the data and manifests of snapshots 8.. behind
    table.delete_tag("dropped")
    root = Path(table.path)
    (root / "dt=2024-01-01" / "bucket-0" / "data-crashed-0.parquet").write_bytes(b"half a file")
    (root / "manifest" / "manifest-crashed-0").write_bytes(b"x")
    (root / "snapshot" / ".snapshot-99.tmp").write_bytes(b"{}")
    leftovers = on_disk(table) - reachable(table)
    assert {"dt=2024-01-01/bucket-0/data-crashed-0.parquet", "manifest/manifest-crashed-0",
            "snapshot/.snapshot-99.tmp"} <= leftovers
    assert any(f.startswith("manifest/") for f in leftovers - {"manifest/manifest-crashed-0"})  # rollback's

    assert table.remove_orphan_files().orphans == ()  # the default window: a day old, and these are fresh
    with pytest.raises(OptionError, match="force"):
        table.remove_orphan_files(older_than=now_ms())
    dry = table.remove_orphan_files(older_than=now_ms(), force=True)
    assert dry.dry_run and {str(Path(p).relative_to(root)) for p in dry.orphans} == leftovers
    assert on_disk(table) - reachable(table) == leftovers

    done = table.remove_orphan_files(older_than=now_ms(), dry_run=False, force=True)
    assert len(done.orphans) == len(leftovers) and done.bytes > 0
    assert on_disk(table) == reachable(table)
    assert_reads(table, {i: s for i, s in states.items() if i <= 7})


def test_orphan_cleanup_stops_on_unreadable_metadata(catalog: pc.Catalog) -> None:
    table = pk_table(catalog)
    history(table, 4)
    (Path(table.path) / "manifest" / "manifest-crashed-0").write_bytes(b"x")
    (Path(table.path) / "manifest" / table.snapshot(2).delta_manifest_list).write_bytes(b"not avro")
    before = on_disk(table)
    with pytest.raises(pc.PaimonError):
        reopened(table).remove_orphan_files(older_than=now_ms(), dry_run=False, force=True)
    assert on_disk(table) == before


def test_cli_removes_orphan_files(catalog: pc.Catalog, capsys: Any) -> None:
    table = pk_table(catalog)
    history(table, 3)
    (Path(table.path) / "manifest" / "manifest-crashed-0").write_bytes(b"x")
    warehouse = str(Path(table.path).parents[1])
    assert main(["--warehouse", warehouse, "remove-orphan-files", "db.t", "--force",
                 "--older-than", str(now_ms())]) == 0
    assert "manifest-crashed-0" in capsys.readouterr().out
    assert main(["--warehouse", warehouse, "remove-orphan-files", "db.t", "--force", "--execute",
                 "--older-than", str(now_ms())]) == 0
    assert "deleted 1 orphan files" in capsys.readouterr().out
    assert on_disk(table) == reachable(table)


def manifests_of(table: pc.Table) -> list[Any]:
    return read_manifest_metas(table.file_io, table.paths, table.latest_snapshot())


def test_minor_manifest_merges_keep_the_base_list_short(catalog: pc.Catalog) -> None:
    table = pk_table(catalog, "m", **{"manifest.merge-min-count": "5", "write-only": "true"})
    counts = []
    for c in range(40):
        table.write(rows(range(c * 2, c * 2 + 2), f"c{c}"))
        counts.append(len(manifests_of(table)))
    assert max(counts[10:]) <= 6  # without merging: one more manifest per commit (40 at the end)
    assert sorted(r["k"] for r in table.read().to_pylist()) == list(range(80))
    for snapshot in table.snapshots()[::7]:
        assert table.read(snapshot_id=snapshot.id).num_rows == 2 * snapshot.id


def test_full_manifest_merges_leave_only_live_files(catalog: pc.Catalog) -> None:
    table = pk_table(catalog, "f", **{"manifest.full-compaction-threshold-size": "1 b"})
    states = history(table, 8)  # compactions and deletes: DELETE entries to cancel
    metas = manifests_of(table)
    base = read_manifest_list(table.file_io, table.paths.manifest_file(table.latest_snapshot().base_manifest_list))
    assert all(m.num_deleted_files == 0 for m in base)
    live = live_entries(table.file_io, table.paths, table.latest_snapshot())
    assert sum(m.num_added_files - m.num_deleted_files for m in metas) == len(live)
    assert_reads(table, states)


def test_idle_consumers_stop_pinning_snapshots(catalog: pc.Catalog) -> None:
    table = pk_table(catalog, "c", **{"consumer.expiration-time": "1 h"})
    history(table, 5)
    table.stream("from-snapshot", snapshot_id=2, consumer_id="idle").checkpoint()
    table.stream("from-snapshot", snapshot_id=4, consumer_id="busy").checkpoint()
    assert table.expire_snapshots(older_than=now_ms(), retain_min=1).snapshots == (1,)
    consumer_file = Path(table.path) / "consumer" / "consumer-idle"
    two_hours_ago = time.time() - 7200
    os.utime(consumer_file, (two_hours_ago, two_hours_ago))
    done = table.expire_snapshots(dry_run=False, older_than=now_ms(), retain_min=1)
    assert done.snapshots == (1, 2, 3) and done.stale_consumers == ("idle",)
    assert [c.consumer_id for c in table.consumers()] == ["busy"]


def test_automatic_daily_tags_keep_each_days_last_snapshot(catalog: pc.Catalog) -> None:
    table = pk_table(catalog, "a", **{"tag.automatic-creation": "process-time", "tag.num-retained-max": "2",
                                      "write-only": "true"})
    history(table, 3)
    last = table.latest_snapshot()
    day = 86_400_000
    assert create_automatic_tags(table.context(), last.time_millis).created is None  # no snapshot before today
    created = []
    for days_later in (1, 1, 2, 3):  # the clock moves on; each run tags the day that ended last
        result = create_automatic_tags(table.context(), last.time_millis + days_later * day)
        created.append(result.created)
        if result.created:
            assert result.snapshot_id == last.id  # the newest snapshot by the end of that day
    assert created[1] is None  # that day is tagged already
    names = [n for n in created if n]
    assert len(names) == 3 and [t.name for t in table.list_tags()] == names[1:]  # tag.num-retained-max 2
    assert table.read(tag=names[-1]).num_rows == table.read().num_rows


def test_a_commit_landing_during_orphan_cleanup_keeps_its_files(catalog: pc.Catalog) -> None:
    """Candidates are listed before references are collected: files an in-flight write had already
    written (candidates, even with a zero window) are referenced by the time they are judged."""
    table = catalog.create_table("db.log", schema=SCHEMA, partition_keys=["dt"], options={"write-buffer-size": "1 kb"})
    table.write(rows(range(0, 50), "first"))
    writer = table.new_write()
    writer.write(rows(range(100, 400), "in-flight"))  # over the buffer: data files written, not committed
    in_flight = on_disk(table) - reachable(table)
    assert any(f.startswith("dt=") for f in in_flight)

    class CommitMeanwhile(OrphanFilesClean):
        def _candidates(self) -> Iterator[FileStatus]:
            yield from super()._candidates()
            writer.commit()  # lands right after the candidates were listed

    result = CommitMeanwhile(table.context()).run(older_than_ms=now_ms(), dry_run=False, force=True)
    assert not {str(Path(p).relative_to(Path(table.path))) for p in result.orphans} & in_flight
    assert sorted(r["k"] for r in table.read().to_pylist()) == list(range(50)) + list(range(100, 400))
    assert on_disk(table) == reachable(table)


def test_older_than_takes_a_datetime(catalog: pc.Catalog) -> None:
    import datetime as dt

    table = pk_table(catalog, "d")
    history(table, 3)
    later = dt.datetime.now() + dt.timedelta(seconds=1)
    assert table.expire_snapshots(older_than=later, retain_min=1).snapshots
    assert table.expire_snapshots(older_than=dt.datetime(2000, 1, 1), retain_min=1).snapshots == ()
