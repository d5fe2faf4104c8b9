"""The ``paimon`` command line: inspect a warehouse's tables, snapshots, files, rows and system
tables; create and alter tables; compact, expire, clean up, tag, roll back, drop partitions and mark them done.

Destructive commands never act by default: expiry and orphan cleanup are dry runs without
``--execute``; rollback, tag deletion and partition drops show what changes and need ``--yes``
(or an answer at a terminal).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import NoReturn

from paimon_core.catalog import Catalog
from paimon_core.cli import ddl, inspect, maintain
from paimon_core.cli.output import FORMATS, Listing, render
from paimon_core.errors import PaimonError, WarehouseNotFoundError

# Commands that may start from a warehouse that does not exist yet.
_CREATING = frozenset({"create-database"})
SYSTEM_TABLE_HELP = ("db.table, or db.table$name for a system table: snapshots, schemas, options, manifests, "
                     "files, partitions, buckets, tags, consumers, audit_log")


class _Parser(argparse.ArgumentParser):
    """Usage errors as one line on stderr (``paimon <command>: error: ...``) and exit code 2,
    like every other error of the command line (those exit with 1): no usage dump to scroll past."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _integer(minimum: int, what: str) -> Callable[[str], int]:
    """An integer argument of at least ``minimum`` (snapshot ids: 0 means before the first)."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{what} {text!r} is not an integer") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{what} {text!r} must be at least {minimum}"
                                             + (" (not negative)" if minimum == 0 else ""))
        return value
    return parse


_snapshot_id = _integer(0, "snapshot id")
_positive = _integer(1, "value")


def _partition_spec(text: str) -> dict[str, str]:
    """``k=v[,k2=v2]`` as a partition spec (values are cast to the column types by the table)."""
    spec = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        if not sep or not key.strip():
            raise argparse.ArgumentTypeError(f"partition {text!r} is not k=v[,k2=v2]")
        spec[key.strip()] = value.strip()
    return spec


def _common() -> argparse.ArgumentParser:
    """Flags every subcommand takes, so ``--warehouse`` and ``--format`` work before or after it."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--warehouse", default=argparse.SUPPRESS,
                        help="warehouse path or URL (default $PAIMON_WAREHOUSE or ./warehouse)")
    common.add_argument("--format", choices=FORMATS, default=argparse.SUPPRESS,
                        help="output: an aligned table (default), json or csv")
    return common


class _Commands:
    """Adds subcommands with the common flags and the function that runs them."""

    def __init__(self, parser: argparse.ArgumentParser) -> None:
        self._sub = parser.add_subparsers(dest="command", required=True, metavar="command")
        self._common = _common()

    def add(self, name: str, run: Callable[[Catalog, argparse.Namespace], Listing], help: str,
            *, table: bool = True, table_help: str = "database.table") -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = self._sub.add_parser(name, help=help, description=help,
                                                               parents=[self._common])
        if table:
            parser.add_argument("table", help=table_help)
        parser.set_defaults(run=run)
        return parser


