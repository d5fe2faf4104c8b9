"""Commands that change a table: compaction, expiry, orphan cleanup, tags, rollback, dropping
partitions. Every one that deletes shows what would go first and acts only when told: expiry
and orphan cleanup with ``--execute`` (otherwise a dry run), rollback, tag deletion and partition
drops with ``--yes`` or an answer at a terminal."""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import time

from paimon_core.catalog import Catalog
from paimon_core.cli.confirm import confirmed
from paimon_core.cli.inspect import time_arg
from paimon_core.cli.output import BYTES, TIME, Listing, human_bytes, render
from paimon_core.cli.progress import ProgressBar
from paimon_core.cli.times import format_time
from paimon_core.errors import OptionError
from paimon_core.maintenance.orphans import DAY_MS, SAFE_FLOOR_MS


def cmd_compact(catalog: Catalog, args: argparse.Namespace) -> Listing:
    table = catalog.get_table(args.table)
    bar = ProgressBar()
    try:
        result = table.compact(args.partition or None, args.bucket or None, full=args.full, progress=bar)
    finally:
        bar.close()
    rows = [(b.partition or "-", b.bucket, b.reason, b.output_level, b.files_in, b.files_out, b.files_upgraded,
             b.bytes_in, b.bytes_out, "/".join(map(str, b.level_files_before)),
             "/".join(map(str, b.level_files_after))) for b in result.buckets]
    return Listing(("partition", "bucket", "reason", "to level", "files in", "files out", "moved", "bytes in",
                    "bytes out", "files per level before", "after"), rows, {"bytes in": BYTES, "bytes out": BYTES},
                   footer=(result.summary(),))


def cmd_expire_snapshots(catalog: Catalog, args: argparse.Namespace) -> Listing:
    table = catalog.get_table(args.table)
    execute = args.execute or args.yes
    bar = ProgressBar()
    try:
        plan = table.expire_snapshots(dry_run=not execute, older_than=time_arg(args.older_than, "--older-than"),
                                      retain_min=args.retain_min, retain_max=args.retain_max,
                                      max_deletes=args.max_deletes, progress=bar)
    finally:
        bar.close()
    kinds = (("snapshot", [table.snapshot_store.file(i) for i in plan.snapshots]), ("data", plan.data_files),
             ("changelog", plan.changelog_files), ("index", plan.index_files), ("metadata", plan.metadata_files))
    rows = [(kind, plan.file_sizes.get(path), path) for kind, paths in kinds for path in paths]
    hint = () if execute or not plan.changes else ("dry run: nothing was deleted; pass --execute to expire",)
    return Listing(("file", "size", "path"), rows, {"size": BYTES}, footer=(plan.summary(), *hint))


def cmd_remove_orphan_files(catalog: Catalog, args: argparse.Namespace) -> Listing:
    table = catalog.get_table(args.table)
    now = int(time.time() * 1000)
    older_than = time_arg(args.older_than, "--older-than")
    older_than = now - DAY_MS if older_than is None else older_than
    if older_than > now - SAFE_FLOOR_MS and not args.force:
        raise OptionError(f"--older-than {format_time(older_than)} is within {SAFE_FLOOR_MS // 60000} minutes of "
                          "now, where the files of commits in flight live; pass --force if no writer of "
                          f"{table.name} is running")
    execute = args.execute or args.yes
    bar = ProgressBar()
    try:
        result = table.remove_orphan_files(older_than=older_than, dry_run=not execute, force=args.force,
                                           progress=bar)
    finally:
        bar.close()
    rows = [(result.file_sizes.get(path), path) for path in result.orphans]
    hint = () if execute or not result.orphans else ("dry run: nothing was deleted; pass --execute to delete",)
    return Listing(("size", "path"), rows, {"size": BYTES}, footer=(result.summary(), *hint))


def cmd_create_tag(catalog: Catalog, args: argparse.Namespace) -> Listing:
    tag = catalog.get_table(args.table).create_tag(args.name, args.snapshot)
    return Listing(("tag", "snapshot", "committed"), [(tag.name, tag.snapshot_id, tag.snapshot.time_millis)],
                   {"committed": TIME})


