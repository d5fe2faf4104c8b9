"""The ``paimon`` command line: inspect a warehouse's tables, snapshots, files and LSM shape; compact."""

from __future__ import annotations

import argparse
import datetime
import os
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from paimon_core.catalog import Catalog
from paimon_core.errors import OptionError, PaimonError


def _format_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A plain-text table with aligned columns."""
    cells = [[str(h) for h in headers]] + [["" if v is None else str(v) for v in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _time(millis: int) -> str:
    return datetime.datetime.fromtimestamp(millis / 1000, tz=datetime.UTC).strftime(
        "%Y-%m-%d %H:%M:%S UTC")


def cmd_tables(catalog: Catalog, args: argparse.Namespace) -> str:
    databases = [args.database] if args.database else catalog.list_databases()
    rows = []
    for database in databases:
        for name in catalog.list_tables(database):
            table = catalog.get_table(f"{database}.{name}")
            latest = table.latest_snapshot()
            rows.append((f"{database}.{name}", ",".join(table.schema.partition_keys) or "-",
                         latest.id if latest else "-", latest.total_record_count if latest else 0))
    return _format_table(("table", "partitioned by", "snapshot", "records"), rows)


def cmd_snapshots(catalog: Catalog, args: argparse.Namespace) -> str:
    table = catalog.get_table(args.table)
    rows = [(s.id, s.commit_kind, _time(s.time_millis), s.schema_id, s.delta_record_count,
             s.total_record_count, s.commit_user) for s in table.snapshots()]
    return _format_table(("id", "kind", "committed", "schema", "delta records", "total records",
                          "commit user"), rows)


def cmd_files(catalog: Catalog, args: argparse.Namespace) -> str:
    table = catalog.get_table(args.table)
    files = sorted(table.files(args.snapshot), key=lambda f: (f.partition, f.bucket, f.level, f.file_name))
    rows = [(f.partition or "-", f.bucket, f.level, f.row_count, f.file_size, f.file_name) for f in files]
    return _format_table(("partition", "bucket", "level", "rows", "bytes", "file"), rows)


def cmd_read(catalog: Catalog, args: argparse.Namespace) -> str:
    table = catalog.get_table(args.table)
    columns = args.columns.split(",") if args.columns else None
    reader = table.to_batches(columns, snapshot_id=args.snapshot)
    rows: list[dict[str, object]] = []
    for batch in reader:
        rows.extend(batch.slice(0, args.limit - len(rows)).to_pylist())
        if len(rows) >= args.limit:
            break
    headers = reader.schema.names
    return _format_table(headers, [[row[h] for h in headers] for row in rows])


def cmd_changes(catalog: Catalog, args: argparse.Namespace) -> str:
    table = catalog.get_table(args.table)
    if args.start is not None and args.end is not None and args.start > args.end:
        raise OptionError(f"changes of table {table.name}: --from {args.start} is after --to {args.end}")
    columns = args.columns.split(",") if args.columns else None
    rows: list[list[object]] = []
    headers: list[str] = ["snapshot"]
    for batch in table.iter_changes(args.start, args.end, columns=columns):
        headers = ["snapshot", *batch.data.column_names]
        for row in batch.data.slice(0, args.limit - len(rows)).to_pylist():
            rows.append([batch.snapshot_id, *row.values()])
        if len(rows) >= args.limit:
            break
    return _format_table(headers, rows)


class _Parser(argparse.ArgumentParser):
    """Usage errors as one line on stderr (``paimon <command>: error: ...``) and exit code 2,
    like every other error of the command line (those exit with 1): no usage dump to scroll past."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _snapshot_id(text: str) -> int:
    """A snapshot id argument: a non-negative integer (ids start at 1; 0 means before the first)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"snapshot id {text!r} is not an integer") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"snapshot id {text!r} must not be negative")
    return value


def _partition_spec(text: str) -> dict[str, str]:
    """``k=v[,k2=v2]`` as a partition spec (values are cast to the column types by the table)."""
    spec = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        if not sep or not key.strip():
            raise argparse.ArgumentTypeError(f"partition {text!r} is not k=v[,k2=v2]")
        spec[key.strip()] = value.strip()
    return spec


def cmd_lsm(catalog: Catalog, args: argparse.Namespace) -> str:
    state = catalog.get_table(args.table).lsm_state(args.partition or None)
    rows = state.rows()
    body = _format_table(list(rows[0]) if rows else ["partition", "bucket"], [list(r.values()) for r in rows])
    summary = (f"snapshot {state.snapshot_id}: {len(state.buckets)} buckets, max L0 files {state.max_level0_files}, "
               f"max sorted runs {state.max_sorted_runs} (stop trigger {state.stop_trigger}), "
               f"debt {state.debt_bytes} bytes")
    return f"{body}\n{summary}"


def cmd_compact(catalog: Catalog, args: argparse.Namespace) -> str:
    table = catalog.get_table(args.table)
    result = table.compact(args.partition or None, args.bucket or None, full=args.full)
    rows = [(b.partition or "-", b.bucket, b.reason, b.output_level, b.files_in, b.files_out, b.files_upgraded,
             b.bytes_in, b.bytes_out, "/".join(map(str, b.level_files_before)),
             "/".join(map(str, b.level_files_after))) for b in result.buckets]
    body = _format_table(("partition", "bucket", "reason", "to level", "files in", "files out", "moved",
                          "bytes in", "bytes out", "files per level before", "after"), rows) if rows else ""
    return f"{body}\n{result.summary()}".lstrip()


def cmd_expire_snapshots(catalog: Catalog, args: argparse.Namespace) -> str:
    table = catalog.get_table(args.table)
    plan = table.expire_snapshots(dry_run=args.dry_run, older_than=args.older_than_ms,
                                  retain_min=args.retain_min, retain_max=args.retain_max, max_deletes=args.max_deletes)
    listed = [f"  {path}" for path in (*plan.data_files, *plan.changelog_files, *plan.index_files)] if args.dry_run \
        else []
    return "\n".join([*listed, plan.summary()])


def cmd_remove_orphan_files(catalog: Catalog, args: argparse.Namespace) -> str:
    table = catalog.get_table(args.table)
    result = table.remove_orphan_files(older_than=args.older_than_ms, dry_run=args.dry_run, force=args.force)
    listed = [f"  {path}" for path in result.orphans] if args.dry_run else []
    return "\n".join([*listed, result.summary()])


def cmd_tags(catalog: Catalog, args: argparse.Namespace) -> str:
    tags = catalog.get_table(args.table).list_tags()
    return _format_table(("tag", "snapshot", "commit kind", "records"),
                         [(t.name, t.snapshot_id, t.snapshot.commit_kind, t.snapshot.total_record_count) for t in tags])


def cmd_create_tag(catalog: Catalog, args: argparse.Namespace) -> str:
    tag = catalog.get_table(args.table).create_tag(args.name, args.snapshot)
    return f"tag {tag.name} -> snapshot {tag.snapshot_id}"


def cmd_delete_tag(catalog: Catalog, args: argparse.Namespace) -> str:
    deleted = catalog.get_table(args.table).delete_tag(args.name)
    return f"tag {args.name} {'deleted' if deleted else 'did not exist'}"


def cmd_rollback(catalog: Catalog, args: argparse.Namespace) -> str:
    done = catalog.get_table(args.table).rollback_to(args.tag if args.tag is not None else args.snapshot)
    return (f"{done.table} rolled back to snapshot {done.snapshot_id}: removed snapshots "
            f"{list(done.removed_snapshots)}, tags {list(done.removed_tags)}")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="paimon", description="Inspect and compact Paimon tables.")
    parser.add_argument("--warehouse", default=os.environ.get("PAIMON_WAREHOUSE", "warehouse"),
                        help="warehouse path or URL (default $PAIMON_WAREHOUSE or ./warehouse)")
    commands = parser.add_subparsers(dest="command", required=True)
    tables = commands.add_parser("tables", help="list tables with their latest snapshot")
    tables.add_argument("database", nargs="?")
    tables.set_defaults(run=cmd_tables)
    snapshots = commands.add_parser("snapshots", help="list the snapshots of a table")
    snapshots.add_argument("table", help="database.table")
    snapshots.set_defaults(run=cmd_snapshots)
    files = commands.add_parser("files", help="list the live data files of a table")
    files.add_argument("table", help="database.table")
    files.add_argument("--snapshot", type=int, default=None)
    files.set_defaults(run=cmd_files)
    read = commands.add_parser("read", help="print the first rows of a table")
    read.add_argument("table", help="database.table")
    read.add_argument("--limit", type=int, default=20)
    read.add_argument("--columns", default=None, help="comma-separated projection")
    read.add_argument("--snapshot", type=int, default=None)
    read.set_defaults(run=cmd_read)
    changes = commands.add_parser("changes", help="print what snapshots changed (+I/-U/+U/-D rows)")
    changes.add_argument("table", help="database.table")
    changes.add_argument("--from", dest="start", type=_snapshot_id, default=None,
                         help="changes after this snapshot (exclusive; default: from the earliest)")
    changes.add_argument("--to", dest="end", type=_snapshot_id, default=None, help="up to this snapshot (inclusive)")
    changes.add_argument("--limit", type=int, default=100)
    changes.add_argument("--columns", default=None, help="comma-separated projection")
    changes.set_defaults(run=cmd_changes)
    lsm = commands.add_parser("lsm", help="show each bucket's levels, sorted runs and compaction debt")
    lsm.add_argument("table", help="database.table")
    lsm.add_argument("--partition", type=_partition_spec, action="append", help="k=v[,k2=v2]; repeatable")
    lsm.set_defaults(run=cmd_lsm)
    compact = commands.add_parser("compact", help="compact a table (one COMPACT snapshot)")
    compact.add_argument("table", help="database.table")
    compact.add_argument("--partition", type=_partition_spec, action="append", help="k=v[,k2=v2]; repeatable")
    compact.add_argument("--bucket", type=int, action="append", help="bucket number; repeatable")
    compact.add_argument("--full", action="store_true", help="rewrite every bucket into one sorted run")
    compact.set_defaults(run=cmd_compact)
    _add_maintenance(commands)
    return parser


def _add_maintenance(commands: Any) -> None:
    """Subcommands that expire, tag and roll back."""
    expire = commands.add_parser("expire-snapshots", help="expire old snapshots (Paimon's retention rule)")
    expire.add_argument("table", help="database.table")
    expire.add_argument("--dry-run", action="store_true", help="list what would be deleted, delete nothing")
    expire.add_argument("--older-than-ms", type=int, default=None,
                        help="keep snapshots current at or after this epoch-millisecond time")
    expire.add_argument("--retain-min", type=int, default=None)
    expire.add_argument("--retain-max", type=int, default=None)
    expire.add_argument("--max-deletes", type=int, default=None, help="most snapshots expired in this run")
    expire.set_defaults(run=cmd_expire_snapshots)
    orphans = commands.add_parser("remove-orphan-files", help="delete files nothing references any more")
    orphans.add_argument("table", help="database.table")
    orphans.add_argument("--dry-run", action="store_true", help="list them, delete nothing")
    orphans.add_argument("--older-than-ms", type=int, default=None,
                         help="only files older than this epoch-millisecond time (default a day ago)")
    orphans.add_argument("--force", action="store_true", help="allow a window under an hour (no writer running)")
    orphans.set_defaults(run=cmd_remove_orphan_files)
    tags = commands.add_parser("tags", help="list the tags of a table")
    tags.add_argument("table", help="database.table")
    tags.set_defaults(run=cmd_tags)
    create_tag = commands.add_parser("create-tag", help="tag a snapshot (default the latest)")
    create_tag.add_argument("table", help="database.table")
    create_tag.add_argument("name")
    create_tag.add_argument("--snapshot", type=int, default=None)
    create_tag.set_defaults(run=cmd_create_tag)
    delete_tag = commands.add_parser("delete-tag", help="delete a tag")
    delete_tag.add_argument("table", help="database.table")
    delete_tag.add_argument("name")
    delete_tag.set_defaults(run=cmd_delete_tag)
    rollback = commands.add_parser("rollback", help="make a snapshot or tag the latest state (stop writers first)")
    rollback.add_argument("table", help="database.table")
    target = rollback.add_mutually_exclusive_group(required=True)
    target.add_argument("--snapshot", type=int)
    target.add_argument("--tag")
    rollback.set_defaults(run=cmd_rollback)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        catalog = Catalog(args.warehouse)
        print(args.run(catalog, args))
    except (PaimonError, OSError) as exc:  # OSError: storage failures not wrapped below (they name the path)
        print(f"paimon: {_one_line(exc)}", file=sys.stderr)
        return 1
    return 0


def _one_line(exc: BaseException) -> str:
    """The error message on one line (some carry a multi-line detail from a library)."""
    return " ".join(str(exc).split()) or type(exc).__name__


if __name__ == "__main__":
    sys.exit(main())
