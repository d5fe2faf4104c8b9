"""Read-only commands: tables, snapshots, files, rows, changes, LSM shape, tags, system tables."""

from __future__ import annotations

import argparse
import time
from collections.abc import Iterable, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from paimon_core.catalog import Catalog
from paimon_core.cli.filters import DNF, FilterSyntaxError, parse_filter_text
from paimon_core.cli.output import BYTES, TIME, Listing
from paimon_core.cli.times import parse_time
from paimon_core.errors import OptionError
from paimon_core.table import Table


def split_name(name: str) -> tuple[str, str | None]:
    """``db.t$files`` → (``db.t``, ``files``); a plain name has no system table."""
    table, sep, system = name.partition("$")
    return table, (system if sep else None)


def time_arg(value: str | None, flag: str) -> int | None:
    """A time flag's epoch milliseconds; a typo is an error naming the flag."""
    if value is None:
        return None
    try:
        return parse_time(value, int(time.time() * 1000))
    except ValueError as exc:
        raise OptionError(f"{flag}: {exc}") from None


def columns_arg(text: str | None) -> list[str] | None:
    return [c.strip() for c in text.split(",") if c.strip()] if text else None


def filter_arg(text: str | None) -> DNF | None:
    if text is None:
        return None
    try:
        return parse_filter_text(text)
    except FilterSyntaxError as exc:
        raise OptionError(str(exc)) from None


def cmd_tables(catalog: Catalog, args: argparse.Namespace) -> Listing:
    databases = [args.database] if args.database else catalog.list_databases()
    rows = []
    for database in databases:
        for name in catalog.list_tables(database):
            table = catalog.get_table(f"{database}.{name}")
            latest = table.latest_snapshot()
            records = latest.total_record_count if latest else 0
            keyed = bool(table.schema.primary_keys)
            if not keyed:
                count: int | None = records
            elif args.count:
                count = table.read(list(table.schema.primary_keys)).num_rows if latest else 0
            else:
                count = None
            rows.append((f"{database}.{name}", "primary key" if keyed else "append",
                         ",".join(table.schema.partition_keys) or "-", table.options.bucket,
                         latest.id if latest else None, latest.time_millis if latest else None, count, records))
    footer = () if args.count or not any(r[1] == "primary key" for r in rows) else (
        "rows of primary-key tables: --count (reads their keys); records count every stored version and "
        "delete of a key until compaction merges them",)
    return Listing(("table", "kind", "partitioned by", "buckets", "snapshot", "last commit", "rows", "records"),
                   rows, {"last commit": TIME}, footer)


def cmd_snapshots(catalog: Catalog, args: argparse.Namespace) -> Listing:
    table = catalog.get_table(args.table)
    rows = [(s.id, s.commit_kind, s.time_millis, s.schema_id, s.delta_record_count, s.total_record_count,
             s.watermark, s.commit_user, s.commit_identifier) for s in table.snapshots()]
    return Listing(("id", "kind", "committed", "schema", "delta records", "total records", "watermark",
                    "commit user", "commit identifier"), rows, {"committed": TIME})


def cmd_files(catalog: Catalog, args: argparse.Namespace) -> Listing:
    table = catalog.get_table(args.table)
    snapshot = _snapshot_id(table, args)
    files = sorted(table.files(snapshot), key=lambda f: (f.partition, f.bucket, f.level, f.file_name))
    rows = [(f.partition or "-", f.bucket, f.level, f.row_count, f.file_size, f.file_name) for f in files]
    return Listing(("partition", "bucket", "level", "records", "size", "file"), rows, {"size": BYTES})


def _snapshot_id(table: Table, args: argparse.Namespace) -> int | None:
    """The snapshot ``--snapshot`` / ``--tag`` / ``--timestamp`` choose (None: the latest)."""
    if getattr(args, "tag", None) is not None:
        return table.tag(args.tag).id
    timestamp = time_arg(getattr(args, "timestamp", None), "--timestamp")
    if timestamp is not None:
        return table.snapshot_at(timestamp).id
    snapshot: int | None = getattr(args, "snapshot", None)
    return snapshot


def cmd_read(catalog: Catalog, args: argparse.Namespace) -> Listing:
    name, system = split_name(args.table)
    table = catalog.get_table(name)
    columns, dnf = columns_arg(args.columns), filter_arg(args.filter)
    if system is None:
        reader = table.to_batches(columns, dnf, snapshot_id=args.snapshot, tag=args.tag,
                                  timestamp_ms=time_arg(args.timestamp, "--timestamp"))
        return _listing(_first_rows(reader, reader.schema, args.limit))
    stream = table.system_batches(system, snapshot_id=_snapshot_id(table, args))
    schema = stream.schema
    if columns:
        missing = [c for c in columns if c not in schema.names]
        if missing:
            raise OptionError(f"--columns {missing} are not columns of {args.table}; columns are {schema.names}")
    where = dnf_expression(dnf, schema, args.table) if dnf is not None else None
    chosen = columns or schema.names
    batches = (pa.Table.from_batches([b]).filter(where) if where is not None else pa.Table.from_batches([b])
               for b in stream)
    shown = (t.select(chosen) for t in batches)
    return _listing(_first_rows(shown, pa.schema([schema.field(c) for c in chosen]), args.limit))