def _time_travel(parser: argparse.ArgumentParser) -> None:
    travel = parser.add_mutually_exclusive_group()
    travel.add_argument("--snapshot", type=_snapshot_id, default=None, help="a snapshot id")
    travel.add_argument("--tag", default=None, help="a tag name")
    travel.add_argument("--timestamp", default=None,
                        help="the snapshot current at this time: ISO-8601, 'now', an age such as 2h or 7d, "
                             "or epoch milliseconds")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="paimon", description=__doc__.split("\n\n")[0] if __doc__ else None,
                     parents=[_common()])
    commands = _Commands(parser)
    tables = commands.add("tables", inspect.cmd_tables, "list tables with their latest snapshot", table=False)
    tables.add_argument("database", nargs="?")
    tables.add_argument("--count", action="store_true", help="count the rows of primary-key tables (reads keys)")
    commands.add("snapshots", inspect.cmd_snapshots, "list the snapshots of a table")
    files = commands.add("files", inspect.cmd_files, "list the live data files of a table (or a snapshot)")
    _time_travel(files)
    read = commands.add("read", inspect.cmd_read, "print rows of a table, a snapshot of it, or a system table",
                        table_help=SYSTEM_TABLE_HELP)
    read.add_argument("--limit", type=_positive, default=20, help="most rows printed (default 20)")
    read.add_argument("--columns", default=None, help="comma-separated projection")
    read.add_argument("--filter", default=None,
                      help="\"dt = '2024-01-01' AND id > 5 OR ...\" (=, !=, <, <=, >, >=, IN (..), IS [NOT] NULL) "
                           "or the API's DNF as JSON")
    _time_travel(read)
    changes = commands.add("changes", inspect.cmd_changes, "print what snapshots changed (+I/-U/+U/-D rows)")
    changes.add_argument("--from", dest="start", type=_snapshot_id, default=None,
                         help="changes after this snapshot (exclusive; default: from the earliest)")
    changes.add_argument("--to", dest="end", type=_snapshot_id, default=None, help="up to this snapshot (inclusive)")
    changes.add_argument("--limit", type=_positive, default=100)
    changes.add_argument("--columns", default=None, help="comma-separated projection")
    changes.add_argument("--filter", default=None, help="as for read")
    lsm = commands.add("lsm", inspect.cmd_lsm, "show each bucket's levels, sorted runs and compaction debt")
    lsm.add_argument("--partition", type=_partition_spec, action="append", help="k=v[,k2=v2]; repeatable")
    commands.add("tags", inspect.cmd_tags, "list the tags of a table")
    _add_changes(commands)
    _add_ddl(commands)
    return parser


def _add_changes(commands: _Commands) -> None:
    """Subcommands that compact, expire, clean up, tag, roll back, drop and mark partitions done."""
    compact = commands.add("compact", maintain.cmd_compact, "compact a table (one COMPACT snapshot)")
    compact.add_argument("--partition", type=_partition_spec, action="append", help="k=v[,k2=v2]; repeatable")
    compact.add_argument("--bucket", type=int, action="append", help="bucket number; repeatable")
    compact.add_argument("--full", action="store_true", help="rewrite every bucket into one sorted run")
    expire = commands.add("expire-snapshots", maintain.cmd_expire_snapshots,
                          "expire old snapshots (Paimon's retention rule); a dry run unless --execute")
    _destructive(expire, "delete what the dry run lists")
    expire.add_argument("--older-than", default=None,
                        help="keep snapshots current at or after this time (ISO-8601, 'now', 2h, 7d, epoch ms; "
                             "default: snapshot.time-retained ago)")
    expire.add_argument("--retain-min", type=_positive, default=None)
    expire.add_argument("--retain-max", type=_positive, default=None)
    expire.add_argument("--max-deletes", type=_positive, default=None, help="most snapshots expired in this run")
    orphans = commands.add("remove-orphan-files", maintain.cmd_remove_orphan_files,
                           "delete files nothing references any more; a dry run unless --execute")
    _destructive(orphans, "delete what the dry run lists")
    orphans.add_argument("--older-than", default=None,
                         help="only files older than this time (ISO-8601, 'now', 2h, 7d, epoch ms; default 1d)")
    orphans.add_argument("--force", action="store_true", help="allow a window under an hour (no writer running)")
    create_tag = commands.add("create-tag", maintain.cmd_create_tag, "tag a snapshot (default the latest)")
    create_tag.add_argument("name")
    create_tag.add_argument("--snapshot", type=_snapshot_id, default=None)
    delete_tag = commands.add("delete-tag", maintain.cmd_delete_tag, "delete a tag (asks, or --yes)")
    delete_tag.add_argument("name")
    _destructive(delete_tag, None)
    rollback = commands.add("rollback", maintain.cmd_rollback,
                            "make a snapshot, tag or time the latest state (stop writers first; asks, or --yes)")
    target = rollback.add_mutually_exclusive_group(required=True)
    target.add_argument("--snapshot", type=_snapshot_id)
    target.add_argument("--tag")
    target.add_argument("--to-timestamp", help="the snapshot current at this time (ISO-8601, 'now', 2h, 7d, epoch ms)")
    _destructive(rollback, None)
    drop = commands.add("drop-partition", maintain.cmd_drop_partition,
                        "drop partitions as one OVERWRITE snapshot (asks, or --yes)")
    drop.add_argument("--partition", type=_partition_spec, action="append", required=True,
                      help="k=v[,k2=v2] (a prefix of the partition keys); repeatable")
    _destructive(drop, None)
    done = commands.add("mark-partition-done", maintain.cmd_mark_partition_done,
                        "write each partition's _SUCCESS file for downstream readers")
    done.add_argument("--partition", type=_partition_spec, action="append", required=True,
                      help="k=v[,k2=v2] (a leading run of the partition keys); repeatable")