def cmd_delete_tag(catalog: Catalog, args: argparse.Namespace) -> Listing:
    table = catalog.get_table(args.table)
    tag = next((t for t in table.list_tags() if t.name == args.name), None)
    if tag is None:
        raise OptionError(f"tag {args.name!r} of table {table.name} does not exist; tags are "
                          f"{[t.name for t in table.list_tags()]}")
    shown = Listing(("tag", "snapshot", "committed", "records"),
                    [(tag.name, tag.snapshot_id, tag.snapshot.time_millis, tag.snapshot.total_record_count)],
                    {"committed": TIME})
    retained = table.snapshot_store.exists(tag.snapshot_id)
    note = "" if retained else " (its snapshot has expired: time travel to it ends with the tag)"
    print_plan(args, shown, f"delete tag {tag.name} of {table.name}{note}; files only it keeps become orphans "
                            "for remove-orphan-files")
    confirmed(f"Delete tag {tag.name}?", yes=args.yes)
    table.delete_tag(tag.name)
    return Listing(("tag", "deleted"), [(tag.name, True)])


def cmd_rollback(catalog: Catalog, args: argparse.Namespace) -> Listing:
    table = catalog.get_table(args.table)
    target: int | str | dt.datetime
    if args.tag is not None:
        target = args.tag
    elif args.to_timestamp is not None:
        millis = time_arg(args.to_timestamp, "--to-timestamp")
        assert millis is not None
        target = dt.datetime.fromtimestamp(millis / 1000, tz=dt.UTC)
    else:
        target = args.snapshot
    plan = table.rollback_to(target, dry_run=True)
    removed = [(i, "snapshot", "removed") for i in plan.removed_snapshots] + \
        [(t, "tag", "removed") for t in plan.removed_tags]
    print_plan(args, Listing(("id", "what", "change"), removed), plan.summary() + "; stop its writers first")
    if not plan.removed_snapshots and not plan.removed_tags and plan.restored_from_tag is None:
        return Listing(("table", "snapshot"), [(table.name, plan.snapshot_id)], footer=("nothing to roll back",))
    confirmed(f"Roll {table.name} back to snapshot {plan.snapshot_id}?", yes=args.yes)
    done = table.rollback_to(target)
    return Listing(("table", "snapshot", "removed snapshots", "removed tags"),
                   [(done.table, done.snapshot_id, list(done.removed_snapshots), list(done.removed_tags))],
                   footer=(done.summary(),))


def cmd_drop_partition(catalog: Catalog, args: argparse.Namespace) -> Listing:
    table = catalog.get_table(args.table)
    plan = table.drop_partitions(args.partition, dry_run=True)
    print_plan(args, Listing(("partition",), [(p,) for p in plan.partitions]),
               f"{plan.summary()} ({human_bytes(plan.bytes)})")
    confirmed(f"Drop {len(plan.partitions)} partitions of {table.name}?", yes=args.yes)
    done = table.drop_partitions(args.partition, dry_run=False)
    return Listing(("partition", "dropped in snapshot"), [(p, done.snapshot_id) for p in done.partitions],
                   footer=(done.summary(),))


def cmd_mark_partition_done(catalog: Catalog, args: argparse.Namespace) -> Listing:
    done = catalog.get_table(args.table).mark_partitions_done(args.partition)
    return Listing(("partition", "first marked", "last marked"),
                   [(p, f.creation_time, f.modification_time) for p, f in zip(done.partitions, done.files)],
                   {"first marked": TIME, "last marked": TIME}, footer=(done.summary(),))


def print_plan(args: argparse.Namespace, listing: Listing, summary: str) -> None:
    """Show what a confirmed command will change before asking (on stderr for --format json/csv,
    so stdout stays parseable)."""
    stream = sys.stdout if args.format == "table" else sys.stderr
    if listing.rows:
        print(render(listing, "table"), file=stream)
    print(summary, file=stream)
