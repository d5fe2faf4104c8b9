"""Writing what an asset returns into one partition of a Paimon table, exactly once.

Pure Paimon logic, no Dagster: the IO manager (``resources.io_manager``) decides the table, the
mode, the partition and the commit user from the asset, and this module turns the returned data
into one commit of that table.

Exactly once rests on Paimon's commit identity. Every write is commit identifier
:data:`COMMIT_IDENTIFIER` of a commit user that names one (root run, asset, partition)
(:func:`commit_user_for`); before writing, the table is asked whether that commit landed, and if
it did the data is not read at all. A step retried after its commit landed, or re-executed from
a failure, therefore finds the snapshot instead of appending the rows twice.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pac

import paimon_core as pc
from paimon_core.errors import OptionError, SchemaError, UnsupportedFeatureError
from resources import keys
from resources.landed_files import EXTRA_COLUMNS

log = logging.getLogger(__name__)

WRITE_MODES = ("append", "overwrite", "upsert")
# Each commit user writes one commit: the user already names the (root run, asset, partition).
COMMIT_IDENTIFIER = 1
ACCEPTED_TYPES = ("pyarrow Table, RecordBatch or RecordBatchReader, an iterable of RecordBatch or Table, "
                  "a pandas DataFrame, a polars DataFrame or LazyFrame")


class EmptyOverwriteError(SchemaError):
    """An overwrite with no rows of a partition that holds rows: it would empty the partition."""


@dataclass(frozen=True, slots=True)
class InputPolicy:
    """What a table takes at its ingestion boundary, the same for every source (a function's
    DataFrame, landed files, an asset's output).

    Attributes:
        extra_columns: ``refuse`` (the default) data with columns the table does not have, naming
            them (upstream schema drift is noticed), or ``ignore`` them (they are dropped).
        allow_empty_partitions: an overwrite with no rows may empty a partition that holds rows
            (a day without events is real for this table); otherwise it fails, nothing written
            (an empty export, a source that failed quietly).
    """

    extra_columns: str = "refuse"
    allow_empty_partitions: bool = False

    def __post_init__(self) -> None:
        if self.extra_columns not in EXTRA_COLUMNS:
            raise OptionError(f"extra_columns {self.extra_columns!r} is not one of {', '.join(EXTRA_COLUMNS)}")


DEFAULT_POLICY = InputPolicy()


@dataclass(frozen=True, slots=True)
class PaimonWrite:
    """What was committed to a table: a receipt, never the data itself.

    Attributes:
        table: the table's ``db.table`` name.
        snapshot_id: the snapshot of the commit (None when nothing was committed: an empty append).
            For a reused commit, the newest snapshot of its commit user, which is the compaction
            that followed the write when the writer compacts.
        rows_written: rows written by this call (0 when the commit was reused).
        partition: the Paimon partition written (``{}`` for a whole table).
        mode: ``append``, ``overwrite`` or ``upsert`` (empty when an op wrote the table itself).
        reused: the commit had already landed (a retry) and was found instead of written again.
        commits: snapshots this call created (the writes, and compactions after them).
        kinds: rows written per row kind (``+I``, ``-U``, ``+U``, ``-D``) when the table takes
            its row kinds from a ``rowkind.field`` column.
    """

    table: str
    snapshot_id: int | None
    rows_written: int
    partition: Mapping[str, str] = field(default_factory=dict)
    mode: str = ""
    reused: bool = False
    commits: int = 0
    kinds: Mapping[str, int] = field(default_factory=dict)


def commit_user_for(root_run_id: str, asset_key: str, partition_key: str | None) -> str:
    """``dagster:<root run id>:<asset path joined by '/'>:<partition key or '-'>``.

    The root run id, not the run id: a retried step runs in the same run, and a re-execution
    from failure is a new run with the same root, so both find the commit that already landed.
    The asset and the partition are part of the user because ``find_commit`` scans back only to
    a user's newest snapshot: two partitions (or assets) sharing a user would hide each other's
    commits, and the second one would look already written.
    """
    return f"dagster:{root_run_id}:{asset_key}:{partition_key if partition_key is not None else '-'}"


def snapshot_properties(*, run_id: str, asset_key: str, partition_key: str | None,
                        mode: str) -> dict[str, str]:
    """The properties stored in the snapshot, so a snapshot tells which run and asset wrote it."""
    properties = {keys.RUN_ID_PROPERTY: run_id, keys.ASSET_KEY_PROPERTY: asset_key, keys.WRITE_MODE_PROPERTY: mode}
    if partition_key is not None:
        properties[keys.PARTITION_PROPERTY] = partition_key
    return properties


# ---- input -------------------------------------------------------------------------------


def check_writable(data: Any, *, table: str) -> None:
    """Raise unless :func:`as_batches` accepts ``data``; looks at its type only, reads nothing.

    Raises:
        SchemaError: naming the table, the type received and what is accepted.
    """
    if _kind(data) is None:
        raise SchemaError(f"cannot write a {_type_name(data)} to table {table}: pass a {ACCEPTED_TYPES}")


def _kind(data: Any) -> str | None:
    if isinstance(data, pa.Table | pa.RecordBatch | pa.RecordBatchReader):
        return "arrow"
    module, name = type(data).__module__, type(data).__name__
    if module.startswith("pandas") and name == "DataFrame":
        return "pandas"
    if module.startswith("polars") and name in ("DataFrame", "LazyFrame"):
        return "polars"
    if hasattr(data, "__arrow_c_stream__"):
        return "stream"
    if isinstance(data, Iterable) and not isinstance(data, str | bytes | bytearray | Mapping):
        return "iterable"
    return None


def as_batches(data: Any, *, table: str) -> Iterator[pa.RecordBatch]:
    """``data`` as a stream of record batches, without reading it yet.

    The type is checked now; the data is read only as the iterator is consumed, and an
    iterator is never gathered into one table (memory stays bounded by the writer's buffer).

    Raises:
        SchemaError: ``data`` is of a type that cannot be written (named with what is accepted).
    """
    kind = _kind(data)
    if kind is None:
        check_writable(data, table=table)  # raises
    if isinstance(data, pa.Table):
        return iter(data.to_batches())
    if isinstance(data, pa.RecordBatch):
        return iter((data,))
    if isinstance(data, pa.RecordBatchReader):
        return iter(data)
    if kind == "pandas":
        return _pandas_batches(data)
    if kind == "polars":
        return _polars_batches(data)
    if kind == "stream":
        return _stream_batches(data)
    return _iterable_batches(data, table=table)


def _stream_batches(data: Any) -> Iterator[pa.RecordBatch]:
    # Exported only when first read: a reused commit leaves the stream untouched.
    yield from pa.RecordBatchReader.from_stream(data)


def _pandas_batches(frame: Any) -> Iterator[pa.RecordBatch]:
    yield from pa.Table.from_pandas(frame, preserve_index=False).to_batches()


def _polars_batches(frame: Any) -> Iterator[pa.RecordBatch]:
    # A LazyFrame is collected here: polars holds it in memory either way once it is computed.
    collected = frame.collect() if type(frame).__name__ == "LazyFrame" else frame
    yield from collected.to_arrow().to_batches()


def _iterable_batches(items: Iterable[Any], *, table: str) -> Iterator[pa.RecordBatch]:
    for position, item in enumerate(items):
        if isinstance(item, pa.RecordBatch):
            yield item
        elif isinstance(item, pa.Table):
            yield from item.to_batches()
        else:
            raise SchemaError(f"cannot write item {position} ({_type_name(item)}) of an iterable to table "
                              f"{table}: an iterable must yield pyarrow RecordBatch or Table")


def _type_name(data: Any) -> str:
    kind = type(data)
    return kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"


def fit_columns(batch: pa.RecordBatch, table: pc.Table, policy: InputPolicy) -> pa.RecordBatch:
    """``batch`` without columns the table does not have, when the policy ignores them.

    Raises:
        SchemaError: the batch has such columns and the policy refuses them (naming them).
    """
    names = table.schema.field_names
    extra = [name for name in batch.schema.names if name not in names]
    if not extra:
        return batch
    if policy.extra_columns == "ignore":
        return batch.select([name for name in batch.schema.names if name in names])
    raise SchemaError(f"table {table.name}: the data has column(s) {extra} that the table does not have (its "
                      f"columns: {', '.join(names)}); add them to the table, fix the source, or declare the "
                      "table's ingestion with extra_columns: ignore to drop them")


def zone_notes(schema: pa.Schema, table: pc.Table) -> list[str]:
    """What a write does to zoned timestamps (pure): a value with a time zone going into a
    ``TIMESTAMP`` column (no zone) is stored as its UTC wall time, the declared rule; a line per
    such column, to say it where the data comes in."""
    arrow = table.schema.arrow_schema()
    notes = []
    for given in schema:
        if not (pa.types.is_timestamp(given.type) and given.type.tz) or given.name not in arrow.names:
            continue
        target = arrow.field(given.name).type
        if pa.types.is_timestamp(target) and target.tz is None:
            notes.append(f"table {table.name}: column {given.name}: timestamps with time zone {given.type.tz} are "
                         "stored as their UTC wall time (the column is a TIMESTAMP, without zone; declare it "
                         "TIMESTAMP_LTZ to store instants, or convert to the wall time you mean before)")
    return notes


def partition_rows(table: pc.Table, partition: Mapping[str, str]) -> int:
    """Rows the latest snapshot's files hold in ``partition`` (the whole table for ``{}``), from
    the manifests alone (for primary-key tables: stored versions, deletes included)."""
    spec = [(column, "=", value) for column, value in partition.items()]
    return sum(split.row_count for split in table.plan(filter=spec or None))


# ---- partition values --------------------------------------------------------------------


def with_partition(batch: pa.RecordBatch, table: pc.Table, partition: Mapping[str, str]) -> pa.RecordBatch:
    """``batch`` with the partition columns it lacks filled from ``partition``.

    Raises:
        SchemaError: a row carries another value of a partition column (or null) than the
            partition being written; the message names the column, the value and the partition.
    """
    if not partition:
        return batch
    schema = table.arrow_schema
    for column, value in partition.items():
        index = batch.schema.get_field_index(column)
        if index < 0:
            filled = pa.repeat(_partition_scalar(value, schema.field(column).type, table, column), batch.num_rows)
            batch = batch.append_column(pa.field(column, filled.type), filled)
            continue
        values = batch.column(index)
        expected = _partition_scalar(value, values.type, table, column)
        outside = pac.invert(pac.fill_null(pac.equal(values, expected), False))
        if pac.any(outside).as_py():
            offending = values.filter(outside)[0].as_py()
            raise SchemaError(f"table {table.name}: a row has {column}={offending!r}, outside the partition "
                              f"{dict(partition)} being written; drop the column to have it filled, or return "
                              "only that partition's rows")
    return batch


def _partition_scalar(value: str, arrow_type: pa.DataType, table: pc.Table, column: str) -> pa.Scalar:
    try:
        return pa.scalar(value).cast(arrow_type)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
        raise SchemaError(f"table {table.name}: partition value {value!r} does not fit column {column!r} "
                          f"of type {arrow_type}: {exc}") from None


# ---- the write ---------------------------------------------------------------------------


def check_write(table: pc.Table, mode: str, partition: Mapping[str, str]) -> pc.TableSchema:
    """Refuse a mode the table cannot take or a partition of columns it does not partition by."""
    if mode not in WRITE_MODES:
        raise OptionError(f"table {table.name}: write mode {mode!r} is not one of {', '.join(WRITE_MODES)}")
    schema = table.schema
    if mode == "upsert" and not schema.primary_keys:
        raise UnsupportedFeatureError(f"table {table.name} has no primary key, so it cannot be upserted into; "
                                      "use append or overwrite")
    unknown = [key for key in partition if key not in schema.partition_keys]
    if unknown:
        raise SchemaError(f"table {table.name}: {unknown} of partition {dict(partition)} are not partition "
                          f"keys {list(schema.partition_keys)}")
    return schema


def write_partition(table: pc.Table, data: Any, *, mode: str, partition: Mapping[str, str],
                    commit_user: str, properties: Mapping[str, str] | None = None,
                    commit_every_rows: int = 0, policy: InputPolicy = DEFAULT_POLICY,
                    report: Callable[[str], None] | None = None) -> PaimonWrite:
    """Write ``data`` into ``partition`` of ``table``, unless that commit landed.

    Args:
        data: anything :func:`as_batches` accepts; streamed batch by batch into the writer.
        mode: ``append`` adds the rows (an APPEND snapshot); ``overwrite`` replaces exactly
            ``partition`` (the whole table when ``partition`` is empty); with no rows it empties
            the partition only when ``policy`` allows it or the partition holds no rows;
            ``upsert`` writes the rows of a primary-key table with the row kind of its
            ``rowkind.field`` column, else +I.
        partition: the Paimon partition values being written (``{}`` for the whole table).
            Rows lacking a partition column get it from here.
        commit_user: unique per (root run, asset, partition): see :func:`commit_user_for`.
        properties: snapshot properties; ``dagster.write_mode`` is added.
        commit_every_rows: commit after every that many rows (identifiers 1, 2, ...), as a
            streaming sink commits at each checkpoint; 0 writes one commit. A call retried after
            some commits landed skips their rows and goes on with the next one. Only for
            ``append`` and ``upsert``: an overwrite must replace the partition in one commit.
        policy: extra columns and empty overwrites (:class:`InputPolicy`).
        report: told, once per column, of zoned timestamps stored as UTC wall time
            (:func:`zone_notes`), besides this module's log.

    Raises:
        SchemaError: the data is of an unsupported type, does not fit the table (columns the
            table does not have, unless the policy ignores them), or has rows outside
            ``partition``; nothing is committed (in chunked writes: nothing more).
        EmptyOverwriteError: an overwrite without rows of a partition holding rows, which the
            policy does not allow; nothing is committed.
        UnsupportedFeatureError: ``upsert`` into a table without a primary key.
        OptionError: an unknown ``mode``, or chunks of an overwrite.
    """
    if commit_every_rows < 0 or (commit_every_rows and mode == "overwrite"):
        raise OptionError(f"table {table.name}: commit_every_rows {commit_every_rows} needs append or upsert "
                          "(an overwrite replaces the partition in one commit) and a value >= 0")
    schema = check_write(table, mode, partition)
    batches = as_batches(data, table=table.name)  # checks the type; reads nothing yet
    done, landed, final = landed_commits(table, commit_user)
    if final:
        log.info("%s: commit of %s already landed as snapshot %s; not writing it again",
                 table.name, commit_user, landed)
        return PaimonWrite(table=table.name, snapshot_id=landed, rows_written=0, partition=dict(partition),
                           mode=mode, reused=True, commits=0)
    overwrite: bool | dict[str, str] = dict(partition) if mode == "overwrite" else False
    kind_column = table.options.rowkind_field if schema.primary_keys else None
    kinds: dict[str, int] = {}
    noted: set[str] = set()
    pieces = ((chunk, piece) for chunk, piece in chunked(batches, commit_every_rows) if chunk >= done)
    snapshot_id, rows, commits = landed, 0, 0
    current = next(pieces, None)
    chunk = done
    while True:
        with table.new_write(commit_user=commit_user, commit_identifier=COMMIT_IDENTIFIER + chunk,
                             overwrite=overwrite,
                             properties={**(properties or {}), keys.WRITE_MODE_PROPERTY: mode}) as writer:
            while current is not None and current[0] == chunk:
                batch = with_partition(fit_columns(current[1], table, policy), table, partition)
                for note in zone_notes(batch.schema, table):
                    if note not in noted:
                        noted.add(note)
                        log.warning(note)
                        if report is not None:
                            report(note)
                if kind_column and kind_column in batch.schema.names:
                    count_kinds(batch.column(kind_column), kinds)
                writer.write(batch)
                current = next(pieces, None)
            last = current is None
            if overwrite is not False and writer.rows_written == 0 and not policy.allow_empty_partitions:
                refuse_empty_overwrite(table, partition)
            progress = {CHUNK_PROPERTY: str(chunk), FINAL_PROPERTY: str(last).lower()} if commit_every_rows else None
            committed = writer.commit(properties=progress)
            rows += writer.rows_written
            compacted = writer.compaction is not None and writer.compaction.snapshot_id is not None
        if committed is not None:
            snapshot_id = committed
            commits += 1 + int(compacted)
        if last:
            break
        chunk = current[0] if current is not None else chunk + 1
    log.info("%s: %s of %d rows into %s in %d commit(s), the last as snapshot %s", table.name, mode, rows,
             dict(partition) or "the table", commits, snapshot_id)
    return PaimonWrite(table=table.name, snapshot_id=snapshot_id, rows_written=rows, partition=dict(partition),
                       mode=mode, reused=done > 0, commits=commits, kinds=kinds)


def refuse_empty_overwrite(table: pc.Table, partition: Mapping[str, str]) -> None:
    """Raise EmptyOverwriteError when ``partition`` holds rows (an empty one stays empty: fine)."""
    held = partition_rows(table, partition)
    if held:
        where = f"partition {dict(partition)}" if partition else "the whole table"
        raise EmptyOverwriteError(
            f"table {table.name}: the overwrite of {where} has no rows, but it holds {held} row(s) now, so the "
            "write would empty it; nothing was written. If the source really has no rows for it, declare the "
            "table's ingestion with allow_empty_partitions: true; otherwise fix the source and run it again")


CHUNK_PROPERTY = "dagster.chunk"
FINAL_PROPERTY = "dagster.final_chunk"


def landed_commits(table: pc.Table, commit_user: str) -> tuple[int, int | None, bool]:
    """How many commits of ``commit_user`` landed, the newest one's snapshot, and whether it was
    the final one of its write.

    The table is asked for the user's newest commit, found in its snapshots or, once they
    expired, in its commit ledger (so a re-execution long after still finds what its root run
    wrote). A COMPACT that followed a write shares its identifier, so the APPEND (or OVERWRITE)
    before it carries the properties.
    """
    newest = table.find_commit_record(commit_user, COMMIT_IDENTIFIER)
    if newest is None:
        return 0, None, False
    data = newest
    if newest.commit_kind == "COMPACT":
        data = table.find_commit_record(commit_user, newest.commit_identifier, kinds=DATA_KINDS) or newest
    final = data.properties.get(FINAL_PROPERTY, "true") == "true"
    return newest.commit_identifier - COMMIT_IDENTIFIER + 1, newest.snapshot_id, final


DATA_KINDS = ("APPEND", "OVERWRITE")


def chunked(batches: Iterable[pa.RecordBatch], rows_per_chunk: int) -> Iterator[tuple[int, pa.RecordBatch]]:
    """``(chunk, slice)`` pairs: the stream cut into chunks of exactly ``rows_per_chunk`` rows.

    Slices never straddle a chunk boundary; 0 keeps the whole stream in chunk 0. The cut
    depends only on row positions, so re-reading the same stream gives the same chunks.
    """
    position = 0
    for batch in batches:
        offset = 0
        while offset < batch.num_rows:
            chunk = position // rows_per_chunk if rows_per_chunk else 0
            room = (chunk + 1) * rows_per_chunk - position if rows_per_chunk else batch.num_rows
            piece = batch.slice(offset, min(room, batch.num_rows - offset))
            yield chunk, piece
            offset += piece.num_rows
            position += piece.num_rows
        if batch.num_rows == 0 and not rows_per_chunk:
            yield 0, batch


def count_kinds(column: pa.Array | pa.ChunkedArray, counts: dict[str, int]) -> None:
    """Add up a row-kind column's values (one Arrow kernel)."""
    for entry in pac.value_counts(column).to_pylist():
        if entry["values"] is not None:
            counts[entry["values"]] = counts.get(entry["values"], 0) + entry["counts"]