def _destructive(parser: argparse.ArgumentParser, execute_help: str | None) -> None:
    if execute_help is not None:
        parser.add_argument("--execute", action="store_true", help=execute_help)
        parser.add_argument("--dry-run", action="store_true", help="list only (the default)")
    parser.add_argument("--yes", "-y", action="store_true", help="do it without asking")


def _add_ddl(commands: _Commands) -> None:
    database = commands.add("create-database", ddl.cmd_create_database, "create a database", table=False)
    database.add_argument("name")
    database.add_argument("--if-not-exists", action="store_true")
    create = commands.add("create-table", ddl.cmd_create_table, "create a table from columns, keys and options")
    create.add_argument("--column", action="append", required=True,
                        help="'name TYPE' in Paimon's type names (e.g. 'id BIGINT NOT NULL'); repeatable, in order")
    create.add_argument("--primary-key", action="append", help="column(s), comma-separated or repeated")
    create.add_argument("--partition-key", action="append", help="column(s), comma-separated or repeated")
    create.add_argument("--option", action="append", help="key=value table option (e.g. bucket=4); repeatable")
    create.add_argument("--comment", default=None)
    create.add_argument("--if-not-exists", action="store_true",
                        help="succeed when the table exists with these columns (or an evolution of them)")
    alter = commands.add("alter", ddl.cmd_alter, "change a table's columns, options or comment (one new schema)")
    alter.add_argument("--add-column", action="append", help="'name TYPE' (nullable); repeatable")
    alter.add_argument("--rename-column", action="append", help="old=new; repeatable")
    alter.add_argument("--drop-column", action="append", help="column(s); repeatable")
    alter.add_argument("--column-type", action="append", help="'name TYPE': widen a column's type; repeatable")
    alter.add_argument("--set", action="append", help="key=value option; repeatable")
    alter.add_argument("--reset", action="append", help="option key to remove; repeatable")
    alter.add_argument("--comment", default=None, help="the table comment ('' removes it)")


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    warehouse = getattr(args, "warehouse", None) or os.environ.get("PAIMON_WAREHOUSE", "warehouse")
    fmt: str = getattr(args, "format", "table")
    args.format = fmt
    try:
        catalog = Catalog(warehouse)
        if args.command not in _CREATING and not catalog.exists():
            raise WarehouseNotFoundError(
                f"warehouse {catalog.warehouse} does not exist; check --warehouse (or $PAIMON_WAREHOUSE), "
                "or create a database in it first (paimon create-database NAME)")
        listing: Listing = args.run(catalog, args)
        print(render(listing, fmt))
    except (PaimonError, OSError) as exc:  # OSError: storage failures not wrapped below
        print(f"paimon: {_one_line(exc)}", file=sys.stderr)
        return 1
    return 0


def _one_line(exc: BaseException) -> str:
    """The error message on one line (some carry a multi-line detail from a library)."""
    return " ".join(str(exc).split()) or type(exc).__name__


if __name__ == "__main__":
    sys.exit(main())