def _first_rows(chunks: Iterable[pa.RecordBatch | pa.Table], schema: pa.Schema, limit: int) -> pa.Table:
    """The first ``limit`` rows of a stream, reading no further than they need."""
    taken: list[pa.Table] = []
    wanted = limit
    for chunk in chunks if wanted > 0 else ():
        part = chunk.slice(0, wanted)
        taken.append(part if isinstance(part, pa.Table) else pa.Table.from_batches([part]))
        wanted -= part.num_rows
        if wanted == 0:
            break
    return pa.concat_tables(taken) if taken else schema.empty_table()


def _listing(data: pa.Table) -> Listing:
    names = data.column_names
    return Listing(names, [[row[n] for n in names] for row in data.to_pylist()])


def dnf_expression(dnf: DNF, schema: pa.Schema, what: str) -> pc.Expression:
    """A filter over an Arrow table (a system table), literals cast to the column types."""
    disjunction: pc.Expression | None = None
    for conjunction in dnf:
        expression: pc.Expression | None = None
        for column, op, value in conjunction:
            term = _term(column, op, value, schema, what)
            expression = term if expression is None else expression & term
        assert expression is not None
        disjunction = expression if disjunction is None else disjunction | expression
    assert disjunction is not None
    return disjunction


def _term(column: str, op: str, value: Any, schema: pa.Schema, what: str) -> pc.Expression:
    if column not in schema.names:
        raise OptionError(f"--filter column {column!r} is not a column of {what}; columns are {schema.names}")
    field = pc.field(column)
    if op in ("is null", "is not null"):
        return field.is_null() if op == "is null" else field.is_valid()
    target = schema.field(column).type

    def cast(v: Any) -> pa.Scalar:
        try:
            return pa.scalar(v).cast(target)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
            raise OptionError(f"--filter value {v!r} does not fit column {column!r} ({target}) of {what}: "
                              f"{exc}") from None

    if op in ("in", "not in"):
        values = pa.array([cast(v).as_py() for v in value], target)
        member = field.isin(values)
        return ~member if op == "not in" else member
    comparisons = {"=": field.__eq__, "==": field.__eq__, "!=": field.__ne__, "<": field.__lt__,
                   "<=": field.__le__, ">": field.__gt__, ">=": field.__ge__}
    if op not in comparisons:
        raise OptionError(f"--filter operator {op!r} is not one of = != < <= > >= in, not in, is null")
    result: pc.Expression = comparisons[op](cast(value))
    return result


def cmd_changes(catalog: Catalog, args: argparse.Namespace) -> Listing:
    table = catalog.get_table(args.table)
    if args.start is not None and args.end is not None and args.start > args.end:
        raise OptionError(f"changes of table {table.name}: --from {args.start} is after --to {args.end}")
    rows: list[list[object]] = []
    headers: list[str] = ["snapshot"]
    for batch in table.iter_changes(args.start, args.end, columns=columns_arg(args.columns),
                                    filter=filter_arg(args.filter)):
        headers = ["snapshot", *batch.data.column_names]
        for row in batch.data.slice(0, args.limit - len(rows)).to_pylist():
            rows.append([batch.snapshot_id, *row.values()])
        if len(rows) >= args.limit:
            break
    return Listing(headers, rows)


def cmd_lsm(catalog: Catalog, args: argparse.Namespace) -> Listing:
    state = catalog.get_table(args.table).lsm_state(args.partition or None)
    rows = state.rows()
    headers: Sequence[str] = list(rows[0]) if rows else ["partition", "bucket"]
    summary = (f"snapshot {state.snapshot_id}: {len(state.buckets)} buckets, max L0 files {state.max_level0_files}, "
               f"max sorted runs {state.max_sorted_runs} (stop trigger {state.stop_trigger}), "
               f"debt {state.debt_bytes} bytes")
    return Listing(headers, [list(r.values()) for r in rows], footer=(summary,))


def cmd_tags(catalog: Catalog, args: argparse.Namespace) -> Listing:
    tags = catalog.get_table(args.table).list_tags()
    return Listing(("tag", "snapshot", "commit kind", "committed", "records", "created"),
                   [(t.name, t.snapshot_id, t.snapshot.commit_kind, t.snapshot.time_millis,
                     t.snapshot.total_record_count, t.snapshot.extra.get("tagCreateTime")) for t in tags],
                   {"committed": TIME})
